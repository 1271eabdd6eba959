/*
 * kloop_tx.c - the open database transaction of a batch (kloop_batch.h): BEGIN and plain
 * commands, the run heartbeats asked for by apply functions (ll_msg_touch_run, written once
 * before the commit with the positions, kloop_position.c), the results (replies, dead letters)
 * queued until the commit, the commit itself with its results then staged for the Kafka commit
 * (kloop_commit.c) and their offsets remembered, and the undo. A failure is returned to the batch,
 * which decides (kloop_batch.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kloop_batch.h"
#include "ll/log.h"
#include "ll/obs.h"

void ll_msg_touch_run(const ll_msg *m, const char *run_id)
{
    batch *b = m->txn;
    if (!b || !run_id || strlen(run_id) != 36)
        return;
    for (size_t i = 0; i < b->n_touch; i++)
        if (strcmp(b->touch[i], run_id) == 0)
            return;
    if (b->n_touch == b->cap_touch) {
        size_t cap = b->cap_touch ? b->cap_touch * 2 : 16;
        char(*t)[37] = realloc(b->touch, cap * sizeof *t);
        if (!t)
            abort();
        b->touch = t;
        b->cap_touch = cap;
    }
    memcpy(b->touch[b->n_touch++], run_id, 37);
}

int ll_batch_db_cmd(batch *b, const char *sql)
{
    return b->l->kio->db_command(&b->l->db, sql) == LL_DB_OK ? 0 : -1;
}

int ll_batch_tx_begin(batch *b)
{
    if (b->in_tx)
        return 0;
    ll_loop *l = b->l;
    if (l->kio->db_ensure(&l->db) != LL_DB_OK)
        return -1;
    /* no check of the connection here: whether the ledger is still the one this instance last saw
     * is the position write's compare-and-set before the COMMIT (kloop_position.c), which every
     * path passes, whatever the path to the server (a new connection, a pooler behind the same one) */
    if (ll_batch_db_cmd(b, "BEGIN ISOLATION LEVEL READ COMMITTED") != 0)
        return -1;
    b->in_tx = 1;
    b->savepoints = b->tx_msgs = 0;
    return 0;
}

/* Queues a result of the open transaction: a reply (taken over, encoded now, its tree freed) or a
 * dead letter (code and reason copied). */
void ll_batch_out_push(batch *b, lmsg *m, json_t *reply, const char *code, const char *reason,
                       const char *run_id)
{
    if (b->n_outs == b->cap_outs) {
        size_t cap = b->cap_outs ? b->cap_outs * 2 : 32;
        out_item *o = realloc(b->outs, cap * sizeof *o);
        if (!o)
            abort();
        b->outs = o;
        b->cap_outs = cap;
    }
    out_item *o = &b->outs[b->n_outs++];
    memset(o, 0, sizeof *o);
    o->m = m;
    if (reply) {
        char why[400];
        o->is_reply = 1;
        /* an input applied before, read again: a refusal computed from a run that moved on since
         * is no answer of it (kloop_restate.c) */
        const char *was = json_string_value(json_object_get(reply, "outcome"));
        const char *now = ll_replay_outcome((ll_replay_step)m->replay_step, was);
        if (now != was)
            json_object_set_new(reply, "outcome", json_string(now));
        ll_obs_reply_labels(reply, o->outcome, sizeof o->outcome, o->reply_code, sizeof o->reply_code);
        /* a refusal is recorded with its input, so that a replay restates it: not one restated,
         * and not one withheld (an input answered before a database loss keeps the answer NiFi
         * has, which a later replay must restate as applied) */
        if (m->replay_step != LL_REPLAY_RESTATE && !ll_msg_answered_before(m) &&
            strcmp(o->outcome, "REJECTED") == 0 && !(o->refusal = json_dumps(reply, JSON_COMPACT)))
            abort();
        if (ll_encode(&m->io->eopts, reply, &o->reply, &o->reply_len, why, sizeof why) != 0) {
            o->reply = NULL;
            o->encode_err = strdup(why);
        }
        json_decref(reply);
    }
    if (code) {
        snprintf(o->code, sizeof o->code, "%s", code);
        o->reason = strdup(reason ? reason : "");
    }
    snprintf(o->run_id, sizeof o->run_id, "%s", run_id ? run_id : "");
}

/* Drops the queued results from index keep on (the undone part of a transaction). */
void ll_batch_outs_truncate(batch *b, size_t keep)
{
    for (size_t i = keep; i < b->n_outs; i++) {
        free(b->outs[i].reply);
        free(b->outs[i].encode_err);
        free(b->outs[i].reason);
        free(b->outs[i].refusal);
    }
    if (keep < b->n_outs)
        b->n_outs = keep;
}

void ll_batch_outs_clear(batch *b)
{
    ll_batch_outs_truncate(b, 0);
}

/* ---- the commit and what follows it ---------------------------------------------------------- */

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

/* Stages the results of the committed database transaction for the next Kafka transaction
 * (kloop_commit.c) and marks their offsets done. 0, or -1 (the caller undoes the batch). */
static int flush_outs(batch *b)
{
    ll_loop *l = b->l;
    int rc = 0;
    for (size_t i = 0; i < b->n_outs && rc == 0; i++) {
        out_item *o = &b->outs[i];
        lmsg *m = o->m;
        if (ll_msg_answered_before(m) && o->is_reply) {
            ll_obs_answer_withheld();
        } else if (o->is_reply) {
            char err[800];
            if (o->encode_err) {
                /* a reply that does not fit its schema: a dead letter, in a transaction of its
                 * own (the batch's is committed), rather than the same message for ever */
                snprintf(err, sizeof err, "the reply to %s does not fit its schema: %s", m->io->reply_topic,
                         o->encode_err);
                if (l->kio->db_ensure(&l->db) != LL_DB_OK ||
                    l->kio->db_command(&l->db, "BEGIN") != LL_DB_OK ||
                    ll_loop_dead_letter_event(l, m, o->run_id, "REPLY_ENCODE_FAILED", err) != 0 ||
                    l->kio->db_command(&l->db, "COMMIT") != LL_DB_OK)
                    rc = -1;
                else
                    ll_loop_dead_letter_stage(l, m, "REPLY_ENCODE_FAILED", err);
            } else {
                unsigned char *buf = o->reply; /* staged from here */
                o->reply = NULL;
                ll_loop_stage_record(l, m->io->reply_topic, m->key, m->key_len, buf, o->reply_len, NULL, 1,
                                     m->io->topic, o->outcome, o->reply_code);
            }
        } else {
            /* a dead letter is staged even for an input answered before the loss (issue 39, item
             * 4): it is applied again and its effect is not in the ledger, so withheld it would be
             * lost for good; visible, `loadctl redrive` applies it once its cause is fixed */
            if (ll_msg_answered_before(m)) {
                ll_log_ctx ctx = {o->run_id[0] ? o->run_id : NULL, NULL, m->ps->topic, m->ps->partition,
                                  m->offset};
                ll_log(LL_ERROR, &ctx, "answered_input_dead_lettered",
                       "an input answered before the database lost its effect is dead-lettered on its "
                       "re-application"
                       " (%s): its effect is not in the ledger until `loadctl redrive` applies it",
                       o->code);
            }
            ll_loop_dead_letter_stage(l, m, o->code, o->reason);
        }
        if (rc == 0) {
            mark_later(b, m);
            m->ps->touched = l->batch_no;
            m->state = 1;
            if (m->held)
                ll_batch_unhold(b, m);
        }
    }
    ll_batch_outs_clear(b);
    return rc;
}

int ll_batch_tx_commit(batch *b)
{
    ll_loop *l = b->l;
    if (!b->in_tx) {
        /* a refusal whose transaction was rolled back whole (one message, no savepoint) is still
         * recorded before it is answered: in a transaction of its own, with the positions */
        bool record = false;
        for (size_t i = 0; i < b->n_outs && !record; i++)
            record = ll_out_recorded(&b->outs[i]);
        if (!record)
            return flush_outs(b);
        if (ll_batch_tx_begin(b) != 0)
            return -1;
    }
    if (ll_batch_precommit(b) != 0)
        return -1; /* still in the (failed) transaction: the batch undoes it (ll_batch_tx_undo) */
    /* not waiting for the Kafka commit in flight: this database commit may come before it
     * ends, its results staged for the next one. If that fails, the messages of every database
     * transaction not yet in a committed Kafka transaction are read again from the committed
     * offsets and applied as replays, as after a crash between the two commits (kloop_commit.c,
     * docs/design.md §4) */
    b->in_tx = 0;
    if (ll_batch_db_cmd(b, "COMMIT") != 0)
        return -1;
    if (l->crash_after > 0 && ++l->db_commits >= l->crash_after) {
        ll_log(LL_WARN, NULL, "fault_injected", "killing self after database commit %lld",
               (long long)l->db_commits);
        /* the replies of earlier commits go to the broker first, in a transaction left open:
         * the most adverse form of this crash point for read_committed readers */
        ll_loop_commit_fault_open(l);
        raise(SIGKILL);
    }
    return flush_outs(b);
}

/* Undoes the open transaction (ROLLBACK while the connection is up) and drops its results and
 * the heartbeats asked for: what was committed before stays, its results staged. */
void ll_batch_tx_undo(batch *b)
{
    ll_loop *l = b->l;
    if (b->in_tx && l->kio->db_connected(&l->db))
        l->kio->db_command(&l->db, "ROLLBACK");
    b->in_tx = 0;
    b->n_touch = 0;
    ll_batch_outs_clear(b);
}

/* Whether the open transaction must commit now: loop.db_batch_max savepoints (PostgreSQL caches
 * 64 subtransactions per backend), or, with loop.db_batch_max = 1, one message (the old design):
 * applied, or dead-lettered (its DEAD_LETTER event is the transaction, with no savepoint before
 * the next message's ROLLBACK: committed at once, else a rejection after it took the event along
 * while its record went to Kafka; docs/design.md §3). What the set-based part decided needs no savepoint
 * and does not count. */
int ll_batch_tx_full(const batch *b)
{
    if (!b->in_tx)
        return 0;
    return b->l->db_batch_max == 1 ? b->tx_msgs >= 1 || b->n_outs > 0 : b->savepoints >= b->l->db_batch_max;
}
