/*
 * apply.c - a helper's database result as the entry point's apply decision (docs/design.md §3, the decision
 * table).
 */
#include "ll/apply.h"

/* See apply.h: every ll_db_rc named; an unknown value is a failed statement. */
ll_apply ll_apply_of_db(ll_db_rc rc)
{
    switch (rc) {
    case LL_DB_OK:
        return LL_APPLY_COMMIT;
    case LL_DB_ROLLBACK:
        return LL_APPLY_ROLLBACK;
    case LL_DB_ERROR:
    case LL_DB_UNAVAILABLE:
    default:
        return LL_APPLY_DB;
    }
}
