/*
 * chunk.c - the partition gate judged after every chunk report.
 *
 * docs/contract.md §5.4 steps 9-10. The caller aggregates the WRITTEN files of the partition (step 8)
 * under the run and partition locks, then asks:
 *   - step 9: run not EXTRACTING, partition not RUNNING, or fewer files than chunkCount
 *     -> WAIT (the file is recorded, nothing is judged);
 *   - step 10: complete (files = chunkCount, indexes 0..chunkCount-1, one distinct chunkCount)
 *     and rows = expected -> PASS; anything else (missing or duplicate index, inconsistent
 *     chunkCount, row total off) -> MISMATCH, whose ROW_COUNT_MISMATCH message this file also
 *     writes. Check 4 (the chunk's path) lives in paths.c.
 */
#include "ll/rules.h"

#include <inttypes.h>
#include <stdio.h>

/* §5.4 step 10 "complete": every index 0..chunk_count-1 once, all with one chunkCount. */
static bool chunks_complete(const ll_chunk_aggregate *agg, int32_t chunk_count)
{
    return agg->files == chunk_count && agg->lo == 0 && agg->hi == (int64_t)chunk_count - 1 &&
           agg->distinct_counts == 1;
}

/*
 * §5.4 steps 9-10. chunk_count is the reporting request's chunkCount, expected_rows the
 * partition's expected_row_count (rows). agg is borrowed; NULL is treated as "no files" (WAIT).
 */
ll_gate ll_chunk_gate(ll_run_status run, ll_part_status part, const ll_chunk_aggregate *agg,
                      int32_t chunk_count, int64_t expected_rows)
{
    if (run != LL_RUN_EXTRACTING || part != LL_PART_RUNNING || agg == NULL || agg->files < chunk_count)
        return LL_GATE_WAIT;
    if (chunks_complete(agg, chunk_count) && agg->rows == expected_rows)
        return LL_GATE_PASS;
    return LL_GATE_MISMATCH;
}

/*
 * §5.4 step 10: "files=F chunkCount=C distinctCounts=D rows=R expected=E" into out[outlen]
 * (truncated if short). Returns snprintf's result (the untruncated length), or -1 for NULL agg.
 */
int ll_gate_mismatch_message(const ll_chunk_aggregate *agg, int32_t chunk_count, int64_t expected_rows,
                             char *out, size_t outlen)
{
    if (agg == NULL)
        return -1;
    return snprintf(out, outlen,
                    "files=%" PRId64 " chunkCount=%" PRId32 " distinctCounts=%" PRId64 " rows=%" PRId64
                    " expected=%" PRId64,
                    agg->files, chunk_count, agg->distinct_counts, agg->rows, expected_rows);
}

bool ll_chunk_counters_complete(const ll_chunk_counters *c, int32_t chunk_count, ll_chunk_aggregate *agg)
{
    int64_t n = (int64_t)chunk_count;
    if (c == NULL || chunk_count < 1 || c->files != n || c->count_sum != n * n || c->count_sumsq != n * n * n)
        return false;
    agg->files = n;
    agg->lo = 0;
    agg->hi = n - 1;
    agg->rows = c->rows;
    agg->bytes = c->bytes;
    agg->distinct_counts = 1;
    return true;
}
