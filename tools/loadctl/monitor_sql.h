/*
 * monitor_sql.h - the statements of one monitor frame (monitor_data.c; docs/contract.md §5.21). Every
 * read is an index or a window whatever the history (issue 42; schemas/sql/0017_history_reads.sql,
 * 0020_hot_heartbeats.sql): the active runs through ix_load_run_active_status (or uq_load_run_active),
 * the runs ended in the last 24 hours through ix_load_run_ended_at, the runs due for cleanup through
 * ix_load_run_cleanup_ended_at, the dispatches
 * through ix_load_dispatch_due and ix_load_dispatch_dead, CLEANUP_FAILED through
 * ix_load_event_cleanup_failed. A header so that the plan test prints the texts that ship
 * (tests/tools/ll_print_reads.c, tests/integration/test_history_plans.py).
 */
#ifndef LOADCTL_MONITOR_SQL_H
#define LOADCTL_MONITOR_SQL_H

#include "loadctl.h"
#include "retention.h"

/* The start of the last 24 hours by the database clock at the statement. statement_timestamp()
 * rather than clock_timestamp() (docs/ledger.md §1; they differ by the statement's own duration):
 * a stable value the planner both bounds an index range with (ix_load_run_ended_at,
 * ix_load_event_cleanup_failed) and estimates the range's rows from, so that the runs ended in a
 * day are read as a window of the index, not as every failed run of the history (issue 42). */
#define MON_DAY_AGO "(statement_timestamp() - interval '24 hours')"

/* The count of the outbox rows of status S (of the job $4 unless NULL), S a literal so that the
 * partial index of S serves it: ix_load_dispatch_due (PENDING, SENT), ix_load_dispatch_dead. The
 * run is read only for the job (every dispatch has its run, fk): without --job no run is read. */
#define MON_DISPATCHES(S)                                                                                    \
    " UNION ALL SELECT 'dispatch', '" S "', (SELECT count(*) FROM nifi_ops.load_dispatch d"                  \
    "  WHERE d.status = '" S "' AND ($4::text IS NULL OR EXISTS (SELECT 1 FROM nifi_ops.load_run r"          \
    "   WHERE r.run_id = d.run_id AND r.job_key = $4)))"

/* $1/$2 success/failed retention (ms), $3 cleanup.max_batch (caps the cleanup-due count), $4 job
 * key or NULL (every count of one job). */
static const ll_stmt MON_COUNTS = {
    "monitor_counts",
    "SELECT 'now', " LC_ISO(
        "clock_timestamp()") ", 0::bigint"
                             " UNION ALL SELECT 'active', r.status, count(*) FROM nifi_ops.load_run r"
                             "  WHERE r.status IN (" LC_ACTIVE_STATUSES
                             ") AND ($4::text IS NULL OR r.job_key = $4)"
                             "  GROUP BY r.status"
                             " UNION ALL SELECT 'recent', r.status, count(*) FROM nifi_ops.load_run r"
                             "  WHERE r.status NOT IN (" LC_ACTIVE_STATUSES ")"
                             "    AND " LC_ENDED " >= " MON_DAY_AGO
                             "    AND ($4::text IS NULL OR r.job_key = $4) GROUP BY r.status" MON_DISPATCHES(
                                 "PENDING") MON_DISPATCHES("SENT")
                                 MON_DISPATCHES(
                                     "DEAD") " UNION ALL SELECT 'cleanupDue', NULL, (SELECT count(*) FROM "
                                             "(SELECT 1 FROM "
                                             "nifi_ops.load_run r"
                                             "  WHERE r.cleaned_at IS NULL AND ($4::text IS NULL OR "
                                             "r.job_key = $4)"
                                             "   AND " LC_PAST_RETENTION(
                                                 "$1",
                                                 "$2") " AND " LC_ENDED_BEFORE_RETENTION("$1",
                                                                                         "$2") " LIMIT "
                                                                                               "$3::int) c)",
    4};

/* Active runs in pipeline order, newest first within a status; progress counted from the
 * partitions (the run's counters are only recomputed at extract completion). $1 = max rows,
 * $2 = job key or NULL. */
static const ll_stmt MON_RUNS = {
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
static const ll_stmt MON_ALERTS = {
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
              /* each DEAD row's run by its key (the lateral subquery, kept one by OFFSET 0, is a
                 nested loop: never a scan of the runs, however many DEAD rows there are) */
              "  FROM nifi_ops.load_dispatch d LEFT JOIN LATERAL (SELECT x.job_key, x.business_key"
              "   FROM nifi_ops.load_run x WHERE x.run_id = d.run_id OFFSET 0) r ON true"
              "  WHERE d.status = 'DEAD'"
              /* the sweeper's abandoned commands of ended runs need no operator */
              "   AND coalesce(d.last_error, '') NOT LIKE 'abandoned:%'"
              " UNION ALL"
              "  SELECT 'RUN_FAILED', 'ERROR', r.run_id::text, r.job_key, r.business_key, " LC_ENDED ","
              "   btrim(coalesce(r.error_code, '') || ' ' || coalesce(r.error_message, '')), NULL"
              "  FROM nifi_ops.load_run r WHERE r.status IN (" LC_FAILED_STATUSES ")"
              "   AND " LC_ENDED " >= " MON_DAY_AGO " UNION ALL"
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
              "    AND e.event_time >= " MON_DAY_AGO "    AND NOT EXISTS (SELECT 1 FROM nifi_ops.load_run c"
              "                    WHERE c.run_id = e.run_id AND c.cleaned_at IS NOT NULL)"
              "   ORDER BY e.run_id, e.event_time DESC) cf"
              " ) a WHERE ($4::text IS NULL OR a.job_key = $4)"
              " ORDER BY (severity = 'ERROR') DESC, at DESC NULLS LAST, kind, run_id LIMIT $3::int",
    4};

#endif
