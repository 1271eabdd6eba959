/*
 * kloop_batch.c - one batch of the loop from start to end (kloop_batch.h has the map of its files):
 * its steps in order, the database commit, then its replies and dead letters staged, its offsets
 * and the start of a Kafka commit; a failed batch undone.
 *
 *   work     = the held messages of runs whose retry is due (in offset order), then the polled
 *              messages (a message of a run that is still held joins its run's queue instead),
 *              sorted by run id, stably, so that every transaction locks runs in one order and
 *              two instances cannot deadlock each other, while a run keeps its own order;
 *   database = BEGIN; per message SAVEPOINT, apply, and on a rejection, deferral, dead letter or
 *              SQL error ROLLBACK TO SAVEPOINT, so it undoes alone; COMMIT after at most
 *              loop.db_batch_max messages (at most LL_BATCH_SAVEPOINTS: PostgreSQL's
 *              subtransaction cache) and at the end. One message per transaction needs no
 *              savepoint (loop.batch_max = 1 or loop.db_batch_max = 1: the old design);
 *   Kafka    = after each database commit, and only then, the replies and dead letters of its
 *              messages are staged, their offsets marked done; at the end the staged records
 *              and the offsets (the first message not done, plus the done offsets above it as
 *              metadata) go into one Kafka transaction, or, while one is in flight, into the
 *              next (kloop_commit.c).
 *
 * A message whose prerequisite is missing (DEFER), or whose run's rows stay locked by someone
 * else (lock or statement timeout), or that lost a deadlock, is held: copied into its
 * partition's held queue with the later messages of its run, and retried with backoff
 * (loop.retry_backoff_min..max). Every other run flows past it. Once loop.prerequisite_wait has
 * passed since its first deferral it is applied with wait_expired (the contract's business
 * answer), and a still missing prerequisite becomes a dead letter (PREREQUISITE_TIMEOUT). A full
 * held queue (loop.max_held) pauses the partition's fetching until it drains to half.
 *
 * An unreachable database undoes the whole batch, and a failed Kafka transaction every batch
 * whose records it carried or that were staged behind it: the Kafka transaction is aborted and the
 * loop rewinds to the committed offsets (held queues dropped, staged records dropped, done offsets
 * reloaded from the commit metadata) after a backoff; what was committed in the database is then
 * applied again as a replay.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kloop_batch.h"
#include "ll/log.h"
#include "ll/obs.h"

/* Whether a rewind is owed: reported by this batch, or owed by the loop already. */
static bool batch_owes(const batch *b)
{
    return b->rewind || ll_loop_recovering(b->l);
}

/* Reports a rewind owed to the loop, after delay_ms (0: the recovery backoff). */
static void batch_owe_rewind(batch *b, int64_t delay_ms)
{
    if (!b->rewind) {
        b->rewind = 1;
        b->rewind_delay_ms = delay_ms;
    }
}

/* The batch failed (the database gone, or the transaction broke): its open transaction undone,
 * and a rewind reported, after the backoff (what was committed before it is applied again as a
 * replay). */
static void undo(batch *b)
{
    ll_loop *l = b->l;
    ll_batch_tx_undo(b);
    if (!batch_owes(b)) {
        ll_log(LL_WARN, NULL, "db_unavailable", "batch undone: %s %s (retrying from the committed offsets)",
               l->db.err.sqlstate, l->db.err.message);
        batch_owe_rewind(b, 0);
    }
}

static int cmp_mark(const void *a, const void *b)
{
    const done_mark *x = a, *y = b;
    if (x->ps != y->ps)
        return strcmp(x->ps->topic, y->ps->topic) != 0
                   ? strcmp(x->ps->topic, y->ps->topic)
                   : (x->ps->partition > y->ps->partition) - (x->ps->partition < y->ps->partition);
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* Marks the batch's staged offsets done, in offset order per partition. A tracker at its guard
 * (LL_OFFTRACK_RANGES_LIMIT, never reached with the limits checked at start) cannot take the
 * offset: its result must not be committed without it, so the staged records are dropped and the
 * loop rewinds to the committed offsets, where the message is applied again as a replay. */
static void mark_done_offsets(batch *b)
{
    if (b->n_marks == 0)
        return;
    qsort(b->marks, b->n_marks, sizeof *b->marks, cmp_mark);
    for (size_t i = 0; i < b->n_marks; i++)
        if (ll_offtrack_done(&b->marks[i].ps->track, b->marks[i].offset) != 0 && !batch_owes(b)) {
            ll_log(
                LL_ERROR, NULL, "offset_track_full",
                "%s[%d]: offset %lld cannot be marked done (%zu ranges): rewinding to the committed offsets",
                b->marks[i].ps->topic, (int)b->marks[i].ps->partition, (long long)b->marks[i].offset,
                ll_offtrack_ranges(&b->marks[i].ps->track));
            batch_owe_rewind(b, 0);
        }
    b->n_marks = 0;
}

/* Releases the decoded values the batch still keeps (ll_batch_decode): messages the set-based
 * part looked at and left that were then held behind their run, or a batch that ended early.
 * Walks the work only while something is kept: once the Kafka commit began, a failed one may
 * have rewound and freed the held copies the work points to. */
static void drop_decoded(batch *b)
{
    for (size_t i = 0; i < b->n_work && b->n_kept > 0; i++)
        ll_batch_decoded_drop(b, b->work[i]);
}

ll_batch_end ll_loop_batch(ll_loop *l, rd_kafka_message_t **polled, size_t n)
{
    ll_batch_end end = {false, false, 0};
    int64_t now = ll_loop_now_ms(), waited0 = l->db.wait_us;
    batch b;
    memset(&b, 0, sizeof b);
    b.l = l;
    l->batch_no++;
    ll_batch_collect(&b, polled, n, now);
    int touched = 0;
    for (size_t i = 0; i < l->n_parts; i++)
        touched |= l->parts[i]->touched == l->batch_no;
    if (b.n_work == 0 && !touched)
        goto out;
    b.use_savepoints = b.n_work > 1 && l->db_batch_max > 1;
    b.bulk_on = l->db_batch_max > 1;
    /* inputs the ledger answered before restate that answer, before anything is applied */
    if (ll_batch_restate(&b) != 0) {
        undo(&b);
        goto out;
    }
    run_waits held_runs = {0}; /* partitions where the current run has a message held */
    for (size_t i = 0; i < b.n_work; i++) {
        lmsg *m = b.work[i];
        /* the set-based part, first over the whole batch */
        if (b.bulk_on && i == 0 && ll_batch_bulk_step(&b, 0, NULL) != 0) {
            undo(&b);
            goto out;
        }
        if (m->decided)
            continue; /* applied by the set-based part, in a transaction committed or still open */
        /* an earlier message of the same run and partition is held in this batch: this one
         * waits behind it (already queued if it was held before) */
        ll_waits_enter(&held_runs, m);
        if (ll_waits_on(&held_runs, m->ps)) {
            m->state = 2;
            if (!m->held && !ll_loop_hold_copy(l, m))
                ll_batch_stop_partition(&b, m->ps, m->offset);
            continue;
        }
        if (ll_batch_apply_one(&b, m) == W_FAILED) {
            undo(&b);
            goto out;
        }
        if (m->state == 2)
            ll_waits_add(&held_runs, m->ps);
        if (ll_batch_tx_full(&b) && ll_batch_tx_commit(&b) != 0) {
            undo(&b);
            goto out;
        }
        /* the set-based part left the later messages of m's run behind m; now that m is
         * applied or held, they may go set-based again (those behind a held one on its
         * partition stay: kloop_bulk.c) */
        if (b.bulk_on && ll_batch_run_waits_after(&b, i) && ll_batch_bulk_step(&b, i + 1, m->run) != 0) {
            undo(&b);
            goto out;
        }
    }
    if (ll_batch_tx_commit(&b) != 0) {
        undo(&b);
        goto out;
    }
    int64_t t_db = ll_loop_now_ms();
    ll_log(LL_DEBUG, NULL, "batch_done",
           "%zu messages (%zu polled, %zu set-based, %zu decodes): database %lld ms, of which waiting for "
           "answers %.1f ms; %zu records staged; the last Kafka commit took %lld ms",
           b.n_work, n, b.n_bulk, b.n_decodes, (long long)(t_db - now),
           (double)(l->db.wait_us - waited0) / 1000.0, l->n_staged, (long long)l->last_commit_ms);
    mark_done_offsets(&b);
    if (ll_loop_positions_flush(l) != 0 && !batch_owes(&b)) {
        /* those no transaction of the batch wrote (docs/design.md §5). Not in the ledger, their
         * offsets must not reach Kafka's commit either: the ledger would then be behind Kafka
         * with nothing lost (a false ledger_behind_kafka). Rewound instead: read again and
         * answered then (their answers are staged, never visible) */
        batch_owe_rewind(&b, 0);
    }
    drop_decoded(&b); /* before the Kafka commit: its failure rewinds (held copies freed) */
    end.ended = true; /* the staged results may go into a Kafka commit (the loop's) */
out:
    mark_done_offsets(&b); /* those of database commits before a failure: the rewind reloads */
    free(b.marks);
    drop_decoded(&b);
    ll_batch_outs_clear(&b);
    for (size_t i = 0; i < b.n_done_held; i++)
        ll_loop_free_copy(b.done_held[i]);
    free(b.done_held);
    free(b.touch);
    free(b.outs);
    free(b.work);
    free(b.fresh);
    end.rewind = b.rewind;
    end.rewind_delay_ms = b.rewind_delay_ms;
    return end;
}
