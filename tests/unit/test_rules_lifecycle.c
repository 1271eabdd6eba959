/*
 * test_rules_lifecycle.c - the forward path (deferral of early events) and the validation gate.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ll/rules.h"

static void test_may_reach_forward_only(void **state)
{
    assert_true(ll_run_may_reach(LL_RUN_CREATED, LL_RUN_EXTRACTING));
    assert_true(ll_run_may_reach(LL_RUN_EXTRACTED_VALIDATED, LL_RUN_STAGE_VALIDATING));
    assert_true(ll_run_may_reach(LL_RUN_STAGING_VALIDATED, LL_RUN_PUBLISHING));
    assert_true(ll_run_may_reach(LL_RUN_EXTRACTING, LL_RUN_PUBLISHED));
    assert_false(ll_run_may_reach(LL_RUN_EXTRACTING, LL_RUN_EXTRACTING));
    assert_false(ll_run_may_reach(LL_RUN_PUBLISHED, LL_RUN_STAGE_VALIDATING));
    assert_false(ll_run_may_reach(LL_RUN_FAILED_EXTRACT, LL_RUN_PUBLISHED));
    assert_false(ll_run_may_reach(LL_RUN_PUBLISH_UNKNOWN, LL_RUN_PUBLISHED));
    assert_false(ll_run_may_reach(LL_RUN_SUCCESS, LL_RUN_PUBLISHED));
    assert_false(ll_run_may_reach(LL_RUN_CREATED, LL_RUN_FAILED_MANIFEST));
}

/* Issue 7 item 10: after loop.prerequisite_wait the event is answered, never deferred again. */
static void test_should_wait_until_the_wait_is_over(void **state)
{
    assert_true(ll_run_should_wait(LL_RUN_STAGING_VALIDATED, LL_RUN_PUBLISHED, false));
    assert_false(ll_run_should_wait(LL_RUN_STAGING_VALIDATED, LL_RUN_PUBLISHED, true));
    assert_true(ll_run_should_wait(LL_RUN_CREATED, LL_RUN_EXTRACTING, false));
    assert_false(ll_run_should_wait(LL_RUN_CREATED, LL_RUN_EXTRACTING, true));
    /* a run that can no longer get there is answered at once, wait or not */
    assert_false(ll_run_should_wait(LL_RUN_FAILED_EXTRACT, LL_RUN_PUBLISHED, false));
    assert_false(ll_run_should_wait(LL_RUN_PUBLISHED, LL_RUN_PUBLISHED, false));
    assert_false(ll_run_should_wait(LL_RUN_SUCCESS, LL_RUN_PUBLISHED, false));
}

static void test_gate_no_metrics(void **state)
{
    ll_strlist r = {0};
    assert_int_equal(ll_validation_gate(NULL, NULL, 0, &r), 1);
    assert_int_equal(r.n, 1);
    assert_string_equal(r.items[0], "NO_METRICS");
    ll_strlist_clear(&r);
}

static void test_gate_fail_blocks_warn_does_not(void **state)
{
    const char *names[] = {"AMOUNT_SUM", "STAGE_COUNT", "NULL_RATIO", "DUP_KEYS"};
    const char *results[] = {"FAIL", "PASS", "WARN", "FAIL"};
    ll_strlist r = {0};
    assert_int_equal(ll_validation_gate(names, results, 4, &r), 2);
    assert_string_equal(r.items[0], "FAIL AMOUNT_SUM");
    assert_string_equal(r.items[1], "FAIL DUP_KEYS");
    ll_strlist_clear(&r);
    const char *ok_results[] = {"PASS", "WARN", "WARN", "PASS"};
    assert_int_equal(ll_validation_gate(names, ok_results, 4, &r), 0);
    assert_int_equal(r.n, 0);
}

static void test_metric_count(void **state)
{
    int64_t v = -1;
    assert_int_equal(ll_metric_count("105000", &v), 0);
    assert_int_equal(v, 105000);
    assert_int_equal(ll_metric_count("105000.0", &v), -1);
    assert_int_equal(ll_metric_count("-5", &v), -1);
    assert_int_equal(ll_metric_count("", &v), -1);
    assert_int_equal(ll_metric_count(NULL, &v), -1);
    assert_int_equal(ll_metric_count("1234567890123456789", &v), -1);
    assert_true(ll_is_metric_result("WARN"));
    assert_false(ll_is_metric_result("pass"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_may_reach_forward_only),
        cmocka_unit_test(test_should_wait_until_the_wait_is_over),
        cmocka_unit_test(test_gate_no_metrics),
        cmocka_unit_test(test_gate_fail_blocks_warn_does_not),
        cmocka_unit_test(test_metric_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
