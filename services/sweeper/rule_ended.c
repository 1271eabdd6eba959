/*
 * rule_ended.c - the unfinished partitions of a run that ended (docs/contract.md §7.6; issue 42
 * item 4). A run that fails because one partition failed leaves its siblings as they are (§3.2,
 * §5.5 step 7: a worker still running may report on): only the sweeper's timeout path rewrites
 * unfinished partitions. This rule is that path for the runs that ended FAILED_* (or TIMED_OUT):
 * once neither the partition nor the run moved for recovery.stale (ll_ended_partition_due), every
 * PENDING, RUNNING or RETRY partition of the run becomes TIMED_OUT as §3.2's sweeper row says
 * (error code RUN_ENDED, completed now, the claim token kept), the run row unchanged, one
 * PARTITIONS_TIMED_OUT event (INFO) per run. Without it such partitions stayed RUNNING for ever,
 * in the recovery index that rule 1 reads every tick.
 *
 * Bounded: the runs are found by two index reads of at most ENDED_BATCH rows each, the rest the
 * next tick: the stale RUNNING/RETRY partitions through the partial ix_load_partition_active
 * (status) WHERE status IN ('RUNNING', 'RETRY') (0020; the heartbeat from those rows), and the runs
 * that ended between recovery.stale and recovery.stale + recovery.run_timeout ago through
 * ix_load_run_completed (a PENDING partition is not in the recovery index; its run is looked at
 * during that window): a range of that index alone, the status checked on its rows (the subquery,
 * kept one by OFFSET 0, takes no qualifier, so the planner cannot AND the range with an index of
 * every failed run ever, as ix_load_run_status_heartbeat was before 0020: 2-3 ms
 * a tick at a year's history, growing with it). Each run is locked skip-locked (run ->
 * partition order, §2.8); its partitions through the primary key.
 */
#include <stdio.h>
#include <string.h>

#include "ll/ledger.h"
#include "ll/pgarray.h"
#include "ll/rules.h"
#include "ll/status_sql.h"
#include "sweeper.h"

/* At most this many rows from each index read a tick: stale partitions (their runs) and ended runs
 * (a text: it is part of ST_ENDED_RUNS). */
#define ENDED_BATCH "100"

/* The runs ended FAILED_* or TIMED_OUT with an unfinished partition to look at, locked ($1
 * recovery.stale, $2 recovery.run_timeout; at most ENDED_BATCH from each read): those with a stale
 * RUNNING/RETRY partition (ix_load_partition_active, then the run by its key), and those that
 * ended in the window with a PENDING partition (ix_load_run_completed, then ix_load_partition_status).
 * The bounds are computed once (t, an InitPlan): a clock_timestamp() in the WHERE clause is volatile
 * and would be a filter over the whole index instead of its range. */
static const ll_stmt ST_ENDED_RUNS = {
    "sweep_ended_runs",
    "WITH t AS MATERIALIZED (SELECT clock_timestamp() - $1::interval AS quiet_before,"
    "   clock_timestamp() - $1::interval - $2::interval AS window_from),"
    " cand AS MATERIALIZED ("
    "  (SELECT p.run_id FROM nifi_ops.load_partition p JOIN nifi_ops.load_run e ON e.run_id = p.run_id"
    "    WHERE p.status IN ('RUNNING', 'RETRY') AND p.heartbeat_at < (SELECT quiet_before FROM t)"
    "    AND e.status IN (" LL_SQL_RUN_FAILED ") LIMIT " ENDED_BATCH ")"
    "  UNION"
    "  (SELECT e.run_id FROM (SELECT w.run_id, w.status FROM nifi_ops.load_run w"
    "    WHERE w.completed_at < (SELECT quiet_before FROM t) AND w.completed_at >= (SELECT window_from FROM "
    "t)"
    "    OFFSET 0) e"
    "    WHERE e.status IN (" LL_SQL_RUN_FAILED ") AND EXISTS (SELECT 1 FROM nifi_ops.load_partition q"
    "      WHERE q.run_id = e.run_id AND q.status = 'PENDING') LIMIT " ENDED_BATCH "))"
    " SELECT r.run_id::text, r.status FROM nifi_ops.load_run r JOIN cand ON cand.run_id = r.run_id"
    " WHERE r.status IN (" LL_SQL_RUN_FAILED
    ") ORDER BY r.completed_at, r.run_id FOR UPDATE OF r SKIP LOCKED",
    2};

/* The unfinished partitions of a locked run, locked, with what ll_ended_partition_due reads:
 * partition_id, status, ms since its heartbeat (null when none), ms since the run ended. */
static const ll_stmt ST_ENDED_PARTITIONS = {
    "sweep_ended_partitions",
    "SELECT p.partition_id, p.status,"
    " (extract(epoch FROM clock_timestamp() - p.heartbeat_at) * 1000)::bigint,"
    " (extract(epoch FROM clock_timestamp() - r.completed_at) * 1000)::bigint"
    " FROM nifi_ops.load_partition p JOIN nifi_ops.load_run r ON r.run_id = p.run_id"
    " WHERE p.run_id = $1::uuid AND p.status IN ('PENDING', 'RUNNING', 'RETRY')"
    " ORDER BY p.partition_id FOR UPDATE OF p",
    1};

/* The chosen partitions ($2 ids) of run $1 -> TIMED_OUT (§3.2: the reason, completed now, the
 * token and worker kept); $3 the message. */
static const ll_stmt ST_ENDED_TIMEOUT = {
    "sweep_ended_timeout",
    "UPDATE nifi_ops.load_partition SET status = 'TIMED_OUT', error_code = 'RUN_ENDED',"
    " error_message = left($3, 2000), completed_at = clock_timestamp()"
    " WHERE run_id = $1::uuid AND partition_id = ANY ($2::text[]) AND status IN ('PENDING', 'RUNNING', "
    "'RETRY')",
    3};

/* One run: its due partitions TIMED_OUT and one event naming them. */
static ll_db_rc sweep_ended_run(ll_db *db, const sweep_settings *s, const char *run_id, const char *status,
                                sweep_counts *c)
{
    ll_run_status run;
    if (ll_run_status_parse(status, &run) != 0)
        return LL_DB_OK; /* not a status of the contract: nothing to decide */
    const char *p[1] = {run_id};
    PGresult *r = ll_db_exec(db, &ST_ENDED_PARTITIONS, p);
    if (!r)
        return LL_DB_ERROR;
    ll_pgarray ids = {0};
    json_t *list = json_array();
    for (int i = 0; i < PQntuples(r); i++) {
        ll_part_status ps;
        if (ll_part_status_parse(PQgetvalue(r, i, 1), &ps) != 0)
            continue;
        int64_t idle = PQgetisnull(r, i, 2) ? -1 : ll_db_ll(r, i, 2, -1);
        int64_t ended = PQgetisnull(r, i, 3) ? -1 : ll_db_ll(r, i, 3, -1);
        if (!ll_ended_partition_due(run, ps, idle, ended, s->stale_ms))
            continue;
        ll_pgarray_add(&ids, PQgetvalue(r, i, 0));
        json_array_append_new(list, json_string(PQgetvalue(r, i, 0)));
    }
    PQclear(r);
    ll_db_rc rc = LL_DB_OK;
    size_t n = json_array_size(list);
    if (n > 0) {
        char msg[200];
        snprintf(msg, sizeof msg, "the run ended %s; no report for %lld ms", status, (long long)s->stale_ms);
        const char *u[3] = {run_id, ll_pgarray_text(&ids), msg};
        json_t *details = json_pack("{s:O,s:s}", "partitions", list, "runStatus", status);
        ll_event ev = {.name = "PARTITIONS_TIMED_OUT",
                       .level = "INFO",
                       .run_id = run_id,
                       .chunk_index = -1,
                       .row_count = -1,
                       .error_code = "RUN_ENDED",
                       .message = msg,
                       .details = details};
        rc = ll_db_exec_discard(db, &ST_ENDED_TIMEOUT, u);
        if (rc == LL_DB_OK)
            rc = ll_event_insert(db, &ev);
        json_decref(details);
        c->timeout_ended_partition += (long)n;
    }
    ll_pgarray_free(&ids);
    json_decref(list);
    return rc;
}

ll_db_rc rule_ended_partitions(ll_db *db, const sweep_settings *s, sweep_counts *c)
{
    char stale[48], window[48];
    sweep_interval_text(s->stale_ms, stale, sizeof stale);
    sweep_interval_text(s->run_timeout_ms, window, sizeof window);
    const char *p[2] = {stale, window};
    PGresult *runs = ll_db_exec(db, &ST_ENDED_RUNS, p);
    if (!runs)
        return LL_DB_ERROR;
    ll_db_rc rc = LL_DB_OK;
    for (int i = 0; i < PQntuples(runs) && rc == LL_DB_OK; i++)
        rc = sweep_ended_run(db, s, PQgetvalue(runs, i, 0), PQgetvalue(runs, i, 1), c);
    PQclear(runs);
    return rc;
}
