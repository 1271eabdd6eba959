/*
 * kloop_tx.c - the open database transaction of a batch (kloop_batch.h): BEGIN and plain
 * commands, the run heartbeats asked for by apply functions (ll_msg_touch_run, written once
 * before the commit with the positions, kloop_position.c), and the results (replies, dead letters) queued
 * until the commit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kloop_batch.h"
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
    if (l->db.connects != l->db_connects_seen) {
        /* a new connection, maybe to another server (a failover): it may have lost transactions
         * whose offsets Kafka has, so the positions are read again first (the batch is undone
         * and the loop rewinds: kloop_position.c) */
        snprintf(l->db.err.sqlstate, sizeof l->db.err.sqlstate, "08006");
        snprintf(
            l->db.err.message, sizeof l->db.err.message,
            "a new database connection: the ledger's positions are read again before anything is applied");
        return -1;
    }
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
        ll_obs_reply_labels(reply, o->outcome, sizeof o->outcome, o->reply_code, sizeof o->reply_code);
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
    }
    if (keep < b->n_outs)
        b->n_outs = keep;
}

void ll_batch_outs_clear(batch *b)
{
    ll_batch_outs_truncate(b, 0);
}
