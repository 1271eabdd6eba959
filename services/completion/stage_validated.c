/*
 * stage_validated.c - the staging validation asks to move the run to STAGING_VALIDATED
 * (docs/contract.md §5.9): only with at least one STAGING metric stored and none FAIL; staging_count
 * from the STAGE_COUNT metric when its value is all digits. A run still on its way to
 * STAGE_VALIDATING defers the request until loop.prerequisite_wait is over; then, like any other
 * status, it is answered stageValidated=false with reasons ["RUN_STATUS <status>"] (§5.9 step 3).
 * A run in STAGE_VALIDATING with no STAGING metric stored defers it too (the metrics come on
 * another topic, and after a replay or a database loss may be read after it: docs/design.md §6);
 * after the wait the gate answers NO_METRICS.
 */
#include <stdio.h>
#include <string.h>

#include "completion.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/rules.h"
#include "ll/run_answer.h"

static const ll_stmt ST_STAGE_VALIDATED = {
    "stagev_cas",
    "UPDATE nifi_ops.load_run SET status = 'STAGING_VALIDATED', staging_count = $2::bigint,"
    " heartbeat_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status = 'STAGE_VALIDATING'",
    2};

static json_t *outcome(const ll_msg *m, const char *run_id, const char *result, const char *code,
                       const char *run_status, bool validated, const ll_strlist *reasons)
{
    json_t *r = ll_reply_new(m, run_id, NULL, result, code, NULL, run_status, NULL);
    json_object_set_new(r, "stageValidated", json_boolean(validated));
    json_object_set_new(r, "reasons", reasons ? reasons_json(reasons) : json_array());
    return r;
}

static const gated_step STEP = {"STAGING", "STAGE_COUNT", "STAGE_VALIDATED", &ST_STAGE_VALIDATED};

static json_t *passed_reply(const ll_msg *m, const char *run_id, const ll_strlist *reasons)
{
    (void)reasons;
    return outcome(m, run_id, "ACCEPTED", NULL, "STAGING_VALIDATED", true, NULL);
}

static json_t *blocked_reply(const ll_msg *m, const char *run_id, const ll_strlist *reasons)
{
    return outcome(m, run_id, "REJECTED", "GATE_BLOCKED", "STAGE_VALIDATING", false, reasons);
}

/* The run-event ladder's answers (§5.9): a run already STAGING_VALIDATED is a replay
 * (stageValidated=true); any other status RUN_STATUS_MISMATCH (step 3). */
static const ll_run_answer ANSWERS[LL_RUN_EVENT_COUNT] = {
    LL_RUN_ANSWERS_COMMON,
    [LL_RUN_EVENT_REPLAY] = {LL_RUN_ACT_REPLY, "REPLAY", NULL, LL_RUN_RS_DONE, true},
    [LL_RUN_EVENT_STATUS_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
    [LL_RUN_EVENT_TOKEN_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
};

/* One stage-validated request: what ANSWERS' steps need. */
typedef struct stagev_ctx {
    ll_db *db;
    const ll_msg *m;
    const char *run_id;
} stagev_ctx;

static ll_apply stagev_apply(void *ctx, ll_apply_out *out)
{
    const stagev_ctx *c = ctx;
    return gated_verdict(c->db, c->m, c->run_id, &STEP, -1, passed_reply, blocked_reply, out);
}

/* A reply of ANSWERS; RUN_STATUS_MISMATCH with reasons ["RUN_STATUS <status>"] (§5.9 step 3). */
static json_t *stagev_reply(void *ctx, const ll_run_answer *row, const char *run_status)
{
    const stagev_ctx *c = ctx;
    if (!row->code || strcmp(row->code, "RUN_STATUS_MISMATCH") != 0)
        return outcome(c->m, c->run_id, row->outcome, row->code, run_status, row->ok, NULL);
    ll_strlist reasons = {0};
    ll_strlist_addf(&reasons, "RUN_STATUS %s", run_status);
    json_t *r = outcome(c->m, c->run_id, row->outcome, row->code, run_status, row->ok, &reasons);
    ll_strlist_clear(&reasons);
    return r;
}

static const ll_run_event_ops OPS = {stagev_apply, stagev_reply};

ll_apply completion_apply_stage_validated(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    char run_id[37];
    if (!ll_need_uuid(out, m->value, "runId", run_id))
        return LL_APPLY_DEAD;
    ll_run_row run;
    ll_run_found found = LL_RUN_FOUND_NONE;
    ll_db_rc rc = lock_run_event(db, run_id, &run, &found, out);
    if (rc != LL_DB_OK)
        return ll_apply_of_db(rc);
    ll_run_event_in in = {found, run.status, LL_RUN_STAGE_VALIDATING, LL_RUN_STAGING_VALIDATED,
                          m->wait_expired};
    stagev_ctx ctx = {db, m, run_id};
    ll_apply a = ll_run_event_act(ANSWERS, ll_run_event_decide(&in), &in, &OPS, &ctx, out);
    ll_run_row_clear(&run);
    return a;
}
