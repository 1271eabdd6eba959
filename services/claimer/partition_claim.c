/*
 * partition_claim.c - a worker asks to own a partition (docs/contract.md §5.3).
 *
 * Lock order run -> partition. A claim for a run or partition the ledger does not hold yet
 * (run request or manifest not applied) is deferred; after loop.prerequisite_wait a run that
 * exists but still has no manifest answers PARTITION_NOT_FOUND, an unknown run is dead-lettered.
 * A same-token retry writes nothing (no heartbeat: only a new claim is progress). ll_claim_decide decides,
 * given the claim-token history (a token granted before and superseded is CLAIM_MISMATCH); a
 * granted claim stores the token, counts the attempt, records the token in load_claim_token (so a later
 * report with a superseded token is told from one not yet seen), ACKs the partition's
 * REISSUE_PARTITION dispatches when it was RETRY, and answers with the whole work order. Helpers
 * return the database result; only the entry point returns the apply decision (ll_apply_of_db).
 */
#include <stdio.h>
#include <string.h>

#include "claim_sql.h"
#include "claimer.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/ledger.h"
#include "ll/rules.h"

static const ll_stmt ST_LOCK_PARTITION = {
    "claim_lock_partition",
    "SELECT status, claim_token::text, attempt_count, lower_bound::text, upper_bound::text,"
    " upper_inclusive, is_null_partition, expected_row_count"
    " FROM nifi_ops.load_partition WHERE run_id = $1::uuid AND partition_id = $2 FOR UPDATE",
    2};

static const ll_stmt ST_GRANT = {
    "claim_grant",
    "UPDATE nifi_ops.load_partition SET status = 'RUNNING', claim_token = $3::uuid,"
    " worker_node = $4, attempt_count = attempt_count + 1,"
    " started_at = coalesce(started_at, clock_timestamp()), heartbeat_at = clock_timestamp(),"
    " error_code = NULL, error_message = NULL"
    " WHERE run_id = $1::uuid AND partition_id = $2 AND status IN ('PENDING', 'RETRY')"
    " RETURNING attempt_count",
    4};

static const ll_stmt ST_TOKEN_HISTORY = {
    "claim_token_history",
    "INSERT INTO nifi_ops.load_claim_token (run_id, partition_id, claim_token, attempt_no,"
    " worker_node, granted_at) VALUES ($1::uuid, $2, $3::uuid, $4::int, $5, clock_timestamp())"
    " ON CONFLICT DO NOTHING",
    5};

typedef struct claim_in {
    char run_id[37], token[37];
    const char *partition_id, *worker;
} claim_in;

/* The reply; for a granted claim it carries the work order (docs/contract.md K§4). */
static json_t *claim_reply(const ll_msg *m, const claim_in *c, const char *outcome, const char *code,
                           const char *run_status, const char *part_status, bool claimed, long long attempt,
                           const ll_run_row *run, const PGresult *part)
{
    json_t *r = ll_reply_new(m, c->run_id, c->partition_id, outcome, code, NULL, run_status, part_status);
    json_object_set_new(r, "claimToken", json_string(c->token));
    json_object_set_new(r, "workerNode", json_string(c->worker));
    json_object_set_new(r, "claimed", json_boolean(claimed));
    json_object_set_new(r, "attempt", json_integer(attempt));
    if (claimed && run && part) {
        const char *lo = ll_db_text(part, 0, 3), *hi = ll_db_text(part, 0, 4);
        json_object_set_new(r, "jobKey", json_string(run->job_key));
        json_object_set_new(r, "businessKey", json_string(run->business_key));
        json_object_set_new(r, "snapshotScn",
                            run->snapshot_scn ? json_string(run->snapshot_scn) : json_null());
        json_object_set_new(r, "hdfsRunPath",
                            run->hdfs_run_path ? json_string(run->hdfs_run_path) : json_null());
        json_object_set_new(r, "lowerBound", lo ? json_string(lo) : json_null());
        json_object_set_new(r, "upperBound", hi ? json_string(hi) : json_null());
        json_object_set_new(r, "upperInclusive", json_boolean(ll_db_bool(part, 0, 5)));
        json_object_set_new(r, "isNullPartition", json_boolean(ll_db_bool(part, 0, 6)));
        json_object_set_new(r, "expectedRowCount", json_integer(ll_db_ll(part, 0, 7, 0)));
    }
    return r;
}

/* docs/contract.md §5.3 step 5: the grant with its token history, reissue ACK and event; the reply with
 * the work order. LL_DB_OK, or the failed statement's result (db->err). */
static ll_db_rc grant(ll_db *db, const ll_msg *m, const claim_in *c, const ll_run_row *run, PGresult *part,
                      ll_part_status before, ll_apply_out *out)
{
    const char *p[4] = {c->run_id, c->partition_id, c->token, c->worker};
    PGresult *r = ll_db_exec(db, &ST_GRANT, p);
    if (!r)
        return LL_DB_ERROR;
    long long attempt = ll_db_ll(r, 0, 0, 0);
    PQclear(r);
    char att[16];
    snprintf(att, sizeof att, "%lld", attempt);
    const char *h[5] = {c->run_id, c->partition_id, c->token, att, c->worker};
    const char *k[2] = {c->run_id, c->partition_id};
    ll_db_rc rc = ll_db_exec_discard(db, &ST_TOKEN_HISTORY, h);
    if (rc == LL_DB_OK && before == LL_PART_RETRY)
        rc = ll_db_exec_discard(db, &CLAIM_ACK_REISSUE, k);
    if (rc == LL_DB_OK)
        rc = ll_run_touch(db, c->run_id);
    if (rc != LL_DB_OK)
        return rc;
    json_t *details = json_pack("{s:s,s:I}", "workerNode", c->worker, "attempt", (json_int_t)attempt);
    ll_event ev = {.name = "PARTITION_STARTED",
                   .level = "INFO",
                   .run_id = c->run_id,
                   .partition_id = c->partition_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .details = details};
    rc = ll_event_insert(db, &ev);
    json_decref(details);
    if (rc != LL_DB_OK)
        return rc;
    out->reply = claim_reply(m, c, "ACCEPTED", NULL, "EXTRACTING", "RUNNING", true, attempt, run, part);
    return LL_DB_OK;
}

/* Steps 1-5 over the locked partition: ll_claim_decide decides, with the claim-token history as
 * its input (a superseded token never owns the partition again, docs/contract.md K§6). LL_DB_OK
 * after a grant, LL_DB_ROLLBACK after a refusal or a replay (both write nothing; the reply is
 * set), or the failed statement's result. */
static ll_db_rc decide(ll_db *db, const ll_msg *m, const claim_in *c, const ll_run_row *run,
                       ll_apply_out *out)
{
    const char *k[2] = {c->run_id, c->partition_id};
    PGresult *part = ll_db_exec(db, &ST_LOCK_PARTITION, k);
    if (!part)
        return LL_DB_ERROR;
    if (PQntuples(part) == 0) {
        out->reply = claim_reply(m, c, "REJECTED", "PARTITION_NOT_FOUND", ll_run_status_name(run->status),
                                 NULL, false, 0, NULL, NULL);
        PQclear(part);
        return LL_DB_ROLLBACK;
    }
    ll_part_status ps = LL_PART_PENDING;
    ll_part_status_parse(PQgetvalue(part, 0, 0), &ps);
    const char *stored = ll_db_text(part, 0, 1);
    long long attempt = ll_db_ll(part, 0, 2, 0);
    bool granted_before = false;
    ll_db_rc rc = ll_claim_token_known(db, c->run_id, c->partition_id, c->token, &granted_before);
    if (rc != LL_DB_OK) {
        PQclear(part);
        return rc;
    }
    ll_claim_decision d = ll_claim_decide(run->status, ps, stored, c->token, granted_before);
    switch (d) {
    case LL_CLAIM_GRANT:
        rc = grant(db, m, c, run, part, ps, out);
        break;
    case LL_CLAIM_REPLAY:
        /* the same-token retry writes nothing: the reference refreshes the partition
         * heartbeat here (docs/contract.md §5.3 step 3), but a replayed claim of a worker that died
         * would then make the sweeper take the partition for alive (docs/design.md §5) */
        out->reply = claim_reply(m, c, "REPLAY", NULL, ll_run_status_name(run->status), "RUNNING", true,
                                 attempt, run, part);
        rc = LL_DB_ROLLBACK;
        break;
    case LL_CLAIM_REFUSE_RUN:
    case LL_CLAIM_REFUSE_PARTITION:
    case LL_CLAIM_REFUSE_SUPERSEDED:
    default:
        /* claimed=false, a normal race: the run has ended, another token owns the partition,
         * the partition is finished, or the token was superseded by a reissue */
        out->reply =
            claim_reply(m, c, "REJECTED", ll_claim_refusal_code(d, ps), ll_run_status_name(run->status),
                        ll_part_status_name(ps), false, attempt, NULL, NULL);
        rc = LL_DB_ROLLBACK;
        break;
    }
    PQclear(part);
    return rc;
}

ll_apply claimer_apply_partition_claim(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    claim_in c;
    if (!ll_need_uuid(out, m->value, "runId", c.run_id) ||
        !ll_need_str(out, m->value, "partitionId", ll_is_partition_id, "^([0-9]{4}|NULL)$", 4, 4,
                     &c.partition_id) ||
        !ll_need_uuid(out, m->value, "claimToken", c.token) ||
        !ll_need_str(out, m->value, "workerNode", NULL, NULL, 1, 200, &c.worker))
        return LL_APPLY_DEAD;
    ll_run_row run;
    if (ll_run_lock(db, c.run_id, &run) != LL_DB_OK)
        return LL_APPLY_DB;
    bool rejected = false;
    if (!run.found && ll_run_request_rejected(db, c.run_id, &rejected) != LL_DB_OK) {
        ll_run_row_clear(&run);
        return LL_APPLY_DB;
    }
    ll_run_found found = run.found  ? LL_RUN_FOUND_LOCKED
                         : rejected ? LL_RUN_FOUND_REFUSED
                                    : LL_RUN_FOUND_NONE;
    ll_apply a;
    switch (ll_claim_lookup(found, run.status, m->wait_expired)) {
    case LL_OWN_RUN_NOT_FOUND:
        out->reply = claim_reply(m, &c, "REJECTED", "RUN_NOT_FOUND", NULL, NULL, false, 0, NULL, NULL);
        a = LL_APPLY_ROLLBACK;
        break;
    case LL_OWN_DEFER_RUN:
    case LL_OWN_DEFER_MANIFEST:
        /* the run request or the manifest is not applied yet (docs/contract.md K§6); a run still
         * CREATED after loop.prerequisite_wait is answered by decide(): no partition row,
         * PARTITION_NOT_FOUND (docs/contract.md §5.3 step 1) */
        snprintf(out->reason, sizeof out->reason, "run %s %s", c.run_id,
                 run.found ? "has no manifest yet" : "not in the ledger yet");
        a = LL_APPLY_DEFER;
        break;
    case LL_OWN_PROCEED:
    default:
        a = ll_apply_of_db(decide(db, m, &c, &run, out));
        break;
    }
    ll_run_row_clear(&run);
    return a;
}
