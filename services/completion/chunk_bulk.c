/*
 * chunk_bulk.c - the chunk reports of one database transaction in seven set-based statements
 * (issue 8 §2-§3), instead of a savepoint, two locks and a statement each.
 *
 *   1. lock the batch's runs, in run-id order, SKIP LOCKED (contract §2.8: run first; a run
 *      someone else holds is left to the per-message path, which waits for it and holds it);
 *   2. lock their partitions, in (run id, partition id) order, SKIP LOCKED;
 *   3. read the stored file rows of the reported chunks and of the reported paths;
 *   4. decide each report in message order (ll_chunk_fast_decide): the owner's new or changed
 *      file of a RUNNING partition is written (ACCEPTED), and when the counters prove the
 *      partition complete with its expected rows the gate passes too (partition SUCCESS); an
 *      identical file is a REPLAY; everything else (a rejection, a deferral, a path another chunk
 *      holds, the same chunk or path twice in the batch, a gate that fails or needs the files
 *      aggregated, a report after its run's completion) is left to the per-message path, with every
 *      later report of the same run (marked retry when it could be decided on its own: the loop
 *      calls again for that run once the earlier one is applied);
 *   5. write every decided file row in one INSERT ... ON CONFLICT, set the counters and heartbeat
 *      of their partitions in one UPDATE, and the passed gates in one statement (partition
 *      SUCCESS, run success count, PARTITION_SUCCESS events); the run's heartbeat once per
 *      transaction;
 *   6. the completion CAS of every run whose last open partition passed its gate, with its outbox
 *      row, event and NOTIFY, in one statement (runs_complete.c; contract §5.11-§5.12).
 * Nothing is written for a report left to the other path, so the answers are the per-message
 * path's (chunk_report.c) for the same state: tests/integration/test_bulk_apply.py compares them.
 *
 * Work per call is linear in the batch (loop.batch_max ≤ 2000 messages): lookups go through
 * hash maps (ll/strmap.h) sized for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "completion.h"
#include "ll/apply.h"
#include "ll/pgarray.h"
#include "ll/strmap.h"
#include "ll/rules.h"

/*
 * The reads below look rows up one key at a time (a LATERAL subquery per array element, which the
 * planner cannot flatten into a hash join over the whole table: the tables grow faster than their
 * statistics), and lock in the arrays' order, which the caller sorts (run id, then partition id).
 * A file row is found as the first primary-key entry at or after its key: only the primary key
 * can answer that, where an equality could pick the (run, partition, status) index and walk every
 * file of the partition.
 */
static const ll_stmt ST_BULK_LOCK_RUNS = {
    "chunk_bulk_lock_runs",
    "SELECT r.run_id::text, r.status, r.hdfs_run_path, (SELECT count(*) FROM nifi_ops.load_partition p"
    " WHERE p.run_id = r.run_id AND p.status <> 'SUCCESS') FROM unnest($1::uuid[]) AS k(id),"
    " LATERAL (SELECT run_id, status, hdfs_run_path FROM nifi_ops.load_run WHERE run_id = k.id"
    " FOR UPDATE SKIP LOCKED) r",
    1};

static const ll_stmt ST_BULK_LOCK_PARTITIONS = {
    "chunk_bulk_lock_partitions",
    "SELECT p.run_id::text, p.partition_id, p.status, p.claim_token::text, p.written_file_count,"
    " p.written_row_count, p.written_byte_count, p.written_count_sum, p.written_count_sumsq,"
    " p.expected_row_count"
    " FROM unnest($1::uuid[], $2::text[]) AS k(run, pid), LATERAL (SELECT * FROM nifi_ops.load_partition"
    " WHERE run_id = k.run AND partition_id = k.pid FOR UPDATE SKIP LOCKED) p",
    2};

/* The stored rows of the reported chunks, and the rows holding the reported paths. */
static const ll_stmt ST_BULK_FILES = {
    "chunk_bulk_files",
    "SELECT f.run_id::text, f.partition_id, f.chunk_index, f.fragment_count, f.hdfs_path, f.record_count,"
    " f.byte_count, f.status = 'WRITTEN' FROM unnest($1::uuid[], $2::text[], $3::int[]) AS k(run, pid, idx),"
    " LATERAL (SELECT * FROM nifi_ops.load_file WHERE (run_id, partition_id, chunk_index) >= (k.run, k.pid, "
    "k.idx)"
    " ORDER BY run_id, partition_id, chunk_index LIMIT 1) f"
    " WHERE (f.run_id, f.partition_id, f.chunk_index) = (k.run, k.pid, k.idx)"
    " UNION ALL SELECT f.run_id::text, f.partition_id, f.chunk_index, f.fragment_count, f.hdfs_path,"
    " f.record_count, f.byte_count, f.status = 'WRITTEN' FROM unnest($4::text[]) AS k(path),"
    " LATERAL (SELECT * FROM nifi_ops.load_file WHERE hdfs_path = k.path LIMIT 1) f",
    4};

/* Contract §5.4 step 6 for every decided report (the per-message statement's upsert). */
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

/* Contract §5.4 step 10, the gate passed, for every partition a decided report completed (pass_gate
 * of chunk_report.c, less the completion CAS: step 6 does that after this): the partition
 * SUCCESS with its totals, the run's success count and heartbeat, a PARTITION_SUCCESS event each.
 * Returns how many rows each part changed (the caller checks them). */
static const ll_stmt ST_BULK_GATES = {
    "chunk_bulk_gates",
    "WITH g AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::bigint[], $5::int[],"
    " $6::bigint[]) AS g(run, pid, tok, rows, files, bytes)),"
    " p AS (UPDATE nifi_ops.load_partition p SET status = 'SUCCESS', actual_row_count = g.rows,"
    " file_count = g.files, fragment_count = g.files, byte_count = g.bytes, completed_at = clock_timestamp(),"
    " heartbeat_at = clock_timestamp() FROM g WHERE p.run_id = g.run AND p.partition_id = g.pid"
    " AND p.status = 'RUNNING' AND p.claim_token = g.tok RETURNING 1),"
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

/* A locked run. Strings point into the statement's result. */
typedef struct brun {
    const char *id;
    ll_run_status status;
    const char *path;   /* hdfs_run_path, NULL when null */
    int64_t open_parts; /* its partitions not SUCCESS, less those this batch's gates pass */
    bool completing;    /* a report of this batch passes its last open partition's gate */
    bool won;           /* ... and the completion CAS moved it to EXTRACTED_VALIDATED */
} brun;

/* A locked partition with its counters as this batch leaves them. */
typedef struct bpart {
    const char *run, *pid;
    char key[96]; /* "run|partition" (strmap key) */
    ll_part_status status;
    char token[37]; /* canonical, "" when null */
    ll_chunk_counters counters;
    int64_t expected_rows;
    bool dirty; /* a decided report wrote a file of it */
    bool gated; /* a decided report passed its gate: SUCCESS */
} bpart;

/* A stored file row. */
typedef struct bfile {
    const char *run, *pid;
    int64_t index;
    char key[112]; /* "run|partition|index" (strmap key) */
    ll_chunk_file f;
} bfile;

/* One report of the batch. */
typedef struct brep {
    bool ok; /* read, index in range, keyed by its own run */
    chunk_in c;
    char key[112], pkey[96]; /* "run|partition|index", "run|partition" */
    ll_chunk_fast d;
    bool completes; /* d is the gate of its run's last open partition: the completion CAS follows */
    ll_part_status part_status; /* when decided: its partition's status and written files after it */
    int64_t received;
} brep;

typedef struct bulk {
    ll_db *db;
    PGresult *runs_res, *parts_res, *files_res;
    brun *runs;
    bpart *parts;
    bfile *files;
    size_t n_runs, n_parts, n_files;
    brep *reps;
    size_t n;
    /* lookups by key: runs, partitions, stored files by chunk and by path, decided writes by
     * chunk and by path, runs with a report left to the per-message path */
    ll_strmap run_of, part_of, file_of, file_at, write_of, write_at, passed;
} bulk;

static PGresult *exec2(ll_db *db, const ll_stmt *st, ll_pgarray *a, ll_pgarray *b)
{
    const char *p[2] = {ll_pgarray_text(a), b ? ll_pgarray_text(b) : NULL};
    return ll_db_exec(db, st, p);
}

/* A (run, partition) pair to lock, ordered by run id then partition id. */
typedef struct pkey {
    const char *run, *pid;
} pkey;

static int cmp_pkey(const void *a, const void *b)
{
    const pkey *x = a, *y = b;
    int c = strcmp(x->run, y->run);
    return c ? c : strcmp(x->pid ? x->pid : "", y->pid ? y->pid : "");
}

/* Steps 1-2: the runs, then their partitions, locked without waiting, each in sorted order
 * (contract §2.8). LL_DB_OK, or LL_DB_ERROR (db->err set). */
static ll_db_rc lock_rows(bulk *k)
{
    pkey *keys = calloc(k->n + 1, sizeof *keys), *runkeys = calloc(k->n + 1, sizeof *runkeys);
    if (!keys || !runkeys)
        abort();
    size_t nk = 0, nr = 0;
    for (size_t i = 0; i < k->n; i++)
        if (k->reps[i].ok) {
            keys[nk++] = (pkey){k->reps[i].c.run_id, k->reps[i].c.partition_id};
            runkeys[nr++] = (pkey){k->reps[i].c.run_id, NULL};
        }
    qsort(keys, nk, sizeof *keys, cmp_pkey);
    qsort(runkeys, nr, sizeof *runkeys, cmp_pkey);
    ll_pgarray runs = {0}, pruns = {0}, pids = {0};
    for (size_t i = 0; i < nr; i++)
        if (i == 0 || strcmp(runkeys[i].run, runkeys[i - 1].run) != 0)
            ll_pgarray_add(&runs, runkeys[i].run);
    for (size_t i = 0; i < nk; i++)
        if (i == 0 || cmp_pkey(&keys[i], &keys[i - 1]) != 0) {
            ll_pgarray_add(&pruns, keys[i].run);
            ll_pgarray_add(&pids, keys[i].pid);
        }
    free(keys);
    free(runkeys);
    ll_db_rc rc = LL_DB_ERROR;
    if (!(k->runs_res = exec2(k->db, &ST_BULK_LOCK_RUNS, &runs, NULL)))
        goto out;
    k->n_runs = (size_t)PQntuples(k->runs_res);
    k->runs = calloc(k->n_runs + 1, sizeof *k->runs);
    for (size_t i = 0; i < k->n_runs; i++) {
        k->runs[i].id = PQgetvalue(k->runs_res, (int)i, 0);
        if (ll_run_status_parse(PQgetvalue(k->runs_res, (int)i, 1), &k->runs[i].status) != 0)
            k->runs[i].status = LL_RUN_CREATED; /* not EXTRACTING: left to the other path */
        k->runs[i].path = ll_db_text(k->runs_res, (int)i, 2);
        k->runs[i].open_parts = ll_db_ll(k->runs_res, (int)i, 3, 0);
        ll_strmap_put(&k->run_of, k->runs[i].id, i);
    }
    if (!(k->parts_res = exec2(k->db, &ST_BULK_LOCK_PARTITIONS, &pruns, &pids)))
        goto out;
    k->n_parts = (size_t)PQntuples(k->parts_res);
    k->parts = calloc(k->n_parts + 1, sizeof *k->parts);
    for (size_t i = 0; i < k->n_parts; i++) {
        PGresult *r = k->parts_res;
        bpart *p = &k->parts[i];
        p->run = PQgetvalue(r, (int)i, 0);
        p->pid = PQgetvalue(r, (int)i, 1);
        if (ll_part_status_parse(PQgetvalue(r, (int)i, 2), &p->status) != 0)
            p->status = LL_PART_FAILED;
        const char *t = ll_db_text(r, (int)i, 3);
        if (!t || ll_uuid_canonical(t, p->token) != 0)
            p->token[0] = '\0';
        p->counters = (ll_chunk_counters){.files = ll_db_ll(r, (int)i, 4, 0),
                                          .rows = ll_db_ll(r, (int)i, 5, 0),
                                          .bytes = ll_db_ll(r, (int)i, 6, 0),
                                          .count_sum = ll_db_ll(r, (int)i, 7, 0),
                                          .count_sumsq = ll_db_ll(r, (int)i, 8, 0)};
        p->expected_rows = ll_db_ll(r, (int)i, 9, -1);
        snprintf(p->key, sizeof p->key, "%s|%s", p->run, p->pid);
        ll_strmap_put(&k->part_of, p->key, i);
    }
    rc = LL_DB_OK;
out:
    ll_pgarray_free(&runs);
    ll_pgarray_free(&pruns);
    ll_pgarray_free(&pids);
    return rc;
}

/* Step 3: the stored rows of the reported chunks and paths. LL_DB_OK, or LL_DB_ERROR (db->err set). */
static ll_db_rc read_files(bulk *k)
{
    ll_pgarray runs = {0}, pids = {0}, idx = {0}, paths = {0};
    for (size_t i = 0; i < k->n; i++)
        if (k->reps[i].ok) {
            ll_pgarray_add(&runs, k->reps[i].c.run_id);
            ll_pgarray_add(&pids, k->reps[i].c.partition_id);
            ll_pgarray_add_ll(&idx, (long long)k->reps[i].c.index);
            ll_pgarray_add(&paths, k->reps[i].c.path);
        }
    const char *p[4] = {ll_pgarray_text(&runs), ll_pgarray_text(&pids), ll_pgarray_text(&idx),
                        ll_pgarray_text(&paths)};
    k->files_res = ll_db_exec(k->db, &ST_BULK_FILES, p);
    ll_pgarray_free(&runs);
    ll_pgarray_free(&pids);
    ll_pgarray_free(&idx);
    ll_pgarray_free(&paths);
    if (!k->files_res)
        return LL_DB_ERROR;
    PGresult *r = k->files_res;
    k->n_files = (size_t)PQntuples(r);
    k->files = calloc(k->n_files + 1, sizeof *k->files);
    for (size_t i = 0; i < k->n_files; i++) {
        k->files[i] = (bfile){.run = PQgetvalue(r, (int)i, 0),
                              .pid = PQgetvalue(r, (int)i, 1),
                              .index = ll_db_ll(r, (int)i, 2, -1),
                              .f = {.count = ll_db_ll(r, (int)i, 3, -1),
                                    .path = PQgetvalue(r, (int)i, 4),
                                    .records = ll_db_ll(r, (int)i, 5, -1),
                                    .bytes = ll_db_ll(r, (int)i, 6, -1),
                                    .written = ll_db_bool(r, (int)i, 7)}};
        bfile *f = &k->files[i];
        snprintf(f->key, sizeof f->key, "%s|%s|%lld", f->run, f->pid, (long long)f->index);
        ll_strmap_put(&k->file_of, f->key, i);
        ll_strmap_put(&k->file_at, f->f.path, i);
    }
    return LL_DB_OK;
}

static brun *find_run(bulk *k, const char *id)
{
    const size_t *i = ll_strmap_get(&k->run_of, id);
    return i ? &k->runs[*i] : NULL;
}

/* The stored row of report rp's chunk, NULL when none; *path_elsewhere when another chunk holds
 * its path. */
static const ll_chunk_file *stored(const bulk *k, const brep *rp, bool *path_elsewhere)
{
    const size_t *f = ll_strmap_get(&k->file_of, rp->key), *g = ll_strmap_get(&k->file_at, rp->c.path);
    *path_elsewhere = g && strcmp(k->files[*g].key, rp->key) != 0;
    return f ? &k->files[*f].f : NULL;
}

/* Step 4 for report i: decides it, or leaves it (LL_CHUNK_FAST_PASS). */
static ll_chunk_fast decide(bulk *k, size_t i, const ll_msg *m, bool *retry)
{
    brep *rp = &k->reps[i];
    *retry = false;
    if (!rp->ok)
        return LL_CHUNK_FAST_PASS;
    bool behind = ll_strmap_get(&k->passed, m->key) != NULL; /* an earlier report of its run was left */
    if (ll_strmap_get(&k->write_of, rp->key) || ll_strmap_get(&k->write_at, rp->c.path))
        return LL_CHUNK_FAST_PASS; /* the same chunk or path twice: one at a time */
    brun *run = find_run(k, rp->c.run_id);
    if (run && run->completing)
        return LL_CHUNK_FAST_PASS; /* after its run's completion: one by one, against the new status */
    const size_t *pi = run ? ll_strmap_get(&k->part_of, rp->pkey) : NULL;
    bool path_elsewhere;
    const ll_chunk_file *old = stored(k, rp, &path_elsewhere);
    if (!pi || path_elsewhere)
        return LL_CHUNK_FAST_PASS;
    bpart *part = &k->parts[*pi];
    ll_chunk_file file = {.count = rp->c.count,
                          .path = rp->c.path,
                          .records = rp->c.records,
                          .bytes = rp->c.bytes,
                          .written = true};
    ll_chunk_fast_in in = {.run = run->status,
                           .part = part->status,
                           .token_matches = part->token[0] && strcmp(part->token, rp->c.token) == 0,
                           .path_inside_run = ll_chunk_path_inside_run(run->path, rp->c.path),
                           .old = old,
                           .file = &file,
                           .expected_rows = part->expected_rows};
    ll_chunk_counters after = part->counters;
    ll_chunk_fast d = ll_chunk_fast_decide(&in, &after);
    if (behind) {
        *retry = d != LL_CHUNK_FAST_PASS; /* keep the order; worth another try once it is applied */
        return LL_CHUNK_FAST_PASS;
    }
    if (d == LL_CHUNK_FAST_PASS)
        return d;
    part->counters = after;
    if (d != LL_CHUNK_FAST_REPLAY) {
        part->dirty = true;
        ll_strmap_put(&k->write_of, rp->key, i);
        ll_strmap_put(&k->write_at, rp->c.path, i);
    }
    if (d == LL_CHUNK_FAST_GATE) {
        part->gated = true;
        part->status = LL_PART_SUCCESS; /* later reports of it: REPLAY or CHUNK_CONFLICT, the other path */
        /* the run's last open partition: its completion CAS follows the gates (runs_complete.c) */
        rp->completes = run->completing = run->open_parts <= 1;
        run->open_parts--;
    }
    return d;
}

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

/* Executes a write over n arrays (freed here) that must change `want` rows. LL_DB_OK, or LL_DB_ERROR
 * (db->err set; also when it changed another number of rows). */
static ll_db_rc exec_arrays(bulk *k, const ll_stmt *st, ll_pgarray *a, int n, size_t want, const char *what)
{
    const char *p[8];
    for (int j = 0; j < n && j < 8; j++)
        p[j] = ll_pgarray_text(&a[j]);
    PGresult *r = ll_db_exec(k->db, st, p);
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

/* Step 5: the decided files, then their partitions' counters, then the gates passed. LL_DB_OK, or
 * LL_DB_ERROR (db->err set). */
static ll_db_rc write_rows(bulk *k)
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
        return LL_DB_OK;
    }
    ll_db_rc rc = exec_arrays(k, &ST_BULK_WRITE_FILES, a, 8, writes, "file write");
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
    rc = exec_arrays(k, &ST_BULK_PARTITIONS, q, 7, dirty, "partition update");
    return rc == LL_DB_OK ? write_gates(k) : rc;
}

/* Step 6: the completion CAS of every run whose last open partition a gate of this batch passed
 * (contract §5.11; pass_gate of chunk_report.c, for all of them in one statement). LL_DB_OK, or
 * LL_DB_ERROR (db->err set). */
static ll_db_rc complete_runs(bulk *k)
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

static void bulk_free(bulk *k)
{
    ll_strmap *maps[] = {&k->run_of,   &k->part_of,  &k->file_of, &k->file_at,
                         &k->write_of, &k->write_at, &k->passed};
    for (size_t i = 0; i < sizeof maps / sizeof *maps; i++)
        ll_strmap_free(maps[i]);
    PQclear(k->runs_res);
    PQclear(k->parts_res);
    PQclear(k->files_res);
    free(k->runs);
    free(k->parts);
    free(k->files);
    free(k->reps);
}

ll_apply completion_bulk_chunks(void *svc, ll_db *db, const ll_msg *const *msgs, size_t n, ll_bulk_out *outs)
{
    (void)svc;
    bulk k = {.db = db, .n = n, .reps = calloc(n + 1, sizeof(brep))};
    size_t candidates = 0;
    if (!k.reps)
        abort();
    /* every map holds at most one key per report (the files query returns two rows per report
     * at most: its chunk's and its path's) */
    ll_strmap *maps[] = {&k.run_of, &k.part_of, &k.write_of, &k.write_at, &k.passed};
    for (size_t i = 0; i < sizeof maps / sizeof *maps; i++)
        ll_strmap_init(maps[i], n);
    ll_strmap_init(&k.file_of, 2 * n);
    ll_strmap_init(&k.file_at, 2 * n);
    for (size_t i = 0; i < n; i++) {
        brep *rp = &k.reps[i];
        ll_apply_out scratch;
        /* anything unusual is the per-message path's: it answers or dead-letters it */
        rp->ok = msgs[i]->key && chunk_read(msgs[i]->value, &rp->c, &scratch) && rp->c.index < rp->c.count &&
                 strcmp(msgs[i]->key, rp->c.run_id) == 0;
        if (rp->ok) {
            snprintf(rp->pkey, sizeof rp->pkey, "%s|%s", rp->c.run_id, rp->c.partition_id);
            snprintf(rp->key, sizeof rp->key, "%s|%lld", rp->pkey, (long long)rp->c.index);
        }
        candidates += rp->ok;
    }
    ll_db_rc rc = LL_DB_OK;
    if (candidates == 0)
        goto out;
    if ((rc = lock_rows(&k)) != LL_DB_OK || (rc = read_files(&k)) != LL_DB_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        brep *rp = &k.reps[i];
        rp->d = decide(&k, i, msgs[i], &outs[i].retry);
        if (rp->d == LL_CHUNK_FAST_PASS) {
            ll_strmap_put(&k.passed, msgs[i]->key, i);
            continue;
        }
        const bpart *part = &k.parts[*ll_strmap_get(&k.part_of, rp->pkey)];
        rp->part_status = part->status;
        rp->received = part->counters.files;
        outs[i].decided = true;
        if (rp->d != LL_CHUNK_FAST_REPLAY)
            ll_msg_touch_run(msgs[i], rp->c.run_id);
    }
    if ((rc = write_rows(&k)) != LL_DB_OK || (rc = complete_runs(&k)) != LL_DB_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const brep *rp = &k.reps[i];
        if (!outs[i].decided)
            continue;
        const brun *run = find_run(&k, rp->c.run_id);
        bool won = rp->completes && run->won;
        outs[i].reply =
            chunk_outcome(msgs[i], &rp->c, rp->d == LL_CHUNK_FAST_REPLAY ? "REPLAY" : "ACCEPTED", NULL, NULL,
                          won ? "EXTRACTED_VALIDATED" : ll_run_status_name(run->status),
                          ll_part_status_name(rp->part_status), (long long)rp->received, won);
    }
out:
    bulk_free(&k);
    return ll_apply_of_db(rc);
}
