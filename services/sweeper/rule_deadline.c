/*
 * rule_deadline.c - rule 2, the run deadline (docs/contract.md §7.2): CREATED or EXTRACTING runs started
 * longer than recovery.run_timeout ago, oldest first, skip-locked, end TIMED_OUT with their
 * unfinished partitions (RUN_TIMEOUT). Runs rule 1 timed out in this tick no longer match.
 */
#include <stdio.h>

#include "ll/ledger.h"
#include "sweeper.h"

static const ll_stmt ST_LATE_RUNS = {
    "sweep_late_runs",
    "SELECT run_id::text, status FROM nifi_ops.load_run WHERE status IN ('CREATED', 'EXTRACTING')"
    " AND started_at < clock_timestamp() - $1::interval ORDER BY started_at FOR UPDATE SKIP LOCKED",
    1};

ll_db_rc rule_run_deadline(ll_db *db, const sweep_settings *s, sweep_counts *c)
{
    char timeout[48];
    sweep_interval_text(s->run_timeout_ms, timeout, sizeof timeout);
    const char *p[1] = {timeout};
    PGresult *r = ll_db_exec(db, &ST_LATE_RUNS, p);
    if (!r)
        return LL_DB_ERROR;
    ll_db_rc rc = LL_DB_OK;
    for (int i = 0; i < PQntuples(r) && rc == LL_DB_OK; i++) {
        char msg[200];
        snprintf(msg, sizeof msg, "exceeded %s in %s", s->run_timeout_text, PQgetvalue(r, i, 1));
        json_t *details = json_pack("{s:s}", "from", PQgetvalue(r, i, 1));
        rc = sweep_timeout_run(db, PQgetvalue(r, i, 0), "RUN_TIMEOUT", msg, details);
        json_decref(details);
        c->timeout_run_deadline++;
    }
    PQclear(r);
    return rc;
}
