/*
 * gate.c - whether the sweeper's rules may act in this tick (issue 39, item 3; docs/design.md §5,
 * "The sweeper waits for the re-read"). Every rule decides by the clock against stored heartbeats
 * and start times; after the database went back in time those are as old as the loss is far,
 * while the consuming services are still reading again what the ledger lost (a chunk answered
 * ACCEPTED not applied yet, a run NiFi saw reach SUCCESS still EXTRACTING). Acting then would time
 * out runs whose answers were ACCEPTED. So the rules wait:
 *
 *   - within recovery.start_grace after this sweeper's start, after a new database connection,
 *     and after a tick that found the ledger no longer holding this sweeper's own last tick (its
 *     row in nifi_ops.sweeper_instance carries the token of the last tick it committed; a pooler
 *     that reconnected to a promoted standby behind the same connection is found that way): the
 *     consuming services need that long to find the loss themselves (their merge at start, their
 *     position check every loop.position_check_interval) and record it;
 *   - while a detected loss is not re-read: a nifi_ops.position_rewind row of the last
 *     recovery.reread_window whose consumer group's position (nifi_ops.consumer_position) is
 *     still below the end of the range it must read again.
 *
 * Waiting costs nothing but time against thresholds of minutes or hours; the gauges go on. Logged
 * once each time the reason changes (sweeper_waits, sweeper_resumes) and shown as the gauge
 * loadledger_sweeper_waiting.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uuid/uuid.h>

#include "ll/clock.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "sweeper.h"

/* This sweeper's tick token: written (upsert), and the one the row held before returned. */
static const ll_stmt ST_TICK_TOKEN = {
    "sweep_tick_token",
    "WITH old AS (SELECT tick_token FROM nifi_ops.sweeper_instance WHERE instance_id = $1 FOR UPDATE),"
    " up AS (INSERT INTO nifi_ops.sweeper_instance (instance_id, tick_token, ticked_at)"
    " VALUES ($1, $2::uuid, clock_timestamp()) ON CONFLICT (instance_id) DO UPDATE"
    " SET tick_token = EXCLUDED.tick_token, ticked_at = EXCLUDED.ticked_at)"
    " SELECT (SELECT tick_token::text FROM old)",
    2};

/* The detected losses of the window not yet re-read: their count. Bounded by the window, read by
 * ix_position_rewind_detected: now() (the tick's start), not clock_timestamp(), whose volatility
 * keeps the planner off the index (EXPLAIN on 20,000 rows of history: a sequential scan). The
 * positions are one row per group and Kafka partition, not history. */
static const ll_stmt ST_REREAD_PENDING = {
    "sweep_reread_pending",
    "SELECT count(*) FROM nifi_ops.position_rewind r JOIN nifi_ops.consumer_position p"
    " ON p.consumer_group = r.consumer_group AND p.topic = r.topic AND p.kafka_partition = r.kafka_partition"
    " WHERE r.detected_at > now() - $1::interval AND p.next_offset < r.to_offset",
    1};

struct sweep_gate {
    char instance[256];
    int64_t grace_ms, window_ms;
    int64_t grace_until;    /* monotonic ms */
    uint64_t connects_seen; /* db->connects at the last tick */
    char expect[37];        /* the token of this sweeper's last committed tick; "" none yet */
    char pending[37];       /* the token written by the tick in progress */
    char reason[256];       /* why the rules wait now; "" they act */
};

sweep_gate *sweep_gate_new(const char *instance_id, int64_t grace_ms, int64_t window_ms)
{
    sweep_gate *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    snprintf(g->instance, sizeof g->instance, "%s", instance_id);
    g->grace_ms = grace_ms;
    g->window_ms = window_ms;
    g->grace_until = ll_now_ms() + grace_ms;
    return g;
}

void sweep_gate_free(sweep_gate *g)
{
    free(g);
}

/* Sets why the rules wait ("" they act), logging and showing a change. */
static void set_reason(sweep_gate *g, const char *reason)
{
    if (strcmp(g->reason, reason) == 0)
        return;
    if (reason[0])
        ll_log(LL_WARN, NULL, "sweeper_waits", "the sweeper's rules wait: %s", reason);
    else
        ll_log(LL_INFO, NULL, "sweeper_resumes", "the sweeper's rules act again");
    snprintf(g->reason, sizeof g->reason, "%s", reason);
    ll_obs_sweeper_waiting(reason[0] != '\0');
}

/* Restarts the grace: the rules wait recovery.start_grace from now. */
static void restart_grace(sweep_gate *g)
{
    g->grace_until = ll_now_ms() + g->grace_ms;
}

int sweep_gate_open(sweep_gate *g, ll_db *db)
{
    if (db->connects != g->connects_seen) {
        if (g->connects_seen != 0)
            restart_grace(g); /* a new connection, maybe to another server */
        g->connects_seen = db->connects;
    }
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, g->pending);
    const char *p[2] = {g->instance, g->pending};
    PGresult *r = ll_db_exec(db, &ST_TICK_TOKEN, p);
    if (!r)
        return -1;
    const char *old = PQgetisnull(r, 0, 0) ? "" : PQgetvalue(r, 0, 0);
    if (g->expect[0] && strcmp(old, g->expect) != 0) {
        ll_log(LL_ERROR, NULL, "sweeper_ledger_gone_back",
               "the ledger does not hold this sweeper's last tick (row %s: %s, expected %s): the database "
               "went back "
               "in time (a failover, a restore), or another sweeper runs with service.instance_id %s",
               g->instance, old[0] ? old : "none", g->expect, g->instance);
        restart_grace(g);
    }
    PQclear(r);
    char why[256] = "";
    int64_t left = g->grace_until - ll_now_ms();
    if (left > 0) {
        snprintf(
            why, sizeof why,
            "recovery.start_grace after a start, a new database connection or a ledger that went back in time"
            " (%lld ms left): the consuming services find and re-read what the ledger lost first",
            (long long)left);
    } else {
        char window[64];
        sweep_interval_text(g->window_ms, window, sizeof window);
        const char *q[1] = {window};
        if (!(r = ll_db_exec(db, &ST_REREAD_PENDING, q)))
            return -1;
        long long pending = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        PQclear(r);
        if (pending > 0)
            snprintf(why, sizeof why,
                     "%lld detected database losses not yet re-read by their consumer groups"
                     " (nifi_ops.position_rewind)",
                     pending);
    }
    set_reason(g, why);
    return why[0] ? 0 : 1;
}

void sweep_gate_committed(sweep_gate *g)
{
    if (g->pending[0])
        memcpy(g->expect, g->pending, sizeof g->expect);
    g->pending[0] = '\0';
}

void sweep_gate_undone(sweep_gate *g)
{
    g->pending[0] = '\0';
}
