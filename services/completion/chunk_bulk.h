/*
 * chunk_bulk.h - the set-based chunk path's state (chunk_bulk.c decides, chunk_bulk_read.c
 * locks and reads, chunk_bulk_write.c writes): private to the completion service.
 */
#ifndef COMPLETION_CHUNK_BULK_H
#define COMPLETION_CHUNK_BULK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chunk.h"
#include "ll/db.h"
#include "ll/rules.h"
#include "ll/strmap.h"

/* A locked run. Strings point into the statement's result. */
typedef struct brun {
    const char *id;
    ll_run_status status;
    const char *path;   /* hdfs_run_path, NULL when null */
    int64_t open_parts; /* its partitions not SUCCESS (counted after its lock: step 2), less those
                         * this batch's gates pass; -1 when not EXTRACTING (not counted) */
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

/* Steps 1-2 (chunk_bulk_read.c): the runs, then their partitions, locked without waiting, each
 * in sorted order (docs/contract.md §2.8), and the open partitions of the EXTRACTING runs counted after the
 * run locks; fills k->runs and k->parts (pointing into the results k owns).
 * LL_DB_OK, or LL_DB_ERROR (db->err set). */
ll_db_rc bulk_lock_rows(bulk *k);

/* Step 3 (chunk_bulk_read.c): the stored rows of the reported chunks and paths into k->files.
 * LL_DB_OK, or LL_DB_ERROR (db->err set). */
ll_db_rc bulk_read_files(bulk *k);

/* Step 5 (chunk_bulk_write.c): the decided files, then their partitions' counters, then the gates
 * passed. meanwhile(arg) (may be NULL) runs once, while the server writes the files (or at once
 * when there are none). LL_DB_OK, or LL_DB_ERROR (db->err set; also when a statement changed
 * another number of rows than decided). */
ll_db_rc bulk_write_rows(bulk *k, ll_db_meanwhile_fn meanwhile, void *arg);

/* Step 6 (chunk_bulk_write.c): the completion CAS of every run whose last open partition a gate
 * of this batch passed (docs/contract.md §5.11, runs_complete.c); sets brun.won. LL_DB_OK, or LL_DB_ERROR
 * (db->err set). */
ll_db_rc bulk_complete_runs(bulk *k);

#endif
