/*
 * ownership.c - who may report on a partition: the run and partition locks, then the token
 * check with the claim-token history (contract §5.4 check 3, §5.5 check 2; kafka-edition.md §6).
 *
 * Topics are consumed by different services, so a report can arrive before the claim that
 * allowed it is applied. A token the history knows but the partition no longer holds is a
 * zombie's: CLAIM_MISMATCH at once. An unknown token waits only while a claim could still be
 * granted (run EXTRACTING, partition PENDING or RETRY); otherwise that claim would be refused
 * anyway, and the answer is CLAIM_MISMATCH at once.
 */
#include <string.h>

#include "completion.h"
#include "ll/rules.h"

static const ll_stmt ST_LOCK_PARTITION = {
    "own_lock_partition",
    "SELECT status, claim_token::text, expected_row_count, written_file_count, written_row_count,"
    " written_byte_count, written_count_sum, written_count_sumsq FROM nifi_ops.load_partition"
    " WHERE run_id = $1::uuid AND partition_id = $2 FOR UPDATE",
    2};

void owned_partition_clear(owned_partition *op)
{
    ll_run_row_clear(&op->run);
}

ll_db_rc lock_owned_partition(ll_db *db, const char *run_id, const char *partition_id, const char *token,
                              owned_partition *op, ownership *own)
{
    memset(op, 0, sizeof *op);
    *own = OWN_NO_RUN;
    ll_db_rc rc = ll_run_lock(db, run_id, &op->run);
    if (rc != LL_DB_OK)
        return rc;
    if (!op->run.found) {
        bool rejected = false;
        if ((rc = ll_run_request_rejected(db, run_id, &rejected)) != LL_DB_OK)
            return rc;
        *own = rejected ? OWN_RUN_REFUSED : OWN_NO_RUN;
        return LL_DB_OK;
    }
    const char *p[2] = {run_id, partition_id};
    PGresult *r = ll_db_exec(db, &ST_LOCK_PARTITION, p);
    if (!r)
        return LL_DB_ERROR;
    if (PQntuples(r) == 0) {
        PQclear(r);
        *own = op->run.status == LL_RUN_CREATED ? OWN_NO_MANIFEST : OWN_NO_PARTITION;
        return LL_DB_OK;
    }
    ll_part_status_parse(PQgetvalue(r, 0, 0), &op->status);
    const char *stored = ll_db_text(r, 0, 1);
    if (stored)
        ll_uuid_canonical(stored, op->stored_token);
    op->expected_rows = ll_db_ll(r, 0, 2, 0);
    op->written = (ll_chunk_counters){.files = ll_db_ll(r, 0, 3, 0),
                                      .rows = ll_db_ll(r, 0, 4, 0),
                                      .bytes = ll_db_ll(r, 0, 5, 0),
                                      .count_sum = ll_db_ll(r, 0, 6, 0),
                                      .count_sumsq = ll_db_ll(r, 0, 7, 0)};
    PQclear(r);
    if (op->stored_token[0] && strcmp(op->stored_token, token) == 0) {
        *own = OWN_MATCH;
        return LL_DB_OK;
    }
    bool known = false;
    if ((rc = ll_claim_token_known(db, run_id, partition_id, token, &known)) != LL_DB_OK)
        return rc;
    /* an unknown token waits only while its claim could still be granted (§5.3) */
    bool claimable =
        ll_claim_decide(op->run.status, op->status, op->stored_token, token, false) == LL_CLAIM_GRANT;
    if (known)
        *own = OWN_SUPERSEDED;
    else
        *own = claimable ? OWN_NOT_YET : OWN_MISMATCH;
    return LL_DB_OK;
}
