/*
 * txn.h - the open database transaction of a batch (txn.c), one object, its struct private to
 * txn.c: BEGIN, a savepoint per message or per set-based call and the undo to it, the queued
 * results, the heartbeats asked for, the commit (the statement before it: position.c) with its
 * results then staged for the Kafka commit, and the dead-letter event. The int functions return
 * 0, or -1 with l->db.err. Not a public header.
 */
#ifndef LL_LOOP_TXN_H
#define LL_LOOP_TXN_H

#include <stdbool.h>

#include "loop_int.h"
#include "position.h"

/* txn.c: the transaction of one batch */
typedef struct ll_txn ll_txn;

/* Where the transaction goes back to when one message's, or one set-based call's, part is undone:
 * the results and heartbeats queued before it, and whether it has a savepoint of its own (else
 * the whole transaction is rolled back). */
typedef struct ll_txn_mark {
    size_t outs, touches;
    bool savepoint;
} ll_txn_mark;

/* The calls a message offers its apply function (ll/kloop.h): ll_msg.txn is the ll_txn. */
extern const ll_msg_ops LL_TXN_MSG_OPS;

/* A batch's transaction, none open yet; use_savepoints: each message applied one by one gets a
 * savepoint (more than one message and loop.db_batch_max > 1). Owned by the batch (ll_txn_free).
 * Aborts on out of memory. */
ll_txn *ll_txn_new(ll_loop *l, bool use_savepoints);
/* Frees t and what it still queues (NULL: nothing). The transaction must be committed or undone. */
void ll_txn_free(ll_txn *t);
/* BEGIN unless a transaction is open (reconnects first). */
int ll_txn_begin(ll_txn *t);
/* Before one message is applied one by one: BEGIN if needed, its savepoint (when the transaction
 * uses them), counted; *mk is where its undo goes back to. */
int ll_txn_msg_begin(ll_txn *t, ll_txn_mark *mk);
/* Before a set-based call: a savepoint when the transaction holds effects to keep; *mk is where
 * its undo goes back to. */
int ll_txn_bulk_begin(ll_txn *t, ll_txn_mark *mk);
/* Undoes what came after mk: its queued results and heartbeats dropped, ROLLBACK TO SAVEPOINT (or
 * ROLLBACK of the whole transaction when mk has no savepoint). */
int ll_txn_undo_to(ll_txn *t, const ll_txn_mark *mk);
/* Queues a result of the open transaction: a reply (taken over, encoded now, its tree freed; a
 * refusal of an input applied before answered REPLAY: ll_replay_outcome) or a dead letter (code
 * and reason copied). step: how the batch answers m again (ll_replay_step: LL_REPLAY_APPLY for a
 * fresh input; docs/design.md §5, "A replay restates"). */
void ll_txn_out_push(ll_txn *t, lmsg *m, ll_replay_step step, json_t *reply, const char *code,
                     const char *reason, const char *run_id);
/* A dead letter: its event in the open transaction (BEGIN if needed), its result queued (step as
 * for ll_txn_out_push). 0, or -1 with the database's error (l->db.err). */
int ll_txn_dead(ll_txn *t, lmsg *m, ll_replay_step step, const char *run_id, const char *code,
                const char *reason);
/* Whether the open transaction must commit now (ll_txn_full_decide). */
bool ll_txn_full(const ll_txn *t);
/* Commits the open transaction: the statement before the COMMIT (ll_positions_precommit, with the
 * offsets marks the batch's earlier transactions staged), then its results staged for the Kafka
 * commit; their messages are then ll_txn_committed. With no transaction open, its queued results
 * (a message rolled back whole) are staged, in a transaction of their own when one must be
 * recorded. 0, or -1: the caller undoes the batch (the transaction may still be open). */
int ll_txn_commit(ll_txn *t, const done_mark *marks, size_t n_marks);
/* The messages whose results the commits staged since ll_txn_committed_clear (*n of them;
 * borrowed). */
lmsg *const *ll_txn_committed(const ll_txn *t, size_t *n);
/* Forgets the committed messages (the batch took them). */
void ll_txn_committed_clear(ll_txn *t);
/* Undoes the open transaction (ROLLBACK while the connection is up), its results and its
 * heartbeats; what was committed before stays. */
void ll_txn_undo(ll_txn *t);

/* txn.c: the DEAD_LETTER event in the open database transaction (0, or -1 with db->err),
 * and, once that transaction committed, the dead-letter record staged (ll_loop_stage_record) */
int ll_loop_dead_letter_event(ll_loop *l, const lmsg *m, const char *run_id, const char *code,
                              const char *reason);
void ll_loop_dead_letter_stage(ll_loop *l, const lmsg *m, const char *code, const char *reason);

#endif
