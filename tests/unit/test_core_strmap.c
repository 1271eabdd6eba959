/* test_core_strmap.c - the batch lookup map (strmap.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>

#include "ll/strmap.h"

static void test_put_get_replace(void **state)
{
    (void)state;
    ll_strmap m = {0};
    assert_null(ll_strmap_get(&m, "a")); /* not initialised: empty */
    ll_strmap_init(&m, 3);
    assert_null(ll_strmap_get(&m, "a"));
    assert_true(ll_strmap_put(&m, "a", 1));
    assert_true(ll_strmap_put(&m, "b", 2));
    char other_a[] = "a"; /* compared by content, not address */
    assert_int_equal(*ll_strmap_get(&m, other_a), 1);
    assert_true(ll_strmap_put(&m, "a", 7));
    assert_int_equal(*ll_strmap_get(&m, "a"), 7);
    assert_int_equal(m.n, 2);
    assert_null(ll_strmap_get(&m, "c"));
    assert_null(ll_strmap_get(&m, NULL));
    ll_strmap_free(&m);
    assert_null(m.keys);
}

static void test_capacity_is_a_bound(void **state)
{
    (void)state;
    ll_strmap m = {0};
    ll_strmap_init(&m, 2);
    assert_true(ll_strmap_put(&m, "x", 0));
    assert_true(ll_strmap_put(&m, "y", 1));
    assert_false(ll_strmap_put(&m, "z", 2)); /* a third key is refused */
    assert_null(ll_strmap_get(&m, "z"));
    assert_true(ll_strmap_put(&m, "y", 5)); /* replacing is not a new key */
    ll_strmap_free(&m);
}

static void test_many_keys_collide_and_probe(void **state)
{
    (void)state;
    enum { N = 2000 };
    static char keys[N][16];
    ll_strmap m = {0};
    ll_strmap_init(&m, N);
    for (size_t i = 0; i < N; i++) {
        snprintf(keys[i], sizeof keys[i], "k%zu", i);
        assert_true(ll_strmap_put(&m, keys[i], i));
    }
    for (size_t i = 0; i < N; i++)
        assert_int_equal(*ll_strmap_get(&m, keys[i]), i);
    assert_null(ll_strmap_get(&m, "k2000"));
    assert_true(m.cap >= 2 * N);
    ll_strmap_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get_replace),
        cmocka_unit_test(test_capacity_is_a_bound),
        cmocka_unit_test(test_many_keys_collide_and_probe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
