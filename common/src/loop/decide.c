/*
 * decide.c - the consumer loop's decision tables (kloop_decide.h has them as tables): one
 * switch over the service's apply decision, then the database error's class; and when the staged
 * records go into a Kafka commit; how an input the ledger answered before is answered again. Pure.
 */
#include <string.h>

#include "ll/kloop_decide.h"

ll_loop_step ll_loop_decide(ll_apply answer, bool bulk, bool wait_expired, ll_loop_fault fault)
{
    switch (answer) {
    case LL_APPLY_COMMIT:
        return bulk ? LL_STEP_BULK_KEEP : LL_STEP_KEEP_REPLY;
    case LL_APPLY_ROLLBACK:
        if (!bulk)
            return LL_STEP_UNDO_REPLY;
        break; /* a bulk function answers COMMIT or DB: as DB */
    case LL_APPLY_DEFER:
        if (!bulk)
            return wait_expired ? LL_STEP_UNDO_DEAD_PREREQ : LL_STEP_UNDO_HOLD;
        break;
    case LL_APPLY_DEAD:
        if (!bulk)
            return LL_STEP_UNDO_DEAD;
        break;
    case LL_APPLY_DB:
        break;
    }
    /* LL_APPLY_DB, a value outside ll_apply, or a bulk answer other than COMMIT */
    if (fault == LL_FAULT_UNAVAILABLE)
        return LL_STEP_UNDO_BATCH;
    if (bulk)
        return LL_STEP_BULK_UNDO;
    return fault == LL_FAULT_INPUT ? LL_STEP_UNDO_DEAD_LEDGER : LL_STEP_UNDO_RETRY;
}

ll_commit_step ll_loop_commit_decide(const ll_commit_state *s, bool may_wait)
{
    if (s->in_flight && s->ended)
        return LL_COMMIT_TAKE_START; /* its outcome is taken even while blocked (a failure rewinds) */
    if (s->blocked)
        return LL_COMMIT_LEAVE;
    if (!s->in_flight)
        return s->owed ? LL_COMMIT_START : LL_COMMIT_LEAVE;
    bool full = s->staged >= s->max_staged || s->staged_bytes >= s->max_staged_bytes;
    return full && may_wait ? LL_COMMIT_WAIT_START : LL_COMMIT_LEAVE;
}

ll_replay_step ll_replay_decide(bool answered_before, bool recorded, bool same_bytes)
{
    if (!answered_before)
        return LL_REPLAY_APPLY;
    if (recorded)
        return same_bytes ? LL_REPLAY_RESTATE : LL_REPLAY_APPLY;
    return LL_REPLAY_AS_REPLAY;
}

const char *ll_replay_outcome(ll_replay_step s, const char *outcome)
{
    if (s == LL_REPLAY_AS_REPLAY && outcome && strcmp(outcome, "REJECTED") == 0)
        return "REPLAY";
    return outcome;
}

ll_gap_verdict ll_gap_decide(int64_t from, int64_t lo, int64_t hi)
{
    if (from < lo)
        return LL_GAP_BELOW;
    if (from > hi)
        return LL_GAP_ABOVE;
    return LL_GAP_NONE;
}

bool ll_gap_accepted(int64_t base, int64_t acc_from, int64_t acc_to)
{
    return acc_from <= base && base < acc_to;
}

bool ll_txn_full_decide(bool open, int64_t db_batch_max, int msgs, size_t outs, int savepoints)
{
    if (!open)
        return false;
    return db_batch_max == 1 ? msgs >= 1 || outs > 0 : savepoints >= db_batch_max;
}
