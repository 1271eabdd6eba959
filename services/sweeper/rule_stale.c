/*
 * rule_stale.c - rule 1, stale partitions (docs/contract.md §7.1): runs EXTRACTING with a RUNNING
 * partition whose heartbeat is older than recovery.stale, or (closing the gap of §13) a RETRY
 * partition whose reissue nobody claimed within recovery.stale. Runs are taken oldest first with
 * FOR UPDATE SKIP LOCKED (a run being reported on waits for the next tick), then their stale
 * partitions (run -> partition order). ll_stale_decide chooses: REISSUE with the same SCN
 * (RETRY, the old attempt's files invalidated, a REISSUE_PARTITION dispatch through the outbox),
 * or the whole run TIMED_OUT.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/ledger.h"
#include "ll/log.h"
#include "sweeper.h"

static const ll_stmt ST_STALE_RUNS = {
    "sweep_stale_runs",
    "SELECT r.run_id::text FROM nifi_ops.load_run r WHERE r.status = 'EXTRACTING' AND EXISTS ("
    "   SELECT 1 FROM nifi_ops.load_partition p WHERE p.run_id = r.run_id"
    "   AND p.status IN ('RUNNING', 'RETRY') AND p.heartbeat_at < clock_timestamp() - $1::interval)"
    " ORDER BY r.started_at FOR UPDATE OF r SKIP LOCKED",
    1};

static const ll_stmt ST_STALE_PARTITIONS = {
    "sweep_stale_partitions",
    "SELECT partition_id, attempt_count, status = 'RETRY' FROM nifi_ops.load_partition"
    " WHERE run_id = $1::uuid AND status IN ('RUNNING', 'RETRY')"
    " AND heartbeat_at < clock_timestamp() - $2::interval ORDER BY partition_id FOR UPDATE",
    2};

static const ll_stmt ST_TO_RETRY = {
    "sweep_to_retry",
    "UPDATE nifi_ops.load_partition SET status = 'RETRY', claim_token = NULL, worker_node = NULL,"
    " written_file_count = 0, written_row_count = 0, written_byte_count = 0, written_count_sum = 0,"
    " written_count_sumsq = 0," /* its WRITTEN files are invalidated in the same transaction */
    " heartbeat_at = clock_timestamp(), error_code = 'HEARTBEAT_STALE',"
    " error_message = 'reset by sweeper for reissue'"
    " WHERE run_id = $1::uuid AND partition_id = $2 AND status = 'RUNNING'",
    2};

static const ll_stmt ST_INVALIDATE_FILES = {
    "sweep_invalidate_files",
    "UPDATE nifi_ops.load_file SET status = 'FAILED', updated_at = clock_timestamp()"
    " WHERE run_id = $1::uuid AND partition_id = $2 AND status = 'WRITTEN'",
    2};

/* The dispatch id derives from (run, partition, attempt): a re-run tick cannot mint a second one. */
static const ll_stmt ST_ENQUEUE_REISSUE = {
    "sweep_enqueue_reissue",
    "INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, partition_id, status,"
    " next_attempt_at, created_at) VALUES ($3::uuid, $1::uuid, 'REISSUE_PARTITION', $2, 'PENDING',"
    " clock_timestamp(), clock_timestamp()) ON CONFLICT (dispatch_id) DO NOTHING",
    3};

static const ll_stmt ST_NOTIFY = {"sweep_notify", "SELECT pg_notify('load_dispatch', $1)", 1};

static const ll_stmt ST_TIMEOUT_PARTITIONS = {
    "sweep_timeout_partitions",
    "UPDATE nifi_ops.load_partition SET status = 'TIMED_OUT', error_code = $2,"
    " completed_at = clock_timestamp() WHERE run_id = $1::uuid AND status IN ('PENDING', 'RUNNING', 'RETRY')",
    2};

static const ll_stmt ST_TIMEOUT_RUN = {
    "sweep_timeout_run",
    "UPDATE nifi_ops.load_run SET status = 'TIMED_OUT', error_stage = 'SWEEPER', error_code = $2,"
    " error_message = left($3, 2000), completed_at = clock_timestamp(),"
    " heartbeat_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status IN ('CREATED', 'EXTRACTING')",
    3};

ll_db_rc sweep_timeout_run(ll_db *db, const char *run_id, const char *reason, const char *message,
                           json_t *details)
{
    const char *p2[2] = {run_id, reason};
    const char *p3[3] = {run_id, reason, message};
    ll_event ev = {.name = "RUN_TIMED_OUT",
                   .level = "ERROR",
                   .run_id = run_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .error_code = reason,
                   .message = message,
                   .details = details};
    if (ll_db_exec_discard(db, &ST_TIMEOUT_PARTITIONS, p2) != LL_DB_OK ||
        ll_db_exec_discard(db, &ST_TIMEOUT_RUN, p3) != LL_DB_OK)
        return LL_DB_ERROR;
    return ll_event_insert(db, &ev);
}

/* docs/contract.md §7.1 REISSUE: one stale RUNNING partition back to RETRY with a new dispatch. */
static ll_db_rc reissue(ll_db *db, const char *run_id, const char *pid, int attempt)
{
    const char *p[2] = {run_id, pid};
    char name[160], dispatch_id[37];
    snprintf(name, sizeof name, "REISSUE_PARTITION/%s/%s/%d", run_id, pid, attempt);
    ll_uuid_v5(LL_UUID_NAMESPACE, name, dispatch_id);
    const char *d[3] = {run_id, pid, dispatch_id};
    if (ll_db_exec_discard(db, &ST_TO_RETRY, p) != LL_DB_OK)
        return LL_DB_ERROR;
    PGresult *r = ll_db_exec(db, &ST_INVALIDATE_FILES, p);
    if (!r)
        return LL_DB_ERROR;
    long invalidated = ll_db_affected(r);
    PQclear(r);
    const char *n[1] = {run_id};
    if (ll_db_exec_discard(db, &ST_ENQUEUE_REISSUE, d) != LL_DB_OK ||
        ll_db_exec_discard(db, &ST_NOTIFY, n) != LL_DB_OK)
        return LL_DB_ERROR;
    json_t *details = json_pack("{s:i,s:i,s:s}", "attempt", attempt, "invalidatedFiles", (int)invalidated,
                                "dispatchId", dispatch_id);
    ll_event ev = {.name = "RECOVERY_REISSUED",
                   .level = "WARN",
                   .run_id = run_id,
                   .partition_id = pid,
                   .chunk_index = -1,
                   .row_count = -1,
                   .error_code = "HEARTBEAT_STALE",
                   .details = details};
    ll_db_rc rc = ll_event_insert(db, &ev);
    json_decref(details);
    return rc;
}

static ll_db_rc sweep_run(ll_db *db, const sweep_settings *s, const char *run_id, const char *stale,
                          sweep_counts *c)
{
    const char *p[2] = {run_id, stale};
    PGresult *r = ll_db_exec(db, &ST_STALE_PARTITIONS, p);
    if (!r)
        return LL_DB_ERROR;
    size_t n = (size_t)PQntuples(r);
    int *attempts = calloc(n + 1, sizeof *attempts);
    bool *retry = calloc(n + 1, sizeof *retry);
    for (size_t i = 0; i < n; i++) {
        attempts[i] = (int)ll_db_ll(r, (int)i, 1, 0);
        retry[i] = ll_db_bool(r, (int)i, 2);
    }
    const char *reason = NULL;
    ll_db_rc rc = LL_DB_OK;
    if (n > 0 && ll_stale_decide(s->mode, s->max_attempts, attempts, retry, n, &reason) == LL_STALE_REISSUE) {
        for (size_t i = 0; i < n && rc == LL_DB_OK; i++, c->reissue_partition++)
            rc = reissue(db, run_id, PQgetvalue(r, (int)i, 0), attempts[i]);
        if (rc == LL_DB_OK)
            rc = ll_run_touch(db, run_id);
    } else if (n > 0) {
        json_t *ids = json_array();
        char msg[2000] = "stale partitions:";
        for (size_t i = 0; i < n; i++) {
            json_array_append_new(ids, json_string(PQgetvalue(r, (int)i, 0)));
            size_t used = strlen(msg);
            snprintf(msg + used, sizeof msg - used, "%s %s", i ? "," : "", PQgetvalue(r, (int)i, 0));
        }
        json_t *details = json_pack("{s:o}", "stalePartitions", ids);
        rc = sweep_timeout_run(db, run_id, reason, msg, details);
        json_decref(details);
        c->timeout_stale_partition++;
    }
    free(attempts);
    free(retry);
    PQclear(r);
    return rc;
}

ll_db_rc rule_stale_partitions(ll_db *db, const sweep_settings *s, sweep_counts *c)
{
    char stale[48];
    sweep_interval_text(s->stale_ms, stale, sizeof stale);
    const char *p[1] = {stale};
    PGresult *runs = ll_db_exec(db, &ST_STALE_RUNS, p);
    if (!runs)
        return LL_DB_ERROR;
    ll_db_rc rc = LL_DB_OK;
    for (int i = 0; i < PQntuples(runs) && rc == LL_DB_OK; i++)
        rc = sweep_run(db, s, PQgetvalue(runs, i, 0), stale, c);
    PQclear(runs);
    return rc;
}
