/*
 * chunk_fast.c - which chunk reports the set-based path may decide on its own (issue 8 §2).
 *
 * The completion service reads the rows of a whole batch of chunk reports in a few statements,
 * decides here, then writes every decided file row in one statement. Only the common case is
 * decided: the owner reports a new or changed file of a RUNNING partition of an EXTRACTING run and
 * the partition is not complete yet (docs/contract.md §5.4 steps 1-9, WAIT), or its counters prove it
 * complete with the expected rows (step 10, PASS), or the owner repeats a WRITTEN file (REPLAY).
 * Every other case, and every gate the counters cannot prove or that fails, goes to the
 * per-message path, which applies the contract in full. A report equal in chunkCount, path, recordCount and
 * byteCount is identical (step 5; the fragment id is not compared).
 */
#include <stdint.h>
#include <string.h>

#include "ll/rules.h"

static bool same_file(const ll_chunk_file *a, const ll_chunk_file *b)
{
    return a->count == b->count && a->records == b->records && a->bytes == b->bytes && a->path && b->path &&
           strcmp(a->path, b->path) == 0;
}

/* A WRITTEN row's part of the partition's counters (byteCount null counts 0). */
static ll_chunk_counters contribution(const ll_chunk_file *f)
{
    if (!f || !f->written)
        return (ll_chunk_counters){0};
    return (ll_chunk_counters){.files = 1,
                               .rows = f->records,
                               .bytes = f->bytes > 0 ? f->bytes : 0,
                               .count_sum = f->count,
                               .count_sumsq = f->count * f->count};
}

/* *out = base + add - sub, false when it leaves int64 */
static bool moved(int64_t base, int64_t add, int64_t sub, int64_t *out)
{
    int64_t t;
    return !__builtin_add_overflow(base, add, &t) && !__builtin_sub_overflow(t, sub, out);
}

ll_chunk_fast ll_chunk_fast_decide(const ll_chunk_fast_in *in, ll_chunk_counters *counters)
{
    const ll_chunk_file *f = in ? in->file : NULL;
    if (!f || !counters || in->run != LL_RUN_EXTRACTING || in->part != LL_PART_RUNNING ||
        !in->token_matches || !in->path_inside_run || f->count < 1 || f->count > INT32_MAX ||
        f->records < 0 || !f->path || (in->old && (in->old->count < 0 || in->old->count > INT32_MAX)))
        return LL_CHUNK_FAST_PASS;
    if (in->old && in->old->written && same_file(in->old, f))
        /* nothing to write; a partition this report would complete is judged by the other path */
        return counters->files >= f->count ? LL_CHUNK_FAST_PASS : LL_CHUNK_FAST_REPLAY;
    ll_chunk_counters was = contribution(in->old), now = contribution(&(ll_chunk_file){
                                                       .count = f->count,
                                                       .path = f->path,
                                                       .records = f->records,
                                                       .bytes = f->bytes,
                                                       .written = true,
                                                   });
    ll_chunk_counters after;
    /* a sum beyond bigint is the per-message path's to refuse (the database says so) */
    if (!moved(counters->files, now.files, was.files, &after.files) ||
        !moved(counters->rows, now.rows, was.rows, &after.rows) ||
        !moved(counters->bytes, now.bytes, was.bytes, &after.bytes) ||
        !moved(counters->count_sum, now.count_sum, was.count_sum, &after.count_sum) ||
        !moved(counters->count_sumsq, now.count_sumsq, was.count_sumsq, &after.count_sumsq))
        return LL_CHUNK_FAST_PASS;
    ll_chunk_fast d = LL_CHUNK_FAST_WRITE;
    if (after.files >= f->count) { /* step 10 to judge */
        ll_chunk_aggregate agg;
        if (!ll_chunk_counters_complete(&after, (int32_t)f->count, &agg) ||
            ll_chunk_gate(in->run, in->part, &agg, (int32_t)f->count, in->expected_rows) != LL_GATE_PASS)
            return LL_CHUNK_FAST_PASS; /* a mismatch, or the files to aggregate: the other path */
        d = LL_CHUNK_FAST_GATE;
    }
    *counters = after;
    return d;
}
