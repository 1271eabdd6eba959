/*
 * kloop_batch.c - one batch of the loop from start to end (kloop_batch.h has the map of its files):
 * its steps in order, the database commit, then its replies and dead letters, its offsets and the
 * start of its Kafka commit; a failed batch undone.
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
 *              messages; at the end the offsets (the first message not done, plus the done
 *              offsets above it as metadata) and the commit, in one Kafka transaction.
 *
 * A message whose prerequisite is missing (DEFER), or whose run's rows stay locked by someone
 * else (lock or statement timeout), or that lost a deadlock, is held: copied into its
 * partition's held queue with the later messages of its run, and retried with backoff
 * (loop.retry_backoff_min..max). Every other run flows past it. Once loop.prerequisite_wait has
 * passed since its first deferral it is applied with wait_expired (the contract's business
 * answer), and a still missing prerequisite becomes a dead letter (PREREQUISITE_TIMEOUT). A full
 * held queue (loop.max_held) pauses the partition's fetching until it drains to half.
 *
 * An unreachable database, or a failed Kafka transaction, undoes the whole batch: the Kafka
 * transaction is aborted and the loop rewinds to the committed offsets (held queues dropped,
 * done offsets reloaded from the commit metadata) after a backoff.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kloop_batch.h"
#include "ll/log.h"
#include "ll/obs.h"

/*
 * Before this batch's first record: the previous batch's Kafka commit is over (it ran beside
 * this batch's database work, kloop_commit.c), then this batch's Kafka transaction begins.
 * 0, or -1: the previous commit failed (aborted and rewound: b->kafka_failed) or the begin did.
 */
static int kafka_ready(batch *b)
{
    if (b->kafka_open)
        return 0;
    if (ll_loop_commit_wait(b->l) != 0) {
        b->kafka_failed = 1;
        return -1;
    }
    if (ll_loop_begin(b->l) != 0) {
        b->kafka_failed = 1;
        return -1;
    }
    b->kafka_open = 1;
    return 0;
}

/* Produces the queued results into the batch's Kafka transaction and marks their offsets done.
 * 0, or -1 (the caller undoes the batch). */
static int flush_outs(batch *b)
{
    ll_loop *l = b->l;
    if (b->n_outs > 0 && kafka_ready(b) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < b->n_outs && rc == 0; i++) {
        out_item *o = &b->outs[i];
        lmsg *m = o->m;
        if (o->is_reply) {
            char err[800];
            if (o->encode_err) {
                /* a reply that does not fit its schema: a dead letter, in a transaction of its
                 * own (the batch's is committed), rather than the same message for ever */
                snprintf(err, sizeof err, "the reply to %s does not fit its schema: %s", m->io->reply_topic,
                         o->encode_err);
                if (ll_db_ensure(&l->db) != LL_DB_OK || ll_db_command(&l->db, "BEGIN") != LL_DB_OK ||
                    ll_loop_dead_letter_event(l, m, o->run_id, "REPLY_ENCODE_FAILED", err) != 0 ||
                    ll_db_command(&l->db, "COMMIT") != LL_DB_OK ||
                    ll_loop_dead_letter_produce(l, m, "REPLY_ENCODE_FAILED", err) != 0)
                    rc = -1;
            } else {
                unsigned char *buf = o->reply; /* the producer owns it from here */
                o->reply = NULL;
                if (ll_loop_produce(l, m->io->reply_topic, m->key, m->key_len, buf, o->reply_len, NULL, 1) !=
                    0)
                    rc = -1;
                ll_obs_stage_input(m->io->topic, o->outcome, o->reply_code);
            }
        } else if (ll_loop_dead_letter_produce(l, m, o->code, o->reason) != 0) {
            rc = -1;
        }
        if (rc == 0) {
            ll_offtrack_done(&m->ps->track, m->offset); /* cannot fail: a new range never */
            m->ps->touched = l->batch_no;
            m->state = 1;
            if (m->held)
                ll_batch_unhold(b, m);
        }
    }
    ll_batch_outs_clear(b);
    return rc;
}

/* Commits the open database transaction and produces its results. 0, or -1 (batch undone). */
int ll_batch_tx_commit(batch *b)
{
    ll_loop *l = b->l;
    if (!b->in_tx) {
        return flush_outs(b);
    }
    if (ll_batch_touch_runs(b) != 0)
        return -1; /* still in the (failed) transaction: ll_batch_undo_all rolls it back */
    /* the previous batch's Kafka commit ends before this database commit: the durable steps
     * keep their order (kloop_commit.c); if it failed, this transaction is rolled back */
    if (ll_loop_commit_wait(l) != 0) {
        b->kafka_failed = 1;
        return -1;
    }
    b->in_tx = 0;
    if (ll_batch_db_cmd(b, "COMMIT") != 0)
        return -1;
    if (l->crash_after > 0 && ++l->db_commits >= l->crash_after) {
        ll_log(LL_WARN, NULL, "fault_injected", "killing self after database commit %lld",
               (long long)l->db_commits);
        /* the replies of earlier commits go to the broker first: it then holds an open
         * transaction, the most adverse form of this crash point for read_committed readers */
        rd_kafka_flush(l->producer, 10000);
        raise(SIGKILL);
    }
    return flush_outs(b);
}

/* The offsets to commit: every partition this batch touched, at its first message not done,
 * with the done offsets above it as metadata. */
static rd_kafka_topic_partition_list_t *offsets_of(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *o = rd_kafka_topic_partition_list_new((int)l->n_parts);
    for (size_t i = 0; i < l->n_parts; i++) {
        part_state *ps = l->parts[i];
        if (ps->touched != l->batch_no)
            continue;
        rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_add(o, ps->topic, ps->partition);
        tp->offset = ps->track.base;
        char md[LL_OFFTRACK_METADATA_MAX];
        int n = ll_offtrack_metadata(&ps->track, md, sizeof md);
        if (n > 0) {
            tp->metadata = malloc((size_t)n);
            memcpy(tp->metadata, md, (size_t)n);
            tp->metadata_size = (size_t)n;
        }
    }
    return o;
}

/* The batch failed (database gone, Kafka error): undo it all and rewind after a backoff. */
void ll_batch_undo_all(batch *b)
{
    ll_loop *l = b->l;
    if (b->in_tx && l->db.conn && PQstatus(l->db.conn) == CONNECTION_OK)
        ll_db_command(&l->db, "ROLLBACK");
    b->in_tx = 0;
    b->n_touch = 0;
    ll_batch_outs_clear(b);
    if (b->kafka_open)
        ll_loop_abort(l);
    if (!l->fatal && !l->producer_broken && !b->kafka_failed) {
        ll_log(LL_WARN, NULL, "db_unavailable", "batch undone: %s %s (retrying from the committed offsets)",
               l->db.err.sqlstate, l->db.err.message);
        l->rewind_pending = 1;
        ll_loop_recover_later(l, 0);
    }
}

/* Whether the open transaction must commit now: loop.db_batch_max savepoints (PostgreSQL caches
 * 64 subtransactions per backend), or, with loop.db_batch_max = 1, one message (the old design).
 * What the set-based part decided needs no savepoint and does not count. */
int ll_batch_tx_full(const batch *b)
{
    if (!b->in_tx)
        return 0;
    return b->l->db_batch_max == 1 ? b->tx_msgs >= 1 : b->savepoints >= b->l->db_batch_max;
}

void ll_loop_batch(ll_loop *l, rd_kafka_message_t **polled, size_t n)
{
    int64_t now = ll_loop_now_ms();
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
    run_waits held_runs = {0}; /* partitions where the current run has a message held */
    for (size_t i = 0; i < b.n_work; i++) {
        lmsg *m = b.work[i];
        /* the set-based part, first over the whole batch */
        if (b.bulk_on && i == 0 && ll_batch_bulk_step(&b, 0, NULL) != 0)
            goto out;
        if (m->decided)
            continue; /* applied by the set-based part, in a transaction committed or still open */
        /* an earlier message of the same run and partition is held in this batch: this one
         * waits behind it (already queued if it was held before) */
        ll_waits_enter(&held_runs, m);
        if (ll_waits_on(&held_runs, m->ps)) {
            m->state = 2;
            if (!m->held && !ll_loop_hold_copy(l, m))
                ll_loop_stop_partition(l, m->ps, m->offset);
            continue;
        }
        if (ll_batch_apply_one(&b, m) == W_FAILED) {
            ll_batch_undo_all(&b);
            goto out;
        }
        if (m->state == 2)
            ll_waits_add(&held_runs, m->ps);
        if (ll_batch_tx_full(&b) && ll_batch_tx_commit(&b) != 0) {
            ll_batch_undo_all(&b);
            goto out;
        }
        /* the set-based part left the later messages of m's run behind m; now that m is
         * applied (not held), they may go set-based again */
        if (b.bulk_on && m->state != 2 && ll_batch_run_waits_after(&b, i) &&
            ll_batch_bulk_step(&b, i + 1, m->run) != 0)
            goto out;
    }
    if (ll_batch_tx_commit(&b) != 0 || kafka_ready(&b) != 0) {
        ll_batch_undo_all(&b);
        goto out;
    }
    int64_t t_db = ll_loop_now_ms();
    ll_log(LL_DEBUG, NULL, "batch_done",
           "%zu messages (%zu polled, %zu set-based): database and replies %lld ms; the previous Kafka "
           "commit took %lld ms",
           b.n_work, n, b.n_bulk, (long long)(t_db - now), (long long)l->last_commit_ms);
    /* the commit runs beside the next batch (a failure aborts and rewinds when it is waited for,
     * or here when loop.overlap_commit is off) */
    ll_loop_commit_start(l, offsets_of(l));
    for (size_t i = 0; i < l->n_parts; i++)
        if (l->parts[i]->stopped && (int64_t)l->parts[i]->n_held <= l->max_held / 2)
            ll_loop_resume_partition(l, l->parts[i]);
out:
    ll_batch_outs_clear(&b);
    for (size_t i = 0; i < b.n_done_held; i++)
        ll_loop_free_copy(b.done_held[i]);
    free(b.done_held);
    free(b.touch);
    free(b.outs);
    free(b.work);
    free(b.fresh);
}
