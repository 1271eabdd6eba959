/*
 * sweep.c - the sweeper's decisions (docs/contract.md §7.1, §9): reissue or time out a run with stale
 * partitions; the start-up check of the recovery settings. Pure functions.
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
