/*
 * manifest.c - the manifest invariants: every violation of a partition plan, as strings.
 *
 * docs/contract.md §5.2 step 4. All violations are collected (none short-circuits another) in the
 * contract's table order: counts and sums, then null-partition rules, then range rules.
 * Where one rule yields a string per partition, the order follows the reference
 * implementation's check_invariants(), which the table restates:
 *   - null partitions are visited in request order, and for each one INVALID_NULL_PARTITION
 *     comes before its NULL_COUNT_MISMATCH (so with two null partitions the two rules
 *     interleave);
 *   - range partitions are visited after sorting by (lower numeric, id, request position), and
 *     for each one UPPER_INCLUSIVE_INVALID comes before its RANGE_GAP_OR_OVERLAP to the next.
 * MIN/MAX_SPLIT_MISMATCH compare sourceMin/MaxSplit with the lower bound of the first and the
 * upper bound of the last valid range in that order (for a gap-free plan, the lowest lower and
 * the highest upper). They are skipped when no valid range partition exists - nothing to
 * compare with - as in the reference.
 *
 * Inputs beyond the schema (which the decoder enforces first) are handled without failing:
 * a NULL partition_id reads as "", a bound that is not a DecimalStr makes its partition
 * INVALID_BOUNDS, and a min/max split that is not a DecimalStr is a mismatch.
 */
#include "ll/rules.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Σ expectedRowCount of up to SIZE_MAX int64 values cannot overflow 128 bits in practice. */
__extension__ typedef __int128 sum128;

/* A range partition that passed INVALID_BOUNDS, with its request position for a stable sort. */
typedef struct range_entry {
    const ll_manifest_partition *p;
    size_t pos;
} range_entry;

/* The partition id as printed; NULL reads as "". */
static const char *pid(const ll_manifest_partition *p)
{
    return p->partition_id != NULL ? p->partition_id : "";
}

/* Writes v in decimal into buf (40 digits + sign + NUL suffice for 128 bits). */
static const char *sum128_str(sum128 v, char buf[42])
{
    char *p = buf + 41;
    *p = '\0';
    bool neg = v < 0;
    do {
        int digit = (int)(v % 10);
        *--p = (char)('0' + (neg ? -digit : digit));
        v /= 10;
    } while (v != 0);
    if (neg)
        *--p = '-';
    return p;
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* True when two partitions share an id. Returns -1 on allocation failure. */
static int has_duplicate_id(const ll_manifest *m)
{
    if (m->n_partitions < 2)
        return 0;
    const char **ids = malloc(m->n_partitions * sizeof *ids);
    if (ids == NULL)
        return -1;
    for (size_t i = 0; i < m->n_partitions; i++)
        ids[i] = pid(&m->partitions[i]);
    qsort(ids, m->n_partitions, sizeof *ids, cmp_str_ptr);
    int dup = 0;
    for (size_t i = 1; i < m->n_partitions && !dup; i++)
        dup = strcmp(ids[i - 1], ids[i]) == 0;
    free(ids);
    return dup;
}

/* DUPLICATE_PARTITION_ID, PARTITION_COUNT_MISMATCH, EXPECTED_SUM_MISMATCH, EMPTY_SOURCE_BLOCKED. */
static int check_counts(const ll_manifest *m, bool allow_empty_source, ll_strlist *out)
{
    int dup = has_duplicate_id(m);
    if (dup < 0 || (dup && ll_strlist_addf(out, "DUPLICATE_PARTITION_ID") != 0))
        return -1;
    if (m->planned_partition_count < 0 || (uint64_t)m->planned_partition_count != m->n_partitions)
        if (ll_strlist_addf(out, "PARTITION_COUNT_MISMATCH planned=%" PRId32 " actual=%zu",
                            m->planned_partition_count, m->n_partitions) != 0)
            return -1;
    sum128 sum = 0;
    for (size_t i = 0; i < m->n_partitions; i++)
        sum += m->partitions[i].expected_row_count;
    char buf[42];
    if (sum != m->source_count)
        if (ll_strlist_addf(out, "EXPECTED_SUM_MISMATCH sum=%s source=%" PRId64, sum128_str(sum, buf),
                            m->source_count) != 0)
            return -1;
    if (m->source_count == 0 && !allow_empty_source)
        if (ll_strlist_addf(out, "EMPTY_SOURCE_BLOCKED") != 0)
            return -1;
    return 0;
}

/* MULTIPLE_NULL_PARTITIONS, INVALID_NULL_PARTITION, NULL_COUNT_MISMATCH,
 * NULL_ROWS_WITHOUT_NULL_PARTITION. */
static int check_null_partitions(const ll_manifest *m, ll_strlist *out)
{
    size_t nulls = 0;
    for (size_t i = 0; i < m->n_partitions; i++)
        nulls += m->partitions[i].is_null_partition;
    if (nulls > 1 && ll_strlist_addf(out, "MULTIPLE_NULL_PARTITIONS") != 0)
        return -1;
    for (size_t i = 0; i < m->n_partitions; i++) {
        const ll_manifest_partition *p = &m->partitions[i];
        if (!p->is_null_partition)
            continue;
        if (strcmp(pid(p), "NULL") != 0 || p->lower_bound != NULL || p->upper_bound != NULL)
            if (ll_strlist_addf(out, "INVALID_NULL_PARTITION %s", pid(p)) != 0)
                return -1;
        if (p->expected_row_count != m->source_null_split_count)
            if (ll_strlist_addf(out, "NULL_COUNT_MISMATCH expected=%" PRId64 " source=%" PRId64,
                                p->expected_row_count, m->source_null_split_count) != 0)
                return -1;
    }
    if (nulls == 0 && m->source_null_split_count > 0)
        if (ll_strlist_addf(out, "NULL_ROWS_WITHOUT_NULL_PARTITION") != 0)
            return -1;
    return 0;
}

/* A range partition's bounds are usable: id not "NULL", both bounds DecimalStr, lower <= upper. */
static bool bounds_valid(const ll_manifest_partition *p)
{
    return strcmp(pid(p), "NULL") != 0 && ll_is_decimal_str(p->lower_bound) &&
           ll_is_decimal_str(p->upper_bound) && ll_decimal_cmp(p->lower_bound, p->upper_bound) <= 0;
}

/* Sort key (lower numeric, id, request position). */
static int cmp_range(const void *a, const void *b)
{
    const range_entry *x = a, *y = b;
    int c = ll_decimal_cmp(x->p->lower_bound, y->p->lower_bound);
    if (c == 0)
        c = strcmp(pid(x->p), pid(y->p));
    if (c == 0)
        c = (x->pos > y->pos) - (x->pos < y->pos);
    return c;
}

/* INVALID_BOUNDS for every bad range partition; the others go into r (sorted). Returns their
 * count, or -1 on allocation failure. */
static long collect_ranges(const ll_manifest *m, range_entry *r, ll_strlist *out)
{
    size_t k = 0;
    for (size_t i = 0; i < m->n_partitions; i++) {
        const ll_manifest_partition *p = &m->partitions[i];
        if (p->is_null_partition)
            continue;
        if (bounds_valid(p))
            r[k++] = (range_entry){p, i};
        else if (ll_strlist_addf(out, "INVALID_BOUNDS %s", pid(p)) != 0)
            return -1;
    }
    if (k > 1)
        qsort(r, k, sizeof *r, cmp_range);
    return (long)k;
}

/* UPPER_INCLUSIVE_INVALID and RANGE_GAP_OR_OVERLAP over the sorted valid ranges r[0..k). */
static int check_range_chain(const range_entry *r, size_t k, ll_strlist *out)
{
    for (size_t i = 0; i < k; i++) {
        const ll_manifest_partition *p = r[i].p;
        bool last = i + 1 == k;
        if (p->upper_inclusive != last)
            if (ll_strlist_addf(out, "UPPER_INCLUSIVE_INVALID %s", pid(p)) != 0)
                return -1;
        if (!last && ll_decimal_cmp(p->upper_bound, r[i + 1].p->lower_bound) != 0)
            if (ll_strlist_addf(out, "RANGE_GAP_OR_OVERLAP %s->%s", pid(p), pid(r[i + 1].p)) != 0)
                return -1;
    }
    return 0;
}

/* True when the split value is given and differs from bound (an invalid given value differs). */
static bool split_mismatch(const char *given, const char *bound)
{
    return given != NULL && (!ll_is_decimal_str(given) || ll_decimal_cmp(given, bound) != 0);
}

/* INVALID_BOUNDS, UPPER_INCLUSIVE_INVALID, RANGE_GAP_OR_OVERLAP, MIN/MAX_SPLIT_MISMATCH. */
static int check_ranges(const ll_manifest *m, ll_strlist *out)
{
    range_entry *r = NULL;
    if (m->n_partitions > 0 && (r = malloc(m->n_partitions * sizeof *r)) == NULL)
        return -1;
    long k = collect_ranges(m, r, out);
    int rc = k < 0 ? -1 : check_range_chain(r, (size_t)k, out);
    if (rc == 0 && k > 0 && split_mismatch(m->source_min_split, r[0].p->lower_bound))
        rc = ll_strlist_addf(out, "MIN_SPLIT_MISMATCH");
    if (rc == 0 && k > 0 && split_mismatch(m->source_max_split, r[k - 1].p->upper_bound))
        rc = ll_strlist_addf(out, "MAX_SPLIT_MISMATCH");
    free(r);
    return rc;
}

/*
 * §5.2 step 4: appends one string per violated invariant to out (see the top of this file for
 * the order). Strings in m are borrowed; out's new items are owned by out. Returns the number
 * of strings appended (0 = the manifest passes), or -1 for a NULL m/out, partitions NULL with
 * n_partitions > 0, or allocation failure (out may then hold some of the violations).
 */
int ll_manifest_violations(const ll_manifest *m, bool allow_empty_source, ll_strlist *out)
{
    if (m == NULL || out == NULL || (m->n_partitions > 0 && m->partitions == NULL))
        return -1;
    size_t before = out->n;
    if (check_counts(m, allow_empty_source, out) != 0 || check_null_partitions(m, out) != 0 ||
        check_ranges(m, out) != 0)
        return -1;
    return (int)(out->n - before);
}
