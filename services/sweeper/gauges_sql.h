/*
 * gauges_sql.h - the statement of the sweeper's gauges (gauges.c; docs/design.md §12, "The
 * sweeper's view"). A header so that the plan test prints the text that ships
 * (tests/tools/ll_print_reads.c, tests/integration/test_history_plans.py: issue 42).
 */
#ifndef LL_SWEEPER_GAUGES_SQL_H
#define LL_SWEEPER_GAUGES_SQL_H

#include "ll/db.h"
#include "ll/status_sql.h"

/* Rows: kind ('run' or 'dead_dispatch'), status or dispatch type, count, idle seconds. Each active
 * status is one range of the partial ix_load_run_active_status (status) WHERE status is active
 * (0020; the oldest heartbeat from those few rows: no index names heartbeat_at, so that the
 * heartbeats are HOT updates). The lateral read repeats the active list: `x.status = s.status`
 * alone (s.status a value of the unnest, not a constant) does not prove the partial index's
 * predicate to the planner, which then read the whole of load_run. The DEAD dispatches of each type
 * are a range of the partial ix_load_dispatch_dead (dispatch_type, run_id) WHERE status = 'DEAD'
 * (0017, contract §3.4: DEAD rows are few), each joined to its run by its primary key. Nothing
 * reads the history of ended runs or ACKED dispatches. */
static const ll_stmt SWEEP_ST_GAUGES = {
    "sweep_gauges",
    "SELECT 'run', s.status, r.n,"
    " COALESCE(floor(extract(epoch FROM clock_timestamp() - r.oldest)), 0)::bigint"
    " FROM unnest(ARRAY[" LL_SQL_RUN_ACTIVE "]) AS s(status)"
    " CROSS JOIN LATERAL (SELECT count(*) AS n, min(x.heartbeat_at) AS oldest"
    "   FROM nifi_ops.load_run x WHERE x.status = s.status AND x.status IN (" LL_SQL_RUN_ACTIVE ")) r"
    " UNION ALL"
    " SELECT 'dead_dispatch', t.type,"
    "  (SELECT count(*) FROM nifi_ops.load_dispatch d JOIN nifi_ops.load_run dr ON dr.run_id = d.run_id"
    "    WHERE d.status = 'DEAD' AND d.dispatch_type = t.type AND dr.status IN (" LL_SQL_RUN_ACTIVE ")),"
    "  0"
    " FROM unnest(ARRAY['VALIDATE_RUN', 'REISSUE_PARTITION']) AS t(type)",
    0};

#endif
