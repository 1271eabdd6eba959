/*
 * completion.h - every gate decision after a claim: chunk reports (docs/contract.md §5.4), partition
 * failure reports (§5.5), the completion CAS with its outbox row (§5.11, §5.12).
 */
#ifndef COMPLETION_H
#define COMPLETION_H

#include "ll/kloop.h"
#include "ll/ledger.h"
#include "ll/rules.h"

/* Applies one chunk report (topic chunks). See chunk_report.c. */
ll_apply completion_apply_chunk(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);
/* Applies one partition failure report (topic partition-failures). See partition_failure.c. */
ll_apply completion_apply_partition_failure(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);

/* A locked partition row (ownership.c). Strings owned by the struct. */
typedef struct owned_partition {
    ll_run_row run;
    ll_part_status status;
    char stored_token[37]; /* "" when NULL */
    int64_t expected_rows;
    ll_chunk_counters written; /* the partition's WRITTEN files (migration 0007) */
} owned_partition;

/*
 * Locks run then partition (docs/contract.md §2.8) and reads what ll_ownership_classify needs, the token
 * history only when the token is not the stored one (docs/contract.md K§6). Returns the database
 * result: LL_DB_OK with *own set, or the failed statement's (db->err; *own is then meaningless).
 * What the report then does is ll_ownership_answer's. Free op with owned_partition_clear either way.
 */
ll_db_rc lock_owned_partition(ll_db *db, const char *run_id, const char *partition_id, const char *token,
                              owned_partition *op, ll_ownership *own);
/* Frees the run row inside. */
void owned_partition_clear(owned_partition *op);

/* Applies one validation start (topic validation-starts, docs/contract.md §5.7). */
ll_apply completion_apply_validation_start(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);
/* Applies one batch of metrics (topic validation-metrics, docs/contract.md §5.8). */
ll_apply completion_apply_validation_metrics(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);
/* Applies one stage-validated request (topic stage-validations, docs/contract.md §5.9). */
ll_apply completion_apply_stage_validated(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);
/* Applies one success request (topic run-successes, docs/contract.md §5.10). */
ll_apply completion_apply_run_success(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);
/* Applies one run failure report (topic run-failures, docs/contract.md §5.6). */
ll_apply completion_apply_run_failure(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);
/* Applies one publish result (topic publish-results, docs/contract.md §5.14). */
ll_apply completion_apply_publish_result(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);

/* Locks the run of a run-level event (the first lock, docs/contract.md §2.8) and says how it was found:
 * LOCKED (the row filled), NONE (not in the ledger yet: out->reason says so) or REFUSED (its run
 * request was refused). The decision is ll_run_event_decide's (rules/run_event.c). Returns the
 * database result: LL_DB_OK with *found set, or the failed statement's (db->err). Free run with
 * ll_run_row_clear either way. */
ll_db_rc lock_run_event(ll_db *db, const char *run_id, ll_run_row *run, ll_run_found *found,
                        ll_apply_out *out);
/* Reads the stored metrics of stage and applies the gate (docs/contract.md §3.5): reasons appended to
 * *reasons (none = pass); *count = the newest all-digits value of count_metric, or -1;
 * *n_metrics = the metric rows of the stage stored (gate.c). */
ll_db_rc read_gate(ll_db *db, const char *run_id, const char *stage, const char *count_metric,
                   ll_strlist *reasons, int64_t *count, size_t *n_metrics);
/* A step behind a validation gate: the stage whose stored metrics decide, the metric that gives
 * the count, the CAS that moves the run ($1 run id, $2 count or NULL) and the event it writes. */
typedef struct gated_step {
    const char *stage, *count_metric, *event;
    const ll_stmt *cas;
} gated_step;

/* Applies the gate (docs/contract.md §3.5); when it passes, runs the CAS with the count (count_override
 * ≥ 0 wins over the metric) and writes the event; *passed says which. Reasons go to *reasons;
 * *none says no metric of the stage is stored at all (the caller defers: docs/design.md §6). */
ll_db_rc gated_move(ll_db *db, const char *run_id, const gated_step *g, int64_t count_override,
                    ll_strlist *reasons, bool *passed, bool *none);

/* The verdict of a gated step for message m (stage_validated.c, run_success.c): LL_APPLY_COMMIT
 * after the move; LL_APPLY_DEFER while no metric of the stage is stored and m's wait is not over
 * (the metrics come on another topic: after a database loss, or a replay, they may be read after
 * the request; docs/design.md §6); else the GATE_BLOCKED rejection built by blocked(), or
 * LL_APPLY_DB. passed_reply / blocked build the replies (new references). */
typedef json_t *(*gate_reply_fn)(const ll_msg *m, const char *run_id, const ll_strlist *reasons);
ll_apply gated_verdict(ll_db *db, const ll_msg *m, const char *run_id, const gated_step *g,
                       int64_t count_override, gate_reply_fn passed_reply, gate_reply_fn blocked,
                       ll_apply_out *out);

/* The reasons as a JSON array of strings (new reference). */
json_t *reasons_json(const ll_strlist *reasons);

/* Writes why an event that needs the run in `needed` waits while the run is still `current`,
 * earlier on its path, into out->reason; the entry point then returns LL_APPLY_DEFER. */
void defer_reason(ll_run_status current, ll_run_status needed, ll_apply_out *out);

#endif
