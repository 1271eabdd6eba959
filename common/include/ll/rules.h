/*
 * rules.h - the decisions of the contract as pure functions: state in, decision out.
 *
 * Nothing here does I/O or touches PostgreSQL or Kafka; the services read the ledger under the
 * contract's locks, call these, and write what they decide. Each rule names its contract section
 * (ledger-contract.md), so a rule is found by grepping its code (CLAIM_MISMATCH, ...).
 */
#ifndef LL_RULES_H
#define LL_RULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ll/status.h"

/* ---- Input formats (docs/contract.md §4.3) ---------------------------------------------------------- */

bool ll_is_job_key(const char *s);      /* ^[A-Z0-9_]{1,200}$ */
bool ll_is_business_key(const char *s); /* ^[0-9A-Za-z_.:\-]{1,200}$ */
bool ll_is_partition_id(const char *s); /* ^([0-9]{4}|NULL)$ */
bool ll_is_decimal_str(const char *s);  /* ^-?[0-9]{1,38}$ */
bool ll_is_table_prefix(const char *s); /* ^[A-Za-z_][A-Za-z0-9_]{0,60}$ */
bool ll_is_hdfs_path(const char *s);    /* ^/[A-Za-z0-9_.=/\-]{1,1499}$ */
bool ll_is_metric_name(const char *s);  /* ^[A-Za-z0-9_.:\-]{1,150}$ */
/* A UUID in 8-4-4-4-12 hex form, either case. */
bool ll_is_uuid(const char *s);
/* Copies a UUID in canonical lower-case hyphenated form into out[37]. Returns 0, or -1 if not a UUID. */
int ll_uuid_canonical(const char *s, char out[37]);
/* True when a and b are both UUIDs of the same value, compared case-insensitively (claim and
 * publish tokens, docs/contract.md §5.3-§5.5); NULL or a malformed string is never equal. */
bool ll_uuid_equal(const char *a, const char *b);
/* True when any '/'-separated segment of path equals ".." (docs/contract.md §5.1 step 2, §5.4 check 4). */
bool ll_path_has_dotdot(const char *path);
/* Length of a UTF-8 string in code points (the contract's "chars"); -1 if not valid UTF-8. */
long ll_utf8_chars(const char *s);

/* ---- Run creation (docs/contract.md §5.1) ----------------------------------------------------------- */

/*
 * hdfsRunPath = hdfsRoot without trailing slashes + "/" + jobKey + "/run_id=" + runId (canonical
 * lower-case UUID). Writes into out (outlen bytes). Returns 0, or -1 if it does not fit, run_id
 * is not a UUID or an argument is NULL.
 */
int ll_hdfs_run_path(const char *hdfs_root, const char *job_key, const char *run_id, char *out,
                     size_t outlen);
/* stageTable = lower-case(prefix + runId as 32 hex digits). Returns 0, or -1 if it does not fit,
 * run_id is not a UUID or an argument is NULL. */
int ll_stage_table(const char *prefix, const char *run_id, char *out, size_t outlen);

/* ---- Decimal strings (SCN, split bounds; up to 38 digits, signed) ---------------------------- */

/* Compares two DecimalStr values numerically ("-0" == "0", leading zeros ignored): <0, 0, >0. */
int ll_decimal_cmp(const char *a, const char *b);

/* ---- Manifest invariants (docs/contract.md §5.2 step 4) --------------------------------------------- */

/* One partition of a manifest; strings are borrowed. lower/upper are DecimalStr or NULL. */
typedef struct ll_manifest_partition {
    const char *partition_id;
    const char *lower_bound;
    const char *upper_bound;
    bool upper_inclusive;
    bool is_null_partition;
    int64_t expected_row_count; /* rows */
} ll_manifest_partition;

/* The plan of a run as the manifest states it; strings and the array are borrowed. */
typedef struct ll_manifest {
    int64_t source_count;            /* rows */
    int64_t source_null_split_count; /* rows */
    const char *source_min_split;    /* DecimalStr or NULL */
    const char *source_max_split;    /* DecimalStr or NULL */
    int32_t planned_partition_count;
    size_t n_partitions;
    const ll_manifest_partition *partitions;
} ll_manifest;

/* A growable list of malloc'd strings (violations, reasons). */
typedef struct ll_strlist {
    char **items;
    size_t n;
    size_t cap;
} ll_strlist;

/* Appends a printf-formatted string. Returns 0, or -1 on allocation failure. */
int ll_strlist_addf(ll_strlist *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Joins the items with sep into a malloc'd string the caller frees ("" for an empty list). */
char *ll_strlist_join(const ll_strlist *l, const char *sep);
/* Frees every item and the array; the list is empty afterwards. */
void ll_strlist_clear(ll_strlist *l);

/*
 * Evaluates every manifest invariant, in the contract's order, appending one string per
 * violation to out (DUPLICATE_PARTITION_ID, PARTITION_COUNT_MISMATCH planned=P actual=A,
 * EXPECTED_SUM_MISMATCH sum=S source=C, EMPTY_SOURCE_BLOCKED, MULTIPLE_NULL_PARTITIONS,
 * INVALID_NULL_PARTITION <id>, NULL_COUNT_MISMATCH expected=E source=N,
 * NULL_ROWS_WITHOUT_NULL_PARTITION, INVALID_BOUNDS <id>, UPPER_INCLUSIVE_INVALID <id>,
 * RANGE_GAP_OR_OVERLAP <a>-><b>, MIN_SPLIT_MISMATCH, MAX_SPLIT_MISMATCH).
 * Returns the number of violations (0 = the manifest passes), or -1 on allocation failure.
 */
int ll_manifest_violations(const ll_manifest *m, bool allow_empty_source, ll_strlist *out);

/*
 * The status a manifest's partition starts in (docs/contract.md §3.2, §5.2 step 6): SUCCESS at once (0 rows,
 * 0 files, completed) when it expects no rows (expected_rows = 0), else PENDING (its claim comes).
 * The registrar passes it to the partition insert as a value.
 */
ll_part_status ll_partition_initial_status(int64_t expected_rows);

/* ---- Partition claim (docs/contract.md §5.3) -------------------------------------------------------- */

typedef enum ll_claim_decision {
    LL_CLAIM_GRANT = 0,        /* PENDING/RETRY -> RUNNING with the new token, attempt + 1 */
    LL_CLAIM_REPLAY,           /* RUNNING with the same token: granted again, heartbeat only */
    LL_CLAIM_REFUSE_RUN,       /* run not EXTRACTING: claimed=false (NiFi must not query Oracle) */
    LL_CLAIM_REFUSE_PARTITION, /* partition owned by another token or finished: claimed=false */
    LL_CLAIM_REFUSE_SUPERSEDED /* a token granted before and superseded (a zombie or replayed claim
                                * after a reissue) over a claimable partition: claimed=false */
} ll_claim_decision;

/*
 * Decides a claim (docs/contract.md §5.3 steps 2-5; docs/contract.md K§6 for a superseded token).
 * stored_token may be NULL; tokens compared as canonical UUIDs; both borrowed. granted_before:
 * the claim-token history holds request_token for this partition (it was granted once).
 */
ll_claim_decision ll_claim_decide(ll_run_status run, ll_part_status part, const char *stored_token,
                                  const char *request_token, bool granted_before);
/* The reply code of a refusal (static): RUN_STATUS_MISMATCH for REFUSE_RUN, CLAIM_MISMATCH for a
 * RUNNING partition's REFUSE_PARTITION and for REFUSE_SUPERSEDED, PARTITION_STATUS_MISMATCH for
 * any other REFUSE_PARTITION; NULL for GRANT and REPLAY. part: the locked partition's status. */
const char *ll_claim_refusal_code(ll_claim_decision d, ll_part_status part);

/* ---- Chunk report gate (docs/contract.md §5.4 steps 8-10) ------------------------------------------- */

/* Aggregate of the WRITTEN files of one partition (docs/contract.md §5.4 step 8). */
typedef struct ll_chunk_aggregate {
    int64_t files;           /* WRITTEN rows */
    int64_t lo, hi;          /* min/max chunk index (meaningless when files = 0) */
    int64_t rows;            /* Σ record_count */
    int64_t bytes;           /* Σ byte_count, null as 0 */
    int64_t distinct_counts; /* number of distinct fragment_count values */
} ll_chunk_aggregate;

typedef enum ll_gate {
    LL_GATE_WAIT =
        0, /* recorded, not judged (run not EXTRACTING, partition not RUNNING, or files < chunkCount) */
    LL_GATE_PASS,    /* complete and rows = expected: partition SUCCESS */
    LL_GATE_MISMATCH /* ROW_COUNT_MISMATCH: partition FAILED, run FAILED_EXTRACT */
} ll_gate;

/* A partition's WRITTEN files as the counters of migration 0007 keep them (docs/design.md §3). */
typedef struct ll_chunk_counters {
    int64_t files;       /* WRITTEN rows */
    int64_t rows;        /* Σ record_count */
    int64_t bytes;       /* Σ byte_count, null as 0 */
    int64_t count_sum;   /* Σ fragment_count */
    int64_t count_sumsq; /* Σ fragment_count² */
} ll_chunk_counters;

/*
 * Whether the counters alone prove the partition's files complete for chunk_count C (contract
 * §5.4 step 10 "complete"): C files, all with fragment_count C (Σ = C·C and Σ² = C·C·C: zero
 * variance). Indexes are unique and below their own chunkCount, so they are then 0..C-1. When so,
 * fills agg (files, lo 0, hi C-1, rows, bytes, one distinct count) and returns true; otherwise the
 * caller aggregates the files (the gate's answer, or its mismatch message, needs them).
 */
bool ll_chunk_counters_complete(const ll_chunk_counters *c, int32_t chunk_count, ll_chunk_aggregate *agg);

/* Judges the gate after a chunk report (docs/contract.md §5.4 steps 9-10). */
ll_gate ll_chunk_gate(ll_run_status run, ll_part_status part, const ll_chunk_aggregate *agg,
                      int32_t chunk_count, int64_t expected_rows);
/*
 * Writes the ROW_COUNT_MISMATCH message "files=F chunkCount=C distinctCounts=D rows=R expected=E"
 * into out. Returns the snprintf result.
 */
int ll_gate_mismatch_message(const ll_chunk_aggregate *agg, int32_t chunk_count, int64_t expected_rows,
                             char *out, size_t outlen);
/*
 * Check 4 of docs/contract.md §5.4: hdfs_path starts with run_path + "/" and has no ".." segment.
 * run_path NULL fails (HDFS_PATH_OUTSIDE_RUN).
 */
bool ll_chunk_path_inside_run(const char *run_path, const char *hdfs_path);

/* A file row as the chunk fast path compares it (docs/contract.md §5.4 step 5; the fragment id is not
 * compared). */
typedef struct ll_chunk_file {
    int64_t count;    /* chunkCount (fragment_count) */
    const char *path; /* hdfsPath, borrowed */
    int64_t records;  /* recordCount */
    int64_t bytes;    /* byteCount, -1 = null */
    bool written;     /* status WRITTEN (false: invalidated by the sweeper) */
} ll_chunk_file;

/* What the set-based chunk path (docs/design.md §3) may do with one report without the per-message path. */
typedef enum ll_chunk_fast {
    LL_CHUNK_FAST_WRITE = 0, /* write the file row; ACCEPTED, the gate still waits */
    LL_CHUNK_FAST_REPLAY,    /* identical to the WRITTEN row: nothing written, REPLAY */
    LL_CHUNK_FAST_GATE,      /* write the file row; it completes the partition, whose counters
                              * prove the gate passes (§5.4 step 10): partition SUCCESS */
    LL_CHUNK_FAST_PASS       /* anything else (a rejection, a deferral, the gate to judge): the
                              * per-message path applies it, with its savepoint */
} ll_chunk_fast;

/* The state the fast path read, under the run and partition locks, for one report. */
typedef struct ll_chunk_fast_in {
    ll_run_status run;         /* the locked run's status */
    ll_part_status part;       /* the locked partition's status */
    bool token_matches;        /* the report's claim token is the partition's (LL_OWN_MATCH) */
    bool path_inside_run;      /* check 4 passed (ll_chunk_path_inside_run) */
    const ll_chunk_file *old;  /* the stored row of (run, partition, chunkIndex), or NULL */
    const ll_chunk_file *file; /* the report */
    int64_t expected_rows;     /* the partition's expected row count (the gate compares) */
} ll_chunk_fast_in;

/*
 * Decides one chunk report for the fast path. Only the plain cases are decided: run EXTRACTING,
 * partition RUNNING, the owner's token, the path inside the run, and, after the write, either fewer
 * WRITTEN files than the report's chunkCount (docs/contract.md §5.4 steps 9-10 answer WAIT: WRITE) or
 * counters that prove the partition complete with the expected rows (ll_chunk_counters_complete,
 * ll_chunk_gate PASS: GATE). *counters (the partition's WRITTEN-file counters, migration 0007) is
 * updated by a WRITE or GATE: the new row's contribution less the old one's, as the per-message
 * statement does. Anything else (a mismatch, a completeness the counters cannot prove) is PASS and
 * leaves *counters alone.
 */
ll_chunk_fast ll_chunk_fast_decide(const ll_chunk_fast_in *in, ll_chunk_counters *counters);

/* ---- Partition failure report (docs/contract.md §5.5) ----------------------------------------------- */

typedef enum ll_pfail_decision {
    LL_PFAIL_APPLY = 0,      /* partition -> FAILED; run -> FAILED_* if EXTRACTING */
    LL_PFAIL_REPLAY,         /* already FAILED: changed=false */
    LL_PFAIL_CLAIM_MISMATCH, /* stored token differs (or NULL): 409 CLAIM_MISMATCH */
    LL_PFAIL_STATUS_MISMATCH /* not RUNNING: 409 PARTITION_STATUS_MISMATCH */
} ll_pfail_decision;

/* Decides a partition failure report, checks in the contract's order (token first). */
ll_pfail_decision ll_pfail_decide(ll_part_status part, const char *stored_token, const char *request_token);
/* Snapshot error: errorCode upper-cased in {ORA-01555, ORA-08180} or errorClass upper-cased = SNAPSHOT. */
bool ll_is_snapshot_error(const char *error_code, const char *error_class);

/* ---- A failed partition ends its run's extraction (docs/contract.md §5.4 step 10, §5.5 step 5) -------- */

/* How a run fails because one of its partitions failed. Strings static or the caller's (borrowed). */
typedef struct ll_run_fail {
    ll_run_status status; /* FAILED_EXTRACT or FAILED_SNAPSHOT_EXPIRED */
    const char *stage;    /* error_stage */
    const char *code;     /* error_code */
} ll_run_fail;

/*
 * §5.4 step 10: a partition's ROW_COUNT_MISMATCH fails its run only while the run is EXTRACTING
 * (FAILED_EXTRACT, stage PARTITION_GATE, code ROW_COUNT_MISMATCH; all static); any other status
 * is kept (the partition still counts as failed). Returns whether the run fails; *out is filled
 * then. The caller writes it with a compare-and-set on status = 'EXTRACTING'.
 */
bool ll_gate_run_failure(ll_run_status current, ll_run_fail *out);
/*
 * §5.5 step 5: a worker's partition failure fails its run only while the run is EXTRACTING:
 * FAILED_SNAPSHOT_EXPIRED for a snapshot error (ll_is_snapshot_error), else FAILED_EXTRACT, with
 * the report's errorStage and errorCode (borrowed into *out). Returns whether the run fails.
 */
bool ll_pfail_run_failure(ll_run_status current, const char *error_stage, const char *error_code,
                          const char *error_class, ll_run_fail *out);

/* ---- Run failure report (docs/contract.md §5.6) ----------------------------------------------------- */

/* True for exactly the five allowed (expectedStatus, failStatus) pairs. */
bool ll_fail_pair_allowed(ll_run_status expected, ll_run_status fail);

/*
 * The failStatus of the one §5.6 pair whose expectedStatus is `expected` (CREATED → FAILED_MANIFEST,
 * EXTRACTING → FAILED_EXTRACT, STAGE_VALIDATING → FAILED_STAGE_VALIDATION, STAGING_VALIDATED →
 * FAILED_PUBLISH, PUBLISHED → FAILED_TARGET_VALIDATION); LL_RUN_STATUS_COUNT for any other status
 * (no failure exit: EXTRACTED_VALIDATED, PUBLISHING, PUBLISH_UNKNOWN, the terminal ones) and for a
 * value outside the enum. The pair table's one owner: ll_fail_pair_allowed reads it.
 */
ll_run_status ll_fail_status_for(ll_run_status expected);

/*
 * The expectedStatus of the §5.6 pair whose failStatus is `fail` (the inverse of ll_fail_status_for);
 * LL_RUN_STATUS_COUNT when `fail` is no pair's failStatus (SUCCESS, TIMED_OUT,
 * FAILED_SNAPSHOT_EXPIRED, every active status, a value outside the enum).
 */
ll_run_status ll_fail_expected_for(ll_run_status fail);

/* What the operator's `loadctl end-run` does with a run (tools/loadctl/endrun.c, §5.6 applied to the
 * run's own status). */
typedef enum ll_end_run {
    LL_END_RUN_FAIL = 0,    /* apply the pair (expected, fail): CAS, RUN_FAILED, audit */
    LL_END_RUN_ALREADY,     /* §5.6 check 3: the run is already the pair's failStatus (changed=false) */
    LL_END_RUN_NOT_ALLOWED, /* §5.6 check 1: the operator's --status has no pair: FAIL_TRANSITION_NOT_ALLOWED
                             */
    LL_END_RUN_NOT_FOUND,   /* no such run: RUN_NOT_FOUND */
    LL_END_RUN_STATUS_MISMATCH, /* §5.6 check 4: the run is not in the pair's expectedStatus */
} ll_end_run;

/*
 * The operator's run failure (docs/contract.md §5.6, the run's own pair). `want` is the status the
 * operator says the run is in (--status), or LL_RUN_STATUS_COUNT for "whatever it is now";
 * `found` and `current` are read under the run lock (current ignored when !found). In order:
 *   1. want given and no pair has it as expectedStatus          → NOT_ALLOWED (before the lookup)
 *   2. !found                                                   → NOT_FOUND
 *   3. the pair is (want, fail_for(want)), or without want the pair of `current` — as expected
 *      status (current has a failure exit) or, failing that, as fail status (current is a pair's
 *      failStatus: a replay): current = its failStatus       → ALREADY
 *   4. current ≠ its expectedStatus (no pair fits)              → STATUS_MISMATCH
 *   5. otherwise                                                → FAIL
 * *expected_out and *fail_out receive the pair for FAIL and ALREADY, LL_RUN_STATUS_COUNT otherwise
 * (either may be NULL). Pure.
 */
ll_end_run ll_end_run_decide(ll_run_status want, bool found, ll_run_status current,
                             ll_run_status *expected_out, ll_run_status *fail_out);

/* ---- Dispatch (docs/contract.md §6) ----------------------------------------------------------------- */

/* backoff_min × 2^(attempt−1), capped at backoff_max; attempt < 1 as 1, exponent capped at 30 (ms). */
int64_t ll_dispatch_backoff_ms(int attempt, int64_t backoff_min_ms, int64_t backoff_max_ms);

typedef enum ll_send_outcome {
    LL_SEND_SENT = 0, /* delivered: mark SENT if still PENDING */
    LL_SEND_RETRY,    /* transient: PENDING with backoff */
    LL_SEND_DEAD      /* permanent, or attempts exhausted */
} ll_send_outcome;

/*
 * Classifies one delivery: http_status 2xx -> SENT; 4xx other than 408/425/429 -> DEAD;
 * 3xx, 5xx, 408, 425, 429 and transport errors (http_status 0) -> RETRY, or DEAD when
 * attempt (already incremented by the lease) >= max_attempts. A Kafka sink reports 200 for a
 * delivered command and 0 for a failed one.
 */
ll_send_outcome ll_dispatch_classify(int http_status, int attempt, int max_attempts);
/* Whether a delivery's status is delivered: 2xx (a Kafka sink's 200). */
bool ll_dispatch_delivered(int http_status);
/* Whether a delivery's status is a permanent refusal, DEAD on any attempt: 4xx other than
 * 408/425/429 (docs/contract.md §6, §12). 0 (transport error), 3xx, 5xx and the three are transient. */
bool ll_dispatch_status_permanent(int http_status);

/* ---- Name-based ids (docs/contract.md K§4) --------------------------------------------------- */

/* The namespace of every id loadledger derives (a fixed UUID). */
extern const char LL_UUID_NAMESPACE[37];
/* RFC 4122 version-5 UUID of name in namespace ns, lower-case into out[37]. Returns 0 or -1. */
int ll_uuid_v5(const char *ns, const char *name, char out[37]);

/* ---- Run lifecycle and validation gates (docs/contract.md §3.1, §3.5) ------------------------------ */

/*
 * True when a run now in `current` can still reach `target` by its normal forward path
 * (CREATED → EXTRACTING → EXTRACTED_VALIDATED → STAGE_VALIDATING → STAGING_VALIDATED →
 * PUBLISHING → PUBLISHED): `current` is earlier on that path. A failure, SUCCESS or
 * PUBLISH_UNKNOWN never reaches anything. Used to defer an event whose prerequisite event was
 * published earlier but has not been applied yet (docs/contract.md K§6).
 */
bool ll_run_may_reach(ll_run_status current, ll_run_status target);

/*
 * Whether an event that needs its run in `needed` waits for it (the loop defers it) rather than
 * being answered now: only while the run may still reach `needed` (ll_run_may_reach) and
 * loop.prerequisite_wait has not passed (wait_expired false). Once the wait is over, the event
 * gets the contract's business answer for the run's current status (RUN_STATUS_MISMATCH,
 * success=false with "RUN_STATUS <status>", claimed=false...), not a dead letter: the run
 * exists, it only never got there (docs/contract.md K§6; docs/contract.md §5.6, §5.8-§5.10, §5.13, §5.14).
 */
bool ll_run_should_wait(ll_run_status current, ll_run_status needed, bool wait_expired);

/*
 * The gate of /stage-validated and /success (docs/contract.md §3.5) over the stored metrics of one stage:
 * no metric at all → "NO_METRICS"; one "FAIL <metricName>" per FAIL row; WARN never blocks.
 * names and results are n parallel arrays. Appends the reasons to out; returns their number
 * (0 = the gate passes), or -1 on allocation failure.
 */
int ll_validation_gate(const char *const *names, const char *const *results, size_t n, ll_strlist *out);

/* "PASS", "FAIL" or "WARN" (ck_load_validation_result). */
bool ll_is_metric_result(const char *s);

/* An integer count from a metric's actual value: all digits (1..18) → 0 and *out; else -1
 * (STAGE_COUNT / TARGET_COUNT, docs/contract.md §3.1 "integer if its actual value is all digits"). */
int ll_metric_count(const char *actual, int64_t *out);

/* ---- Run-level events (docs/contract.md §5.6-§5.10, §5.14; docs/contract.md K§6) ------------------- */

/* How the first lock of an event (the run row, docs/contract.md §2.8) found its run. */
typedef enum ll_run_found {
    LL_RUN_FOUND_LOCKED = 0, /* the run row is locked: its status is known */
    LL_RUN_FOUND_NONE,       /* no run and no refused request: the run request is not applied yet */
    LL_RUN_FOUND_REFUSED     /* the run request was refused (its id never becomes a run) */
} ll_run_found;

/* What a run-level event does (the ladder of services/completion's run events). */
typedef enum ll_run_event {
    LL_RUN_EVENT_APPLY = 0,       /* the run is where the event applies: the service applies it */
    LL_RUN_EVENT_REPLAY,          /* the run is already where the event takes it: the earlier answer */
    LL_RUN_EVENT_DEFER_RUN,       /* the run is not in the ledger yet: the loop defers the event */
    LL_RUN_EVENT_DEFER,           /* the run may still get to where it applies (ll_run_should_wait) */
    LL_RUN_EVENT_RUN_NOT_FOUND,   /* its run request was refused: RUN_NOT_FOUND */
    LL_RUN_EVENT_STATUS_MISMATCH, /* any other status, or the wait is over: RUN_STATUS_MISMATCH */
    LL_RUN_EVENT_TOKEN_MISMATCH,  /* a publish result not of the publish claim's owner (§5.14 step 2) */
    LL_RUN_EVENT_COUNT            /* the number of decisions (the rows of an ll_run_answer table) */
} ll_run_event;

/* The state a run-level event is judged on, read under the run lock. */
typedef struct ll_run_event_in {
    ll_run_found found;    /* how the run was found; the rest counts only when LOCKED */
    ll_run_status current; /* the locked run's status */
    ll_run_status apply;   /* the status the event applies from (its CAS's expected status) */
    ll_run_status done;    /* the status the event leads to (a replay), LL_RUN_STATUS_COUNT for none */
    bool wait_expired;     /* loop.prerequisite_wait is over for this message */
} ll_run_event_in;

/*
 * The run-event ladder: found NONE → DEFER_RUN, REFUSED → RUN_NOT_FOUND; then current = done →
 * REPLAY; current = apply → APPLY; a run still on its way to apply (ll_run_should_wait) → DEFER;
 * anything else → STATUS_MISMATCH (docs/contract.md §5.6 check 4, §5.8 step 2, §5.9 step 3, §5.10 step 3;
 * docs/contract.md K§6). Never TOKEN_MISMATCH. in is borrowed.
 */
ll_run_event ll_run_event_decide(const ll_run_event_in *in);

/*
 * A publish result (docs/contract.md §5.14): the found steps of ll_run_event_decide; then a token that is
 * not the stored publish token (token_matches false) is TOKEN_MISMATCH, except that with no token
 * stored yet and the run still on its way to apply (PUBLISHING) it is DEFER (the claim not applied
 * yet); the owner's report is REPLAY when the run is already done (the reported outcome), APPLY
 * when it is PUBLISHING, else STATUS_MISMATCH (never deferred: a run with a token was PUBLISHING).
 */
ll_run_event ll_publish_result_decide(const ll_run_event_in *in, bool token_stored, bool token_matches);

/* What a validation start does once its run is locked and its dispatch read (docs/contract.md §5.7). */
typedef enum ll_vstart {
    LL_VSTART_ACK = 0,          /* ACK the dispatch, then the CAS EXTRACTED_VALIDATED → STAGE_VALIDATING */
    LL_VSTART_DEFER_RUN,        /* the run is not in the ledger yet */
    LL_VSTART_DEFER,            /* no such dispatch while the run may still get to EXTRACTED_VALIDATED */
    LL_VSTART_RUN_NOT_FOUND,    /* its run request was refused */
    LL_VSTART_DISPATCH_MISMATCH /* no such dispatch, or not this run's VALIDATE_RUN */
} ll_vstart;

/*
 * docs/contract.md §5.7 checks 1-3 (docs/contract.md K§6 for the wait). dispatch_found: the dispatch row
 * exists; dispatch_matches: it is a VALIDATE_RUN of this run (both meaningless unless found is
 * LOCKED, and matches unless dispatch_found).
 */
ll_vstart ll_validation_start_decide(ll_run_found found, ll_run_status current, bool dispatch_found,
                                     bool dispatch_matches, bool wait_expired);

/* The answer of a validation start after its ACK and CAS (docs/contract.md §5.7 step 4). */
typedef enum ll_vstart_answer {
    LL_VSTART_WON = 0,      /* this request won the CAS: ACCEPTED, started=true, the run context */
    LL_VSTART_WINNER_AGAIN, /* the winner's identical request again: REPLAY, started=true, the context */
    LL_VSTART_LOST_ACKED,   /* another won (or none can), this ACK was new: ACCEPTED, started=false */
    LL_VSTART_LOST_REPLAY   /* another won (or none can), the dispatch was ACKED already: REPLAY */
} ll_vstart_answer;

/*
 * won: the CAS moved the run; same_winner: load_validation_start holds this dispatch id and node
 * (read only when not won); locked: the run's status under the lock, before the CAS; acked_now:
 * the dispatch was not ACKED before this request.
 */
ll_vstart_answer ll_validation_start_answer(bool won, bool same_winner, ll_run_status locked, bool acked_now);

/* ---- Who may report on a partition (docs/contract.md §5.4 check 3, §5.5 check 2; docs/contract.md K§6) - */

/* How a reporter's claim token relates to the partition it reports on. */
typedef enum ll_ownership {
    LL_OWN_MATCH = 0,    /* the stored token is the reporter's */
    LL_OWN_MISMATCH,     /* a token never granted here that can no longer be: CLAIM_MISMATCH at once */
    LL_OWN_SUPERSEDED,   /* a token granted before, no longer the owner (a zombie after a reissue) */
    LL_OWN_NOT_YET,      /* a token the ledger has not seen while a claim could still be granted */
    LL_OWN_NO_RUN,       /* the run is not in the ledger yet */
    LL_OWN_RUN_REFUSED,  /* the run request was refused */
    LL_OWN_NO_PARTITION, /* the manifest is applied, the partition unknown */
    LL_OWN_NO_MANIFEST   /* the run is CREATED: its manifest is not applied yet */
} ll_ownership;

/* What the ledger holds about a report's run, partition and token, read under the run and
 * partition locks (docs/contract.md §2.8). Strings borrowed. */
typedef struct ll_ownership_in {
    ll_run_found run;         /* how the run lock found the run; the rest counts only when LOCKED */
    ll_run_status run_status; /* the locked run's status */
    bool partition_found;     /* the partition row exists (and is locked) */
    ll_part_status part;      /* its status */
    const char *stored_token; /* its claim token, canonical; "" or NULL when none */
    const char *token;        /* the reporter's claim token, canonical */
    bool token_known;         /* the claim-token history holds token for this partition (read only
                               * when it is not the stored one) */
} ll_ownership_in;

/*
 * Classifies a report's ownership: the run (NO_RUN, RUN_REFUSED), then the partition (NO_MANIFEST
 * while the run is CREATED, else NO_PARTITION), then the token: the stored one (exact canonical
 * match) is MATCH, one the history knows SUPERSEDED, an unknown one NOT_YET while a claim could
 * still be granted (ll_claim_decide would GRANT it) and MISMATCH otherwise.
 */
ll_ownership ll_ownership_classify(const ll_ownership_in *in);

/* The answer of a partition report given its ownership (the ladder of chunk reports and partition
 * failure reports, docs/contract.md §5.4 check 3, §5.5 check 2). */
typedef enum ll_own_answer {
    LL_OWN_PROCEED = 0,         /* the reporter owns the partition: the service judges the report */
    LL_OWN_DEFER_RUN,           /* the loop defers: the run request is not applied yet */
    LL_OWN_DEFER_MANIFEST,      /* the loop defers: the manifest is not applied yet */
    LL_OWN_DEFER_TOKEN,         /* the loop defers: the claim is not applied yet */
    LL_OWN_RUN_NOT_FOUND,       /* RUN_NOT_FOUND: the run request was refused */
    LL_OWN_PARTITION_NOT_FOUND, /* PARTITION_NOT_FOUND: no such partition, or no manifest after the wait */
    LL_OWN_CLAIM_MISMATCH /* CLAIM_MISMATCH: another token, or a superseded one (docs/contract.md §12) */
} ll_own_answer;

/* The ladder: NO_RUN, NOT_YET and (until loop.prerequisite_wait is over, wait_expired) NO_MANIFEST
 * defer; RUN_REFUSED is RUN_NOT_FOUND; NO_PARTITION and NO_MANIFEST after the wait are
 * PARTITION_NOT_FOUND; MISMATCH and SUPERSEDED are CLAIM_MISMATCH; MATCH proceeds. */
ll_own_answer ll_ownership_answer(ll_ownership own, bool wait_expired);
/* Why a deferred report waits (static; "" for an answer that does not defer). */
const char *ll_own_defer_reason(ll_own_answer a);
/*
 * The run step of a partition claim (docs/contract.md §5.3 step 1; docs/contract.md K§6), before its
 * partition is locked: NONE → DEFER_RUN, REFUSED → RUN_NOT_FOUND, a run still CREATED (its manifest
 * not applied) → DEFER_MANIFEST until loop.prerequisite_wait is over; else PROCEED (the partition
 * lookup then answers, PARTITION_NOT_FOUND for a run that never got its manifest).
 */
ll_own_answer ll_claim_lookup(ll_run_found found, ll_run_status current, bool wait_expired);

/* What an unacknowledged SENT dispatch becomes after dispatch.ack_timeout (docs/contract.md §7.3, rule 3):
 * LL_SEND_DEAD once attempts (deliveries made, its attempt_count) reached max_attempts, else
 * LL_SEND_RETRY (back to PENDING, due at once). The sweeper passes the status to SQL as a value. */
ll_send_outcome ll_dispatch_ack_timeout(int attempts, int max_attempts);

/* ---- Sweeper (docs/contract.md §7) ---------------------------------------------------------------- */

/* recovery.mode (docs/contract.md §9). */
typedef enum ll_recovery_mode { LL_RECOVERY_FAIL = 0, LL_RECOVERY_REISSUE } ll_recovery_mode;
/* The words of recovery.mode in ll_recovery_mode's order ("FAIL", "REISSUE"), NULL-terminated: the
 * index ll_config_enum returns is the mode. Static. */
extern const char *const LL_RECOVERY_MODE_NAMES[];

/* What rule 1 does with a run that has stale partitions. */
typedef enum ll_stale_action {
    LL_STALE_REISSUE = 0, /* every stale RUNNING partition -> RETRY with a REISSUE_PARTITION dispatch */
    LL_STALE_TIMEOUT      /* the whole run and its unfinished partitions -> TIMED_OUT */
} ll_stale_action;

/*
 * docs/contract.md §7.1: REISSUE only in mode REISSUE while no stale partition has used up
 * max_attempts claims and none is a RETRY partition whose reissue was never claimed (the gap of
 * §13, closed here); otherwise the run is abandoned, never partially reissued. attempts[i] is
 * the attempt_count of stale partition i, retry[i] whether it is a stale RETRY partition.
 * *reason receives PARTITION_STALE, REISSUE_ATTEMPTS_EXHAUSTED or REISSUE_NOT_CLAIMED (static).
 */
ll_stale_action ll_stale_decide(ll_recovery_mode mode, int max_attempts, const int *attempts,
                                const bool *retry, size_t n, const char **reason);

/*
 * docs/contract.md §3.2, §7.6 (issue 42 item 4): whether the sweeper times out an unfinished
 * partition of a run that has ended. True when the run's status is a terminal failure (FAILED_*
 * or TIMED_OUT: a run that failed because one partition failed leaves its siblings as they were,
 * §3.2, §5.5 step 7), the partition is PENDING, RUNNING or RETRY, and nothing moved for stale_ms
 * (recovery.stale): neither the partition (idle_ms since its heartbeat_at; -1 when it has none, a
 * partition never claimed) nor the run (ended_ms since its completed_at; -1 when unset, never due).
 * A worker still reporting keeps its partition as it is; SUCCESS, FAILED and TIMED_OUT are final.
 * Pure; durations in ms.
 */
bool ll_ended_partition_due(ll_run_status run, ll_part_status partition, int64_t idle_ms, int64_t ended_ms,
                            int64_t stale_ms);

/* Checks recovery settings at start (docs/contract.md §9): stale must exceed extract_query_timeout.
 * Returns 0, or -1 with a message in err. Durations in ms. */
int ll_recovery_settings_check(int64_t stale_ms, int64_t extract_query_timeout_ms, int max_attempts,
                               char *err, size_t errlen);

/* ---- Retention purge (docs/ledger.md "Retention", `loadctl purge`) ---------------------------------- */

/* The purge's defaults and bounds. Durations in ms. */
#define LL_PURGE_DEFAULT_OLDER_THAN_MS (400LL * 86400000LL) /* P400D: keeps at least a year */
#define LL_PURGE_MIN_OLDER_THAN_MS     (30LL * 86400000LL)  /* P30D: past every cleanup retention */
#define LL_PURGE_DEFAULT_BATCH         100L                 /* runs per transaction */
#define LL_PURGE_MAX_BATCH             1000L
#define LL_PURGE_DEFAULT_MAX_RUNS      10000L /* runs per invocation */
#define LL_PURGE_MAX_MAX_RUNS          10000000L

/* What ll_purge_check finds wrong with the purge's settings. */
typedef enum ll_purge_setting {
    LL_PURGE_SETTINGS_OK = 0,
    LL_PURGE_PERIOD_TOO_SHORT,      /* older_than < LL_PURGE_MIN_OLDER_THAN_MS (a typo like "400" = 400 s) */
    LL_PURGE_BATCH_OUT_OF_RANGE,    /* batch not in 1..LL_PURGE_MAX_BATCH */
    LL_PURGE_MAX_RUNS_OUT_OF_RANGE, /* max_runs not in 1..LL_PURGE_MAX_MAX_RUNS */
} ll_purge_setting;

/* Checks the purge's settings: the period (ms), the runs per transaction and per invocation. Pure. */
ll_purge_setting ll_purge_check(int64_t older_than_ms, long batch, long max_runs);

/*
 * How many runs the next purge transaction asks for, 0 = stop. purged = runs removed so far,
 * last_got / last_asked = what the previous transaction locked and asked for (both 0 before the
 * first). Stops when max_runs are removed or the previous transaction got fewer than it asked
 * (no candidate left that is not locked by someone else: a run skipped because it is locked is
 * left for the next purge, never waited for); else min(batch, max_runs - purged). Pure.
 */
long ll_purge_next_batch(long batch, long max_runs, long purged, long last_got, long last_asked);

#endif
