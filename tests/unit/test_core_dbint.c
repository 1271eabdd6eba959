/*
 * test_core_dbint.c - ll_db_parse_ll (ll/db.h), the checked integer parse behind ll_db_ll and
 * ll_db_affected: a cell's text is one whole decimal integer or it is refused, never read in part
 * (atoll read "12abc" as 12 and an out-of-range text as undefined), without a database.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ll/db.h"

static void test_whole_integers(void **state)
{
    (void)state;
    long long v = 0;
    assert_int_equal(ll_db_parse_ll("0", &v), 0);
    assert_true(v == 0);
    assert_int_equal(ll_db_parse_ll("105000", &v), 0);
    assert_true(v == 105000);
    assert_int_equal(ll_db_parse_ll("-1", &v), 0);
    assert_true(v == -1);
    assert_int_equal(ll_db_parse_ll("+7", &v), 0);
    assert_true(v == 7);
    assert_int_equal(ll_db_parse_ll("9223372036854775807", &v), 0);
    assert_true(v == LLONG_MAX);
    assert_int_equal(ll_db_parse_ll("-9223372036854775808", &v), 0);
    assert_true(v == LLONG_MIN);
}

static void test_refuses_partial_or_out_of_range(void **state)
{
    (void)state;
    static const char *const bad[] = {"",
                                      "12abc",
                                      "abc",
                                      " 12",
                                      "12 ",
                                      "-",
                                      "+",
                                      "1.5",
                                      "0x10",
                                      "9223372036854775808",
                                      "-9223372036854775809"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        long long v = 42;
        assert_int_equal(ll_db_parse_ll(bad[i], &v), -1);
        assert_true(v == 42); /* untouched on error */
    }
    long long v = 42;
    assert_int_equal(ll_db_parse_ll(NULL, &v), -1);
    assert_true(v == 42);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_integers),
        cmocka_unit_test(test_refuses_partial_or_out_of_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
