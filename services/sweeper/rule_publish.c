/*
 * rule_publish.c - rule 5, stalled publish (docs/contract.md §7.5): a run PUBLISHING for longer than
 * recovery.publish_stale becomes PUBLISH_UNKNOWN (skip-locked); never retried, never failed
 * automatically: an operator resolves it with loadctl resolve-publish-unknown.
 */
#include <stdio.h>

#include "ll/ledger.h"
#include "sweeper.h"

static const ll_stmt ST_STALLED = {
    "sweep_stalled_publish",
    "WITH stalled AS (SELECT run_id FROM nifi_ops.load_run WHERE status = 'PUBLISHING'"
    "   AND publish_started_at < clock_timestamp() - $1::interval FOR UPDATE SKIP LOCKED)"
    " UPDATE nifi_ops.load_run r SET status = 'PUBLISH_UNKNOWN', error_stage = 'PUBLISH',"
    "   error_code = 'PUBLISH_STALE', error_message = $2, heartbeat_at = clock_timestamp(),"
    "   version_no = r.version_no + 1"
    " FROM stalled WHERE r.run_id = stalled.run_id AND r.status = 'PUBLISHING' RETURNING r.run_id::text",
    2};

ll_db_rc rule_stalled_publish(ll_db *db, const sweep_settings *s, sweep_counts *c)
{
    char stale[48], msg[160];
    sweep_interval_text(s->publish_stale_ms, stale, sizeof stale);
    snprintf(msg, sizeof msg, "no publish result within %s", s->publish_stale_text);
    const char *p[2] = {stale, msg};
    PGresult *r = ll_db_exec(db, &ST_STALLED, p);
    if (!r)
        return LL_DB_ERROR;
    ll_db_rc rc = LL_DB_OK;
    for (int i = 0; i < PQntuples(r) && rc == LL_DB_OK; i++, c->publish_unknown++) {
        ll_event ev = {.name = "PUBLISH_UNKNOWN",
                       .level = "ERROR",
                       .run_id = PQgetvalue(r, i, 0),
                       .chunk_index = -1,
                       .row_count = -1,
                       .error_code = "PUBLISH_STALE",
                       .message = msg};
        rc = ll_event_insert(db, &ev);
    }
    PQclear(r);
    return rc;
}
