/* test_rules_strlist.c - the violation/reason string list (§5.2 step 5 joins with "; "). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ll/rules.h"

static void test_addf_and_join(void **state)
{
    (void)state;
    ll_strlist l = {0};
    assert_int_equal(ll_strlist_addf(&l, "PARTITION_COUNT_MISMATCH planned=%d actual=%d", 8, 7), 0);
    assert_int_equal(ll_strlist_addf(&l, "%s", "EMPTY_SOURCE_BLOCKED"), 0);
    assert_int_equal(l.n, 2);
    assert_string_equal(l.items[0], "PARTITION_COUNT_MISMATCH planned=8 actual=7");
    char *joined = ll_strlist_join(&l, "; ");
    assert_string_equal(joined, "PARTITION_COUNT_MISMATCH planned=8 actual=7; EMPTY_SOURCE_BLOCKED");
    free(joined);
    joined = ll_strlist_join(&l, NULL);
    assert_string_equal(joined, "PARTITION_COUNT_MISMATCH planned=8 actual=7EMPTY_SOURCE_BLOCKED");
    free(joined);
    ll_strlist_clear(&l);
    assert_int_equal(l.n, 0);
    assert_null(l.items);
}

static void test_empty_and_null(void **state)
{
    (void)state;
    ll_strlist l = {0};
    char *joined = ll_strlist_join(&l, "; ");
    assert_string_equal(joined, "");
    free(joined);
    joined = ll_strlist_join(NULL, "; ");
    assert_string_equal(joined, "");
    free(joined);
    assert_int_equal(ll_strlist_addf(NULL, "x"), -1);
    ll_strlist_clear(NULL);
    ll_strlist_clear(&l);
}

static void test_growth_and_reuse(void **state)
{
    (void)state;
    ll_strlist l = {0};
    for (int i = 0; i < 1000; i++)
        assert_int_equal(ll_strlist_addf(&l, "INVALID_BOUNDS %04d", i), 0);
    assert_int_equal(l.n, 1000);
    assert_string_equal(l.items[999], "INVALID_BOUNDS 0999");
    char *joined = ll_strlist_join(&l, ";");
    assert_int_equal(strlen(joined), 1000 * 19 + 999);
    free(joined);
    ll_strlist_clear(&l);
    assert_int_equal(ll_strlist_addf(&l, "%s", ""), 0);
    assert_string_equal(l.items[0], "");
    ll_strlist_clear(&l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_addf_and_join),
        cmocka_unit_test(test_empty_and_null),
        cmocka_unit_test(test_growth_and_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
