/*
 * batch.c - one batch of the loop (batch.h): its work collected and ordered, each value decoded
 * once, the set-based step, one message with its savepoint and the decision table applied, replays
 * restated, and its end reported to the loop.
 *
 * one batch of the loop from start to end (batch.h has the map of its files):
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
 *              next (commit.c).
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
 *
 * the work of one batch (batch.h): the held messages of runs whose retry is
 * due (in offset order), then the polled messages (a message of a run that is still held joins
 * its run's queue instead), sorted by run id, stably, so that every transaction locks runs in one
 * order and two instances cannot deadlock each other, while a run keeps its own order.
 *
 * one message in the batch's database transaction (batch.h): decoded,
 * applied under a savepoint by its input's apply function, and what the loop does with the
 * answer: keep and reply, undo and reply, hold its run, or dead-letter it.
 *
 * the set-based part of a batch's transaction (ll_bulk_fn, batch.h): each
 * input's bulk function decides many messages with a few statements; the messages it leaves go
 * one by one in their turn. It never decides a message ahead of an earlier one of its run in the
 * work order (ll_work_cmp) that is still to go one by one, of any input and on any partition: the
 * work order is the order of the one-by-one loop (loop.db_batch_max = 1), and both must answer
 * alike (docs/design.md §3, tests/integration/test_bulk_differential.py). A run's messages behind a held
 * one wait on its partition only, as in the loop.
 *
 * a replay restates (docs/design.md §5, "A replay restates"; docs/contract.md
 * K§1: "a replayed input is answered as it was the first time, however far its run has moved
 * since"). The one owner of that rule, for every input of every service.
 *
 * An input read again whose offset the ledger's position for the group marks done (and Kafka's
 * commit does not: a group reset to earlier offsets, a Kafka commit that did not happen) was
 * answered before. What the ledger recorded for it decides, not the run's status now:
 *   - a refusal or a dead letter is recorded with its input (nifi_ops.input_refusal, written
 *     before the COMMIT of the transaction that answered it, position.c): the same answer
 *     is given again (the reply as recorded, or the dead letter with its code and reason; its
 *     event has a name-based id, so it is not written twice) and nothing is applied;
 *   - nothing recorded: it was applied. The rule runs (its conditional writes change nothing)
 *     and its answer goes out, except that a refusal it computes from a run that moved on since
 *     (a validation metric read again after SUCCESS: RUN_STATUS_MISMATCH) is answered REPLAY, with
 *     the rule's code as the notable replay's (ll_replay_outcome, applied in ll_txn_out_push).
 * The decision is the pure table ll_replay_decide (ll/kloop_decide.h). The lookup is one statement
 * per batch that has such inputs, by primary key; a batch without them costs nothing.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "commit.h"
#include "partition.h"
#include "position.h"
#include "txn.h"
#include "ll/kloop_decide.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/pgarray.h"

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

void ll_batch_stop_partition(batch *b, part_state *ps, int64_t offset)
{
    /* a seek that failed leaves the position unknown: the loop rewinds once this batch is over
     * (not now: the batch still refers to the held messages a rewind drops) */
    if (ll_loop_stop_partition(b->l, ps, offset) != 0 && !b->rewind) {
        b->rewind = 1;
        b->rewind_delay_ms = 1;
    }
}

/* Holds m (its run waits) with backoff; deferred = a missing prerequisite (starts its clock). */
w_result ll_batch_hold(batch *b, lmsg *m, int deferred, const char *pid, const char *why)
{
    ll_loop *l = b->l;
    int64_t now = ll_now_ms();
    m->state = 2;
    /* the run's clock on the partition (partition.c): started by its first deferral, kept for
     * its messages that find the queue full, read again after the pause */
    int64_t since =
        deferred ? ll_loop_clock_start(m->ps, m->run, m->defer_since_ms ? m->defer_since_ms : now) : 0;
    lmsg *h = m->held ? m : ll_loop_hold_copy(l, m);
    if (!h) {
        /* the queue is full: not held, not done; fetched again once the queue drains */
        ll_batch_stop_partition(b, m->ps, m->offset);
        return W_HELD;
    }
    if (deferred && !h->defer_since_ms) {
        h->defer_since_ms = since;
        /* the run's clock: its messages already queued behind this one start it too */
        ll_loop_held_clock_share(h->ps, h->run, since);
    }
    h->backoff_ms = h->backoff_ms ? h->backoff_ms * 2 : l->backoff_min_ms;
    if (h->backoff_ms > l->backoff_max_ms)
        h->backoff_ms = l->backoff_max_ms;
    h->retry_at_ms = now + h->backoff_ms;
    ll_log_ctx ctx = {h->run[0] ? h->run : NULL, pid, ll_loop_part_topic(h->ps), ll_loop_part_no(h->ps),
                      h->offset};
    ll_log(deferred ? LL_INFO : LL_WARN, &ctx, deferred ? "message_deferred" : "run_held",
           "held for %lld ms: %s", (long long)h->backoff_ms, why);
    return W_HELD;
}

/* Remembers m's offset, to be marked done when the batch ends (done_mark). */
static void mark_later(batch *b, const lmsg *m)
{
    if (b->n_marks == b->cap_marks) {
        size_t cap = b->cap_marks ? b->cap_marks * 2 : 64;
        done_mark *d = realloc(b->marks, cap * sizeof *d);
        if (!d)
            abort();
        b->marks = d;
        b->cap_marks = cap;
    }
    b->marks[b->n_marks++] = (done_mark){m->ps, m->offset};
}

/* Commits the batch's open transaction (ll_txn_commit, with the offsets its earlier transactions
 * staged), then takes what its commits staged: each message done, its offset remembered, its
 * partition changed in this batch, a held copy out of its queue (freed when the batch ends). 0,
 * or -1: the caller undoes the batch. */
static int tx_commit(batch *b)
{
    int rc = ll_txn_commit(b->tx, b->marks, b->n_marks);
    size_t n = 0;
    lmsg *const *done = ll_txn_committed(b->tx, &n);
    for (size_t i = 0; i < n; i++) {
        lmsg *m = done[i];
        mark_later(b, m);
        ll_loop_part_touch(b->l, m->ps);
        m->state = 1;
        if (m->held) {
            ll_loop_unhold(m);
            if (b->n_done_held == b->cap_done_held) {
                size_t cap = b->cap_done_held ? b->cap_done_held * 2 : 16;
                lmsg **d = realloc(b->done_held, cap * sizeof *d);
                if (!d)
                    abort();
                b->done_held = d;
                b->cap_done_held = cap;
            }
            b->done_held[b->n_done_held++] = m;
        }
    }
    ll_txn_committed_clear(b->tx);
    return rc;
}

/* The batch failed (the database gone, or the transaction broke): its open transaction undone,
 * and a rewind reported, after the backoff (what was committed before it is applied again as a
 * replay). */
static void undo(batch *b)
{
    ll_loop *l = b->l;
    ll_txn_undo(b->tx);
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
        return strcmp(ll_loop_part_topic(x->ps), ll_loop_part_topic(y->ps)) != 0
                   ? strcmp(ll_loop_part_topic(x->ps), ll_loop_part_topic(y->ps))
                   : (ll_loop_part_no(x->ps) > ll_loop_part_no(y->ps)) -
                         (ll_loop_part_no(x->ps) < ll_loop_part_no(y->ps));
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
        if (ll_loop_part_done(b->marks[i].ps, b->marks[i].offset, batch_owes(b)) != 0 && !batch_owes(b))
            batch_owe_rewind(b, 0);
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
    int64_t now = ll_now_ms(), waited0 = l->db.wait_us;
    batch b;
    memset(&b, 0, sizeof b);
    b.l = l;
    ll_loop_parts_tick(l);
    ll_batch_collect(&b, polled, n, now);
    int64_t bn = ll_loop_batch_no(l);
    size_t touched = ll_loop_parts_changed(l, bn - 1, bn, NULL);
    if (b.n_work == 0 && !touched)
        goto out;
    b.tx = ll_txn_new(l, b.n_work > 1 && l->db_batch_max > 1);
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
        if (ll_txn_full(b.tx) && tx_commit(&b) != 0) {
            undo(&b);
            goto out;
        }
        /* the set-based part left the later messages of m's run behind m; now that m is
         * applied or held, they may go set-based again (those behind a held one on its
         * partition stay: batch.c) */
        if (b.bulk_on && ll_batch_run_waits_after(&b, i) && ll_batch_bulk_step(&b, i + 1, m->run) != 0) {
            undo(&b);
            goto out;
        }
    }
    if (tx_commit(&b) != 0) {
        undo(&b);
        goto out;
    }
    int64_t t_db = ll_now_ms();
    ll_log(LL_DEBUG, NULL, "batch_done",
           "%zu messages (%zu polled, %zu set-based, %zu decodes): database %lld ms, of which waiting for "
           "answers %.1f ms; %zu records staged; the last Kafka commit took %lld ms",
           b.n_work, n, b.n_bulk, b.n_decodes, (long long)(t_db - now),
           (double)(l->db.wait_us - waited0) / 1000.0, ll_loop_staged_count(l),
           (long long)ll_loop_commit_last_ms(l));
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
    for (size_t i = 0; i < b.n_done_held; i++)
        ll_loop_free_copy(b.done_held[i]);
    free(b.done_held);
    ll_txn_free(b.tx);
    free(b.work);
    free(b.fresh);
    end.rewind = b.rewind;
    end.rewind_delay_ms = b.rewind_delay_ms;
    return end;
}

static void lmsg_fresh(ll_loop *l, lmsg *m, rd_kafka_message_t *rkm)
{
    memset(m, 0, sizeof *m);
    const char *topic = l->kio->msg_topic(rkm);
    m->rkm = rkm;
    m->io = ll_loop_topic_io(l, topic);
    m->ps = ll_loop_part(l, topic, rkm->partition);
    m->offset = rkm->offset;
    m->key = rkm->key;
    m->key_len = rkm->key_len;
    m->value = rkm->payload;
    m->len = rkm->len;
    if (rkm->key && rkm->key_len < sizeof m->run) {
        memcpy(m->run, rkm->key, rkm->key_len);
        m->run[rkm->key_len] = '\0';
    }
}

int ll_work_cmp(const void *a, const void *b)
{
    const lmsg *x = *(lmsg *const *)a, *y = *(lmsg *const *)b;
    int c = strcmp(x->run, y->run);
    if (c)
        return c;
    /* a total key: (run, topic, partition, offset). Within a Kafka partition the offset is the
     * order of a run's messages (a held one is older than a fresh one of its partition, unless a
     * seek refetched below it); across partitions any fixed order will do */
    if (x->ps != y->ps) {
        c = strcmp(ll_loop_part_topic(x->ps), ll_loop_part_topic(y->ps));
        if (c)
            return c;
        return ll_loop_part_no(x->ps) < ll_loop_part_no(y->ps)
                   ? -1
                   : (ll_loop_part_no(x->ps) > ll_loop_part_no(y->ps));
    }
    return x->offset < y->offset ? -1 : (x->offset > y->offset);
}

/* Collects the due held runs and the polled messages into b->work (b: a fresh batch). */
void ll_batch_collect(batch *b, rd_kafka_message_t **polled, size_t n, int64_t now)
{
    ll_loop *l = b->l;
    size_t cap = n + ll_loop_held_total(l);
    b->work = calloc(cap ? cap : 1, sizeof *b->work);
    b->fresh = calloc(n ? n : 1, sizeof *b->fresh);
    b->n_work = b->n_fresh = 0; /* a fresh batch (zeroed by ll_loop_batch), said for the analyser */
    if (!b->work || !b->fresh)
        abort();
    /* held runs whose first queued message is due: all their queued messages, in order, each
     * starting the batch undecided (a held message is read only through the work it is in) */
    b->n_work = ll_loop_held_due(l, now, b->work);
    for (size_t i = 0; i < b->n_work; i++) {
        b->work[i]->state = b->work[i]->decided = 0;
        b->work[i]->retry = 0;
    }
    for (size_t i = 0; i < n; i++) {
        lmsg *m = &b->fresh[b->n_fresh++];
        lmsg_fresh(l, m, polled[i]);
        part_state *ps = m->ps;
        ll_part_admit a = ll_loop_part_admit(l, ps, m->offset);
        if (a == LL_ADMIT_TRACK_FULL)
            ll_batch_stop_partition(b, ps, m->offset); /* too many ranges: wait for the queue */
        if (a != LL_ADMIT_NEW)
            continue;
        if (ll_loop_run_held(ps, m->run)) {
            int due = 0;
            for (size_t w = 0; w < b->n_work; w++)
                if (b->work[w]->ps == ps && strcmp(b->work[w]->run, m->run) == 0)
                    due = 1;
            if (!due) {
                if (!ll_loop_hold_copy(l, m))
                    ll_batch_stop_partition(b, ps, m->offset);
                continue;
            }
        }
        b->work[b->n_work++] = m;
    }
    qsort(b->work, b->n_work, sizeof *b->work, ll_work_cmp);
}

/* A dead letter: its event in the open transaction, its record after the commit. */
w_result ll_batch_dead(batch *b, lmsg *m, const char *run_id, const char *code, const char *reason)
{
    return ll_txn_dead(b->tx, m, (ll_replay_step)m->replay_step, run_id, code, reason) == 0 ? W_DONE
                                                                                            : W_FAILED;
}

int64_t ll_batch_prereq_wait(const batch *b, const lmsg *m)
{
    return ll_msg_answered_before(m) ? b->l->reapplied_wait_ms : b->l->prereq_wait_ms;
}

/* What an apply function sees of message m (value: its decoded record, borrowed; now in ms). */
ll_msg ll_batch_msg_view(batch *b, const lmsg *m, json_t *value, int64_t now)
{
    ll_loop *l = b->l;
    /* its own clock (held behind its run's first deferral), else its run's on the partition: a
     * message read again after a full queue's pause waited as long as the held ones */
    int64_t wait = ll_batch_prereq_wait(b, m);
    int64_t since = m->defer_since_ms ? m->defer_since_ms : ll_loop_clock_of(m->ps, m->run, wait, now);
    return (ll_msg){.logical = ll_topic_input(m->io)->logical,
                    .topic = ll_loop_part_topic(m->ps),
                    .partition = ll_loop_part_no(m->ps),
                    .offset = m->offset,
                    .key = m->run[0] ? m->run : NULL,
                    .value = value,
                    .service = l->service,
                    .wait_expired = since && now - since >= wait,
                    .ops = &LL_TXN_MSG_OPS,
                    .txn = b->tx};
}

json_t *ll_batch_decode(batch *b, lmsg *m, const char **err)
{
    if (!m->value) {
        *err = "empty message value";
        return NULL;
    }
    if (!m->decoded && !m->decode_err) {
        char why[1024];
        why[0] = '\0';
        json_t *v = NULL;
        b->n_decodes++;
        int rc = ll_topic_decode(m->io, m->value, m->len, &v, why, sizeof why);
        if (rc == 0 && v)
            m->decoded = v;
        else if (!(m->decode_err = strdup(why)))
            abort();
        m->decode_wait = rc == LL_DECODE_UNAVAILABLE || rc == LL_DECODE_UNKNOWN_ID ? rc : 0;
        b->n_kept++;
    }
    *err = m->decode_err;
    return m->decoded;
}

void ll_batch_decoded_drop(batch *b, lmsg *m)
{
    if (!m->decoded && !m->decode_err)
        return;
    json_decref(m->decoded);
    free(m->decode_err);
    m->decoded = NULL;
    m->decode_err = NULL;
    m->decode_wait = 0;
    b->n_kept--;
}

ll_loop_fault ll_batch_fault(const batch *b)
{
    const ll_db *db = &b->l->db;
    if (!b->l->kio->db_connected(db) || ll_db_err_state_is_unavailable(db))
        return LL_FAULT_UNAVAILABLE;
    return ll_db_err_is_input(db) ? LL_FAULT_INPUT : LL_FAULT_OTHER;
}

/*
 * A message whose writer schema the registry could not give (docs/design.md §9): unreachable or 5xx, the
 * run is held and retried with backoff (no dead letter: a fault, like a busy database); an id
 * the registry does not know, held like a missing prerequisite and after loop.prerequisite_wait
 * dead-lettered (DECODE_FAILED, naming the id).
 */
static w_result registry_wait(batch *b, lmsg *m, const char *why)
{
    const char *run = m->run[0] ? m->run : NULL;
    if (m->decode_wait == LL_DECODE_UNAVAILABLE) {
        w_result r = ll_batch_hold(b, m, 0, NULL, why);
        ll_batch_decoded_drop(b, m);
        return r;
    }
    ll_msg view = ll_batch_msg_view(b, m, NULL, ll_now_ms());
    w_result r;
    if (view.wait_expired) {
        char err[1024];
        snprintf(err, sizeof err, "writer schema not in the registry after %lld ms: %s",
                 (long long)ll_batch_prereq_wait(b, m), why);
        r = ll_batch_dead(b, m, run, "DECODE_FAILED", err);
    } else {
        r = ll_batch_hold(b, m, 1, NULL, why);
    }
    ll_batch_decoded_drop(b, m);
    return r;
}

/* Applies one message inside the open transaction. */
w_result ll_batch_apply_one(batch *b, lmsg *m)
{
    ll_loop *l = b->l;
    char err[1024];
    if (!m->io)
        return ll_batch_dead(b, m, m->run[0] ? m->run : NULL, "UNKNOWN_TOPIC", "no handler for this topic");
    /* decoded once in this batch (the set-based part may have looked at it), released here: the
     * per-message path is its last use in the batch, whatever the answer */
    const char *why = NULL;
    json_t *value = ll_batch_decode(b, m, &why);
    if (!value && m->decode_wait)
        return registry_wait(b, m, why);
    if (!value) {
        w_result r = ll_batch_dead(b, m, m->run[0] ? m->run : NULL, "DECODE_FAILED", why);
        ll_batch_decoded_drop(b, m); /* the reason is copied into the dead letter */
        return r;
    }
    const char *run_id = json_string_value(json_object_get(value, "runId"));
    char rid[sizeof m->run];
    snprintf(rid, sizeof rid, "%s", run_id ? run_id : (m->run[0] ? m->run : ""));
    const char *pid = json_string_value(json_object_get(value, "partitionId"));
    ll_msg msg = ll_batch_msg_view(b, m, value, ll_now_ms());
    ll_txn_mark mk;
    if (ll_txn_msg_begin(b->tx, &mk) != 0)
        goto failed;
    ll_apply_out out;
    memset(&out, 0, sizeof out);
    ll_apply d = ll_topic_input(m->io)->apply(l->svc, &l->db, &msg, &out);
    /* the decision table (kloop_decide.h): the service's answer and the database's error class */
    ll_loop_step step = ll_loop_decide(d, false, msg.wait_expired, ll_batch_fault(b));
    ll_db_error e = l->db.err; /* the apply's error, kept over the undo */
    if (step == LL_STEP_UNDO_BATCH || (step != LL_STEP_KEEP_REPLY && ll_txn_undo_to(b->tx, &mk) != 0))
        goto failed_out;
    l->db.err = e;
    w_result r = W_DONE;
    switch (step) {
    case LL_STEP_KEEP_REPLY:
    case LL_STEP_UNDO_REPLY:
        if (!msg.wait_expired)
            ll_loop_clock_stop(m->ps, m->run); /* answered: its prerequisite is there */
        ll_txn_out_push(b->tx, m, (ll_replay_step)m->replay_step, out.reply, NULL, NULL, rid);
        out.reply = NULL;
        break;
    case LL_STEP_UNDO_HOLD:
        r = ll_batch_hold(b, m, 1, pid, out.reason);
        break;
    case LL_STEP_UNDO_DEAD_PREREQ:
        snprintf(err, sizeof err, "prerequisite not in the ledger after %lld ms (%s): %s",
                 (long long)ll_batch_prereq_wait(b, m),
                 ll_msg_answered_before(m) ? "loop.reapplied_wait: answered before the database lost it"
                                           : "loop.prerequisite_wait",
                 out.reason);
        r = ll_batch_dead(b, m, rid, "PREREQUISITE_TIMEOUT", err);
        break;
    case LL_STEP_UNDO_DEAD:
        r = ll_batch_dead(b, m, rid, out.reason_code[0] ? out.reason_code : "INVALID_MESSAGE", out.reason);
        break;
    case LL_STEP_UNDO_DEAD_LEDGER:
        snprintf(err, sizeof err, "ledger refused the values (SQLSTATE %s %s): %s", e.sqlstate, e.constraint,
                 e.message);
        r = ll_batch_dead(b, m, rid, "LEDGER_REJECTED", err);
        break;
    case LL_STEP_UNDO_RETRY: {
        /* a bounded wait ran out (lock or statement timeout), a deadlock or serialization
         * failure, or an SQL error: the run waits and is tried again (docs/design.md §3) */
        snprintf(err, sizeof err, "%s %s", e.sqlstate, e.message);
        ll_log_ctx ctx = {rid[0] ? rid : NULL, pid, ll_loop_part_topic(m->ps), ll_loop_part_no(m->ps),
                          m->offset};
        int busy = ll_db_err_is_busy(&l->db) || ll_db_err_is_retryable(&l->db);
        ll_log(busy ? LL_WARN : LL_ERROR, &ctx, busy ? "db_busy" : "db_error", "holding the run: %s", err);
        r = ll_batch_hold(b, m, 0, pid, err);
        break;
    }
    case LL_STEP_UNDO_BATCH: /* handled above */
    case LL_STEP_BULK_KEEP:  /* bulk steps: never for one message */
    case LL_STEP_BULK_UNDO:
        goto failed_out;
    }
    json_decref(out.reply);
    ll_batch_decoded_drop(b, m);
    return r;
failed_out:
    json_decref(out.reply);
failed:
    ll_batch_decoded_drop(b, m);
    return W_FAILED;
}

/* Moves w to m's run (a new run: nothing waits yet). */
void ll_waits_enter(run_waits *w, const lmsg *m)
{
    if (!w->run || strcmp(w->run, m->run) != 0)
        *w = (run_waits){.run = m->run};
}

void ll_waits_add(run_waits *w, const part_state *ps)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->ps[i] == ps)
            return;
    if (w->n < LL_WAIT_PARTS)
        w->ps[w->n++] = ps;
    else
        w->all = 1;
}

int ll_waits_on(const run_waits *w, const part_state *ps)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->ps[i] == ps)
            return 1;
    return w->all;
}

/* What ll_bulk_reply needs to queue a reply: the batch, and the call's messages. */
typedef struct bulk_sink {
    batch *b;
    lmsg **ms;
    const ll_msg *msgs;
} bulk_sink;

/* ll_bulk_ops.reply: queues the reply of the call's message at (its run: the reply's runId). */
static void bulk_reply(void *sink, size_t at, json_t *reply)
{
    bulk_sink *s = sink;
    lmsg *m = s->ms[at];
    const char *rid = json_string_value(json_object_get(s->msgs[at].value, "runId"));
    ll_txn_out_push(s->b->tx, m, (ll_replay_step)m->replay_step, reply, NULL, NULL, rid ? rid : m->run);
}

static const ll_bulk_ops BULK_OPS = {.reply = bulk_reply};

/* Hands the messages of one input among work[from..to) to its bulk function; what it decides is
 * marked and its reply queued. *decided counts them. W_DONE, W_FAILED (the database went away), or
 * W_HELD when a statement failed: the transaction is then rolled back (nothing of it is kept). */
static w_result bulk_input(batch *b, topic_io *io, size_t from, size_t to, const char *run, size_t *decided)
{
    ll_loop *l = b->l;
    size_t n = to - from;
    lmsg **ms = calloc(n, sizeof *ms);
    ll_msg *msgs = calloc(n, sizeof *msgs);
    const ll_msg **ptrs = calloc(n, sizeof *ptrs);
    ll_bulk_out *outs = calloc(n, sizeof *outs);
    if (!ms || !msgs || !ptrs || !outs)
        abort();
    size_t got = 0;
    int64_t now = ll_now_ms();
    run_waits w = {0};
    /* the run at `from` may have messages before it that are held in this batch */
    ll_waits_enter(&w, b->work[from]);
    for (size_t j = from; j-- > 0 && strcmp(b->work[j]->run, w.run) == 0;)
        if (b->work[j]->state == 2)
            ll_waits_add(&w, b->work[j]->ps);
    for (size_t i = from; i < to; i++) {
        lmsg *m = b->work[i];
        const char *why = NULL;
        ll_waits_enter(&w, m);
        if (m->decided || m->state == 1 || (run && strcmp(m->run, run) != 0))
            continue;
        if (m->state == 2 || (!w.all && ll_waits_on(&w, m->ps))) {
            /* held, or behind a held message of its run on its partition (the loop holds it):
             * the later messages of its run there wait, those on other partitions do not (the
             * one-by-one loop applies them in their turn) */
            ll_waits_add(&w, m->ps);
            continue;
        }
        if (w.all) {
            /* behind an earlier message of its run that goes one by one (of any input): decided
             * set-based, it would come before that one (docs/design.md §3); worth another try once that
             * one is applied */
            m->retry = m->io == io;
            continue;
        }
        /* decoded once in the batch: a message left here keeps its value for the per-message
         * path or a later set-based call (ll_batch_decode) */
        json_t *value = m->io == io ? ll_batch_decode(b, m, &why) : NULL;
        if (!value) {
            /* applied one by one in its turn (another input, or dead-lettered): every later
             * message of its run, on any partition, waits for it */
            w.all = 1;
            continue;
        }
        ms[got] = m;
        msgs[got] = ll_batch_msg_view(b, m, value, now);
        ptrs[got] = &msgs[got];
        got++;
    }
    w_result r = W_DONE;
    bulk_sink sink = {b, ms, msgs};
    for (size_t i = 0; i < got; i++)
        outs[i] = (ll_bulk_out){.ops = &BULK_OPS, .sink = &sink, .at = i};
    /* one message: the per-message path is as cheap */
    if (got >= 2 && ll_txn_begin(b->tx) != 0) {
        r = W_FAILED; /* no transaction: the database result, nothing to decide */
    } else if (got >= 2) {
        ll_apply a = ll_topic_input(io)->bulk(l->svc, &l->db, ptrs, got, outs);
        /* only an SQL failure is classed by the database's error; any other answer but COMMIT,
         * or replies that do not match the decisions, break the set-based contract and are not
         * the database's: its messages go one by one (a stale or empty db->err read as
         * "unavailable" undid and rewound the batch for ever) */
        ll_loop_fault fault = a == LL_APPLY_DB ? ll_batch_fault(b) : LL_FAULT_OTHER;
        for (size_t i = 0; i < got && a == LL_APPLY_COMMIT; i++)
            if (outs[i].decided != outs[i].replied) {
                ll_log(LL_ERROR, NULL, "bulk_reply_missing",
                       "set-based apply of %s decided a message without its reply (or the reverse): "
                       "its messages go one by one",
                       ll_topic_input(io)->logical);
                a = LL_APPLY_DB;
            }
        /* the decision table (kloop_decide.h), its bulk rows */
        switch (ll_loop_decide(a, true, false, fault)) {
        case LL_STEP_BULK_KEEP:
            for (size_t i = 0; i < got; i++)
                ms[i]->retry = !outs[i].decided && outs[i].retry;
            for (size_t i = 0; i < got; i++)
                if (outs[i].decided) {
                    ms[i]->decided = b->bulk_calls; /* its reply queued by ll_bulk_reply */
                    if (!msgs[i].wait_expired)
                        ll_loop_clock_stop(ms[i]->ps, ms[i]->run);
                    (*decided)++;
                }
            break;
        case LL_STEP_BULK_UNDO:
            ll_log(
                LL_WARN, NULL, "bulk_fallback",
                "set-based apply of %zu %s messages failed, the transaction's messages go one by one: %s %s",
                got, ll_topic_input(io)->logical, l->db.err.sqlstate, l->db.err.message);
            r = W_HELD;
            break;
        case LL_STEP_UNDO_BATCH:
        case LL_STEP_KEEP_REPLY: /* the per-message steps: never for a bulk answer */
        case LL_STEP_UNDO_REPLY:
        case LL_STEP_UNDO_HOLD:
        case LL_STEP_UNDO_DEAD_PREREQ:
        case LL_STEP_UNDO_DEAD:
        case LL_STEP_UNDO_DEAD_LEDGER:
        case LL_STEP_UNDO_RETRY:
            r = W_FAILED;
            break;
        }
    }
    free(ms);
    free(msgs);
    free(ptrs);
    free(outs);
    return r;
}

/* Runs the bulk functions over work[from..to) (run: only that run's messages, or NULL for all).
 * When the transaction already holds other messages' effects, the set-based part gets a savepoint
 * of its own (it counts toward LL_BATCH_SAVEPOINTS: a rerun follows a message applied one by one
 * and precedes one decided here, so savepoints stay below the transaction's length). After a
 * failed statement its part alone is undone and every message goes one by one. *decided counts
 * what was decided. W_DONE, or W_FAILED (database gone). */
static w_result apply_bulk(batch *b, size_t from, size_t to, const char *run, size_t *decided)
{
    ll_loop *l = b->l;
    *decided = 0;
    ll_txn_mark mk;
    if (ll_txn_bulk_begin(b->tx, &mk) != 0)
        return W_FAILED;
    b->bulk_calls++; /* what this call decides is marked with it, and undone alone */
    for (size_t k = 0; k < l->n_io; k++) {
        if (!ll_topic_input(&l->io[k])->bulk)
            continue;
        w_result r = bulk_input(b, &l->io[k], from, to, run, decided);
        if (r == W_FAILED)
            return r;
        if (r == W_HELD) {
            /* only this call's decisions: the earlier ones (another run's, in this transaction
             * before the savepoint, or in one committed) stand, their replies queued or staged */
            for (size_t i = from; i < to; i++)
                if (b->work[i]->decided == b->bulk_calls)
                    b->work[i]->decided = 0;
            *decided = 0;
            return ll_txn_undo_to(b->tx, &mk) == 0 ? W_DONE : W_FAILED;
        }
    }
    /* what this call decided stands, its replies queued: those values are not needed again */
    for (size_t i = from; i < to; i++)
        if (b->work[i]->decided == b->bulk_calls)
            ll_batch_decoded_drop(b, b->work[i]);
    return W_DONE;
}

/* Whether the next undecided message of work[i]'s run (not held behind it) was left by the
 * set-based apply only to keep the run's order (ll_bulk_out.retry, or behind an earlier message of
 * the run of any input). */
int ll_batch_run_waits_after(const batch *b, size_t i)
{
    const lmsg *m = b->work[i];
    /* the next undecided message of the run (past those held behind m, when m is held): the
     * set-based part can take it (and what follows) only when it was left for the order alone;
     * any other goes one by one first */
    for (size_t j = i + 1; j < b->n_work && strcmp(b->work[j]->run, m->run) == 0; j++)
        if (!b->work[j]->decided && !(m->state == 2 && b->work[j]->ps == m->ps))
            return b->work[j]->retry;
    return 0;
}

/* The set-based part over work[from..) (run: only its messages), then a commit if the
 * transaction is full. 0, or -1: the batch must be undone (the caller undoes it). */
int ll_batch_bulk_step(batch *b, size_t from, const char *run)
{
    size_t decided = 0;
    if (apply_bulk(b, from, b->n_work, run, &decided) != W_DONE)
        return -1;
    b->n_bulk += decided;
    if (apply_bulk(b, from, b->n_work, run, &decided) != W_DONE || (ll_txn_full(b->tx) && tx_commit(b) != 0))
        return -1;
    return 0;
}

/* The recorded refusals and dead letters of the listed inputs ($2..$4 side by side), by primary
 * key: one probe of input_refusal_pkey per input (the lateral subquery, kept one by OFFSET 0, is a
 * nested loop whatever the statistics; a join let the generic plan hash a scan of the whole table,
 * which grows with every refusal ever recorded: issue 42). */
static const ll_stmt ST_REFUSALS_FIND = {
    "kloop_refusals_find",
    "SELECT r.topic, r.kafka_partition, r.kafka_offset, r.value_digest, r.kind, r.code, r.reply, r.reason"
    " FROM unnest($2::text[], $3::int[], $4::bigint[]) AS k(topic, part, off)"
    " CROSS JOIN LATERAL (SELECT x.* FROM nifi_ops.input_refusal x WHERE x.consumer_group = $1"
    " AND x.topic = k.topic AND x.kafka_partition = k.part AND x.kafka_offset = k.off OFFSET 0) r",
    4};

/* The row of r recording m, or -1. */
static int row_of(const PGresult *r, const lmsg *m)
{
    for (int i = 0; i < PQntuples(r); i++)
        if (strtoll(PQgetvalue(r, i, 2), NULL, 10) == m->offset &&
            strtol(PQgetvalue(r, i, 1), NULL, 10) == ll_loop_part_no(m->ps) &&
            strcmp(PQgetvalue(r, i, 0), ll_loop_part_topic(m->ps)) == 0)
            return i;
    return -1;
}

/* Answers m as row i of r records (the reply, or the dead letter). 0, or -1 (database). */
static int restate(batch *b, lmsg *m, const PGresult *r, int i)
{
    ll_log_ctx ctx = {m->run[0] ? m->run : NULL, NULL, ll_loop_part_topic(m->ps), ll_loop_part_no(m->ps),
                      m->offset};
    if (strcmp(PQgetvalue(r, i, 4), "DEAD_LETTER") == 0) {
        m->decided = -1;
        ll_log(LL_DEBUG, &ctx, "input_restated", "read again: dead-lettered again (%s), as the first time",
               PQgetvalue(r, i, 5));
        return ll_batch_dead(b, m, m->run, PQgetvalue(r, i, 5), PQgetvalue(r, i, 7)) == W_DONE ? 0 : -1;
    }
    json_error_t jerr;
    json_t *reply = json_loads(PQgetvalue(r, i, 6), 0, &jerr);
    if (!json_is_object(reply)) {
        /* never written so: the rule answers it (as applied before, never REJECTED anew) */
        json_decref(reply);
        ll_log(LL_WARN, &ctx, "refusal_unreadable",
               "the recorded refusal is not a JSON object (%s): answered anew", jerr.text);
        m->replay_step = LL_REPLAY_AS_REPLAY;
        return 0;
    }
    m->decided = -1;
    ll_log(LL_DEBUG, &ctx, "input_restated", "read again: refused again (%s), as the first time",
           PQgetvalue(r, i, 5));
    ll_txn_out_push(b->tx, m, (ll_replay_step)m->replay_step, reply, NULL, NULL, m->run);
    return 0;
}

int ll_batch_restate(batch *b)
{
    ll_loop *l = b->l;
    ll_pgarray topics = {0}, parts = {0}, offs = {0};
    for (size_t i = 0; i < b->n_work; i++) {
        lmsg *m = b->work[i];
        m->replay_step = LL_REPLAY_APPLY;
        if (ll_msg_replayed(m)) {
            ll_pgarray_add(&topics, ll_loop_part_topic(m->ps));
            ll_pgarray_add_ll(&parts, ll_loop_part_no(m->ps));
            ll_pgarray_add_ll(&offs, (long long)m->offset);
        }
    }
    int rc = 0;
    if (topics.n > 0) {
        const char *p[4] = {l->group, ll_pgarray_text(&topics), ll_pgarray_text(&parts),
                            ll_pgarray_text(&offs)};
        PGresult *r = ll_txn_begin(b->tx) == 0 ? l->kio->db_exec(&l->db, &ST_REFUSALS_FIND, p) : NULL;
        if (!r) {
            rc = -1;
        } else {
            size_t restated = 0;
            for (size_t i = 0; i < b->n_work && rc == 0; i++) {
                lmsg *m = b->work[i];
                if (!ll_msg_replayed(m))
                    continue;
                int row = row_of(r, m);
                bool same = row >= 0 && strtoll(PQgetvalue(r, row, 3), NULL, 10) == ll_msg_digest(m);
                m->replay_step = (int)ll_replay_decide(true, row >= 0, same);
                if (m->replay_step == LL_REPLAY_RESTATE) {
                    rc = restate(b, m, r, row);
                    restated += m->decided == -1;
                }
            }
            PQclear(r);
            if (rc == 0 && restated > 0)
                ll_log(
                    LL_INFO, NULL, "inputs_restated",
                    "%zu inputs read again were refused or dead-lettered the first time: answered so again, "
                    "nothing applied",
                    restated);
        }
    }
    ll_pgarray_free(&topics);
    ll_pgarray_free(&parts);
    ll_pgarray_free(&offs);
    return rc;
}
