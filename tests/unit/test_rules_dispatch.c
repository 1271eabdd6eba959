/* test_rules_dispatch.c - backoff and delivery outcome classification (docs/contract.md §6). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>

#include "ll/rules.h"

static void test_backoff_default_sequence(void **state)
{
    (void)state;
    const int64_t want[] = {5000, 10000, 20000, 40000, 80000, 160000, 300000, 300000, 300000};
    for (int i = 0; i < 9; i++)
        assert_int_equal(ll_dispatch_backoff_ms(i + 1, 5000, 300000), want[i]);
}

static void test_backoff_attempt_below_one(void **state)
{
    (void)state;
    assert_int_equal(ll_dispatch_backoff_ms(0, 5000, 300000), 5000);
    assert_int_equal(ll_dispatch_backoff_ms(-7, 5000, 300000), 5000);
    assert_int_equal(ll_dispatch_backoff_ms(INT_MIN, 5000, 300000), 5000);
}

static void test_backoff_exponent_capped_at_30(void **state)
{
    (void)state;
    const int64_t two30 = (int64_t)1 << 30;
    assert_int_equal(ll_dispatch_backoff_ms(31, 1, INT64_MAX), two30);
    assert_int_equal(ll_dispatch_backoff_ms(32, 1, INT64_MAX), two30);
    assert_int_equal(ll_dispatch_backoff_ms(INT_MAX, 1, INT64_MAX), two30);
    assert_int_equal(ll_dispatch_backoff_ms(30, 1, INT64_MAX), two30 / 2);
}

static void test_backoff_never_overflows(void **state)
{
    (void)state;
    assert_int_equal(ll_dispatch_backoff_ms(31, INT64_MAX / 2, INT64_MAX), INT64_MAX);
    assert_int_equal(ll_dispatch_backoff_ms(INT_MAX, INT64_MAX, 300000), 300000);
    assert_int_equal(ll_dispatch_backoff_ms(2, INT64_MAX / 2, INT64_MAX), INT64_MAX - 1);
    assert_int_equal(ll_dispatch_backoff_ms(3, INT64_MAX / 4 + 1, INT64_MAX), INT64_MAX);
}

static void test_backoff_odd_bounds(void **state)
{
    (void)state;
    assert_int_equal(ll_dispatch_backoff_ms(1, 5000, 1000), 1000); /* max below min wins */
    assert_int_equal(ll_dispatch_backoff_ms(3, 0, 300000), 0);
    assert_int_equal(ll_dispatch_backoff_ms(3, -5, 300000), 0);
    assert_int_equal(ll_dispatch_backoff_ms(3, 5000, -1), 0);
}

static void test_classify_success(void **state)
{
    (void)state;
    assert_int_equal(ll_dispatch_classify(200, 1, 10), LL_SEND_SENT);
    assert_int_equal(ll_dispatch_classify(202, 1, 10), LL_SEND_SENT);
    assert_int_equal(ll_dispatch_classify(299, 1, 10), LL_SEND_SENT);
    /* delivered on the last attempt is still SENT */
    assert_int_equal(ll_dispatch_classify(200, 10, 10), LL_SEND_SENT);
    assert_int_equal(ll_dispatch_classify(200, 11, 10), LL_SEND_SENT);
}

static void test_classify_permanent_4xx(void **state)
{
    (void)state;
    const int dead[] = {400, 401, 403, 404, 405, 409, 410, 413, 422, 499};
    for (size_t i = 0; i < sizeof dead / sizeof *dead; i++)
        assert_int_equal(ll_dispatch_classify(dead[i], 1, 10), LL_SEND_DEAD);
}

static void test_classify_transient(void **state)
{
    (void)state;
    const int transient[] = {0, 100, 199, 300, 301, 302, 399, 408, 425, 429, 500, 502, 503, 599, 600};
    for (size_t i = 0; i < sizeof transient / sizeof *transient; i++) {
        assert_int_equal(ll_dispatch_classify(transient[i], 1, 10), LL_SEND_RETRY);
        assert_int_equal(ll_dispatch_classify(transient[i], 9, 10), LL_SEND_RETRY);
        assert_int_equal(ll_dispatch_classify(transient[i], 10, 10), LL_SEND_DEAD);
        assert_int_equal(ll_dispatch_classify(transient[i], 11, 10), LL_SEND_DEAD);
    }
}

/* Every status from -1 to 700: permanent is exactly 4xx but 408/425/429, delivered exactly 2xx. */
static void test_status_matrix(void **state)
{
    (void)state;
    int permanent = 0, delivered = 0;
    for (int st = -1; st <= 700; st++) {
        bool want_permanent = st >= 400 && st <= 499 && st != 408 && st != 425 && st != 429;
        assert_int_equal(ll_dispatch_status_permanent(st), want_permanent);
        assert_int_equal(ll_dispatch_delivered(st), st >= 200 && st <= 299);
        /* the classifier agrees: on a first attempt of many, DEAD is exactly the permanent ones */
        ll_send_outcome first = ll_dispatch_classify(st, 1, 10);
        assert_int_equal(first == LL_SEND_DEAD, want_permanent);
        assert_int_equal(first == LL_SEND_SENT, st >= 200 && st <= 299);
        permanent += want_permanent;
        delivered += st >= 200 && st <= 299;
    }
    assert_int_equal(permanent, 97);
    assert_int_equal(delivered, 100);
    /* the named ones */
    assert_true(ll_dispatch_status_permanent(400));
    assert_true(ll_dispatch_status_permanent(404));
    assert_true(ll_dispatch_status_permanent(422));
    assert_false(ll_dispatch_status_permanent(0));
    assert_false(ll_dispatch_status_permanent(408));
    assert_false(ll_dispatch_status_permanent(425));
    assert_false(ll_dispatch_status_permanent(429));
    assert_false(ll_dispatch_status_permanent(500));
    assert_false(ll_dispatch_status_permanent(200));
}

/* Rule 3 of the sweeper (docs/contract.md §7.3): an unacknowledged dispatch is DEAD once its attempts
 * (deliveries made) reached dispatch.max_attempts, else requeued; the same bound as a failed send. */
static void test_ack_timeout_matrix(void **state)
{
    (void)state;
    for (int max = 1; max <= 25; max++)
        for (int attempts = -1; attempts <= 30; attempts++) {
            ll_send_outcome want = attempts >= max ? LL_SEND_DEAD : LL_SEND_RETRY;
            assert_int_equal(ll_dispatch_ack_timeout(attempts, max), want);
            assert_int_equal(ll_dispatch_classify(0, attempts, max), want);
        }
    assert_int_equal(ll_dispatch_ack_timeout(19, 20), LL_SEND_RETRY);
    assert_int_equal(ll_dispatch_ack_timeout(20, 20), LL_SEND_DEAD);
    assert_int_equal(ll_dispatch_ack_timeout(21, 20), LL_SEND_DEAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backoff_default_sequence),
        cmocka_unit_test(test_backoff_attempt_below_one),
        cmocka_unit_test(test_backoff_exponent_capped_at_30),
        cmocka_unit_test(test_backoff_never_overflows),
        cmocka_unit_test(test_backoff_odd_bounds),
        cmocka_unit_test(test_classify_success),
        cmocka_unit_test(test_classify_permanent_4xx),
        cmocka_unit_test(test_classify_transient),
        cmocka_unit_test(test_status_matrix),
        cmocka_unit_test(test_ack_timeout_matrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
