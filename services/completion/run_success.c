/*
 * run_success.c - the target validation asks to end the run in SUCCESS (docs/contract.md §5.10): only
 * from PUBLISHED, with at least one TARGET metric stored and none FAIL; target_count from the
 * request, else from the TARGET_COUNT metric. A run still on its way to PUBLISHED defers the
 * request until loop.prerequisite_wait is over; then, like any other status, it is answered
 * success=false with reasons ["RUN_STATUS <status>"] (§5.10 step 3).
 */
#include <stdio.h>
#include <string.h>

#include "completion.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/rules.h"
#include "ll/run_answer.h"

static const ll_stmt ST_SUCCESS = {
    "success_cas",
    "UPDATE nifi_ops.load_run SET status = 'SUCCESS', target_count = $2::bigint,"
    " completed_at = clock_timestamp(), heartbeat_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status = 'PUBLISHED'",
    2};

static json_t *outcome(const ll_msg *m, const char *run_id, const char *result, const char *code,
                       const char *run_status, bool success, const ll_strlist *reasons)
{
    json_t *r = ll_reply_new(m, run_id, NULL, result, code, NULL, run_status, NULL);
    json_object_set_new(r, "success", json_boolean(success));
    json_object_set_new(r, "reasons", reasons ? reasons_json(reasons) : json_array());
    return r;
}

static const gated_step STEP = {"TARGET", "TARGET_COUNT", "RUN_SUCCESS", &ST_SUCCESS};

static json_t *passed_reply(const ll_msg *m, const char *run_id, const ll_strlist *reasons)
{
    (void)reasons;
    return outcome(m, run_id, "ACCEPTED", NULL, "SUCCESS", true, NULL);
}

static json_t *blocked_reply(const ll_msg *m, const char *run_id, const ll_strlist *reasons)
{
    return outcome(m, run_id, "REJECTED", "GATE_BLOCKED", "PUBLISHED", false, reasons);
}

/* The run-event ladder's answers (§5.10): a run already SUCCESS is a replay (success=true); any
 * other status RUN_STATUS_MISMATCH (step 3). */
static const ll_run_answer ANSWERS[LL_RUN_EVENT_COUNT] = {
    LL_RUN_ANSWERS_COMMON,
    [LL_RUN_EVENT_REPLAY] = {LL_RUN_ACT_REPLY, "REPLAY", NULL, LL_RUN_RS_DONE, true},
    [LL_RUN_EVENT_STATUS_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
    [LL_RUN_EVENT_TOKEN_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
};

/* One success request: what ANSWERS' steps need. */
typedef struct success_ctx {
    ll_db *db;
    const ll_msg *m;
    const char *run_id;
    int64_t target_count; /* -1: from the TARGET_COUNT metric */
} success_ctx;

static ll_apply success_apply(void *ctx, ll_apply_out *out)
{
    const success_ctx *c = ctx;
    return gated_verdict(c->db, c->m, c->run_id, &STEP, c->target_count, passed_reply, blocked_reply, out);
}

/* A reply of ANSWERS; RUN_STATUS_MISMATCH with reasons ["RUN_STATUS <status>"] (§5.10 step 3). */
static json_t *success_reply(void *ctx, const ll_run_answer *row, const char *run_status)
{
    const success_ctx *c = ctx;
    if (!row->code || strcmp(row->code, "RUN_STATUS_MISMATCH") != 0)
        return outcome(c->m, c->run_id, row->outcome, row->code, run_status, row->ok, NULL);
    ll_strlist reasons = {0};
    ll_strlist_addf(&reasons, "RUN_STATUS %s", run_status);
    json_t *r = outcome(c->m, c->run_id, row->outcome, row->code, run_status, row->ok, &reasons);
    ll_strlist_clear(&reasons);
    return r;
}

static const ll_run_event_ops OPS = {success_apply, success_reply};

ll_apply completion_apply_run_success(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    char run_id[37];
    json_t *tc = json_object_get(m->value, "targetCount");
    int64_t target_count = json_is_integer(tc) ? (int64_t)json_integer_value(tc) : -1;
    if (!ll_need_uuid(out, m->value, "runId", run_id))
        return LL_APPLY_DEAD;
    if (json_is_integer(tc) && target_count < 0)
        return ll_invalid(out, "targetCount: must be ≥ 0"), LL_APPLY_DEAD;
    ll_run_row run;
    ll_run_found found = LL_RUN_FOUND_NONE;
    ll_db_rc rc = lock_run_event(db, run_id, &run, &found, out);
    if (rc != LL_DB_OK)
        return ll_apply_of_db(rc);
    ll_run_event_in in = {found, run.status, LL_RUN_PUBLISHED, LL_RUN_SUCCESS, m->wait_expired};
    success_ctx ctx = {db, m, run_id, target_count};
    ll_apply a = ll_run_event_act(ANSWERS, ll_run_event_decide(&in), &in, &OPS, &ctx, out);
    ll_run_row_clear(&run);
    return a;
}
