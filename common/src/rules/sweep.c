/*
 * sweep.c - the sweeper's decisions (docs/contract.md §7.1, §9): reissue or time out a run with stale
 * partitions; the unfinished partitions of a run that ended (§7.6); the start-up check of the recovery
 * settings. Pure functions.
 */
#include <stdio.h>

#include "ll/rules.h"

const char *const LL_RECOVERY_MODE_NAMES[] = {"FAIL", "REISSUE", NULL};

ll_stale_action ll_stale_decide(ll_recovery_mode mode, int max_attempts, const int *attempts,
                                const bool *retry, size_t n, const char **reason)
{
    bool exhausted = false, unclaimed = false;
    for (size_t i = 0; i < n; i++) {
        if (retry && retry[i])
            unclaimed = true;
        else if (attempts[i] >= max_attempts)
            exhausted = true;
    }
    if (mode == LL_RECOVERY_REISSUE && !exhausted && !unclaimed) {
        *reason = NULL;
        return LL_STALE_REISSUE;
    }
    if (mode == LL_RECOVERY_REISSUE && unclaimed && !exhausted)
        *reason = "REISSUE_NOT_CLAIMED";
    else
        *reason = mode == LL_RECOVERY_REISSUE ? "REISSUE_ATTEMPTS_EXHAUSTED" : "PARTITION_STALE";
    return LL_STALE_TIMEOUT;
}

bool ll_ended_partition_due(ll_run_status run, ll_part_status partition, int64_t idle_ms, int64_t ended_ms,
                            int64_t stale_ms)
{
    if (!ll_run_status_is_terminal(run) || run == LL_RUN_SUCCESS)
        return false; /* active runs are rules 1 and 2's; a SUCCESS run has no unfinished partition */
    if (partition != LL_PART_PENDING && partition != LL_PART_RUNNING && partition != LL_PART_RETRY)
        return false;
    if (ended_ms < 0 || ended_ms < stale_ms)
        return false; /* the run ended within recovery.stale: its siblings keep their status (§3.2) */
    return idle_ms < 0 || idle_ms >= stale_ms; /* a worker still reporting is left alone */
}

int ll_recovery_settings_check(int64_t stale_ms, int64_t extract_query_timeout_ms, int max_attempts,
                               char *err, size_t errlen)
{
    if (stale_ms <= extract_query_timeout_ms) {
        snprintf(err, errlen,
                 "recovery.stale (%lld ms) must exceed recovery.extract_query_timeout (%lld ms): heartbeats"
                 " are not refreshed while the Oracle query runs, so a shorter stale period would reissue"
                 " or time out healthy partitions",
                 (long long)stale_ms, (long long)extract_query_timeout_ms);
        return -1;
    }
    if (max_attempts < 1) {
        snprintf(err, errlen, "recovery.max_attempts must be at least 1");
        return -1;
    }
    return 0;
}
