/*
 * test_core_run_answer.c - ll_run_event_act (ll/run_answer.h): a run-level event's decision and its
 * table give the step, the reason and the reply's outcome, code and runStatus. Pure: fake apply
 * and reply functions, no database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ll/run_answer.h"

/* What the fake functions saw. */
typedef struct fake {
    int applied, replied;
    const ll_run_answer *row;
    const char *run_status;
} fake;

static ll_apply fake_apply(void *ctx, ll_apply_out *out)
{
    (void)out;
    ((fake *)ctx)->applied++;
    return LL_APPLY_COMMIT;
}

static json_t *fake_reply(void *ctx, const ll_run_answer *row, const char *run_status)
{
    fake *f = ctx;
    f->replied++;
    f->row = row;
    f->run_status = run_status;
    return json_pack("{s:s,s:s?,s:s?,s:b}", "result", row->outcome, "code", row->code, "runStatus",
                     run_status, "ok", row->ok);
}

static const ll_run_event_ops OPS = {fake_apply, fake_reply};

/* A table like stage_validated's: replay names the done status, mismatch the current one. */
static const ll_run_answer TABLE[LL_RUN_EVENT_COUNT] = {
    [LL_RUN_EVENT_APPLY] = {LL_RUN_ACT_APPLY, NULL, NULL, LL_RUN_RS_NONE, false},
    [LL_RUN_EVENT_REPLAY] = {LL_RUN_ACT_REPLY, "REPLAY", NULL, LL_RUN_RS_DONE, true},
    [LL_RUN_EVENT_DEFER_RUN] = {LL_RUN_ACT_DEFER_RUN, NULL, NULL, LL_RUN_RS_NONE, false},
    [LL_RUN_EVENT_DEFER] = {LL_RUN_ACT_DEFER, NULL, NULL, LL_RUN_RS_NONE, false},
    [LL_RUN_EVENT_RUN_NOT_FOUND] = {LL_RUN_ACT_REPLY, "REJECTED", "RUN_NOT_FOUND", LL_RUN_RS_NONE, false},
    [LL_RUN_EVENT_STATUS_MISMATCH] = {LL_RUN_ACT_REPLY, "REJECTED", "RUN_STATUS_MISMATCH", LL_RUN_RS_CURRENT,
                                      false},
    [LL_RUN_EVENT_TOKEN_MISMATCH] = {LL_RUN_ACT_REPLY, "REJECTED", "PUBLISH_TOKEN_MISMATCH",
                                     LL_RUN_RS_CURRENT, false},
};

static const ll_run_event_in IN = {LL_RUN_FOUND_LOCKED, LL_RUN_EXTRACTED_VALIDATED, LL_RUN_STAGE_VALIDATING,
                                   LL_RUN_STAGING_VALIDATED, false};

/* APPLY calls the event's apply and returns its answer; nothing replied, no reason. */
static void test_apply_is_the_events(void **state)
{
    (void)state;
    fake f = {0};
    ll_apply_out out = {0};
    assert_int_equal(ll_run_event_act(TABLE, LL_RUN_EVENT_APPLY, &IN, &OPS, &f, &out), LL_APPLY_COMMIT);
    assert_int_equal(f.applied, 1);
    assert_int_equal(f.replied, 0);
    assert_null(out.reply);
    assert_string_equal(out.reason, "");
}

/* DEFER names the run's status and the one the event waits for; DEFER_RUN keeps the lock's reason. */
static void test_defers(void **state)
{
    (void)state;
    fake f = {0};
    ll_apply_out out = {0};
    assert_int_equal(ll_run_event_act(TABLE, LL_RUN_EVENT_DEFER, &IN, &OPS, &f, &out), LL_APPLY_DEFER);
    assert_string_equal(out.reason, "run is EXTRACTED_VALIDATED; waiting for STAGE_VALIDATING");
    assert_null(out.reply);
    ll_apply_out out2 = {0};
    strcpy(out2.reason, "run x not in the ledger yet");
    assert_int_equal(ll_run_event_act(TABLE, LL_RUN_EVENT_DEFER_RUN, &IN, &OPS, &f, &out2), LL_APPLY_DEFER);
    assert_string_equal(out2.reason, "run x not in the ledger yet");
    assert_null(out2.reply);
    assert_int_equal(f.applied + f.replied, 0);
}

/* A REPLY row rolls back with the event's reply: the row's outcome and code, the runStatus it
 * names (none, the locked run's, the done one) and its yes/no field. */
static void test_replies_take_the_rows_status(void **state)
{
    (void)state;
    static const struct {
        ll_run_event ev;
        const char *outcome, *code, *status;
        bool ok;
    } cases[] = {
        {LL_RUN_EVENT_REPLAY, "REPLAY", NULL, "STAGING_VALIDATED", true},
        {LL_RUN_EVENT_RUN_NOT_FOUND, "REJECTED", "RUN_NOT_FOUND", NULL, false},
        {LL_RUN_EVENT_STATUS_MISMATCH, "REJECTED", "RUN_STATUS_MISMATCH", "EXTRACTED_VALIDATED", false},
        {LL_RUN_EVENT_TOKEN_MISMATCH, "REJECTED", "PUBLISH_TOKEN_MISMATCH", "EXTRACTED_VALIDATED", false},
        /* outside the enum: the STATUS_MISMATCH row, as the services' switches' default */
        {LL_RUN_EVENT_COUNT, "REJECTED", "RUN_STATUS_MISMATCH", "EXTRACTED_VALIDATED", false},
        {(ll_run_event)-1, "REJECTED", "RUN_STATUS_MISMATCH", "EXTRACTED_VALIDATED", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fake f = {0};
        ll_apply_out out = {0};
        assert_int_equal(ll_run_event_act(TABLE, cases[i].ev, &IN, &OPS, &f, &out), LL_APPLY_ROLLBACK);
        assert_int_equal(f.replied, 1);
        assert_int_equal(f.applied, 0);
        assert_non_null(out.reply);
        assert_string_equal(json_string_value(json_object_get(out.reply, "result")), cases[i].outcome);
        if (cases[i].code)
            assert_string_equal(json_string_value(json_object_get(out.reply, "code")), cases[i].code);
        else
            assert_true(json_is_null(json_object_get(out.reply, "code")));
        if (cases[i].status)
            assert_string_equal(f.run_status, cases[i].status);
        else
            assert_null(f.run_status);
        assert_int_equal(json_is_true(json_object_get(out.reply, "ok")), cases[i].ok);
        assert_string_equal(out.reason, "");
        json_decref(out.reply);
    }
}

/* The decisions of ll_run_event_decide through a table: a run already done replays, one on its
 * way defers, one where the event applies applies (the ladder and the table together). */
static void test_with_the_ladder(void **state)
{
    (void)state;
    ll_run_event_in in = IN;
    fake f = {0};
    ll_apply_out out = {0};
    in.current = LL_RUN_STAGING_VALIDATED;
    assert_int_equal(ll_run_event_act(TABLE, ll_run_event_decide(&in), &in, &OPS, &f, &out),
                     LL_APPLY_ROLLBACK);
    assert_string_equal(f.run_status, "STAGING_VALIDATED");
    json_decref(out.reply);
    in.current = LL_RUN_STAGE_VALIDATING;
    assert_int_equal(ll_run_event_act(TABLE, ll_run_event_decide(&in), &in, &OPS, &f, &out), LL_APPLY_COMMIT);
    in.current = LL_RUN_EXTRACTING;
    assert_int_equal(ll_run_event_act(TABLE, ll_run_event_decide(&in), &in, &OPS, &f, &out), LL_APPLY_DEFER);
    in.found = LL_RUN_FOUND_REFUSED;
    out.reply = NULL;
    assert_int_equal(ll_run_event_act(TABLE, ll_run_event_decide(&in), &in, &OPS, &f, &out),
                     LL_APPLY_ROLLBACK);
    assert_null(f.run_status);
    json_decref(out.reply);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_apply_is_the_events),
        cmocka_unit_test(test_defers),
        cmocka_unit_test(test_replies_take_the_rows_status),
        cmocka_unit_test(test_with_the_ladder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
