/*
 * kloop_decide.h - the consumer loop's decision table (kloop_decide.c; issue 12 §1): what the loop
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
 * produced after the database commit, in the batch's Kafka transaction (kloop_batch.c).
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

#endif
