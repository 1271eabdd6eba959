/*
 * show.c - `loadctl show RUN`: one run in detail (docs/contract.md §5.19, §5.21): the run, its
 * partitions (rows, chunks, attempts), validation metrics, dispatches and newest events, as text
 * or --json. Read-only: every query runs in one REPEATABLE READ READ ONLY transaction, so the
 * sections agree with each other; nothing is locked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/rules.h"
#include "loadctl.h"
#include "show_sql.h"

static const char USAGE[] =
    "usage: loadctl show RUN [--events 1..1000] [--json]\n\n"
    "One run (RUN = run id): status and counters, partitions, validation metrics, dispatches\n"
    "(oldest first) and the newest --events events (default 200), shown oldest first.\n"
    "Exit 2 with RUN_NOT_FOUND when the ledger has no such run.\n";

static const ll_stmt ST_RUN = {
    "show_run",
    "SELECT run_id, job_key, business_key, status, snapshot_scn::text, source_count,"
    " expected_partition_count, success_partition_count, failed_partition_count, extracted_count,"
    " staging_count, target_count, hdfs_run_path, stage_table_name, " LC_ISO(
        "started_at") ","
                      " " LC_ISO("heartbeat_at") ", " LC_ISO("extract_completed_at") ", " LC_ISO(
                          "publish_started_at") ","
                                                " " LC_ISO("published_at") ", " LC_ISO(
                                                    "completed_at") ", " LC_ISO("cleaned_at") ","
                                                                                              " error_stage, "
                                                                                              "error_code, "
                                                                                              "error_message,"
                                                                                              " version_no"
                                                                                              " FROM "
                                                                                              "nifi_ops.load_"
                                                                                              "run WHERE "
                                                                                              "run_id = "
                                                                                              "$1::uuid",
    1};
static const char *const RUN_NAMES[] = {"runId",
                                        "jobKey",
                                        "businessKey",
                                        "status",
                                        "snapshotScn",
                                        "#sourceCount",
                                        "#expectedPartitionCount",
                                        "#successPartitionCount",
                                        "#failedPartitionCount",
                                        "#extractedCount",
                                        "#stagingCount",
                                        "#targetCount",
                                        "hdfsRunPath",
                                        "stageTable",
                                        "startedAt",
                                        "heartbeatAt",
                                        "extractCompletedAt",
                                        "publishStartedAt",
                                        "publishedAt",
                                        "completedAt",
                                        "cleanedAt",
                                        "errorStage",
                                        "errorCode",
                                        "errorMessage",
                                        "#versionNo",
                                        NULL};
enum {
    R_ID,
    R_JOB,
    R_BK,
    R_STATUS,
    R_SCN,
    R_SOURCE,
    R_EXPECTED,
    R_SUCCESS,
    R_FAILED,
    R_EXTRACTED,
    R_STAGING,
    R_TARGET,
    R_PATH,
    R_TABLE,
    R_STARTED,
    R_HEARTBEAT,
    R_EXTRACT_AT,
    R_PUB_START,
    R_PUBLISHED,
    R_COMPLETED,
    R_CLEANED,
    R_ERR_STAGE,
    R_ERR_CODE,
    R_ERR_MSG,
    R_VERSION
};

static const ll_stmt ST_PARTITIONS = {
    "show_partitions",
    "SELECT p.partition_id, p.status, p.expected_row_count, p.actual_row_count, p.file_count,"
    " (SELECT count(*) FROM nifi_ops.load_file f WHERE f.run_id = p.run_id"
    "   AND f.partition_id = p.partition_id AND f.status = 'WRITTEN'),"
    " p.attempt_count, p.worker_node, p.error_code, p.lower_bound::text, p.upper_bound::text,"
    " " LC_ISO(
        "p.heartbeat_at") " FROM nifi_ops.load_partition p WHERE p.run_id = $1::uuid ORDER BY p.partition_id",
    1};
static const char *const PART_NAMES[] = {
    "partitionId", "status",         "#expectedRowCount", "#actualRowCount",
    "#fileCount",  "#writtenChunks", "#attemptCount",     "workerNode",
    "errorCode",   "lowerBound",     "upperBound",        "heartbeatAt",
    NULL};

/* docs/contract.md §5.21: SOURCE, STAGING, TARGET (others last), then metric name. */
static const ll_stmt ST_VALIDATIONS = {
    "show_validations",
    "SELECT stage, metric_name, expected_value, actual_value, result, query_version, " LC_ISO(
        "measured_at") " FROM nifi_ops.load_validation WHERE run_id = $1::uuid"
                       " ORDER BY coalesce(array_position(ARRAY['SOURCE', 'STAGING', 'TARGET']::text[], "
                       "stage::text), 4),"
                       " stage, metric_name, query_version",
    1};
static const char *const VAL_NAMES[] = {"stage",  "metricName",   "expectedValue", "actualValue",
                                        "result", "queryVersion", "measuredAt",    NULL};

static const char *const DISPATCH_NAMES[] = {"dispatchId",      "dispatchType",  "partitionId", "status",
                                             "#attemptCount",   "nextAttemptAt", "sentAt",      "ackedAt",
                                             "#lastHttpStatus", "lastError",     NULL};

/* docs/contract.md §5.21: the newest $2 events, returned oldest first. */
static const ll_stmt ST_EVENTS = {
    "show_events",
    "SELECT " LC_ISO("event_time") ", event_level, event_name, partition_id, process_group,"
                                   " error_code, message, details::text FROM ("
                                   "  SELECT * FROM nifi_ops.load_event WHERE run_id = $1::uuid"
                                   "  ORDER BY event_time DESC, event_id LIMIT $2::int) e"
                                   " ORDER BY event_time, event_id",
    2};
static const char *const EVENT_NAMES[] = {"eventTime", "level",   "name",    "partitionId", "processGroup",
                                          "errorCode", "message", "details", NULL};

static void print_text(const PGresult *run, const PGresult *parts, const PGresult *vals, const PGresult *disp,
                       const PGresult *ev)
{
#define F(c) lc_cell(run, 0, c)
    printf("run %s  %s / %s\n  status %s (version %s)\n  scn %s  source rows %s  extracted %s"
           "  staging %s  target %s\n  partitions %s expected, %s success, %s failed\n"
           "  run path %s\n  stage table %s\n  started %s  heartbeat %s\n  extracted at %s"
           "  published %s  completed %s  cleaned %s\n",
           F(R_ID), F(R_JOB), F(R_BK), F(R_STATUS), F(R_VERSION), F(R_SCN), F(R_SOURCE), F(R_EXTRACTED),
           F(R_STAGING), F(R_TARGET), F(R_EXPECTED), F(R_SUCCESS), F(R_FAILED), F(R_PATH), F(R_TABLE),
           F(R_STARTED), F(R_HEARTBEAT), F(R_EXTRACT_AT), F(R_PUBLISHED), F(R_COMPLETED), F(R_CLEANED));
    if (!PQgetisnull(run, 0, R_ERR_CODE))
        printf("  error %s %s: %s\n", F(R_ERR_STAGE), F(R_ERR_CODE), F(R_ERR_MSG));
#undef F
    printf("\n  %-9s %-10s %10s %10s %7s %8s  %s\n", "PARTITION", "STATUS", "EXPECTED", "ROWS", "CHUNKS",
           "ATTEMPTS", "WORKER");
    for (int i = 0; i < PQntuples(parts); i++)
        printf("  %-9s %-10s %10s %10s %7s %8s  %s\n", lc_cell(parts, i, 0), lc_cell(parts, i, 1),
               lc_cell(parts, i, 2), lc_cell(parts, i, 3), lc_cell(parts, i, 5), lc_cell(parts, i, 6),
               lc_cell(parts, i, 7));
    printf("\n  %-8s %-28s %-18s %-18s %-6s %s\n", "STAGE", "METRIC", "EXPECTED", "ACTUAL", "RESULT",
           "VERSION");
    for (int i = 0; i < PQntuples(vals); i++)
        printf("  %-8s %-28.28s %-18.18s %-18.18s %-6s %s\n", lc_cell(vals, i, 0), lc_cell(vals, i, 1),
               lc_cell(vals, i, 2), lc_cell(vals, i, 3), lc_cell(vals, i, 4), lc_cell(vals, i, 5));
    printf("\n  %-36s %-18s %-9s %-7s %8s  %s\n", "DISPATCH", "TYPE", "PARTITION", "STATUS", "ATTEMPTS",
           "LAST ERROR");
    for (int i = 0; i < PQntuples(disp); i++)
        printf("  %-36s %-18s %-9s %-7s %8s  %s\n", lc_cell(disp, i, 0), lc_cell(disp, i, 1),
               lc_cell(disp, i, 2), lc_cell(disp, i, 3), lc_cell(disp, i, 4),
               PQgetisnull(disp, i, 9) ? "" : PQgetvalue(disp, i, 9));
    printf("\n  events:\n");
    for (int i = 0; i < PQntuples(ev); i++)
        printf("  %s %-5s %-26s %-5s %s%s%s\n", lc_cell(ev, i, 0), lc_cell(ev, i, 1), lc_cell(ev, i, 2),
               PQgetisnull(ev, i, 3) ? "" : PQgetvalue(ev, i, 3),
               PQgetisnull(ev, i, 5) ? "" : PQgetvalue(ev, i, 5), PQgetisnull(ev, i, 5) ? "" : " ",
               PQgetisnull(ev, i, 6) ? "" : PQgetvalue(ev, i, 6));
}

static void print_json(const PGresult *run, const PGresult *parts, const PGresult *vals, const PGresult *disp,
                       const PGresult *ev)
{
    json_t *arr = lc_rows_json(run, RUN_NAMES);
    json_t *obj = json_incref(json_array_get(arr, 0));
    json_decref(arr);
    json_t *counts = json_object();
    for (int i = 0; i < PQntuples(parts); i++) {
        const char *st = PQgetvalue(parts, i, 1);
        json_object_set_new(counts, st, json_integer(json_integer_value(json_object_get(counts, st)) + 1));
    }
    json_object_set_new(obj, "partitionCounts", counts);
    json_object_set_new(obj, "partitions", lc_rows_json(parts, PART_NAMES));
    json_object_set_new(obj, "validations", lc_rows_json(vals, VAL_NAMES));
    json_object_set_new(obj, "dispatches", lc_rows_json(disp, DISPATCH_NAMES));
    json_t *events = lc_rows_json(ev, EVENT_NAMES);
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e)
    {
        /* details is stored JSON: embed it as an object, not as a string. */
        const char *txt = json_string_value(json_object_get(e, "details"));
        json_t *d = txt ? json_loads(txt, 0, NULL) : NULL;
        json_object_set_new(e, "details", d ? d : json_object());
    }
    json_object_set_new(obj, "events", events);
    lc_print_json(obj);
}

int lc_show(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *pos[1], *events = "200";
    int npos;
    lc_optspec specs[] = {{"events", &events, NULL}, {NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 1, 1, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    char run_id[37];
    long n_events;
    if (ll_uuid_canonical(pos[0], run_id) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "RUN must be a run id (UUID)");
    if (lc_parse_int(events, 1, 1000, &n_events) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--events must be 1..1000");
    ll_db db;
    if ((rc = lc_db_open(o, &db)) != LC_OK)
        return rc;
    const ll_stmt *st[5] = {&ST_RUN, &ST_PARTITIONS, &ST_VALIDATIONS, &SHOW_DISPATCHES, &ST_EVENTS};
    const char *p[2] = {run_id, events};
    PGresult *r[5] = {NULL};
    if (ll_db_command(&db, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") != LL_DB_OK)
        rc = lc_fail_db(o, &db, "begin");
    for (int i = 0; i < 5 && rc == LC_OK; i++)
        if (!(r[i] = lc_query(o, &db, st[i], p)))
            rc = LC_DB;
    if (rc == LC_OK && PQntuples(r[0]) == 0)
        rc = lc_fail(o, LC_REFUSED, "RUN_NOT_FOUND", json_pack("{s:s}", "runId", run_id),
                     "no run %s in the ledger", run_id);
    else if (rc == LC_OK && o->json)
        print_json(r[0], r[1], r[2], r[3], r[4]);
    else if (rc == LC_OK)
        print_text(r[0], r[1], r[2], r[3], r[4]);
    for (int i = 0; i < 5; i++)
        PQclear(r[i]);
    ll_db_close(&db);
    return rc;
}
