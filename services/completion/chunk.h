/*
 * chunk.h - what the two paths of a chunk report share (docs/contract.md §5.4): the per-message path
 * (chunk_report.c, every case) and the set-based path of a batch (chunk_bulk.c, the plain case).
 */
#ifndef COMPLETION_CHUNK_H
#define COMPLETION_CHUNK_H

#include <stdbool.h>
#include <stdint.h>

#include "ll/kloop.h"

/* A chunk report read from its message. Strings borrowed from the decoded value. */
typedef struct chunk_in {
    char run_id[37], token[37]; /* canonical uuids */
    const char *partition_id, *path, *fragment;
    int64_t index, count, records, bytes; /* bytes -1 = null */
} chunk_in;

/* Reads and checks the fields (docs/contract.md §5.4 checks 1-2). False with out's reason set (a dead
 * letter, INVALID_FIELD) when a field is missing or out of range. */
bool chunk_read(const json_t *v, chunk_in *c, ll_apply_out *out);

/* The chunk-outcome reply (new reference): the common reply fields plus the chunk's, recorded =
 * (code == NULL), receivedChunks = WRITTEN files of the partition, validationScheduled. */
json_t *chunk_outcome(const ll_msg *m, const chunk_in *c, const char *result, const char *code,
                      const char *message, const char *run_status, const char *part_status,
                      long long received, bool scheduled);

/* The set-based path (ll_bulk_fn) for topic chunks: see chunk_bulk.c. */
ll_apply completion_bulk_chunks(void *svc, ll_db *db, const ll_msg *const *msgs, size_t n, ll_bulk_out *outs);

/* docs/contract.md §5.11-§5.12 for n runs at once (runs_complete.c): each run still EXTRACTING whose
 * partitions are all SUCCESS with the source's rows becomes EXTRACTED_VALIDATED, with its
 * VALIDATE_RUN outbox row, EXTRACT_VALIDATED event and NOTIFY; won[i] tells which (n entries, the
 * caller's). run_ids: canonical uuids, locked by the caller. LL_DB_ERROR with db->err set when the
 * statement fails or wrote fewer events than runs. */
ll_db_rc runs_complete_extract(ll_db *db, const char *const *run_ids, size_t n, bool *won);

#endif
