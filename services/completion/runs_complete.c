/*
 * runs_complete.c - the completion CAS of many runs in one statement (docs/contract.md §5.11-§5.12), for
 * the set-based chunk path (chunk_bulk.c): what ll_run_complete_extract (core/ledger.c) does for
 * one run — the run EXTRACTING → EXTRACTED_VALIDATED when its partitions, counted afresh, are all
 * SUCCESS with the source's rows; its VALIDATE_RUN outbox row (one per run, uq_load_dispatch_validate,
 * id ll_validate_dispatch_id); the EXTRACT_VALIDATED event; a NOTIFY to the dispatcher — in one
 * round trip however many runs a poll batch completes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "ll/ledger.h"
#include "ll/pgarray.h"
#include "ll/strmap.h"

/* $1 the run ids, $2 their VALIDATE_RUN dispatch ids (same order). One row per run that won:
 * its id, then (the same on every row) how many outbox rows and events were written. The runs are
 * locked already (chunk_bulk.c step 1, in run-id order). The CAS on the status is a CASE so that
 * the planner reaches each run by its primary key, never by a status index (ix_load_run_active_status
 * since 0020, ix_load_run_status_heartbeat before: every
 * EXTRACTING run: 963 rows read for 2 in the benchmark's latency phase), as chunk_bulk_write.c's
 * gates do. */
static const ll_stmt ST_RUNS_COMPLETE = {
    "runs_complete_extract",
    "WITH k AS (SELECT * FROM unnest($1::uuid[], $2::uuid[]) AS k(run, did)),"
    " c AS (UPDATE nifi_ops.load_run r SET status = 'EXTRACTED_VALIDATED', success_partition_count = p.ok,"
    " extracted_count = p.rows_sum, extract_completed_at = clock_timestamp(), heartbeat_at = "
    "clock_timestamp(),"
    " version_no = r.version_no + 1"
    " FROM k, LATERAL (SELECT count(*) AS n, count(*) FILTER (WHERE status = 'SUCCESS') AS ok,"
    " coalesce(sum(actual_row_count), 0) AS rows_sum FROM nifi_ops.load_partition WHERE run_id = k.run) p"
    " WHERE r.run_id = k.run AND CASE WHEN r.status = 'EXTRACTING' THEN p.n = r.expected_partition_count"
    " AND p.ok = r.expected_partition_count AND p.rows_sum = r.source_count ELSE false END"
    " RETURNING r.run_id, r.source_count, r.job_key, r.business_key, k.did),"
    " d AS (INSERT INTO nifi_ops.load_dispatch (dispatch_id, run_id, dispatch_type, status, next_attempt_at,"
    " created_at) SELECT c.did, c.run_id, 'VALIDATE_RUN', 'PENDING', clock_timestamp(), clock_timestamp()"
    " FROM c ON CONFLICT (run_id) WHERE dispatch_type = 'VALIDATE_RUN' DO NOTHING RETURNING 1),"
    " e AS (INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, run_id, job_key, "
    "business_key,"
    " partition_id, chunk_index, process_group, processor_name, row_count, details)"
    " SELECT gen_random_uuid(), 'INFO', 'EXTRACT_VALIDATED', c.run_id, c.job_key, c.business_key, NULL, NULL,"
    " 'LOAD_CONTROL_API', 'extract_validated', c.source_count, jsonb_build_object('dispatchId', c.did::text)"
    " FROM c RETURNING 1)"
    " SELECT c.run_id::text, (SELECT count(*) FROM d), (SELECT count(*) FROM e)"
    " FROM c, LATERAL (SELECT pg_notify('load_dispatch', c.run_id::text)) AS notified",
    2};

ll_db_rc runs_complete_extract(ll_db *db, const char *const *run_ids, size_t n, bool *won)
{
    if (n == 0)
        return LL_DB_OK;
    ll_pgarray runs = {0}, dids = {0};
    ll_strmap at = {0}; /* run id -> its index, to mark the winners the statement returns */
    ll_strmap_init(&at, n);
    for (size_t i = 0; i < n; i++) {
        char did[37];
        ll_validate_dispatch_id(run_ids[i], did);
        ll_pgarray_add(&runs, run_ids[i]);
        ll_pgarray_add(&dids, did);
        ll_strmap_put(&at, run_ids[i], i);
        won[i] = false;
    }
    const char *p[2] = {ll_pgarray_text(&runs), ll_pgarray_text(&dids)};
    PGresult *r = ll_db_exec(db, &ST_RUNS_COMPLETE, p);
    ll_pgarray_free(&runs);
    ll_pgarray_free(&dids);
    ll_db_rc rc = r ? LL_DB_OK : LL_DB_ERROR;
    int rows = r ? PQntuples(r) : 0;
    if (rows > 0 && ll_db_ll(r, 0, 2, -1) != rows) {
        db->err.sqlstate[0] = '\0';
        snprintf(db->err.message, sizeof db->err.message, "runs complete: %d runs won, %s events written",
                 rows, PQgetvalue(r, 0, 2));
        rc = LL_DB_ERROR;
    }
    for (int j = 0; j < rows && rc == LL_DB_OK; j++) {
        const size_t *i = ll_strmap_get(&at, PQgetvalue(r, j, 0));
        if (i)
            won[*i] = true;
    }
    PQclear(r);
    ll_strmap_free(&at);
    return rc;
}
