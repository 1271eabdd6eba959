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

/* The active statuses in pipeline order, then the others (SUCCESS, the failures), from
 * LL_RUN_STATUSES (ll/status.h). */
#define LC_ACTIVE_NAME_(name, active, terminal, rank, alert)   LL_STATUS_IF_##active(#name, )
#define LC_INACTIVE_NAME_(name, active, terminal, rank, alert) LL_STATUS_IFNOT_##active(#name, )
const char *const LC_STATUS_ORDER[LL_RUN_STATUS_COUNT] = {LL_RUN_STATUSES(LC_ACTIVE_NAME_)
                                                              LL_RUN_STATUSES(LC_INACTIVE_NAME_)};
#undef LC_ACTIVE_NAME_
#undef LC_INACTIVE_NAME_

/* $1/$2 success/failed retention (ms), $3 cleanup.max_batch (caps the cleanup-due count), $4 job
 * key or NULL (every count of one job). */
static const ll_stmt ST_COUNTS = {
    "monitor_counts",
    "SELECT 'now', " LC_ISO(
        "clock_timestamp()") ", 0::bigint"
                             " UNION ALL SELECT 'active', r.status, count(*) FROM nifi_ops.load_run r"
                             "  WHERE r.status IN (" LC_ACTIVE_STATUSES
                             ") AND ($4::text IS NULL OR r.job_key = $4)"
                             "  GROUP BY r.status"
                             " UNION ALL SELECT 'recent', r.status, count(*) FROM nifi_ops.load_run r"
                             "  WHERE r.status NOT IN (" LC_ACTIVE_STATUSES ")"
                             "    AND " LC_ENDED " >= clock_timestamp() - interval '24 hours'"
                             "    AND ($4::text IS NULL OR r.job_key = $4) GROUP BY r.status"
                             " UNION ALL SELECT 'dispatch', s.status,"
                             "  (SELECT count(*) FROM nifi_ops.load_dispatch d JOIN nifi_ops.load_run r ON "
                             "r.run_id = d.run_id"
                             "   WHERE d.status = s.status AND ($4::text IS NULL OR r.job_key = $4))"
                             "  FROM unnest(ARRAY['PENDING', 'SENT', 'DEAD']) AS s(status)"
                             " UNION ALL SELECT 'cleanupDue', NULL, (SELECT count(*) FROM (SELECT 1 FROM "
                             "nifi_ops.load_run r"
                             "  WHERE r.cleaned_at IS NULL AND ($4::text IS NULL OR r.job_key = $4)"
                             "   AND " LC_PAST_RETENTION("$1", "$2") " LIMIT $3::int) c)",
    4};

/* Active runs in pipeline order, newest first within a status; progress counted from the
 * partitions (the run's counters are only recomputed at extract completion). $1 = max rows,
 * $2 = job key or NULL. */
static const ll_stmt ST_RUNS = {
    "monitor_runs",
    "SELECT r.run_id, r.job_key, r.business_key, r.status,"
    " coalesce(r.expected_partition_count, p.total), p.success, p.failed, p.running, p.total,"
    " " LC_ISO(
        "r.heartbeat_at") ","
                          " floor(extract(epoch FROM clock_timestamp() - r.heartbeat_at))::bigint,"
                          " " LC_ISO(
                              "r.started_at") ", r.error_code"
                                              " FROM nifi_ops.load_run r CROSS JOIN LATERAL ("
                                              "  SELECT count(*) FILTER (WHERE q.status = 'SUCCESS') AS "
                                              "success,"
                                              "   count(*) FILTER (WHERE q.status IN ('FAILED', "
                                              "'TIMED_OUT')) AS failed,"
                                              "   count(*) FILTER (WHERE q.status = 'RUNNING') AS running, "
                                              "count(*) AS total"
                                              "  FROM nifi_ops.load_partition q WHERE q.run_id = r.run_id) p"
                                              " WHERE r.status IN (" LC_ACTIVE_STATUSES
                                              ") AND ($2::text IS NULL OR r.job_key = $2)"
                                              " ORDER BY array_position(ARRAY[" LC_ACTIVE_STATUSES
                                              "]::text[], r.status::text),"
                                              "  r.started_at DESC, r.run_id LIMIT $1::int",
    2};

/* docs/contract.md §5.21 alerts. $1 validation_stale (ms), $2 stale (ms), $3 alert limit, $4 job key or
 * NULL. Messages are
 * trimmed to 500 chars, empty -> NULL; ERROR before WARN, newest first, NULL times last. */
static const ll_stmt ST_ALERTS = {
    "monitor_alerts",
    "SELECT kind, severity, run_id, job_key, business_key, " LC_ISO(
        "at") ","
              " nullif(left(btrim(msg), 500), ''), dispatch_id,"
              " to_char(at AT TIME ZONE 'UTC', 'MM-DD HH24:MI') FROM ("
              "  SELECT 'PUBLISH_UNKNOWN' AS kind, 'ERROR' AS severity, r.run_id::text AS run_id, r.job_key,"
              "   r.business_key, r.heartbeat_at AS at, r.error_message::text AS msg, NULL::text AS "
              "dispatch_id"
              "  FROM nifi_ops.load_run r WHERE r.status = 'PUBLISH_UNKNOWN'"
              " UNION ALL"
              "  SELECT 'DISPATCH_DEAD', 'ERROR', d.run_id::text, r.job_key, r.business_key, "
              "d.next_attempt_at,"
              "   d.dispatch_type || ': ' || coalesce(d.last_error, ''), d.dispatch_id::text"
              "  FROM nifi_ops.load_dispatch d LEFT JOIN nifi_ops.load_run r ON r.run_id = d.run_id"
              "  WHERE d.status = 'DEAD'"
              /* the sweeper's abandoned commands of ended runs need no operator */
              "   AND coalesce(d.last_error, '') NOT LIKE 'abandoned:%'"
              " UNION ALL"
              "  SELECT 'RUN_FAILED', 'ERROR', r.run_id::text, r.job_key, r.business_key, " LC_ENDED ","
              "   btrim(coalesce(r.error_code, '') || ' ' || coalesce(r.error_message, '')), NULL"
              "  FROM nifi_ops.load_run r WHERE r.status IN (" LC_FAILED_STATUSES ")"
              "   AND " LC_ENDED " >= clock_timestamp() - interval '24 hours'"
              " UNION ALL"
              "  SELECT 'RUN_STALE', 'WARN', r.run_id::text, r.job_key, r.business_key, r.heartbeat_at,"
              "   'stalled since last change', NULL"
              "  FROM nifi_ops.load_run r"
              "  WHERE (r.status IN (" LL_SQL_RUN_ALERT_ONLY ")"
              "     AND r.heartbeat_at < clock_timestamp() - $1::bigint * interval '1 millisecond')"
              "   OR (r.status IN ('CREATED', 'EXTRACTING')"
              "     AND r.heartbeat_at < clock_timestamp() - $2::bigint * interval '1 millisecond')"
              " UNION ALL"
              "  SELECT * FROM (SELECT DISTINCT ON (e.run_id) 'CLEANUP_FAILED', 'WARN', e.run_id::text,"
              "   e.job_key, e.business_key, e.event_time, e.message::text, NULL::text"
              "   FROM nifi_ops.load_event e WHERE e.event_name = 'CLEANUP_FAILED'"
              "    AND e.event_time >= clock_timestamp() - interval '24 hours'"
              "    AND NOT EXISTS (SELECT 1 FROM nifi_ops.load_run c"
              "                    WHERE c.run_id = e.run_id AND c.cleaned_at IS NOT NULL)"
              "   ORDER BY e.run_id, e.event_time DESC) cf"
              " ) a WHERE ($4::text IS NULL OR a.job_key = $4)"
              " ORDER BY (severity = 'ERROR') DESC, at DESC NULLS LAST, kind, run_id LIMIT $3::int",
    4};

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
    if (!(s->counts = ll_db_exec(db, &ST_COUNTS, pc)) || !(s->runs = ll_db_exec(db, &ST_RUNS, pr)) ||
        !(s->alerts = ll_db_exec(db, &ST_ALERTS, pa)))
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
