/*
 * schema_check.c - two checks of a parsed schema (schema_int.h): the expansion budget (the types
 * a datum of it can reach) and the structural comparison with avro-c's own parse.
 */
#include <stdlib.h>
#include <string.h>

#include "schema_int.h"

/* ---- expansion budget ---- */

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

/* ---- structural comparison with avro-c's parse ---- */

static int map_avro_type(avro_type_t t, ll_type *out)
{
    switch (t) {
    case AVRO_STRING:
        *out = LLT_STRING;
        return 0;
    case AVRO_BYTES:
        *out = LLT_BYTES;
        return 0;
    case AVRO_INT32:
        *out = LLT_INT;
        return 0;
    case AVRO_INT64:
        *out = LLT_LONG;
        return 0;
    case AVRO_FLOAT:
        *out = LLT_FLOAT;
        return 0;
    case AVRO_DOUBLE:
        *out = LLT_DOUBLE;
        return 0;
    case AVRO_BOOLEAN:
        *out = LLT_BOOLEAN;
        return 0;
    case AVRO_NULL:
        *out = LLT_NULL;
        return 0;
    case AVRO_RECORD:
        *out = LLT_RECORD;
        return 0;
    case AVRO_ENUM:
        *out = LLT_ENUM;
        return 0;
    case AVRO_FIXED:
        *out = LLT_FIXED;
        return 0;
    case AVRO_MAP:
        *out = LLT_MAP;
        return 0;
    case AVRO_ARRAY:
        *out = LLT_ARRAY;
        return 0;
    case AVRO_UNION:
        *out = LLT_UNION;
        return 0;
    default:
        return -1;
    }
}

int ll_sch_same_structure(cmpctx *c, const ll_node *n, avro_schema_t a, int depth)
{
    for (int hops = 0; a != NULL && is_avro_link(a) && hops < 4; hops++)
        a = avro_schema_link_target(a);
    ll_type t;
    if (a == NULL || depth > LL_CODEC_MAX_SCHEMA_DEPTH + 1 || map_avro_type(avro_typeof(a), &t) ||
        t != n->type)
        return 0;
    if (t == LLT_RECORD || t == LLT_ENUM || t == LLT_FIXED) {
        const char *nm = avro_schema_name(a);
        if (nm == NULL)
            return 0;
        char *full = ll_sch_qualify(nm, avro_schema_namespace(a));
        int eq = full != NULL && strcmp(full, n->fullname) == 0;
        free(full);
        if (!eq)
            return 0;
    }
    switch (t) {
    case LLT_RECORD:
        for (size_t i = 0; i < c->nseen; i++)
            if (c->seen[i].n == n && c->seen[i].a == a)
                return 1;
        if (c->nseen == c->capseen) {
            size_t cap = c->capseen ? c->capseen * 2 : 16;
            pair *v = realloc(c->seen, cap * sizeof *v);
            if (v == NULL)
                return 0;
            c->seen = v;
            c->capseen = cap;
        }
        c->seen[c->nseen].n = n;
        c->seen[c->nseen].a = a;
        c->nseen++;
        if (avro_schema_record_size(a) != n->n)
            return 0;
        for (size_t i = 0; i < n->n; i++) {
            const char *fn = avro_schema_record_field_name(a, (int)i);
            if (fn == NULL || strcmp(fn, n->fields[i].name) != 0 ||
                !ll_sch_same_structure(c, n->fields[i].type, avro_schema_record_field_get_by_index(a, (int)i),
                                       depth + 1))
                return 0;
        }
        return 1;
    case LLT_ENUM:
        if ((size_t)avro_schema_enum_number_of_symbols(a) != n->n)
            return 0;
        for (size_t i = 0; i < n->n; i++) {
            const char *s = avro_schema_enum_get(a, (int)i);
            if (s == NULL || strcmp(s, n->symbols[i]) != 0)
                return 0;
        }
        return 1;
    case LLT_FIXED:
        return avro_schema_fixed_size(a) == (int64_t)n->size;
    case LLT_ARRAY:
        return ll_sch_same_structure(c, n->items, avro_schema_array_items(a), depth + 1);
    case LLT_MAP:
        return ll_sch_same_structure(c, n->items, avro_schema_map_values(a), depth + 1);
    case LLT_UNION:
        if (avro_schema_union_size(a) != n->n)
            return 0;
        for (size_t i = 0; i < n->n; i++)
            if (!ll_sch_same_structure(c, n->branches[i], avro_schema_union_branch(a, (int)i), depth + 1))
                return 0;
        return 1;
    default:
        return 1;
    }
}
