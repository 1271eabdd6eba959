/*
 * test_rules_manifest.c - every manifest invariant of docs/contract.md §5.2 step 4, with each violation
 * string and the order of the collected list asserted exactly.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/rules.h"

#define D38 "99999999999999999999999999999999999999"
#define D39 "999999999999999999999999999999999999999"

/* A range partition [lo, hi) or [lo, hi]. */
static ll_manifest_partition range(const char *id, const char *lo, const char *hi, bool incl, int64_t rows)
{
    return (ll_manifest_partition){id, lo, hi, incl, false, rows};
}

/* A null-flagged partition. */
static ll_manifest_partition nullp(const char *id, const char *lo, const char *hi, int64_t rows)
{
    return (ll_manifest_partition){id, lo, hi, false, true, rows};
}

/* A manifest over parts[0..n) whose counts agree with the partitions (no null rows). */
static ll_manifest plan(const ll_manifest_partition *parts, size_t n)
{
    int64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += parts[i].expected_row_count;
    return (ll_manifest){sum, 0, NULL, NULL, (int32_t)n, n, parts};
}

/* Asserts the joined violations ("; ") and their count. */
static void expect_allow(const ll_manifest *m, bool allow_empty, const char *joined)
{
    ll_strlist out = {0};
    int rc = ll_manifest_violations(m, allow_empty, &out);
    char *got = ll_strlist_join(&out, "; ");
    assert_string_equal(got, joined);
    assert_int_equal(rc, (int)out.n);
    free(got);
    ll_strlist_clear(&out);
}

static void expect(const ll_manifest *m, const char *joined)
{
    expect_allow(m, false, joined);
}

/* The base plan: [0,100) [100,200) [200,300]. */
static const ll_manifest_partition base[] = {
    {"0000", "0", "100", false, false, 10},
    {"0001", "100", "200", false, false, 20},
    {"0002", "200", "300", true, false, 30},
};

static void test_valid_plan_passes(void **state)
{
    (void)state;
    ll_manifest m = plan(base, 3);
    m.source_min_split = "0";
    m.source_max_split = "300";
    expect(&m, "");
}

static void test_request_order_does_not_matter(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {base[2], base[0], base[1]};
    ll_manifest m = plan(p, 3);
    m.source_min_split = "0";
    m.source_max_split = "300";
    expect(&m, "");
}

static void test_duplicate_partition_id(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {range("0000", "0", "100", false, 1), range("0000", "100", "200", true, 1)};
    ll_manifest m = plan(p, 2);
    expect(&m, "DUPLICATE_PARTITION_ID");
    ll_manifest_partition q[] = {range("0007", "0", "1", false, 1), range("0003", "1", "2", false, 1),
                                 range("0007", "2", "3", false, 1), range("0003", "3", "4", true, 1)};
    m = plan(q, 4);
    expect(&m, "DUPLICATE_PARTITION_ID"); /* reported once */
}

/* n chained ranges [10i, 10(i+1)), the last inclusive, ids 0000.., 1 row each. */
static ll_manifest_partition *chain(size_t n, char (*ids)[24], char (*bounds)[24])
{
    ll_manifest_partition *p = calloc(n, sizeof *p);
    for (size_t i = 0; i <= n; i++)
        snprintf(bounds[i], 24, "%zu", i * 10);
    for (size_t i = 0; i < n; i++) {
        snprintf(ids[i], 24, "%04zu", i);
        p[i] = range(ids[i], bounds[i], bounds[i + 1], i + 1 == n, 1);
    }
    return p;
}

static void test_partition_count_mismatch(void **state)
{
    (void)state;
    char ids[7][24], bounds[8][24];
    ll_manifest_partition *p = chain(7, ids, bounds);
    ll_manifest m = plan(p, 7);
    expect(&m, "");
    m.planned_partition_count = 8;
    expect(&m, "PARTITION_COUNT_MISMATCH planned=8 actual=7");
    m.planned_partition_count = 6;
    expect(&m, "PARTITION_COUNT_MISMATCH planned=6 actual=7");
    m.planned_partition_count = -1;
    expect(&m, "PARTITION_COUNT_MISMATCH planned=-1 actual=7");
    free(p);
}

static void test_expected_sum_mismatch(void **state)
{
    (void)state;
    ll_manifest m = plan(base, 3);
    m.source_count = 61;
    expect(&m, "EXPECTED_SUM_MISMATCH sum=60 source=61");
    m.source_count = 59;
    expect(&m, "EXPECTED_SUM_MISMATCH sum=60 source=59");
}

static void test_expected_sum_does_not_overflow(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {range("0000", "0", "1", false, INT64_MAX),
                                 range("0001", "1", "2", true, INT64_MAX)};
    ll_manifest m = plan(p, 1); /* sum of one; then widen to two */
    m.n_partitions = 2;
    m.planned_partition_count = 2;
    m.source_count = INT64_MAX;
    expect(&m, "EXPECTED_SUM_MISMATCH sum=18446744073709551614 source=9223372036854775807");
    ll_manifest_partition q[] = {range("0000", "0", "1", true, -5)};
    m = plan(q, 1);
    m.source_count = 0;
    expect_allow(&m, true, "EXPECTED_SUM_MISMATCH sum=-5 source=0");
}

static void test_empty_source(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {range("0000", "0", "100", false, 0), range("0001", "100", "200", true, 0)};
    ll_manifest m = plan(p, 2);
    expect(&m, "EMPTY_SOURCE_BLOCKED");
    expect_allow(&m, true, "");
}

static void test_valid_null_partition(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {base[0], base[1], base[2], nullp("NULL", NULL, NULL, 5)};
    ll_manifest m = plan(p, 4);
    m.source_null_split_count = 5;
    m.source_min_split = "0";
    m.source_max_split = "300";
    expect(&m, "");
}

static void test_invalid_null_partition(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {base[0], base[1], base[2], nullp("0003", NULL, NULL, 0)};
    ll_manifest m = plan(p, 4);
    expect(&m, "INVALID_NULL_PARTITION 0003");
    p[3] = nullp("NULL", "5", NULL, 0);
    expect(&m, "INVALID_NULL_PARTITION NULL");
    p[3] = nullp("NULL", NULL, "5", 0);
    expect(&m, "INVALID_NULL_PARTITION NULL");
    p[3] = nullp("NULL", "5", "5", 0);
    expect(&m, "INVALID_NULL_PARTITION NULL");
}

static void test_null_count_mismatch(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {base[0], base[1], base[2], nullp("NULL", NULL, NULL, 4)};
    ll_manifest m = plan(p, 4);
    m.source_null_split_count = 5;
    expect(&m, "NULL_COUNT_MISMATCH expected=4 source=5");
    m.source_null_split_count = 0;
    expect(&m, "NULL_COUNT_MISMATCH expected=4 source=0");
}

static void test_null_rows_without_null_partition(void **state)
{
    (void)state;
    ll_manifest m = plan(base, 3);
    m.source_null_split_count = 1;
    expect(&m, "NULL_ROWS_WITHOUT_NULL_PARTITION");
}

static void test_multiple_null_partitions(void **state)
{
    (void)state;
    /* per null partition (request order): INVALID_NULL_PARTITION, then NULL_COUNT_MISMATCH */
    ll_manifest_partition p[] = {nullp("NULL", NULL, NULL, 3), base[0], base[1], base[2],
                                 nullp("0009", NULL, NULL, 2)};
    ll_manifest m = plan(p, 5);
    m.source_null_split_count = 5;
    expect(&m, "MULTIPLE_NULL_PARTITIONS; NULL_COUNT_MISMATCH expected=3 source=5; "
               "INVALID_NULL_PARTITION 0009; NULL_COUNT_MISMATCH expected=2 source=5");
}

static void test_invalid_bounds(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {base[0], range("0001", "100", "200", false, 20), base[2]};
    ll_manifest m = plan(p, 3);
    p[1].partition_id = "NULL"; /* range partition named NULL */
    expect(&m, "INVALID_BOUNDS NULL; RANGE_GAP_OR_OVERLAP 0000->0002");
    p[1] = range("0001", NULL, "200", false, 20);
    expect(&m, "INVALID_BOUNDS 0001; RANGE_GAP_OR_OVERLAP 0000->0002");
    p[1] = range("0001", "100", NULL, false, 20);
    expect(&m, "INVALID_BOUNDS 0001; RANGE_GAP_OR_OVERLAP 0000->0002");
    p[1] = range("0001", "200", "100", false, 20);
    expect(&m, "INVALID_BOUNDS 0001; RANGE_GAP_OR_OVERLAP 0000->0002");
    p[1] = range("0001", "-0", "-1", false, 20);
    expect(&m, "INVALID_BOUNDS 0001; RANGE_GAP_OR_OVERLAP 0000->0002");
    p[1] = range("0001", "100", D39, false, 20); /* not a DecimalStr */
    expect(&m, "INVALID_BOUNDS 0001; RANGE_GAP_OR_OVERLAP 0000->0002");
    p[1] = range("0001", "1.5", "200", false, 20);
    expect(&m, "INVALID_BOUNDS 0001; RANGE_GAP_OR_OVERLAP 0000->0002");
}

static void test_invalid_bounds_excluded_from_range_checks(void **state)
{
    (void)state;
    /* the bad one sits where it would close the gap and carries the wrong inclusive flag */
    ll_manifest_partition p[] = {range("0000", "0", "100", false, 10), range("0001", "300", "100", true, 20),
                                 range("0002", "100", "300", true, 30)};
    ll_manifest m = plan(p, 3);
    m.source_min_split = "0";
    m.source_max_split = "300";
    expect(&m, "INVALID_BOUNDS 0001");
}

static void test_equal_bounds_allowed(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {range("0000", "5", "5", true, 1)};
    ll_manifest m = plan(p, 1);
    m.source_min_split = "5";
    m.source_max_split = "5";
    expect(&m, "");
    ll_manifest_partition q[] = {range("0000", "0", "5", false, 1), range("0001", "5", "5", false, 1),
                                 range("0002", "5", "9", true, 1)};
    m = plan(q, 3);
    expect(&m, "");
}

static void test_upper_inclusive_invalid(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {base[0], base[1], base[2]};
    ll_manifest m = plan(p, 3);
    p[2].upper_inclusive = false;
    expect(&m, "UPPER_INCLUSIVE_INVALID 0002");
    p[2].upper_inclusive = true;
    p[1].upper_inclusive = true;
    expect(&m, "UPPER_INCLUSIVE_INVALID 0001");
    p[0].upper_inclusive = true;
    p[2].upper_inclusive = false;
    expect(&m, "UPPER_INCLUSIVE_INVALID 0000; UPPER_INCLUSIVE_INVALID 0001; "
               "UPPER_INCLUSIVE_INVALID 0002");
    ll_manifest_partition single[] = {range("0000", "0", "1", false, 1)};
    m = plan(single, 1);
    expect(&m, "UPPER_INCLUSIVE_INVALID 0000");
}

static void test_range_gap_or_overlap(void **state)
{
    (void)state;
    char ids[7][24], bounds[8][24];
    ll_manifest_partition *p = chain(7, ids, bounds);
    ll_manifest m = plan(p, 7);
    p[4].lower_bound = "41"; /* gap between 0003 and 0004 */
    expect(&m, "RANGE_GAP_OR_OVERLAP 0003->0004");
    p[4].lower_bound = "39"; /* overlap */
    expect(&m, "RANGE_GAP_OR_OVERLAP 0003->0004");
    p[4].lower_bound = "0040"; /* numeric equality, not textual */
    expect(&m, "");
    free(p);
}

static void test_range_checks_interleave_per_partition(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {range("0000", "0", "10", true, 1), range("0001", "20", "30", true, 1),
                                 range("0002", "30", "40", false, 1)};
    ll_manifest m = plan(p, 3);
    expect(&m, "UPPER_INCLUSIVE_INVALID 0000; RANGE_GAP_OR_OVERLAP 0000->0001; "
               "UPPER_INCLUSIVE_INVALID 0001; UPPER_INCLUSIVE_INVALID 0002");
}

static void test_sort_is_numeric_then_by_id(void **state)
{
    (void)state;
    /* textual order would put "10" before "9" */
    ll_manifest_partition p[] = {range("0000", "10", "20", true, 1), range("0001", "9", "10", false, 1)};
    ll_manifest m = plan(p, 2);
    m.source_min_split = "9";
    m.source_max_split = "20";
    expect(&m, "");
    /* negative bounds */
    ll_manifest_partition n[] = {range("0001", "-5", "0", false, 1), range("0000", "-10", "-5", false, 1),
                                 range("0002", "-0", "7", true, 1)};
    m = plan(n, 3);
    m.source_min_split = "-10";
    m.source_max_split = "7";
    expect(&m, "");
    /* equal lower bounds: ordered by id, whatever the request order */
    ll_manifest_partition t[] = {range("0002", "0", "5", false, 1), range("0001", "0", "3", false, 1),
                                 range("0003", "5", "9", true, 1)};
    m = plan(t, 3);
    expect(&m, "RANGE_GAP_OR_OVERLAP 0001->0002");
}

static void test_decimal_equality_in_chain(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {range("0000", "-" D38, "-0", false, 1), range("0001", "0", "0100", false, 1),
                                 range("0002", "100", D38, true, 1)};
    ll_manifest m = plan(p, 3);
    m.source_min_split = "-" D38;
    m.source_max_split = D38;
    expect(&m, "");
    p[2].lower_bound = "101";
    expect(&m, "RANGE_GAP_OR_OVERLAP 0001->0002");
}

static void test_min_max_split(void **state)
{
    (void)state;
    ll_manifest m = plan(base, 3);
    m.source_min_split = "1";
    expect(&m, "MIN_SPLIT_MISMATCH");
    m.source_min_split = "-0";
    m.source_max_split = "0300";
    expect(&m, "");
    m.source_max_split = "299";
    expect(&m, "MAX_SPLIT_MISMATCH");
    m.source_min_split = "-1";
    m.source_max_split = "301";
    expect(&m, "MIN_SPLIT_MISMATCH; MAX_SPLIT_MISMATCH");
    m.source_min_split = "abc"; /* not a DecimalStr: differs from any bound */
    m.source_max_split = NULL;  /* not given: not checked */
    expect(&m, "MIN_SPLIT_MISMATCH");
}

static void test_min_max_without_valid_ranges(void **state)
{
    (void)state;
    /* no valid range partition: MIN/MAX are not checked (nothing to compare with) */
    ll_manifest_partition p[] = {nullp("NULL", NULL, NULL, 5)};
    ll_manifest m = plan(p, 1);
    m.source_null_split_count = 5;
    m.source_min_split = "1";
    m.source_max_split = "2";
    expect(&m, "");
    ll_manifest_partition q[] = {range("0000", "9", "1", true, 5)};
    m = plan(q, 1);
    m.source_min_split = "1";
    m.source_max_split = "2";
    expect(&m, "INVALID_BOUNDS 0000");
}

static void test_max_split_uses_last_range(void **state)
{
    (void)state;
    /* overlapping plan: MAX compares with the upper of the last range in (lower, id) order */
    ll_manifest_partition p[] = {range("0000", "0", "500", false, 1), range("0001", "10", "300", true, 1)};
    ll_manifest m = plan(p, 2);
    m.source_min_split = "0";
    m.source_max_split = "500";
    expect(&m, "RANGE_GAP_OR_OVERLAP 0000->0001; MAX_SPLIT_MISMATCH");
}

static void test_every_violation_in_table_order(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {
        range("0001", "0", "100", false, 10),  nullp("NULL", "5", NULL, 1),
        range("0001", "100", "200", true, 10), nullp("0009", NULL, NULL, 1),
        range("0003", NULL, "250", false, 0),  range("0004", "250", "300", true, 10),
    };
    ll_manifest m = {0, 2, "1", "301", 7, 6, p};
    expect(&m, "DUPLICATE_PARTITION_ID; PARTITION_COUNT_MISMATCH planned=7 actual=6; "
               "EXPECTED_SUM_MISMATCH sum=32 source=0; EMPTY_SOURCE_BLOCKED; "
               "MULTIPLE_NULL_PARTITIONS; INVALID_NULL_PARTITION NULL; "
               "NULL_COUNT_MISMATCH expected=1 source=2; INVALID_NULL_PARTITION 0009; "
               "NULL_COUNT_MISMATCH expected=1 source=2; INVALID_BOUNDS 0003; "
               "UPPER_INCLUSIVE_INVALID 0001; RANGE_GAP_OR_OVERLAP 0001->0004; "
               "MIN_SPLIT_MISMATCH; MAX_SPLIT_MISMATCH");
}

static void test_no_partitions(void **state)
{
    (void)state;
    ll_manifest m = {5, 0, NULL, NULL, 1, 0, NULL};
    expect(&m, "PARTITION_COUNT_MISMATCH planned=1 actual=0; EXPECTED_SUM_MISMATCH sum=0 source=5");
    m.source_null_split_count = 2;
    expect(&m, "PARTITION_COUNT_MISMATCH planned=1 actual=0; EXPECTED_SUM_MISMATCH sum=0 source=5; "
               "NULL_ROWS_WITHOUT_NULL_PARTITION");
}

static void test_null_id_pointer_reads_as_empty(void **state)
{
    (void)state;
    ll_manifest_partition p[] = {range(NULL, "0", "1", false, 1), range(NULL, "1", "2", true, 1)};
    ll_manifest m = plan(p, 2);
    expect(&m, "DUPLICATE_PARTITION_ID");
}

static void test_appends_and_counts_only_new(void **state)
{
    (void)state;
    ll_strlist out = {0};
    assert_int_equal(ll_strlist_addf(&out, "EARLIER"), 0);
    ll_manifest m = plan(base, 3);
    m.source_count = 0;
    assert_int_equal(ll_manifest_violations(&m, false, &out), 2);
    assert_int_equal(out.n, 3);
    assert_string_equal(out.items[0], "EARLIER");
    assert_string_equal(out.items[1], "EXPECTED_SUM_MISMATCH sum=60 source=0");
    assert_string_equal(out.items[2], "EMPTY_SOURCE_BLOCKED");
    ll_strlist_clear(&out);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    ll_strlist out = {0};
    ll_manifest m = plan(base, 3);
    assert_int_equal(ll_manifest_violations(NULL, false, &out), -1);
    assert_int_equal(ll_manifest_violations(&m, false, NULL), -1);
    m.partitions = NULL;
    assert_int_equal(ll_manifest_violations(&m, false, &out), -1);
    assert_int_equal(out.n, 0);
}

static void test_ten_thousand_partitions(void **state)
{
    (void)state;
    size_t n = 10000;
    char(*ids)[24] = malloc(n * sizeof *ids);
    char(*bounds)[24] = malloc((n + 1) * sizeof *bounds);
    ll_manifest_partition *p = chain(n, ids, bounds);
    /* reverse the request order */
    for (size_t i = 0; i < n / 2; i++) {
        ll_manifest_partition t = p[i];
        p[i] = p[n - 1 - i];
        p[n - 1 - i] = t;
    }
    ll_manifest m = plan(p, n);
    m.source_min_split = "0";
    m.source_max_split = "100000";
    expect(&m, "");
    free(p);
    free(bounds);
    free(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_plan_passes),
        cmocka_unit_test(test_request_order_does_not_matter),
        cmocka_unit_test(test_duplicate_partition_id),
        cmocka_unit_test(test_partition_count_mismatch),
        cmocka_unit_test(test_expected_sum_mismatch),
        cmocka_unit_test(test_expected_sum_does_not_overflow),
        cmocka_unit_test(test_empty_source),
        cmocka_unit_test(test_valid_null_partition),
        cmocka_unit_test(test_invalid_null_partition),
        cmocka_unit_test(test_null_count_mismatch),
        cmocka_unit_test(test_null_rows_without_null_partition),
        cmocka_unit_test(test_multiple_null_partitions),
        cmocka_unit_test(test_invalid_bounds),
        cmocka_unit_test(test_invalid_bounds_excluded_from_range_checks),
        cmocka_unit_test(test_equal_bounds_allowed),
        cmocka_unit_test(test_upper_inclusive_invalid),
        cmocka_unit_test(test_range_gap_or_overlap),
        cmocka_unit_test(test_range_checks_interleave_per_partition),
        cmocka_unit_test(test_sort_is_numeric_then_by_id),
        cmocka_unit_test(test_decimal_equality_in_chain),
        cmocka_unit_test(test_min_max_split),
        cmocka_unit_test(test_min_max_without_valid_ranges),
        cmocka_unit_test(test_max_split_uses_last_range),
        cmocka_unit_test(test_every_violation_in_table_order),
        cmocka_unit_test(test_no_partitions),
        cmocka_unit_test(test_null_id_pointer_reads_as_empty),
        cmocka_unit_test(test_appends_and_counts_only_new),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_ten_thousand_partitions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
