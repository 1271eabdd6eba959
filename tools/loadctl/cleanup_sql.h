/*
 * cleanup_sql.h - the statement of `loadctl cleanup-candidates` (cleanup.c; docs/contract.md §5.17):
 * the runs not cleaned, oldest ended first, read in the order of ix_load_run_cleanup_ended_at
 * (ended_at, run_id) WHERE cleaned_at IS NULL (0020; ended_at = LC_ENDED) and stopped after
 * the limit (issue 42). A header so that the plan test prints the text that ships
 * (tests/tools/ll_print_reads.c, tests/integration/test_history_plans.py).
 */
#ifndef LOADCTL_CLEANUP_SQL_H
#define LOADCTL_CLEANUP_SQL_H

#include "retention.h"

/* §5.17: $1 job or NULL, $2/$3 retentions (ms), $4 the effective limit. */
static const ll_stmt CLEANUP_CANDIDATES = {
    "cleanup_candidates",
    "SELECT r.run_id, r.job_key, r.business_key, r.status, r.hdfs_run_path, r.stage_table_name, " LC_ISO(
        LC_ENDED) ", " LC_RETENTION_CLASS " FROM nifi_ops.load_run r"
                  " WHERE r.cleaned_at IS NULL AND ($1::text IS NULL OR r.job_key = $1)"
                  "   AND " LC_PAST_RETENTION("$2", "$3") " AND " LC_ENDED_BEFORE_RETENTION(
                      "$2", "$3") " ORDER BY " LC_ENDED ", r.run_id LIMIT $4::int",
    4};

#endif
