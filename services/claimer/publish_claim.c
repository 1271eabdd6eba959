/*
 * publish_claim.c - the publish step asks to own the INSERT OVERWRITE of a run (docs/contract.md §5.13).
 *
 * A run already PUBLISHING answers claimed = (stored token = request token): the same token is a
 * retry after a lost answer, another is a normal race. Otherwise the CAS STAGING_VALIDATED ->
 * PUBLISHING stores the token and publish_started_at, and the token joins load_publish_token
 * (one grant per run, ever). A run still on its way to STAGING_VALIDATED defers the claim (until
 * loop.prerequisite_wait is over: then claimed=false, RUN_STATUS_MISMATCH); a run
 * past PUBLISHING never grants one again, not even to the old token (no republish).
 */
#include <stdio.h>
#include <string.h>

#include "claimer.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/ledger.h"
#include "ll/rules.h"

static const ll_stmt ST_CLAIM = {
    "pclaim_cas",
    "UPDATE nifi_ops.load_run SET status = 'PUBLISHING', publish_token = $2::uuid,"
    " publish_started_at = clock_timestamp(), heartbeat_at = clock_timestamp(),"
    " version_no = version_no + 1 WHERE run_id = $1::uuid AND status = 'STAGING_VALIDATED'",
    2};

static const ll_stmt ST_TOKEN = {
    "pclaim_token_history",
    "INSERT INTO nifi_ops.load_publish_token (run_id, publish_token) VALUES ($1::uuid, $2::uuid)", 2};

static json_t *reply(const ll_msg *m, const char *run_id, const char *token, const char *outcome,
                     const char *code, const char *run_status, bool claimed)
{
    json_t *r = ll_reply_new(m, run_id, NULL, outcome, code, NULL, run_status, NULL);
    json_object_set_new(r, "publishToken", json_string(token));
    json_object_set_new(r, "claimed", json_boolean(claimed));
    return r;
}

/* docs/contract.md §5.13: STAGING_VALIDATED -> PUBLISHING with the token, its history row and event; the
 * reply. LL_DB_OK, or the failed statement's result (db->err). */
static ll_db_rc grant(ll_db *db, const ll_msg *m, const char *run_id, const char *token, ll_apply_out *out)
{
    const char *p[2] = {run_id, token};
    json_t *details = json_pack("{s:s}", "publishToken", token);
    ll_event ev = {.name = "PUBLISH_STARTED",
                   .level = "INFO",
                   .run_id = run_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .details = details};
    ll_db_rc rc = ll_db_exec_discard(db, &ST_CLAIM, p);
    if (rc == LL_DB_OK)
        rc = ll_db_exec_discard(db, &ST_TOKEN, p);
    if (rc == LL_DB_OK)
        rc = ll_event_insert(db, &ev);
    json_decref(details);
    if (rc != LL_DB_OK)
        return rc;
    out->reply = reply(m, run_id, token, "ACCEPTED", NULL, "PUBLISHING", true);
    return LL_DB_OK;
}

ll_apply claimer_apply_publish_claim(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    char run_id[37], token[37];
    if (!ll_need_uuid(out, m->value, "runId", run_id) || !ll_need_uuid(out, m->value, "publishToken", token))
        return LL_APPLY_DEAD;
    ll_run_row run;
    if (ll_run_lock(db, run_id, &run) != LL_DB_OK)
        return LL_APPLY_DB;
    bool rejected = false;
    if (!run.found && ll_run_request_rejected(db, run_id, &rejected) != LL_DB_OK) {
        ll_run_row_clear(&run);
        return LL_APPLY_DB;
    }
    ll_apply a = LL_APPLY_ROLLBACK;
    const char *rs = run.found ? ll_run_status_name(run.status) : NULL;
    bool owner = run.publish_token && ll_uuid_equal(run.publish_token, token);
    /* the run-event ladder: STAGING_VALIDATED applies; PUBLISHING is where the claim leads */
    ll_run_event_in in = {run.found  ? LL_RUN_FOUND_LOCKED
                          : rejected ? LL_RUN_FOUND_REFUSED
                                     : LL_RUN_FOUND_NONE,
                          run.status, LL_RUN_STAGING_VALIDATED, LL_RUN_PUBLISHING, m->wait_expired};
    switch (ll_run_event_decide(&in)) {
    case LL_RUN_EVENT_RUN_NOT_FOUND:
        out->reply = reply(m, run_id, token, "REJECTED", "RUN_NOT_FOUND", NULL, false);
        break;
    case LL_RUN_EVENT_DEFER_RUN:
        snprintf(out->reason, sizeof out->reason, "run %s not in the ledger yet", run_id);
        a = LL_APPLY_DEFER;
        break;
    case LL_RUN_EVENT_REPLAY:
        /* PUBLISHING: claimed = (stored token = request token) */
        out->reply = owner ? reply(m, run_id, token, "REPLAY", NULL, rs, true)
                           : reply(m, run_id, token, "REJECTED", "PUBLISH_TOKEN_MISMATCH", rs, false);
        break;
    case LL_RUN_EVENT_APPLY:
        a = ll_apply_of_db(grant(db, m, run_id, token, out));
        break;
    case LL_RUN_EVENT_DEFER:
        snprintf(out->reason, sizeof out->reason, "run is %s; waiting for STAGING_VALIDATED", rs);
        a = LL_APPLY_DEFER;
        break;
    case LL_RUN_EVENT_STATUS_MISMATCH:
    case LL_RUN_EVENT_TOKEN_MISMATCH:
    default:
        /* past PUBLISHING (or ended): never a second grant, not even to the owner; still before
         * STAGING_VALIDATED after loop.prerequisite_wait: the CAS fails, claimed=false (§5.13) */
        out->reply = reply(m, run_id, token, owner ? "REPLAY" : "REJECTED", "RUN_STATUS_MISMATCH", rs, false);
        break;
    }
    ll_run_row_clear(&run);
    return a;
}
