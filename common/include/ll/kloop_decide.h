/*
 * kloop_decide.h - the consumer loop's decision table (decide.c; docs/design.md §3): what the loop
 * does with a message once its input's apply function (ll_apply_fn) or bulk function (ll_bulk_fn)
 * has answered. The apply decision is the only decision a service returns; the loop's own helpers
 * return the database or Kafka result, and only this table turns the pair into a step. Pure.
 *
 *   answer            bulk  database error of a DB answer   step
 *   ----------------  ----  ------------------------------  -----------------------------------
 *   COMMIT            no    -                               KEEP_REPLY       keep, reply
 *   ROLLBACK          no    -                               UNDO_REPLY       undo, reply
 *   DEFER             no    - (wait not expired)            UNDO_HOLD        undo, hold (clock)
 *   DEFER             no    - (loop.prerequisite_wait out)  UNDO_DEAD_PREREQ undo, dead letter
 *   DEAD              no    -                               UNDO_DEAD        undo, dead letter
 *   DB (or unknown)   no    unavailable                     UNDO_BATCH       undo batch, rewind
 *   DB (or unknown)   no    input (SQLSTATE 22, 23)         UNDO_DEAD_LEDGER undo, dead letter
 *   DB (or unknown)   no    other (timeout, deadlock, SQL)  UNDO_RETRY       undo, hold (no clock)
 *   COMMIT            yes   -                               BULK_KEEP        keep what it decided
 *   any other         yes   unavailable                     UNDO_BATCH       undo batch, rewind
 *   any other         yes   input or other                  BULK_UNDO        undo its part, one by one
 *
 * "undo" is ROLLBACK TO SAVEPOINT (or ROLLBACK without savepoints); a reply or dead letter is
 * staged after the database commit, for the next Kafka transaction (commit.c).
 *
 * The second table, ll_loop_commit_decide: when the staged records go into a Kafka transaction
 * (docs/design.md §3). A database commit never waits for a Kafka commit; the loop waits only when
 * the records staged behind the commit in flight reach their bound.
 *
 *   commit in flight  it ended  staged reach the bound  may wait   step
 *   ----------------  --------  ----------------------  --------   ---------------------------
 *   no                -         -                       -          START (when anything is owed)
 *   yes               yes       -                       -          TAKE_START
 *   yes               no        no                      -          LEAVE
 *   yes               no        yes                     yes        WAIT_START
 *   yes               no        yes                     no         LEAVE
 *
 * and LEAVE whenever a rewind or a new producer is owed (nothing begins before it), or nothing is
 * owed and no commit in flight.
 */
#ifndef LL_KLOOP_DECIDE_H
#define LL_KLOOP_DECIDE_H

#include <stdbool.h>

#include "ll/kloop.h"

/* The class of the database error behind an LL_APPLY_DB answer (ll_db_err_is_unavailable, then
 * ll_db_err_is_input, else other). */
typedef enum ll_loop_fault {
    LL_FAULT_UNAVAILABLE, /* no connection, or the server went away (08xxx, 57P0x) */
    LL_FAULT_INPUT,       /* the ledger refused the values (SQLSTATE class 22 or 23) */
    LL_FAULT_OTHER        /* a bounded wait ran out, a deadlock or serialization failure, other SQL */
} ll_loop_fault;

/* What the loop does with the message (or, bulk, with the set-based part). */
typedef enum ll_loop_step {
    LL_STEP_KEEP_REPLY,       /* keep its effect; its reply after the database commit */
    LL_STEP_UNDO_REPLY,       /* undo its effect; its reply after the database commit */
    LL_STEP_UNDO_HOLD,        /* undo; hold its run, the prerequisite clock running */
    LL_STEP_UNDO_DEAD_PREREQ, /* undo; dead letter PREREQUISITE_TIMEOUT */
    LL_STEP_UNDO_DEAD,        /* undo; dead letter with the apply's reason code */
    LL_STEP_UNDO_DEAD_LEDGER, /* undo; dead letter LEDGER_REJECTED */
    LL_STEP_UNDO_RETRY,       /* undo; hold its run with backoff, no prerequisite clock */
    LL_STEP_UNDO_BATCH,       /* undo the whole batch, abort its Kafka transaction and rewind */
    LL_STEP_BULK_KEEP,        /* keep what the bulk function decided; the rest go one by one */
    LL_STEP_BULK_UNDO         /* undo the set-based part; every message goes one by one */
} ll_loop_step;

/* The table above: answer of the apply (bulk false) or bulk function (bulk true); wait_expired:
 * loop.prerequisite_wait has passed since the message's first deferral; fault: the class of
 * db->err, read only for a DB answer (or a value outside ll_apply). */
ll_loop_step ll_loop_decide(ll_apply answer, bool bulk, bool wait_expired, ll_loop_fault fault);

/* What the loop does with its staged records now (the second table). */
typedef enum ll_commit_step {
    LL_COMMIT_LEAVE,      /* nothing now: they wait for the commit in flight, or nothing is owed */
    LL_COMMIT_START,      /* begin a Kafka commit with everything staged and the changed offsets */
    LL_COMMIT_TAKE_START, /* take the ended commit's outcome, then (if it committed) START */
    LL_COMMIT_WAIT_START  /* wait for the commit in flight, take its outcome, then START */
} ll_commit_step;

/* The staged records of a commit waiting behind the one in flight: how many there are, their bytes,
 * and their bounds (records: LL_LOOP_STAGED_BATCHES x loop.batch_max; bytes: LL_LOOP_STAGED_BYTES;
 * loop_int.h). */
typedef struct ll_commit_state {
    bool in_flight, ended; /* a Kafka commit is in flight; its thread has finished */
    bool owed;             /* staged records, or offsets changed since the last commit began */
    bool blocked;          /* a rewind or a new producer is owed */
    size_t staged, staged_bytes, max_staged, max_staged_bytes;
} ll_commit_state;

/* The second table: may_wait is false for the loop's turn (never blocks), true after a batch. */
ll_commit_step ll_loop_commit_decide(const ll_commit_state *s, bool may_wait);

/*
 * The third table: an input read again that the ledger answered before (its offset done in the
 * ledger's position for the group, not in Kafka's commit: a group reset, a Kafka commit that did
 * not happen) restates its first answer (docs/contract.md K§1: "a replayed input is answered as it
 * was the first time"; docs/design.md §5, "A replay restates"):
 *
 *   not answered before                          -> APPLY    (the rule decides)
 *   a refusal or dead letter recorded for it,
 *     of the same bytes (input_refusal)          -> RESTATE  (that answer again; nothing applied)
 *   recorded, other bytes (the topic was made
 *     again and the offset is another input's)   -> APPLY
 *   none recorded: it was applied                -> REPLAY   (the rule answers; a refusal it
 *                                                   computes from a run that moved on is REPLAY)
 */
typedef enum ll_replay_step {
    LL_REPLAY_APPLY = 0, /* a fresh input: the rule's answer as it is */
    LL_REPLAY_RESTATE,   /* the recorded refusal or dead letter, nothing applied */
    LL_REPLAY_AS_REPLAY  /* applied before: the rule's answer, a REJECTED one answered REPLAY */
} ll_replay_step;

ll_replay_step ll_replay_decide(bool answered_before, bool recorded, bool same_bytes);

/* The outcome a reply goes out with under step s: "REPLAY" for a REJECTED answer under
 * LL_REPLAY_AS_REPLAY, else outcome itself (borrowed; NULL stays NULL). */
const char *ll_replay_outcome(ll_replay_step s, const char *outcome);

/* The fourth table: a fetch the broker refused (auto.offset.reset = error) at position `from` of a
 * partition whose log holds [lo, hi) (docs/design.md §5, "Offsets the topic no longer holds"). */
typedef enum ll_gap_verdict {
    LL_GAP_NONE = 0, /* the position is readable: a start without an offset, seek there again */
    LL_GAP_BELOW,    /* [from, lo) was deleted by retention before it was read: stop the partition */
    LL_GAP_ABOVE     /* from is past the log's end (the topic made again): stop the partition */
} ll_gap_verdict;

ll_gap_verdict ll_gap_decide(int64_t from, int64_t lo, int64_t hi);

/* Whether an operator's acceptance of [acc_from, acc_to) lets a partition read on from acc_to
 * when its position is base: base lies in the accepted range. */
bool ll_gap_accepted(int64_t base, int64_t acc_from, int64_t acc_to);

/* Whether the open database transaction must commit now (docs/design.md §3): with loop.db_batch_max
 * (db_batch_max) 1, after one message applied (msgs) or one result queued without one (a dead
 * letter's event: committed at once, else a rejection after it took the event along while its
 * record went to Kafka); with more, once its savepoints reach db_batch_max (PostgreSQL caches 64
 * subtransactions per backend). What the set-based part decided needs no savepoint and does not
 * count. Never while no transaction is open. */
bool ll_txn_full_decide(bool open, int64_t db_batch_max, int msgs, size_t outs, int savepoints);

#endif
