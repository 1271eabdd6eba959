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
#include "ll/run_answer.h"

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

/* The run-event ladder's answers to a claim by the stored token's owner (§5.13): PUBLISHING is
 * where the claim leads, a replay (claimed=true); past PUBLISHING, or still before
 * STAGING_VALIDATED after loop.prerequisite_wait, never a second grant, not even to the owner:
 * REPLAY RUN_STATUS_MISMATCH, claimed=false. */
static const ll_run_answer OWNER_ANSWERS[LL_RUN_EVENT_COUNT] = {
    LL_RUN_ANSWERS_COMMON,
    [LL_RUN_EVENT_REPLAY] = {LL_RUN_ACT_REPLY, "REPLAY", NULL, LL_RUN_RS_CURRENT, true},
    [LL_RUN_EVENT_STATUS_MISMATCH] = {LL_RUN_ACT_REPLY, "REPLAY", "RUN_STATUS_MISMATCH", LL_RUN_RS_CURRENT,
                                      false},
    [LL_RUN_EVENT_TOKEN_MISMATCH] = {LL_RUN_ACT_REPLY, "REPLAY", "RUN_STATUS_MISMATCH", LL_RUN_RS_CURRENT,
                                     false},
};

/* The same for any other token: a run PUBLISHING with another's token is PUBLISH_TOKEN_MISMATCH
 * (a normal race); past PUBLISHING RUN_STATUS_MISMATCH; claimed=false always. */
static const ll_run_answer OTHER_ANSWERS[LL_RUN_EVENT_COUNT] = {
    LL_RUN_ANSWERS_COMMON,
    [LL_RUN_EVENT_REPLAY] = {LL_RUN_ACT_REPLY, "REJECTED", "PUBLISH_TOKEN_MISMATCH", LL_RUN_RS_CURRENT,
                             false},
    [LL_RUN_EVENT_STATUS_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
    [LL_RUN_EVENT_TOKEN_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
};

/* One publish claim: what the answers' steps need. */
typedef struct pclaim_ctx {
    ll_db *db;
    const ll_msg *m;
    const char *run_id, *token;
} pclaim_ctx;

static ll_apply pclaim_apply(void *ctx, ll_apply_out *out)
{
    const pclaim_ctx *c = ctx;
    return ll_apply_of_db(grant(c->db, c->m, c->run_id, c->token, out));
}

static json_t *pclaim_reply(void *ctx, const ll_run_answer *row, const char *run_status)
{
    const pclaim_ctx *c = ctx;
    return reply(c->m, c->run_id, c->token, row->outcome, row->code, run_status, row->ok);
}

static const ll_run_event_ops OPS = {pclaim_apply, pclaim_reply};

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
    if (!run.found && !rejected)
        snprintf(out->reason, sizeof out->reason, "run %s not in the ledger yet", run_id);
    bool owner = run.publish_token && ll_uuid_equal(run.publish_token, token);
    /* the run-event ladder: STAGING_VALIDATED applies; PUBLISHING is where the claim leads */
    ll_run_event_in in = {run.found  ? LL_RUN_FOUND_LOCKED
                          : rejected ? LL_RUN_FOUND_REFUSED
                                     : LL_RUN_FOUND_NONE,
                          run.status, LL_RUN_STAGING_VALIDATED, LL_RUN_PUBLISHING, m->wait_expired};
    pclaim_ctx ctx = {db, m, run_id, token};
    ll_apply a = ll_run_event_act(owner ? OWNER_ANSWERS : OTHER_ANSWERS, ll_run_event_decide(&in), &in, &OPS,
                                  &ctx, out);
    ll_run_row_clear(&run);
    return a;
}
