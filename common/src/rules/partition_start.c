/*
 * partition_start.c - the status a manifest's partition starts in (docs/contract.md §3.2, §5.2 step 6):
 * an empty partition is SUCCESS at once. Pure.
 */
#include "ll/rules.h"

/* See rules.h: expected_rows = 0 → SUCCESS, anything else PENDING. */
ll_part_status ll_partition_initial_status(int64_t expected_rows)
{
    return expected_rows == 0 ? LL_PART_SUCCESS : LL_PART_PENDING;
}
