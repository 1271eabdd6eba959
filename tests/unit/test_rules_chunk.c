/* test_rules_chunk.c - the partition gate after a chunk report (docs/contract.md §5.4 steps 9-10). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ll/rules.h"

/* files, lo, hi, rows, bytes, distinct_counts */
static ll_chunk_aggregate agg(int64_t files, int64_t lo, int64_t hi, int64_t rows, int64_t distinct)
{
    return (ll_chunk_aggregate){files, lo, hi, rows, 1000, distinct};
}

static ll_gate gate(const ll_chunk_aggregate *a, int32_t chunk_count, int64_t expected)
{
    return ll_chunk_gate(LL_RUN_EXTRACTING, LL_PART_RUNNING, a, chunk_count, expected);
}

static void test_complete_and_rows_equal_passes(void **state)
{
    (void)state;
    ll_chunk_aggregate a = agg(3, 0, 2, 300, 1);
    assert_int_equal(gate(&a, 3, 300), LL_GATE_PASS);
    a = agg(1, 0, 0, 0, 1);
    assert_int_equal(gate(&a, 1, 0), LL_GATE_PASS);
    a = agg(INT32_MAX, 0, INT32_MAX - 1, 5, 1); /* chunkCount−1 computed without overflow */
    assert_int_equal(gate(&a, INT32_MAX, 5), LL_GATE_PASS);
}

static void test_waits_until_judgeable(void **state)
{
    (void)state;
    ll_chunk_aggregate a = agg(3, 0, 2, 300, 1);
    for (int r = 0; r < LL_RUN_STATUS_COUNT; r++)
        if (r != LL_RUN_EXTRACTING)
            assert_int_equal(ll_chunk_gate((ll_run_status)r, LL_PART_RUNNING, &a, 3, 300), LL_GATE_WAIT);
    for (int p = 0; p < LL_PART_STATUS_COUNT; p++)
        if (p != LL_PART_RUNNING)
            assert_int_equal(ll_chunk_gate(LL_RUN_EXTRACTING, (ll_part_status)p, &a, 3, 300), LL_GATE_WAIT);
    /* fewer files than chunkCount, even with wrong rows: not judged yet */
    a = agg(2, 0, 1, 999, 1);
    assert_int_equal(gate(&a, 3, 300), LL_GATE_WAIT);
    a = agg(0, 0, 0, 0, 0);
    assert_int_equal(gate(&a, 1, 0), LL_GATE_WAIT);
    assert_int_equal(gate(NULL, 1, 0), LL_GATE_WAIT);
}

static void test_missing_index_mismatch(void **state)
{
    (void)state;
    /* indexes 1, 2, 3 reported (3 under an earlier chunkCount of 4): 0 missing */
    ll_chunk_aggregate a = agg(3, 1, 3, 300, 2);
    assert_int_equal(gate(&a, 3, 300), LL_GATE_MISMATCH);
    /* even with one distinct count, lo != 0 fails */
    a = agg(3, 1, 3, 300, 1);
    assert_int_equal(gate(&a, 3, 300), LL_GATE_MISMATCH);
    /* hi beyond chunkCount−1 */
    a = agg(3, 0, 3, 300, 1);
    assert_int_equal(gate(&a, 3, 300), LL_GATE_MISMATCH);
}

static void test_duplicate_or_extra_files_mismatch(void **state)
{
    (void)state;
    /* more files than chunkCount: a chunk written twice under different indexes */
    ll_chunk_aggregate a = agg(4, 0, 3, 300, 1);
    assert_int_equal(gate(&a, 3, 300), LL_GATE_MISMATCH);
}

static void test_inconsistent_chunk_count_mismatch(void **state)
{
    (void)state;
    ll_chunk_aggregate a = agg(3, 0, 2, 300, 2);
    assert_int_equal(gate(&a, 3, 300), LL_GATE_MISMATCH);
}

static void test_rows_differ_mismatch(void **state)
{
    (void)state;
    ll_chunk_aggregate a = agg(3, 0, 2, 299, 1);
    assert_int_equal(gate(&a, 3, 300), LL_GATE_MISMATCH);
    a = agg(3, 0, 2, 301, 1);
    assert_int_equal(gate(&a, 3, 300), LL_GATE_MISMATCH);
}

static void test_mismatch_message(void **state)
{
    (void)state;
    char buf[128];
    ll_chunk_aggregate a = agg(4, 0, 3, 299, 2);
    int n = ll_gate_mismatch_message(&a, 3, 300, buf, sizeof buf);
    assert_string_equal(buf, "files=4 chunkCount=3 distinctCounts=2 rows=299 expected=300");
    assert_int_equal(n, (int)strlen(buf));
    char small[8];
    assert_int_equal(ll_gate_mismatch_message(&a, 3, 300, small, sizeof small), n);
    assert_string_equal(small, "files=4");
    assert_int_equal(ll_gate_mismatch_message(&a, 3, 300, NULL, 0), n);
    assert_int_equal(ll_gate_mismatch_message(NULL, 3, 300, buf, sizeof buf), -1);
    a = agg(INT64_MAX, 0, 0, INT64_MIN, 1);
    ll_gate_mismatch_message(&a, INT32_MAX, -1, buf, sizeof buf);
    assert_string_equal(buf, "files=9223372036854775807 chunkCount=2147483647 distinctCounts=1 "
                             "rows=-9223372036854775808 expected=-1");
}

/* Migration 0007's counters prove completeness only when every file carries chunkCount C. */
static void test_counters_prove_completeness(void **state)
{
    (void)state;
    ll_chunk_aggregate agg;
    /* 3 files of chunkCount 3, 15,000 rows */
    ll_chunk_counters ok = {3, 15000, 1440000, 9, 27};
    assert_true(ll_chunk_counters_complete(&ok, 3, &agg));
    assert_int_equal(agg.files, 3);
    assert_int_equal(agg.lo, 0);
    assert_int_equal(agg.hi, 2);
    assert_int_equal(agg.rows, 15000);
    assert_int_equal(agg.distinct_counts, 1);
    assert_int_equal(ll_chunk_gate(LL_RUN_EXTRACTING, LL_PART_RUNNING, &agg, 3, 15000), LL_GATE_PASS);
    assert_int_equal(ll_chunk_gate(LL_RUN_EXTRACTING, LL_PART_RUNNING, &agg, 3, 14999), LL_GATE_MISMATCH);
    /* counts 2 and 4 and 3: Σ = 9 = 3·3, but Σ² = 29, not 27: not all equal */
    ll_chunk_counters mixed = {3, 15000, 0, 9, 4 + 16 + 9};
    assert_false(ll_chunk_counters_complete(&mixed, 3, &agg));
    /* fewer or more files than chunkCount */
    ll_chunk_counters few = {2, 10000, 0, 6, 18};
    assert_false(ll_chunk_counters_complete(&few, 3, &agg));
    ll_chunk_counters many = {4, 20000, 0, 12, 36};
    assert_false(ll_chunk_counters_complete(&many, 3, &agg));
    /* all files say 4, the report says 3 */
    ll_chunk_counters other = {3, 15000, 0, 12, 48};
    assert_false(ll_chunk_counters_complete(&other, 3, &agg));
    assert_false(ll_chunk_counters_complete(NULL, 3, &agg));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete_and_rows_equal_passes),
        cmocka_unit_test(test_counters_prove_completeness),
        cmocka_unit_test(test_waits_until_judgeable),
        cmocka_unit_test(test_missing_index_mismatch),
        cmocka_unit_test(test_duplicate_or_extra_files_mismatch),
        cmocka_unit_test(test_inconsistent_chunk_count_mismatch),
        cmocka_unit_test(test_rows_differ_mismatch),
        cmocka_unit_test(test_mismatch_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
