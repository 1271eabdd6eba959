/*
 * monitor.h - `loadctl monitor`: one frame of the ledger (a snapshot) read in one read-only
 * transaction, and the two ways to show it: the ncurses dashboard (monitor_tui.c) and one plain
 * text or JSON frame for scripts (monitor_text.c). The queries are in monitor_data.c; the column
 * numbers of each result are the enums below.
 *
 * What a frame holds (docs/contract.md §5.21 "monitor summary" and its alerts):
 *   counts   the active runs per status, the runs ended in the last 24 h per status, the
 *            dispatch backlog (PENDING, SENT, DEAD), the number of cleanup candidates
 *   runs     the active runs in pipeline order with partition progress counted from the
 *            partitions (success / expected, failed, running)
 *   alerts   PUBLISH_UNKNOWN, DISPATCH_DEAD, RUN_FAILED (24 h), RUN_STALE, CLEANUP_FAILED:
 *            ERROR before WARN, newest first
 *   detail   for one selected run: its header, partitions and validation metrics
 */
#ifndef LOADCTL_MONITOR_H
#define LOADCTL_MONITOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ll/status.h"
#include "retention.h"

/* Targets of --services at most. */
#define LC_SERVICES_MAX 16

/* One service's /metrics and /readyz, summed (monitor_services.c). */
typedef struct lc_service_probe {
    char target[128]; /* host:port */
    int up;           /* /metrics answered 200 */
    int ready_status; /* HTTP status of /readyz (200 ready), 0 when not asked */
    double inputs, rejected, dead, held_runs, max_lag, outbox, rss;
    char error[160]; /* why it is down */
} lc_service_probe;

/* Parses "host:port,host:port" (at most LC_SERVICES_MAX) into a calloc'd array the caller
 * frees. 0, or -1 with err. */
int lc_services_parse(const char *list, lc_service_probe **out, size_t *n, char *err, size_t errlen);
/* Reads each service's /metrics and /readyz (1 s to connect, 2 s per request, 4 MiB at most). */
void lc_services_probe(lc_service_probe *p, size_t n);
/* Prints the services section of `monitor --once`. */
void lc_services_print_text(const lc_service_probe *p, size_t n);
/* The services as a JSON array (new reference). */
json_t *lc_services_json(const lc_service_probe *p, size_t n);

/* The monitor's settings (docs/contract.md §9 recovery.stale, recovery.validation_stale, monitor.*). */
typedef struct lc_monitor_cfg {
    int64_t refresh_ms;          /* --refresh, default 5 s */
    int64_t stale_ms;            /* --stale, default PT90M: CREATED / EXTRACTING */
    int64_t validation_stale_ms; /* --validation-stale, default PT2H: EXTRACTED_VALIDATED,
                                    STAGE_VALIDATING, PUBLISHED */
    long alert_limit;            /* --alert-limit, default 100 */
    long max_runs;               /* --max-runs, default 200 */
    lc_retention rt;             /* for the cleanup-due count */
    const char *job;             /* --job: only this job's runs, alerts and counts (NULL = all) */
    lc_service_probe *svc;       /* --services (with --once): probed before printing, or NULL */
    size_t n_svc;
    char stale_param[24], vstale_param[24], alert_param[24], runs_param[24];
} lc_monitor_cfg;

/* Columns of lc_snapshot.counts: one row per (kind, key). Kinds: "now" (key = server time),
 * "active", "recent" (key = run status), "dispatch" (key = status), "cleanupDue" (key NULL). */
enum { MC_KIND, MC_KEY, MC_N };
/* Columns of lc_snapshot.runs. */
enum {
    MR_ID,
    MR_JOB,
    MR_BK,
    MR_STATUS,
    MR_EXPECTED,
    MR_SUCCESS,
    MR_FAILED,
    MR_RUNNING,
    MR_TOTAL,
    MR_HEARTBEAT,
    MR_IDLE_S,
    MR_STARTED,
    MR_ERR_CODE
};
/* Columns of lc_snapshot.alerts. */
enum { MA_KIND, MA_SEVERITY, MA_RUN, MA_JOB, MA_BK, MA_AT, MA_MESSAGE, MA_DISPATCH, MA_AT_SHORT };
/* Columns of lc_snapshot.run (one row). */
enum {
    MD_ID,
    MD_JOB,
    MD_BK,
    MD_STATUS,
    MD_ERR_CODE,
    MD_ERR_MSG,
    MD_HEARTBEAT,
    MD_EXPECTED,
    MD_SOURCE,
    MD_EXTRACTED
};
/* Columns of lc_snapshot.parts. */
enum { MP_ID, MP_STATUS, MP_EXPECTED, MP_ACTUAL, MP_CHUNKS, MP_ATTEMPTS, MP_WORKER, MP_ERR_CODE, MP_IDLE_S };
/* Columns of lc_snapshot.metrics. */
enum { MM_STAGE, MM_NAME, MM_EXPECTED, MM_ACTUAL, MM_RESULT, MM_VERSION };

/* One frame. Every result is owned (PQclear'ed by lc_snapshot_clear); the detail results are
 * NULL when no run was asked for, and run has no row when that run does not exist. */
typedef struct lc_snapshot {
    PGresult *counts, *runs, *alerts;
    PGresult *run, *parts, *metrics;
} lc_snapshot;

/*
 * Reads a frame (with the detail of run_id unless NULL) in one REPEATABLE READ READ ONLY
 * transaction, reconnecting first when the connection was lost. Returns 0, or -1 with the
 * reason in db->err (s is then left empty).
 */
int lc_snapshot_load(ll_db *db, const lc_monitor_cfg *cfg, const char *run_id, lc_snapshot *s);
/* Frees the results of a frame; s is empty afterwards. */
void lc_snapshot_clear(lc_snapshot *s);
/* The number of (kind, key) in counts (0 when absent; key NULL matches a NULL key). */
long lc_snapshot_count(const lc_snapshot *s, const char *kind, const char *key);
/* The database time of the frame (ISO-8601 UTC), or "". */
const char *lc_snapshot_time(const lc_snapshot *s);

/* The run statuses in the order a dashboard lists them: the LC_N_ACTIVE active ones first in
 * pipeline order, then the others (generated from LL_RUN_STATUSES, monitor_data.c). Static strings. */
extern const char *const LC_STATUS_ORDER[LL_RUN_STATUS_COUNT];
/* How many of LC_STATUS_ORDER are active (ll_run_status_is_active; docs/contract.md §3.1): counted from
 * LL_RUN_STATUSES. */
#define LC_ACTIVE_ONE_(name, active, terminal, rank, alert) +(active)
#define LC_N_ACTIVE                                         (0 LL_RUN_STATUSES(LC_ACTIVE_ONE_))
/* "45s", "12m", "3h05", "2d04" for an age in seconds (negative as 0). */
void lc_format_age(long long secs, char *out, size_t len);

/* Prints one frame as plain text on stdout (`monitor --once`). */
void lc_monitor_print_text(const lc_snapshot *s, const lc_monitor_cfg *cfg);
/* Prints one frame as one JSON object on stdout (`monitor --once --json`). */
void lc_monitor_print_json(const lc_snapshot *s, const lc_monitor_cfg *cfg);

/*
 * Runs the ncurses dashboard until q, Ctrl-C or SIGTERM; the terminal is restored on every exit
 * path. run_id (may be NULL) is selected first. Returns LC_OK, or LC_USAGE when the terminal
 * cannot be used.
 */
int lc_monitor_tui(ll_db *db, const lc_monitor_cfg *cfg, const char *run_id);

#endif
