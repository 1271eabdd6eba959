/*
 * chunk_bulk.c - the chunk reports of one database transaction in seven set-based statements
 * (issue 8 §2-§3), instead of a savepoint, two locks and a statement each.
 *
 *   1. lock the batch's runs, in run-id order, SKIP LOCKED (docs/contract.md §2.8: run first; a run
 *      someone else holds is left to the per-message path, which waits for it and holds it);
 *   2. lock the partitions of the runs locked in step 1 (none of a skipped run: this transaction
 *      waits for that run later, and must not hold its partition meanwhile), in (run id,
 *      partition id) order, SKIP LOCKED, and count the open partitions of the EXTRACTING runs
 *      locked (in this statement, not step 1's: step 1's snapshot is older than its locks, and a
 *      gate committed under a run lock in between would still count as open: docs/design.md §7);
 *   3. read the stored file rows of the reported chunks and of the reported paths;
 *   4. decide each report in message order (ll_chunk_fast_decide): the owner's new or changed
 *      file of a RUNNING partition is written (ACCEPTED), and when the counters prove the
 *      partition complete with its expected rows the gate passes too (partition SUCCESS); an
 *      identical file is a REPLAY; everything else (a rejection, a deferral, a path another chunk
 *      holds, the same chunk or path twice in the batch, a gate that fails or needs the files
 *      aggregated, a report after its run's completion) is left to the per-message path, with every
 *      later report of the same run (marked retry when it could be decided on its own: the loop
 *      calls again for that run once the earlier one is applied);
 *   5. write every decided file row in one INSERT ... ON CONFLICT, set the counters and heartbeat
 *      of their partitions in one UPDATE, and the passed gates in one statement (partition
 *      SUCCESS, run success count, PARTITION_SUCCESS events); the run's heartbeat once per
 *      transaction;
 *   6. the completion CAS of every run whose last open partition passed its gate, with its outbox
 *      row, event and NOTIFY, in one statement (runs_complete.c; docs/contract.md §5.11-§5.12).
 * Nothing is written for a report left to the other path, so the answers are the per-message
 * path's (chunk_report.c) for the same state: tests/integration/test_bulk_apply.py compares them.
 *
 * Work per call is linear in the batch (loop.batch_max ≤ 2000 messages): lookups go through
 * hash maps (ll/strmap.h) sized for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_bulk.h"
#include "completion.h"
#include "ll/apply.h"

static brun *find_run(bulk *k, const char *id)
{
    const size_t *i = ll_strmap_get(&k->run_of, id);
    return i ? &k->runs[*i] : NULL;
}

/* The stored row of report rp's chunk, NULL when none; *path_elsewhere when another chunk holds
 * its path. */
static const ll_chunk_file *stored(const bulk *k, const brep *rp, bool *path_elsewhere)
{
    const size_t *f = ll_strmap_get(&k->file_of, rp->key), *g = ll_strmap_get(&k->file_at, rp->c.path);
    *path_elsewhere = g && strcmp(k->files[*g].key, rp->key) != 0;
    return f ? &k->files[*f].f : NULL;
}

/* Step 4 for report i: decides it, or leaves it (LL_CHUNK_FAST_PASS). */
static ll_chunk_fast decide(bulk *k, size_t i, const ll_msg *m, bool *retry)
{
    brep *rp = &k->reps[i];
    *retry = false;
    if (!rp->ok)
        return LL_CHUNK_FAST_PASS;
    bool behind = ll_strmap_get(&k->passed, m->key) != NULL; /* an earlier report of its run was left */
    if (ll_strmap_get(&k->write_of, rp->key) || ll_strmap_get(&k->write_at, rp->c.path))
        return LL_CHUNK_FAST_PASS; /* the same chunk or path twice: one at a time */
    brun *run = find_run(k, rp->c.run_id);
    if (run && run->completing)
        return LL_CHUNK_FAST_PASS; /* after its run's completion: one by one, against the new status */
    const size_t *pi = run ? ll_strmap_get(&k->part_of, rp->pkey) : NULL;
    bool path_elsewhere;
    const ll_chunk_file *old = stored(k, rp, &path_elsewhere);
    if (!pi || path_elsewhere)
        return LL_CHUNK_FAST_PASS;
    bpart *part = &k->parts[*pi];
    ll_chunk_file file = {.count = rp->c.count,
                          .path = rp->c.path,
                          .records = rp->c.records,
                          .bytes = rp->c.bytes,
                          .written = true};
    ll_chunk_fast_in in = {.run = run->status,
                           .part = part->status,
                           .token_matches = part->token[0] && strcmp(part->token, rp->c.token) == 0,
                           .path_inside_run = ll_chunk_path_inside_run(run->path, rp->c.path),
                           .old = old,
                           .file = &file,
                           .expected_rows = part->expected_rows};
    ll_chunk_counters after = part->counters;
    ll_chunk_fast d = ll_chunk_fast_decide(&in, &after);
    if (behind) {
        *retry = d != LL_CHUNK_FAST_PASS; /* keep the order; worth another try once it is applied */
        return LL_CHUNK_FAST_PASS;
    }
    if (d == LL_CHUNK_FAST_PASS)
        return d;
    part->counters = after;
    if (d != LL_CHUNK_FAST_REPLAY) {
        part->dirty = true;
        ll_strmap_put(&k->write_of, rp->key, i);
        ll_strmap_put(&k->write_at, rp->c.path, i);
    }
    if (d == LL_CHUNK_FAST_GATE) {
        part->gated = true;
        part->status = LL_PART_SUCCESS; /* later reports of it: REPLAY or CHUNK_CONFLICT, the other path */
        /* the run's last open partition: its completion CAS follows the gates (runs_complete.c) */
        rp->completes = run->completing = run->open_parts <= 1;
        run->open_parts--;
    }
    return d;
}

/* The decided reports whose replies one call of hand_replies hands over. */
typedef struct replies {
    bulk *k;
    const ll_msg *const *msgs;
    ll_bulk_out *outs;
    bool completing; /* false: the reports whose run stays open; true: those completing it */
} replies;

/* Hands over the replies of the decided reports of one kind (replies.completing). Each run's
 * replies keep their order: the report completing a run is the last one decided for it. */
static void hand_replies(replies *r)
{
    bulk *k = r->k;
    for (size_t i = 0; i < k->n; i++) {
        const brep *rp = &k->reps[i];
        if (!r->outs[i].decided || rp->completes != r->completing)
            continue;
        const brun *run = find_run(k, rp->c.run_id);
        bool won = rp->completes && run->won;
        /* encoded at once by the loop: a batch's replies are never all records at the same time */
        ll_bulk_reply(&r->outs[i],
                      chunk_outcome(r->msgs[i], &rp->c, rp->d == LL_CHUNK_FAST_REPLAY ? "REPLAY" : "ACCEPTED",
                                    NULL, NULL, won ? "EXTRACTED_VALIDATED" : ll_run_status_name(run->status),
                                    ll_part_status_name(rp->part_status), (long long)rp->received, won));
    }
}

/* ll_db_meanwhile_fn: the replies of the reports whose run stays open. */
static void early_replies(void *arg)
{
    hand_replies(arg);
}

static void bulk_free(bulk *k)
{
    ll_strmap *maps[] = {&k->run_of,   &k->part_of,  &k->file_of, &k->file_at,
                         &k->write_of, &k->write_at, &k->passed};
    for (size_t i = 0; i < sizeof maps / sizeof *maps; i++)
        ll_strmap_free(maps[i]);
    PQclear(k->runs_res);
    PQclear(k->parts_res);
    PQclear(k->files_res);
    free(k->runs);
    free(k->parts);
    free(k->files);
    free(k->reps);
}

ll_apply completion_bulk_chunks(void *svc, ll_db *db, const ll_msg *const *msgs, size_t n, ll_bulk_out *outs)
{
    (void)svc;
    bulk k = {.db = db, .n = n, .reps = calloc(n + 1, sizeof(brep))};
    size_t candidates = 0;
    if (!k.reps)
        abort();
    /* every map holds at most one key per report (the files query returns two rows per report
     * at most: its chunk's and its path's) */
    ll_strmap *maps[] = {&k.run_of, &k.part_of, &k.write_of, &k.write_at, &k.passed};
    for (size_t i = 0; i < sizeof maps / sizeof *maps; i++)
        ll_strmap_init(maps[i], n);
    ll_strmap_init(&k.file_of, 2 * n);
    ll_strmap_init(&k.file_at, 2 * n);
    for (size_t i = 0; i < n; i++) {
        brep *rp = &k.reps[i];
        ll_apply_out scratch;
        /* anything unusual is the per-message path's: it answers or dead-letters it */
        rp->ok = msgs[i]->key && chunk_read(msgs[i]->value, &rp->c, &scratch) && rp->c.index < rp->c.count &&
                 strcmp(msgs[i]->key, rp->c.run_id) == 0;
        if (rp->ok) {
            snprintf(rp->pkey, sizeof rp->pkey, "%s|%s", rp->c.run_id, rp->c.partition_id);
            snprintf(rp->key, sizeof rp->key, "%s|%lld", rp->pkey, (long long)rp->c.index);
        }
        candidates += rp->ok;
    }
    ll_db_rc rc = LL_DB_OK;
    if (candidates == 0)
        goto out;
    if ((rc = bulk_lock_rows(&k)) != LL_DB_OK || (rc = bulk_read_files(&k)) != LL_DB_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        brep *rp = &k.reps[i];
        rp->d = decide(&k, i, msgs[i], &outs[i].retry);
        if (rp->d == LL_CHUNK_FAST_PASS) {
            ll_strmap_put(&k.passed, msgs[i]->key, i);
            continue;
        }
        const bpart *part = &k.parts[*ll_strmap_get(&k.part_of, rp->pkey)];
        rp->part_status = part->status;
        rp->received = part->counters.files;
        outs[i].decided = true;
        if (rp->d != LL_CHUNK_FAST_REPLAY)
            ll_msg_touch_run(msgs[i], rp->c.run_id);
    }
    /* the replies of the reports whose run does not complete here are known now: encoded while
     * the server writes the files; the others once the completion CAS has answered */
    replies r = {&k, msgs, outs, false};
    if ((rc = bulk_write_rows(&k, early_replies, &r)) != LL_DB_OK ||
        (rc = bulk_complete_runs(&k)) != LL_DB_OK)
        goto out;
    r.completing = true;
    hand_replies(&r);
out:
    bulk_free(&k);
    return ll_apply_of_db(rc);
}
