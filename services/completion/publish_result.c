/*
 * publish_result.c - the publish step reports how its INSERT OVERWRITE ended (docs/contract.md §5.14).
 *
 * Only the owner of the publish claim is heard: another token, or none stored, is
 * PUBLISH_TOKEN_MISMATCH — unless the run is still on its way to PUBLISHING and the token is one
 * the ledger has not granted yet (the claim not applied yet): then the report waits, until
 * loop.prerequisite_wait is over (then PUBLISH_TOKEN_MISMATCH, §5.14 step 2). The run
 * already in the reported outcome is a replay; a run no longer PUBLISHING (e.g. PUBLISH_UNKNOWN
 * after the sweeper) is RUN_STATUS_MISMATCH: never resolved automatically, never republished.
 */
#include <stdio.h>
#include <string.h>

#include "completion.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/rules.h"
#include "ll/run_answer.h"

static const ll_stmt ST_PUBLISHED = {
    "presult_published",
    "UPDATE nifi_ops.load_run SET status = 'PUBLISHED', published_at = clock_timestamp(),"
    " heartbeat_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status = 'PUBLISHING'",
    1};

/* A terminal outcome (FAILED_PUBLISH, ll_run_status_is_terminal) ends the run: completed_at. */
static const ll_stmt ST_NOT_PUBLISHED_ENDED = {
    "presult_not_published_ended",
    "UPDATE nifi_ops.load_run SET status = $2::text, error_stage = 'PUBLISH', error_code = $3,"
    " error_message = nullif(left($4, 2000), ''), completed_at = clock_timestamp(),"
    " heartbeat_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status = 'PUBLISHING'",
    4};

/* PUBLISH_UNKNOWN stays active for an operator (docs/contract.md §3.1, §5.15): no completed_at. */
static const ll_stmt ST_NOT_PUBLISHED_ACTIVE = {
    "presult_not_published_active",
    "UPDATE nifi_ops.load_run SET status = $2::text, error_stage = 'PUBLISH', error_code = $3,"
    " error_message = nullif(left($4, 2000), ''),"
    " heartbeat_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status = 'PUBLISHING'",
    4};

typedef struct presult_in {
    char run_id[37], token[37];
    const char *outcome, *code, *message;
} presult_in;

static bool read_presult(const json_t *v, presult_in *p, ll_apply_out *out)
{
    if (!ll_need_uuid(out, v, "runId", p->run_id) || !ll_need_uuid(out, v, "publishToken", p->token) ||
        !ll_need_str(out, v, "outcome", NULL, NULL, 1, 40, &p->outcome) ||
        !ll_need_opt_str(out, v, "errorCode", 100, &p->code) ||
        !ll_need_opt_str(out, v, "message", 2000, &p->message))
        return false;
    if (strcmp(p->outcome, "PUBLISHED") != 0 && strcmp(p->outcome, "FAILED_PUBLISH") != 0 &&
        strcmp(p->outcome, "PUBLISH_UNKNOWN") != 0)
        return ll_invalid(out, "outcome: '%.40s' is not PUBLISHED, FAILED_PUBLISH or PUBLISH_UNKNOWN",
                          p->outcome);
    if (!p->message)
        p->message = "";
    return true;
}

static json_t *reply(const ll_msg *m, const presult_in *p, const char *result, const char *code,
                     const char *run_status, bool changed)
{
    json_t *r = ll_reply_new(m, p->run_id, NULL, result, code, NULL, run_status, NULL);
    json_object_set_new(r, "publishToken", json_string(p->token));
    json_object_set_new(r, "changed", json_boolean(changed));
    return r;
}

/* docs/contract.md §5.14: the run's CAS from PUBLISHING and its event; the reply. LL_DB_OK, or the failed
 * statement's result (db->err). */
static ll_db_rc record(ll_db *db, const ll_msg *m, const presult_in *p, ll_apply_out *out)
{
    bool published = strcmp(p->outcome, "PUBLISHED") == 0;
    const char *code = p->code && *p->code ? p->code : p->outcome;
    const char *q1[1] = {p->run_id};
    const char *q4[4] = {p->run_id, p->outcome, code, p->message};
    ll_run_status to = LL_RUN_PUBLISH_UNKNOWN;
    ll_run_status_parse(p->outcome, &to);
    const ll_stmt *st = published                       ? &ST_PUBLISHED
                        : ll_run_status_is_terminal(to) ? &ST_NOT_PUBLISHED_ENDED
                                                        : &ST_NOT_PUBLISHED_ACTIVE;
    ll_db_rc rc = ll_db_exec_discard(db, st, published ? q1 : q4);
    if (rc != LL_DB_OK)
        return rc;
    const char *name = published                                   ? "PUBLISH_FINISHED"
                       : strcmp(p->outcome, "FAILED_PUBLISH") == 0 ? "RUN_FAILED"
                                                                   : "PUBLISH_UNKNOWN";
    json_t *details = json_pack("{s:s}", "publishToken", p->token);
    ll_event ev = {.name = name,
                   .level = published ? "INFO" : "ERROR",
                   .run_id = p->run_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .error_code = published ? NULL : code,
                   .message = p->message,
                   .details = details};
    rc = ll_event_insert(db, &ev);
    json_decref(details);
    if (rc != LL_DB_OK)
        return rc;
    out->reply = reply(m, p, "ACCEPTED", NULL, p->outcome, true);
    return LL_DB_OK;
}

/* The publish result's answers (§5.14, ll_publish_result_decide): another token (or none stored)
 * PUBLISH_TOKEN_MISMATCH; the owner's report of the outcome the run is already in a replay; a run
 * no longer PUBLISHING RUN_STATUS_MISMATCH. Every reply changed=false. */
static const ll_run_answer ANSWERS[LL_RUN_EVENT_COUNT] = {
    LL_RUN_ANSWERS_COMMON,
    [LL_RUN_EVENT_REPLAY] = {LL_RUN_ACT_REPLY, "REPLAY", NULL, LL_RUN_RS_CURRENT, false},
    [LL_RUN_EVENT_STATUS_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
    [LL_RUN_EVENT_TOKEN_MISMATCH] = {LL_RUN_ACT_REPLY, "REJECTED", "PUBLISH_TOKEN_MISMATCH",
                                     LL_RUN_RS_CURRENT, false},
};

/* One publish result: what ANSWERS' steps need. */
typedef struct presult_ctx {
    ll_db *db;
    const ll_msg *m;
    const presult_in *p;
} presult_ctx;

static ll_apply presult_apply(void *ctx, ll_apply_out *out)
{
    const presult_ctx *c = ctx;
    return ll_apply_of_db(record(c->db, c->m, c->p, out));
}

static json_t *presult_reply(void *ctx, const ll_run_answer *row, const char *run_status)
{
    const presult_ctx *c = ctx;
    return reply(c->m, c->p, row->outcome, row->code, run_status, row->ok);
}

static const ll_run_event_ops OPS = {presult_apply, presult_reply};

ll_apply completion_apply_publish_result(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    presult_in p;
    if (!read_presult(m->value, &p, out))
        return LL_APPLY_DEAD;
    ll_run_row run;
    ll_run_found found = LL_RUN_FOUND_NONE;
    ll_db_rc rc = lock_run_event(db, p.run_id, &run, &found, out);
    if (rc != LL_DB_OK)
        return ll_apply_of_db(rc);
    ll_run_status done = LL_RUN_STATUS_COUNT; /* read_presult admits only the three outcomes */
    ll_run_status_parse(p.outcome, &done);
    ll_run_event_in in = {found, run.status, LL_RUN_PUBLISHING, done, m->wait_expired};
    bool stored = run.publish_token != NULL;
    presult_ctx ctx = {db, m, &p};
    ll_run_event ev =
        ll_publish_result_decide(&in, stored, stored && ll_uuid_equal(run.publish_token, p.token));
    ll_apply a = ll_run_event_act(ANSWERS, ev, &in, &OPS, &ctx, out);
    ll_run_row_clear(&run);
    return a;
}
