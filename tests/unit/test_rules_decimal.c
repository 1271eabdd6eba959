/* test_rules_decimal.c - numeric comparison of DecimalStr (SCN, split bounds; §4.3, §5.2). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

#define D38 "99999999999999999999999999999999999999"  /* 38 nines */
#define E38 "10000000000000000000000000000000000000"  /* 1e37, 38 digits */
#define D39 "100000000000000000000000000000000000000" /* 1e38, 39 digits */

/* Asserts the sign of ll_decimal_cmp(a, b) and the reverse. */
static void expect_cmp(const char *a, const char *b, int sign)
{
    int c = ll_decimal_cmp(a, b);
    int r = ll_decimal_cmp(b, a);
    assert_int_equal((c > 0) - (c < 0), sign);
    assert_int_equal((r > 0) - (r < 0), -sign);
}

static void test_zero_forms(void **state)
{
    (void)state;
    expect_cmp("0", "0", 0);
    expect_cmp("-0", "0", 0);
    expect_cmp("-0", "-000", 0);
    expect_cmp("000", "0", 0);
    expect_cmp("-0", "1", -1);
    expect_cmp("-0", "-1", 1);
}

static void test_leading_zeros_and_signs(void **state)
{
    (void)state;
    expect_cmp("007", "7", 0);
    expect_cmp("-007", "-7", 0);
    expect_cmp("10", "9", 1);
    expect_cmp("0010", "9", 1);
    expect_cmp("-10", "-9", -1);
    expect_cmp("-1", "1", -1);
    expect_cmp("123", "124", -1);
    expect_cmp("-123", "-124", 1);
    expect_cmp("100", "0100", 0);
}

static void test_38_digits(void **state)
{
    (void)state;
    expect_cmp(D38, D38, 0);
    expect_cmp(D38, E38, 1);
    expect_cmp("-" D38, "-" E38, -1);
    expect_cmp("-" D38, D38, -1);
    expect_cmp(D38, "99999999999999999999999999999999999998", 1);
    expect_cmp("00" D38, D38, 0);
    /* beyond DecimalStr, still numeric */
    expect_cmp(D39, D38, 1);
    expect_cmp("-" D39, "-" D38, -1);
    /* past int64 / uint64 */
    expect_cmp("18446744073709551616", "18446744073709551615", 1);
    expect_cmp("9223372036854775808", "-9223372036854775809", 1);
}

static void test_null_and_odd_input(void **state)
{
    (void)state;
    expect_cmp(NULL, NULL, 0);
    expect_cmp(NULL, "-" D38, -1);
    expect_cmp(NULL, "0", -1);
    /* non-DecimalStr input is read up to its first non-digit, without crashing */
    expect_cmp("", "0", 0);
    expect_cmp("-", "0", 0);
    expect_cmp("12x", "12", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_zero_forms),
        cmocka_unit_test(test_leading_zeros_and_signs),
        cmocka_unit_test(test_38_digits),
        cmocka_unit_test(test_null_and_odd_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
