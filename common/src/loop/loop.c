/*
 * loop.c - the consumer loop: the turn, the rebalance callback, and the recovery (loop_int.h has
 * the map of the folder).
 *
 * the consume / apply / produce-and-commit loop of docs/contract.md K§3: the turn (poll →
 * batch → stage → Kafka commit → recover) and the rebalance callback, top to bottom. The parts
 * below report and never recover themselves: the batch (batch.c) returns how it ended, the
 * Kafka commit (commit.c) returns its failure, the partitions (partition.c) a failed seek;
 * the loop hands what is owed to its recovery (loop.c), the one writer of the recovery
 * state. setup.c makes and frees the loop; loop_int.h has the map of the files.
 *
 * Crash points and what they leave (docs/design.md has the long form):
 *   - before a database commit: nothing happened; the messages are consumed again.
 *   - after a database commit, before the Kafka commit (of this batch and perhaps a few before it:
 *     a database commit does not wait for a Kafka commit): their replies were staged in memory, or
 *     sit in a Kafka transaction that the broker aborts when the same transactional.id starts
 *     again; the messages are consumed again, the CAS finds the ledger already moved and answers
 *     the same way (REPLAY), and that reply commits. A read_committed reader sees one reply.
 *   - after the Kafka commit: done; the commit metadata names the done offsets above the
 *     committed one, which are skipped when read again.
 * Nothing is ever skipped: a message is either applied (reply + offset), dead-lettered (the
 * dead-letter record + offset, after its ledger event commits), or held (no offset).
 *
 * the loop's recovery (loop_int.h), called by the loop alone (loop.c): what
 * is owed (ll_recovery_state, written here and nowhere else), aborting the Kafka transaction,
 * rewinding to the committed offsets with their done-offset metadata and the ledger's positions,
 * and a broken producer recreated in the same process. The parts below the loop (the batch, the
 * Kafka commit, the partitions) report a failure by their result; the loop hands it here.
 *
 * Error classes, where they arise (docs/contract.md K§3.4, docs/design.md §3): an abortable error
 * aborts the Kafka transaction and rewinds to the committed offsets; a fatal producer error
 * recreates the producer (same transactional.id: its init_transactions settles the open
 * transaction) and then rewinds; fenced or unauthorised ends the process (exit 2). A rewind that
 * cannot reach the broker keeps the assignment paused and is retried with backoff, while the
 * consumer is still polled so that the group keeps this member.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "commit.h"
#include "loop_int.h"
#include "partition.h"
#include "position.h"
#include "ll/kclient.h"
#include "ll/log.h"
#include "ll/obs.h"

/* ---- the run loop --------------------------------------------------------------------------- */

/* When the loop last observed what /metrics and /readyz show (ms, monotonic). */
typedef struct observed {
    int64_t idle_since, held_at;
} observed;

static int commit_failure_owed(ll_loop *l);

/* For /metrics and /readyz (obs.h): the batch size, whether the database answers, and (once a
 * second, while the HTTP endpoint runs: the count is quadratic in a partition's held queue) the
 * held messages and (partition, run) pairs. While no batch comes and the HTTP endpoint runs, the
 * connection is checked every 5 s (a reconnect bounded by connect_timeout, or SELECT 1 bounded by
 * statement_timeout) so that /readyz sees an outage without traffic. */
static void observe_turn(ll_loop *l, size_t n, observed *o)
{
    int64_t now = ll_now_ms();
    int http = ll_obs_port() > 0;
    if (n > 0) {
        ll_obs_batch(n);
        o->idle_since = now;
    } else if (now - o->idle_since >= 5000 && http && !ll_loop_recovering(l)) {
        o->idle_since = now;
        if (l->kio->db_ensure(&l->db) == LL_DB_OK)
            l->kio->db_command(&l->db, "SELECT 1");
    }
    ll_obs_turn(l->kio->db_connected(&l->db));
    if (!http || now - o->held_at < 1000)
        return;
    o->held_at = now;
    size_t msgs = 0, runs = 0, answered = 0;
    int64_t oldest = 0;
    ll_loop_held_counts(l, &msgs, &runs, &answered, &oldest);
    ll_obs_held(msgs, runs, answered);
    ll_obs_held_wait(oldest > 0 && now > oldest ? (double)(now - oldest) / 1000.0 : 0,
                     (double)l->prereq_wait_ms / 1000.0);
}

/* The idle check of the ledger's positions (loop.position_check_interval; position.c), between
 * batches while nothing is owed: a position that is not the one this instance last read or wrote
 * (a database that went back in time behind an unchanged connection, with no input since to write
 * it) owes a rewind, whose merge reads the ledger again. A failed read waits for the next check. */
static void check_positions(ll_loop *l)
{
    int64_t now = ll_now_ms();
    if (l->position_check_ms <= 0 || ll_loop_recovering(l) || now < l->position_check_at)
        return;
    l->position_check_at = now + l->position_check_ms;
    if (ll_loop_positions_check(l) > 0)
        ll_loop_owe_rewind(l, 0);
    else if (ll_loop_gaps_check(l)) /* a stopped partition's gap accepted by an operator */
        ll_loop_owe_rewind(l, 0);
}

void ll_loop_stop(ll_loop *l)
{
    l->stop = 1;
}

void ll_loop_free(ll_loop *l)
{
    if (!l)
        return;
    if (ll_loop_commit_wait(l) != 0)
        ll_loop_commit_failed(l); /* a commit that failed while the consumer closed: aborted */
    ll_loop_destroy(l);
}

int ll_loop_run(ll_loop *l)
{
    rd_kafka_message_t **polled = calloc((size_t)l->batch_max, sizeof *polled);
    observed obs = {ll_now_ms(), 0};
    while (!l->stop && l->rec.owed != LL_RECOVERY_EXIT) {
        int recovering = ll_loop_recover_step(l);
        size_t n = 0;
        unsigned gen = l->rebalance_gen;
        /* the wait for new messages (loop.poll); a held run waits for its turn in the batches */
        int wait = (int)l->poll_ms;
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(l->consumer, wait);
        while (rkm) {
            if (rkm->err) {
                if (rkm->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET) {
                    if (ll_loop_offset_refused(l, rkm)) /* a position the broker no longer holds */
                        ll_loop_owe_rewind(l, 0);
                } else if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                    ll_log(LL_WARN, NULL, "consumer_error", "%s", rd_kafka_message_errstr(rkm));
                rd_kafka_message_destroy(rkm);
            } else {
                ll_loop_fetch_count(l, rkm);
                polled[n++] = rkm;
            }
            if (n >= (size_t)l->batch_max)
                break;
            rkm = rd_kafka_consumer_poll(l->consumer, 0);
        }
        ll_loop_fetch_drained(l); /* librdkafka 2.0.2's fetcher may have stopped at a full queue */
        if (l->producer)
            rd_kafka_poll(l->producer, 0);
        ll_loop_turn(l, recovering, gen, polled, n);
        for (size_t i = 0; i < n; i++)
            rd_kafka_message_destroy(polled[i]);
        observe_turn(l, n, &obs);
    }
    /* everything staged committed, before the consumer leaves its group */
    if (ll_loop_commit_drain(l) != 0)
        ll_loop_commit_failed(l);
    free(polled);
    return l->rec.owed == LL_RECOVERY_EXIT ? 2 : 0;
}

void ll_loop_turn(ll_loop *l, int recovering, unsigned gen, rd_kafka_message_t **polled, size_t n)
{
    if (recovering || ll_loop_recovering(l)) {
        /* fetched before the pause took effect: it comes again from the committed offset, by
         * the rewind still owed. A rebalance during this poll may have settled that rewind (an
         * eager assignment starts at the committed offsets) and yet handed out the new
         * assignment's first messages, dropped here: rewind now, or they would be skipped
         * until the next rebalance (found by the network-cut drill, test_netcut.py). */
        if (n > 0 && gen != l->rebalance_gen && !ll_loop_recovering(l)) {
            ll_log(LL_INFO, NULL, "batch_dropped",
                   "rebalance during a recovery: %zu messages dropped, rewinding", n);
            ll_loop_rewind(l);
        }
    } else if (gen == l->rebalance_gen) {
        ll_batch_end end = ll_loop_batch(l, polled, n);
        if (end.rewind)
            ll_loop_owe_rewind(l, end.rewind_delay_ms);
        if (end.ended) {
            /* the staged results go into a Kafka commit now, or into the one after the commit
             * in flight (nothing begins while a recovery is owed) */
            if (ll_loop_commit_push(l) != 0)
                ll_loop_commit_failed(l);
            ll_loop_resume_drained(l);
        }
    } else if (n > 0) {
        /* A rebalance while the batch was collected: drop the batch. Messages fetched under
         * the old assignment come again from the committed offsets of the new one, but those
         * fetched under the new assignment already moved its position past themselves:
         * rewind, or they would be skipped. */
        ll_log(LL_INFO, NULL, "batch_dropped", "rebalance during the poll: %zu messages dropped, rewinding",
               n);
        ll_loop_rewind(l);
    }
    /* a commit that ended is taken (a fence ends the process), and what was staged behind it
     * begins (its thread's end wakes the poll above) */
    if (ll_loop_commit_poll(l) != 0)
        ll_loop_commit_failed(l);
    check_positions(l);
}

/* ---- rebalances ---------------------------------------------------------------------------- */

/* {"<topic>": [partition, ...], ...} of a partition list, for the rebalance log lines. */
static json_t *partition_map(const rd_kafka_topic_partition_list_t *parts)
{
    json_t *m = json_object();
    for (int i = 0; i < parts->cnt; i++) {
        json_t *a = json_object_get(m, parts->elems[i].topic);
        if (!a) {
            a = json_array();
            json_object_set_new(m, parts->elems[i].topic, a);
        }
        json_array_append_new(a, json_integer(parts->elems[i].partition));
    }
    return json_pack("{s:o}", "partitions", m);
}

/* The new assignment: each partition's tracker loaded from its committed offset and metadata,
 * merged with the ledger's position, and assigned there; paused while a recovery needs it. */
static void assigned(ll_loop *l, rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts)
{
    ll_log_json(LL_INFO, NULL, "partitions_assigned", partition_map(parts), "assigned %d partitions",
                parts->cnt);
    /* the committed offsets with the done offsets above them (metadata): what was applied above
     * the committed offset before a crash or a rebalance is skipped, not applied again */
    rd_kafka_topic_partition_list_t *c = rd_kafka_topic_partition_list_copy(parts);
    rd_kafka_resp_err_t ce = l->kio->committed(rk, c, 10000);
    for (int i = 0; !ce && i < c->cnt; i++)
        ce = c->elems[i].err; /* a partition's own error: its offset and done offsets unknown */
    int positions = -1;
    if (ce) {
        /* started without them, the done offsets above the committed one would be applied and
         * answered again: paused, and the rewind reads them again (with backoff) */
        ll_log(LL_WARN, NULL, "committed_unknown",
               "committed offsets not read (%s): the partitions stay paused until they are",
               rd_kafka_err2str(ce));
    } else {
        ll_loop_load_tracks(l, c);
        /* and the ledger's own positions: each partition starts at the lower (docs/design.md §5) */
        positions = ll_loop_positions_merge(l, c);
        if (positions != 0)
            ll_log(LL_WARN, NULL, "positions_unknown",
                   "the ledger's positions not read (%s %s): the partitions stay paused until they are",
                   l->db.err.sqlstate, l->db.err.message);
    }
    l->kio->assign(rk, positions == 0 ? c : parts);
    rd_kafka_topic_partition_list_destroy(c);
    ll_obs_assigned(parts->cnt);
    ll_loop_recovery_assigned(l, parts, positions == 0);
}

void ll_loop_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
                          void *opaque)
{
    ll_loop *l = opaque;
    l->rebalance_gen++;
    /* what is staged and in flight is committed (its offsets are of this generation) before the
     * assignment changes; a failure aborts it and its batches come again from the committed
     * offsets (of the new assignment, for what stays assigned) */
    if (ll_loop_commit_drain(l) != 0)
        commit_failure_owed(l); /* its rewind owed: the assignment below settles it */
    if (ll_loop_staged_count(l) > 0) {
        /* not committed (a rewind or a new producer was owed, or the commit failed): their
         * messages come again from the committed offsets, to this instance or the partition's
         * new owner, and are answered then as replays. Kept, they would be committed later
         * without their offsets: a second answer (docs/design.md §4) */
        ll_log(LL_INFO, NULL, "staged_dropped",
               "rebalance: %zu staged records dropped, answered again as replays", ll_loop_staged_count(l));
        ll_loop_staged_drop(l);
    }
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        assigned(l, rk, parts);
    } else {
        ll_log_json(LL_INFO, NULL, "partitions_revoked", partition_map(parts), "revoked %d partitions",
                    parts->cnt);
        ll_loop_resume_all(l); /* while still assigned */
        ll_loop_forget_parts(l);
        l->kio->assign(rk, NULL);
        ll_obs_assigned(0);
    }
}

/* Raises what is owed to need (never lowers it). */
static void owe(ll_loop *l, ll_recovery need)
{
    if (l->rec.owed < need)
        l->rec.owed = need;
}

/* The assignment paused and the next step due after delay_ms (0 or less: after the backoff,
 * 200 ms doubling to 5 s). */
static void retry_later(ll_loop *l, int64_t delay_ms)
{
    (void)ll_loop_parts_pause_all(l); /* once; a failure pauses nothing: the next step tries again */
    if (delay_ms <= 0) {
        l->rec.backoff_ms = l->rec.backoff_ms ? l->rec.backoff_ms * 2 : 200;
        if (l->rec.backoff_ms > 5000)
            l->rec.backoff_ms = 5000;
        delay_ms = l->rec.backoff_ms;
    }
    l->rec.at_ms = ll_now_ms() + delay_ms;
}

void ll_loop_owe_rewind(ll_loop *l, int64_t delay_ms)
{
    if (l->rec.owed != LL_RECOVERY_NONE)
        return; /* a step is owed already, with its own schedule */
    owe(l, LL_RECOVERY_REWIND);
    retry_later(l, delay_ms);
}

void ll_loop_resume_all(ll_loop *l)
{
    ll_loop_parts_resume(l);
}

void ll_loop_recovery_assigned(ll_loop *l, rd_kafka_topic_partition_list_t *assigned, int positions_read)
{
    /* an eager assignment starts at the offsets found: no rewind is owed any more (a broken
     * producer is still recreated before anything is applied); nothing of it is paused yet (a
     * failed drain in the callback paused the assignment it revoked) */
    if (l->rec.owed == LL_RECOVERY_REWIND)
        l->rec.owed = LL_RECOVERY_NONE;
    ll_loop_parts_assigned(l, assigned, l->rec.owed == LL_RECOVERY_PRODUCER || !positions_read);
    if (!positions_read) {
        owe(l, LL_RECOVERY_REWIND); /* the rewind reads both again */
        retry_later(l, 0);
    }
}

/*
 * Seeks every assigned partition back to its committed offset, or to the ledger's position when
 * that is lower (position.c), reloads the done offsets above it from the commit metadata
 * (intersected with the ledger's) and drops the held messages (they come again from the broker). A
 * partition without a position anywhere starts at the log's start (the merge says so: the
 * consumer's auto.offset.reset is error, partition.c). What this instance paused is resumed. If
 * the positions cannot be reset (broker unreachable), consuming on would skip messages: the
 * assignment stays paused and the rewind is retried with backoff. Returns 0 when the rewind is
 * done.
 */
/* Whether a seek of asg failed on a partition that is not fetching (RD_KAFKA_RESP_ERR__STATE). */
static bool fetch_stopped(const rd_kafka_topic_partition_list_t *asg)
{
    for (int i = 0; i < asg->cnt; i++)
        if (asg->elems[i].err == RD_KAFKA_RESP_ERR__STATE)
            return true;
    return false;
}

int ll_loop_rewind(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *asg = NULL;
    char why[512] = "";
    owe(l, LL_RECOVERY_REWIND);
    if (ll_loop_commit_in_flight(l) && ll_loop_commit_wait(l) != 0) /* the committed offsets are read below */
        commit_failure_owed(l); /* aborted; this rewind is the one it owes */
    /* what was staged comes again from the committed offsets, answered as replays */
    ll_loop_staged_drop(l);
    if (l->kio->assignment(l->consumer, &asg) != RD_KAFKA_RESP_ERR_NO_ERROR || !asg) {
        snprintf(why, sizeof why, "cannot read the assignment");
    } else if (asg->cnt > 0) {
        rd_kafka_resp_err_t ce = l->kio->committed(l->consumer, asg, 10000);
        for (int i = 0; !ce && i < asg->cnt; i++)
            ce = asg->elems[i].err;
        if (ce) {
            snprintf(why, sizeof why, "committed offsets: %s", rd_kafka_err2str(ce));
        } else {
            for (size_t i = 0; i < ll_loop_n_parts(l); i++)
                ll_loop_drop_held(ll_loop_part_at(l, i));
            ll_loop_load_tracks(l, asg);
            /* and the ledger's own positions: each partition goes back to the lower (docs/design.md §5) */
            if (ll_loop_positions_merge(l, asg) != 0) {
                snprintf(why, sizeof why, "the ledger's positions: %s %.400s", l->db.err.sqlstate,
                         l->db.err.message);
            } else {
                for (int i = 0; i < asg->cnt; i++)
                    if (asg->elems[i].offset < 0)
                        asg->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
                if (l->kio->seek(l->consumer, asg, 10000, why, sizeof why) != 0 && fetch_stopped(asg)) {
                    /* a partition whose fetch the broker refused (its position deleted, partition.c)
                     * has stopped fetching, and librdkafka 2.0.2 refuses to seek it (__STATE): the
                     * assignment is given again at the merged offsets, which starts its fetch */
                    why[0] = '\0';
                    for (int i = 0; i < asg->cnt; i++)
                        asg->elems[i].err = RD_KAFKA_RESP_ERR_NO_ERROR;
                    rd_kafka_resp_err_t ae = l->kio->assign(l->consumer, asg);
                    if (ae)
                        snprintf(why, sizeof why, "assign: %s", rd_kafka_err2str(ae));
                }
            }
        }
    }
    if (asg)
        rd_kafka_topic_partition_list_destroy(asg);
    if (why[0]) {
        ll_log(LL_WARN, NULL, "rewind_retry",
               "rewind to the committed offsets: %s (retrying, partitions paused)", why);
        retry_later(l, 0);
        return -1;
    }
    ll_loop_resume_all(l);
    if (l->rec.owed == LL_RECOVERY_REWIND)
        l->rec.owed = LL_RECOVERY_NONE;
    l->rec.backoff_ms = 0;
    return 0;
}

/*
 * The producer raised a fatal error. Fenced or unauthorised: this instance must stop (one clear
 * line, exit 2). Anything else: the producer is recreated in this process (docs/design.md §3) before
 * anything is applied again.
 */
static void producer_fatal(ll_loop *l)
{
    char why[512] = "";
    rd_kafka_resp_err_t code = l->kio->fatal_error(l->producer, why, sizeof why);
    if (ll_kafka_fatal_must_exit(code)) {
        ll_log(LL_ERROR, NULL, "producer_fenced",
               "transactional.id %s: %s: another instance took over (or access was denied); exiting", l->txid,
               why);
        owe(l, LL_RECOVERY_EXIT);
        ll_obs_fenced();
        return;
    }
    ll_log(LL_ERROR, NULL, "producer_recreate", "fatal producer error %s: %s; recreating the producer",
           rd_kafka_err2name(code), why);
    owe(l, LL_RECOVERY_PRODUCER);
    l->rec.backoff_ms = 0;
    (void)ll_loop_parts_pause_all(l); /* once; a failure pauses nothing: the next step tries again */
    l->rec.at_ms = ll_now_ms();
}

/* One try at a new producer; on success the rewind follows at once. */
static void recreate_producer(ll_loop *l)
{
    char err[512];
    if (l->kio->remake_producer(l, 10000, err, sizeof err) != 0) {
        ll_log(LL_WARN, NULL, "producer_recreate_retry", "%s (retrying)", err);
        retry_later(l, 0);
        return;
    }
    ll_log(LL_INFO, NULL, "producer_recreated", "transactional.id %s ready again", l->txid);
    if (l->rec.owed == LL_RECOVERY_PRODUCER)
        l->rec.owed = LL_RECOVERY_REWIND;
    l->rec.backoff_ms = 0;
    ll_loop_rewind(l);
}

/* Aborts the open transaction (a fatal or unfinished abort leaves the producer to be recreated,
 * whose init_transactions aborts it instead); the caller rewinds. */
static void abort_txn(ll_loop *l)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        rd_kafka_error_t *ae = l->kio->abort_transaction(l->producer, 30000);
        if (!ae)
            return;
        int fatal = rd_kafka_error_is_fatal(ae);
        ll_log(LL_ERROR, NULL, "kafka_abort_error", "abort_transaction: %s", rd_kafka_error_string(ae));
        rd_kafka_error_destroy(ae);
        if (fatal) {
            producer_fatal(l);
            return;
        }
    }
    owe(l, LL_RECOVERY_PRODUCER);
    (void)ll_loop_parts_pause_all(l); /* once; a failure pauses nothing: the next step tries again */
    l->rec.at_ms = ll_now_ms();
}

/* The failure a Kafka commit left, taken and owed (none: 0): fatal → the producer is recreated or
 * the loop exits; otherwise the transaction is aborted and a rewind owed, due now. No rewind here:
 * the rewind itself waits for the commit in flight and comes here when it failed, and the
 * rebalance callback's failed drain is settled by the assignment that follows. -1 when one was
 * taken. */
static int commit_failure_owed(ll_loop *l)
{
    const char *what = NULL;
    rd_kafka_error_t *e = ll_loop_commit_take_error(l, &what);
    if (!e)
        return 0;
    ll_log(LL_ERROR, NULL, "kafka_txn_error", "%s: %s", what, rd_kafka_error_string(e));
    int fatal = rd_kafka_error_is_fatal(e);
    rd_kafka_error_destroy(e);
    char fe[256];
    if (fatal || l->kio->fatal_error(l->producer, fe, sizeof fe))
        producer_fatal(l);
    else
        abort_txn(l);
    if (l->rec.owed < LL_RECOVERY_PRODUCER) {
        /* due now; the assignment is not paused for it (the rewind settles it at once, or the
         * assignment does), as when the failure rewound in place */
        owe(l, LL_RECOVERY_REWIND);
        l->rec.at_ms = ll_now_ms();
    }
    return -1;
}

int ll_loop_commit_failed(ll_loop *l)
{
    if (commit_failure_owed(l) == 0)
        return 0;
    if (l->rec.owed == LL_RECOVERY_REWIND)
        ll_loop_rewind(l); /* at once: the aborted transaction's batches come again */
    return -1;
}

int ll_loop_recover_step(ll_loop *l)
{
    if (l->rec.owed != LL_RECOVERY_REWIND && l->rec.owed != LL_RECOVERY_PRODUCER)
        return 0;
    /* a rewind reads the committed offsets: the commit in flight first */
    if (ll_loop_commit_wait(l) != 0)
        ll_loop_commit_failed(l);
    if (ll_now_ms() >= l->rec.at_ms) {
        if (l->rec.owed == LL_RECOVERY_PRODUCER)
            recreate_producer(l);
        else if (l->rec.owed == LL_RECOVERY_REWIND)
            ll_loop_rewind(l);
    }
    return l->rec.owed == LL_RECOVERY_REWIND || l->rec.owed == LL_RECOVERY_PRODUCER;
}
