/*
 * runs_ended.c - the runs that ended, for loadledger_runs_ended_total{status,load_job} and
 * loadledger_run_duration_seconds{load_job} (obs.h; docs/operations.md, "Runs ended and their
 * duration"). Every sweeper, lock or not, reads after each tick the runs whose completed_at lies
 * past its watermark, oldest first, and counts each once.
 *
 * The watermark is a (completed_at, run_id) pair kept in memory: a run is counted when its key is
 * above the watermark and its completed_at at most metrics.runs_ended_settle before the
 * database's clock (a transaction that stamped completed_at commits within that settle, so no row
 * appears later below the watermark). At the start it is the database's clock minus the settle:
 * the counters start at 0 with the process, as Prometheus expects of a counter, and a restart
 * never counts a run a second time (the runs that ended while no sweeper ran are not counted).
 * Several sweepers each count every run: aggregate with max, not sum (docs/operations.md).
 *
 * Bounded: ix_load_run_completed (schemas/sql/0016_run_ended_index.sql) serves the keyset range,
 * at most RUNS_ENDED_PAGE rows a statement and RUNS_ENDED_PAGES statements a tick (the rest the
 * next tick), under db.statement_timeout like every statement of the sweeper.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/log.h"
#include "ll/obs.h"
#include "ll/status_sql.h"
#include "sweeper.h"

#define RUNS_ENDED_PAGE  500
#define RUNS_ENDED_PAGES 10
/* The largest uuid: with a timestamp, "every run that ended at or before it". */
#define UUID_MAX "ffffffff-ffff-ffff-ffff-ffffffffffff"

/* The database's clock minus the settle ($1 interval): the highest completed_at read now. */
static const ll_stmt ST_ENDED_HI = {"sweep_runs_ended_hi", "SELECT (clock_timestamp() - $1::interval)::text",
                                    1};

/* The runs ended above the watermark ($1 completed_at, $2 run_id) up to $3, in key order; rows:
 * job_key, status, duration (seconds), completed_at (text, microseconds), run_id. LIMIT is
 * RUNS_ENDED_PAGE. The texts have names of their own: an ORDER BY completed_at would sort by the
 * output column (the text, a sort of the whole window) instead of reading the index in order
 * (EXPLAIN on 400000 runs: an index scan of ix_load_run_completed stopping at 500 rows, 0.8 ms). */
static const ll_stmt ST_ENDED = {
    "sweep_runs_ended",
    "SELECT r.job_key, r.status, extract(epoch FROM r.completed_at - r.started_at)::float8,"
    " r.completed_at::text AS ended_text, r.run_id::text AS run_text FROM nifi_ops.load_run r"
    " WHERE r.completed_at IS NOT NULL AND (r.completed_at, r.run_id) > ($1::timestamptz, $2::uuid)"
    " AND r.completed_at <= $3::timestamptz AND r.status IN (" LL_SQL_RUN_TERMINAL ")"
    " ORDER BY r.completed_at, r.run_id LIMIT 500",
    3};

struct sweep_ended {
    int64_t settle_ms;
    char wm_at[64]; /* "" until the first read set it */
    char wm_id[40];
};

sweep_ended *sweep_ended_new(int64_t settle_ms)
{
    sweep_ended *e = calloc(1, sizeof *e);
    if (e)
        e->settle_ms = settle_ms;
    return e;
}

void sweep_ended_free(sweep_ended *e)
{
    free(e);
}

typedef struct ended_tx {
    sweep_ended *e;
    long counted;
} ended_tx;

static ll_db_rc ended_tx_fn(ll_db *db, void *arg)
{
    ended_tx *t = arg;
    sweep_ended *e = t->e;
    char settle[48], hi[64];
    sweep_interval_text(e->settle_ms, settle, sizeof settle);
    const char *p1[1] = {settle};
    PGresult *r = ll_db_exec(db, &ST_ENDED_HI, p1);
    if (!r)
        return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
    snprintf(hi, sizeof hi, "%s", PQgetvalue(r, 0, 0));
    PQclear(r);
    if (!e->wm_at[0]) { /* the start: count from here on */
        snprintf(e->wm_at, sizeof e->wm_at, "%s", hi);
        snprintf(e->wm_id, sizeof e->wm_id, "%s", UUID_MAX);
        return LL_DB_ROLLBACK;
    }
    for (int page = 0; page < RUNS_ENDED_PAGES; page++) {
        const char *p[3] = {e->wm_at, e->wm_id, hi};
        if (!(r = ll_db_exec(db, &ST_ENDED, p)))
            return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
        int n = PQntuples(r);
        for (int i = 0; i < n; i++) {
            const char *dur = ll_db_text(r, i, 2);
            ll_obs_run_ended(ll_db_text(r, i, 1), ll_db_text(r, i, 0), dur ? strtod(dur, NULL) : 0);
            t->counted++;
        }
        ll_obs_ended_next(n, RUNS_ENDED_PAGE, n ? PQgetvalue(r, n - 1, 3) : NULL,
                          n ? PQgetvalue(r, n - 1, 4) : NULL, hi, e->wm_at, sizeof e->wm_at, e->wm_id,
                          sizeof e->wm_id);
        PQclear(r);
        if (n < RUNS_ENDED_PAGE)
            break;
    }
    return LL_DB_ROLLBACK; /* read only */
}

ll_db_rc sweep_runs_ended(ll_db *db, sweep_ended *e)
{
    /* The watermark moves past each page as it is counted: a failure in a later page (or a re-run
     * of the transaction) reads on from the last page counted, never counting a run twice. */
    ended_tx t = {e, 0};
    ll_db_rc rc = ll_db_transaction(db, ended_tx_fn, &t);
    return rc == LL_DB_ROLLBACK ? LL_DB_OK : rc;
}
