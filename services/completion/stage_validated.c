/*
 * stage_validated.c - the staging validation asks to move the run to STAGING_VALIDATED
 * (docs/contract.md §5.9): only with at least one STAGING metric stored and none FAIL; staging_count
 * from the STAGE_COUNT metric when its value is all digits. A run still on its way to
 * STAGE_VALIDATING defers the request until loop.prerequisite_wait is over; then, like any other
 * status, it is answered stageValidated=false with reasons ["RUN_STATUS <status>"] (§5.9 step 3).
 * A run in STAGE_VALIDATING with no STAGING metric stored defers it too (the metrics come on
 * another topic, and after a replay or a database loss may be read after it: docs/design.md §6);
 * after the wait the gate answers NO_METRICS.
 */
#include <stdio.h>

#include "completion.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/rules.h"

static const ll_stmt ST_STAGE_VALIDATED = {
    "stagev_cas",
    "UPDATE nifi_ops.load_run SET status = 'STAGING_VALIDATED', staging_count = $2::bigint,"
    " heartbeat_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status = 'STAGE_VALIDATING'",
    2};

static json_t *outcome(const ll_msg *m, const char *run_id, const char *result, const char *code,
                       const char *run_status, bool validated, const ll_strlist *reasons)
{
    json_t *r = ll_reply_new(m, run_id, NULL, result, code, NULL, run_status, NULL);
    json_object_set_new(r, "stageValidated", json_boolean(validated));
    json_object_set_new(r, "reasons", reasons ? reasons_json(reasons) : json_array());
    return r;
}

static const gated_step STEP = {"STAGING", "STAGE_COUNT", "STAGE_VALIDATED", &ST_STAGE_VALIDATED};

static json_t *passed_reply(const ll_msg *m, const char *run_id, const ll_strlist *reasons)
{
    (void)reasons;
    return outcome(m, run_id, "ACCEPTED", NULL, "STAGING_VALIDATED", true, NULL);
}

static json_t *blocked_reply(const ll_msg *m, const char *run_id, const ll_strlist *reasons)
{
    return outcome(m, run_id, "REJECTED", "GATE_BLOCKED", "STAGE_VALIDATING", false, reasons);
}

/* §5.9 step 3: stageValidated=false, reasons ["RUN_STATUS <status>"]. */
static void mismatch_reply(const ll_msg *m, const char *run_id, ll_run_status current, ll_apply_out *out)
{
    ll_strlist reasons = {0};
    ll_strlist_addf(&reasons, "RUN_STATUS %s", ll_run_status_name(current));
    out->reply =
        outcome(m, run_id, "REJECTED", "RUN_STATUS_MISMATCH", ll_run_status_name(current), false, &reasons);
    ll_strlist_clear(&reasons);
}

ll_apply completion_apply_stage_validated(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    char run_id[37];
    if (!ll_need_uuid(out, m->value, "runId", run_id))
        return LL_APPLY_DEAD;
    ll_run_row run;
    ll_run_found found = LL_RUN_FOUND_NONE;
    ll_db_rc rc = lock_run_event(db, run_id, &run, &found, out);
    if (rc != LL_DB_OK)
        return ll_apply_of_db(rc);
    ll_run_event_in in = {found, run.status, LL_RUN_STAGE_VALIDATING, LL_RUN_STAGING_VALIDATED,
                          m->wait_expired};
    ll_apply a = LL_APPLY_ROLLBACK;
    switch (ll_run_event_decide(&in)) {
    case LL_RUN_EVENT_DEFER_RUN:
        a = LL_APPLY_DEFER;
        break;
    case LL_RUN_EVENT_RUN_NOT_FOUND:
        out->reply = outcome(m, run_id, "REJECTED", "RUN_NOT_FOUND", NULL, false, NULL);
        break;
    case LL_RUN_EVENT_REPLAY:
        out->reply = outcome(m, run_id, "REPLAY", NULL, "STAGING_VALIDATED", true, NULL);
        break;
    case LL_RUN_EVENT_APPLY:
        a = gated_verdict(db, m, run_id, &STEP, -1, passed_reply, blocked_reply, out);
        break;
    case LL_RUN_EVENT_DEFER:
        defer_reason(run.status, LL_RUN_STAGE_VALIDATING, out);
        a = LL_APPLY_DEFER;
        break;
    case LL_RUN_EVENT_STATUS_MISMATCH:
    case LL_RUN_EVENT_TOKEN_MISMATCH:
    default:
        mismatch_reply(m, run_id, run.status, out);
        break;
    }
    ll_run_row_clear(&run);
    return a;
}
