/* test_rules_runfail.c - the five allowed run failure pairs (docs/contract.md §5.6 check 1). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

static void test_exactly_five_pairs(void **state)
{
    (void)state;
    const ll_run_status allowed[5][2] = {
        {LL_RUN_CREATED, LL_RUN_FAILED_MANIFEST},
        {LL_RUN_EXTRACTING, LL_RUN_FAILED_EXTRACT},
        {LL_RUN_STAGE_VALIDATING, LL_RUN_FAILED_STAGE_VALIDATION},
        {LL_RUN_STAGING_VALIDATED, LL_RUN_FAILED_PUBLISH},
        {LL_RUN_PUBLISHED, LL_RUN_FAILED_TARGET_VALIDATION},
    };
    int count = 0;
    for (int e = 0; e < LL_RUN_STATUS_COUNT; e++) {
        for (int f = 0; f < LL_RUN_STATUS_COUNT; f++) {
            bool want = false;
            for (int i = 0; i < 5; i++)
                want |= allowed[i][0] == (ll_run_status)e && allowed[i][1] == (ll_run_status)f;
            assert_int_equal(ll_fail_pair_allowed((ll_run_status)e, (ll_run_status)f), want);
            count += want;
        }
    }
    assert_int_equal(count, 5);
    /* near misses */
    assert_false(ll_fail_pair_allowed(LL_RUN_EXTRACTING, LL_RUN_FAILED_SNAPSHOT_EXPIRED));
    assert_false(ll_fail_pair_allowed(LL_RUN_PUBLISHING, LL_RUN_FAILED_PUBLISH));
    assert_false(ll_fail_pair_allowed(LL_RUN_EXTRACTING, LL_RUN_TIMED_OUT));
    assert_false(ll_fail_pair_allowed(LL_RUN_STATUS_COUNT, LL_RUN_FAILED_MANIFEST));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_exactly_five_pairs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
