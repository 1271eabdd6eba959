/*
 * gauges.c - the sweeper's view of the ledger for the alerts (docs/design.md §12, "The sweeper's
 * view"; packaging/prometheus/loadledger.rules.yml): after every tick, whether or not this
 * sweeper held the lock, one read-only statement counts the runs in each non-terminal status with
 * the age of the least recently active one, and the DEAD outbox rows of active runs by dispatch
 * type. Every status and type is always reported (0 when none), so an alert never waits for a
 * series to appear. Bounded: the runs are read through ix_load_run_status_heartbeat for the active
 * statuses only (at most one active run per job and business key), and the statement runs under
 * the connection's db.statement_timeout like every other statement of the sweeper.
 */
#include "ll/obs.h"
#include "ll/status_sql.h"
#include "sweeper.h"

/* Rows: kind ('run' or 'dead_dispatch'), status or dispatch type, count, idle seconds. */
static const ll_stmt ST_GAUGES = {
    "sweep_gauges",
    "SELECT 'run', s.status, count(r.run_id),"
    " COALESCE(floor(extract(epoch FROM clock_timestamp() - min(r.heartbeat_at))), 0)::bigint"
    " FROM unnest(ARRAY[" LL_SQL_RUN_ACTIVE "]) AS s(status)"
    " LEFT JOIN nifi_ops.load_run r ON r.status = s.status"
    " GROUP BY s.status"
    " UNION ALL"
    " SELECT 'dead_dispatch', t.type, count(d.dispatch_id), 0"
    " FROM unnest(ARRAY['VALIDATE_RUN', 'REISSUE_PARTITION']) AS t(type)"
    " LEFT JOIN (nifi_ops.load_dispatch d JOIN nifi_ops.load_run dr ON dr.run_id = d.run_id"
    "   AND dr.status IN (" LL_SQL_RUN_ACTIVE ")) ON d.dispatch_type = t.type AND d.status = 'DEAD'"
    " GROUP BY t.type",
    0};

static ll_db_rc gauges_tx(ll_db *db, void *arg)
{
    (void)arg;
    PGresult *r = ll_db_exec(db, &ST_GAUGES, NULL);
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
