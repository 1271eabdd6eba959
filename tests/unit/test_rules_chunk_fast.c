/* test_rules_chunk_fast.c - which chunk reports the set-based path decides alone (issue 8 §2),
 * and the partition counters it keeps (migration 0007). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

static const ll_chunk_file REPORT = {
    .count = 3, .path = "/r/p/c0", .records = 100, .bytes = 10, .written = true};

/* The plain case: the owner, RUNNING under EXTRACTING, path inside, no stored row. */
static ll_chunk_fast_in plain(const ll_chunk_file *old, const ll_chunk_file *file)
{
    return (ll_chunk_fast_in){.run = LL_RUN_EXTRACTING,
                              .part = LL_PART_RUNNING,
                              .token_matches = true,
                              .path_inside_run = true,
                              .old = old,
                              .file = file,
                              .expected_rows = 300};
}

static void test_new_file_is_written_and_counted(void **state)
{
    (void)state;
    ll_chunk_counters c = {0};
    ll_chunk_fast_in in = plain(NULL, &REPORT);
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_WRITE);
    assert_int_equal(c.files, 1);
    assert_int_equal(c.rows, 100);
    assert_int_equal(c.bytes, 10);
    assert_int_equal(c.count_sum, 3);
    assert_int_equal(c.count_sumsq, 9);
    /* byteCount null counts 0 */
    ll_chunk_file nobytes = REPORT;
    nobytes.bytes = -1;
    in = plain(NULL, &nobytes);
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_WRITE);
    assert_int_equal(c.files, 2);
    assert_int_equal(c.bytes, 10);
}

static void test_changed_file_replaces_its_contribution(void **state)
{
    (void)state;
    ll_chunk_file old = {.count = 2, .path = "/r/p/old", .records = 40, .bytes = 7, .written = true};
    ll_chunk_counters c = {.files = 1, .rows = 40, .bytes = 7, .count_sum = 2, .count_sumsq = 4};
    ll_chunk_fast_in in = plain(&old, &REPORT);
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_WRITE);
    assert_int_equal(c.files, 1);
    assert_int_equal(c.rows, 100);
    assert_int_equal(c.bytes, 10);
    assert_int_equal(c.count_sum, 3);
    assert_int_equal(c.count_sumsq, 9);
}

static void test_invalidated_row_is_revived(void **state)
{
    (void)state;
    /* identical to the stored row, which the sweeper invalidated: written again and counted */
    ll_chunk_file old = REPORT;
    old.written = false;
    ll_chunk_counters c = {0};
    ll_chunk_fast_in in = plain(&old, &REPORT);
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_WRITE);
    assert_int_equal(c.files, 1);
    assert_int_equal(c.rows, 100);
}

static void test_identical_is_a_replay_and_writes_nothing(void **state)
{
    (void)state;
    ll_chunk_file old = REPORT;
    old.path = "/r/p/c0"; /* another buffer, same text */
    ll_chunk_counters c = {.files = 1, .rows = 100, .bytes = 10, .count_sum = 3, .count_sumsq = 9};
    ll_chunk_fast_in in = plain(&old, &REPORT);
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_REPLAY);
    assert_int_equal(c.files, 1);
    assert_int_equal(c.rows, 100);
    /* a replay of a partition that is already complete: the gate is the other path's */
    ll_chunk_counters full = {.files = 3, .rows = 300, .bytes = 30, .count_sum = 9, .count_sumsq = 27};
    assert_int_equal(ll_chunk_fast_decide(&in, &full), LL_CHUNK_FAST_PASS);
    assert_int_equal(full.files, 3);
}

static void test_fragment_fields_compared(void **state)
{
    (void)state;
    ll_chunk_counters c = {.files = 1, .rows = 100, .bytes = 10, .count_sum = 3, .count_sumsq = 9};
    ll_chunk_file old = REPORT;
    old.bytes = -1; /* null against 10: changed */
    ll_chunk_fast_in in = plain(&old, &REPORT);
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_WRITE);
    assert_int_equal(c.bytes, 20);
    old = REPORT;
    old.path = "/r/p/c9";
    ll_chunk_counters d = {.files = 1, .rows = 100, .bytes = 10, .count_sum = 3, .count_sumsq = 9};
    in = plain(&old, &REPORT);
    assert_int_equal(ll_chunk_fast_decide(&in, &d), LL_CHUNK_FAST_WRITE);
    assert_int_equal(d.files, 1);
}

static void test_the_last_file_passes_the_gate_when_the_counters_prove_it(void **state)
{
    (void)state;
    /* chunks 0 and 1 of 3, 100 rows each: the third completes 300 = expected */
    ll_chunk_counters c = {.files = 2, .rows = 200, .bytes = 20, .count_sum = 6, .count_sumsq = 18};
    ll_chunk_fast_in in = plain(NULL, &REPORT);
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_GATE);
    assert_int_equal(c.files, 3);
    assert_int_equal(c.rows, 300);
    assert_int_equal(c.count_sum, 9);
    assert_int_equal(c.count_sumsq, 27);
    /* rows off: ROW_COUNT_MISMATCH is the per-message path's, counters untouched */
    ll_chunk_counters d = {.files = 2, .rows = 200, .bytes = 20, .count_sum = 6, .count_sumsq = 18};
    in.expected_rows = 301;
    assert_int_equal(ll_chunk_fast_decide(&in, &d), LL_CHUNK_FAST_PASS);
    assert_int_equal(d.files, 2);
    assert_int_equal(d.rows, 200);
    /* three files, but the earlier ones said chunkCount 2 and 4: not provably complete */
    ll_chunk_counters e = {.files = 2, .rows = 200, .bytes = 20, .count_sum = 6, .count_sumsq = 4 + 16};
    in = plain(NULL, &REPORT);
    assert_int_equal(ll_chunk_fast_decide(&in, &e), LL_CHUNK_FAST_PASS);
    assert_int_equal(e.files, 2);
    /* a chunkCount of 1: its only file completes the partition */
    ll_chunk_file one = REPORT;
    one.count = 1;
    ll_chunk_counters z = {0};
    in = plain(NULL, &one);
    in.expected_rows = 100;
    assert_int_equal(ll_chunk_fast_decide(&in, &z), LL_CHUNK_FAST_GATE);
    assert_int_equal(z.files, 1);
    in.expected_rows = 0;
    z = (ll_chunk_counters){0};
    assert_int_equal(ll_chunk_fast_decide(&in, &z), LL_CHUNK_FAST_PASS);
    assert_int_equal(z.files, 0);
}

static void test_everything_else_passes(void **state)
{
    (void)state;
    ll_chunk_counters c = {0};
    for (int r = 0; r < LL_RUN_STATUS_COUNT; r++) {
        ll_chunk_fast_in in = plain(NULL, &REPORT);
        in.run = (ll_run_status)r;
        assert_int_equal(ll_chunk_fast_decide(&in, &c),
                         r == LL_RUN_EXTRACTING ? LL_CHUNK_FAST_WRITE : LL_CHUNK_FAST_PASS);
    }
    c = (ll_chunk_counters){0};
    for (int p = 0; p < LL_PART_STATUS_COUNT; p++) {
        ll_chunk_fast_in in = plain(NULL, &REPORT);
        in.part = (ll_part_status)p;
        ll_chunk_counters d = {0};
        assert_int_equal(ll_chunk_fast_decide(&in, &d),
                         p == LL_PART_RUNNING ? LL_CHUNK_FAST_WRITE : LL_CHUNK_FAST_PASS);
    }
    ll_chunk_fast_in in = plain(NULL, &REPORT);
    in.token_matches = false;
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_PASS);
    in = plain(NULL, &REPORT);
    in.path_inside_run = false;
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_PASS);
    assert_int_equal(ll_chunk_fast_decide(NULL, &c), LL_CHUNK_FAST_PASS);
    in = plain(NULL, NULL);
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_PASS);
}

static void test_counter_overflow_passes(void **state)
{
    (void)state;
    ll_chunk_file big = REPORT;
    big.records = INT64_MAX;
    ll_chunk_counters c = {.files = 1, .rows = 1, .bytes = 0, .count_sum = 3, .count_sumsq = 9};
    ll_chunk_fast_in in = plain(NULL, &big);
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_PASS);
    assert_int_equal(c.rows, 1);
    ll_chunk_file huge = REPORT;
    huge.count = (int64_t)INT32_MAX + 1;
    in = plain(NULL, &huge);
    assert_int_equal(ll_chunk_fast_decide(&in, &c), LL_CHUNK_FAST_PASS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_file_is_written_and_counted),
        cmocka_unit_test(test_changed_file_replaces_its_contribution),
        cmocka_unit_test(test_invalidated_row_is_revived),
        cmocka_unit_test(test_identical_is_a_replay_and_writes_nothing),
        cmocka_unit_test(test_fragment_fields_compared),
        cmocka_unit_test(test_the_last_file_passes_the_gate_when_the_counters_prove_it),
        cmocka_unit_test(test_everything_else_passes),
        cmocka_unit_test(test_counter_overflow_passes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
