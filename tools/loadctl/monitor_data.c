/*
 * monitor_data.c - the monitor's queries (docs/contract.md §5.21): read-only, no locks, all of one frame
 * in one REPEATABLE READ READ ONLY transaction so the counts, the run list and the alerts agree.
 * Thresholds and limits are bound parameters (milliseconds, counts); the database clock decides
 * what is stale or recent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/status_sql.h"
#include "monitor.h"
#include "monitor_sql.h"

/* The active statuses in pipeline order, then the others (SUCCESS, the failures), from
 * LL_RUN_STATUSES (ll/status.h). */
#define LC_ACTIVE_NAME_(name, active, terminal, rank, alert)   LL_STATUS_IF_##active(#name, )
#define LC_INACTIVE_NAME_(name, active, terminal, rank, alert) LL_STATUS_IFNOT_##active(#name, )
const char *const LC_STATUS_ORDER[LL_RUN_STATUS_COUNT] = {LL_RUN_STATUSES(LC_ACTIVE_NAME_)
                                                              LL_RUN_STATUSES(LC_INACTIVE_NAME_)};
#undef LC_ACTIVE_NAME_
#undef LC_INACTIVE_NAME_

static const ll_stmt ST_RUN = {
    "monitor_run",
    "SELECT run_id, job_key, business_key, status, error_code, error_message, " LC_ISO(
        "heartbeat_at") ", expected_partition_count, source_count, extracted_count"
                        " FROM nifi_ops.load_run WHERE run_id = $1::uuid",
    1};

static const ll_stmt ST_PARTS = {
    "monitor_partitions",
    "SELECT p.partition_id, p.status, p.expected_row_count, p.actual_row_count,"
    " (SELECT count(*) FROM nifi_ops.load_file f WHERE f.run_id = p.run_id"
    "   AND f.partition_id = p.partition_id AND f.status = 'WRITTEN'),"
    " p.attempt_count, p.worker_node, p.error_code,"
    " floor(extract(epoch FROM clock_timestamp() - p.heartbeat_at))::bigint"
    " FROM nifi_ops.load_partition p WHERE p.run_id = $1::uuid ORDER BY p.partition_id",
    1};

static const ll_stmt ST_METRICS = {
    "monitor_metrics",
    "SELECT stage, metric_name, expected_value, actual_value, result, query_version"
    " FROM nifi_ops.load_validation WHERE run_id = $1::uuid"
    " ORDER BY coalesce(array_position(ARRAY['SOURCE', 'STAGING', 'TARGET']::text[], stage::text), 4),"
    " stage, metric_name, query_version",
    1};

/* Runs the queries of a frame inside the open transaction. */
static int load_all(ll_db *db, const lc_monitor_cfg *cfg, const char *run_id, lc_snapshot *s)
{
    const char *pc[4] = {cfg->rt.success_param, cfg->rt.failed_param, cfg->rt.batch_text, cfg->job};
    const char *pr[2] = {cfg->runs_param, cfg->job};
    const char *pa[4] = {cfg->vstale_param, cfg->stale_param, cfg->alert_param, cfg->job};
    if (!(s->counts = ll_db_exec(db, &MON_COUNTS, pc)) || !(s->runs = ll_db_exec(db, &MON_RUNS, pr)) ||
        !(s->alerts = ll_db_exec(db, &MON_ALERTS, pa)))
        return -1;
    if (!run_id)
        return 0;
    const char *p[1] = {run_id};
    if (!(s->run = ll_db_exec(db, &ST_RUN, p)) || !(s->parts = ll_db_exec(db, &ST_PARTS, p)) ||
        !(s->metrics = ll_db_exec(db, &ST_METRICS, p)))
        return -1;
    return 0;
}

int lc_snapshot_load(ll_db *db, const lc_monitor_cfg *cfg, const char *run_id, lc_snapshot *s)
{
    memset(s, 0, sizeof *s);
    if (ll_db_ensure(db) != LL_DB_OK)
        return -1;
    if (ll_db_command(db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") != LL_DB_OK)
        return -1;
    int rc = load_all(db, cfg, run_id, s);
    if (rc == 0 && ll_db_command(db, "COMMIT") != LL_DB_OK)
        rc = -1;
    if (rc != 0) {
        ll_db_error saved = db->err;
        if (db->conn && PQstatus(db->conn) == CONNECTION_OK)
            ll_db_command(db, "ROLLBACK");
        db->err = saved;
        lc_snapshot_clear(s);
    }
    return rc;
}

void lc_snapshot_clear(lc_snapshot *s)
{
    PGresult **all[] = {&s->counts, &s->runs, &s->alerts, &s->run, &s->parts, &s->metrics};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        PQclear(*all[i]);
        *all[i] = NULL;
    }
}

long lc_snapshot_count(const lc_snapshot *s, const char *kind, const char *key)
{
    for (int i = 0; s->counts && i < PQntuples(s->counts); i++) {
        if (strcmp(PQgetvalue(s->counts, i, MC_KIND), kind) != 0)
            continue;
        bool null_key = PQgetisnull(s->counts, i, MC_KEY);
        if ((key == NULL && null_key) ||
            (key && !null_key && strcmp(PQgetvalue(s->counts, i, MC_KEY), key) == 0))
            return strtol(PQgetvalue(s->counts, i, MC_N), NULL, 10);
    }
    return 0;
}

const char *lc_snapshot_time(const lc_snapshot *s)
{
    for (int i = 0; s->counts && i < PQntuples(s->counts); i++)
        if (strcmp(PQgetvalue(s->counts, i, MC_KIND), "now") == 0)
            return PQgetvalue(s->counts, i, MC_KEY);
    return "";
}

void lc_format_age(long long secs, char *out, size_t len)
{
    if (secs < 0)
        secs = 0;
    if (secs < 60)
        snprintf(out, len, "%llds", secs);
    else if (secs < 3600)
        snprintf(out, len, "%lldm", secs / 60);
    else if (secs < 86400)
        snprintf(out, len, "%lldh%02lld", secs / 3600, secs % 3600 / 60);
    else
        snprintf(out, len, "%lldd%02lld", secs / 86400, secs % 86400 / 3600);
}
