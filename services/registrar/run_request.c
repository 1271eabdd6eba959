/*
 * run_request.c - creating a run (docs/contract.md §5.1), idempotent on the run id the caller minted.
 *
 *   - a run id already in the ledger with the same job and business key: REPLAY, same answer;
 *     with another job or business key: REJECTED RUN_ID_CONFLICT;
 *   - a run id refused before: REPLAY of the refusal (load_run_rejection), so a replay never
 *     admits a run that was refused the first time;
 *   - hdfsRoot with a ".." segment: REJECTED INVALID_HDFS_ROOT (recorded the same way);
 *   - another active run of the same job + business key: the insert finds it in the partial
 *     unique index uq_load_run_active (ON CONFLICT DO NOTHING): REJECTED DUPLICATE_ACTIVE_RUN.
 */
#include <stdio.h>
#include <string.h>

#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/ledger.h"
#include "ll/rules.h"
#include "ll/status_sql.h"
#include "registrar.h"

static const ll_stmt ST_FIND_RUN = {"reg_find_run",
                                    "SELECT job_key, business_key, status, hdfs_run_path, stage_table_name"
                                    " FROM nifi_ops.load_run WHERE run_id = $1::uuid",
                                    1};

static const ll_stmt ST_FIND_REJECTION = {
    "reg_find_rejection", "SELECT code, message FROM nifi_ops.load_run_rejection WHERE run_id = $1::uuid", 1};

/* Another active run of the job and business key (uq_load_run_active, its predicate repeated for
 * the index inference) makes the insert do nothing: no row returned, and no failed statement to
 * undo, so no savepoint of its own inside the loop's (docs/design.md §3). A concurrent insert of
 * the same key is waited for, as by a plain insert. */
static const ll_stmt ST_INSERT_RUN = {
    "reg_insert_run",
    "INSERT INTO nifi_ops.load_run (run_id, job_key, business_key, status, hdfs_run_path,"
    " stage_table_name, parameters, started_at, heartbeat_at)"
    " VALUES ($1::uuid, $2, $3, 'CREATED', $4, $5, $6::jsonb, clock_timestamp(), clock_timestamp())"
    " ON CONFLICT (job_key, business_key) WHERE status IN (" LL_SQL_RUN_ACTIVE ") DO NOTHING"
    " RETURNING 1",
    6};

static const ll_stmt ST_INSERT_REJECTION = {
    "reg_insert_rejection",
    "INSERT INTO nifi_ops.load_run_rejection (run_id, job_key, business_key, code, message)"
    " VALUES ($1::uuid, $2, $3, $4, $5) ON CONFLICT (run_id) DO NOTHING",
    5};

/* The request's fields, checked against docs/contract.md §5.1 formats. */
typedef struct run_request {
    char run_id[37];
    const char *job_key, *business_key, *hdfs_root, *prefix;
    bool allow_empty;
    json_t *parameters; /* borrowed */
} run_request;

static bool read_request(const json_t *v, run_request *rq, ll_apply_out *out)
{
    rq->allow_empty = ll_f_bool(v, "allowEmptySource", false);
    rq->parameters = json_object_get(v, "parameters");
    return ll_need_uuid(out, v, "runId", rq->run_id) &&
           ll_need_str(out, v, "jobKey", ll_is_job_key, "JobKey", 1, 200, &rq->job_key) &&
           ll_need_str(out, v, "businessKey", ll_is_business_key, "BusinessKey", 1, 200, &rq->business_key) &&
           ll_need_str(out, v, "hdfsRoot", ll_is_hdfs_path, "HdfsPath", 1, 1500, &rq->hdfs_root) &&
           ll_need_str(out, v, "stageTablePrefix", ll_is_table_prefix, "TablePrefix", 1, 61, &rq->prefix);
}

static json_t *reply(const ll_msg *m, const run_request *rq, const char *outcome, const char *code,
                     const char *message, const char *status, const char *path, const char *table)
{
    json_t *r = ll_reply_new(m, rq->run_id, NULL, outcome, code, message, status, NULL);
    json_object_set_new(r, "jobKey", json_string(rq->job_key));
    json_object_set_new(r, "businessKey", json_string(rq->business_key));
    json_object_set_new(r, "hdfsRunPath", path ? json_string(path) : json_null());
    json_object_set_new(r, "stageTable", table ? json_string(table) : json_null());
    /* docs/contract.md §5.1 step 5: DUPLICATE_ACTIVE_RUN carries details {jobKey, businessKey} (also on
     * replay) */
    if (code && strcmp(code, "DUPLICATE_ACTIVE_RUN") == 0)
        json_object_set_new(r, "details",
                            json_pack("{s:s,s:s}", "jobKey", rq->job_key, "businessKey", rq->business_key));
    return r;
}

/* Records a refusal so that every replay of this request is refused the same way. LL_DB_OK with the
 * reply set (the refusal is committed), or the failed statement's result (db->err). */
static ll_db_rc refuse(ll_db *db, const ll_msg *m, const run_request *rq, const char *code,
                       const char *message, ll_apply_out *out)
{
    const char *p[5] = {rq->run_id, rq->job_key, rq->business_key, code, message};
    PGresult *r = ll_db_exec(db, &ST_INSERT_REJECTION, p);
    if (!r)
        return LL_DB_ERROR;
    PQclear(r);
    json_t *details = json_pack("{s:s,s:s}", "jobKey", rq->job_key, "businessKey", rq->business_key);
    ll_event ev = {.name = "RUN_REJECTED",
                   .level = "WARN",
                   .run_id = rq->run_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .error_code = code,
                   .message = message,
                   .details = details};
    ll_db_rc rc = ll_event_insert(db, &ev);
    json_decref(details);
    if (rc != LL_DB_OK)
        return rc;
    out->reply = reply(m, rq, "REJECTED", code, message, NULL, NULL, NULL);
    return LL_DB_OK;
}

/* An earlier answer for this run id, if any: the run itself or its refusal (*known; the reply set).
 * LL_DB_OK, or LL_DB_ERROR (db->err). */
static ll_db_rc replay_if_known(ll_db *db, const ll_msg *m, const run_request *rq, ll_apply_out *out,
                                bool *known)
{
    const char *p[1] = {rq->run_id};
    PGresult *r = ll_db_exec(db, &ST_FIND_RUN, p);
    *known = false;
    if (!r)
        return LL_DB_ERROR;
    if (PQntuples(r) == 1) {
        *known = true;
        bool same = strcmp(PQgetvalue(r, 0, 0), rq->job_key) == 0 &&
                    strcmp(PQgetvalue(r, 0, 1), rq->business_key) == 0;
        out->reply = same ? reply(m, rq, "REPLAY", NULL, NULL, PQgetvalue(r, 0, 2), ll_db_text(r, 0, 3),
                                  ll_db_text(r, 0, 4))
                          : reply(m, rq, "REJECTED", "RUN_ID_CONFLICT",
                                  "run id already used for another job or business key", PQgetvalue(r, 0, 2),
                                  NULL, NULL);
        PQclear(r);
        return LL_DB_OK;
    }
    PQclear(r);
    if (!(r = ll_db_exec(db, &ST_FIND_REJECTION, p)))
        return LL_DB_ERROR;
    if (PQntuples(r) == 1) {
        *known = true;
        out->reply = reply(m, rq, "REPLAY", PQgetvalue(r, 0, 0), ll_db_text(r, 0, 1), NULL, NULL, NULL);
    }
    PQclear(r);
    return LL_DB_OK;
}

static char *parameters_json(const run_request *rq)
{
    json_t *p = json_is_object(rq->parameters) ? json_deep_copy(rq->parameters) : json_object();
    json_object_set_new(p, "allowEmptySource", json_boolean(rq->allow_empty));
    char *s = json_dumps(p, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(p);
    return s;
}

ll_apply registrar_apply_run_request(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    run_request rq = {0};
    if (!read_request(m->value, &rq, out))
        return LL_APPLY_DEAD;
    bool known = false;
    ll_db_rc rc = replay_if_known(db, m, &rq, out, &known);
    if (rc != LL_DB_OK)
        return ll_apply_of_db(rc);
    if (known)
        return LL_APPLY_ROLLBACK; /* answered from the ledger; nothing to write */
    if (ll_path_has_dotdot(rq.hdfs_root))
        return ll_apply_of_db(refuse(db, m, &rq, "INVALID_HDFS_ROOT", "hdfsRoot has a '..' segment", out));

    char path[2048], table[160];
    if (ll_hdfs_run_path(rq.hdfs_root, rq.job_key, rq.run_id, path, sizeof path) != 0 ||
        ll_stage_table(rq.prefix, rq.run_id, table, sizeof table) != 0 || strlen(path) > 1000) {
        ll_invalid(out, "hdfsRoot: the run path would exceed 1000 characters");
        return LL_APPLY_DEAD;
    }
    char *params = parameters_json(&rq);
    const char *p[6] = {rq.run_id, rq.job_key, rq.business_key, path, table, params};
    PGresult *r = ll_db_exec(db, &ST_INSERT_RUN, p);
    free(params);
    if (!r)
        return LL_APPLY_DB; /* a failed statement (the same run id inserted meanwhile: load_run_pkey) */
    bool inserted = PQntuples(r) == 1;
    PQclear(r);
    if (!inserted)
        return ll_apply_of_db(refuse(db, m, &rq, "DUPLICATE_ACTIVE_RUN",
                                     "another run of this job and business key is active", out));
    json_t *details = json_pack("{s:s,s:s}", "hdfsRunPath", path, "stageTable", table);
    ll_event ev = {.name = "RUN_STARTED",
                   .level = "INFO",
                   .run_id = rq.run_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .details = details};
    rc = ll_event_insert(db, &ev);
    json_decref(details);
    if (rc != LL_DB_OK)
        return LL_APPLY_DB;
    out->reply = reply(m, &rq, "ACCEPTED", NULL, NULL, "CREATED", path, table);
    return LL_APPLY_COMMIT;
}
