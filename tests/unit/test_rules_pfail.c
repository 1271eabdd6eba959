/* test_rules_pfail.c - partition failure report decision and snapshot errors (docs/contract.md §5.5). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

#define TOKEN    "0f8fad5b-d9cb-469f-a165-70867728950e"
#define TOKEN_UC "0F8FAD5B-D9CB-469F-A165-70867728950E"
#define OTHER    "7c9e6679-7425-40de-944b-e07fc1f90ae7"

static void test_token_checked_first(void **state)
{
    (void)state;
    for (int p = 0; p < LL_PART_STATUS_COUNT; p++) {
        ll_part_status s = (ll_part_status)p;
        assert_int_equal(ll_pfail_decide(s, TOKEN, OTHER), LL_PFAIL_CLAIM_MISMATCH);
        /* a zombie worker after a reissue: stored token cleared */
        assert_int_equal(ll_pfail_decide(s, NULL, TOKEN), LL_PFAIL_CLAIM_MISMATCH);
        assert_int_equal(ll_pfail_decide(s, TOKEN, NULL), LL_PFAIL_CLAIM_MISMATCH);
        assert_int_equal(ll_pfail_decide(s, TOKEN, "garbage"), LL_PFAIL_CLAIM_MISMATCH);
    }
}

static void test_matching_token_by_status(void **state)
{
    (void)state;
    const ll_pfail_decision want[LL_PART_STATUS_COUNT] = {
        [LL_PART_PENDING] = LL_PFAIL_STATUS_MISMATCH, [LL_PART_RUNNING] = LL_PFAIL_APPLY,
        [LL_PART_RETRY] = LL_PFAIL_STATUS_MISMATCH,   [LL_PART_SUCCESS] = LL_PFAIL_STATUS_MISMATCH,
        [LL_PART_FAILED] = LL_PFAIL_REPLAY,           [LL_PART_TIMED_OUT] = LL_PFAIL_STATUS_MISMATCH,
    };
    for (int p = 0; p < LL_PART_STATUS_COUNT; p++) {
        assert_int_equal(ll_pfail_decide((ll_part_status)p, TOKEN, TOKEN), want[p]);
        assert_int_equal(ll_pfail_decide((ll_part_status)p, TOKEN_UC, TOKEN), want[p]);
    }
}

static void test_snapshot_error(void **state)
{
    (void)state;
    assert_true(ll_is_snapshot_error("ORA-01555", "SQL"));
    assert_true(ll_is_snapshot_error("ora-01555", NULL));
    assert_true(ll_is_snapshot_error("Ora-08180", ""));
    assert_true(ll_is_snapshot_error("X", "SNAPSHOT"));
    assert_true(ll_is_snapshot_error(NULL, "snapshot"));
    assert_true(ll_is_snapshot_error("ORA-00001", "SnapShot"));
    assert_false(ll_is_snapshot_error("ORA-01556", "SQL"));
    assert_false(ll_is_snapshot_error("ORA-0155", "SQL"));
    assert_false(ll_is_snapshot_error("ORA-015555", "SQL"));
    assert_false(ll_is_snapshot_error(" ORA-01555", "SQL"));
    assert_false(ll_is_snapshot_error("ORA-01555 ", "SQL"));
    assert_false(ll_is_snapshot_error("ORA_01555", "SQL"));
    assert_false(ll_is_snapshot_error("X", "SNAPSHOTS"));
    assert_false(ll_is_snapshot_error("X", "SNAPSHO"));
    assert_false(ll_is_snapshot_error("X", "SNAPSHOT_TOO_OLD"));
    assert_false(ll_is_snapshot_error("", ""));
    assert_false(ll_is_snapshot_error(NULL, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_checked_first),
        cmocka_unit_test(test_matching_token_by_status),
        cmocka_unit_test(test_snapshot_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
