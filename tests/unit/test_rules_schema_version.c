/* test_rules_schema_version.c - the verdict on the ledger's schema version (schema_version.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/schema_version.h"

/* A range of its own, so that the cases do not move when the build's constants do. */
#define MIN    10
#define KNOWN  12
#define COMPAT 19

static void test_none_recorded_is_too_old(void **state)
{
    (void)state;
    assert_int_equal(ll_schema_judge(0, MIN, KNOWN, COMPAT), LL_SCHEMA_TOO_OLD);
    assert_int_equal(ll_schema_judge(-1, MIN, KNOWN, COMPAT), LL_SCHEMA_TOO_OLD);
}

static void test_below_the_minimum_is_too_old(void **state)
{
    (void)state;
    assert_int_equal(ll_schema_judge(1, MIN, KNOWN, COMPAT), LL_SCHEMA_TOO_OLD);
    assert_int_equal(ll_schema_judge(MIN - 1, MIN, KNOWN, COMPAT), LL_SCHEMA_TOO_OLD);
}

static void test_the_known_range_is_ok(void **state)
{
    (void)state;
    assert_int_equal(ll_schema_judge(MIN, MIN, KNOWN, COMPAT), LL_SCHEMA_OK);
    assert_int_equal(ll_schema_judge(MIN + 1, MIN, KNOWN, COMPAT), LL_SCHEMA_OK);
    assert_int_equal(ll_schema_judge(KNOWN, MIN, KNOWN, COMPAT), LL_SCHEMA_OK);
}

static void test_newer_within_compat_runs(void **state)
{
    (void)state;
    assert_int_equal(ll_schema_judge(KNOWN + 1, MIN, KNOWN, COMPAT), LL_SCHEMA_NEWER_COMPATIBLE);
    assert_int_equal(ll_schema_judge(COMPAT, MIN, KNOWN, COMPAT), LL_SCHEMA_NEWER_COMPATIBLE);
}

static void test_beyond_compat_is_too_new(void **state)
{
    (void)state;
    assert_int_equal(ll_schema_judge(COMPAT + 1, MIN, KNOWN, COMPAT), LL_SCHEMA_TOO_NEW);
    assert_int_equal(ll_schema_judge(9999, MIN, KNOWN, COMPAT), LL_SCHEMA_TOO_NEW);
}

static void test_may_run_and_names(void **state)
{
    (void)state;
    assert_true(ll_schema_may_run(LL_SCHEMA_OK));
    assert_true(ll_schema_may_run(LL_SCHEMA_NEWER_COMPATIBLE));
    assert_false(ll_schema_may_run(LL_SCHEMA_TOO_OLD));
    assert_false(ll_schema_may_run(LL_SCHEMA_TOO_NEW));
    assert_string_equal(ll_schema_verdict_name(LL_SCHEMA_OK), "ok");
    assert_string_equal(ll_schema_verdict_name(LL_SCHEMA_TOO_OLD), "too_old");
    assert_string_equal(ll_schema_verdict_name(LL_SCHEMA_NEWER_COMPATIBLE), "newer_compatible");
    assert_string_equal(ll_schema_verdict_name(LL_SCHEMA_TOO_NEW), "too_new");
}

/* The build's own constants keep the order the rule needs, and the newest file is known. */
static void test_build_constants_are_ordered(void **state)
{
    (void)state;
    assert_true(LL_SCHEMA_MIN <= LL_SCHEMA_MAX_KNOWN);
    assert_true(LL_SCHEMA_MAX_KNOWN <= LL_SCHEMA_MAX_COMPAT);
    assert_int_equal(
        ll_schema_judge(LL_SCHEMA_MAX_KNOWN, LL_SCHEMA_MIN, LL_SCHEMA_MAX_KNOWN, LL_SCHEMA_MAX_COMPAT),
        LL_SCHEMA_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_none_recorded_is_too_old),
        cmocka_unit_test(test_below_the_minimum_is_too_old),
        cmocka_unit_test(test_the_known_range_is_ok),
        cmocka_unit_test(test_newer_within_compat_runs),
        cmocka_unit_test(test_beyond_compat_is_too_new),
        cmocka_unit_test(test_may_run_and_names),
        cmocka_unit_test(test_build_constants_are_ordered),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
