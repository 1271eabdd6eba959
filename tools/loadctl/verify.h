/*
 * verify.h - `loadctl verify`: the invariants of the ledger and of the topics, each with its
 * count of violations (0 = it holds). verify.c runs the command and prints the result,
 * verify_ledger.c checks the ledger, verify_topics.c the topics (with --topics).
 */
#ifndef LOADCTL_VERIFY_H
#define LOADCTL_VERIFY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "ll/config.h"
#include "ll/db.h"

/* How many examples of violations one check keeps (run ids, topic/partition@offset). */
#define VF_SAMPLES 10

/* One invariant and what the check found. */
typedef struct vf_check {
    const char *name; /* stable key, e.g. "run_status" */
    const char *what; /* the invariant in one line */
    bool ran;         /* false: not checked (the topics without --topics) */
    bool bounded;     /* a bound (--max-records, --timeout) stopped the check: the count is a floor */
    long violations;  /* how many runs, partitions or offsets break it */
    json_t *samples;  /* array of strings (at most VF_SAMPLES), owned */
} vf_check;

/* The checks in the order they are printed. */
enum {
    VF_RUN_STATUS = 0,     /* every run's status is the one its events imply */
    VF_VALIDATE_DISPATCH,  /* one VALIDATE_RUN dispatch per run past extraction, none before */
    VF_STAGE_VALIDATING,   /* at most one STAGE_VALIDATION_STARTED per run */
    VF_PARTITION_ROWS,     /* a SUCCESS partition's WRITTEN files sum to its rows */
    VF_PARTITION_COUNTERS, /* the counters of migration 0007 equal the WRITTEN files */
    VF_ONE_REPLY,          /* every committed input offset: one answer (later REPLAYs agreeing with it) */
    VF_OFFSET_AHEAD,       /* no committed offset ahead of its effect (no reply, no dead letter) */
    VF_CHUNK_LOST,         /* every committed chunk report: a file row, REJECTED/REPLAY, or dead letter */
    VF_COUNT
};

/* Records one violation of c with a printf-formatted example (kept while fewer than VF_SAMPLES). */
void vf_violation(vf_check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Runs the ledger checks (VF_RUN_STATUS .. VF_PARTITION_COUNTERS) on db. Returns 0, or -1 with
 * db->err set (the statement's name in *what). */
int vf_check_ledger(ll_db *db, vf_check *checks, const char **what);

/* Bounds of the topic checks. */
typedef struct vf_bounds {
    int64_t max_records; /* records read in all, inputs, replies and dead letters together */
    int64_t timeout_ms;  /* wall time of all the reading */
} vf_bounds;

/*
 * Runs the topic checks (VF_ONE_REPLY .. VF_CHUNK_LOST) against the broker of cfg (kafka.*,
 * topic.prefix, topic.<logical>.name/framing, schema.dir, schema.ids_file): the committed offsets
 * of the groups <prefix>registrar, <prefix>claimer and <prefix>completion, their inputs below
 * them, every reply and dead letter (read_committed), and for the chunk reports the file rows
 * of db. restored: the offsets file (`loadctl offsets save`, borrowed) of a restore the topics
 * were replayed after, or NULL: an input at or above its recorded offset may have a second
 * agreeing answer of the restored ledger (ll_input_judge_answers). Returns 0, or -1 with a
 * one-line reason in err (configuration, broker or database).
 */
int vf_check_topics(const ll_config *cfg, ll_db *db, const vf_bounds *b, json_t *restored, vf_check *checks,
                    char *err, size_t errlen);

#endif
