/*
 * verify.h - the decisions of `loadctl verify` as pure functions: which run status a ledger
 * event leads to (docs/contract.md §3.1, §8), what a run's events imply, and how one input offset is
 * accounted for on the topics (docs/contract.md K§3: one reply or one dead letter per input; §1: a
 * replay answers REPLAY and changes nothing, so a later agreeing REPLAY is no second answer).
 * No I/O: loadctl reads the ledger and the topics and hands the facts to these.
 */
#ifndef LL_VERIFY_H
#define LL_VERIFY_H

#include <stdbool.h>
#include <stddef.h>

#include "ll/status.h"

/* The fields of one load_event row that decide the run status it leads to. Borrowed strings;
 * any may be NULL. */
typedef struct ll_status_event {
    const char *name;         /* event_name */
    const char *partition_id; /* partition_id (RUN_FAILED of a partition failure or a gate) */
    const char *error_code;   /* error_code */
    const char *error_class;  /* error_class */
    const char *to;           /* details->>'to' (RUN_FAILED of a run failure report, §5.6) */
    const char *resolution;   /* details->>'resolution' (PUBLISH_UNKNOWN_RESOLVED, §5.15) */
    bool has_publish_token;   /* details ? 'publishToken' (RUN_FAILED of a publish result, §5.14) */
} ll_status_event;

/* What an event says about the run status. */
typedef enum ll_event_effect {
    LL_EV_NONE = 0,   /* the event changes no run status (PARTITION_*, DISPATCH_*, DEAD_LETTER, ...) */
    LL_EV_SETS = 1,   /* the event is written by exactly one transition: *out is its target */
    LL_EV_UNKNOWN = 2 /* a status event whose target cannot be told (a RUN_FAILED without its facts) */
} ll_event_effect;

/*
 * The run status an event leads to (docs/contract.md §3.1 transitions with the §8 events they write):
 * RUN_STARTED → CREATED; MANIFEST_CREATED → EXTRACTING; MANIFEST_INVALID → FAILED_MANIFEST;
 * EXTRACT_VALIDATED → EXTRACTED_VALIDATED; STAGE_VALIDATION_STARTED → STAGE_VALIDATING;
 * STAGE_VALIDATED → STAGING_VALIDATED; PUBLISH_STARTED → PUBLISHING; PUBLISH_FINISHED →
 * PUBLISHED; PUBLISH_UNKNOWN → PUBLISH_UNKNOWN; PUBLISH_UNKNOWN_RESOLVED → its resolution
 * (PUBLISHED or FAILED_PUBLISH); RUN_SUCCESS → SUCCESS; RUN_TIMED_OUT → TIMED_OUT; RUN_FAILED →
 * details.to when present (§5.6), else FAILED_PUBLISH with a publish token (§5.14), else with a
 * partition FAILED_SNAPSHOT_EXPIRED for a snapshot error and FAILED_EXTRACT otherwise (§5.4
 * gate, §5.5). Returns LL_EV_SETS with *out, LL_EV_NONE, or LL_EV_UNKNOWN.
 */
ll_event_effect ll_event_run_status(const ll_status_event *e, ll_run_status *out);

/*
 * The status a run's events imply: the target of the last event (in event_time order, as
 * given) that sets one. Returns 0 with *out, 1 when no event sets a status (a run without
 * RUN_STARTED), or -1 when the last status event is LL_EV_UNKNOWN.
 */
int ll_run_status_implied(const ll_status_event *ev, size_t n, ll_run_status *out);

/* The names of every event that may set a run status (NULL-terminated), for the query that
 * selects them. */
extern const char *const LL_STATUS_EVENT_NAMES[];

/* The same names as an SQL list of literals, in the same order: `loadctl verify` selects a run's
 * status events with `event_name IN (LL_STATUS_EVENT_NAMES_SQL)`, a predicate the planner can match
 * to the partial index ix_load_event_status (schemas/sql/0019_status_events.sql, whose predicate is
 * this list) only when it is written out, not passed as a parameter. tests/unit/test_rules_verify.c
 * keeps it equal to LL_STATUS_EVENT_NAMES, tests/integration/test_history_plans.py to the index. */
#define LL_STATUS_EVENT_NAMES_SQL                                                                            \
    "'RUN_STARTED', 'MANIFEST_CREATED', 'MANIFEST_INVALID', 'EXTRACT_VALIDATED', "                           \
    "'STAGE_VALIDATION_STARTED',"                                                                            \
    " 'STAGE_VALIDATED', 'PUBLISH_STARTED', 'PUBLISH_FINISHED', 'PUBLISH_UNKNOWN', 'RUN_SUCCESS',"           \
    " 'RUN_TIMED_OUT', 'RUN_FAILED', 'PUBLISH_UNKNOWN_RESOLVED'"

/* How one consumed input offset is accounted for on the topics. */
typedef enum ll_input_verdict {
    LL_INPUT_OK = 0,           /* exactly one reply or one dead letter */
    LL_INPUT_MISSING = 1,      /* neither: the offset was committed without its effect */
    LL_INPUT_DUPLICATE = 2,    /* more than one reply and dead letter together */
    LL_INPUT_CONTRADICTED = 3, /* a later answer disagrees with the original one */
} ll_input_verdict;

/* Whether a reply grants the exclusive right its schema names (ClaimDecision and
 * PublishClaimDecision `claimed`, ValidationStartDecision `started`). */
typedef enum ll_grant {
    LL_GRANT_NA = 0, /* the reply has no such flag (or a dead letter) */
    LL_GRANT_NO = 1, /* the flag is false */
    LL_GRANT_YES = 2 /* the flag is true: the sender may act alone */
} ll_grant;

/* One answer naming an input: a committed reply (outcome, code, grant) or a dead letter.
 * Borrowed strings; outcome and code may be NULL. */
typedef struct ll_answer {
    bool dead_letter;    /* a dead letter (outcome, code and granted unused) */
    const char *outcome; /* the reply's outcome: ACCEPTED, REPLAY, REJECTED */
    const char *code;    /* the reply's code (a rejection's, or a notable replay's), NULL if none */
    ll_grant granted;    /* the reply's claimed/started flag */
} ll_answer;

/*
 * Judges an input offset below its group's committed offset from every answer naming it, in
 * topic order (docs/contract.md K§3: one answer per input; §1: a replay never changes a correct
 * ledger; docs/operations.md "Restore from a backup"). restored: the input was replayed after a
 * restore (at or above the offset recorded with the backup), so two ledgers answered it.
 * Returns LL_INPUT_OK, LL_INPUT_MISSING (no answer), LL_INPUT_DUPLICATE or
 * LL_INPUT_CONTRADICTED.
 */
ll_input_verdict ll_input_judge_answers(const ll_answer *a, size_t n, bool restored);

/* Judges an input offset below the group's committed offset from the committed replies and
 * dead letters naming it (docs/contract.md K§3: the reply and the offset commit are one Kafka
 * transaction). Negative counts are treated as 0. */
ll_input_verdict ll_input_judge(long replies, long dead_letters);

/*
 * Whether a chunk report below the committed offset is accounted for (nothing lost): its
 * load_file row exists, or its reply said REJECTED or REPLAY (reply_outcome, NULL when there is
 * no reply), or it was dead-lettered. An ACCEPTED reply without the file row is a lost chunk.
 */
bool ll_chunk_accounted(bool file_row, const char *reply_outcome, bool dead_letter);

#endif
