/*
 * batch.h - one batch of the loop (batch.c): the work of a poll, its results waiting for the
 * database commit, and its end reported to the loop (ll_batch_end). Not a public header.
 */
#ifndef LL_LOOP_BATCH_H
#define LL_LOOP_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "ll/codec.h"
#include "ll/kloop_decide.h"
#include "loop_int.h"
#include "position.h"

/* What became of one message in the database transaction. */
typedef enum {
    W_DONE,  /* a reply or a dead letter waits for the commit */
    W_HELD,  /* held: its run waits */
    W_FAILED /* the database went away (or the transaction broke): the batch is undone */
} w_result;

/* One batch: its work, its open database transaction, the results waiting for its commit. */
typedef struct batch {
    ll_loop *l;
    lmsg **work;
    size_t n_work;
    lmsg *fresh; /* the polled messages' lmsg structs */
    size_t n_fresh;
    struct ll_txn *tx; /* its open database transaction (txn.c; owned while the batch runs) */
    lmsg **done_held;  /* held copies done in this batch, freed when it ends */
    size_t n_done_held, cap_done_held;
    done_mark *marks; /* offsets whose results are staged, marked done when the batch ends */
    size_t n_marks, cap_marks;
    size_t n_decodes; /* values decoded in this batch (ll_decode calls; the batch_done debug line) */
    size_t n_kept;    /* messages of the work that keep a decoded value or its error (ll_batch_decode) */
    size_t n_bulk;    /* messages the set-based part applied in this batch */
    int bulk_on;      /* the inputs' set-based apply is used (loop.db_batch_max > 1) */
    int bulk_calls;   /* set-based calls made in this batch: lmsg.decided names the one that decided */
    int rewind;       /* a rewind is owed when the batch ends (reported to the loop: ll_batch_end) */
    int64_t rewind_delay_ms; /* after this long (ms; 0: the recovery backoff) */
} batch;

/* The Kafka partitions on which the run being walked has a message held: its later messages there
 * are held too. `all`: every later message of the run waits (the set-based part: an earlier one
 * goes one by one, docs/design.md §3). A run's messages are next to each other in the sorted work, so the
 * list is reset when the run changes. Few partitions per run (one per topic); beyond LL_WAIT_PARTS every
 * later message of the run waits. */
#define LL_WAIT_PARTS 8
typedef struct run_waits {
    const char *run;
    const part_state *ps[LL_WAIT_PARTS];
    size_t n;
    int all;
} run_waits;

/* What a batch leaves to the loop (loop.c): whether it ran to its end (its results staged: the
 * Kafka commit may take them, and the partitions drained below half resume), and whether a rewind
 * is owed (the batch undone, a done offset its tracker could not take, positions not written, a
 * seek that failed), after rewind_delay_ms (0: the recovery backoff). */
typedef struct ll_batch_end {
    bool ended;
    bool rewind;
    int64_t rewind_delay_ms;
} ll_batch_end;

/* batch.c: applies one poll batch (polled: borrowed, n messages) with the due held runs */
ll_batch_end ll_loop_batch(ll_loop *l, rd_kafka_message_t **polled, size_t n);

/* batch.c: collects the due held runs and the polled messages (borrowed until the batch
 * ends) into b->work, sorted by run id (now: monotonic ms). */
void ll_batch_collect(batch *b, rd_kafka_message_t **polled, size_t n, int64_t now);

/* The order of a batch's work (qsort comparator over lmsg *): by run id, then topic, partition
 * and offset. A total order (transitive), so that every transaction locks runs in one order and a
 * run's messages on one Kafka partition keep their offset order. */
int ll_work_cmp(const void *a, const void *b);

/* batch.c: a replay restates (docs/design.md §5, "A replay restates") */
/* Before anything of the batch is applied: for each message the ledger answered before
 * (ll_msg_replayed), its recorded refusal or dead letter (nifi_ops.input_refusal) is looked up in
 * one statement; one of the same bytes is answered again as it was (queued in the open
 * transaction, lmsg.decided = -1: nothing applied); the others are marked LL_REPLAY_AS_REPLAY
 * (applied before: the rule answers, never REJECTED). Nothing replayed: no statement. 0, or -1
 * with l->db.err (the batch is undone). */
int ll_batch_restate(batch *b);

/* batch.c */
/* Pauses ps's fetching at offset (its held queue is full: ll_loop_stop_partition); a seek that
 * failed reports a rewind in b (the loop's, after the batch). */
void ll_batch_stop_partition(batch *b, part_state *ps, int64_t offset);
/* Holds m (its run waits) with backoff; deferred = a missing prerequisite (starts its clock);
 * pid and why go to the log. Returns W_HELD. */
w_result ll_batch_hold(batch *b, lmsg *m, int deferred, const char *pid, const char *why);
/* A dead letter: its event in the open transaction, its record after the commit. W_DONE, or
 * W_FAILED (database). */
w_result ll_batch_dead(batch *b, lmsg *m, const char *run_id, const char *code, const char *reason);
/* What an apply function sees of message m (value: its decoded record, borrowed; now in ms). */
ll_msg ll_batch_msg_view(batch *b, const lmsg *m, json_t *value, int64_t now);
/* How long m waits for its prerequisite (ms): loop.reapplied_wait for an input answered before the
 * database lost its effect (its prerequisite comes with another service's re-read), else
 * loop.prerequisite_wait (docs/design.md §5, §6). */
int64_t ll_batch_prereq_wait(const batch *b, const lmsg *m);
/* Message m's value (of the work of b; m->io set) decoded with its topic's options, once per
 * batch: the first call decodes it (counted in b->n_decodes) and keeps the value, or the reason
 * it did not decode, with m (lmsg.decoded, lmsg.decode_err) until ll_batch_decoded_drop; later
 * calls return what was kept, so the set-based part and the per-message path, however often
 * they look at m, share one decode. Returns the value (borrowed: the apply functions only read
 * it), or NULL with *err the reason (borrowed likewise; a tombstone: "empty message value",
 * nothing decoded or kept). */
json_t *ll_batch_decode(batch *b, lmsg *m, const char **err);
/* Releases what ll_batch_decode kept with m (nothing kept: nothing done). */
void ll_batch_decoded_drop(batch *b, lmsg *m);
/* The class of the loop's database error for the decision table (ll/kloop_decide.h): unavailable
 * when the connection is down (ll_loop_io.db_connected) or by its SQLSTATE. */
ll_loop_fault ll_batch_fault(const batch *b);
/* Applies one message inside the open transaction: W_DONE, W_HELD, or W_FAILED (batch undone). */
w_result ll_batch_apply_one(batch *b, lmsg *m);

/* batch.c */
/* Moves w to m's run (a new run: nothing waits yet). */
void ll_waits_enter(run_waits *w, const lmsg *m);
/* Partition ps waits for the run being walked. */
void ll_waits_add(run_waits *w, const part_state *ps);
/* Whether the run being walked waits on ps. */
int ll_waits_on(const run_waits *w, const part_state *ps);
/* Whether the next undecided message of work[i]'s run (past those held behind work[i] on its
 * partition, when it is held) was left by the set-based apply only to keep the run's order
 * (ll_bulk_out.retry, or behind an earlier message of the run of any input): with work[i] applied
 * or held, the set-based part may take it now. */
int ll_batch_run_waits_after(const batch *b, size_t i);
/* The set-based part over work[from..) (run: only its messages), then a commit if the
 * transaction is full. 0, or -1 after undoing the batch. */
int ll_batch_bulk_step(batch *b, size_t from, const char *run);

#endif
