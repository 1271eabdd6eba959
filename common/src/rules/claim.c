/*
 * claim.c - who may own a partition: the claim decision.
 *
 * Contract §5.3 steps 2-4, taken under the run and partition locks by the caller:
 *   1. run not EXTRACTING                       -> REFUSE_RUN   (claimed=false; checked first)
 *   2. partition RUNNING and same claim token   -> REPLAY       (heartbeat only, claimed=true)
 *   3. partition neither PENDING nor RETRY      -> REFUSE_PARTITION (claimed=false)
 *   4. otherwise                                -> GRANT        (RUNNING, new token, attempt+1)
 * Tokens are compared as UUIDs (case-insensitive); a NULL or malformed token never matches.
 */
#include "ll/rules.h"

/*
 * §5.3: decides a claim from the locked run and partition statuses. stored_token is the
 * partition's claim_token (NULL when none), request_token the claimer's; both borrowed.
 */
ll_claim_decision ll_claim_decide(ll_run_status run, ll_part_status part, const char *stored_token,
                                  const char *request_token)
{
    if (run != LL_RUN_EXTRACTING)
        return LL_CLAIM_REFUSE_RUN;
    if (part == LL_PART_RUNNING && ll_uuid_equal(stored_token, request_token))
        return LL_CLAIM_REPLAY;
    if (part != LL_PART_PENDING && part != LL_PART_RETRY)
        return LL_CLAIM_REFUSE_PARTITION;
    return LL_CLAIM_GRANT;
}
