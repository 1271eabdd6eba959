/*
 * retention.h - when a run is due for cleanup (docs/contract.md §5.17, §5.18, §9 cleanup.*): the one rule
 * shared by `cleanup-candidates`, `cleanup` and the monitor's "cleanup due" count, and the
 * options that set its durations.
 *
 * A run is due when it is not cleaned yet and either SUCCESS with its ended time older than the
 * success retention, or in one of the seven failure/timeout statuses with its ended time older
 * than the failed retention. Ended time = completed_at, else heartbeat_at. Active runs
 * (PUBLISH_UNKNOWN included) are never due. The database clock decides.
 */
#ifndef LOADCTL_RETENTION_H
#define LOADCTL_RETENTION_H

#include <stdint.h>

#include "loadctl.h"

/* Ended time of the run row aliased `r`: load_run.ended_at (0020), generated as coalesce(completed_at,
 * heartbeat_at) once the status is terminal (NULL while active). Every read here selects terminal
 * runs only, on which it is that coalesce; a column rather than the expression so that no index of
 * load_run names heartbeat_at (the heartbeats stay HOT updates, issue 42). Needs schema 0020. */
#define LC_ENDED "r.ended_at"

/* The retention class of the run row `r`: 'success', 'failed' or NULL (never due). */
#define LC_RETENTION_CLASS                                                                                   \
    "CASE WHEN r.status = 'SUCCESS' THEN 'success' WHEN r.status IN (" LC_FAILED_STATUSES ")"                \
    " THEN 'failed' END"

/*
 * SQL condition "run `r` is past its retention" (cleaned_at not tested); S and F are the
 * parameters ("$2") holding the success and failed retentions in milliseconds (bigint).
 */
#define LC_PAST_RETENTION(S, F)                                                                              \
    "((r.status = 'SUCCESS' AND " LC_ENDED " < clock_timestamp() - " S "::bigint"                            \
    " * interval '1 millisecond') OR (r.status IN (" LC_FAILED_STATUSES ") AND " LC_ENDED                    \
    " < clock_timestamp() - " F "::bigint * interval '1 millisecond'))"

/*
 * SQL condition implied by LC_PAST_RETENTION(S, F): the run `r` ended before the shorter of the two
 * retentions. It changes no answer (but for a run that ends its retention in the microseconds
 * between the bound's clock reading and the row's); it makes the range of the ended time explicit,
 * so that a read of the runs due is a range of ix_load_run_cleanup_ended_at (0020) that stops at the
 * retention instead of every run not cleaned (issue 42). The bound is an initplan (evaluated once,
 * first), so the planner may use it as an index bound, which the volatile clock_timestamp() alone
 * is not.
 */
#define LC_ENDED_BEFORE_RETENTION(S, F)                                                                      \
    LC_ENDED " < (SELECT clock_timestamp() - least(" S "::bigint, " F "::bigint) * interval '1 "             \
             "millisecond')"

/* The cleanup settings (docs/contract.md §9 cleanup.*), as loadctl options. */
typedef struct lc_retention {
    const char *success_text; /* --success-retention, default P3D */
    const char *failed_text;  /* --failed-retention, default P14D */
    const char *batch_text;   /* --max-batch, default 200 */
    int64_t success_ms, failed_ms;
    long max_batch;
    char success_param[24], failed_param[24]; /* the ms as bound-parameter text */
} lc_retention;

/* Sets the defaults and the option names into specs[0..2] (three entries, caller terminates). */
void lc_retention_options(lc_retention *rt, lc_optspec *specs);
/* Parses what the options gave. Returns LC_CONTINUE, or LC_USAGE after reporting it. */
int lc_retention_parse(const lc_opts *o, lc_retention *rt);

/* The usage lines of the three options (for a command's --help). */
#define LC_RETENTION_USAGE                                                                                   \
    "  --success-retention D   SUCCESS runs are due D after they ended (default P3D)\n"                      \
    "  --failed-retention D    failed and timed-out runs are due D after (default P14D)\n"                   \
    "  --max-batch N           cap of any candidate list (cleanup.max_batch, default 200)\n"                 \
    "Durations are ISO-8601 (P3D, PT90M) or seconds; ended time = completed_at, else heartbeat_at.\n"

#endif
