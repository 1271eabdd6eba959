/*
 * endrun.c - `loadctl end-run RUN --reason TEXT [--status EXPECTED]` (issue 41, item 4;
 * docs/contract.md §5.6, docs/runbooks.md "Run stuck in a status"): the operator ends a stuck run
 * with the contract's own failure transition for the status the run is in, the run failure a flow
 * would report (§5.6), so the ledger and NiFi see exactly what they would after that report.
 * One transaction:
 *
 *   --status given without a §5.6 pair                 -> exit 2 FAIL_TRANSITION_NOT_ALLOWED
 *                                                         (before the run is looked up, check 1)
 *   lock the run (FOR UPDATE)           missing         -> exit 2 RUN_NOT_FOUND
 *   the pair: (--status, its fail) or the run's own (its status as expected, else as fail)
 *   status = the pair's failStatus      already ended   -> exit 0, changed=false (check 3)
 *   status != the pair's expected       refused         -> exit 2 RUN_STATUS_MISMATCH (check 4)
 *   ll_run_fail_apply: CAS expected -> fail with error OPERATOR / RUN_ENDED_BY_OPERATOR / the reason,
 *   completed_at, heartbeat_at, version_no + 1; event RUN_FAILED (ERROR, message the reason,
 *   details {stage, from, to} and who: operatorRole, operatorUser, host; event_time is when)
 *
 * The decision is ll_end_run_decide (common/src/rules/runfail.c, the five pairs' one table) and
 * the write ll_run_fail_apply (common/src/core/ledger.c), both the completion service's too: the
 * transition has one owner. Statuses without a failure exit (EXTRACTED_VALIDATED, PUBLISHING,
 * PUBLISH_UNKNOWN) and the terminal ones other than the pair's failStatus are refused, with the
 * way out the contract does give printed as a hint.
 */
#include <stdio.h>
#include <string.h>

#include "ll/ledger.h"
#include "ll/rules.h"
#include "loadctl.h"

static const char USAGE[] =
    "usage: loadctl end-run RUN --reason TEXT [--status EXPECTED] [--json]\n\n"
    "Ends a stuck run with the contract's run failure for its status (docs/contract.md §5.6):\n"
    "  CREATED -> FAILED_MANIFEST            EXTRACTING -> FAILED_EXTRACT\n"
    "  STAGE_VALIDATING -> FAILED_STAGE_VALIDATION\n"
    "  STAGING_VALIDATED -> FAILED_PUBLISH   PUBLISHED -> FAILED_TARGET_VALIDATION\n"
    "error stage OPERATOR, error code RUN_ENDED_BY_OPERATOR, the reason as error message; event\n"
    "RUN_FAILED with your OS user and host. --status EXPECTED refuses unless the run is still in\n"
    "EXPECTED (guards against a run that moved since you looked). --reason (5..2000 chars) records\n"
    "why. Prints what NiFi's later inputs for the run will be answered.\n"
    "Refused: EXTRACTED_VALIDATED, PUBLISHING and PUBLISH_UNKNOWN (no failure exit in the contract)\n"
    "and runs already ended otherwise.\n"
    "Exit 0 ended or already so (changed=false), 1 usage, 2 RUN_NOT_FOUND, RUN_STATUS_MISMATCH,\n"
    "FAIL_TRANSITION_NOT_ALLOWED (--status has no failure exit) or INVALID_REASON, 3 database.\n";

/* The run's error triple (docs/contract.md §3.1 "to a failure"); the code is in ll/codes.h. */
#define END_STAGE "OPERATOR"
#define END_CODE  "RUN_ENDED_BY_OPERATOR"

/* The most lines nifi_sees() gives (EXTRACTING's). */
#define LC_SEES_MAX 8

/* The transaction's input and what it found. */
typedef struct endrun_tx {
    const char *run_id, *reason;
    ll_run_status want;     /* --status, or LL_RUN_STATUS_COUNT */
    ll_end_run outcome;     /* ll_end_run_decide's verdict (FAIL only once written) */
    ll_run_status current;  /* the run's status when locked */
    ll_run_status expected; /* the pair applied (FAIL, ALREADY) */
    ll_run_status fail;
    bool changed;
} endrun_tx;

static ll_db_rc endrun_body(ll_db *db, void *arg)
{
    endrun_tx *t = arg;
    t->changed = false;
    ll_run_row run;
    ll_db_rc rc = ll_run_lock(db, t->run_id, &run);
    if (rc != LL_DB_OK)
        return rc;
    t->current = run.found ? run.status : LL_RUN_STATUS_COUNT;
    t->outcome = ll_end_run_decide(t->want, run.found, run.status, &t->expected, &t->fail);
    ll_run_row_clear(&run);
    if (t->outcome != LL_END_RUN_FAIL)
        return LL_DB_ROLLBACK;
    json_t *who = lc_audit_details();
    ll_run_failure f = {.run_id = t->run_id,
                        .expected = t->expected,
                        .fail = t->fail,
                        .stage = END_STAGE,
                        .code = END_CODE,
                        .message = t->reason,
                        .extra = who};
    rc = ll_run_fail_apply(db, &f, &t->changed);
    json_decref(who);
    if (rc == LL_DB_OK && !t->changed) /* impossible under the run lock: refuse, write nothing */
        return t->outcome = LL_END_RUN_STATUS_MISMATCH, LL_DB_ROLLBACK;
    return rc;
}

/* What NiFi's later inputs for a run that went expected -> fail are answered (the services'
 * answers to a run in fail, docs/contract.md §5): up to LC_SEES_MAX static strings into out[] (the
 * first in a static buffer: one call at a time), the count. */
static int nifi_sees(ll_run_status expected, ll_run_status fail, const char *out[LC_SEES_MAX])
{
    static char replay[160];
    int n = 0;
    snprintf(
        replay, sizeof replay,
        "a run failure (%s, %s) from the flow: REPLAY, changed=false (as if its own report were applied)",
        ll_run_status_name(expected), ll_run_status_name(fail));
    out[n++] = replay;
    if (expected == LL_RUN_CREATED)
        out[n++] = "a manifest: REJECTED RUN_STATUS_MISMATCH (no partition is created)";
    if (expected == LL_RUN_EXTRACTING) {
        out[n++] = "a partition claim: not claimed (the worker must not query the source)";
        out[n++] =
            "a chunk of a still-current claim: recorded for cleanup, not judged (no partition SUCCESS)";
        out[n++] = "a partition failure: the partition fails, the run stays as it is";
        out[n++] = "a reissue command still PENDING in the outbox: still delivered, its claim not granted";
    }
    out[n++] = "any other run input (validation start, metrics, stage-validated, publish claim or result, "
               "success): RUN_STATUS_MISMATCH naming the run's new status";
    out[n++] = "a new run of the same job and business key: admitted (this run is no longer active)";
    return n;
}

/* The way out the contract gives a status end-run refuses (a hint), or NULL. */
static const char *refusal_hint(ll_run_status s)
{
    switch (s) {
    case LL_RUN_EXTRACTED_VALIDATED:
        return "EXTRACTED_VALIDATED has no failure exit (§3.1): get the validation started (its VALIDATE_RUN "
               "dispatch: loadctl show, loadctl resend), then end it from STAGE_VALIDATING";
    case LL_RUN_PUBLISHING:
        return "PUBLISHING has no failure exit but the publish result's (§5.14): the sweeper makes it "
               "PUBLISH_UNKNOWN after recovery.publish_stale, then resolve-publish-unknown";
    case LL_RUN_PUBLISH_UNKNOWN:
        return "PUBLISH_UNKNOWN is resolved, not failed: loadctl resolve-publish-unknown (§5.15)";
    case LL_RUN_SUCCESS:
        return "the run succeeded: a terminal status is never left";
    default:
        return ll_run_status_is_terminal(s) ? "the run has already ended: a terminal status is never left"
                                            : NULL;
    }
}

/* Checks the arguments: LC_USAGE for a malformed command line; LC_REFUSED for a reason the
 * contract refuses (INVALID_REASON) or a --status without a failure exit
 * (FAIL_TRANSITION_NOT_ALLOWED, §5.6 check 1, before the run is looked up); else LC_CONTINUE. */
static int check_args(const lc_opts *o, const char *run, char run_id[37], const char *status,
                      ll_run_status *want, const char *reason)
{
    if (strlen(run) > 64 || ll_uuid_canonical(run, run_id) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "RUN must be a run id (UUID)");
    *want = LL_RUN_STATUS_COUNT;
    if (status && (strlen(status) > 40 || ll_run_status_parse(status, want) != 0))
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--status must be a run status (docs/contract.md §3.1)");
    int rc = lc_check_reason(o, reason, "why the run is ended");
    if (rc != LC_CONTINUE)
        return rc;
    if (*want != LL_RUN_STATUS_COUNT && ll_fail_status_for(*want) == LL_RUN_STATUS_COUNT)
        return lc_fail(
            o, LC_REFUSED, "FAIL_TRANSITION_NOT_ALLOWED", json_pack("{s:s}", "expectedStatus", status),
            "%s has no failure exit (docs/contract.md §5.6: CREATED, EXTRACTING, STAGE_VALIDATING, "
            "STAGING_VALIDATED, PUBLISHED)",
            status);
    return LC_CONTINUE;
}

/* Prints the answer of an ended (or already ended) run; LC_OK. */
static int report_ended(const lc_opts *o, const char *run_id, const endrun_tx *t)
{
    const char *from = ll_run_status_name(t->expected), *to = ll_run_status_name(t->fail);
    const char *sees[LC_SEES_MAX];
    int n = nifi_sees(t->expected, t->fail, sees);
    if (o->json) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(arr, json_string(sees[i]));
        lc_print_json(json_pack("{s:b,s:s,s:s,s:s,s:b,s:s,s:s,s:o}", "ok", 1, "runId", run_id, "runStatus",
                                to, "previousStatus", ll_run_status_name(t->current), "changed", t->changed,
                                "errorStage", END_STAGE, "errorCode", END_CODE, "nifiSees", arr));
        return LC_OK;
    }
    if (t->changed)
        printf("run %s: %s -> %s (error %s/%s, event RUN_FAILED recorded)\n", run_id, from, to, END_STAGE,
               END_CODE);
    else
        printf("run %s is already %s: nothing changed\n", run_id, to);
    printf("NiFi will see:\n");
    for (int i = 0; i < n; i++)
        printf("  - %s\n", sees[i]);
    return LC_OK;
}

int lc_end_run(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *pos[1], *status = NULL, *reason = NULL;
    int npos;
    lc_optspec specs[] = {{"status", &status, NULL}, {"reason", &reason, NULL}, {NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 1, 1, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    char run_id[37];
    endrun_tx t = {.run_id = run_id, .reason = reason};
    if ((rc = check_args(o, pos[0], run_id, status, &t.want, reason)) != LC_CONTINUE)
        return rc;
    ll_db db;
    if ((rc = lc_db_open(o, &db)) != LC_OK)
        return rc;
    ll_db_rc dr = ll_db_transaction(&db, endrun_body, &t);
    if (dr != LL_DB_OK && dr != LL_DB_ROLLBACK) {
        rc = lc_fail_db(o, &db, "end-run");
    } else if (t.outcome == LL_END_RUN_NOT_FOUND) {
        rc = lc_fail(o, LC_REFUSED, "RUN_NOT_FOUND", json_pack("{s:s}", "runId", run_id),
                     "no run %s in the ledger", run_id);
    } else if (t.outcome == LL_END_RUN_STATUS_MISMATCH || t.outcome == LL_END_RUN_NOT_ALLOWED) {
        const char *cur = ll_run_status_name(t.current), *hint = refusal_hint(t.current);
        json_t *d = json_pack("{s:s}", "runStatus", cur ? cur : "?");
        char expect[64] = "";
        if (t.want != LL_RUN_STATUS_COUNT) {
            json_object_set_new(d, "expectedStatus", json_string(ll_run_status_name(t.want)));
            snprintf(expect, sizeof expect, ", not %s", ll_run_status_name(t.want));
        }
        rc = lc_fail(o, LC_REFUSED, "RUN_STATUS_MISMATCH", d, "run is %s%s: nothing changed%s%s",
                     cur ? cur : "?", expect, hint ? "; " : "", hint ? hint : "");
    } else {
        rc = report_ended(o, run_id, &t);
    }
    ll_db_close(&db);
    return rc;
}
