/*
 * txn.h - the open database transaction of a batch (txn.c): BEGIN, savepoint commands, the
 * queued results, the commit with its results staged for the Kafka commit, the undo, and the
 * dead-letter event. The int functions return 0, or -1 with l->db.err. Not a public header.
 */
#ifndef LL_LOOP_TXN_H
#define LL_LOOP_TXN_H

#include "batch.h"

/* The calls a message offers its apply function (ll/kloop.h), into the transaction (ll_msg.txn: the
 * batch whose transaction is open). */
extern const ll_msg_ops LL_TXN_MSG_OPS;

/* txn.c: the open transaction. The int functions return 0, or -1 with l->db.err. */
int ll_batch_db_cmd(batch *b, const char *sql);
/* BEGIN unless a transaction is open (reconnects first). */
int ll_batch_tx_begin(batch *b);
/* Queues a result of the open transaction: a reply (taken over, encoded now, its tree freed) or a
 * dead letter (code and reason copied). */
void ll_batch_out_push(batch *b, lmsg *m, json_t *reply, const char *code, const char *reason,
                       const char *run_id);
/* Drops the queued results from index keep on (the undone part of a transaction). */
void ll_batch_outs_truncate(batch *b, size_t keep);
/* Drops every queued result. */
void ll_batch_outs_clear(batch *b);

/* txn.c: the commit and what follows it */
/* Commits the open database transaction (the precommit statement first), then stages its
 * results for the Kafka commit and remembers their offsets (done_mark). 0, or -1: the caller
 * undoes the batch (the transaction may still be open). */
int ll_batch_tx_commit(batch *b);
/* Undoes the open transaction (ROLLBACK), its results and its heartbeats; what was committed
 * before stays. */
void ll_batch_tx_undo(batch *b);
/* Whether the open transaction must commit now (loop.db_batch_max; with 1, after one message or
 * one dead letter). */
int ll_batch_tx_full(const batch *b);

/* txn.c: the DEAD_LETTER event in the open database transaction (0, or -1 with db->err),
 * and, once that transaction committed, the dead-letter record staged (ll_loop_stage_record) */
int ll_loop_dead_letter_event(ll_loop *l, const lmsg *m, const char *run_id, const char *code,
                              const char *reason);
void ll_loop_dead_letter_stage(ll_loop *l, const lmsg *m, const char *code, const char *reason);

#endif
