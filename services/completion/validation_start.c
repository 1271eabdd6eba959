/*
 * validation_start.c - the validation flow acknowledges a VALIDATE_RUN command and asks to start
 * (docs/contract.md §5.7).
 *
 * Lock order run -> dispatch. The dispatch must be this run's VALIDATE_RUN (else
 * DISPATCH_MISMATCH). The ACK (-> ACKED) is written whether or not this caller wins, so no
 * further resend happens; an ACK that arrives before the dispatcher marks SENT stays ACKED (the
 * dispatcher's update is conditional on PENDING). The CAS EXTRACTED_VALIDATED ->
 * STAGE_VALIDATING picks one winner; load_validation_start records it so that an identical
 * replay of the winner's request answers started=true again, every other caller started=false.
 */
#include <stdio.h>
#include <string.h>

#include "completion.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/rules.h"

static const ll_stmt ST_LOCK_DISPATCH = {
    "vstart_lock_dispatch",
    "SELECT run_id::text, dispatch_type, status FROM nifi_ops.load_dispatch"
    " WHERE dispatch_id = $1::uuid FOR UPDATE",
    1};

static const ll_stmt ST_ACK = {
    "vstart_ack",
    "UPDATE nifi_ops.load_dispatch SET status = 'ACKED', acked_at = clock_timestamp()"
    " WHERE dispatch_id = $1::uuid AND status <> 'ACKED'",
    1};

static const ll_stmt ST_START = {
    "vstart_cas",
    "UPDATE nifi_ops.load_run SET status = 'STAGE_VALIDATING', heartbeat_at = clock_timestamp(),"
    " version_no = version_no + 1 WHERE run_id = $1::uuid AND status = 'EXTRACTED_VALIDATED'",
    1};

static const ll_stmt ST_WINNER = {
    "vstart_winner",
    "SELECT dispatch_id::text, node FROM nifi_ops.load_validation_start WHERE run_id = $1::uuid", 1};

static const ll_stmt ST_RECORD_WINNER = {
    "vstart_record_winner",
    "INSERT INTO nifi_ops.load_validation_start (run_id, dispatch_id, node) VALUES ($1::uuid, $2::uuid, $3)",
    3};

static const ll_stmt ST_SOURCE_METRICS = {
    "vstart_source_metrics",
    "SELECT metric_name, actual_value FROM nifi_ops.load_validation"
    " WHERE run_id = $1::uuid AND stage = 'SOURCE' ORDER BY metric_name, measured_at",
    1};

typedef struct vstart_in {
    char run_id[37], dispatch_id[37];
    const char *node;
} vstart_in;

static json_t *decision(const ll_msg *m, const vstart_in *v, const char *outcome, const char *code,
                        const char *run_status)
{
    json_t *r = ll_reply_new(m, v->run_id, NULL, outcome, code, NULL, run_status, NULL);
    json_object_set_new(r, "dispatchId", json_string(v->dispatch_id));
    json_object_set_new(r, "started", json_false());
    return r;
}

/* The winner's answer: the run context the validation flow needs. LL_DB_OK, or LL_DB_ERROR. */
static ll_db_rc winner_reply(ll_db *db, const ll_msg *m, const vstart_in *v, const ll_run_row *run,
                             const char *outcome, ll_apply_out *out)
{
    const char *p[1] = {v->run_id};
    PGresult *r = ll_db_exec(db, &ST_SOURCE_METRICS, p);
    if (!r)
        return LL_DB_ERROR;
    json_t *metrics = json_object();
    for (int i = 0; i < PQntuples(r); i++)
        json_object_set_new(metrics, PQgetvalue(r, i, 0),
                            json_string(ll_db_text(r, i, 1) ? ll_db_text(r, i, 1) : ""));
    PQclear(r);
    json_t *d = decision(m, v, outcome, NULL, "STAGE_VALIDATING");
    json_object_set_new(d, "started", json_true());
    json_object_set_new(d, "jobKey", json_string(run->job_key));
    json_object_set_new(d, "businessKey", json_string(run->business_key));
    json_object_set_new(d, "snapshotScn", run->snapshot_scn ? json_string(run->snapshot_scn) : json_null());
    json_object_set_new(d, "hdfsRunPath", run->hdfs_run_path ? json_string(run->hdfs_run_path) : json_null());
    json_object_set_new(d, "stageTable", run->stage_table ? json_string(run->stage_table) : json_null());
    json_object_set_new(d, "sourceCount",
                        run->source_count >= 0 ? json_integer(run->source_count) : json_null());
    json_object_set_new(d, "extractedCount", json_integer(run->extracted_count));
    json_object_set_new(d, "sourceMetrics", metrics);
    out->reply = d;
    return LL_DB_OK;
}

/* Step 4: the CAS, or who won before. LL_DB_OK with the reply set, or the failed statement's
 * result (db->err). */
static ll_db_rc start_or_report(ll_db *db, const ll_msg *m, const vstart_in *v, const ll_run_row *run,
                                bool acked_now, ll_apply_out *out)
{
    const char *p[1] = {v->run_id};
    PGresult *r = ll_db_exec(db, &ST_START, p);
    if (!r)
        return LL_DB_ERROR;
    bool won = ll_db_affected(r) == 1;
    PQclear(r);
    if (ll_validation_start_answer(won, false, run->status, acked_now) == LL_VSTART_WON) {
        const char *w[3] = {v->run_id, v->dispatch_id, v->node};
        json_t *details = json_pack("{s:s,s:s}", "dispatchId", v->dispatch_id, "node", v->node);
        ll_event ev = {.name = "STAGE_VALIDATION_STARTED",
                       .level = "INFO",
                       .run_id = v->run_id,
                       .chunk_index = -1,
                       .row_count = -1,
                       .details = details};
        ll_db_rc rc = ll_db_exec_discard(db, &ST_RECORD_WINNER, w);
        if (rc == LL_DB_OK)
            rc = ll_event_insert(db, &ev);
        json_decref(details);
        return rc == LL_DB_OK ? winner_reply(db, m, v, run, "ACCEPTED", out) : rc;
    }
    if (!(r = ll_db_exec(db, &ST_WINNER, p)))
        return LL_DB_ERROR;
    bool same = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), v->dispatch_id) == 0 &&
                strcmp(PQgetvalue(r, 0, 1), v->node) == 0;
    PQclear(r);
    switch (ll_validation_start_answer(false, same, run->status, acked_now)) {
    case LL_VSTART_WINNER_AGAIN:
        return winner_reply(db, m, v, run, "REPLAY", out);
    case LL_VSTART_LOST_ACKED:
        out->reply = decision(m, v, "ACCEPTED", NULL, ll_run_status_name(run->status));
        return LL_DB_OK;
    case LL_VSTART_WON: /* not here: won is false */
    case LL_VSTART_LOST_REPLAY:
    default:
        out->reply = decision(m, v, "REPLAY", NULL, ll_run_status_name(run->status));
        return LL_DB_OK;
    }
}

ll_apply completion_apply_validation_start(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    vstart_in v;
    if (!ll_need_uuid(out, m->value, "runId", v.run_id) ||
        !ll_need_uuid(out, m->value, "dispatchId", v.dispatch_id) ||
        !ll_need_opt_str(out, m->value, "node", 200, &v.node))
        return LL_APPLY_DEAD;
    if (!v.node)
        v.node = "";
    ll_run_row run;
    ll_apply a = LL_APPLY_ROLLBACK;
    ll_run_found found = LL_RUN_FOUND_NONE;
    ll_db_rc rc = lock_run_event(db, v.run_id, &run, &found, out);
    if (rc != LL_DB_OK)
        return ll_apply_of_db(rc);
    const char *p[1] = {v.dispatch_id};
    PGresult *r = NULL;
    /* the dispatch is locked only once the run is (lock order run -> dispatch) */
    if (found == LL_RUN_FOUND_LOCKED && !(r = ll_db_exec(db, &ST_LOCK_DISPATCH, p))) {
        ll_run_row_clear(&run);
        return LL_APPLY_DB;
    }
    bool dispatch_found = r && PQntuples(r) == 1;
    bool matches = dispatch_found && strcmp(PQgetvalue(r, 0, 0), v.run_id) == 0 &&
                   strcmp(PQgetvalue(r, 0, 1), "VALIDATE_RUN") == 0;
    switch (ll_validation_start_decide(found, run.status, dispatch_found, matches, m->wait_expired)) {
    case LL_VSTART_DEFER_RUN:
        a = LL_APPLY_DEFER;
        break;
    case LL_VSTART_RUN_NOT_FOUND:
        out->reply = decision(m, &v, "REJECTED", "RUN_NOT_FOUND", NULL);
        break;
    case LL_VSTART_DEFER:
        /* docs/design.md §6: the run's completion is not applied yet */
        defer_reason(run.status, LL_RUN_EXTRACTED_VALIDATED, out);
        a = LL_APPLY_DEFER;
        break;
    case LL_VSTART_ACK: {
        bool acked_now = strcmp(PQgetvalue(r, 0, 2), "ACKED") != 0;
        rc = ll_db_exec_discard(db, &ST_ACK, p);
        a = ll_apply_of_db(rc == LL_DB_OK ? start_or_report(db, m, &v, &run, acked_now, out) : rc);
        break;
    }
    case LL_VSTART_DISPATCH_MISMATCH:
    default:
        out->reply = decision(m, &v, "REJECTED", "DISPATCH_MISMATCH", ll_run_status_name(run.status));
        break;
    }
    PQclear(r);
    ll_run_row_clear(&run);
    return a;
}
