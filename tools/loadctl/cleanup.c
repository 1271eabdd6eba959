/*
 * cleanup.c - retention (docs/contract.md §5.17, §5.18, §11 "Retention / cleanup"):
 *
 *   `loadctl cleanup-candidates`  the runs whose staging table and run directory may go, oldest
 *                                 ended first (no locks), as NiFi PG-70 or an operator reads them;
 *   `loadctl cleanup RUN`         records that they went: one transaction that locks the run and
 *                                 evaluates "due" in the same statement, then sets cleaned_at
 *                                 once and writes RUN_CLEANED. loadctl deletes nothing itself.
 *
 * The cleanup mark is not a status transition: status, version_no and heartbeat_at stay as they
 * are (heartbeat_at is the ended time of a run without completed_at, so touching it would move
 * the run's retention).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/ledger.h"
#include "ll/rules.h"
#include "retention.h"
#include "cleanup_sql.h"

static const char USAGE_CANDIDATES[] =
    "usage: loadctl cleanup-candidates [--job KEY] [--limit 1..500] [retention options] [--json]\n\n"
    "Runs not yet cleaned whose retention has passed, oldest ended first (then run id): SUCCESS\n"
    "runs after the success retention, failed and timed-out runs after the failed retention.\n"
    "Active runs (PUBLISH_UNKNOWN too) never are. At most min(--limit, --max-batch) rows\n"
    "(--limit defaults to 50).\n" LC_RETENTION_USAGE;

static const char USAGE_CLEANUP[] =
    "usage: loadctl cleanup RUN [--dropped-table T] [--deleted-path P] [retention options] [--json]\n\n"
    "Records that the run's staging table and HDFS run directory were removed (by NiFi PG-70 or by\n"
    "hand): sets cleaned_at once and writes the event RUN_CLEANED with the values given (recorded\n"
    "only; loadctl deletes nothing). --dropped-table is at most 300 chars; --deleted-path must be\n"
    "an absolute HDFS path of [A-Za-z0-9_.=/-] without a '..' segment.\n"
    "Exit 0 recorded or already cleaned (changed=false), 1 usage, 2 RUN_NOT_FOUND,\n"
    "CLEANUP_NOT_DUE (active, or still inside its retention), INVALID_DROPPED_TABLE or\n"
    "INVALID_DELETED_PATH, 3 database.\n" LC_RETENTION_USAGE;

static const char *const CANDIDATE_NAMES[] = {"runId",       "jobKey",         "businessKey",
                                              "status",      "hdfsRunPath",    "stageTable",
                                              "completedAt", "retentionClass", NULL};

/* §5.18 step 1: lock the run and evaluate "due" in the same statement. */
static const ll_stmt ST_LOCK_DUE = {
    "cleanup_lock_due",
    "SELECT r.status, r.cleaned_at IS NOT NULL, " LC_PAST_RETENTION(
        "$2", "$3") " FROM nifi_ops.load_run r WHERE r.run_id = $1::uuid FOR UPDATE",
    3};

static const ll_stmt ST_MARK = {"cleanup_mark",
                                "UPDATE nifi_ops.load_run SET cleaned_at = clock_timestamp()"
                                " WHERE run_id = $1::uuid AND cleaned_at IS NULL",
                                1};

int lc_cleanup_candidates(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    lc_retention rt;
    const char *pos[1], *job = NULL, *limit = "50";
    int npos;
    lc_optspec specs[6] = {{"job", &job, NULL}, {"limit", &limit, NULL}};
    lc_retention_options(&rt, specs + 2);
    specs[5] = (lc_optspec){NULL, NULL, NULL};
    int rc = lc_args(o, USAGE_CANDIDATES, argc, argv, specs, pos, 0, 0, &npos);
    if (rc != LC_CONTINUE || (rc = lc_retention_parse(o, &rt)) != LC_CONTINUE)
        return rc;
    long lim;
    if (job && !ll_is_job_key(job))
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--job must match ^[A-Z0-9_]{1,200}$");
    if (lc_parse_int(limit, 1, 500, &lim) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--limit must be 1..500");
    char eff[24];
    snprintf(eff, sizeof eff, "%ld", lim < rt.max_batch ? lim : rt.max_batch);
    ll_db db;
    if ((rc = lc_db_open(o, &db)) != LC_OK)
        return rc;
    const char *p[4] = {job, rt.success_param, rt.failed_param, eff};
    PGresult *r = lc_query(o, &db, &CLEANUP_CANDIDATES, p);
    if (!r) {
        ll_db_close(&db);
        return LC_DB;
    }
    if (o->json) {
        lc_print_json(json_pack("{s:o,s:I}", "runs", lc_rows_json(r, CANDIDATE_NAMES), "limit",
                                (json_int_t)strtol(eff, NULL, 10)));
    } else {
        printf("%-36s  %-24s %-12s %-24s %-7s %-24s %s\n", "RUN", "JOB", "BUSINESS KEY", "STATUS", "CLASS",
               "ENDED (UTC)", "RUN PATH / STAGE TABLE");
        for (int i = 0; i < PQntuples(r); i++)
            printf("%-36s  %-24.24s %-12.12s %-24s %-7s %-24s %s %s\n", lc_cell(r, i, 0), lc_cell(r, i, 1),
                   lc_cell(r, i, 2), lc_cell(r, i, 3), lc_cell(r, i, 7), lc_cell(r, i, 6), lc_cell(r, i, 4),
                   lc_cell(r, i, 5));
    }
    PQclear(r);
    ll_db_close(&db);
    return LC_OK;
}

typedef enum { CLEANED, ALREADY, NOT_FOUND, NOT_DUE } cleanup_outcome;

/* The transaction's input and what it found. */
typedef struct cleanup_tx {
    const char *run_id, *dropped_table, *deleted_path;
    const lc_retention *rt;
    cleanup_outcome outcome;
    char status[48];
} cleanup_tx;

static ll_db_rc cleanup_body(ll_db *db, void *arg)
{
    cleanup_tx *t = arg;
    const char *p[3] = {t->run_id, t->rt->success_param, t->rt->failed_param};
    PGresult *r = ll_db_exec(db, &ST_LOCK_DUE, p);
    if (!r)
        return LL_DB_ERROR;
    bool found = PQntuples(r) == 1;
    bool cleaned = found && ll_db_bool(r, 0, 1), due = found && ll_db_bool(r, 0, 2);
    snprintf(t->status, sizeof t->status, "%s", found ? PQgetvalue(r, 0, 0) : "");
    PQclear(r);
    if (!found)
        return t->outcome = NOT_FOUND, LL_DB_ROLLBACK;
    if (cleaned) /* §5.18 step 2: regardless of due */
        return t->outcome = ALREADY, LL_DB_ROLLBACK;
    if (!due)
        return t->outcome = NOT_DUE, LL_DB_ROLLBACK;
    if (!(r = ll_db_exec(db, &ST_MARK, p)))
        return LL_DB_ERROR;
    long n = ll_db_affected(r);
    PQclear(r);
    if (n != 1)
        return t->outcome = ALREADY, LL_DB_ROLLBACK;
    json_t *details = lc_audit_details();
    json_object_set_new(details, "droppedTable",
                        t->dropped_table ? lc_json_str(t->dropped_table) : json_null());
    json_object_set_new(details, "deletedPath", t->deleted_path ? json_string(t->deleted_path) : json_null());
    ll_event ev = {.name = "RUN_CLEANED",
                   .level = "INFO",
                   .run_id = t->run_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .details = details};
    ll_db_rc rc = ll_event_insert(db, &ev);
    json_decref(details);
    if (rc == LL_DB_OK)
        t->outcome = CLEANED;
    return rc;
}

/* The input rules of §5.18 (else 422 there): LC_REFUSED with INVALID_DROPPED_TABLE or
 * INVALID_DELETED_PATH when one fails, LC_CONTINUE when they hold. */
static int check_args(const lc_opts *o, const char *table, const char *path)
{
    long chars = table ? ll_utf8_chars(table) : 0;
    if (chars < 0 || chars > 300)
        return lc_fail(o, LC_REFUSED, "INVALID_DROPPED_TABLE", NULL,
                       "--dropped-table must be at most 300 chars of UTF-8");
    if (path && (!ll_is_hdfs_path(path) || ll_path_has_dotdot(path)))
        return lc_fail(o, LC_REFUSED, "INVALID_DELETED_PATH", NULL,
                       "--deleted-path must be an absolute HDFS path of [A-Za-z0-9_.=/-] without '..'");
    return LC_CONTINUE;
}

int lc_cleanup(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    lc_retention rt;
    const char *pos[1], *table = NULL, *path = NULL;
    int npos;
    lc_optspec specs[6] = {{"dropped-table", &table, NULL}, {"deleted-path", &path, NULL}};
    lc_retention_options(&rt, specs + 2);
    specs[5] = (lc_optspec){NULL, NULL, NULL};
    int rc = lc_args(o, USAGE_CLEANUP, argc, argv, specs, pos, 1, 1, &npos);
    if (rc != LC_CONTINUE || (rc = lc_retention_parse(o, &rt)) != LC_CONTINUE)
        return rc;
    char run_id[37];
    if (ll_uuid_canonical(pos[0], run_id) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "RUN must be a run id (UUID)");
    if ((rc = check_args(o, table, path)) != LC_CONTINUE)
        return rc;
    ll_db db;
    if ((rc = lc_db_open(o, &db)) != LC_OK)
        return rc;
    cleanup_tx t = {.run_id = run_id, .dropped_table = table, .deleted_path = path, .rt = &rt};
    ll_db_rc dr = ll_db_transaction(&db, cleanup_body, &t);
    if (dr != LL_DB_OK && dr != LL_DB_ROLLBACK)
        rc = lc_fail_db(o, &db, "cleanup");
    else if (t.outcome == NOT_FOUND)
        rc = lc_fail(o, LC_REFUSED, "RUN_NOT_FOUND", json_pack("{s:s}", "runId", run_id),
                     "no run %s in the ledger", run_id);
    else if (t.outcome == NOT_DUE)
        rc = lc_fail(o, LC_REFUSED, "CLEANUP_NOT_DUE", json_pack("{s:s}", "runStatus", t.status),
                     "run is %s and not past its retention", t.status);
    else if (o->json)
        lc_print_json(json_pack("{s:b,s:s,s:s,s:b}", "ok", 1, "runId", run_id, "runStatus", t.status,
                                "changed", t.outcome == CLEANED));
    else if (t.outcome == CLEANED)
        printf("run %s (%s): cleanup recorded (event RUN_CLEANED)\n", run_id, t.status);
    else
        printf("run %s (%s) was already cleaned: nothing changed\n", run_id, t.status);
    ll_db_close(&db);
    return rc;
}
