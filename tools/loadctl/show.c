/*
 * show.c - `loadctl show RUN`: one run in detail (contract §5.19): the run, its partitions
 * (rows, chunks, attempts), its dispatches and its events, as text or --json.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/rules.h"
#include "loadctl.h"

static const char SQL_RUN[] =
    "SELECT run_id, job_key, business_key, status, snapshot_scn::text, source_count,"
    " expected_partition_count, success_partition_count, failed_partition_count, extracted_count,"
    " staging_count, target_count, hdfs_run_path, stage_table_name,"
    " to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
    " to_char(extract_completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
    " to_char(completed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'),"
    " error_stage, error_code, error_message, version_no"
    " FROM nifi_ops.load_run WHERE run_id = $1::uuid";

static const char SQL_PARTITIONS[] =
    "SELECT p.partition_id, p.status, p.expected_row_count, p.actual_row_count, p.file_count,"
    " (SELECT count(*) FROM nifi_ops.load_file f WHERE f.run_id = p.run_id"
    "   AND f.partition_id = p.partition_id AND f.status = 'WRITTEN'),"
    " p.attempt_count, p.worker_node, p.error_code, p.lower_bound::text, p.upper_bound::text"
    " FROM nifi_ops.load_partition p WHERE p.run_id = $1::uuid ORDER BY p.partition_id";

static const char SQL_DISPATCHES[] =
    "SELECT dispatch_id, dispatch_type, partition_id, status, attempt_count,"
    " to_char(sent_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'),"
    " to_char(acked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), last_error"
    " FROM nifi_ops.load_dispatch WHERE run_id = $1::uuid ORDER BY created_at, dispatch_id";

static const char SQL_EVENTS[] =
    "SELECT to_char(event_time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), event_level,"
    " event_name, partition_id, error_code, message FROM nifi_ops.load_event"
    " WHERE run_id = $1::uuid ORDER BY event_time, event_name";

static json_t *cell(const PGresult *r, int row, int col, int numeric)
{
    if (PQgetisnull(r, row, col))
        return json_null();
    return numeric ? json_integer(atoll(PQgetvalue(r, row, col))) : json_string(PQgetvalue(r, row, col));
}

/* Rows of r as JSON objects named by `names` (a leading '#' marks an integer column). */
static json_t *rows_json(const PGresult *r, const char *const *names)
{
    json_t *arr = json_array();
    for (int i = 0; i < PQntuples(r); i++) {
        json_t *o = json_object();
        for (int c = 0; names[c]; c++)
            json_object_set_new(o, names[c] + (names[c][0] == '#'), cell(r, i, c, names[c][0] == '#'));
        json_array_append_new(arr, o);
    }
    return arr;
}

static const char *const RUN_NAMES[] = {"runId", "jobKey", "businessKey", "status", "snapshotScn", "#sourceCount",
    "#expectedPartitionCount", "#successPartitionCount", "#failedPartitionCount", "#extractedCount", "#stagingCount",
    "#targetCount", "hdfsRunPath", "stageTable", "startedAt", "extractCompletedAt", "completedAt", "errorStage",
    "errorCode", "errorMessage", "#versionNo", NULL};
static const char *const PART_NAMES[] = {"partitionId", "status", "#expectedRowCount", "#actualRowCount",
    "#fileCount", "#writtenChunks", "#attemptCount", "workerNode", "errorCode", "lowerBound", "upperBound", NULL};
static const char *const DISPATCH_NAMES[] = {"dispatchId", "dispatchType", "partitionId", "status", "#attemptCount",
    "sentAt", "ackedAt", "lastError", NULL};
static const char *const EVENT_NAMES[] = {"eventTime", "level", "name", "partitionId", "errorCode", "message", NULL};

static const char *v(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? "-" : PQgetvalue(r, row, col);
}

static void print_text(const PGresult *run, const PGresult *parts, const PGresult *disp, const PGresult *ev)
{
    printf("run %s  %s / %s\n  status %s (version %s)\n  scn %s  source rows %s  extracted %s\n"
           "  partitions %s expected, %s success, %s failed\n  run path %s\n  stage table %s\n"
           "  started %s  extracted at %s  completed %s\n",
           v(run, 0, 0), v(run, 0, 1), v(run, 0, 2), v(run, 0, 3), v(run, 0, 20), v(run, 0, 4), v(run, 0, 5),
           v(run, 0, 9), v(run, 0, 6), v(run, 0, 7), v(run, 0, 8), v(run, 0, 12), v(run, 0, 13), v(run, 0, 14),
           v(run, 0, 15), v(run, 0, 16));
    if (!PQgetisnull(run, 0, 18))
        printf("  error %s %s: %s\n", v(run, 0, 17), v(run, 0, 18), v(run, 0, 19));
    printf("\n  %-9s %-10s %10s %10s %7s %8s  %s\n", "PARTITION", "STATUS", "EXPECTED", "ROWS", "CHUNKS",
           "ATTEMPTS", "WORKER");
    for (int i = 0; i < PQntuples(parts); i++)
        printf("  %-9s %-10s %10s %10s %7s %8s  %s\n", v(parts, i, 0), v(parts, i, 1), v(parts, i, 2),
               v(parts, i, 3), v(parts, i, 5), v(parts, i, 6), v(parts, i, 7));
    printf("\n  %-36s %-18s %-9s %-7s %8s\n", "DISPATCH", "TYPE", "PARTITION", "STATUS", "ATTEMPTS");
    for (int i = 0; i < PQntuples(disp); i++)
        printf("  %-36s %-18s %-9s %-7s %8s\n", v(disp, i, 0), v(disp, i, 1), v(disp, i, 2), v(disp, i, 3),
               v(disp, i, 4));
    printf("\n  events:\n");
    for (int i = 0; i < PQntuples(ev); i++)
        printf("  %s %-5s %-22s %-5s %s\n", v(ev, i, 0), v(ev, i, 1), v(ev, i, 2), v(ev, i, 3),
               PQgetisnull(ev, i, 5) ? "" : PQgetvalue(ev, i, 5));
}

int lc_show(const lc_opts *o, int argc, char **argv)
{
    char run_id[37];
    if (argc != 2 || ll_uuid_canonical(argv[1], run_id) != 0) {
        fprintf(stderr, "usage: loadctl show RUN   (RUN is the run id, a UUID)\n");
        return LC_USAGE;
    }
    PGconn *c = lc_connect(o);
    if (!c)
        return LC_DB;
    const char *p[1] = {run_id};
    PGresult *r[4];
    const char *sql[4] = {SQL_RUN, SQL_PARTITIONS, SQL_DISPATCHES, SQL_EVENTS};
    int rc = LC_OK;
    for (int i = 0; i < 4; i++) {
        r[i] = PQexecParams(c, sql[i], 1, NULL, p, NULL, NULL, 0);
        if (PQresultStatus(r[i]) != PGRES_TUPLES_OK) {
            fprintf(stderr, "loadctl show: %s", PQresultErrorMessage(r[i]));
            rc = LC_DB;
        }
    }
    if (rc == LC_OK && PQntuples(r[0]) == 0) {
        fprintf(stderr, "loadctl show: run %s not found\n", run_id);
        rc = LC_REFUSED;
    } else if (rc == LC_OK && o->json) {
        json_t *run = json_array_get(rows_json(r[0], RUN_NAMES), 0);
        json_incref(run);
        json_object_set_new(run, "partitions", rows_json(r[1], PART_NAMES));
        json_object_set_new(run, "dispatches", rows_json(r[2], DISPATCH_NAMES));
        json_object_set_new(run, "events", rows_json(r[3], EVENT_NAMES));
        char *s = json_dumps(run, JSON_INDENT(2));
        puts(s);
        free(s);
        json_decref(run);
    } else if (rc == LC_OK) {
        print_text(r[0], r[1], r[2], r[3]);
    }
    for (int i = 0; i < 4; i++)
        PQclear(r[i]);
    PQfinish(c);
    return rc;
}
