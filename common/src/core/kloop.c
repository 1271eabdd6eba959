/*
 * kloop.c - the consume / apply / produce-and-commit loop of docs/contract.md K§3: the turn (poll →
 * batch → stage → Kafka commit → recover) and the rebalance callback, top to bottom. The parts
 * below report and never recover themselves: the batch (kloop_batch.c) returns how it ended, the
 * Kafka commit (kloop_commit.c) returns its failure, the partitions (kloop_parts.c) a failed seek;
 * the loop hands what is owed to its recovery (kloop_recover.c), the one writer of the recovery
 * state. kloop_setup.c makes and frees the loop; kloop_int.h has the map of the files.
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
 */
#include "kloop_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/log.h"
#include "ll/obs.h"

/* ---- the run loop --------------------------------------------------------------------------- */

/* When the loop last observed what /metrics and /readyz show (ms, monotonic). */
typedef struct observed {
    int64_t idle_since, held_at;
} observed;

/* For /metrics and /readyz (obs.h): the batch size, whether the database answers, and (once a
 * second, while the HTTP endpoint runs: the count is quadratic in a partition's held queue) the
 * held messages and (partition, run) pairs. While no batch comes and the HTTP endpoint runs, the
 * connection is checked every 5 s (a reconnect bounded by connect_timeout, or SELECT 1 bounded by
 * statement_timeout) so that /readyz sees an outage without traffic. */
static void observe_turn(ll_loop *l, size_t n, observed *o)
{
    int64_t now = ll_loop_now_ms();
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
    for (size_t i = 0; i < l->n_parts; i++) {
        const part_state *ps = l->parts[i];
        msgs += ps->n_held;
        for (size_t k = 0; k < ps->n_held; k++) {
            answered += ll_msg_answered_before(ps->held[k]);
            size_t j = 0;
            while (j < k && strcmp(ps->held[j]->run, ps->held[k]->run) != 0)
                j++;
            runs += j == k;
        }
    }
    ll_obs_held(msgs, runs, answered);
}

/* The idle check of the ledger's positions (loop.position_check_interval; kloop_position.c), between
 * batches while nothing is owed: a position that is not the one this instance last read or wrote
 * (a database that went back in time behind an unchanged connection, with no input since to write
 * it) owes a rewind, whose merge reads the ledger again. A failed read waits for the next check. */
static void check_positions(ll_loop *l)
{
    int64_t now = ll_loop_now_ms();
    if (l->position_check_ms <= 0 || ll_loop_recovering(l) || now < l->position_check_at)
        return;
    l->position_check_at = now + l->position_check_ms;
    if (ll_loop_positions_check(l) > 0)
        ll_loop_owe_rewind(l, 0);
    else
        ll_loop_gaps_check(l); /* a stopped partition's gap accepted by an operator */
}

int ll_loop_run(ll_loop *l)
{
    rd_kafka_message_t **batch = calloc((size_t)l->batch_max, sizeof *batch);
    observed obs = {ll_loop_now_ms(), 0};
    while (!l->stop && l->rec.owed != LL_RECOVERY_EXIT) {
        int recovering = ll_loop_recover_step(l);
        size_t n = 0;
        unsigned gen = l->rebalance_gen;
        /* the wait for new messages (loop.poll); a held run waits for its turn in the batches */
        int wait = (int)l->poll_ms;
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(l->consumer, wait);
        while (rkm) {
            if (rkm->err) {
                if (rkm->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET)
                    ll_loop_offset_refused(l, rkm); /* a position the broker no longer holds */
                else if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                    ll_log(LL_WARN, NULL, "consumer_error", "%s", rd_kafka_message_errstr(rkm));
                rd_kafka_message_destroy(rkm);
            } else {
                ll_loop_fetch_count(l, rkm);
                batch[n++] = rkm;
            }
            if (n >= (size_t)l->batch_max)
                break;
            rkm = rd_kafka_consumer_poll(l->consumer, 0);
        }
        ll_loop_fetch_drained(l); /* librdkafka 2.0.2's fetcher may have stopped at a full queue */
        if (l->producer)
            rd_kafka_poll(l->producer, 0);
        ll_loop_turn(l, recovering, gen, batch, n);
        for (size_t i = 0; i < n; i++)
            rd_kafka_message_destroy(batch[i]);
        observe_turn(l, n, &obs);
    }
    /* everything staged committed, before the consumer leaves its group */
    if (ll_loop_commit_drain(l) != 0)
        ll_loop_commit_failed(l);
    free(batch);
    return l->rec.owed == LL_RECOVERY_EXIT ? 2 : 0;
}

void ll_loop_turn(ll_loop *l, int recovering, unsigned gen, rd_kafka_message_t **batch, size_t n)
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
        ll_batch_end end = ll_loop_batch(l, batch, n);
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
        ll_loop_commit_failed(l);
    if (l->n_staged > 0) {
        /* not committed (a rewind or a new producer was owed, or the commit failed): their
         * messages come again from the committed offsets, to this instance or the partition's
         * new owner, and are answered then as replays. Kept, they would be committed later
         * without their offsets: a second answer (docs/design.md §4) */
        ll_log(LL_INFO, NULL, "staged_dropped",
               "rebalance: %zu staged records dropped, answered again as replays", l->n_staged);
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
