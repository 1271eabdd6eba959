/*
 * verify.c - the decisions of `loadctl verify` (see ll/verify.h): the event → run status table
 * of contract §3.1 and §8, and the accounting of one input offset (kafka-edition.md §3).
 */
#include <string.h>

#include "ll/rules.h"
#include "ll/verify.h"

/* Events written by exactly one run transition, with its target (contract §8). */
static const struct {
    const char *name;
    ll_run_status to;
} FIXED[] = {
    {"RUN_STARTED", LL_RUN_CREATED},
    {"MANIFEST_CREATED", LL_RUN_EXTRACTING},
    {"MANIFEST_INVALID", LL_RUN_FAILED_MANIFEST},
    {"EXTRACT_VALIDATED", LL_RUN_EXTRACTED_VALIDATED},
    {"STAGE_VALIDATION_STARTED", LL_RUN_STAGE_VALIDATING},
    {"STAGE_VALIDATED", LL_RUN_STAGING_VALIDATED},
    {"PUBLISH_STARTED", LL_RUN_PUBLISHING},
    {"PUBLISH_FINISHED", LL_RUN_PUBLISHED},
    {"PUBLISH_UNKNOWN", LL_RUN_PUBLISH_UNKNOWN},
    {"RUN_SUCCESS", LL_RUN_SUCCESS},
    {"RUN_TIMED_OUT", LL_RUN_TIMED_OUT},
};
#define N_FIXED (sizeof FIXED / sizeof FIXED[0])

const char *const LL_STATUS_EVENT_NAMES[] = {"RUN_STARTED",
                                             "MANIFEST_CREATED",
                                             "MANIFEST_INVALID",
                                             "EXTRACT_VALIDATED",
                                             "STAGE_VALIDATION_STARTED",
                                             "STAGE_VALIDATED",
                                             "PUBLISH_STARTED",
                                             "PUBLISH_FINISHED",
                                             "PUBLISH_UNKNOWN",
                                             "RUN_SUCCESS",
                                             "RUN_TIMED_OUT",
                                             "RUN_FAILED",
                                             "PUBLISH_UNKNOWN_RESOLVED",
                                             NULL};

/* RUN_FAILED: §5.6 names its target, §5.14 carries the publish token, §5.4/§5.5 a partition. */
static ll_event_effect run_failed(const ll_status_event *e, ll_run_status *out)
{
    if (e->to)
        return ll_run_status_parse(e->to, out) == 0 ? LL_EV_SETS : LL_EV_UNKNOWN;
    if (e->has_publish_token) {
        *out = LL_RUN_FAILED_PUBLISH;
        return LL_EV_SETS;
    }
    if (e->partition_id) {
        *out = ll_is_snapshot_error(e->error_code, e->error_class) ? LL_RUN_FAILED_SNAPSHOT_EXPIRED
                                                                   : LL_RUN_FAILED_EXTRACT;
        return LL_EV_SETS;
    }
    return LL_EV_UNKNOWN;
}

ll_event_effect ll_event_run_status(const ll_status_event *e, ll_run_status *out)
{
    if (!e || !e->name)
        return LL_EV_NONE;
    for (size_t i = 0; i < N_FIXED; i++)
        if (strcmp(e->name, FIXED[i].name) == 0) {
            *out = FIXED[i].to;
            return LL_EV_SETS;
        }
    if (strcmp(e->name, "RUN_FAILED") == 0)
        return run_failed(e, out);
    if (strcmp(e->name, "PUBLISH_UNKNOWN_RESOLVED") == 0) {
        /* §5.15: the operator resolves to PUBLISHED or FAILED_PUBLISH, nothing else */
        if (e->resolution &&
            (strcmp(e->resolution, "PUBLISHED") == 0 || strcmp(e->resolution, "FAILED_PUBLISH") == 0))
            return ll_run_status_parse(e->resolution, out) == 0 ? LL_EV_SETS : LL_EV_UNKNOWN;
        return LL_EV_UNKNOWN;
    }
    return LL_EV_NONE;
}

int ll_run_status_implied(const ll_status_event *ev, size_t n, ll_run_status *out)
{
    for (size_t i = n; i-- > 0;) {
        ll_run_status s;
        ll_event_effect eff = ll_event_run_status(&ev[i], &s);
        if (eff == LL_EV_SETS) {
            *out = s;
            return 0;
        }
        if (eff == LL_EV_UNKNOWN)
            return -1;
    }
    return 1;
}

ll_input_verdict ll_input_judge(long replies, long dead_letters)
{
    long total = (replies > 0 ? replies : 0) + (dead_letters > 0 ? dead_letters : 0);
    return total == 1 ? LL_INPUT_OK : total == 0 ? LL_INPUT_MISSING : LL_INPUT_DUPLICATE;
}

ll_input_verdict ll_input_judge_answers(const ll_answer *a, size_t n, bool restored)
{
    (void)a;
    (void)restored;
    return ll_input_judge((long)n, 0); /* every answer counts (to be replaced) */
}

bool ll_chunk_accounted(bool file_row, const char *reply_outcome, bool dead_letter)
{
    if (file_row || dead_letter)
        return true;
    return reply_outcome && (strcmp(reply_outcome, "REJECTED") == 0 || strcmp(reply_outcome, "REPLAY") == 0);
}
