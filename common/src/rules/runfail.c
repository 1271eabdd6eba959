/*
 * runfail.c - the run (non-partition) failure report: which failures a caller may declare.
 *
 * docs/contract.md §5.6 check 1: exactly five (expectedStatus, failStatus) pairs are allowed; any
 * other pair is 422 FAIL_TRANSITION_NOT_ALLOWED, decided before the run is even looked up.
 * The later checks (replay when already failStatus, RUN_STATUS_MISMATCH) compare statuses the
 * caller reads under the run lock; the services need no rule of their own for them (the run-event
 * ladder, run_event.c), the operator's `loadctl end-run` has ll_end_run_decide below.
 *
 * PAIRS is the one table of the five pairs: the service's check, the operator's command and the
 * inverse lookup all read it.
 */
#include "ll/rules.h"

/* §5.6: the five allowed (expectedStatus, failStatus) pairs, in pipeline order. */
static const struct {
    ll_run_status expected, fail;
} PAIRS[] = {
    {LL_RUN_CREATED, LL_RUN_FAILED_MANIFEST},
    {LL_RUN_EXTRACTING, LL_RUN_FAILED_EXTRACT},
    {LL_RUN_STAGE_VALIDATING, LL_RUN_FAILED_STAGE_VALIDATION},
    {LL_RUN_STAGING_VALIDATED, LL_RUN_FAILED_PUBLISH},
    {LL_RUN_PUBLISHED, LL_RUN_FAILED_TARGET_VALIDATION},
};
#define N_PAIRS (sizeof PAIRS / sizeof PAIRS[0])

ll_run_status ll_fail_status_for(ll_run_status expected)
{
    for (size_t i = 0; i < N_PAIRS; i++)
        if (PAIRS[i].expected == expected)
            return PAIRS[i].fail;
    return LL_RUN_STATUS_COUNT;
}

ll_run_status ll_fail_expected_for(ll_run_status fail)
{
    for (size_t i = 0; i < N_PAIRS; i++)
        if (PAIRS[i].fail == fail)
            return PAIRS[i].expected;
    return LL_RUN_STATUS_COUNT;
}

/* §5.6: true for exactly the five allowed (expected, fail) pairs. */
bool ll_fail_pair_allowed(ll_run_status expected, ll_run_status fail)
{
    ll_run_status f = ll_fail_status_for(expected);
    return f != LL_RUN_STATUS_COUNT && f == fail;
}

/* See rules.h: §5.6 checks 1-4 on the pair the operator names, or the run's own pair. */
ll_end_run ll_end_run_decide(ll_run_status want, bool found, ll_run_status current,
                             ll_run_status *expected_out, ll_run_status *fail_out)
{
    ll_run_status expected = LL_RUN_STATUS_COUNT, fail = LL_RUN_STATUS_COUNT;
    ll_end_run d;
    if (want != LL_RUN_STATUS_COUNT && ll_fail_status_for(want) == LL_RUN_STATUS_COUNT) {
        d = LL_END_RUN_NOT_ALLOWED;
    } else if (!found) {
        d = LL_END_RUN_NOT_FOUND;
    } else {
        if (want != LL_RUN_STATUS_COUNT)
            expected = want;
        else if (ll_fail_status_for(current) != LL_RUN_STATUS_COUNT)
            expected = current;
        else
            expected = ll_fail_expected_for(current);
        fail = ll_fail_status_for(expected);
        if (fail != LL_RUN_STATUS_COUNT && current == fail)
            d = LL_END_RUN_ALREADY;
        else if (fail != LL_RUN_STATUS_COUNT && current == expected)
            d = LL_END_RUN_FAIL;
        else
            d = LL_END_RUN_STATUS_MISMATCH;
    }
    if (d != LL_END_RUN_FAIL && d != LL_END_RUN_ALREADY)
        expected = fail = LL_RUN_STATUS_COUNT;
    if (expected_out)
        *expected_out = expected;
    if (fail_out)
        *fail_out = fail;
    return d;
}
