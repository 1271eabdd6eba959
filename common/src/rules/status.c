/*
 * status.c - the run and partition state names and their classification.
 *
 * docs/contract.md §3.1 (run status, active/terminal classes) and §3.2 (partition status). The names
 * are the exact strings stored in load_run.status and load_partition.status; the tables are
 * expansions of LL_RUN_STATUSES and LL_PART_STATUSES (ll/status.h). Pure: static tables, no state.
 */
#include "ll/status.h"

#include <stddef.h>
#include <string.h>

#define RUN_NAME_(name, active, terminal, rank, alert) [LL_RUN_##name] = #name,
static const char *const run_names[LL_RUN_STATUS_COUNT] = {LL_RUN_STATUSES(RUN_NAME_)};
#undef RUN_NAME_

#define PART_NAME_(name) [LL_PART_##name] = #name,
static const char *const part_names[LL_PART_STATUS_COUNT] = {LL_PART_STATUSES(PART_NAME_)};
#undef PART_NAME_

/* The classes of each run status, from LL_RUN_STATUSES. */
#define RUN_CLASS_(name, active, terminal, rank, alert) [LL_RUN_##name] = {active, terminal, alert, rank},
static const struct {
    bool active, terminal, alert;
    int rank;
} run_classes[LL_RUN_STATUS_COUNT] = {LL_RUN_STATUSES(RUN_CLASS_)};
#undef RUN_CLASS_

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
    return (int)s >= 0 && s < LL_RUN_STATUS_COUNT && run_classes[s].active;
}

/* §3.1: SUCCESS and the seven failure/timeout statuses. PUBLISH_UNKNOWN is not terminal. */
bool ll_run_status_is_terminal(ll_run_status s)
{
    return (int)s >= 0 && s < LL_RUN_STATUS_COUNT && run_classes[s].terminal;
}

/* §3.1: the forward path's position, -1 off it or outside the enum. */
int ll_run_status_rank(ll_run_status s)
{
    return (int)s >= 0 && s < LL_RUN_STATUS_COUNT ? run_classes[s].rank : -1;
}

/* §3.1, §7.4, §13: the statuses only alerted on (ALERT of LL_RUN_STATUSES), false outside the enum. */
bool ll_run_status_is_alert_only(ll_run_status s)
{
    return (int)s >= 0 && s < LL_RUN_STATUS_COUNT && run_classes[s].alert;
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
