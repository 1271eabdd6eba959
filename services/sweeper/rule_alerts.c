/*
 * rule_alerts.c - rule 4, stalled validation alerts (docs/contract.md §7.4), extended to every status
 * that never times out (the gap of §13): a run in an alert-only status (LL_SQL_RUN_ALERT_ONLY, from
 * the X-macro of ll/status.h: EXTRACTED_VALIDATED, STAGE_VALIDATING, STAGING_VALIDATED, PUBLISHED)
 * with no progress for recovery.validation_stale gets one RUN_STALE_ALERT event per stale period;
 * its status never changes. loadctl monitor's RUN_STALE takes the same list.
 */
#include "ll/ledger.h"
#include "ll/status_sql.h"
#include "sweeper.h"

static const ll_stmt ST_ALERT = {
    "sweep_stale_alert",
    "INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, run_id, job_key,"
    " business_key, process_group, processor_name, message, details)"
    " SELECT gen_random_uuid(), 'ERROR', 'RUN_STALE_ALERT', r.run_id, r.job_key, r.business_key,"
    " 'LOAD_CONTROL_API', 'sweeper', 'no progress in ' || r.status,"
    " jsonb_build_object('status', r.status, 'heartbeatAt', r.heartbeat_at)"
    " FROM nifi_ops.load_run r"
    " WHERE r.status IN (" LL_SQL_RUN_ALERT_ONLY ")"
    " AND r.heartbeat_at < clock_timestamp() - $1::interval"
    " AND NOT EXISTS (SELECT 1 FROM nifi_ops.load_event e WHERE e.run_id = r.run_id"
    "   AND e.event_name = 'RUN_STALE_ALERT' AND e.event_time > clock_timestamp() - $1::interval)",
    1};

ll_db_rc rule_stale_alerts(ll_db *db, const sweep_settings *s, sweep_counts *c)
{
    char stale[48];
    sweep_interval_text(s->validation_stale_ms, stale, sizeof stale);
    const char *p[1] = {stale};
    PGresult *r = ll_db_exec(db, &ST_ALERT, p);
    if (!r)
        return LL_DB_ERROR;
    c->stale_alert += ll_db_affected(r);
    PQclear(r);
    return LL_DB_OK;
}
