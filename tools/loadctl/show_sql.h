/*
 * show_sql.h - the outbox rows of one run for `loadctl show` (show.c; docs/contract.md §5.19,
 * §5.21), through ix_load_dispatch_run (run_id, partition_id; 0017, issue 42). A header so that
 * the plan test prints the text that ships (tests/tools/ll_print_reads.c,
 * tests/integration/test_history_plans.py).
 */
#ifndef LOADCTL_SHOW_SQL_H
#define LOADCTL_SHOW_SQL_H

#include "loadctl.h"

/* The run $1's dispatches in the order they were made. */
static const ll_stmt SHOW_DISPATCHES = {
    "show_dispatches",
    "SELECT dispatch_id, dispatch_type, partition_id, status, attempt_count, " LC_ISO(
        "next_attempt_at") ", " LC_ISO("sent_at") ", " LC_ISO("acked_at") ", last_http_status,"
                                                                          " last_error FROM "
                                                                          "nifi_ops.load_dispatch WHERE "
                                                                          "run_id = $1::uuid ORDER BY "
                                                                          "created_at, dispatch_id",
    1};

#endif
