/*
 * monitor_text.c - `loadctl monitor --once`: one frame without ncurses, for scripts and logs.
 * Plain text in the dashboard's sections, or with --json one object shaped like the
 * contract's GET /v1/monitor/summary (§5.21) plus the run list and the selected run's detail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "monitor.h"

/* "STATUS n  STATUS n ..." of one kind of counts, in LC_STATUS_ORDER; "none" when empty. */
static void print_status_counts(const lc_snapshot *s, const char *kind)
{
    int any = 0;
    for (int i = 0; i < LL_RUN_STATUS_COUNT; i++) {
        long n = lc_snapshot_count(s, kind, LC_STATUS_ORDER[i]);
        if (n > 0)
            printf("%s%s %ld", any++ ? "  " : "", LC_STATUS_ORDER[i], n);
    }
    printf("%s\n", any ? "" : "none");
}

static void print_detail(const lc_snapshot *s)
{
    const PGresult *r = s->run;
    if (PQntuples(r) == 0) {
        printf("\nRUN: not found\n");
        return;
    }
    printf("\nRUN %s  %s / %s  %s\n", lc_cell(r, 0, MD_ID), lc_cell(r, 0, MD_JOB), lc_cell(r, 0, MD_BK),
           lc_cell(r, 0, MD_STATUS));
    if (!PQgetisnull(r, 0, MD_ERR_CODE))
        printf("  error %s: %s\n", lc_cell(r, 0, MD_ERR_CODE), lc_cell(r, 0, MD_ERR_MSG));
    printf("  %-9s %-10s %10s %10s %6s %8s  %s\n", "PARTITION", "STATUS", "ROWS", "EXPECTED", "CHUNKS",
           "ATTEMPTS", "WORKER");
    for (int i = 0; i < PQntuples(s->parts); i++)
        printf("  %-9s %-10s %10s %10s %6s %8s  %s\n", lc_cell(s->parts, i, MP_ID),
               lc_cell(s->parts, i, MP_STATUS), lc_cell(s->parts, i, MP_ACTUAL),
               lc_cell(s->parts, i, MP_EXPECTED), lc_cell(s->parts, i, MP_CHUNKS),
               lc_cell(s->parts, i, MP_ATTEMPTS), lc_cell(s->parts, i, MP_WORKER));
    printf("  %-8s %-28s %-18s %-18s %s\n", "STAGE", "METRIC", "EXPECTED", "ACTUAL", "RESULT");
    for (int i = 0; i < PQntuples(s->metrics); i++)
        printf("  %-8s %-28s %-18s %-18s %s\n", lc_cell(s->metrics, i, MM_STAGE),
               lc_cell(s->metrics, i, MM_NAME), lc_cell(s->metrics, i, MM_EXPECTED),
               lc_cell(s->metrics, i, MM_ACTUAL), lc_cell(s->metrics, i, MM_RESULT));
}

void lc_monitor_print_text(const lc_snapshot *s, const lc_monitor_cfg *cfg)
{
    printf("loadledger monitor  %s\n", lc_snapshot_time(s));
    printf("active: ");
    print_status_counts(s, "active");
    printf("ended in the last 24h: ");
    print_status_counts(s, "recent");
    printf("dispatches: PENDING %ld  SENT %ld  DEAD %ld   cleanup due: %ld\n",
           lc_snapshot_count(s, "dispatch", "PENDING"), lc_snapshot_count(s, "dispatch", "SENT"),
           lc_snapshot_count(s, "dispatch", "DEAD"), lc_snapshot_count(s, "cleanupDue", NULL));
    printf("\nRUNS (%d active)\n%-36s  %-24s %-26s %-19s %9s %6s %6s %s\n", PQntuples(s->runs), "RUN", "JOB",
           "BUSINESS KEY", "STATUS", "DONE/EXP", "FAILED", "RUN", "IDLE");
    for (int i = 0; i < PQntuples(s->runs); i++) {
        char prog[48], age[24];
        snprintf(prog, sizeof prog, "%s/%s", lc_cell(s->runs, i, MR_SUCCESS),
                 lc_cell(s->runs, i, MR_EXPECTED));
        lc_format_age(strtoll(lc_cell(s->runs, i, MR_IDLE_S), NULL, 10), age, sizeof age);
        printf("%-36s  %-24s %-26s %-19s %9s %6s %6s %s\n", lc_cell(s->runs, i, MR_ID),
               lc_cell(s->runs, i, MR_JOB), lc_cell(s->runs, i, MR_BK), lc_cell(s->runs, i, MR_STATUS), prog,
               lc_cell(s->runs, i, MR_FAILED), lc_cell(s->runs, i, MR_RUNNING), age);
    }
    printf("\nALERTS (%d)\n", PQntuples(s->alerts));
    for (int i = 0; i < PQntuples(s->alerts); i++)
        printf("%-5s %-15s %-36s %-24s %s  %s%s%s\n", lc_cell(s->alerts, i, MA_SEVERITY),
               lc_cell(s->alerts, i, MA_KIND), lc_cell(s->alerts, i, MA_RUN), lc_cell(s->alerts, i, MA_JOB),
               lc_cell(s->alerts, i, MA_AT_SHORT),
               PQgetisnull(s->alerts, i, MA_MESSAGE) ? "" : PQgetvalue(s->alerts, i, MA_MESSAGE),
               PQgetisnull(s->alerts, i, MA_DISPATCH) ? "" : "  dispatch ",
               PQgetisnull(s->alerts, i, MA_DISPATCH) ? "" : PQgetvalue(s->alerts, i, MA_DISPATCH));
    if (s->run)
        print_detail(s);
    if (cfg->svc)
        lc_services_print_text(cfg->svc, cfg->n_svc);
    printf("\nthresholds: stale %llds, validation stale %llds\n", (long long)(cfg->stale_ms / 1000),
           (long long)(cfg->validation_stale_ms / 1000));
}

static const char *const RUN_NAMES[] = {"runId",
                                        "jobKey",
                                        "businessKey",
                                        "status",
                                        "#expectedPartitionCount",
                                        "#successPartitions",
                                        "#failedPartitions",
                                        "#runningPartitions",
                                        "#partitions",
                                        "heartbeatAt",
                                        "#idleSeconds",
                                        "startedAt",
                                        "errorCode",
                                        NULL};
static const char *const ALERT_NAMES[] = {"kind", "severity", "runId",      "jobKey", "businessKey",
                                          "at",   "message",  "dispatchId", NULL};
static const char *const DETAIL_NAMES[] = {
    "runId",        "jobKey",          "businessKey", "status",
    "errorCode",    "errorMessage",    "heartbeatAt", "#expectedPartitionCount",
    "#sourceCount", "#extractedCount", NULL};
static const char *const PART_NAMES[] = {
    "partitionId",   "status",     "#expectedRowCount", "#actualRowCount", "#writtenChunks",
    "#attemptCount", "workerNode", "errorCode",         "#idleSeconds",    NULL};
static const char *const METRIC_NAMES[] = {
    "stage", "metricName", "expectedValue", "actualValue", "result", "queryVersion", NULL};

/* {status: n} of one kind of counts (zeros omitted). */
static json_t *status_counts(const lc_snapshot *s, const char *kind)
{
    json_t *o = json_object();
    for (int i = 0; i < LL_RUN_STATUS_COUNT; i++) {
        long n = lc_snapshot_count(s, kind, LC_STATUS_ORDER[i]);
        if (n > 0)
            json_object_set_new(o, LC_STATUS_ORDER[i], json_integer(n));
    }
    return o;
}

void lc_monitor_print_json(const lc_snapshot *s, const lc_monitor_cfg *cfg)
{
    json_t *o = json_object();
    json_object_set_new(o, "serverTime", json_string(lc_snapshot_time(s)));
    json_object_set_new(o, "activeRuns", status_counts(s, "active"));
    json_object_set_new(o, "recentRuns", status_counts(s, "recent"));
    json_object_set_new(o, "recentWindowHours", json_integer(24));
    json_object_set_new(o, "dispatches",
                        json_pack("{s:i,s:i,s:i}", "PENDING",
                                  (int)lc_snapshot_count(s, "dispatch", "PENDING"), "SENT",
                                  (int)lc_snapshot_count(s, "dispatch", "SENT"), "DEAD",
                                  (int)lc_snapshot_count(s, "dispatch", "DEAD")));
    json_object_set_new(o, "cleanupDue", json_integer(lc_snapshot_count(s, "cleanupDue", NULL)));
    json_object_set_new(o, "alerts", lc_rows_json(s->alerts, ALERT_NAMES));
    json_object_set_new(o, "runs", lc_rows_json(s->runs, RUN_NAMES));
    if (s->run) {
        json_t *arr = lc_rows_json(s->run, DETAIL_NAMES);
        json_t *d = json_array_size(arr) ? json_incref(json_array_get(arr, 0)) : json_null();
        json_decref(arr);
        if (json_is_object(d)) {
            json_object_set_new(d, "partitions", lc_rows_json(s->parts, PART_NAMES));
            json_object_set_new(d, "validations", lc_rows_json(s->metrics, METRIC_NAMES));
        }
        json_object_set_new(o, "run", d);
    }
    if (cfg->svc)
        json_object_set_new(o, "services", lc_services_json(cfg->svc, cfg->n_svc));
    json_object_set_new(o, "thresholds",
                        json_pack("{s:I,s:I}", "staleMs", (json_int_t)cfg->stale_ms, "validationStaleMs",
                                  (json_int_t)cfg->validation_stale_ms));
    lc_print_json(o);
}
