/*
 * chunk_report.c - a worker reports one Parquet file of a partition (docs/contract.md §5.4).
 *
 * Checks in the contract's order: chunkIndex < chunkCount (before any lock); lock run and
 * partition; token (CLAIM_MISMATCH, or deferred while its claim may still come); path inside
 * the run (HDFS_PATH_OUTSIDE_RUN); then one statement (ST_RECORD_FILE) compares, upserts the file
 * row (a path used by another chunk: UNIQUE_VIOLATION), and keeps the partition's counters of
 * WRITTEN files with its heartbeat; a changed report after partition SUCCESS: CHUNK_CONFLICT,
 * nothing written; the run's heartbeat once per batch (ll_msg_touch_run); then the gate over the
 * counters (ll_chunk_counters_complete, the files themselves only when the counters cannot prove
 * it; ll_chunk_gate): SUCCESS of the partition and the extract-completion CAS with its outbox
 * row, or ROW_COUNT_MISMATCH. O(1) per chunk (issue 8 §3).
 *
 * A replay writes nothing (docs/design.md §5): the file row is written only when the report
 * changed it in the contract's sense (chunkCount, path, recordCount or byteCount; the fragment id
 * is not compared, step 5) or revives a row the sweeper invalidated, and only such a write moves
 * the partition and run heartbeats and answers ACCEPTED; anything else is a REPLAY. The reference also
 * refreshes them on an identical re-report (§5.4 step 7); here a replayed chunk of a dead worker must not
 * keep its partition alive for the sweeper. A run the ledger holds without its manifest after
 * loop.prerequisite_wait answers PARTITION_NOT_FOUND; an unknown run or a claim token never granted is
 * dead-lettered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "completion.h"
#include "ll/apply.h"
#include "ll/fields.h"
#include "ll/rules.h"

/*
 * docs/contract.md §5.4 steps 5-7 in one statement (issue 8 §2-§3): the stored row (to compare), the path
 * check (another chunk's path: UNIQUE_VIOLATION without writing), the upsert ($9: may write; an
 * identical report writes nothing), and, only when a row was written, the partition's counters of
 * WRITTEN files (migration 0007: the new row's contribution less the old one's) with its
 * heartbeat. A path taken by a concurrent transaction between the check and the insert fails the
 * statement (23505); the loop then rolls this message back to its savepoint.
 */
static const ll_stmt ST_RECORD_FILE = {
    "chunk_record_file",
    "WITH old AS (SELECT fragment_count, hdfs_path, record_count, byte_count, status FROM nifi_ops.load_file"
    " WHERE run_id = $1::uuid AND partition_id = $2 AND chunk_index = $3::int),"
    " taken AS (SELECT 1 FROM nifi_ops.load_file WHERE hdfs_path = $6"
    " AND (run_id, partition_id, chunk_index) <> ($1::uuid, $2, $3::int) LIMIT 1),"
    " up AS (INSERT INTO nifi_ops.load_file (run_id, partition_id, chunk_index, fragment_identifier,"
    " fragment_count, hdfs_path, record_count, byte_count, status, written_at, updated_at)"
    " SELECT $1::uuid, $2, $3::int, $4, $5::int, $6, $7::bigint, $8::bigint, 'WRITTEN',"
    " clock_timestamp(), clock_timestamp() WHERE $9::boolean AND NOT EXISTS (SELECT 1 FROM taken)"
    " ON CONFLICT (run_id, partition_id, chunk_index) DO UPDATE SET"
    " fragment_identifier = excluded.fragment_identifier, fragment_count = excluded.fragment_count,"
    " hdfs_path = excluded.hdfs_path, record_count = excluded.record_count,"
    " byte_count = excluded.byte_count, status = 'WRITTEN', updated_at = clock_timestamp()"
    " WHERE (load_file.fragment_count, load_file.hdfs_path, load_file.record_count, load_file.byte_count,"
    " load_file.status) IS DISTINCT FROM"
    " (excluded.fragment_count, excluded.hdfs_path, excluded.record_count, excluded.byte_count, 'WRITTEN')"
    " RETURNING 1),"
    " was AS (SELECT count(*) AS files, coalesce(sum(record_count), 0) AS rows,"
    " coalesce(sum(coalesce(byte_count, 0)), 0) AS bytes, coalesce(sum(fragment_count), 0) AS csum,"
    " coalesce(sum(fragment_count::bigint * fragment_count), 0) AS csumsq FROM old WHERE status = 'WRITTEN'),"
    " part AS (UPDATE nifi_ops.load_partition p SET written_file_count = p.written_file_count + 1 - "
    "was.files,"
    " written_row_count = p.written_row_count + $7::bigint - was.rows,"
    " written_byte_count = p.written_byte_count + coalesce($8::bigint, 0) - was.bytes,"
    " written_count_sum = p.written_count_sum + $5::bigint - was.csum,"
    " written_count_sumsq = p.written_count_sumsq + $5::bigint * $5::bigint - was.csumsq,"
    " heartbeat_at = clock_timestamp() FROM was"
    " WHERE p.run_id = $1::uuid AND p.partition_id = $2 AND EXISTS (SELECT 1 FROM up)"
    " RETURNING p.written_file_count, p.written_row_count, p.written_byte_count, p.written_count_sum,"
    " p.written_count_sumsq)"
    " SELECT EXISTS (SELECT 1 FROM taken), EXISTS (SELECT 1 FROM up), o.fragment_count IS NOT NULL,"
    " o.fragment_count, o.hdfs_path, o.record_count, o.byte_count, part.written_file_count,"
    " part.written_row_count, part.written_byte_count, part.written_count_sum, part.written_count_sumsq"
    " FROM (SELECT 1) one LEFT JOIN old o ON true LEFT JOIN part ON true",
    9};

/* docs/contract.md §5.4 step 8. */
static const ll_stmt ST_AGGREGATE = {
    "chunk_aggregate",
    "SELECT count(*), coalesce(min(chunk_index), 0), coalesce(max(chunk_index), 0),"
    " coalesce(sum(record_count), 0), coalesce(sum(coalesce(byte_count, 0)), 0),"
    " count(DISTINCT fragment_count) FROM nifi_ops.load_file"
    " WHERE run_id = $1::uuid AND partition_id = $2 AND status = 'WRITTEN'",
    2};

static const ll_stmt ST_PARTITION_SUCCESS = {
    "chunk_partition_success",
    "UPDATE nifi_ops.load_partition SET status = 'SUCCESS', actual_row_count = $4::bigint,"
    " file_count = $5::int, fragment_count = $5::int, byte_count = $6::bigint,"
    " completed_at = clock_timestamp(), heartbeat_at = clock_timestamp()"
    " WHERE run_id = $1::uuid AND partition_id = $2 AND status = 'RUNNING' AND claim_token = $3::uuid",
    6};

static const ll_stmt ST_RUN_PARTITION_SUCCESS = {
    "chunk_run_partition_success",
    "UPDATE nifi_ops.load_run SET success_partition_count = success_partition_count + 1,"
    " heartbeat_at = clock_timestamp() WHERE run_id = $1::uuid",
    1};

static const ll_stmt ST_PARTITION_MISMATCH = {
    "chunk_partition_mismatch",
    "UPDATE nifi_ops.load_partition SET status = 'FAILED', error_code = 'ROW_COUNT_MISMATCH',"
    " error_message = $3, completed_at = clock_timestamp(), heartbeat_at = clock_timestamp()"
    " WHERE run_id = $1::uuid AND partition_id = $2 AND status = 'RUNNING'",
    3};

static const ll_stmt ST_RUN_GATE_FAILED_COUNT = {
    "chunk_run_gate_failed_count",
    "UPDATE nifi_ops.load_run SET failed_partition_count = failed_partition_count + 1,"
    " heartbeat_at = clock_timestamp() WHERE run_id = $1::uuid",
    1};

/* The run's failure as ll_gate_run_failure decided it, a compare-and-set on EXTRACTING. */
static const ll_stmt ST_RUN_GATE_FAIL = {
    "chunk_run_gate_fail",
    "UPDATE nifi_ops.load_run SET status = $2, error_stage = $3, error_code = $4,"
    " error_message = left($5, 2000), completed_at = clock_timestamp(), version_no = version_no + 1"
    " WHERE run_id = $1::uuid AND status = 'EXTRACTING'",
    5};

bool chunk_read(const json_t *v, chunk_in *c, ll_apply_out *out)
{
    json_t *b = json_object_get(v, "byteCount");
    c->bytes = -1;
    if (json_is_integer(b) && (c->bytes = (int64_t)json_integer_value(b)) < 0) {
        ll_invalid(out, "byteCount: must be ≥ 0");
        return false; /* said outright: the analyser does not see that ll_invalid returns false */
    }
    return ll_need_uuid(out, v, "runId", c->run_id) &&
           ll_need_str(out, v, "partitionId", ll_is_partition_id, "^([0-9]{4}|NULL)$", 4, 4,
                       &c->partition_id) &&
           ll_need_uuid(out, v, "claimToken", c->token) &&
           ll_need_int(out, v, "chunkIndex", 0, INT32_MAX, &c->index) &&
           ll_need_int(out, v, "chunkCount", 1, 1000000, &c->count) &&
           ll_need_opt_str(out, v, "fragmentIdentifier", 100, &c->fragment) &&
           ll_need_str(out, v, "hdfsPath", NULL, NULL, 1, 1500, &c->path) &&
           ll_need_int(out, v, "recordCount", 0, INT64_MAX, &c->records);
}

json_t *chunk_outcome(const ll_msg *m, const chunk_in *c, const char *result, const char *code,
                      const char *message, const char *run_status, const char *part_status,
                      long long received, bool scheduled)
{
    json_t *r = ll_reply_new(m, c->run_id, c->partition_id, result, code, message, run_status, part_status);
    json_object_set_new(r, "claimToken", json_string(c->token));
    json_object_set_new(r, "chunkIndex", json_integer(c->index));
    json_object_set_new(r, "chunkCount", json_integer(c->count));
    json_object_set_new(r, "recorded", json_boolean(code == NULL));
    json_object_set_new(r, "receivedChunks", json_integer(received));
    json_object_set_new(r, "validationScheduled", json_boolean(scheduled));
    return r;
}

/* What recording one chunk found and did. */
typedef struct file_result {
    bool path_taken; /* hdfsPath already recorded for another chunk: nothing written */
    bool written;    /* a row was inserted or changed */
    bool changed;    /* the report differs from the stored row (step 5; fragment id not compared) */
    ll_chunk_counters counters; /* the partition's counters after the write (when written) */
} file_result;

/* Records the chunk (ST_RECORD_FILE); may_write false only compares (a SUCCESS partition). */
static ll_db_rc record_file(ll_db *db, const chunk_in *c, const char *const *key, bool may_write,
                            file_result *fr)
{
    char count[16], records[24], bytes[24];
    snprintf(count, sizeof count, "%lld", (long long)c->count);
    snprintf(records, sizeof records, "%lld", (long long)c->records);
    snprintf(bytes, sizeof bytes, "%lld", (long long)c->bytes);
    const char *p[9] = {key[0],
                        key[1],
                        key[2],
                        c->fragment,
                        count,
                        c->path,
                        records,
                        c->bytes >= 0 ? bytes : NULL,
                        may_write ? "true" : "false"};
    PGresult *r = ll_db_exec(db, &ST_RECORD_FILE, p);
    if (!r)
        return LL_DB_ERROR;
    memset(fr, 0, sizeof *fr);
    fr->path_taken = ll_db_bool(r, 0, 0);
    fr->written = ll_db_bool(r, 0, 1);
    fr->changed = true;
    if (ll_db_bool(r, 0, 2)) {
        fr->changed = ll_db_ll(r, 0, 3, -1) != c->count || strcmp(PQgetvalue(r, 0, 4), c->path) != 0 ||
                      ll_db_ll(r, 0, 5, -1) != c->records || ll_db_ll(r, 0, 6, -1) != c->bytes;
    }
    fr->counters = (ll_chunk_counters){.files = ll_db_ll(r, 0, 7, 0),
                                       .rows = ll_db_ll(r, 0, 8, 0),
                                       .bytes = ll_db_ll(r, 0, 9, 0),
                                       .count_sum = ll_db_ll(r, 0, 10, 0),
                                       .count_sumsq = ll_db_ll(r, 0, 11, 0)};
    PQclear(r);
    return LL_DB_OK;
}

/* docs/contract.md §5.4 step 10, gate passed: partition SUCCESS, then the run's completion CAS. */
static ll_db_rc pass_gate(ll_db *db, const chunk_in *c, const ll_chunk_aggregate *agg, bool *won)
{
    char rows[24], files[24], bytes[24];
    snprintf(rows, sizeof rows, "%lld", (long long)agg->rows);
    snprintf(files, sizeof files, "%lld", (long long)agg->files);
    snprintf(bytes, sizeof bytes, "%lld", (long long)agg->bytes);
    const char *p[6] = {c->run_id, c->partition_id, c->token, rows, files, bytes};
    const char *run[1] = {c->run_id};
    ll_db_rc rc = ll_db_exec_discard(db, &ST_PARTITION_SUCCESS, p);
    if (rc == LL_DB_OK)
        rc = ll_db_exec_discard(db, &ST_RUN_PARTITION_SUCCESS, run);
    if (rc != LL_DB_OK)
        return rc;
    json_t *details =
        json_pack("{s:I,s:I}", "files", (json_int_t)agg->files, "bytes", (json_int_t)agg->bytes);
    ll_event ev = {.name = "PARTITION_SUCCESS",
                   .level = "INFO",
                   .run_id = c->run_id,
                   .partition_id = c->partition_id,
                   .chunk_index = -1,
                   .row_count = agg->rows,
                   .details = details};
    rc = ll_event_insert(db, &ev);
    json_decref(details);
    return rc == LL_DB_OK ? ll_run_complete_extract(db, c->run_id, won) : rc;
}

/* docs/contract.md §5.4 step 10, gate failed: ROW_COUNT_MISMATCH for the partition, and for the run while
 * it is EXTRACTING (ll_gate_run_failure decides; a compare-and-set writes it). *after: the run's
 * status afterwards. LL_DB_OK, or the failed statement's result. */
static ll_db_rc fail_gate(ll_db *db, const chunk_in *c, const ll_chunk_aggregate *agg, int64_t expected,
                          ll_run_status current, ll_run_status *after)
{
    char msg[256];
    ll_gate_mismatch_message(agg, (int32_t)c->count, expected, msg, sizeof msg);
    const char *p[3] = {c->run_id, c->partition_id, msg};
    const char *run[1] = {c->run_id};
    ll_db_rc rc = ll_db_exec_discard(db, &ST_PARTITION_MISMATCH, p);
    if (rc == LL_DB_OK)
        rc = ll_db_exec_discard(db, &ST_RUN_GATE_FAILED_COUNT, run);
    if (rc != LL_DB_OK)
        return rc;
    ll_event pe = {.name = "PARTITION_FAILED",
                   .level = "ERROR",
                   .run_id = c->run_id,
                   .partition_id = c->partition_id,
                   .chunk_index = -1,
                   .row_count = agg->rows,
                   .error_code = "ROW_COUNT_MISMATCH",
                   .message = msg};
    if ((rc = ll_event_insert(db, &pe)) != LL_DB_OK)
        return rc;
    *after = current;
    ll_run_fail f;
    if (!ll_gate_run_failure(current, &f))
        return LL_DB_OK;
    const char *q[5] = {c->run_id, ll_run_status_name(f.status), f.stage, f.code, msg};
    PGresult *r = ll_db_exec(db, &ST_RUN_GATE_FAIL, q);
    if (!r)
        return LL_DB_ERROR;
    bool failed = ll_db_affected(r) == 1;
    PQclear(r);
    if (!failed)
        return LL_DB_OK; /* not EXTRACTING after all: the run keeps its status and first error */
    *after = f.status;
    ll_event re = {.name = "RUN_FAILED",
                   .level = "ERROR",
                   .run_id = c->run_id,
                   .partition_id = c->partition_id,
                   .chunk_index = -1,
                   .row_count = -1,
                   .error_code = f.code,
                   .message = msg};
    return ll_event_insert(db, &re);
}

/* docs/contract.md §5.4 step 8 from the files themselves. LL_DB_OK, or LL_DB_ERROR (db->err). */
static ll_db_rc aggregate(ll_db *db, const char *const *key, ll_chunk_aggregate *agg)
{
    PGresult *r = ll_db_exec(db, &ST_AGGREGATE, key);
    if (!r)
        return LL_DB_ERROR;
    agg->files = ll_db_ll(r, 0, 0, 0);
    agg->lo = ll_db_ll(r, 0, 1, 0);
    agg->hi = ll_db_ll(r, 0, 2, 0);
    agg->rows = ll_db_ll(r, 0, 3, 0);
    agg->bytes = ll_db_ll(r, 0, 4, 0);
    agg->distinct_counts = ll_db_ll(r, 0, 5, 0);
    PQclear(r);
    return LL_DB_OK;
}

/* Steps 5-10 once ownership and the path are settled. LL_DB_OK with the reply set, LL_DB_ROLLBACK
 * after a rejection (UNIQUE_VIOLATION, CHUNK_CONFLICT: nothing kept), or the failed statement's
 * result. */
static ll_db_rc record_and_judge(ll_db *db, const ll_msg *m, const chunk_in *c, owned_partition *op,
                                 ll_apply_out *out)
{
    char idx[16];
    snprintf(idx, sizeof idx, "%lld", (long long)c->index);
    const char *key[3] = {c->run_id, c->partition_id, idx};
    const char *rs = ll_run_status_name(op->run.status), *ps = ll_part_status_name(op->status);
    file_result fr;
    /* a SUCCESS partition's files are never written again: identical is a REPLAY, else CHUNK_CONFLICT */
    ll_db_rc rc = record_file(db, c, key, op->status != LL_PART_SUCCESS, &fr);
    if (rc != LL_DB_OK)
        return rc;
    if (fr.path_taken) {
        out->reply = chunk_outcome(m, c, "REJECTED", "UNIQUE_VIOLATION",
                                   "hdfsPath already recorded for another chunk (uq_load_file_path)", rs, ps,
                                   0, false);
        /* docs/contract.md §4.1: UNIQUE_VIOLATION names its constraint in details */
        json_object_set_new(out->reply, "details", json_pack("{s:s}", "constraint", "uq_load_file_path"));
        return LL_DB_ROLLBACK;
    }
    if (op->status == LL_PART_SUCCESS && fr.changed) {
        out->reply = chunk_outcome(m, c, "REJECTED", "CHUNK_CONFLICT",
                                   "chunk differs from the one recorded before the partition succeeded", rs,
                                   ps, 0, false);
        return LL_DB_ROLLBACK;
    }
    /* step 7, only for progress (a replayed report must not keep a dead worker's partition
     * alive): the partition's heartbeat moved with its counters, the run's moves once per batch */
    if (fr.written)
        ll_msg_touch_run(m, c->run_id);
    ll_chunk_counters cnt = fr.written ? fr.counters : op->written;
    ll_chunk_aggregate agg = {.files = cnt.files, .rows = cnt.rows, .bytes = cnt.bytes};
    /* step 8 from the counters; the files themselves only when they cannot prove the answer */
    const char *pk[2] = {c->run_id, c->partition_id};
    if (op->run.status == LL_RUN_EXTRACTING && op->status == LL_PART_RUNNING && cnt.files >= c->count &&
        !ll_chunk_counters_complete(&cnt, (int32_t)c->count, &agg) &&
        (rc = aggregate(db, pk, &agg)) != LL_DB_OK)
        return rc;
    const char *result = fr.written ? "ACCEPTED" : "REPLAY";
    bool won = false;
    ll_run_status after = op->run.status;
    switch (ll_chunk_gate(op->run.status, op->status, &agg, (int32_t)c->count, op->expected_rows)) {
    case LL_GATE_PASS:
        if ((rc = pass_gate(db, c, &agg, &won)) != LL_DB_OK)
            return rc;
        out->reply = chunk_outcome(m, c, result, NULL, NULL, won ? "EXTRACTED_VALIDATED" : rs, "SUCCESS",
                                   agg.files, won);
        break;
    case LL_GATE_MISMATCH:
        if ((rc = fail_gate(db, c, &agg, op->expected_rows, op->run.status, &after)) != LL_DB_OK)
            return rc;
        out->reply =
            chunk_outcome(m, c, result, NULL, NULL, ll_run_status_name(after), "FAILED", agg.files, false);
        break;
    case LL_GATE_WAIT:
    default:
        out->reply = chunk_outcome(m, c, result, NULL, NULL, rs, ps, agg.files, false);
        break;
    }
    return LL_DB_OK;
}

ll_apply completion_apply_chunk(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    chunk_in c;
    if (!chunk_read(m->value, &c, out))
        return LL_APPLY_DEAD;
    if (c.index >= c.count) {
        out->reply = chunk_outcome(m, &c, "REJECTED", "CHUNK_INDEX_OUT_OF_RANGE",
                                   "chunkIndex must be below chunkCount", NULL, NULL, 0, false);
        return LL_APPLY_ROLLBACK;
    }
    owned_partition op;
    ll_ownership own = LL_OWN_NO_RUN;
    ll_db_rc rc = lock_owned_partition(db, c.run_id, c.partition_id, c.token, &op, &own);
    ll_own_answer ans = ll_ownership_answer(own, m->wait_expired);
    ll_apply a = LL_APPLY_ROLLBACK;
    const char *rs = op.run.found ? ll_run_status_name(op.run.status) : NULL;
    if (rc != LL_DB_OK) {
        a = LL_APPLY_DB;
    } else if (ans == LL_OWN_DEFER_RUN || ans == LL_OWN_DEFER_MANIFEST || ans == LL_OWN_DEFER_TOKEN) {
        snprintf(out->reason, sizeof out->reason, "%s", ll_own_defer_reason(ans));
        a = LL_APPLY_DEFER;
    } else if (ans == LL_OWN_RUN_NOT_FOUND || ans == LL_OWN_PARTITION_NOT_FOUND) {
        out->reply = chunk_outcome(m, &c, "REJECTED",
                                   ans == LL_OWN_RUN_NOT_FOUND ? "RUN_NOT_FOUND" : "PARTITION_NOT_FOUND",
                                   NULL, rs, NULL, 0, false);
    } else if (ans == LL_OWN_CLAIM_MISMATCH) {
        out->reply =
            chunk_outcome(m, &c, "REJECTED", "CLAIM_MISMATCH", "claim token does not own the partition", rs,
                          ll_part_status_name(op.status), 0, false);
    } else if (!ll_chunk_path_inside_run(op.run.hdfs_run_path, c.path)) {
        out->reply =
            chunk_outcome(m, &c, "REJECTED", "HDFS_PATH_OUTSIDE_RUN", "hdfsPath is not below the run path",
                          rs, ll_part_status_name(op.status), 0, false);
    } else {
        a = ll_apply_of_db(record_and_judge(db, m, &c, &op, out));
    }
    owned_partition_clear(&op);
    return a;
}
