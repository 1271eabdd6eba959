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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
