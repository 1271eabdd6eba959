/*
 * test_rules_endrun.c - the operator's run failure (`loadctl end-run`, docs/contract.md §5.6 applied
 * to the run's own status): ll_fail_status_for / ll_fail_expected_for against the five pairs, and
 * ll_end_run_decide over every status, with and without the operator's --status.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

#define NONE LL_RUN_STATUS_COUNT

/* The five pairs of §5.6, written out here independently of runfail.c's table. */
static const ll_run_status PAIRS[5][2] = {
    {LL_RUN_CREATED, LL_RUN_FAILED_MANIFEST},
    {LL_RUN_EXTRACTING, LL_RUN_FAILED_EXTRACT},
    {LL_RUN_STAGE_VALIDATING, LL_RUN_FAILED_STAGE_VALIDATION},
    {LL_RUN_STAGING_VALIDATED, LL_RUN_FAILED_PUBLISH},
    {LL_RUN_PUBLISHED, LL_RUN_FAILED_TARGET_VALIDATION},
};

static ll_run_status fail_of(ll_run_status e)
{
    for (int i = 0; i < 5; i++)
        if (PAIRS[i][0] == e)
            return PAIRS[i][1];
    return NONE;
}

static ll_run_status expected_of(ll_run_status f)
{
    for (int i = 0; i < 5; i++)
        if (PAIRS[i][1] == f)
            return PAIRS[i][0];
    return NONE;
}

static void test_lookup_is_the_pair_table(void **state)
{
    (void)state;
    for (int s = 0; s <= LL_RUN_STATUS_COUNT; s++) {
        assert_int_equal(ll_fail_status_for((ll_run_status)s), fail_of((ll_run_status)s));
        assert_int_equal(ll_fail_expected_for((ll_run_status)s), expected_of((ll_run_status)s));
    }
    /* the statuses without a failure exit (§3.1) */
    assert_int_equal(ll_fail_status_for(LL_RUN_EXTRACTED_VALIDATED), NONE);
    assert_int_equal(ll_fail_status_for(LL_RUN_PUBLISHING), NONE);
    assert_int_equal(ll_fail_status_for(LL_RUN_PUBLISH_UNKNOWN), NONE);
    assert_int_equal(ll_fail_status_for(LL_RUN_SUCCESS), NONE);
    assert_int_equal(ll_fail_status_for((ll_run_status)-1), NONE);
    /* not a §5.6 fail status: the snapshot failure and the timeout are other transitions' */
    assert_int_equal(ll_fail_expected_for(LL_RUN_FAILED_SNAPSHOT_EXPIRED), NONE);
    assert_int_equal(ll_fail_expected_for(LL_RUN_TIMED_OUT), NONE);
}

/* Without --status: the run's own pair. */
static void test_own_pair_every_status(void **state)
{
    (void)state;
    for (int c = 0; c < LL_RUN_STATUS_COUNT; c++) {
        ll_run_status cur = (ll_run_status)c, e = 99, f = 99;
        ll_end_run d = ll_end_run_decide(NONE, true, cur, &e, &f);
        if (fail_of(cur) != NONE) {
            assert_int_equal(d, LL_END_RUN_FAIL);
            assert_int_equal(e, cur);
            assert_int_equal(f, fail_of(cur));
        } else if (expected_of(cur) != NONE) {
            assert_int_equal(d, LL_END_RUN_ALREADY); /* §5.6 check 3: a replay */
            assert_int_equal(e, expected_of(cur));
            assert_int_equal(f, cur);
        } else {
            assert_int_equal(d, LL_END_RUN_STATUS_MISMATCH);
            assert_int_equal(e, NONE);
            assert_int_equal(f, NONE);
        }
    }
    /* the refusals by name */
    const ll_run_status refused[] = {LL_RUN_EXTRACTED_VALIDATED, LL_RUN_PUBLISHING,
                                     LL_RUN_PUBLISH_UNKNOWN,     LL_RUN_SUCCESS,
                                     LL_RUN_TIMED_OUT,           LL_RUN_FAILED_SNAPSHOT_EXPIRED};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        assert_int_equal(ll_end_run_decide(NONE, true, refused[i], NULL, NULL), LL_END_RUN_STATUS_MISMATCH);
}

/* With --status: exactly §5.6 checks 1-4 on (want, fail_of(want)). */
static void test_operator_status_every_pair(void **state)
{
    (void)state;
    for (int w = 0; w < LL_RUN_STATUS_COUNT; w++) {
        ll_run_status want = (ll_run_status)w;
        for (int c = 0; c < LL_RUN_STATUS_COUNT; c++) {
            ll_run_status cur = (ll_run_status)c, e = 99, f = 99;
            ll_end_run d = ll_end_run_decide(want, true, cur, &e, &f);
            ll_end_run expect = fail_of(want) == NONE  ? LL_END_RUN_NOT_ALLOWED
                                : cur == fail_of(want) ? LL_END_RUN_ALREADY
                                : cur == want          ? LL_END_RUN_FAIL
                                                       : LL_END_RUN_STATUS_MISMATCH;
            assert_int_equal(d, expect);
            if (d == LL_END_RUN_FAIL || d == LL_END_RUN_ALREADY) {
                assert_int_equal(e, want);
                assert_int_equal(f, fail_of(want));
            } else {
                assert_int_equal(e, NONE);
                assert_int_equal(f, NONE);
            }
        }
    }
    /* a run already failed by another pair's transition is a mismatch, not a replay */
    assert_int_equal(ll_end_run_decide(LL_RUN_EXTRACTING, true, LL_RUN_FAILED_SNAPSHOT_EXPIRED, NULL, NULL),
                     LL_END_RUN_STATUS_MISMATCH);
    assert_int_equal(ll_end_run_decide(LL_RUN_STAGING_VALIDATED, true, LL_RUN_PUBLISHING, NULL, NULL),
                     LL_END_RUN_STATUS_MISMATCH);
}

/* §5.6 check 1 comes before the lookup: a bad --status wins over a missing run. */
static void test_order_of_checks(void **state)
{
    (void)state;
    assert_int_equal(ll_end_run_decide(LL_RUN_PUBLISHING, false, NONE, NULL, NULL), LL_END_RUN_NOT_ALLOWED);
    assert_int_equal(ll_end_run_decide(LL_RUN_SUCCESS, false, NONE, NULL, NULL), LL_END_RUN_NOT_ALLOWED);
    assert_int_equal(ll_end_run_decide(LL_RUN_EXTRACTING, false, NONE, NULL, NULL), LL_END_RUN_NOT_FOUND);
    assert_int_equal(ll_end_run_decide(NONE, false, LL_RUN_EXTRACTING, NULL, NULL), LL_END_RUN_NOT_FOUND);
}

/* The service's check and the operator's read the same table. */
static void test_pair_allowed_agrees(void **state)
{
    (void)state;
    for (int e = 0; e < LL_RUN_STATUS_COUNT; e++)
        for (int f = 0; f < LL_RUN_STATUS_COUNT; f++)
            assert_int_equal(ll_fail_pair_allowed((ll_run_status)e, (ll_run_status)f),
                             ll_end_run_decide((ll_run_status)e, true, (ll_run_status)e, NULL, NULL) ==
                                     LL_END_RUN_FAIL &&
                                 ll_fail_status_for((ll_run_status)e) == (ll_run_status)f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_is_the_pair_table),   cmocka_unit_test(test_own_pair_every_status),
        cmocka_unit_test(test_operator_status_every_pair), cmocka_unit_test(test_order_of_checks),
        cmocka_unit_test(test_pair_allowed_agrees),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
