/*
 * verify.c - the decisions of `loadctl verify` (see ll/verify.h): the event → run status table
 * of docs/contract.md §3.1 and §8, and the accounting of one input offset (docs/contract.md K§3).
 */
#include <string.h>

#include "ll/rules.h"
#include "ll/verify.h"

/* Events written by exactly one run transition, with its target (docs/contract.md §8). */
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

static bool is_replay(const ll_answer *a)
{
    return !a->dead_letter && a->outcome && strcmp(a->outcome, "REPLAY") == 0;
}

static bool same_str(const char *x, const char *y)
{
    return x == y || (x && y && strcmp(x, y) == 0);
}

/* A second fresh answer of a restored ledger agrees: the same kind, outcome, code and grant. */
static bool fresh_agrees(const ll_answer *o, const ll_answer *r)
{
    if (o->dead_letter || r->dead_letter)
        return o->dead_letter && r->dead_letter;
    return same_str(o->outcome, r->outcome) && same_str(o->code, r->code) && o->granted == r->granted;
}

/*
 * A REPLAY restates the original answer: never of a dead letter (the ledger never held it); of
 * a REJECTED one only with its code (a refusal replayed names the same refusal, docs/contract.md §5.1,
 * §5.2); of an applied one (ACCEPTED, or REPLAY when every answer is one) with any code (a
 * notable replay's, e.g. RUN_STATUS_MISMATCH of a publish claim past PUBLISHING, §5.13). In
 * every case it grants nothing the original refused. runStatus and partitionStatus are the
 * state at answer time and may have moved on: not compared.
 */
static bool replay_agrees(const ll_answer *o, const ll_answer *r)
{
    if (o->dead_letter)
        return false;
    if (r->granted == LL_GRANT_YES && o->granted == LL_GRANT_NO)
        return false;
    if (o->outcome && strcmp(o->outcome, "REJECTED") == 0)
        return o->code && same_str(o->code, r->code);
    return true;
}

/* A refusal or a dead letter given again as it was (the same kind, code and grant): a replay's
 * restatement, not a second answer (docs/design.md §5, "A replay restates"). */
static bool restates(const ll_answer *o, const ll_answer *r)
{
    bool refusal = o->dead_letter || (o->outcome && strcmp(o->outcome, "REJECTED") == 0);
    return refusal && fresh_agrees(o, r);
}

ll_input_verdict ll_input_judge_answers(const ll_answer *a, size_t n, bool restored)
{
    if (!a || n == 0)
        return LL_INPUT_MISSING;
    /* the original: the first answer that is no REPLAY, else the first; a later one that restates
     * a refusal or dead letter is no second answer */
    const ll_answer *orig = NULL, *second = NULL;
    size_t fresh = 0;
    for (size_t i = 0; i < n; i++)
        if (!is_replay(&a[i]) && !(orig && restates(orig, &a[i]))) {
            if (fresh == 0)
                orig = &a[i];
            else if (fresh == 1)
                second = &a[i];
            fresh++;
        }
    if (fresh > (restored ? 2u : 1u))
        return LL_INPUT_DUPLICATE;
    if (second && !fresh_agrees(orig, second))
        return LL_INPUT_CONTRADICTED;
    if (!orig)
        orig = &a[0];
    for (size_t i = 0; i < n; i++)
        if (&a[i] != orig && is_replay(&a[i]) && !replay_agrees(orig, &a[i]))
            return LL_INPUT_CONTRADICTED;
    return LL_INPUT_OK;
}

bool ll_chunk_accounted(bool file_row, const char *reply_outcome, bool dead_letter)
{
    if (file_row || dead_letter)
        return true;
    return reply_outcome && (strcmp(reply_outcome, "REJECTED") == 0 || strcmp(reply_outcome, "REPLAY") == 0);
}
