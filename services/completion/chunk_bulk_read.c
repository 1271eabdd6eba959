/*
 * chunk_bulk_read.c - steps 1-3 of the set-based chunk path (chunk_bulk.c): the batch's runs and
 * partitions locked in a fixed order without waiting, and the stored file rows of its reports.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunk_bulk.h"
#include "ll/pgarray.h"

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
    "SELECT r.run_id::text, r.status, r.hdfs_run_path FROM unnest($1::uuid[]) AS k(id),"
    " LATERAL (SELECT run_id, status, hdfs_run_path FROM nifi_ops.load_run WHERE run_id = k.id"
    " FOR UPDATE SKIP LOCKED) r",
    1};

/*
 * The partitions ($1, $2), then one row per run of $3 (partition id NULL) with the number of its
 * partitions not SUCCESS. The count is read here, not with the run lock: a statement's snapshot is
 * taken before it locks, so the run lock statement would count with a snapshot older than its lock
 * (the row it locks is the latest version, EvalPlanQual, but not the partitions a subquery reads),
 * and a gate another transaction committed under that lock meanwhile would still count as open:
 * the last two partitions of a run gated at once by two instances would leave it EXTRACTING with
 * every partition SUCCESS (docs/design.md §7). Every writer of a partition's SUCCESS holds its run's
 * row (chunk_report.c, this path's gates, manifest.c; docs/contract.md §2.8), so this statement, started
 * after the run locks, sees every such gate committed before them, and none can follow while this
 * transaction holds the runs.
 */
static const ll_stmt ST_BULK_LOCK_PARTITIONS = {
    "chunk_bulk_lock_partitions",
    "SELECT p.run_id::text, p.partition_id, p.status, p.claim_token::text, p.written_file_count,"
    " p.written_row_count, p.written_byte_count, p.written_count_sum, p.written_count_sumsq,"
    " p.expected_row_count, NULL::bigint"
    " FROM unnest($1::uuid[], $2::text[]) AS k(run, pid), LATERAL (SELECT * FROM nifi_ops.load_partition"
    " WHERE run_id = k.run AND partition_id = k.pid FOR UPDATE SKIP LOCKED) p"
    " UNION ALL SELECT r.run::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " (SELECT count(*) FROM nifi_ops.load_partition p WHERE p.run_id = r.run AND p.status <> 'SUCCESS')"
    " FROM unnest($3::uuid[]) AS r(run)",
    3};

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

static PGresult *exec_arrays(ll_db *db, const ll_stmt *st, ll_pgarray *a, ll_pgarray *b, ll_pgarray *c)
{
    const char *p[3] = {ll_pgarray_text(a), b ? ll_pgarray_text(b) : NULL, c ? ll_pgarray_text(c) : NULL};
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

/* Steps 1-2: the runs, then the partitions of the runs locked here, each in sorted order without
 * waiting (docs/contract.md §2.8, docs/design.md §7: run row first). A run someone else holds is skipped,
 * and so are its partitions: this transaction goes on to wait for that run in the per-message
 * path, and a partition row held meanwhile would close a cycle with the run's holder when it asks
 * for the partition next. Step 2 also counts the open partitions of the EXTRACTING runs locked
 * (ST_BULK_LOCK_PARTITIONS: after the run locks; no other run's report is decided here).
 * LL_DB_OK, or LL_DB_ERROR (db->err set). */
ll_db_rc bulk_lock_rows(bulk *k)
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
    ll_pgarray runs = {0}, pruns = {0}, pids = {0}, counted = {0};
    for (size_t i = 0; i < nr; i++)
        if (i == 0 || strcmp(runkeys[i].run, runkeys[i - 1].run) != 0)
            ll_pgarray_add(&runs, runkeys[i].run);
    free(runkeys);
    ll_db_rc rc = LL_DB_ERROR;
    if (!(k->runs_res = exec_arrays(k->db, &ST_BULK_LOCK_RUNS, &runs, NULL, NULL)))
        goto out;
    k->n_runs = (size_t)PQntuples(k->runs_res);
    k->runs = calloc(k->n_runs + 1, sizeof *k->runs);
    for (size_t i = 0; i < k->n_runs; i++) {
        k->runs[i].id = PQgetvalue(k->runs_res, (int)i, 0);
        if (ll_run_status_parse(PQgetvalue(k->runs_res, (int)i, 1), &k->runs[i].status) != 0)
            k->runs[i].status = LL_RUN_CREATED; /* not EXTRACTING: left to the other path */
        k->runs[i].path = ll_db_text(k->runs_res, (int)i, 2);
        k->runs[i].open_parts = -1; /* not counted: never read (decide gates EXTRACTING runs only) */
        if (k->runs[i].status == LL_RUN_EXTRACTING)
            ll_pgarray_add(&counted, k->runs[i].id);
        ll_strmap_put(&k->run_of, k->runs[i].id, i);
    }
    /* only the partitions of the runs now held (run_of: the rows the statement returned) */
    for (size_t i = 0; i < nk; i++)
        if ((i == 0 || cmp_pkey(&keys[i], &keys[i - 1]) != 0) && ll_strmap_get(&k->run_of, keys[i].run)) {
            ll_pgarray_add(&pruns, keys[i].run);
            ll_pgarray_add(&pids, keys[i].pid);
        }
    if (!(k->parts_res = exec_arrays(k->db, &ST_BULK_LOCK_PARTITIONS, &pruns, &pids, &counted)))
        goto out;
    PGresult *r = k->parts_res;
    int rows = PQntuples(r);
    k->parts = calloc((size_t)rows + 1, sizeof *k->parts);
    k->n_parts = 0;
    for (int j = 0; j < rows; j++) {
        if (PQgetisnull(r, j, 1)) { /* a run's count of open partitions */
            const size_t *ri = ll_strmap_get(&k->run_of, PQgetvalue(r, j, 0));
            if (ri)
                k->runs[*ri].open_parts = ll_db_ll(r, j, 10, 0);
            continue;
        }
        bpart *p = &k->parts[k->n_parts];
        p->run = PQgetvalue(r, j, 0);
        p->pid = PQgetvalue(r, j, 1);
        if (ll_part_status_parse(PQgetvalue(r, j, 2), &p->status) != 0)
            p->status = LL_PART_FAILED;
        const char *t = ll_db_text(r, j, 3);
        if (!t || ll_uuid_canonical(t, p->token) != 0)
            p->token[0] = '\0';
        p->counters = (ll_chunk_counters){.files = ll_db_ll(r, j, 4, 0),
                                          .rows = ll_db_ll(r, j, 5, 0),
                                          .bytes = ll_db_ll(r, j, 6, 0),
                                          .count_sum = ll_db_ll(r, j, 7, 0),
                                          .count_sumsq = ll_db_ll(r, j, 8, 0)};
        p->expected_rows = ll_db_ll(r, j, 9, -1);
        snprintf(p->key, sizeof p->key, "%s|%s", p->run, p->pid);
        ll_strmap_put(&k->part_of, p->key, k->n_parts);
        k->n_parts++;
    }
    rc = LL_DB_OK;
out:
    free(keys);
    ll_pgarray_free(&runs);
    ll_pgarray_free(&pruns);
    ll_pgarray_free(&pids);
    ll_pgarray_free(&counted);
    return rc;
}

/* Step 3: the stored rows of the reported chunks and paths. LL_DB_OK, or LL_DB_ERROR (db->err set). */
ll_db_rc bulk_read_files(bulk *k)
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
