/*
 * runfail.c - the run (non-partition) failure report: which failures a caller may declare.
 *
 * docs/contract.md §5.6 check 1: exactly five (expectedStatus, failStatus) pairs are allowed; any
 * other pair is 422 FAIL_TRANSITION_NOT_ALLOWED, decided before the run is even looked up.
 * The later checks (replay when already failStatus, RUN_STATUS_MISMATCH) compare statuses the
 * caller reads under the run lock and need no rule of their own.
 */
#include "ll/rules.h"

/* §5.6: true for exactly the five allowed (expected, fail) pairs. */
bool ll_fail_pair_allowed(ll_run_status expected, ll_run_status fail)
{
    switch (expected) {
    case LL_RUN_CREATED:
        return fail == LL_RUN_FAILED_MANIFEST;
    case LL_RUN_EXTRACTING:
        return fail == LL_RUN_FAILED_EXTRACT;
    case LL_RUN_STAGE_VALIDATING:
        return fail == LL_RUN_FAILED_STAGE_VALIDATION;
    case LL_RUN_STAGING_VALIDATED:
        return fail == LL_RUN_FAILED_PUBLISH;
    case LL_RUN_PUBLISHED:
        return fail == LL_RUN_FAILED_TARGET_VALIDATION;
    default:
        return false;
    }
}
