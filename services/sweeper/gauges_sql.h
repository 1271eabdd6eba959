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
 * are counted from the active runs' side: each active run (the same partial index) probes its own
 * DEAD dispatches of the type (ix_load_dispatch_dead (dispatch_type, run_id) WHERE status = 'DEAD',
 * 0017, both columns bound), in a lateral subquery that OFFSET 0 keeps a nested loop. Read the
 * other way round, every DEAD dispatch ever (contract §3.4: never retried automatically, so they
 * stay; up to a few % of a year's runs) was joined to its run on every tick: a read that grew with
 * the history (1.4-1.8 ms of a tick's gauges at a year). Nothing reads the history of ended runs,
 * ACKED dispatches or the DEAD dispatches of ended runs. */
static const ll_stmt SWEEP_ST_GAUGES = {
    "sweep_gauges",
    "SELECT 'run', s.status, r.n,"
    " COALESCE(floor(extract(epoch FROM clock_timestamp() - r.oldest)), 0)::bigint"
    " FROM unnest(ARRAY[" LL_SQL_RUN_ACTIVE "]) AS s(status)"
    " CROSS JOIN LATERAL (SELECT count(*) AS n, min(x.heartbeat_at) AS oldest"
    "   FROM nifi_ops.load_run x WHERE x.status = s.status AND x.status IN (" LL_SQL_RUN_ACTIVE ")) r"
    " UNION ALL"
    " SELECT 'dead_dispatch', t.type,"
    "  (SELECT count(*) FROM nifi_ops.load_run dr CROSS JOIN LATERAL (SELECT 1 FROM nifi_ops.load_dispatch d"
    "     WHERE d.run_id = dr.run_id AND d.dispatch_type = t.type AND d.status = 'DEAD' OFFSET 0) d"
    "    WHERE dr.status IN (" LL_SQL_RUN_ACTIVE ")),"
    "  0"
    " FROM unnest(ARRAY['VALIDATE_RUN', 'REISSUE_PARTITION']) AS t(type)",
    0};

#endif
