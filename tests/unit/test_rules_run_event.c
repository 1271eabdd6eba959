/* test_rules_run_event.c - the run-event ladder (docs/contract.md §5.6-§5.10, §5.13, §5.14, §5.7;
 * docs/contract.md K§6) over every run status, every way the run was found and both sides of
 * loop.prerequisite_wait, for each run-level event of services/completion and the claimer's
 * publish claim. The expected decision of each event is written out as the services answered
 * before the ladder became a rule. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

static const ll_run_found founds[] = {LL_RUN_FOUND_LOCKED, LL_RUN_FOUND_NONE, LL_RUN_FOUND_REFUSED};

/* The found steps every event shares: NONE defers, REFUSED is RUN_NOT_FOUND. */
static ll_run_event found_expected(ll_run_found f)
{
    return f == LL_RUN_FOUND_NONE ? LL_RUN_EVENT_DEFER_RUN : LL_RUN_EVENT_RUN_NOT_FOUND;
}

/* The ladder of stage-validated, success and run failure: done, apply, still on the way, else. */
static ll_run_event ladder(ll_run_status cur, ll_run_status apply, ll_run_status done, bool expired)
{
    if (cur == done)
        return LL_RUN_EVENT_REPLAY;
    if (cur == apply)
        return LL_RUN_EVENT_APPLY;
    return ll_run_should_wait(cur, apply, expired) ? LL_RUN_EVENT_DEFER : LL_RUN_EVENT_STATUS_MISMATCH;
}

/* Checks ll_run_event_decide for (apply, done) over every status, found and wait. */
static void check_event(ll_run_status apply, ll_run_status done)
{
    for (size_t f = 0; f < sizeof founds / sizeof *founds; f++)
        for (int s = 0; s < LL_RUN_STATUS_COUNT; s++)
            for (int expired = 0; expired <= 1; expired++) {
                ll_run_event_in in = {founds[f], (ll_run_status)s, apply, done, expired};
                ll_run_event want = founds[f] == LL_RUN_FOUND_LOCKED
                                        ? ladder((ll_run_status)s, apply, done, expired)
                                        : found_expected(founds[f]);
                assert_int_equal(ll_run_event_decide(&in), want);
            }
}

/* §5.9: STAGE_VALIDATING applies, STAGING_VALIDATED is a replay. */
static void test_stage_validated_matrix(void **state)
{
    (void)state;
    check_event(LL_RUN_STAGE_VALIDATING, LL_RUN_STAGING_VALIDATED);
    ll_run_event_in early = {LL_RUN_FOUND_LOCKED, LL_RUN_EXTRACTING, LL_RUN_STAGE_VALIDATING,
                             LL_RUN_STAGING_VALIDATED, false};
    assert_int_equal(ll_run_event_decide(&early), LL_RUN_EVENT_DEFER);
    early.wait_expired = true;
    assert_int_equal(ll_run_event_decide(&early), LL_RUN_EVENT_STATUS_MISMATCH);
}

/* §5.10: PUBLISHED applies, SUCCESS is a replay; PUBLISH_UNKNOWN never waits. */
static void test_success_matrix(void **state)
{
    (void)state;
    check_event(LL_RUN_PUBLISHED, LL_RUN_SUCCESS);
    ll_run_event_in pu = {LL_RUN_FOUND_LOCKED, LL_RUN_PUBLISH_UNKNOWN, LL_RUN_PUBLISHED, LL_RUN_SUCCESS,
                          false};
    assert_int_equal(ll_run_event_decide(&pu), LL_RUN_EVENT_STATUS_MISMATCH);
}

/* §5.13 (the claimer's publish claim): STAGING_VALIDATED grants, PUBLISHING answers by the token
 * (the service compares it), a run on its way waits, anything else RUN_STATUS_MISMATCH. */
static void test_publish_claim_matrix(void **state)
{
    (void)state;
    check_event(LL_RUN_STAGING_VALIDATED, LL_RUN_PUBLISHING);
    ll_run_event_in past = {LL_RUN_FOUND_LOCKED, LL_RUN_PUBLISHED, LL_RUN_STAGING_VALIDATED,
                            LL_RUN_PUBLISHING, false};
    assert_int_equal(ll_run_event_decide(&past), LL_RUN_EVENT_STATUS_MISMATCH);
}

/* §5.6: every allowed (expectedStatus, failStatus) pair; failStatus is the replay. */
static void test_run_failure_matrix(void **state)
{
    (void)state;
    int pairs = 0;
    for (int e = 0; e < LL_RUN_STATUS_COUNT; e++)
        for (int fs = 0; fs < LL_RUN_STATUS_COUNT; fs++)
            if (ll_fail_pair_allowed((ll_run_status)e, (ll_run_status)fs)) {
                check_event((ll_run_status)e, (ll_run_status)fs);
                pairs++;
            }
    assert_int_equal(pairs, 5);
}

/* §5.8: STAGING needs STAGE_VALIDATING, TARGET needs PUBLISHED; no replay status (a replayed
 * batch is applied and changes nothing). */
static void test_validation_metrics_matrix(void **state)
{
    (void)state;
    const ll_run_status needs[] = {LL_RUN_STAGE_VALIDATING, LL_RUN_PUBLISHED};
    for (size_t n = 0; n < 2; n++)
        for (size_t f = 0; f < sizeof founds / sizeof *founds; f++)
            for (int s = 0; s < LL_RUN_STATUS_COUNT; s++)
                for (int expired = 0; expired <= 1; expired++) {
                    ll_run_event_in in = {founds[f], (ll_run_status)s, needs[n], LL_RUN_STATUS_COUNT,
                                          expired};
                    ll_run_event want;
                    if (founds[f] != LL_RUN_FOUND_LOCKED)
                        want = found_expected(founds[f]);
                    else if (s == (int)needs[n])
                        want = LL_RUN_EVENT_APPLY;
                    else if (ll_run_should_wait((ll_run_status)s, needs[n], expired))
                        want = LL_RUN_EVENT_DEFER;
                    else
                        want = LL_RUN_EVENT_STATUS_MISMATCH;
                    assert_int_equal(ll_run_event_decide(&in), want);
                }
}

/* §5.14: the token first (no token stored and the run on its way to PUBLISHING waits), then the
 * reported outcome as replay, PUBLISHING applies, anything else RUN_STATUS_MISMATCH. */
static void test_publish_result_matrix(void **state)
{
    (void)state;
    const ll_run_status outcomes[] = {LL_RUN_PUBLISHED, LL_RUN_FAILED_PUBLISH, LL_RUN_PUBLISH_UNKNOWN};
    for (size_t o = 0; o < 3; o++)
        for (size_t f = 0; f < sizeof founds / sizeof *founds; f++)
            for (int s = 0; s < LL_RUN_STATUS_COUNT; s++)
                for (int expired = 0; expired <= 1; expired++)
                    for (int stored = 0; stored <= 1; stored++)
                        for (int matches = 0; matches <= stored; matches++) {
                            ll_run_status cur = (ll_run_status)s;
                            ll_run_event_in in = {founds[f], cur, LL_RUN_PUBLISHING, outcomes[o], expired};
                            ll_run_event want;
                            if (founds[f] != LL_RUN_FOUND_LOCKED)
                                want = found_expected(founds[f]);
                            else if (!stored || !matches)
                                want = !stored && ll_run_should_wait(cur, LL_RUN_PUBLISHING, expired)
                                           ? LL_RUN_EVENT_DEFER
                                           : LL_RUN_EVENT_TOKEN_MISMATCH;
                            else if (cur == outcomes[o])
                                want = LL_RUN_EVENT_REPLAY;
                            else if (cur != LL_RUN_PUBLISHING)
                                want = LL_RUN_EVENT_STATUS_MISMATCH;
                            else
                                want = LL_RUN_EVENT_APPLY;
                            assert_int_equal(ll_publish_result_decide(&in, stored, matches), want);
                        }
    /* the sweeper's PUBLISH_UNKNOWN is never resolved by a late PUBLISHED report */
    ll_run_event_in late = {LL_RUN_FOUND_LOCKED, LL_RUN_PUBLISH_UNKNOWN, LL_RUN_PUBLISHING, LL_RUN_PUBLISHED,
                            false};
    assert_int_equal(ll_publish_result_decide(&late, true, true), LL_RUN_EVENT_STATUS_MISMATCH);
    /* an owner's report on a run already in that outcome is a replay */
    late.done = LL_RUN_PUBLISH_UNKNOWN;
    assert_int_equal(ll_publish_result_decide(&late, true, true), LL_RUN_EVENT_REPLAY);
}

/* §5.7 checks 1-3: the dispatch must exist and be this run's VALIDATE_RUN; a missing one waits
 * while the run may still reach EXTRACTED_VALIDATED. */
static void test_validation_start_matrix(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof founds / sizeof *founds; f++)
        for (int s = 0; s < LL_RUN_STATUS_COUNT; s++)
            for (int expired = 0; expired <= 1; expired++)
                for (int found = 0; found <= 1; found++)
                    for (int matches = 0; matches <= found; matches++) {
                        ll_run_status cur = (ll_run_status)s;
                        ll_vstart want;
                        if (founds[f] == LL_RUN_FOUND_NONE)
                            want = LL_VSTART_DEFER_RUN;
                        else if (founds[f] == LL_RUN_FOUND_REFUSED)
                            want = LL_VSTART_RUN_NOT_FOUND;
                        else if (!found && ll_run_should_wait(cur, LL_RUN_EXTRACTED_VALIDATED, expired))
                            want = LL_VSTART_DEFER;
                        else if (!found || !matches)
                            want = LL_VSTART_DISPATCH_MISMATCH;
                        else
                            want = LL_VSTART_ACK;
                        assert_int_equal(ll_validation_start_decide(founds[f], cur, found, matches, expired),
                                         want);
                    }
}

/* §5.7 step 4: one winner; its identical request answers started=true again while the run is
 * STAGE_VALIDATING; every other caller started=false, ACCEPTED when its ACK was new. */
static void test_validation_start_answer_matrix(void **state)
{
    (void)state;
    for (int s = 0; s < LL_RUN_STATUS_COUNT; s++)
        for (int won = 0; won <= 1; won++)
            for (int same = 0; same <= 1; same++)
                for (int acked = 0; acked <= 1; acked++) {
                    ll_vstart_answer want;
                    if (won)
                        want = LL_VSTART_WON;
                    else if (same && s == LL_RUN_STAGE_VALIDATING)
                        want = LL_VSTART_WINNER_AGAIN;
                    else
                        want = acked ? LL_VSTART_LOST_ACKED : LL_VSTART_LOST_REPLAY;
                    assert_int_equal(ll_validation_start_answer(won, same, (ll_run_status)s, acked), want);
                }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stage_validated_matrix),
        cmocka_unit_test(test_success_matrix),
        cmocka_unit_test(test_publish_claim_matrix),
        cmocka_unit_test(test_run_failure_matrix),
        cmocka_unit_test(test_validation_metrics_matrix),
        cmocka_unit_test(test_publish_result_matrix),
        cmocka_unit_test(test_validation_start_matrix),
        cmocka_unit_test(test_validation_start_answer_matrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
