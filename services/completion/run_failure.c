/*
 * run_failure.c - a flow reports a failure of the run outside a partition (docs/contract.md §5.6).
 *
 * Exactly five (expectedStatus, failStatus) pairs are allowed (ll_fail_pair_allowed), checked
 * before the run is looked up: anything else is FAIL_TRANSITION_NOT_ALLOWED. The run already in
 * failStatus is a replay (changed=false); a run still on its way to expectedStatus (its earlier
 * event not applied yet) is deferred until loop.prerequisite_wait is over; any other status, and
 * a run that never got there within the wait, is RUN_STATUS_MISMATCH with details {runStatus}.
 */
#include <stdio.h>
#include <string.h>

#include "completion.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/rules.h"
#include "ll/run_answer.h"

typedef struct runfail_in {
    char run_id[37];
    const char *expected_s, *fail_s, *stage, *code, *message;
    ll_run_status expected, fail;
} runfail_in;

static bool read_runfail(const json_t *v, runfail_in *f, ll_apply_out *out)
{
    if (!ll_need_uuid(out, v, "runId", f->run_id) ||
        !ll_need_str(out, v, "expectedStatus", NULL, NULL, 1, 40, &f->expected_s) ||
        !ll_need_str(out, v, "failStatus", NULL, NULL, 1, 40, &f->fail_s) ||
        !ll_need_str(out, v, "errorStage", NULL, NULL, 1, 100, &f->stage) ||
        !ll_need_str(out, v, "errorCode", NULL, NULL, 1, 100, &f->code) ||
        !ll_need_opt_str(out, v, "message", 2000, &f->message))
        return false;
    if (!f->message)
        f->message = "";
    if (ll_run_status_parse(f->expected_s, &f->expected) != 0)
        return ll_invalid(out, "expectedStatus: '%.40s' is not a run status", f->expected_s);
    if (ll_run_status_parse(f->fail_s, &f->fail) != 0)
        return ll_invalid(out, "failStatus: '%.40s' is not a run status", f->fail_s);
    return true;
}

static json_t *outcome(const ll_msg *m, const runfail_in *f, const char *result, const char *code,
                       const char *run_status, bool changed)
{
    json_t *r = ll_reply_new(m, f->run_id, NULL, result, code, NULL, run_status, NULL);
    json_t *details = json_pack("{s:s,s:s}", "expectedStatus", f->expected_s, "failStatus", f->fail_s);
    json_object_set_new(r, "details", details);
    json_object_set_new(r, "changed", json_boolean(changed));
    return r;
}

/* docs/contract.md §5.6: the CAS from expectedStatus to failStatus with its event (ll_run_fail_apply, the
 * transition's one writer); the reply. LL_DB_OK, or the failed statement's result (db->err). */
static ll_db_rc fail_run(ll_db *db, const ll_msg *m, const runfail_in *f, ll_apply_out *out)
{
    ll_run_failure rf = {.run_id = f->run_id,
                         .expected = f->expected,
                         .fail = f->fail,
                         .stage = f->stage,
                         .code = f->code,
                         .message = f->message};
    ll_db_rc rc = ll_run_fail_apply(db, &rf, NULL);
    if (rc != LL_DB_OK)
        return rc;
    out->reply = outcome(m, f, "ACCEPTED", NULL, f->fail_s, true);
    return LL_DB_OK;
}

/* The run-event ladder's answers (§5.6): a run already in failStatus is a replay; any other status
 * RUN_STATUS_MISMATCH (check 4). */
static const ll_run_answer ANSWERS[LL_RUN_EVENT_COUNT] = {
    LL_RUN_ANSWERS_COMMON,
    [LL_RUN_EVENT_REPLAY] = {LL_RUN_ACT_REPLY, "REPLAY", NULL, LL_RUN_RS_DONE, false},
    [LL_RUN_EVENT_STATUS_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
    [LL_RUN_EVENT_TOKEN_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
};

/* One run failure report: what ANSWERS' steps need. */
typedef struct runfail_ctx {
    ll_db *db;
    const ll_msg *m;
    const runfail_in *f;
} runfail_ctx;

static ll_apply runfail_apply(void *ctx, ll_apply_out *out)
{
    const runfail_ctx *c = ctx;
    return ll_apply_of_db(fail_run(c->db, c->m, c->f, out));
}

/* A reply of ANSWERS (changed=false); RUN_STATUS_MISMATCH with details {runStatus} besides the pair
 * (§5.6 check 4). */
static json_t *runfail_reply(void *ctx, const ll_run_answer *row, const char *run_status)
{
    const runfail_ctx *c = ctx;
    json_t *r = outcome(c->m, c->f, row->outcome, row->code, run_status, false);
    if (row->code && strcmp(row->code, "RUN_STATUS_MISMATCH") == 0)
        json_object_set_new(json_object_get(r, "details"), "runStatus", json_string(run_status));
    return r;
}

static const ll_run_event_ops OPS = {runfail_apply, runfail_reply};

ll_apply completion_apply_run_failure(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    runfail_in f;
    if (!read_runfail(m->value, &f, out))
        return LL_APPLY_DEAD;
    if (!ll_fail_pair_allowed(f.expected, f.fail)) {
        out->reply = outcome(m, &f, "REJECTED", "FAIL_TRANSITION_NOT_ALLOWED", NULL, false);
        return LL_APPLY_ROLLBACK;
    }
    ll_run_row run;
    ll_run_found found = LL_RUN_FOUND_NONE;
    ll_db_rc rc = lock_run_event(db, f.run_id, &run, &found, out);
    if (rc != LL_DB_OK)
        return ll_apply_of_db(rc);
    ll_run_event_in in = {found, run.status, f.expected, f.fail, m->wait_expired};
    runfail_ctx ctx = {db, m, &f};
    ll_apply a = ll_run_event_act(ANSWERS, ll_run_event_decide(&in), &in, &OPS, &ctx, out);
    ll_run_row_clear(&run);
    return a;
}
