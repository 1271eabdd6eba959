/*
 * gauges.c - the sweeper's view of the ledger for the alerts (docs/design.md §12, "The sweeper's
 * view"; packaging/prometheus/loadledger.rules.yml): after every tick, whether or not this
 * sweeper held the lock, one read-only statement counts the runs in each non-terminal status with
 * the age of the least recently active one, and the DEAD outbox rows of active runs by dispatch
 * type. Every status and type is always reported (0 when none), so an alert never waits for a
 * series to appear. Bounded (gauges_sql.h): the runs are read through ix_load_run_active_status (0020)
 * for the active statuses only (at most one active run per job and business key), the DEAD
 * dispatches through ix_load_dispatch_dead (0017), and the statement runs under the connection's
 * db.statement_timeout like every other statement of the sweeper.
 */
#include "ll/obs.h"
#include "ll/status_sql.h"
#include "gauges_sql.h"
#include "sweeper.h"

static ll_db_rc gauges_tx(ll_db *db, void *arg)
{
    (void)arg;
    PGresult *r = ll_db_exec(db, &SWEEP_ST_GAUGES, NULL);
    if (!r)
        return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *kind = ll_db_text(r, i, 0), *name = ll_db_text(r, i, 1);
        double n = (double)ll_db_ll(r, i, 2, 0), idle = (double)ll_db_ll(r, i, 3, 0);
        if (!kind || !name)
            continue;
        if (kind[0] == 'r')
            ll_obs_ledger_runs(name, n, idle);
        else
            ll_obs_ledger_dead_dispatches(name, n);
    }
    PQclear(r);
    return LL_DB_ROLLBACK; /* read only */
}

ll_db_rc sweep_gauges(ll_db *db)
{
    ll_db_rc rc = ll_db_transaction(db, gauges_tx, NULL);
    return rc == LL_DB_ROLLBACK ? LL_DB_OK : rc;
}
