/*
 * test_rules_purge.c - the retention purge's pure decisions (`loadctl purge`, docs/ledger.md
 * "Retention"): the settings' bounds and the sequence of batch sizes a purge asks for.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

#define DAY_MS 86400000LL

static void test_defaults_keep_a_year(void **state)
{
    (void)state;
    assert_true(LL_PURGE_DEFAULT_OLDER_THAN_MS >= 365 * DAY_MS);
    assert_int_equal(
        ll_purge_check(LL_PURGE_DEFAULT_OLDER_THAN_MS, LL_PURGE_DEFAULT_BATCH, LL_PURGE_DEFAULT_MAX_RUNS),
        LL_PURGE_SETTINGS_OK);
}

static void test_period_floor(void **state)
{
    (void)state;
    assert_int_equal(ll_purge_check(30 * DAY_MS, 1, 1), LL_PURGE_SETTINGS_OK);
    assert_int_equal(ll_purge_check(30 * DAY_MS - 1, 1, 1), LL_PURGE_PERIOD_TOO_SHORT);
    assert_int_equal(ll_purge_check(400 * 1000LL, 1, 1), LL_PURGE_PERIOD_TOO_SHORT); /* "400" seconds */
    assert_int_equal(ll_purge_check(0, 1, 1), LL_PURGE_PERIOD_TOO_SHORT);
    assert_int_equal(ll_purge_check(-DAY_MS, 1, 1), LL_PURGE_PERIOD_TOO_SHORT);
}

static void test_batch_and_max_bounds(void **state)
{
    (void)state;
    int64_t p = 400 * DAY_MS;
    assert_int_equal(ll_purge_check(p, 0, 10), LL_PURGE_BATCH_OUT_OF_RANGE);
    assert_int_equal(ll_purge_check(p, LL_PURGE_MAX_BATCH + 1, 10), LL_PURGE_BATCH_OUT_OF_RANGE);
    assert_int_equal(ll_purge_check(p, LL_PURGE_MAX_BATCH, 10), LL_PURGE_SETTINGS_OK);
    assert_int_equal(ll_purge_check(p, 5, 0), LL_PURGE_MAX_RUNS_OUT_OF_RANGE);
    assert_int_equal(ll_purge_check(p, 5, LL_PURGE_MAX_MAX_RUNS + 1), LL_PURGE_MAX_RUNS_OUT_OF_RANGE);
    assert_int_equal(ll_purge_check(p, 5, 1), LL_PURGE_SETTINGS_OK);
}

/* Drives ll_purge_next_batch over `candidates` unlocked runs; the sizes asked into out[], their count. */
static int drive(long batch, long max_runs, long candidates, long out[16])
{
    long purged = 0, got = 0, asked = 0;
    int n = 0;
    for (long k; n < 16 && (k = ll_purge_next_batch(batch, max_runs, purged, got, asked)) > 0;) {
        out[n++] = k;
        asked = k;
        got = candidates - purged < k ? candidates - purged : k;
        purged += got;
    }
    return n;
}

static void test_batches_of_two_over_five(void **state)
{
    (void)state;
    long out[16];
    /* --batch 2 over 5 old runs: three transactions (2, 2, 1); the short third one ends it */
    assert_int_equal(drive(2, 1000, 5, out), 3);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 2);
    assert_int_equal(out[2], 2);
}

static void test_exact_multiple_asks_once_more(void **state)
{
    (void)state;
    long out[16];
    /* 4 runs in batches of 2: the third transaction finds none and ends it */
    assert_int_equal(drive(2, 1000, 4, out), 3);
    assert_int_equal(out[2], 2);
}

static void test_max_runs_caps_the_last_batch(void **state)
{
    (void)state;
    long out[16];
    /* --batch 2 --max-runs 3 over 10: 2 then 1, then stop at the cap */
    assert_int_equal(drive(2, 3, 10, out), 2);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 1);
}

static void test_stops(void **state)
{
    (void)state;
    assert_int_equal(ll_purge_next_batch(5, 10, 0, 0, 0), 5);  /* the first */
    assert_int_equal(ll_purge_next_batch(5, 10, 5, 5, 5), 5);  /* full: go on */
    assert_int_equal(ll_purge_next_batch(5, 10, 5, 4, 5), 0);  /* short: done */
    assert_int_equal(ll_purge_next_batch(5, 10, 0, 0, 5), 0);  /* nothing found */
    assert_int_equal(ll_purge_next_batch(5, 10, 10, 5, 5), 0); /* the cap */
    assert_int_equal(ll_purge_next_batch(0, 10, 0, 0, 0), 0);  /* no batch */
    assert_int_equal(ll_purge_next_batch(5, 7, 5, 5, 5), 2);   /* the rest of the cap */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_keep_a_year),
        cmocka_unit_test(test_period_floor),
        cmocka_unit_test(test_batch_and_max_bounds),
        cmocka_unit_test(test_batches_of_two_over_five),
        cmocka_unit_test(test_exact_multiple_asks_once_more),
        cmocka_unit_test(test_max_runs_caps_the_last_batch),
        cmocka_unit_test(test_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
