/*
 * test_core_dlq.c - a dead-letter record always fits (issue 7 §1): what it keeps of the
 * original, the start-up check of the limits, and the SHA-256 named when the value is dropped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ll/dlq.h"

static void test_everything_kept_when_it_fits(void **state)
{
    (void)state;
    ll_dlq_fit f;
    assert_int_equal(ll_dlq_fit_decide(36, 1000, 200, 500, 1000000, &f), 0);
    assert_true(f.keep_value && f.keep_headers && f.keep_key);
    /* exactly at the limit still fits */
    assert_int_equal(ll_dlq_fit_decide(36, 1000, 200, 500, 36 + 1000 + 200 + 500 + LL_DLQ_OVERHEAD, &f), 0);
    assert_true(f.keep_value);
}

static void test_value_dropped_first(void **state)
{
    (void)state;
    ll_dlq_fit f;
    /* the observed case: 1,040,000 random bytes against a 1,000,000-byte producer limit */
    assert_int_equal(ll_dlq_fit_decide(36, 1040000, 0, 600, 1000000, &f), 0);
    assert_false(f.keep_value);
    assert_true(f.keep_headers);
    assert_true(f.keep_key);
    /* one byte over the limit drops the value */
    assert_int_equal(ll_dlq_fit_decide(36, 1000, 200, 500, 36 + 1000 + 200 + 500 + LL_DLQ_OVERHEAD - 1, &f),
                     0);
    assert_false(f.keep_value);
}

static void test_headers_then_key_dropped(void **state)
{
    (void)state;
    ll_dlq_fit f;
    assert_int_equal(ll_dlq_fit_decide(36, 10, 900000, 600, 100000, &f), 0);
    assert_false(f.keep_value);
    assert_false(f.keep_headers);
    assert_true(f.keep_key);
    assert_int_equal(ll_dlq_fit_decide(500000, 10, 10, 600, 100000, &f), 0);
    assert_false(f.keep_value || f.keep_headers || f.keep_key);
    /* not even the loop's own headers fit */
    assert_int_equal(ll_dlq_fit_decide(1, 1, 1, 5000, 2000, &f), -1);
}

static void test_limits_check_at_start(void **state)
{
    (void)state;
    char err[400];
    /* the defaults: 1 MiB messages, a 2 MiB dead-letter topic and producer limit */
    assert_int_equal(ll_dlq_limits_check(1048576, 2097152, 2097152, err, sizeof err), 0);
    /* the old defaults: 1 MiB accepted but librdkafka's 1,000,000-byte producer limit */
    assert_int_equal(ll_dlq_limits_check(1048576, 1000000, 2097152, err, sizeof err), -1);
    assert_non_null(strstr(err, "loop.max_message_bytes (1048576)"));
    assert_non_null(strstr(err, "kafka.message.max.bytes = 1000000"));
    assert_int_equal(ll_dlq_limits_check(1048576, 4194304, 1048576, err, sizeof err), -1);
    assert_non_null(strstr(err, "loop.dead_letter_max_bytes = 1048576"));
}

static void test_sha256(void **state)
{
    (void)state;
    char hex[65];
    ll_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    ll_sha256_hex(NULL, 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_everything_kept_when_it_fits),
        cmocka_unit_test(test_value_dropped_first),
        cmocka_unit_test(test_headers_then_key_dropped),
        cmocka_unit_test(test_limits_check_at_start),
        cmocka_unit_test(test_sha256),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
