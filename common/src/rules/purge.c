/*
 * purge.c - the retention purge's decisions (`loadctl purge`, docs/ledger.md "Retention"): whether
 * its settings are acceptable and how many runs each transaction asks for. The SQL (which runs are
 * candidates, the locks, the deletes) is in tools/loadctl/purge.c and schemas/sql/0018_retention.sql.
 */
#include "ll/rules.h"

ll_purge_setting ll_purge_check(int64_t older_than_ms, long batch, long max_runs)
{
    if (older_than_ms < LL_PURGE_MIN_OLDER_THAN_MS)
        return LL_PURGE_PERIOD_TOO_SHORT;
    if (batch < 1 || batch > LL_PURGE_MAX_BATCH)
        return LL_PURGE_BATCH_OUT_OF_RANGE;
    if (max_runs < 1 || max_runs > LL_PURGE_MAX_MAX_RUNS)
        return LL_PURGE_MAX_RUNS_OUT_OF_RANGE;
    return LL_PURGE_SETTINGS_OK;
}

long ll_purge_next_batch(long batch, long max_runs, long purged, long last_got, long last_asked)
{
    if (batch < 1 || purged < 0 || purged >= max_runs)
        return 0;
    if (last_asked > 0 && last_got < last_asked)
        return 0;
    long left = max_runs - purged;
    return left < batch ? left : batch;
}
