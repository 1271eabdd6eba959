/*
 * resend.c - `loadctl resend RUN DISPATCH` (docs/contract.md §5.16, §3.4, §11 "DEAD dispatch"): after the
 * cause of a DEAD (or unacknowledged SENT) dispatch was fixed, put it back in the outbox. One
 * transaction, in the lock order run -> dispatch:
 *
 *   lock the run                         missing              -> exit 2 RUN_NOT_FOUND
 *   lock the dispatch of that run        missing / other run  -> exit 2 DISPATCH_NOT_FOUND
 *   status PENDING or ACKED              refused              -> exit 2 DISPATCH_STATUS_MISMATCH
 *   CAS DEAD/SENT -> PENDING, attempt_count 0, next_attempt_at now, last_error NULL
 *   pg_notify('load_dispatch', run id)   (delivered on commit: the dispatcher wakes at once)
 *   event DISPATCH_RESENT (WARN, details dispatchId, previousStatus + who)
 */
#include <stdio.h>
#include <string.h>

#include "ll/ledger.h"
#include "ll/rules.h"
#include "loadctl.h"

static const char USAGE[] =
    "usage: loadctl resend RUN DISPATCH [--json]\n\n"
    "Puts a DEAD or SENT dispatch (DISPATCH = dispatch id, see `loadctl show RUN`) back to\n"
    "PENDING with its attempts reset, and wakes the dispatcher. Fix the cause first (contract\n"
    "§11): do not resend repeatedly. Watch PENDING -> SENT -> ACKED with `loadctl show RUN`.\n"
    "Exit 0 resent, 1 usage, 2 RUN_NOT_FOUND, DISPATCH_NOT_FOUND or DISPATCH_STATUS_MISMATCH\n"
    "(PENDING or ACKED), 3 database.\n";

static const ll_stmt ST_LOCK_DISPATCH = {
    "resend_lock_dispatch",
    "SELECT status, dispatch_type, partition_id FROM nifi_ops.load_dispatch"
    " WHERE dispatch_id = $1::uuid AND run_id = $2::uuid FOR UPDATE",
    2};

static const ll_stmt ST_RESET = {"resend_reset",
                                 "UPDATE nifi_ops.load_dispatch SET status = 'PENDING', attempt_count = 0,"
                                 " next_attempt_at = clock_timestamp(), last_error = NULL"
                                 " WHERE dispatch_id = $1::uuid AND status IN ('DEAD', 'SENT')",
                                 1};

static const ll_stmt ST_NOTIFY = {"resend_notify", "SELECT pg_notify('load_dispatch', $1)", 1};

typedef enum { RESENT, RUN_NOT_FOUND, DISPATCH_NOT_FOUND, MISMATCH } resend_outcome;

/* The transaction's input and what it found. */
typedef struct resend_tx {
    const char *run_id, *dispatch_id;
    resend_outcome outcome;
    char previous[24];  /* the dispatch's status when locked */
    char type[32];      /* VALIDATE_RUN / REISSUE_PARTITION */
    char partition[48]; /* "" for VALIDATE_RUN */
} resend_tx;

/* Locks the dispatch and copies what it is; LL_DB_ROLLBACK with the outcome set if missing. */
static ll_db_rc lock_dispatch(ll_db *db, resend_tx *t)
{
    const char *p[2] = {t->dispatch_id, t->run_id};
    PGresult *r = ll_db_exec(db, &ST_LOCK_DISPATCH, p);
    if (!r)
        return LL_DB_ERROR;
    bool found = PQntuples(r) == 1;
    if (found) {
        snprintf(t->previous, sizeof t->previous, "%s", PQgetvalue(r, 0, 0));
        snprintf(t->type, sizeof t->type, "%s", PQgetvalue(r, 0, 1));
        snprintf(t->partition, sizeof t->partition, "%s", PQgetvalue(r, 0, 2));
    }
    PQclear(r);
    if (!found)
        return t->outcome = DISPATCH_NOT_FOUND, LL_DB_ROLLBACK;
    return LL_DB_OK;
}

static ll_db_rc resend_body(ll_db *db, void *arg)
{
    resend_tx *t = arg;
    ll_run_row run;
    ll_db_rc rc = ll_run_lock(db, t->run_id, &run);
    bool found = run.found;
    ll_run_row_clear(&run);
    if (rc != LL_DB_OK)
        return rc;
    if (!found)
        return t->outcome = RUN_NOT_FOUND, LL_DB_ROLLBACK;
    if ((rc = lock_dispatch(db, t)) != LL_DB_OK)
        return rc;
    const char *p[1] = {t->dispatch_id};
    PGresult *r = ll_db_exec(db, &ST_RESET, p);
    if (!r)
        return LL_DB_ERROR;
    long n = ll_db_affected(r);
    PQclear(r);
    if (n != 1) /* PENDING or ACKED: nothing to resend */
        return t->outcome = MISMATCH, LL_DB_ROLLBACK;
    const char *np[1] = {t->run_id};
    if (!(r = ll_db_exec(db, &ST_NOTIFY, np)))
        return LL_DB_ERROR;
    PQclear(r);
    json_t *details = lc_audit_details();
    json_object_set_new(details, "dispatchId", json_string(t->dispatch_id));
    json_object_set_new(details, "dispatchType", json_string(t->type));
    json_object_set_new(details, "previousStatus", json_string(t->previous));
    ll_event ev = {.name = "DISPATCH_RESENT",
                   .level = "WARN",
                   .run_id = t->run_id,
                   .partition_id = t->partition[0] ? t->partition : NULL,
                   .chunk_index = -1,
                   .row_count = -1,
                   .details = details};
    rc = ll_event_insert(db, &ev);
    json_decref(details);
    if (rc == LL_DB_OK)
        t->outcome = RESENT;
    return rc;
}

int lc_resend(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *pos[2];
    int npos;
    lc_optspec specs[] = {{NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 2, 2, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    char run_id[37], dispatch_id[37];
    if (ll_uuid_canonical(pos[0], run_id) != 0 || ll_uuid_canonical(pos[1], dispatch_id) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "RUN and DISPATCH must be ids (UUIDs)");
    ll_db db;
    if ((rc = lc_db_open(o, &db)) != LC_OK)
        return rc;
    resend_tx t = {.run_id = run_id, .dispatch_id = dispatch_id};
    ll_db_rc dr = ll_db_transaction(&db, resend_body, &t);
    if (dr != LL_DB_OK && dr != LL_DB_ROLLBACK)
        rc = lc_fail_db(o, &db, "resend");
    else if (t.outcome == RUN_NOT_FOUND)
        rc = lc_fail(o, LC_REFUSED, "RUN_NOT_FOUND", json_pack("{s:s}", "runId", run_id),
                     "no run %s in the ledger", run_id);
    else if (t.outcome == DISPATCH_NOT_FOUND)
        rc = lc_fail(o, LC_REFUSED, "DISPATCH_NOT_FOUND", json_pack("{s:s}", "dispatchId", dispatch_id),
                     "run %s has no dispatch %s", run_id, dispatch_id);
    else if (t.outcome == MISMATCH)
        rc = lc_fail(o, LC_REFUSED, "DISPATCH_STATUS_MISMATCH", json_pack("{s:s}", "status", t.previous),
                     "dispatch is %s; only DEAD or SENT can be resent", t.previous);
    else if (o->json)
        lc_print_json(json_pack("{s:b,s:s,s:s,s:s,s:s,s:b}", "ok", 1, "runId", run_id, "dispatchId",
                                dispatch_id, "status", "PENDING", "previousStatus", t.previous, "changed",
                                1));
    else
        printf("dispatch %s (%s) of run %s: %s -> PENDING, attempts reset; dispatcher notified\n",
               dispatch_id, t.type, run_id, t.previous);
    ll_db_close(&db);
    return rc;
}
