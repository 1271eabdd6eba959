/*
 * ledger.h - ledger operations more than one service performs, as SQL only: the event insert
 * (docs/contract.md §8), locking a run row, the extract-completion CAS (§5.11) and the VALIDATE_RUN
 * enqueue with its NOTIFY (§5.12). Each runs inside the caller's open transaction and decides
 * nothing beyond the one conditional statement it names.
 */
#ifndef LL_LEDGER_H
#define LL_LEDGER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ll/db.h"
#include "ll/status.h"

/* One row for nifi_ops.load_event. NULL / negative fields are stored as NULL. Borrowed. */
typedef struct ll_event {
    const char *name;  /* RUN_STARTED, PARTITION_SUCCESS, ... */
    const char *level; /* INFO, WARN, ERROR */
    const char *run_id;
    const char *partition_id;
    int64_t chunk_index; /* -1 = NULL */
    int64_t row_count;   /* rows; -1 = NULL */
    const char *error_class;
    const char *error_code;
    const char *message; /* truncated to 2000 chars; "" stored as NULL */
    json_t *details;     /* borrowed; NULL = {} */
} ll_event;

/* Inserts an event (random id; job and business key copied from the run). LL_DB_OK or error. */
ll_db_rc ll_event_insert(ll_db *db, const ll_event *ev);

/* The columns of a locked run row that the services read. Strings owned by the struct. */
typedef struct ll_run_row {
    bool found;
    ll_run_status status;
    char job_key[201];
    char business_key[201];
    char *snapshot_scn; /* NULL when null */
    char *hdfs_run_path;
    char *stage_table;
    int64_t source_count; /* -1 when null */
    bool allow_empty_source;
    char *error_code;
    char *error_message;
    char *publish_token;     /* NULL until a publish claim */
    int64_t extracted_count; /* rows */
} ll_run_row;

/* SELECT … FOR UPDATE of the run (the first lock of every transaction, docs/contract.md §2.8).
 * LL_DB_OK with row->found false when the run does not exist. Free with ll_run_row_clear. */
ll_db_rc ll_run_lock(ll_db *db, const char *run_id, ll_run_row *row);
/* Frees the strings of a run row. */
void ll_run_row_clear(ll_run_row *row);

/* Refreshes the run's heartbeat_at (no status change). */
ll_db_rc ll_run_touch(ll_db *db, const char *run_id);

/*
 * True when an earlier run request with this run id was refused (DUPLICATE_ACTIVE_RUN...): then
 * later events of the run answer RUN_NOT_FOUND at once instead of waiting for it.
 */
ll_db_rc ll_run_request_rejected(ll_db *db, const char *run_id, bool *rejected);

/*
 * Extract-completion CAS (docs/contract.md §5.11): EXTRACTING -> EXTRACTED_VALIDATED when, counted
 * freshly, every expected partition is SUCCESS and Σ actual rows = source count. On success it
 * also enqueues VALIDATE_RUN (§5.12, dispatch id derived from the run id), notifies the
 * dispatcher and writes EXTRACT_VALIDATED. *won tells whether this caller moved the run.
 * The caller holds the run lock.
 */
ll_db_rc ll_run_complete_extract(ll_db *db, const char *run_id, bool *won);

/* A run failure of docs/contract.md §5.6, as the completion service applies a flow's report and
 * `loadctl end-run` an operator's. Strings borrowed. */
typedef struct ll_run_failure {
    const char *run_id;
    ll_run_status expected; /* the pair's expectedStatus (ll_fail_pair_allowed) */
    ll_run_status fail;     /* the pair's failStatus */
    const char *stage;      /* error_stage (stored cut at 80 characters) */
    const char *code;       /* error_code */
    const char *message;    /* error_message and the event's message (cut at 2000; "" or NULL: null) */
    const json_t *extra;    /* more fields for RUN_FAILED's details (the operator's audit), or NULL */
} ll_run_failure;

/*
 * Applies a run failure (docs/contract.md §5.6 step 5, §3.1 "to a failure"): the compare-and-set
 * expected → fail with the error triple, completed_at, heartbeat_at and version_no + 1, and, when
 * it moved the run, the event RUN_FAILED (ERROR, the error code and message, details {stage, from,
 * to} plus f->extra's other fields). The one writer of this transition: the caller holds the run lock
 * and has judged the pair and the status (ll_run_event_decide, ll_end_run_decide); nothing else is
 * written (no dispatch, no partition change: §3.2, §5.6). *changed (may be NULL) tells whether the
 * CAS moved the run. LL_DB_OK, or the failed statement's result (db->err); a pair that is not
 * allowed is LL_DB_ERROR without a statement.
 */
ll_db_rc ll_run_fail_apply(ll_db *db, const ll_run_failure *f, bool *changed);

/* The dispatch id of a run's VALIDATE_RUN: uuid5(namespace, "VALIDATE_RUN/<run id>"). */
void ll_validate_dispatch_id(const char *run_id, char out[37]);

/* Whether claim_token was ever granted for (run, partition) (the token history, docs/contract.md K§6). */
ll_db_rc ll_claim_token_known(ll_db *db, const char *run_id, const char *partition_id, const char *token,
                              bool *known);

#endif
