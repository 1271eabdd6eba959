/*
 * ledger.c - SQL shared by several services: events, the run lock, the extract-completion CAS
 * with its outbox row and NOTIFY (docs/contract.md §5.11, §5.12), the token history lookup.
 */
#include "ll/ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "ll/rules.h"

static const ll_stmt ST_EVENT = {
    "ledger_event_insert",
    "INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, run_id, job_key,"
    " business_key, partition_id, chunk_index, process_group, processor_name, row_count,"
    " error_class, error_code, message, details)"
    " SELECT $1::uuid, $2, $3::text, $4::uuid, r.job_key, r.business_key, $5, $6::int,"
    " 'LOAD_CONTROL_API', lower($3::text), $7::bigint, $8, $9, nullif(left($10, 2000), ''),"
    " coalesce($11::jsonb, '{}'::jsonb)"
    " FROM (SELECT 1) AS one LEFT JOIN nifi_ops.load_run r ON r.run_id = $4::uuid",
    11};

ll_db_rc ll_event_insert(ll_db *db, const ll_event *ev)
{
    char id[37], chunk[24], rows[24];
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, id);
    snprintf(chunk, sizeof chunk, "%lld", (long long)ev->chunk_index);
    snprintf(rows, sizeof rows, "%lld", (long long)ev->row_count);
    char *details = ev->details ? json_dumps(ev->details, JSON_COMPACT) : NULL;
    const char *p[11] = {id,
                         ev->level,
                         ev->name,
                         ev->run_id,
                         ev->partition_id,
                         ev->chunk_index >= 0 ? chunk : NULL,
                         ev->row_count >= 0 ? rows : NULL,
                         ev->error_class,
                         ev->error_code,
                         ev->message,
                         details};
    PGresult *r = ll_db_exec(db, &ST_EVENT, p);
    free(details);
    if (!r)
        return LL_DB_ERROR;
    PQclear(r);
    return LL_DB_OK;
}

static const ll_stmt ST_RUN_LOCK = {
    "ledger_run_lock",
    "SELECT status, job_key, business_key, snapshot_scn::text, hdfs_run_path, stage_table_name,"
    " source_count, coalesce((parameters->>'allowEmptySource')::boolean, false), error_code,"
    " error_message, publish_token::text, extracted_count"
    " FROM nifi_ops.load_run WHERE run_id = $1::uuid FOR UPDATE",
    1};

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

ll_db_rc ll_run_lock(ll_db *db, const char *run_id, ll_run_row *row)
{
    memset(row, 0, sizeof *row);
    const char *p[1] = {run_id};
    PGresult *r = ll_db_exec(db, &ST_RUN_LOCK, p);
    if (!r)
        return LL_DB_ERROR;
    if (PQntuples(r) == 1) {
        row->found = true;
        if (ll_run_status_parse(PQgetvalue(r, 0, 0), &row->status) != 0)
            row->status = LL_RUN_CREATED;
        snprintf(row->job_key, sizeof row->job_key, "%s", PQgetvalue(r, 0, 1));
        snprintf(row->business_key, sizeof row->business_key, "%s", PQgetvalue(r, 0, 2));
        row->snapshot_scn = dup_or_null(ll_db_text(r, 0, 3));
        row->hdfs_run_path = dup_or_null(ll_db_text(r, 0, 4));
        row->stage_table = dup_or_null(ll_db_text(r, 0, 5));
        row->source_count = ll_db_ll(r, 0, 6, -1);
        row->allow_empty_source = ll_db_bool(r, 0, 7);
        row->error_code = dup_or_null(ll_db_text(r, 0, 8));
        row->error_message = dup_or_null(ll_db_text(r, 0, 9));
        row->publish_token = dup_or_null(ll_db_text(r, 0, 10));
        row->extracted_count = ll_db_ll(r, 0, 11, 0);
    }
    PQclear(r);
    return LL_DB_OK;
}

void ll_run_row_clear(ll_run_row *row)
{
    free(row->snapshot_scn);
    free(row->hdfs_run_path);
    free(row->stage_table);
    free(row->error_code);
    free(row->error_message);
    free(row->publish_token);
    memset(row, 0, sizeof *row);
}

static const ll_stmt ST_RUN_TOUCH = {
    "ledger_run_touch",
    "UPDATE nifi_ops.load_run SET heartbeat_at = clock_timestamp() WHERE run_id = $1::uuid", 1};

ll_db_rc ll_run_touch(ll_db *db, const char *run_id)
{
    const char *p[1] = {run_id};
    PGresult *r = ll_db_exec(db, &ST_RUN_TOUCH, p);
    if (!r)
        return LL_DB_ERROR;
    PQclear(r);
    return LL_DB_OK;
}

static const ll_stmt ST_RUN_REJECTED = {
    "ledger_run_rejected", "SELECT 1 FROM nifi_ops.load_run_rejection WHERE run_id = $1::uuid", 1};

ll_db_rc ll_run_request_rejected(ll_db *db, const char *run_id, bool *rejected)
{
    const char *p[1] = {run_id};
    PGresult *r = ll_db_exec(db, &ST_RUN_REJECTED, p);
    if (!r)
        return LL_DB_ERROR;
    *rejected = PQntuples(r) > 0;
    PQclear(r);
    return LL_DB_OK;
}

/* docs/contract.md §5.11: counted freshly from load_partition; conditional on EXTRACTING. */
static const ll_stmt ST_COMPLETE = {
    "ledger_complete_extract",
    "WITH p AS (SELECT count(*) AS n, count(*) FILTER (WHERE status = 'SUCCESS') AS ok,"
    "   coalesce(sum(actual_row_count), 0) AS rows_sum"
    "   FROM nifi_ops.load_partition WHERE run_id = $1::uuid)"
    " UPDATE nifi_ops.load_run r SET status = 'EXTRACTED_VALIDATED',"
    "   success_partition_count = p.ok, extracted_count = p.rows_sum,"
    "   extract_completed_at = clock_timestamp(), heartbeat_at = clock_timestamp(),"
    "   version_no = r.version_no + 1"
    " FROM p WHERE r.run_id = $1::uuid AND r.status = 'EXTRACTING'"
    "   AND p.n = r.expected_partition_count AND p.ok = r.expected_partition_count"
    "   AND p.rows_sum = r.source_count"
    " RETURNING r.source_count",
    1};

/* docs/contract.md §5.12: at most one VALIDATE_RUN per run (uq_load_dispatch_validate). */
static const ll_stmt ST_ENQUEUE_VALIDATE = {
    "ledger_enqueue_validate",
    "INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, status,"
    " next_attempt_at, created_at) VALUES ($2::uuid, $1::uuid, 'VALIDATE_RUN', 'PENDING',"
    " clock_timestamp(), clock_timestamp())"
    " ON CONFLICT (run_id) WHERE dispatch_type = 'VALIDATE_RUN' DO NOTHING",
    2};

static const ll_stmt ST_NOTIFY = {"ledger_notify", "SELECT pg_notify('load_dispatch', $1)", 1};

void ll_validate_dispatch_id(const char *run_id, char out[37])
{
    char name[80];
    snprintf(name, sizeof name, "VALIDATE_RUN/%s", run_id);
    ll_uuid_v5(LL_UUID_NAMESPACE, name, out);
}

ll_db_rc ll_run_complete_extract(ll_db *db, const char *run_id, bool *won)
{
    const char *p[1] = {run_id};
    *won = false;
    PGresult *r = ll_db_exec(db, &ST_COMPLETE, p);
    if (!r)
        return LL_DB_ERROR;
    long long source_count = PQntuples(r) == 1 ? ll_db_ll(r, 0, 0, 0) : -1;
    *won = PQntuples(r) == 1;
    PQclear(r);
    if (!*won)
        return LL_DB_OK;
    char dispatch_id[37];
    ll_validate_dispatch_id(run_id, dispatch_id);
    const char *q[2] = {run_id, dispatch_id};
    if (!(r = ll_db_exec(db, &ST_ENQUEUE_VALIDATE, q)))
        return LL_DB_ERROR;
    PQclear(r);
    if (!(r = ll_db_exec(db, &ST_NOTIFY, p)))
        return LL_DB_ERROR;
    PQclear(r);
    json_t *details = json_pack("{s:s}", "dispatchId", dispatch_id);
    ll_event ev = {.name = "EXTRACT_VALIDATED",
                   .level = "INFO",
                   .run_id = run_id,
                   .chunk_index = -1,
                   .row_count = source_count,
                   .details = details};
    ll_db_rc rc = ll_event_insert(db, &ev);
    json_decref(details);
    return rc;
}

/* docs/contract.md §5.6 step 5: the CAS from the pair's expectedStatus to its failStatus. */
static const ll_stmt ST_RUN_FAIL = {
    "ledger_run_fail",
    "UPDATE nifi_ops.load_run SET status = $3, error_stage = left($4, 80), error_code = $5,"
    " error_message = nullif(left($6, 2000), ''), completed_at = clock_timestamp(),"
    " heartbeat_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status = $2",
    6};

ll_db_rc ll_run_fail_apply(ll_db *db, const ll_run_failure *f, bool *changed)
{
    if (changed)
        *changed = false;
    if (!ll_fail_pair_allowed(f->expected, f->fail))
        return LL_DB_ERROR;
    const char *from = ll_run_status_name(f->expected), *to = ll_run_status_name(f->fail);
    const char *message = f->message ? f->message : "";
    const char *p[6] = {f->run_id, from, to, f->stage, f->code, message};
    PGresult *r = ll_db_exec(db, &ST_RUN_FAIL, p);
    if (!r)
        return LL_DB_ERROR;
    long n = ll_db_affected(r);
    PQclear(r);
    if (n != 1)
        return LL_DB_OK;
    json_t *details = json_pack("{s:s,s:s,s:s}", "stage", f->stage, "from", from, "to", to);
    if (f->extra)
        json_object_update_missing(details, (json_t *)f->extra);
    ll_event ev = {.name = "RUN_FAILED",
                   .level = "ERROR",
                   .run_id = f->run_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .error_code = f->code,
                   .message = message,
                   .details = details};
    ll_db_rc rc = ll_event_insert(db, &ev);
    json_decref(details);
    if (rc == LL_DB_OK && changed)
        *changed = true;
    return rc;
}

static const ll_stmt ST_TOKEN_KNOWN = {
    "ledger_claim_token_known",
    "SELECT 1 FROM nifi_ops.load_claim_token WHERE run_id = $1::uuid AND partition_id = $2"
    " AND claim_token = $3::uuid",
    3};

ll_db_rc ll_claim_token_known(ll_db *db, const char *run_id, const char *partition_id, const char *token,
                              bool *known)
{
    const char *p[3] = {run_id, partition_id, token};
    PGresult *r = ll_db_exec(db, &ST_TOKEN_KNOWN, p);
    if (!r)
        return LL_DB_ERROR;
    *known = PQntuples(r) > 0;
    PQclear(r);
    return LL_DB_OK;
}
