/*
 * run_event.c - the start of every run-level event (validation, publish result, success, run
 * failure): lock the run row (docs/contract.md §2.8), or say why the event cannot be judged yet. What the
 * event then does is ll_run_event_decide's (common/src/rules/run_event.c).
 */
#include <stdio.h>

#include "completion.h"

ll_db_rc lock_run_event(ll_db *db, const char *run_id, ll_run_row *run, ll_run_found *found,
                        ll_apply_out *out)
{
    *found = LL_RUN_FOUND_NONE;
    ll_db_rc rc = ll_run_lock(db, run_id, run);
    if (rc != LL_DB_OK)
        return rc;
    if (run->found) {
        *found = LL_RUN_FOUND_LOCKED;
        return LL_DB_OK;
    }
    bool rejected = false;
    if ((rc = ll_run_request_rejected(db, run_id, &rejected)) != LL_DB_OK)
        return rc;
    if (rejected) {
        *found = LL_RUN_FOUND_REFUSED;
        return LL_DB_OK;
    }
    snprintf(out->reason, sizeof out->reason, "run %s not in the ledger yet", run_id);
    return LL_DB_OK;
}

void defer_reason(ll_run_status current, ll_run_status needed, ll_apply_out *out)
{
    snprintf(out->reason, sizeof out->reason, "run is %s; waiting for %s", ll_run_status_name(current),
             ll_run_status_name(needed));
}
