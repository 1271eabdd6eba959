/*
 * kloop_bulk.c - the set-based part of a batch's transaction (ll_bulk_fn, kloop_batch.h): each
 * input's bulk function decides many messages with a few statements; the messages it leaves go
 * one by one in their turn. It never decides a message ahead of an earlier one of its run in the
 * work order (ll_work_cmp) that is still to go one by one, of any input and on any partition: the
 * work order is the order of the one-by-one loop (loop.db_batch_max = 1), and both must answer
 * alike (docs/design.md §3, tests/integration/test_bulk_differential.py). A run's messages behind a held
 * one wait on its partition only, as in the loop.
 */
#include <stdlib.h>
#include <string.h>

#include "kloop_batch.h"
#include "ll/log.h"

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
struct ll_bulk_sink {
    batch *b;
    lmsg **ms;
    const ll_msg *msgs;
};

void ll_bulk_reply(ll_bulk_out *o, json_t *reply)
{
    ll_bulk_sink *s = o->sink;
    lmsg *m = s->ms[o->at];
    const char *rid = json_string_value(json_object_get(s->msgs[o->at].value, "runId"));
    ll_batch_out_push(s->b, m, reply, NULL, NULL, rid ? rid : m->run);
    o->replied = true;
}

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
    int64_t now = ll_loop_now_ms();
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
    ll_bulk_sink sink = {b, ms, msgs};
    for (size_t i = 0; i < got; i++)
        outs[i] = (ll_bulk_out){.sink = &sink, .at = i};
    /* one message: the per-message path is as cheap */
    if (got >= 2 && ll_batch_tx_begin(b) != 0) {
        r = W_FAILED; /* no transaction: the database result, nothing to decide */
    } else if (got >= 2) {
        ll_apply a = io->in->bulk(l->svc, &l->db, ptrs, got, outs);
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
                       io->in->logical);
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
                got, io->in->logical, l->db.err.sqlstate, l->db.err.message);
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
    int sp = b->in_tx && (b->tx_msgs > 0 || b->n_outs > 0); /* effects to keep */
    if (sp && ll_batch_db_cmd(b, b->savepoints ? "RELEASE SAVEPOINT m; SAVEPOINT m" : "SAVEPOINT m") != 0)
        return W_FAILED;
    b->savepoints += sp;
    b->bulk_calls++; /* what this call decides is marked with it, and undone alone */
    size_t outs_before = b->n_outs, touches = b->n_touch;
    for (size_t k = 0; k < l->n_io; k++) {
        if (!l->io[k].in->bulk)
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
            ll_batch_outs_truncate(b, outs_before);
            b->n_touch = touches;
            if (sp)
                return ll_batch_db_cmd(b, "ROLLBACK TO SAVEPOINT m") == 0 ? W_DONE : W_FAILED;
            b->in_tx = 0;
            return ll_batch_db_cmd(b, "ROLLBACK") == 0 ? W_DONE : W_FAILED;
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
    if (apply_bulk(b, from, b->n_work, run, &decided) != W_DONE ||
        (ll_batch_tx_full(b) && ll_batch_tx_commit(b) != 0))
        return -1;
    return 0;
}
