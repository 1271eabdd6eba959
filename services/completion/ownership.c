/*
 * ownership.c - the run and partition locks of a partition report and what the ownership rule
 * needs (docs/contract.md §5.4 check 3, §5.5 check 2; docs/contract.md K§6): the run, its refusal, the
 * partition row, the claim-token history. The classification is ll_ownership_classify's
 * (common/src/rules/ownership.c).
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
                              owned_partition *op, ll_ownership *own)
{
    memset(op, 0, sizeof *op);
    *own = LL_OWN_NO_RUN;
    ll_ownership_in in = {.run = LL_RUN_FOUND_NONE, .token = token};
    ll_db_rc rc = ll_run_lock(db, run_id, &op->run);
    if (rc != LL_DB_OK)
        return rc;
    if (!op->run.found) {
        bool rejected = false;
        if ((rc = ll_run_request_rejected(db, run_id, &rejected)) != LL_DB_OK)
            return rc;
        in.run = rejected ? LL_RUN_FOUND_REFUSED : LL_RUN_FOUND_NONE;
        *own = ll_ownership_classify(&in);
        return LL_DB_OK;
    }
    in.run = LL_RUN_FOUND_LOCKED;
    in.run_status = op->run.status;
    const char *p[2] = {run_id, partition_id};
    PGresult *r = ll_db_exec(db, &ST_LOCK_PARTITION, p);
    if (!r)
        return LL_DB_ERROR;
    if (PQntuples(r) == 0) {
        PQclear(r);
        *own = ll_ownership_classify(&in);
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
    in.partition_found = true;
    in.part = op->status;
    in.stored_token = op->stored_token;
    if (ll_ownership_classify(&in) != LL_OWN_MATCH &&
        (rc = ll_claim_token_known(db, run_id, partition_id, token, &in.token_known)) != LL_DB_OK)
        return rc;
    *own = ll_ownership_classify(&in);
    return LL_DB_OK;
}
