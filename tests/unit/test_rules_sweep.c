/*
 * test_rules_sweep.c - rule 1's reissue-or-timeout decision and the recovery settings check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ll/rules.h"

static void test_fail_mode_always_times_out(void **state)
{
    const char *reason = NULL;
    int attempts[] = {1};
    assert_int_equal(ll_stale_decide(LL_RECOVERY_FAIL, 3, attempts, NULL, 1, &reason), LL_STALE_TIMEOUT);
    assert_string_equal(reason, "PARTITION_STALE");
}

static void test_reissue_until_attempts_are_used_up(void **state)
{
    const char *reason = "x";
    int attempts[] = {1, 2};
    assert_int_equal(ll_stale_decide(LL_RECOVERY_REISSUE, 3, attempts, NULL, 2, &reason), LL_STALE_REISSUE);
    assert_null(reason);
    int exhausted[] = {1, 3};
    assert_int_equal(ll_stale_decide(LL_RECOVERY_REISSUE, 3, exhausted, NULL, 2, &reason), LL_STALE_TIMEOUT);
    assert_string_equal(reason, "REISSUE_ATTEMPTS_EXHAUSTED");
}

static void test_unclaimed_reissue_times_out(void **state)
{
    const char *reason = NULL;
    int attempts[] = {1, 1};
    bool retry[] = {false, true};
    assert_int_equal(ll_stale_decide(LL_RECOVERY_REISSUE, 3, attempts, retry, 2, &reason), LL_STALE_TIMEOUT);
    assert_string_equal(reason, "REISSUE_NOT_CLAIMED");
    bool none[] = {false, false};
    assert_int_equal(ll_stale_decide(LL_RECOVERY_REISSUE, 3, attempts, none, 2, &reason), LL_STALE_REISSUE);
}

static void test_settings_check(void **state)
{
    char err[512];
    assert_int_equal(ll_recovery_settings_check(90 * 60000, 60 * 60000, 3, err, sizeof err), 0);
    assert_int_equal(ll_recovery_settings_check(60 * 60000, 60 * 60000, 3, err, sizeof err), -1);
    assert_non_null(strstr(err, "recovery.stale"));
    assert_int_equal(ll_recovery_settings_check(90 * 60000, 60 * 60000, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "max_attempts"));
}

/* docs/contract.md §7.6: the unfinished partitions of a failed or timed-out run, once nothing moved
 * for recovery.stale (here 1000 ms). */
static void test_ended_run_partitions(void **state)
{
    (void)state;
    const int64_t stale = 1000;
    /* every failure status, every unfinished partition status, silent long enough */
    const ll_run_status failed[] = {
        LL_RUN_FAILED_MANIFEST, LL_RUN_FAILED_EXTRACT,           LL_RUN_FAILED_STAGE_VALIDATION,
        LL_RUN_FAILED_PUBLISH,  LL_RUN_FAILED_TARGET_VALIDATION, LL_RUN_FAILED_SNAPSHOT_EXPIRED,
        LL_RUN_TIMED_OUT};
    for (size_t i = 0; i < sizeof failed / sizeof failed[0]; i++) {
        assert_true(ll_ended_partition_due(failed[i], LL_PART_RUNNING, 1000, 1000, stale));
        assert_true(ll_ended_partition_due(failed[i], LL_PART_RETRY, 5000, 2000, stale));
        assert_true(ll_ended_partition_due(failed[i], LL_PART_PENDING, -1, 1000, stale)); /* never claimed */
    }
    /* final partition statuses are never rewritten */
    assert_false(ll_ended_partition_due(LL_RUN_FAILED_EXTRACT, LL_PART_SUCCESS, 9000, 9000, stale));
    assert_false(ll_ended_partition_due(LL_RUN_FAILED_EXTRACT, LL_PART_FAILED, 9000, 9000, stale));
    assert_false(ll_ended_partition_due(LL_RUN_TIMED_OUT, LL_PART_TIMED_OUT, 9000, 9000, stale));
    /* active runs are rules 1 and 2's; SUCCESS has no unfinished partition to speak of */
    const ll_run_status other[] = {LL_RUN_CREATED,          LL_RUN_EXTRACTING, LL_RUN_EXTRACTED_VALIDATED,
                                   LL_RUN_STAGE_VALIDATING, LL_RUN_PUBLISHING, LL_RUN_PUBLISH_UNKNOWN,
                                   LL_RUN_PUBLISHED,        LL_RUN_SUCCESS};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++)
        assert_false(ll_ended_partition_due(other[i], LL_PART_RUNNING, 9000, 9000, stale));
    /* the run ended within recovery.stale: its siblings keep their status (§3.2) */
    assert_false(ll_ended_partition_due(LL_RUN_FAILED_EXTRACT, LL_PART_RUNNING, 5000, 999, stale));
    assert_false(ll_ended_partition_due(LL_RUN_FAILED_EXTRACT, LL_PART_PENDING, -1, 999, stale));
    assert_false(ll_ended_partition_due(LL_RUN_FAILED_EXTRACT, LL_PART_PENDING, -1, -1, stale));
    /* a worker still reporting after the run ended keeps its partition RUNNING */
    assert_false(ll_ended_partition_due(LL_RUN_FAILED_EXTRACT, LL_PART_RUNNING, 999, 5000, stale));
    assert_false(ll_ended_partition_due(LL_RUN_FAILED_SNAPSHOT_EXPIRED, LL_PART_RETRY, 0, 5000, stale));
}

/* recovery.mode's words (ll_config_enum's list) are in ll_recovery_mode's order. */
static void test_recovery_mode_names(void **state)
{
    (void)state;
    assert_string_equal(LL_RECOVERY_MODE_NAMES[LL_RECOVERY_FAIL], "FAIL");
    assert_string_equal(LL_RECOVERY_MODE_NAMES[LL_RECOVERY_REISSUE], "REISSUE");
    assert_null(LL_RECOVERY_MODE_NAMES[2]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_mode_always_times_out),
        cmocka_unit_test(test_reissue_until_attempts_are_used_up),
        cmocka_unit_test(test_unclaimed_reissue_times_out),
        cmocka_unit_test(test_settings_check),
        cmocka_unit_test(test_recovery_mode_names),
        cmocka_unit_test(test_ended_run_partitions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
