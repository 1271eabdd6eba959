/*
 * runs_sql.h - the statement of `loadctl runs` (runs.c; docs/contract.md §5.20): newest first, read in
 * the order of ix_load_run_started (started_at DESC, run_id; 0017) and stopped after the limit, or
 * of ix_load_run_job_started with --job (issue 42). A header so that the plan test prints the text
 * that ships (tests/tools/ll_print_reads.c, tests/integration/test_history_plans.py).
 */
#ifndef LOADCTL_RUNS_SQL_H
#define LOADCTL_RUNS_SQL_H

#include "loadctl.h"

/* Unset filters are NULL parameters, so the SQL text never changes with the input. The
 * progress columns are the run's counters (docs/contract.md §5.20), PARTS = success/expected. */
static const ll_stmt RUNS_LIST = {
    "loadctl_runs",
    "SELECT run_id, job_key, business_key, status, source_count, extracted_count, staging_count,"
    " target_count, expected_partition_count, success_partition_count, failed_partition_count,"
    " " LC_ISO("started_at") ", " LC_ISO("heartbeat_at") ", " LC_ISO(
        "completed_at") ", error_code"
                        " FROM nifi_ops.load_run"
                        " WHERE ($1::text IS NULL OR job_key = $1) AND ($2::text IS NULL OR business_key = "
                        "$2)"
                        "   AND ($3::text IS NULL OR status = $3)"
                        " ORDER BY started_at DESC, run_id LIMIT $4::int",
    4};

#endif
