/*
 * claim_sql.h - the claimer's acknowledgement of a RETRY partition's reissue dispatches
 * (partition_claim.c; docs/contract.md §3.4), inside every claim of a RETRY partition: through
 * ix_load_dispatch_run (run_id, partition_id; 0017, issue 42) instead of the whole outbox. A
 * header so that the plan test prints the text that ships (tests/tools/ll_print_reads.c,
 * tests/integration/test_history_plans.py).
 */
#ifndef LL_CLAIMER_CLAIM_SQL_H
#define LL_CLAIMER_CLAIM_SQL_H

#include "ll/db.h"

/* docs/contract.md §3.4: a new claim of a RETRY partition ACKs its reissue dispatches. */
static const ll_stmt CLAIM_ACK_REISSUE = {
    "claim_ack_reissue",
    "UPDATE nifi_ops.load_dispatch SET status = 'ACKED', acked_at = clock_timestamp()"
    " WHERE run_id = $1::uuid AND partition_id = $2 AND dispatch_type = 'REISSUE_PARTITION'"
    " AND status <> 'ACKED'",
    2};

#endif
