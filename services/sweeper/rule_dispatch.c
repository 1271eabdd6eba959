/*
 * rule_dispatch.c - rule 3, unacknowledged dispatches (docs/contract.md §7.3): a SENT row without ACK
 * after dispatch.ack_timeout whose run still waits for it (VALIDATE_RUN: run
 * EXTRACTED_VALIDATED; REISSUE_PARTITION: run EXTRACTING and the partition still RETRY) goes back
 * to PENDING, or DEAD once dispatch.max_attempts deliveries were made (ll_dispatch_ack_timeout
 * decides, row by row; the statuses go to SQL as values). Closing the gap of §13, a
 * SENT row whose run has ended (it can never be acknowledged) is marked DEAD as abandoned, with
 * an INFO event, instead of staying SENT forever.
 */
#include <stdio.h>
#include <string.h>

#include "ll/ledger.h"
#include "ll/pgarray.h"
#include "ll/rules.h"
#include "ll/status_sql.h"
#include "sweeper.h"

/* The SENT rows due for rule 3 whose run still waits for them, locked ($1 dispatch.ack_timeout). */
static const ll_stmt ST_DUE = {
    "sweep_requeue_due",
    "SELECT d.dispatch_id::text, d.attempt_count FROM nifi_ops.load_dispatch d"
    "   JOIN nifi_ops.load_run r ON r.run_id = d.run_id"
    "   LEFT JOIN nifi_ops.load_partition p ON p.run_id = d.run_id AND p.partition_id = d.partition_id"
    "   WHERE d.status = 'SENT' AND d.sent_at < clock_timestamp() - $1::interval"
    "   AND ((d.dispatch_type = 'VALIDATE_RUN' AND r.status = 'EXTRACTED_VALIDATED')"
    "     OR (d.dispatch_type = 'REISSUE_PARTITION' AND r.status = 'EXTRACTING' AND p.status = 'RETRY'))"
    "   FOR UPDATE OF d SKIP LOCKED",
    1};

/* Each due row to the status ll_dispatch_ack_timeout gave it ($1 ids, $2 statuses: PENDING or DEAD). */
static const ll_stmt ST_REQUEUE = {
    "sweep_requeue",
    "UPDATE nifi_ops.load_dispatch d SET status = v.status, next_attempt_at = clock_timestamp(),"
    "   last_error = CASE WHEN v.status = 'DEAD'"
    "     THEN 'no ack after ' || d.attempt_count || ' attempts (ack timeout)'"
    "     ELSE 'ack timeout, requeued by sweeper' END"
    " FROM unnest($1::uuid[], $2::text[]) AS v(id, status) WHERE d.dispatch_id = v.id"
    " RETURNING d.dispatch_id::text, d.run_id::text, d.partition_id, d.dispatch_type, d.status,"
    "   d.attempt_count, d.last_error",
    2};

/* Runs past the point where anyone would acknowledge: every failure, SUCCESS. */
static const ll_stmt ST_ABANDON = {
    "sweep_abandon",
    "WITH gone AS (SELECT d.dispatch_id FROM nifi_ops.load_dispatch d"
    "   JOIN nifi_ops.load_run r ON r.run_id = d.run_id"
    "   WHERE d.status = 'SENT' AND d.sent_at < clock_timestamp() - $1::interval"
    "   AND r.status IN (" LL_SQL_RUN_TERMINAL ")"
    "   FOR UPDATE OF d SKIP LOCKED)"
    " UPDATE nifi_ops.load_dispatch d SET status = 'DEAD',"
    "   last_error = 'abandoned: the run ended before the command was acknowledged'"
    " FROM gone WHERE d.dispatch_id = gone.dispatch_id"
    " RETURNING d.dispatch_id::text, d.run_id::text, d.partition_id, d.dispatch_type",
    1};

static const ll_stmt ST_NOTIFY = {"sweep_notify_requeue", "SELECT pg_notify('load_dispatch', 'sweeper')", 0};

static ll_db_rc dead_event(ll_db *db, PGresult *r, int i, const char *name, const char *level)
{
    json_t *details =
        json_pack("{s:s,s:s,s:n,s:I}", "dispatchId", PQgetvalue(r, i, 0), "type", PQgetvalue(r, i, 3),
                  "httpStatus", "attempt", (json_int_t)(PQnfields(r) > 5 ? ll_db_ll(r, i, 5, 0) : 0));
    ll_event ev = {.name = name,
                   .level = level,
                   .run_id = PQgetvalue(r, i, 1),
                   .partition_id = ll_db_text(r, i, 2),
                   .chunk_index = -1,
                   .row_count = -1,
                   .error_code = name,
                   .message = PQnfields(r) > 6
                                  ? ll_db_text(r, i, 6)
                                  : "abandoned: the run ended before the command was acknowledged",
                   .details = details};
    ll_db_rc rc = ll_event_insert(db, &ev);
    json_decref(details);
    return rc;
}

/* One DISPATCH_REQUEUED per run with at least one row requeued. */
static ll_db_rc requeue_events(ll_db *db, PGresult *r)
{
    for (int i = 0; i < PQntuples(r); i++) {
        if (strcmp(PQgetvalue(r, i, 4), "PENDING") != 0)
            continue;
        bool first = true;
        for (int j = 0; j < i; j++)
            if (strcmp(PQgetvalue(r, j, 4), "PENDING") == 0 &&
                strcmp(PQgetvalue(r, j, 1), PQgetvalue(r, i, 1)) == 0)
                first = false;
        if (!first)
            continue;
        ll_event ev = {.name = "DISPATCH_REQUEUED",
                       .level = "WARN",
                       .run_id = PQgetvalue(r, i, 1),
                       .chunk_index = -1,
                       .row_count = -1,
                       .message = "ack timeout, requeued by sweeper"};
        if (ll_event_insert(db, &ev) != LL_DB_OK)
            return LL_DB_ERROR;
    }
    return LL_DB_OK;
}

/* Locks the due rows and moves each to PENDING or DEAD as ll_dispatch_ack_timeout decides (the
 * attempts used up: DEAD). The moved rows (ST_REQUEUE's columns; no rows when nothing was due),
 * or NULL on a failed statement. */
static PGresult *requeue(ll_db *db, const sweep_settings *s, const char *ack)
{
    const char *p[1] = {ack};
    PGresult *due = ll_db_exec(db, &ST_DUE, p);
    if (!due || PQntuples(due) == 0)
        return due;
    ll_pgarray ids = {0}, statuses = {0};
    for (int i = 0; i < PQntuples(due); i++) {
        int attempts = (int)ll_db_ll(due, i, 1, 0);
        bool dead = ll_dispatch_ack_timeout(attempts, s->dispatch_max_attempts) == LL_SEND_DEAD;
        ll_pgarray_add(&ids, PQgetvalue(due, i, 0));
        ll_pgarray_add(&statuses, dead ? "DEAD" : "PENDING");
    }
    PQclear(due);
    const char *q[2] = {ll_pgarray_text(&ids), ll_pgarray_text(&statuses)};
    PGresult *r = ll_db_exec(db, &ST_REQUEUE, q);
    ll_pgarray_free(&ids);
    ll_pgarray_free(&statuses);
    return r;
}

ll_db_rc rule_unacked_dispatches(ll_db *db, const sweep_settings *s, sweep_counts *c)
{
    char ack[48];
    sweep_interval_text(s->ack_timeout_ms, ack, sizeof ack);
    const char *p[1] = {ack};
    PGresult *r = requeue(db, s, ack);
    if (!r)
        return LL_DB_ERROR;
    ll_db_rc rc = requeue_events(db, r);
    long requeued = 0;
    for (int i = 0; i < PQntuples(r) && rc == LL_DB_OK; i++) {
        if (strcmp(PQgetvalue(r, i, 4), "DEAD") == 0) {
            rc = dead_event(db, r, i, "DISPATCH_DEAD", "ERROR");
            c->dead_dispatch++;
        } else {
            requeued++;
        }
    }
    c->requeue_dispatch += requeued;
    PQclear(r);
    if (rc == LL_DB_OK && requeued > 0)
        rc = ll_db_exec_discard(db, &ST_NOTIFY, NULL);
    if (rc != LL_DB_OK || !(r = ll_db_exec(db, &ST_ABANDON, p)))
        return LL_DB_ERROR;
    for (int i = 0; i < PQntuples(r) && rc == LL_DB_OK; i++, c->abandon_dispatch++)
        rc = dead_event(db, r, i, "DISPATCH_ABANDONED", "INFO");
    PQclear(r);
    return rc;
}
