/*
 * extract_fail.c - when a failed partition fails its run, and with what (docs/contract.md §5.4 step 10,
 * §5.5 step 5).
 *
 * A partition fails by the chunk gate (ROW_COUNT_MISMATCH) or by its worker's report. Either way
 * the partition is counted as failed; the run fails with it only while it is EXTRACTING (a run
 * already failed, timed out or past extraction keeps its status and its first error). The
 * services write the answer with a compare-and-set (WHERE status = 'EXTRACTING') under the run
 * lock, so the SQL decides nothing.
 */
#include "ll/rules.h"

/* §5.4 step 10: the gate's mismatch. */
bool ll_gate_run_failure(ll_run_status current, ll_run_fail *out)
{
    if (current != LL_RUN_EXTRACTING)
        return false;
    *out = (ll_run_fail){
        .status = LL_RUN_FAILED_EXTRACT, .stage = "PARTITION_GATE", .code = "ROW_COUNT_MISMATCH"};
    return true;
}

/* §5.5 step 5: the worker's report; a snapshot error names its own failure status. */
bool ll_pfail_run_failure(ll_run_status current, const char *error_stage, const char *error_code,
                          const char *error_class, ll_run_fail *out)
{
    if (current != LL_RUN_EXTRACTING)
        return false;
    *out =
        (ll_run_fail){.status = ll_is_snapshot_error(error_code, error_class) ? LL_RUN_FAILED_SNAPSHOT_EXPIRED
                                                                              : LL_RUN_FAILED_EXTRACT,
                      .stage = error_stage,
                      .code = error_code};
    return true;
}
