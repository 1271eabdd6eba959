/*
 * runs.c - `loadctl runs`: runs newest first with their progress (contract §5.20), as a table
 * or, with --json, one JSON array.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/rules.h"
#include "ll/status.h"
#include "loadctl.h"

/* Unset filters are NULL parameters, so the SQL text never changes with the input. */
static const char SQL_RUNS[] =
    "SELECT run_id, job_key, business_key, status, coalesce(source_count, 0), extracted_count,"
    " coalesce(expected_partition_count, 0), success_partition_count, failed_partition_count,"
    " to_char(started_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS'), coalesce(error_code, '')"
    " FROM nifi_ops.load_run"
    " WHERE ($1::text IS NULL OR job_key = $1) AND ($2::text IS NULL OR business_key = $2)"
    "   AND ($3::text IS NULL OR status = $3)"
    " ORDER BY started_at DESC LIMIT $4::int";

int lc_runs(const lc_opts *o, int argc, char **argv)
{
    const char *job = NULL, *bk = NULL, *status = NULL, *limit = "50";
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--job") == 0)
            job = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--business-key") == 0)
            bk = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--status") == 0)
            status = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--limit") == 0)
            limit = argv[++i];
        else {
            fprintf(stderr, "usage: loadctl runs [--job KEY] [--business-key KEY] [--status STATUS] [--limit 1..500]\n");
            return LC_USAGE;
        }
    }
    ll_run_status st;
    int lim = atoi(limit);
    if ((status && ll_run_status_parse(status, &st) != 0) || lim < 1 || lim > 500) {
        fprintf(stderr, "loadctl runs: --status must be a run status, --limit 1..500\n");
        return LC_USAGE;
    }
    PGconn *c = lc_connect(o);
    if (!c)
        return LC_DB;
    const char *p[4] = {job, bk, status, limit};
    PGresult *r = PQexecParams(c, SQL_RUNS, 4, NULL, p, NULL, NULL, 0);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "loadctl runs: %s", PQresultErrorMessage(r));
        PQclear(r);
        PQfinish(c);
        return LC_DB;
    }
    json_t *arr = json_array();
    if (!o->json)
        printf("%-36s  %-24s %-12s %-20s %9s %9s %5s %s\n", "RUN", "JOB", "BUSINESS KEY", "STATUS",
               "SOURCE", "EXTRACTED", "PARTS", "STARTED (UTC)");
    for (int i = 0; i < PQntuples(r); i++) {
        if (o->json) {
            json_array_append_new(arr, json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:s,s:s}",
                "runId", PQgetvalue(r, i, 0), "jobKey", PQgetvalue(r, i, 1), "businessKey", PQgetvalue(r, i, 2),
                "status", PQgetvalue(r, i, 3), "sourceCount", (json_int_t)atoll(PQgetvalue(r, i, 4)),
                "extractedCount", (json_int_t)atoll(PQgetvalue(r, i, 5)),
                "expectedPartitionCount", (json_int_t)atoll(PQgetvalue(r, i, 6)),
                "successPartitionCount", (json_int_t)atoll(PQgetvalue(r, i, 7)),
                "failedPartitionCount", (json_int_t)atoll(PQgetvalue(r, i, 8)),
                "startedAt", PQgetvalue(r, i, 9), "errorCode", PQgetvalue(r, i, 10)));
        } else {
            char parts[32];
            snprintf(parts, sizeof parts, "%s/%s", PQgetvalue(r, i, 7), PQgetvalue(r, i, 6));
            printf("%-36s  %-24.24s %-12.12s %-20s %9s %9s %5s %s\n", PQgetvalue(r, i, 0), PQgetvalue(r, i, 1),
                   PQgetvalue(r, i, 2), PQgetvalue(r, i, 3), PQgetvalue(r, i, 4), PQgetvalue(r, i, 5), parts,
                   PQgetvalue(r, i, 9));
        }
    }
    if (o->json) {
        char *s = json_dumps(arr, JSON_INDENT(2));
        puts(s);
        free(s);
    }
    json_decref(arr);
    PQclear(r);
    PQfinish(c);
    return LC_OK;
}
