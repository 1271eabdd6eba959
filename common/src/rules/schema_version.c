/*
 * schema_version.c - the verdict on the ledger's schema version (schema_version.h; the rule of
 * expand/contract migrations: schemas/sql/README.md).
 */
#include "ll/schema_version.h"

ll_schema_verdict ll_schema_judge(int applied_max, int min, int max_known, int max_compat)
{
    if (applied_max < min)
        return LL_SCHEMA_TOO_OLD;
    if (applied_max <= max_known)
        return LL_SCHEMA_OK;
    if (applied_max <= max_compat)
        return LL_SCHEMA_NEWER_COMPATIBLE;
    return LL_SCHEMA_TOO_NEW;
}

const char *ll_schema_verdict_name(ll_schema_verdict v)
{
    switch (v) {
    case LL_SCHEMA_OK:
        return "ok";
    case LL_SCHEMA_TOO_OLD:
        return "too_old";
    case LL_SCHEMA_NEWER_COMPATIBLE:
        return "newer_compatible";
    case LL_SCHEMA_TOO_NEW:
        return "too_new";
    }
    return "too_old";
}

int ll_schema_may_run(ll_schema_verdict v)
{
    return v == LL_SCHEMA_OK || v == LL_SCHEMA_NEWER_COMPATIBLE;
}
