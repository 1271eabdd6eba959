/*
 * schema_check.c - the expansion budget of a parsed schema (schema_int.h): the types a datum of
 * it can reach.
 */
#include "schema_int.h"

/*
 * Walks the schema as a datum would: every named-type reference expanded where it is used, so
 * that the budget sees the shape's real size (ten fields of R8 in R9, ten of R7 in R8, ...: 10^9
 * types from a 4 KB text). A record already being walked on the current path (recursion) is not
 * expanded again; if nothing but records lies between the two (no union, array or map: `dyn`
 * is the depth of the last of those), it contains itself and has no finite value. Every type
 * reached takes one unit of c.
 */
int ll_sch_expand(ll_node *n, ll_counter *c, int depth, int dyn, char *err, size_t errlen)
{
    if (ll_counter_take(c, 1, err, errlen) != 0)
        return -1;
    if (depth > LL_CODEC_MAX_SCHEMA_DEPTH + 1) {
        ll_codec_err(err, errlen, "named types nested deeper than %d", LL_CODEC_MAX_SCHEMA_DEPTH);
        return -1;
    }
    int rc = 0;
    switch (n->type) {
    case LLT_RECORD:
        if (n->walking) {
            if (dyn < n->walking) {
                ll_codec_err(err, errlen, "record %s contains itself without a union, array or map between",
                             n->fullname);
                return -1;
            }
            return 0;
        }
        n->walking = depth + 1;
        for (size_t i = 0; i < n->n && rc == 0; i++)
            rc = ll_sch_expand(n->fields[i].type, c, depth + 1, dyn, err, errlen);
        n->walking = 0;
        return rc;
    case LLT_ARRAY:
    case LLT_MAP: /* ll_sch_parse_type never returns an array or map without items */
        return n->items ? ll_sch_expand(n->items, c, depth + 1, depth + 1, err, errlen) : 0;
    case LLT_UNION:
        for (size_t i = 0; i < n->n && rc == 0; i++)
            rc = ll_sch_expand(n->branches[i], c, depth + 1, depth + 1, err, errlen);
        return rc;
    default:
        return 0;
    }
}
