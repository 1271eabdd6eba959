/*
 * run_event.c - the ladder of every run-level event (validation metrics, stage-validated,
 * success, run failure, publish result, validation start): how the run was found, then replay,
 * apply, defer or RUN_STATUS_MISMATCH from its locked status.
 *
 * docs/contract.md §5.6-§5.10, §5.14 and docs/contract.md K§6: topics are consumed by different services,
 * so an event can arrive before the one that takes its run to where it applies; it waits while
 * the run may still get there (ll_run_should_wait), then gets the contract's answer for the
 * status the run is in. Pure: the services read under the run lock and write what this decides.
 */
#include "ll/rules.h"

/* The found steps shared by every run-level event; APPLY means "locked: judge the status". */
static ll_run_event found_step(ll_run_found found)
{
    switch (found) {
    case LL_RUN_FOUND_LOCKED:
        return LL_RUN_EVENT_APPLY;
    case LL_RUN_FOUND_REFUSED:
        return LL_RUN_EVENT_RUN_NOT_FOUND;
    case LL_RUN_FOUND_NONE:
    default:
        return LL_RUN_EVENT_DEFER_RUN;
    }
}

/* See rules.h: found, replay, apply, defer, mismatch, in that order. */
ll_run_event ll_run_event_decide(const ll_run_event_in *in)
{
    ll_run_event f = found_step(in->found);
    if (f != LL_RUN_EVENT_APPLY)
        return f;
    if (in->done != LL_RUN_STATUS_COUNT && in->current == in->done)
        return LL_RUN_EVENT_REPLAY;
    if (in->current == in->apply)
        return LL_RUN_EVENT_APPLY;
    if (ll_run_should_wait(in->current, in->apply, in->wait_expired))
        return LL_RUN_EVENT_DEFER;
    return LL_RUN_EVENT_STATUS_MISMATCH;
}

/* See rules.h: §5.14, the token before the status. */
ll_run_event ll_publish_result_decide(const ll_run_event_in *in, bool token_stored, bool token_matches)
{
    ll_run_event f = found_step(in->found);
    if (f != LL_RUN_EVENT_APPLY)
        return f;
    if (!token_stored || !token_matches) {
        if (!token_stored && ll_run_should_wait(in->current, in->apply, in->wait_expired))
            return LL_RUN_EVENT_DEFER;
        return LL_RUN_EVENT_TOKEN_MISMATCH;
    }
    if (in->done != LL_RUN_STATUS_COUNT && in->current == in->done)
        return LL_RUN_EVENT_REPLAY;
    if (in->current == in->apply)
        return LL_RUN_EVENT_APPLY;
    return LL_RUN_EVENT_STATUS_MISMATCH;
}

/* See rules.h: §5.7 checks 1-3. */
ll_vstart ll_validation_start_decide(ll_run_found found, ll_run_status current, bool dispatch_found,
                                     bool dispatch_matches, bool wait_expired)
{
    switch (found_step(found)) {
    case LL_RUN_EVENT_RUN_NOT_FOUND:
        return LL_VSTART_RUN_NOT_FOUND;
    case LL_RUN_EVENT_DEFER_RUN:
        return LL_VSTART_DEFER_RUN;
    default:
        break;
    }
    /* no such dispatch yet and the run still extracting: its completion (from the chunks' topic)
     * is not applied yet, as after a database loss when the chunks are read again after this */
    if (!dispatch_found && ll_run_should_wait(current, LL_RUN_EXTRACTED_VALIDATED, wait_expired))
        return LL_VSTART_DEFER;
    if (!dispatch_found || !dispatch_matches)
        return LL_VSTART_DISPATCH_MISMATCH;
    return LL_VSTART_ACK;
}

/* See rules.h: §5.7 step 4, one winner per run, recorded in load_validation_start. */
ll_vstart_answer ll_validation_start_answer(bool won, bool same_winner, ll_run_status locked, bool acked_now)
{
    if (won)
        return LL_VSTART_WON;
    if (same_winner && locked == LL_RUN_STAGE_VALIDATING)
        return LL_VSTART_WINNER_AGAIN;
    return acked_now ? LL_VSTART_LOST_ACKED : LL_VSTART_LOST_REPLAY;
}
