/*
 * pfail.c - a worker's partition failure report: may it apply, and is it a snapshot error.
 *
 * docs/contract.md §5.5. Checks in the contract's order, under the run and partition locks:
 *   2. stored token differs from the reporter's (a NULL stored token, cleared by a reissue,
 *      always differs)                           -> CLAIM_MISMATCH (409), checked first, so a
 *                                                   zombie worker after a reissue gets this;
 *   3. partition already FAILED                  -> REPLAY (200, changed=false);
 *   4. partition not RUNNING                     -> PARTITION_STATUS_MISMATCH (409);
 *   otherwise                                    -> APPLY.
 * Step 5's snapshot test decides FAILED_SNAPSHOT_EXPIRED over FAILED_EXTRACT for the run.
 * Case folding is ASCII only (the reference's Python str.upper() would additionally fold
 * exotic code points such as U+017F onto 'S'; not copied on purpose).
 */
#include "ll/rules.h"

#include <stddef.h>

/* §5.5 steps 2-4. stored_token may be NULL; tokens compared as UUIDs; both borrowed. */
ll_pfail_decision ll_pfail_decide(ll_part_status part, const char *stored_token, const char *request_token)
{
    if (!ll_uuid_equal(stored_token, request_token))
        return LL_PFAIL_CLAIM_MISMATCH;
    if (part == LL_PART_FAILED)
        return LL_PFAIL_REPLAY;
    if (part != LL_PART_RUNNING)
        return LL_PFAIL_STATUS_MISMATCH;
    return LL_PFAIL_APPLY;
}

/* True when s equals upper (an upper-case ASCII literal) ignoring ASCII case. NULL never does. */
static bool ascii_upper_eq(const char *s, const char *upper)
{
    if (s == NULL)
        return false;
    for (; *upper != '\0'; s++, upper++) {
        char c = *s >= 'a' && *s <= 'z' ? (char)(*s - 'a' + 'A') : *s;
        if (c != *upper)
            return false; /* also covers s ending early */
    }
    return *s == '\0';
}

/*
 * §5.5 step 5: errorCode upper-cased is ORA-01555 or ORA-08180, or errorClass upper-cased is
 * SNAPSHOT. Either argument may be NULL (treated as not matching).
 */
bool ll_is_snapshot_error(const char *error_code, const char *error_class)
{
    return ascii_upper_eq(error_code, "ORA-01555") || ascii_upper_eq(error_code, "ORA-08180") ||
           ascii_upper_eq(error_class, "SNAPSHOT");
}
