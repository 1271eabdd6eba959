/*
 * claim.c - who may own a partition: the claim decision and its refusal codes.
 *
 * docs/contract.md §5.3 steps 2-5, taken under the run and partition locks by the caller:
 *   1. run not EXTRACTING                       -> REFUSE_RUN   (claimed=false; checked first)
 *   2. partition RUNNING and same claim token   -> REPLAY       (claimed=true, nothing written)
 *   3. partition neither PENDING nor RETRY      -> REFUSE_PARTITION (claimed=false)
 *   4. the token was granted here before        -> REFUSE_SUPERSEDED (claimed=false, CLAIM_MISMATCH)
 *   5. otherwise                                -> GRANT        (RUNNING, new token, attempt+1)
 * Step 4 is the Kafka edition's (docs/contract.md K§1, K§6; migration 0003): the ledger keeps every
 * token it granted, and one that was superseded (a zombie worker's, or a claim replayed over a
 * partition the sweeper reissued) never owns the partition again, even while it is claimable.
 * Tokens are compared as UUIDs (case-insensitive); a NULL or malformed token never matches.
 */
#include "ll/rules.h"

#include <stddef.h>

/* §5.3: decides a claim from the locked statuses, the partition's token and the token history. */
ll_claim_decision ll_claim_decide(ll_run_status run, ll_part_status part, const char *stored_token,
                                  const char *request_token, bool granted_before)
{
    if (run != LL_RUN_EXTRACTING)
        return LL_CLAIM_REFUSE_RUN;
    if (part == LL_PART_RUNNING && ll_uuid_equal(stored_token, request_token))
        return LL_CLAIM_REPLAY;
    if (part != LL_PART_PENDING && part != LL_PART_RETRY)
        return LL_CLAIM_REFUSE_PARTITION;
    if (granted_before)
        return LL_CLAIM_REFUSE_SUPERSEDED;
    return LL_CLAIM_GRANT;
}

/* §5.3 refusals: the reply code NiFi gets with claimed=false. */
const char *ll_claim_refusal_code(ll_claim_decision d, ll_part_status part)
{
    switch (d) {
    case LL_CLAIM_REFUSE_RUN:
        return "RUN_STATUS_MISMATCH";
    case LL_CLAIM_REFUSE_PARTITION:
        /* another token holds the partition, or it is finished */
        return part == LL_PART_RUNNING ? "CLAIM_MISMATCH" : "PARTITION_STATUS_MISMATCH";
    case LL_CLAIM_REFUSE_SUPERSEDED:
        return "CLAIM_MISMATCH";
    case LL_CLAIM_GRANT:
    case LL_CLAIM_REPLAY:
    default:
        return NULL;
    }
}
