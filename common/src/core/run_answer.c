/*
 * run_answer.c - a run-level event's decision turned into its step (ll/run_answer.h): the one
 * function the events of docs/contract.md §5.6-§5.10, §5.13 and §5.14 share, over their tables.
 */
#include "ll/run_answer.h"

#include <stdio.h>

ll_apply ll_run_event_act(const ll_run_answer table[LL_RUN_EVENT_COUNT], ll_run_event ev,
                          const ll_run_event_in *in, const ll_run_event_ops *ops, void *ctx,
                          ll_apply_out *out)
{
    if ((int)ev < 0 || ev >= LL_RUN_EVENT_COUNT)
        ev = LL_RUN_EVENT_STATUS_MISMATCH;
    const ll_run_answer *row = &table[ev];
    switch (row->act) {
    case LL_RUN_ACT_APPLY:
        return ops->apply(ctx, out);
    case LL_RUN_ACT_DEFER:
        snprintf(out->reason, sizeof out->reason, "run is %s; waiting for %s",
                 ll_run_status_name(in->current), ll_run_status_name(in->apply));
        return LL_APPLY_DEFER;
    case LL_RUN_ACT_DEFER_RUN:
        return LL_APPLY_DEFER;
    case LL_RUN_ACT_REPLY:
    default:
        break;
    }
    const char *rs = row->status == LL_RUN_RS_CURRENT ? ll_run_status_name(in->current)
                     : row->status == LL_RUN_RS_DONE  ? ll_run_status_name(in->done)
                                                      : NULL;
    out->reply = ops->reply(ctx, row, rs);
    return LL_APPLY_ROLLBACK;
}
