/*
 * chunk_bulk_write.c - steps 5-6 of the set-based chunk path (chunk_bulk.c): the decided file rows,
 * the partitions' counters, the gates passed and the runs completed, one statement each.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_bulk.h"
#include "ll/pgarray.h"

/* docs/contract.md §5.4 step 6 for every decided report (the per-message statement's upsert). */
static const ll_stmt ST_BULK_WRITE_FILES = {
    "chunk_bulk_write_files",
    "INSERT INTO nifi_ops.load_file (run_id, partition_id, chunk_index, fragment_identifier,"
    " fragment_count, hdfs_path, record_count, byte_count, status, written_at, updated_at)"
    " SELECT r, p, c, fi, fc, hp, rc, bc, 'WRITTEN', clock_timestamp(), clock_timestamp()"
    " FROM unnest($1::uuid[], $2::text[], $3::int[], $4::text[], $5::int[], $6::text[], $7::bigint[],"
    " $8::bigint[]) AS u(r, p, c, fi, fc, hp, rc, bc)"
    " ON CONFLICT (run_id, partition_id, chunk_index) DO UPDATE SET"
    " fragment_identifier = excluded.fragment_identifier, fragment_count = excluded.fragment_count,"
    " hdfs_path = excluded.hdfs_path, record_count = excluded.record_count,"
    " byte_count = excluded.byte_count, status = 'WRITTEN', updated_at = clock_timestamp()",
    8};

/* The partitions' counters of WRITTEN files after the writes (migration 0007), with their
 * heartbeat (step 7: progress only). The rows are locked by this transaction. */
static const ll_stmt ST_BULK_PARTITIONS = {
    "chunk_bulk_partitions",
    "UPDATE nifi_ops.load_partition p SET written_file_count = d.f, written_row_count = d.r,"
    " written_byte_count = d.b, written_count_sum = d.s, written_count_sumsq = d.q,"
    " heartbeat_at = clock_timestamp()"
    " FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],"
    " $7::bigint[]) AS d(run, pid, f, r, b, s, q) WHERE p.run_id = d.run AND p.partition_id = d.pid",
    7};

/* docs/contract.md §5.4 step 10, the gate passed, for every partition a decided report completed (pass_gate
 * of chunk_report.c, less the completion CAS: step 6 does that after this): the partition
 * SUCCESS with its totals, the run's success count and heartbeat, a PARTITION_SUCCESS event each.
 * Returns how many rows each part changed (the caller checks them).
 * The CAS on the status is a CASE, not `p.status = 'RUNNING' AND ...`, so that the planner reaches
 * each row by its primary key: given a plain status predicate it chose the sweeper's index
 * ix_load_partition_recovery (ix_load_partition_active since 0020: every RUNNING partition of every
 * run, 4,649 rows read for 16 in the
 * benchmark's latency phase: 4.5 ms a batch, half the batch's server time) whenever the
 * statistics said few partitions were RUNNING. */
static const ll_stmt ST_BULK_GATES = {
    "chunk_bulk_gates",
    "WITH g AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::bigint[], $5::int[],"
    " $6::bigint[]) AS g(run, pid, tok, rows, files, bytes)),"
    " p AS (UPDATE nifi_ops.load_partition p SET status = 'SUCCESS', actual_row_count = g.rows,"
    " file_count = g.files, fragment_count = g.files, byte_count = g.bytes, completed_at = clock_timestamp(),"
    " heartbeat_at = clock_timestamp() FROM g WHERE p.run_id = g.run AND p.partition_id = g.pid"
    " AND CASE WHEN p.status = 'RUNNING' THEN p.claim_token = g.tok ELSE false END RETURNING 1),"
    " r AS (UPDATE nifi_ops.load_run r SET success_partition_count = r.success_partition_count + c.n,"
    " heartbeat_at = clock_timestamp() FROM (SELECT run, count(*) AS n FROM g GROUP BY run) c"
    " WHERE r.run_id = c.run RETURNING 1),"
    " e AS (INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, run_id, job_key,"
    " business_key, partition_id, chunk_index, process_group, processor_name, row_count, details)"
    " SELECT gen_random_uuid(), 'INFO', 'PARTITION_SUCCESS', g.run, r.job_key, r.business_key, g.pid, NULL,"
    " 'LOAD_CONTROL_API', 'partition_success', g.rows, jsonb_build_object('files', g.files, 'bytes', g.bytes)"
    " FROM g LEFT JOIN nifi_ops.load_run r ON r.run_id = g.run RETURNING 1)"
    " SELECT (SELECT count(*) FROM p), (SELECT count(*) FROM r), (SELECT count(*) FROM e)",
    6};

/* Step 5, after the files and counters: the gates passed. LL_DB_OK, or LL_DB_ERROR (db->err set;
 * also when the statement changed other counts than decided). */
static ll_db_rc write_gates(bulk *k)
{
    ll_pgarray g[6] = {{0}};
    size_t gates = 0, runs = 0;
    ll_strmap seen = {0};
    ll_strmap_init(&seen, k->n_parts);
    for (size_t i = 0; i < k->n_parts; i++) {
        const bpart *p = &k->parts[i];
        if (!p->gated)
            continue;
        gates++;
        runs += ll_strmap_get(&seen, p->run) == NULL;
        ll_strmap_put(&seen, p->run, i);
        ll_pgarray_add(&g[0], p->run);
        ll_pgarray_add(&g[1], p->pid);
        ll_pgarray_add(&g[2], p->token);
        ll_pgarray_add_ll(&g[3], (long long)p->counters.rows);
        ll_pgarray_add_ll(&g[4], (long long)p->counters.files);
        ll_pgarray_add_ll(&g[5], (long long)p->counters.bytes);
    }
    ll_strmap_free(&seen);
    ll_db_rc rc = LL_DB_OK;
    if (gates) {
        const char *p[6];
        for (int j = 0; j < 6; j++)
            p[j] = ll_pgarray_text(&g[j]);
        PGresult *r = ll_db_exec(k->db, &ST_BULK_GATES, p);
        if (!r) {
            rc = LL_DB_ERROR;
        } else if (ll_db_ll(r, 0, 0, -1) != (long long)gates || ll_db_ll(r, 0, 1, -1) != (long long)runs ||
                   ll_db_ll(r, 0, 2, -1) != (long long)gates) {
            k->db->err.sqlstate[0] = '\0';
            snprintf(k->db->err.message, sizeof k->db->err.message,
                     "bulk gates changed %s partitions, %s runs, %s events of %zu, %zu, %zu",
                     PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2), gates, runs, gates);
            rc = LL_DB_ERROR;
        }
        PQclear(r);
    }
    for (int j = 0; j < 6; j++)
        ll_pgarray_free(&g[j]);
    return rc;
}

/* Executes a write over n arrays (freed here) that must change `want` rows, meanwhile(arg) (may be
 * NULL) while the server does. LL_DB_OK, or LL_DB_ERROR (db->err set; also when it changed another
 * number of rows). */
static ll_db_rc exec_arrays(bulk *k, const ll_stmt *st, ll_pgarray *a, int n, size_t want, const char *what,
                            ll_db_meanwhile_fn meanwhile, void *arg)
{
    const char *p[8];
    for (int j = 0; j < n && j < 8; j++)
        p[j] = ll_pgarray_text(&a[j]);
    PGresult *r = ll_db_exec_meanwhile(k->db, st, p, meanwhile, arg);
    long got = r ? ll_db_affected(r) : -1;
    PQclear(r);
    for (int j = 0; j < n; j++)
        ll_pgarray_free(&a[j]);
    if (r && got != (long)want) {
        k->db->err.sqlstate[0] = '\0';
        snprintf(k->db->err.message, sizeof k->db->err.message, "bulk %s changed %ld of %zu rows", what, got,
                 want);
    }
    return r && got == (long)want ? LL_DB_OK : LL_DB_ERROR;
}

/* Step 5: the decided files (meanwhile(arg) while the server writes them), then their partitions'
 * counters, then the gates passed. LL_DB_OK, or LL_DB_ERROR (db->err set). */
ll_db_rc bulk_write_rows(bulk *k, ll_db_meanwhile_fn meanwhile, void *arg)
{
    ll_pgarray a[8] = {{0}};
    size_t writes = 0;
    for (size_t i = 0; i < k->n; i++) {
        const brep *rp = &k->reps[i];
        if (rp->d != LL_CHUNK_FAST_WRITE && rp->d != LL_CHUNK_FAST_GATE)
            continue;
        writes++;
        ll_pgarray_add(&a[0], rp->c.run_id);
        ll_pgarray_add(&a[1], rp->c.partition_id);
        ll_pgarray_add_ll(&a[2], (long long)rp->c.index);
        ll_pgarray_add(&a[3], rp->c.fragment);
        ll_pgarray_add_ll(&a[4], (long long)rp->c.count);
        ll_pgarray_add(&a[5], rp->c.path);
        ll_pgarray_add_ll(&a[6], (long long)rp->c.records);
        if (rp->c.bytes >= 0)
            ll_pgarray_add_ll(&a[7], (long long)rp->c.bytes);
        else
            ll_pgarray_add(&a[7], NULL);
    }
    if (!writes) {
        for (int j = 0; j < 8; j++)
            ll_pgarray_free(&a[j]);
        if (meanwhile)
            meanwhile(arg);
        return LL_DB_OK;
    }
    ll_db_rc rc = exec_arrays(k, &ST_BULK_WRITE_FILES, a, 8, writes, "file write", meanwhile, arg);
    if (rc != LL_DB_OK)
        return rc;
    ll_pgarray q[7] = {{0}};
    size_t dirty = 0;
    for (size_t i = 0; i < k->n_parts; i++) {
        const bpart *p = &k->parts[i];
        if (!p->dirty)
            continue;
        dirty++;
        ll_pgarray_add(&q[0], p->run);
        ll_pgarray_add(&q[1], p->pid);
        ll_pgarray_add_ll(&q[2], (long long)p->counters.files);
        ll_pgarray_add_ll(&q[3], (long long)p->counters.rows);
        ll_pgarray_add_ll(&q[4], (long long)p->counters.bytes);
        ll_pgarray_add_ll(&q[5], (long long)p->counters.count_sum);
        ll_pgarray_add_ll(&q[6], (long long)p->counters.count_sumsq);
    }
    rc = exec_arrays(k, &ST_BULK_PARTITIONS, q, 7, dirty, "partition update", NULL, NULL);
    return rc == LL_DB_OK ? write_gates(k) : rc;
}

/* Step 6: the completion CAS of every run whose last open partition a gate of this batch passed
 * (docs/contract.md §5.11; pass_gate of chunk_report.c, for all of them in one statement). LL_DB_OK, or
 * LL_DB_ERROR (db->err set). */
ll_db_rc bulk_complete_runs(bulk *k)
{
    const char **ids = calloc(k->n_runs + 1, sizeof *ids);
    bool *won = calloc(k->n_runs + 1, sizeof *won);
    size_t *at = calloc(k->n_runs + 1, sizeof *at);
    if (!ids || !won || !at)
        abort();
    size_t n = 0;
    for (size_t i = 0; i < k->n_runs; i++)
        if (k->runs[i].completing) {
            at[n] = i;
            ids[n++] = k->runs[i].id;
        }
    ll_db_rc rc = runs_complete_extract(k->db, ids, n, won);
    for (size_t j = 0; j < n && rc == LL_DB_OK; j++)
        k->runs[at[j]].won = won[j];
    free(ids);
    free(won);
    free(at);
    return rc;
}
