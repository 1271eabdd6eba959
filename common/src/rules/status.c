/*
 * status.c - the run and partition state names and their classification.
 *
 * Contract §3.1 (run status, active/terminal classes) and §3.2 (partition status). The names
 * are the exact strings stored in load_run.status and load_partition.status; the order of the
 * tables follows the enums in ll/status.h. Pure: static tables, no state.
 */
#include "ll/status.h"

#include <stddef.h>
#include <string.h>

static const char *const run_names[LL_RUN_STATUS_COUNT] = {
    [LL_RUN_CREATED] = "CREATED",
    [LL_RUN_EXTRACTING] = "EXTRACTING",
    [LL_RUN_EXTRACTED_VALIDATED] = "EXTRACTED_VALIDATED",
    [LL_RUN_STAGE_VALIDATING] = "STAGE_VALIDATING",
    [LL_RUN_STAGING_VALIDATED] = "STAGING_VALIDATED",
    [LL_RUN_PUBLISHING] = "PUBLISHING",
    [LL_RUN_PUBLISHED] = "PUBLISHED",
    [LL_RUN_SUCCESS] = "SUCCESS",
    [LL_RUN_FAILED_MANIFEST] = "FAILED_MANIFEST",
    [LL_RUN_FAILED_EXTRACT] = "FAILED_EXTRACT",
    [LL_RUN_FAILED_STAGE_VALIDATION] = "FAILED_STAGE_VALIDATION",
    [LL_RUN_FAILED_PUBLISH] = "FAILED_PUBLISH",
    [LL_RUN_PUBLISH_UNKNOWN] = "PUBLISH_UNKNOWN",
    [LL_RUN_FAILED_TARGET_VALIDATION] = "FAILED_TARGET_VALIDATION",
    [LL_RUN_FAILED_SNAPSHOT_EXPIRED] = "FAILED_SNAPSHOT_EXPIRED",
    [LL_RUN_TIMED_OUT] = "TIMED_OUT",
};

static const char *const part_names[LL_PART_STATUS_COUNT] = {
    [LL_PART_PENDING] = "PENDING", [LL_PART_RUNNING] = "RUNNING", [LL_PART_RETRY] = "RETRY",
    [LL_PART_SUCCESS] = "SUCCESS", [LL_PART_FAILED] = "FAILED",   [LL_PART_TIMED_OUT] = "TIMED_OUT",
};

/* Index of name in names[0..n), or -1. Exact, case-sensitive match (stored names). */
static int find_name(const char *const *names, int n, const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

/* §3.1. Returns the static stored name, or NULL for a value outside the enum. */
const char *ll_run_status_name(ll_run_status s)
{
    if ((int)s < 0 || s >= LL_RUN_STATUS_COUNT)
        return NULL;
    return run_names[s];
}

/* §3.1. Exact stored name (case-sensitive) to enum; 0, or -1 for NULL/unknown (out untouched). */
int ll_run_status_parse(const char *name, ll_run_status *out)
{
    int i = find_name(run_names, LL_RUN_STATUS_COUNT, name);
    if (i < 0 || out == NULL)
        return -1;
    *out = (ll_run_status)i;
    return 0;
}

/* §3.1 "Active": CREATED through PUBLISHED, plus PUBLISH_UNKNOWN (uq_load_run_active). */
bool ll_run_status_is_active(ll_run_status s)
{
    switch (s) {
    case LL_RUN_CREATED:
    case LL_RUN_EXTRACTING:
    case LL_RUN_EXTRACTED_VALIDATED:
    case LL_RUN_STAGE_VALIDATING:
    case LL_RUN_STAGING_VALIDATED:
    case LL_RUN_PUBLISHING:
    case LL_RUN_PUBLISHED:
    case LL_RUN_PUBLISH_UNKNOWN:
        return true;
    default:
        return false;
    }
}

/* §3.1: SUCCESS and the seven failure/timeout statuses. PUBLISH_UNKNOWN is not terminal. */
bool ll_run_status_is_terminal(ll_run_status s)
{
    switch (s) {
    case LL_RUN_SUCCESS:
    case LL_RUN_FAILED_MANIFEST:
    case LL_RUN_FAILED_EXTRACT:
    case LL_RUN_FAILED_STAGE_VALIDATION:
    case LL_RUN_FAILED_PUBLISH:
    case LL_RUN_FAILED_TARGET_VALIDATION:
    case LL_RUN_FAILED_SNAPSHOT_EXPIRED:
    case LL_RUN_TIMED_OUT:
        return true;
    default:
        return false;
    }
}

/* §3.2. Returns the static stored name, or NULL for a value outside the enum. */
const char *ll_part_status_name(ll_part_status s)
{
    if ((int)s < 0 || s >= LL_PART_STATUS_COUNT)
        return NULL;
    return part_names[s];
}

/* §3.2. Exact stored name (case-sensitive) to enum; 0, or -1 for NULL/unknown (out untouched). */
int ll_part_status_parse(const char *name, ll_part_status *out)
{
    int i = find_name(part_names, LL_PART_STATUS_COUNT, name);
    if (i < 0 || out == NULL)
        return -1;
    *out = (ll_part_status)i;
    return 0;
}
