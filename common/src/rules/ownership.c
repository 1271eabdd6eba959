/*
 * ownership.c - who may report on a partition: the token check with the claim-token history and
 * the answer it gives (docs/contract.md §5.4 check 3, §5.5 check 2; docs/contract.md K§6).
 *
 * Topics are consumed by different services, so a report can arrive before the claim that
 * allowed it is applied. A token the history knows but the partition no longer holds is a
 * zombie's: CLAIM_MISMATCH at once. An unknown token waits only while a claim could still be
 * granted (run EXTRACTING, partition PENDING or RETRY); otherwise that claim would be refused
 * anyway, and the answer is CLAIM_MISMATCH at once. Pure: services/completion/ownership.c takes
 * the locks and reads what this classifies.
 */
#include <string.h>

#include "ll/rules.h"

/* See rules.h: run, partition, token, in that order. */
ll_ownership ll_ownership_classify(const ll_ownership_in *in)
{
    if (in->run == LL_RUN_FOUND_REFUSED)
        return LL_OWN_RUN_REFUSED;
    if (in->run != LL_RUN_FOUND_LOCKED)
        return LL_OWN_NO_RUN;
    if (!in->partition_found)
        return in->run_status == LL_RUN_CREATED ? LL_OWN_NO_MANIFEST : LL_OWN_NO_PARTITION;
    const char *stored = in->stored_token ? in->stored_token : "";
    if (stored[0] && in->token && strcmp(stored, in->token) == 0)
        return LL_OWN_MATCH;
    if (in->token_known)
        return LL_OWN_SUPERSEDED;
    /* an unknown token waits only while its claim could still be granted (§5.3) */
    bool claimable = ll_claim_decide(in->run_status, in->part, stored, in->token, false) == LL_CLAIM_GRANT;
    return claimable ? LL_OWN_NOT_YET : LL_OWN_MISMATCH;
}

/* See rules.h: the answer ladder shared by chunk reports and partition failure reports. */
ll_own_answer ll_ownership_answer(ll_ownership own, bool wait_expired)
{
    switch (own) {
    case LL_OWN_MATCH:
        return LL_OWN_PROCEED;
    case LL_OWN_NO_RUN:
        return LL_OWN_DEFER_RUN;
    case LL_OWN_NO_MANIFEST:
        return wait_expired ? LL_OWN_PARTITION_NOT_FOUND : LL_OWN_DEFER_MANIFEST;
    case LL_OWN_NOT_YET:
        return LL_OWN_DEFER_TOKEN;
    case LL_OWN_RUN_REFUSED:
        return LL_OWN_RUN_NOT_FOUND;
    case LL_OWN_NO_PARTITION:
        return LL_OWN_PARTITION_NOT_FOUND;
    case LL_OWN_MISMATCH:
    case LL_OWN_SUPERSEDED:
    default:
        return LL_OWN_CLAIM_MISMATCH;
    }
}

/* See rules.h: §5.3 step 1, the run before the partition. */
ll_own_answer ll_claim_lookup(ll_run_found found, ll_run_status current, bool wait_expired)
{
    if (found == LL_RUN_FOUND_REFUSED)
        return LL_OWN_RUN_NOT_FOUND;
    if (found != LL_RUN_FOUND_LOCKED)
        return LL_OWN_DEFER_RUN;
    if (current == LL_RUN_CREATED && !wait_expired)
        return LL_OWN_DEFER_MANIFEST;
    return LL_OWN_PROCEED;
}

/* See rules.h: the deferral reasons the loop logs. */
const char *ll_own_defer_reason(ll_own_answer a)
{
    switch (a) {
    case LL_OWN_DEFER_RUN:
        return "run not in the ledger yet";
    case LL_OWN_DEFER_MANIFEST:
        return "manifest not applied yet";
    case LL_OWN_DEFER_TOKEN:
        return "claim token not granted yet";
    default:
        return "";
    }
}
