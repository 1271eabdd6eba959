/*
 * validation_metrics.c - STAGING or TARGET metrics from the validation flows (docs/contract.md §5.8).
 *
 * The run must be STAGE_VALIDATING for STAGING and PUBLISHED for TARGET (RUN_STATUS_MISMATCH),
 * or is still on its way there (deferred, until loop.prerequisite_wait is over: then
 * RUN_STATUS_MISMATCH too). Every metric is upserted on (run, stage, name, query
 * version); a row whose values did not change is left alone, so a replayed batch changes nothing
 * (not even the run's heartbeat) and writes no second <STAGE>_METRIC_FAILED event. The ledger stores results;
 * it judges them only at stage-validated and success (docs/contract.md §3.5).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "completion.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/rules.h"
#include "ll/run_answer.h"

/* Only rows that change are written (IS DISTINCT FROM), so a replay is a no-op. */
static const ll_stmt ST_UPSERT = {
    "vmetrics_upsert",
    "INSERT INTO nifi_ops.load_validation AS v (run_id, stage, metric_name, expected_value,"
    " actual_value, tolerance, result, query_version, details, measured_at)"
    " SELECT $1::uuid, $2, m.\"metricName\", m.\"expectedValue\", m.\"actualValue\", m.\"tolerance\","
    " m.\"result\", $3, coalesce(m.\"details\", '{}'::jsonb), clock_timestamp()"
    " FROM jsonb_to_recordset($4::jsonb) AS m(\"metricName\" text, \"expectedValue\" text,"
    " \"actualValue\" text, \"tolerance\" text, \"result\" text, \"details\" jsonb)"
    " ON CONFLICT (run_id, stage, metric_name, query_version) DO UPDATE SET"
    " expected_value = excluded.expected_value, actual_value = excluded.actual_value,"
    " tolerance = excluded.tolerance, result = excluded.result, details = excluded.details,"
    " measured_at = excluded.measured_at"
    " WHERE (v.expected_value, v.actual_value, v.tolerance, v.result, v.details) IS DISTINCT FROM"
    " (excluded.expected_value, excluded.actual_value, excluded.tolerance, excluded.result, excluded.details)"
    " RETURNING metric_name",
    4};

typedef struct metrics_in {
    char run_id[37];
    const char *stage, *version;
    json_t *metrics; /* borrowed */
    int fails;
} metrics_in;

static bool check_metric(ll_apply_out *out, json_t *mt, size_t i)
{
    const char *name, *result, *s;
    if (!ll_need_str(out, mt, "metricName", ll_is_metric_name, "^[A-Za-z0-9_.:-]{1,150}$", 1, 150, &name) ||
        !ll_need_str(out, mt, "result", ll_is_metric_result, "PASS|FAIL|WARN", 4, 4, &result) ||
        !ll_need_opt_str(out, mt, "expectedValue", 2000, &s) ||
        !ll_need_opt_str(out, mt, "actualValue", 2000, &s) || !ll_need_opt_str(out, mt, "tolerance", 100, &s))
        return false;
    (void)i;
    return true;
}

static bool read_metrics(const json_t *v, metrics_in *mi, ll_apply_out *out)
{
    if (!ll_need_uuid(out, v, "runId", mi->run_id) ||
        !ll_need_str(out, v, "stage", NULL, NULL, 1, 30, &mi->stage))
        return false;
    if (strcmp(mi->stage, "STAGING") != 0 && strcmp(mi->stage, "TARGET") != 0)
        return ll_invalid(out, "stage: '%.30s' is not STAGING or TARGET", mi->stage);
    mi->version = ll_f_str(v, "queryVersion");
    if (!mi->version)
        mi->version = "v1";
    long vl = ll_utf8_chars(mi->version);
    if (vl < 1 || vl > 50)
        return ll_invalid(out, "queryVersion: 1..50 characters");
    mi->metrics = json_object_get(v, "metrics");
    size_t n = json_array_size(mi->metrics);
    if (n < 1 || n > 500)
        return ll_invalid(out, "metrics: 1..500 items required");
    for (size_t i = 0; i < n; i++) {
        json_t *mt = json_array_get(mi->metrics, i);
        if (!check_metric(out, mt, i))
            return false;
        for (size_t j = 0; j < i; j++)
            if (strcmp(ll_f_str(json_array_get(mi->metrics, j), "metricName"), ll_f_str(mt, "metricName")) ==
                0)
                return ll_invalid(out, "metrics: '%.150s' appears twice", ll_f_str(mt, "metricName"));
        if (strcmp(ll_f_str(mt, "result"), "FAIL") == 0)
            mi->fails++;
    }
    return true;
}

static json_t *outcome(const ll_msg *m, const metrics_in *mi, const char *result, const char *code,
                       const char *run_status, int recorded)
{
    json_t *r = ll_reply_new(m, mi->run_id, NULL, result, code, NULL, run_status, NULL);
    json_object_set_new(r, "stage", json_string(mi->stage));
    json_object_set_new(r, "recorded", json_integer(recorded));
    json_object_set_new(r, "failCount", json_integer(mi->fails));
    return r;
}

/* <STAGE>_METRIC_FAILED naming the failing metrics that changed now. */
static ll_db_rc failed_event(ll_db *db, const metrics_in *mi, PGresult *changed)
{
    ll_strlist names = {0};
    for (int i = 0; i < PQntuples(changed); i++)
        for (size_t j = 0; j < json_array_size(mi->metrics); j++) {
            json_t *mt = json_array_get(mi->metrics, j);
            if (strcmp(ll_f_str(mt, "metricName"), PQgetvalue(changed, i, 0)) == 0 &&
                strcmp(ll_f_str(mt, "result"), "FAIL") == 0)
                ll_strlist_addf(&names, "%s", PQgetvalue(changed, i, 0));
        }
    ll_db_rc rc = LL_DB_OK;
    if (names.n > 0) {
        char *msg = ll_strlist_join(&names, ", ");
        char name[40];
        snprintf(name, sizeof name, "%s_METRIC_FAILED", mi->stage);
        ll_event ev = {.name = name,
                       .level = "WARN",
                       .run_id = mi->run_id,
                       .chunk_index = -1,
                       .row_count = -1,
                       .message = msg};
        rc = ll_event_insert(db, &ev);
        free(msg);
    }
    ll_strlist_clear(&names);
    return rc;
}

/* docs/contract.md §5.8 steps 3-4 for a run where the stage applies: the upsert, the heartbeat and the
 * <STAGE>_METRIC_FAILED event when a metric changed; the reply. LL_APPLY_COMMIT, or LL_APPLY_DB. */
static ll_apply record_metrics(ll_db *db, const ll_msg *m, const metrics_in *mi, const ll_run_row *run,
                               ll_apply_out *out)
{
    ll_apply a = LL_APPLY_COMMIT;
    char *metrics = json_dumps(mi->metrics, JSON_COMPACT);
    const char *p[4] = {mi->run_id, mi->stage, mi->version, metrics};
    PGresult *changed = ll_db_exec(db, &ST_UPSERT, p);
    free(metrics);
    /* docs/contract.md §5.8 step 4 refreshes the heartbeat; only when a metric changed (a replay writes
     * nothing) */
    if (!changed || (PQntuples(changed) > 0 && ll_run_touch(db, mi->run_id) != LL_DB_OK) ||
        failed_event(db, mi, changed) != LL_DB_OK) {
        a = LL_APPLY_DB;
    } else {
        out->reply = outcome(m, mi, PQntuples(changed) > 0 ? "ACCEPTED" : "REPLAY", NULL,
                             ll_run_status_name(run->status), (int)json_array_size(mi->metrics));
    }
    PQclear(changed);
    return a;
}

/* The run-event ladder's answers (§5.8): no replay status (a replayed batch is applied again and
 * changes nothing, ST_UPSERT); any other status RUN_STATUS_MISMATCH (step 2). */
static const ll_run_answer ANSWERS[LL_RUN_EVENT_COUNT] = {
    LL_RUN_ANSWERS_COMMON,
    [LL_RUN_EVENT_REPLAY] = LL_RUN_ANSWER_MISMATCH,
    [LL_RUN_EVENT_STATUS_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
    [LL_RUN_EVENT_TOKEN_MISMATCH] = LL_RUN_ANSWER_MISMATCH,
};

/* One batch of metrics: what ANSWERS' steps need. */
typedef struct vmetrics_ctx {
    ll_db *db;
    const ll_msg *m;
    const metrics_in *mi;
    const ll_run_row *run;
} vmetrics_ctx;

static ll_apply vmetrics_apply(void *ctx, ll_apply_out *out)
{
    const vmetrics_ctx *c = ctx;
    return record_metrics(c->db, c->m, c->mi, c->run, out);
}

/* A reply of ANSWERS (recorded 0); RUN_STATUS_MISMATCH with details {runStatus, stage} (§5.8 step 2). */
static json_t *vmetrics_reply(void *ctx, const ll_run_answer *row, const char *run_status)
{
    const vmetrics_ctx *c = ctx;
    json_t *r = outcome(c->m, c->mi, row->outcome, row->code, run_status, 0);
    if (row->code && strcmp(row->code, "RUN_STATUS_MISMATCH") == 0)
        json_object_set_new(r, "details",
                            json_pack("{s:s,s:s}", "runStatus", run_status, "stage", c->mi->stage));
    return r;
}

static const ll_run_event_ops OPS = {vmetrics_apply, vmetrics_reply};

ll_apply completion_apply_validation_metrics(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    metrics_in mi = {0};
    if (!read_metrics(m->value, &mi, out))
        return LL_APPLY_DEAD;
    ll_run_row run;
    ll_run_found found = LL_RUN_FOUND_NONE;
    ll_db_rc rc = lock_run_event(db, mi.run_id, &run, &found, out);
    if (rc != LL_DB_OK)
        return ll_apply_of_db(rc);
    ll_run_status need = strcmp(mi.stage, "STAGING") == 0 ? LL_RUN_STAGE_VALIDATING : LL_RUN_PUBLISHED;
    /* no replay status: a replayed batch is applied again and changes nothing (ST_UPSERT) */
    ll_run_event_in in = {found, run.status, need, LL_RUN_STATUS_COUNT, m->wait_expired};
    vmetrics_ctx ctx = {db, m, &mi, &run};
    ll_apply a = ll_run_event_act(ANSWERS, ll_run_event_decide(&in), &in, &OPS, &ctx, out);
    ll_run_row_clear(&run);
    return a;
}
