/*
 * resolve.c - `loadctl resolve-publish-unknown RUN --as PUBLISHED|FAILED_PUBLISH --reason TEXT`
 * (docs/contract.md §5.15, §11 "PUBLISH_UNKNOWN"): the operator's verdict on a publish whose answer was
 * lost, after checking Hive. One transaction:
 *
 *   lock the run (FOR UPDATE)            missing          -> exit 2 RUN_NOT_FOUND
 *   status = resolution                  already resolved -> exit 0, changed=false
 *   status != PUBLISH_UNKNOWN            refused          -> exit 2 RUN_STATUS_MISMATCH
 *   CAS PUBLISH_UNKNOWN -> resolution with the §3.1 side effects, version_no + 1, heartbeat
 *   event PUBLISH_UNKNOWN_RESOLVED (WARN, message = reason, details resolution + who)
 *
 * The publish token is not checked (the operator overrides it). After PUBLISHED the target
 * validation does not resume by itself: the operator drives it (printed as a reminder).
 */
#include <stdio.h>
#include <string.h>

#include "ll/ledger.h"
#include "ll/rules.h"
#include "loadctl.h"

static const char USAGE[] =
    "usage: loadctl resolve-publish-unknown RUN --as PUBLISHED|FAILED_PUBLISH --reason TEXT [--json]\n\n"
    "Resolves a run in PUBLISH_UNKNOWN after the Hive query history and the target were checked\n"
    "(docs/contract.md §11). --reason (5..2000 chars) records the evidence; it is stored in the event\n"
    "PUBLISH_UNKNOWN_RESOLVED with your OS user and host (and as the run's error_message for\n"
    "FAILED_PUBLISH). When in doubt, never resolve to PUBLISHED.\n"
    "Exit 0 resolved or already so (changed=false), 1 usage, 2 RUN_NOT_FOUND,\n"
    "RUN_STATUS_MISMATCH (the run is not PUBLISH_UNKNOWN) or INVALID_REASON (not 5..2000\n"
    "chars), 3 database.\n";

/* §3.1 "PUBLISHED (operator resolve): published_at = now and error fields cleared". */
static const ll_stmt ST_TO_PUBLISHED = {
    "resolve_to_published",
    "UPDATE nifi_ops.load_run SET status = 'PUBLISHED', version_no = version_no + 1,"
    " heartbeat_at = clock_timestamp(), published_at = clock_timestamp(),"
    " error_stage = NULL, error_code = NULL, error_message = NULL"
    " WHERE run_id = $1::uuid AND status = 'PUBLISH_UNKNOWN'",
    1};

/* §3.1 "FAILED_PUBLISH from operator resolve: completed_at = now, error_code
 * PUBLISH_UNKNOWN_RESOLVED, error_message = operator reason" (error_stage stays PUBLISH). */
static const ll_stmt ST_TO_FAILED = {
    "resolve_to_failed_publish",
    "UPDATE nifi_ops.load_run SET status = 'FAILED_PUBLISH', version_no = version_no + 1,"
    " heartbeat_at = clock_timestamp(), completed_at = clock_timestamp(),"
    " error_stage = 'PUBLISH', error_code = 'PUBLISH_UNKNOWN_RESOLVED', error_message = $2"
    " WHERE run_id = $1::uuid AND status = 'PUBLISH_UNKNOWN'",
    2};

typedef enum { RESOLVED, UNCHANGED, NOT_FOUND, MISMATCH } resolve_outcome;

/* The transaction's input and what it found. */
typedef struct resolve_tx {
    const char *run_id, *resolution, *reason;
    resolve_outcome outcome;
    char status[48]; /* the run's status when locked */
} resolve_tx;

static ll_db_rc resolve_body(ll_db *db, void *arg)
{
    resolve_tx *t = arg;
    ll_run_row run;
    ll_db_rc rc = ll_run_lock(db, t->run_id, &run);
    if (rc != LL_DB_OK)
        return rc;
    bool found = run.found;
    snprintf(t->status, sizeof t->status, "%s", found ? ll_run_status_name(run.status) : "");
    ll_run_row_clear(&run);
    if (!found)
        return t->outcome = NOT_FOUND, LL_DB_ROLLBACK;
    if (strcmp(t->status, t->resolution) == 0)
        return t->outcome = UNCHANGED, LL_DB_ROLLBACK;
    if (strcmp(t->status, "PUBLISH_UNKNOWN") != 0)
        return t->outcome = MISMATCH, LL_DB_ROLLBACK;
    bool published = strcmp(t->resolution, "PUBLISHED") == 0;
    const char *p[2] = {t->run_id, t->reason};
    PGresult *r = ll_db_exec(db, published ? &ST_TO_PUBLISHED : &ST_TO_FAILED, p);
    if (!r)
        return LL_DB_ERROR;
    long n = ll_db_affected(r);
    PQclear(r);
    if (n != 1) /* impossible under the run lock; refuse rather than write an event */
        return t->outcome = MISMATCH, LL_DB_ROLLBACK;
    json_t *details = lc_audit_details();
    json_object_set_new(details, "resolution", json_string(t->resolution));
    json_object_set_new(details, "previousStatus", json_string("PUBLISH_UNKNOWN"));
    ll_event ev = {.name = "PUBLISH_UNKNOWN_RESOLVED",
                   .level = "WARN",
                   .run_id = t->run_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .message = t->reason,
                   .details = details};
    rc = ll_event_insert(db, &ev);
    json_decref(details);
    if (rc == LL_DB_OK)
        t->outcome = RESOLVED;
    return rc;
}

/* Checks the arguments: LC_USAGE for a malformed command line, LC_REFUSED (INVALID_REASON) for
 * a reason the contract refuses; LC_CONTINUE when they are fine. */
static int check_args(const lc_opts *o, const char *run, char run_id[37], const char *as, const char *reason)
{
    if (ll_uuid_canonical(run, run_id) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "RUN must be a run id (UUID)");
    if (!as || (strcmp(as, "PUBLISHED") != 0 && strcmp(as, "FAILED_PUBLISH") != 0))
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--as must be PUBLISHED or FAILED_PUBLISH");
    return lc_check_reason(o, reason, "the evidence");
}

int lc_resolve(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *pos[1], *as = NULL, *reason = NULL;
    int npos;
    lc_optspec specs[] = {{"as", &as, NULL}, {"reason", &reason, NULL}, {NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 1, 1, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    char run_id[37];
    if ((rc = check_args(o, pos[0], run_id, as, reason)) != LC_CONTINUE)
        return rc;
    ll_db db;
    if ((rc = lc_db_open(o, &db)) != LC_OK)
        return rc;
    resolve_tx t = {.run_id = run_id, .resolution = as, .reason = reason};
    ll_db_rc dr = ll_db_transaction(&db, resolve_body, &t);
    if (dr != LL_DB_OK && dr != LL_DB_ROLLBACK)
        rc = lc_fail_db(o, &db, "resolve-publish-unknown");
    else if (t.outcome == NOT_FOUND)
        rc = lc_fail(o, LC_REFUSED, "RUN_NOT_FOUND", json_pack("{s:s}", "runId", run_id),
                     "no run %s in the ledger", run_id);
    else if (t.outcome == MISMATCH)
        rc = lc_fail(o, LC_REFUSED, "RUN_STATUS_MISMATCH", json_pack("{s:s}", "runStatus", t.status),
                     "run is %s, not PUBLISH_UNKNOWN", t.status);
    else {
        bool changed = t.outcome == RESOLVED;
        if (o->json)
            lc_print_json(json_pack("{s:b,s:s,s:s,s:b}", "ok", 1, "runId", run_id, "runStatus", as, "changed",
                                    changed));
        else if (changed)
            printf("run %s: PUBLISH_UNKNOWN -> %s (event PUBLISH_UNKNOWN_RESOLVED recorded)\n", run_id, as);
        else
            printf("run %s is already %s: nothing changed\n", run_id, as);
        if (changed && strcmp(as, "PUBLISHED") == 0)
            fprintf(stderr, "loadctl: note: target validation does not resume by itself; record the"
                            " TARGET metrics and drive success or failure (docs/contract.md §5.15)\n");
    }
    ll_db_close(&db);
    return rc;
}
