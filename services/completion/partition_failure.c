/*
 * partition_failure.c - a worker reports that its partition failed (docs/contract.md §5.5).
 *
 * Lock run and partition; the token first (CLAIM_MISMATCH, also for a superseded token, a zombie
 * after a reissue, as the reference answers, docs/contract.md §12; deferred while its claim may still
 * come, a run without its manifest after loop.prerequisite_wait: PARTITION_NOT_FOUND), then ll_pfail_decide:
 * already FAILED is a replay (changed=false), not RUNNING is PARTITION_STATUS_MISMATCH; otherwise the
 * partition fails and, if the run is EXTRACTING, the run fails too: FAILED_SNAPSHOT_EXPIRED for ORA-01555 /
 * ORA-08180 / class SNAPSHOT, else FAILED_EXTRACT. No dispatch is ever created.
 */
#include <stdio.h>
#include <string.h>

#include "completion.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/rules.h"

static const ll_stmt ST_PARTITION_FAILED = {
    "pfail_partition_failed",
    "UPDATE nifi_ops.load_partition SET status = 'FAILED', error_code = $3,"
    " error_message = nullif(left($4, 2000), ''), completed_at = clock_timestamp(),"
    " heartbeat_at = clock_timestamp()"
    " WHERE run_id = $1::uuid AND partition_id = $2 AND status = 'RUNNING'",
    4};

static const ll_stmt ST_RUN_FAILED_COUNT = {
    "pfail_run_failed_count",
    "UPDATE nifi_ops.load_run SET failed_partition_count = failed_partition_count + 1,"
    " heartbeat_at = clock_timestamp() WHERE run_id = $1::uuid",
    1};

static const ll_stmt ST_RUN_FAIL = {
    "pfail_run_fail",
    "UPDATE nifi_ops.load_run SET status = $2, error_stage = left($3, 80), error_code = $4,"
    " error_message = nullif(left($5, 2000), ''), completed_at = clock_timestamp(),"
    " heartbeat_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status = 'EXTRACTING'",
    5};

typedef struct pfail_in {
    char run_id[37], token[37];
    const char *partition_id, *stage, *error_class, *code, *message;
    int64_t attempt; /* -1 = not given */
} pfail_in;

static bool read_pfail(const json_t *v, pfail_in *f, ll_apply_out *out)
{
    json_t *a = json_object_get(v, "attempt");
    f->attempt = json_is_integer(a) ? (int64_t)json_integer_value(a) : -1;
    if (json_is_integer(a) && f->attempt < 0) {
        ll_invalid(out, "attempt: must be ≥ 0");
        return false; /* said outright: the analyser does not see that ll_invalid returns false */
    }
    bool ok =
        ll_need_uuid(out, v, "runId", f->run_id) &&
        ll_need_str(out, v, "partitionId", ll_is_partition_id, "^([0-9]{4}|NULL)$", 4, 4, &f->partition_id) &&
        ll_need_uuid(out, v, "claimToken", f->token) &&
        ll_need_str(out, v, "errorStage", NULL, NULL, 1, 100, &f->stage) &&
        ll_need_str(out, v, "errorClass", NULL, NULL, 1, 100, &f->error_class) &&
        ll_need_str(out, v, "errorCode", NULL, NULL, 1, 100, &f->code) &&
        ll_need_opt_str(out, v, "message", 2000, &f->message);
    if (ok && !f->message)
        f->message = "";
    return ok;
}

static json_t *outcome(const ll_msg *m, const pfail_in *f, const char *result, const char *code,
                       const char *run_status, const char *part_status, bool changed)
{
    json_t *r = ll_reply_new(m, f->run_id, f->partition_id, result, code, NULL, run_status, part_status);
    json_object_set_new(r, "claimToken", json_string(f->token));
    json_object_set_new(r, "changed", json_boolean(changed));
    return r;
}

/* docs/contract.md §5.5 steps 5-7: the partition fails, and the run with it while EXTRACTING
 * (ll_pfail_run_failure decides; a compare-and-set writes it). LL_DB_OK with the reply set, or
 * the failed statement's result. */
static ll_db_rc apply_failure(ll_db *db, const ll_msg *m, const pfail_in *f, const owned_partition *op,
                              ll_apply_out *out)
{
    const char *p[4] = {f->run_id, f->partition_id, f->code, f->message};
    const char *run[1] = {f->run_id};
    ll_db_rc rc = ll_db_exec_discard(db, &ST_PARTITION_FAILED, p);
    if (rc == LL_DB_OK)
        rc = ll_db_exec_discard(db, &ST_RUN_FAILED_COUNT, run);
    if (rc != LL_DB_OK)
        return rc;
    json_t *details = json_pack("{s:s,s:o}", "stage", f->stage, "attempt",
                                f->attempt >= 0 ? json_integer(f->attempt) : json_null());
    ll_event pe = {.name = "PARTITION_FAILED",
                   .level = "ERROR",
                   .run_id = f->run_id,
                   .partition_id = f->partition_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .error_class = f->error_class,
                   .error_code = f->code,
                   .message = f->message,
                   .details = details};
    rc = ll_event_insert(db, &pe);
    json_decref(details);
    if (rc != LL_DB_OK)
        return rc;
    ll_run_status after = op->run.status;
    ll_run_fail rf;
    if (ll_pfail_run_failure(op->run.status, f->stage, f->code, f->error_class, &rf)) {
        after = rf.status;
        const char *q[5] = {f->run_id, ll_run_status_name(rf.status), rf.stage, rf.code, f->message};
        if ((rc = ll_db_exec_discard(db, &ST_RUN_FAIL, q)) != LL_DB_OK)
            return rc;
        char msg[2100];
        snprintf(msg, sizeof msg, "partition %s: %s", f->partition_id, f->message);
        ll_event re = {.name = "RUN_FAILED",
                       .level = "ERROR",
                       .run_id = f->run_id,
                       .partition_id = f->partition_id,
                       .chunk_index = -1,
                       .row_count = -1,
                       .error_class = f->error_class,
                       .error_code = f->code,
                       .message = msg};
        if ((rc = ll_event_insert(db, &re)) != LL_DB_OK)
            return rc;
    }
    out->reply = outcome(m, f, "ACCEPTED", NULL, ll_run_status_name(after), "FAILED", true);
    return LL_DB_OK;
}

ll_apply completion_apply_partition_failure(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    pfail_in f;
    if (!read_pfail(m->value, &f, out))
        return LL_APPLY_DEAD;
    owned_partition op;
    ll_ownership own = LL_OWN_NO_RUN;
    ll_db_rc rc = lock_owned_partition(db, f.run_id, f.partition_id, f.token, &op, &own);
    ll_own_answer ans = ll_ownership_answer(own, m->wait_expired);
    const char *rs = op.run.found ? ll_run_status_name(op.run.status) : NULL;
    const char *ps = ll_part_status_name(op.status);
    ll_apply a = LL_APPLY_ROLLBACK;
    if (rc != LL_DB_OK) {
        a = LL_APPLY_DB;
    } else if (ans == LL_OWN_DEFER_RUN || ans == LL_OWN_DEFER_MANIFEST || ans == LL_OWN_DEFER_TOKEN) {
        snprintf(out->reason, sizeof out->reason, "%s", ll_own_defer_reason(ans));
        a = LL_APPLY_DEFER;
    } else if (ans == LL_OWN_RUN_NOT_FOUND || ans == LL_OWN_PARTITION_NOT_FOUND) {
        out->reply =
            outcome(m, &f, "REJECTED", ans == LL_OWN_RUN_NOT_FOUND ? "RUN_NOT_FOUND" : "PARTITION_NOT_FOUND",
                    rs, NULL, false);
    } else {
        /* a superseded token (a zombie after a reissue) is not the stored one: CLAIM_MISMATCH
         * (ll_ownership_answer), checked before the partition status, as the reference answers
         * (docs/contract.md §12) */
        switch (ll_pfail_decide(op.status, ans == LL_OWN_PROCEED ? op.stored_token : NULL, f.token)) {
        case LL_PFAIL_APPLY:
            a = ll_apply_of_db(apply_failure(db, m, &f, &op, out));
            break;
        case LL_PFAIL_REPLAY:
            out->reply = outcome(m, &f, "REPLAY", NULL, rs, "FAILED", false);
            break;
        case LL_PFAIL_CLAIM_MISMATCH:
            out->reply = outcome(m, &f, "REJECTED", "CLAIM_MISMATCH", rs, ps, false);
            break;
        case LL_PFAIL_STATUS_MISMATCH:
        default:
            out->reply = outcome(m, &f, "REJECTED", "PARTITION_STATUS_MISMATCH", rs, ps, false);
            /* docs/contract.md §5.5 check 4: details {partitionStatus} */
            json_object_set_new(out->reply, "details", json_pack("{s:s}", "partitionStatus", ps));
            break;
        }
    }
    owned_partition_clear(&op);
    return a;
}
