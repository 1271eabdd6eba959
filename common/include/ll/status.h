/*
 * status.h - the run and partition state names of the contract (ledger-contract.md §3).
 * Pure: no I/O. The names are the strings stored in the ledger's status columns.
 */
#ifndef LL_STATUS_H
#define LL_STATUS_H

#include <stdbool.h>

/* Run status (contract §3.1, check ck_load_run_status). */
typedef enum ll_run_status {
    LL_RUN_CREATED = 0,
    LL_RUN_EXTRACTING,
    LL_RUN_EXTRACTED_VALIDATED,
    LL_RUN_STAGE_VALIDATING,
    LL_RUN_STAGING_VALIDATED,
    LL_RUN_PUBLISHING,
    LL_RUN_PUBLISHED,
    LL_RUN_SUCCESS,
    LL_RUN_FAILED_MANIFEST,
    LL_RUN_FAILED_EXTRACT,
    LL_RUN_FAILED_STAGE_VALIDATION,
    LL_RUN_FAILED_PUBLISH,
    LL_RUN_PUBLISH_UNKNOWN,
    LL_RUN_FAILED_TARGET_VALIDATION,
    LL_RUN_FAILED_SNAPSHOT_EXPIRED,
    LL_RUN_TIMED_OUT,
    LL_RUN_STATUS_COUNT
} ll_run_status;

/* Partition status (contract §3.2, check ck_load_partition_status). */
typedef enum ll_part_status {
    LL_PART_PENDING = 0,
    LL_PART_RUNNING,
    LL_PART_RETRY,
    LL_PART_SUCCESS,
    LL_PART_FAILED,
    LL_PART_TIMED_OUT,
    LL_PART_STATUS_COUNT
} ll_part_status;

/* The stored name of a run status (static string; NULL for a value outside the enum). */
const char *ll_run_status_name(ll_run_status s);
/* Parses a stored name. Returns 0, or -1 for an unknown name. */
int ll_run_status_parse(const char *name, ll_run_status *out);
/* Active statuses block a new run of the same job/business key (contract §3.1, uq_load_run_active). */
bool ll_run_status_is_active(ll_run_status s);
/* SUCCESS and the seven failure/timeout statuses (contract §3.1 classification). */
bool ll_run_status_is_terminal(ll_run_status s);

/* The stored name of a partition status (static string; NULL for a value outside the enum). */
const char *ll_part_status_name(ll_part_status s);
/* Parses a stored name. Returns 0, or -1 for an unknown name. */
int ll_part_status_parse(const char *name, ll_part_status *out);

#endif
