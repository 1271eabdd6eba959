/*
 * runs.c - `loadctl runs` (alias `status`): runs newest first with their progress (contract
 * §5.20), as a table or, with --json, {"runs": [...]}. Read-only, no locks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/rules.h"
#include "ll/status.h"
#include "loadctl.h"
#include "runs_sql.h"

static const char USAGE[] =
    "usage: loadctl runs [--job KEY] [--business-key KEY] [--status STATUS] [--limit 1..500] [--json]\n"
    "       loadctl status ...   (the same)\n\n"
    "Runs newest first (started_at) with their partition progress; unset filters are ignored.\n"
    "--limit defaults to 50. --status is one of the 16 run statuses.\n";

static const char *const NAMES[] = {"runId",
                                    "jobKey",
                                    "businessKey",
                                    "status",
                                    "#sourceCount",
                                    "#extractedCount",
                                    "#stagingCount",
                                    "#targetCount",
                                    "#expectedPartitionCount",
                                    "#successPartitionCount",
                                    "#failedPartitionCount",
                                    "startedAt",
                                    "heartbeatAt",
                                    "completedAt",
                                    "errorCode",
                                    NULL};

static void print_table(const PGresult *r)
{
    printf("%-36s  %-24s %-20s %-24s %9s %9s %9s %s\n", "RUN", "JOB", "BUSINESS KEY", "STATUS", "SOURCE",
           "EXTRACTED", "PARTS", "STARTED (UTC)");
    for (int i = 0; i < PQntuples(r); i++) {
        char parts[48];
        snprintf(parts, sizeof parts, "%s/%s", lc_cell(r, i, 9), lc_cell(r, i, 8));
        if (!PQgetisnull(r, i, 10) && strcmp(PQgetvalue(r, i, 10), "0") != 0)
            snprintf(parts + strlen(parts), sizeof parts - strlen(parts), " %sF", PQgetvalue(r, i, 10));
        printf("%-36s  %-24.24s %-20.20s %-24s %9s %9s %9s %.19s\n", lc_cell(r, i, 0), lc_cell(r, i, 1),
               lc_cell(r, i, 2), lc_cell(r, i, 3), lc_cell(r, i, 4), lc_cell(r, i, 5), parts,
               lc_cell(r, i, 11));
    }
}

int lc_runs(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *job = NULL, *bk = NULL, *status = NULL, *limit = "50", *pos[1];
    int npos;
    lc_optspec specs[] = {{"job", &job, NULL},
                          {"business-key", &bk, NULL},
                          {"status", &status, NULL},
                          {"limit", &limit, NULL},
                          {NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 0, 0, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    ll_run_status st;
    long lim;
    if (status && ll_run_status_parse(status, &st) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--status must be one of the 16 run statuses");
    if (lc_parse_int(limit, 1, 500, &lim) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--limit must be 1..500");
    if ((job && strlen(job) > 200) || (bk && strlen(bk) > 200))
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--job and --business-key are at most 200 chars");
    ll_db db;
    if ((rc = lc_db_open(o, &db)) != LC_OK)
        return rc;
    const char *p[4] = {job, bk, status, limit};
    PGresult *r = lc_query(o, &db, &RUNS_LIST, p);
    if (!r) {
        ll_db_close(&db);
        return LC_DB;
    }
    if (o->json)
        lc_print_json(json_pack("{s:o}", "runs", lc_rows_json(r, NAMES)));
    else
        print_table(r);
    PQclear(r);
    ll_db_close(&db);
    return LC_OK;
}
