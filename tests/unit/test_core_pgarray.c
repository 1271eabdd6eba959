/* test_core_pgarray.c - array literals for set-based statements (pgarray.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ll/pgarray.h"

static void test_empty_and_simple(void **state)
{
    (void)state;
    ll_pgarray a = {0};
    assert_string_equal(ll_pgarray_text(&a), "{}");
    ll_pgarray_add(&a, "0001");
    assert_string_equal(ll_pgarray_text(&a), "{\"0001\"}");
    ll_pgarray_add(&a, NULL);
    ll_pgarray_add_ll(&a, -42);
    assert_string_equal(ll_pgarray_text(&a), "{\"0001\",NULL,\"-42\"}");
    assert_int_equal(a.n, 3);
    ll_pgarray_free(&a);
    assert_null(a.buf);
    assert_int_equal(a.n, 0);
}

static void test_hostile_text_is_quoted(void **state)
{
    (void)state;
    ll_pgarray a = {0};
    ll_pgarray_add(&a, "NULL"); /* the word, not SQL NULL */
    ll_pgarray_add(&a, "a,b}{\"c\\d");
    ll_pgarray_add(&a, "");
    assert_string_equal(ll_pgarray_text(&a), "{\"NULL\",\"a,b}{\\\"c\\\\d\",\"\"}");
    ll_pgarray_free(&a);
}

static void test_grows(void **state)
{
    (void)state;
    ll_pgarray a = {0};
    char big[3000];
    memset(big, '"', sizeof big - 1); /* every byte escaped */
    big[sizeof big - 1] = '\0';
    for (int i = 0; i < 60; i++)
        ll_pgarray_add(&a, big);
    const char *t = ll_pgarray_text(&a);
    assert_int_equal(strlen(t), 2 + 60 * (2 * 2999 + 2) + 59);
    assert_int_equal(t[0], '{');
    assert_int_equal(t[strlen(t) - 1], '}');
    ll_pgarray_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_and_simple),
        cmocka_unit_test(test_hostile_text_is_quoted),
        cmocka_unit_test(test_grows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
