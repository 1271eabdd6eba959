/*
 * run_event.c - the start of every run-level event (validation, publish result, success, run
 * failure): lock the run row (contract §2.8), or say why the event cannot be judged yet.
 */
#include <stdio.h>

#include "completion.h"

run_lookup lock_run_event(ll_db *db, const char *run_id, ll_run_row *run, ll_apply_out *out)
{
    if (ll_run_lock(db, run_id, run) != LL_DB_OK)
        return RUN_DBERR;
    if (run->found)
        return RUN_FOUND;
    bool rejected = false;
    if (ll_run_request_rejected(db, run_id, &rejected) != LL_DB_OK)
        return RUN_DBERR;
    if (rejected)
        return RUN_REFUSED;
    snprintf(out->reason, sizeof out->reason, "run %s not in the ledger yet", run_id);
    return RUN_DEFER;
}

ll_apply defer_until(ll_run_status current, ll_run_status needed, ll_apply_out *out)
{
    snprintf(out->reason, sizeof out->reason, "run is %s; waiting for %s", ll_run_status_name(current),
             ll_run_status_name(needed));
    return LL_APPLY_DEFER;
}
