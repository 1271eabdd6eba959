/*
 * schema_parse.c - our checking parse of a schema's JSON (schema_int.h), type by type: records,
 * enums, fixed, unions, logical types. It refuses what avro-c 1.11.1 would trip over (negative or
 * huge fixed sizes, unknown or duplicate names, nesting) and keeps every field's default.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema_int.h"

static ll_node *parse_record(pctx *c, json_t *json, const char *parent_ns, int depth)
{
    ll_node *n = ll_sch_new_node(c, LLT_RECORD);
    char *ns = NULL;
    if (n == NULL || ll_sch_name_node(c, n, json, parent_ns, &ns) != 0)
        return NULL;
    json_t *fields = json_object_get(json, "fields");
    if (!json_is_array(fields)) {
        ll_codec_err(c->err, c->errlen, "record %s without fields", n->fullname);
        goto fail;
    }
    size_t nf = json_array_size(fields);
    n->fields = calloc(nf ? nf : 1, sizeof *n->fields);
    if (n->fields == NULL) {
        ll_codec_err(c->err, c->errlen, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < nf; i++) {
        json_t *f = json_array_get(fields, i);
        if (!json_is_object(f)) {
            ll_codec_err(c->err, c->errlen, "record %s: field %zu is not an object", n->fullname, i);
            goto fail;
        }
        json_t *fname = json_object_get(f, "name");
        if (!json_is_string(fname) || !ll_sch_is_id(json_string_value(fname))) {
            ll_codec_err(c->err, c->errlen, "record %s: field %zu has no valid name", n->fullname, i);
            goto fail;
        }
        const char *name = json_string_value(fname);
        for (size_t k = 0; k < i; k++) {
            if (strcmp(n->fields[k].name, name) == 0) {
                ll_codec_err(c->err, c->errlen, "record %s: duplicate field %s", n->fullname, name);
                goto fail;
            }
        }
        json_t *ftype = json_object_get(f, "type");
        if (ftype == NULL) {
            ll_codec_err(c->err, c->errlen, "record %s: field %s has no type", n->fullname, name);
            goto fail;
        }
        n->fields[i].name = name;
        n->n = i + 1;
        n->fields[i].type = ll_sch_parse_type(c, ftype, ns, depth + 1);
        if (n->fields[i].type == NULL)
            goto fail;
        n->fields[i].def = json_object_get(f, "default");
        json_t *al = json_object_get(f, "aliases");
        n->fields[i].aliases = json_is_array(al) ? al : NULL;
    }
    free(ns);
    return n;
fail:
    free(ns);
    return NULL;
}

static ll_node *parse_enum(pctx *c, json_t *json, const char *parent_ns)
{
    ll_node *n = ll_sch_new_node(c, LLT_ENUM);
    char *ns = NULL;
    if (n == NULL || ll_sch_name_node(c, n, json, parent_ns, &ns) != 0)
        return NULL;
    free(ns);
    json_t *syms = json_object_get(json, "symbols");
    size_t ns_ = json_is_array(syms) ? json_array_size(syms) : 0;
    if (ns_ == 0) {
        ll_codec_err(c->err, c->errlen, "enum %s without symbols", n->fullname);
        return NULL;
    }
    n->symbols = calloc(ns_, sizeof *n->symbols);
    if (n->symbols == NULL) {
        ll_codec_err(c->err, c->errlen, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < ns_; i++) {
        json_t *s = json_array_get(syms, i);
        if (!json_is_string(s) || !ll_sch_is_id(json_string_value(s))) {
            ll_codec_err(c->err, c->errlen, "enum %s: symbol %zu is not a valid name", n->fullname, i);
            return NULL;
        }
        for (size_t k = 0; k < i; k++) {
            if (strcmp(n->symbols[k], json_string_value(s)) == 0) {
                ll_codec_err(c->err, c->errlen, "enum %s: duplicate symbol %s", n->fullname,
                             json_string_value(s));
                return NULL;
            }
        }
        n->symbols[i] = json_string_value(s);
        n->n = i + 1;
    }
    json_t *def = json_object_get(json, "default");
    if (def != NULL) {
        int found = 0;
        if (json_is_string(def))
            for (size_t i = 0; i < n->n && !found; i++)
                found = strcmp(n->symbols[i], json_string_value(def)) == 0;
        if (!found) {
            ll_codec_err(c->err, c->errlen, "enum %s: default is not a symbol", n->fullname);
            return NULL;
        }
        n->enum_default = json_string_value(def);
    }
    return n;
}

static ll_node *parse_fixed(pctx *c, json_t *json, const char *parent_ns)
{
    json_t *size = json_object_get(json, "size");
    if (!json_is_integer(size)) {
        ll_codec_err(c->err, c->errlen, "fixed without an integer size");
        return NULL;
    }
    json_int_t sz = json_integer_value(size);
    /* avro-c corrupts its heap on a negative size and cannot read a fixed of size 0 */
    if (sz < 1 || sz > LL_CODEC_MAX_FIXED) {
        ll_codec_err(c->err, c->errlen, "fixed size %lld outside 1..%d", (long long)sz, LL_CODEC_MAX_FIXED);
        return NULL;
    }
    ll_node *n = ll_sch_new_node(c, LLT_FIXED);
    char *ns = NULL;
    if (n == NULL || ll_sch_name_node(c, n, json, parent_ns, &ns) != 0)
        return NULL;
    free(ns);
    n->size = (size_t)sz;
    return n;
}

static ll_node *parse_union(pctx *c, json_t *json, const char *parent_ns, int depth)
{
    size_t nb = json_array_size(json);
    if (nb == 0) {
        ll_codec_err(c->err, c->errlen, "empty union");
        return NULL;
    }
    ll_node *n = ll_sch_new_node(c, LLT_UNION);
    if (n == NULL)
        return NULL;
    n->branches = calloc(nb, sizeof *n->branches);
    if (n->branches == NULL) {
        ll_codec_err(c->err, c->errlen, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < nb; i++) {
        ll_node *b = ll_sch_parse_type(c, json_array_get(json, i), parent_ns, depth + 1);
        if (b == NULL)
            return NULL;
        if (b->type == LLT_UNION) {
            ll_codec_err(c->err, c->errlen, "union inside a union");
            return NULL;
        }
        for (size_t k = 0; k < i; k++) {
            if (ll_sch_same_branch_kind(n->branches[k], b)) {
                ll_codec_err(c->err, c->errlen, "union with two %s branches",
                             b->fullname ? b->fullname : ll_type_name(b->type));
                return NULL;
            }
        }
        n->branches[i] = b;
        n->n = i + 1;
    }
    return n;
}

/*
 * The "logicalType" of an object type. Honoured: decimal (bytes, fixed; precision 1..38, scale
 * 0..precision, a fixed must hold the precision), date (int), timestamp-millis/-micros and
 * local-timestamp-millis/-micros (long), uuid (string, fixed of 16). Another logical type on
 * bytes or fixed is refused (its bytes would pass as text); elsewhere, as the Avro
 * specification says, an unknown logical type or one on another base type is ignored.
 */
static int parse_logical(pctx *c, ll_node *n, json_t *json)
{
    json_t *jl = json_is_object(json) ? json_object_get(json, "logicalType") : NULL;
    if (jl == NULL)
        return 0;
    const char *l = json_is_string(jl) ? json_string_value(jl) : "";
    int binary = n->type == LLT_BYTES || n->type == LLT_FIXED;
    if (strcmp(l, "decimal") == 0 && binary) {
        json_t *jp = json_object_get(json, "precision"), *js = json_object_get(json, "scale");
        json_int_t p = json_is_integer(jp) ? json_integer_value(jp) : 0;
        json_int_t sc = js == NULL ? 0 : json_is_integer(js) ? json_integer_value(js) : -1;
        if (p < 1 || p > 38) {
            ll_codec_err(c->err, c->errlen, "decimal precision must be an integer 1..38");
            return -1;
        }
        if (sc < 0 || sc > p) {
            ll_codec_err(c->err, c->errlen, "decimal scale must be an integer 0..precision (%lld)",
                         (long long)p);
            return -1;
        }
        /* a fixed of n bytes holds floor(log10(2^(8n-1) - 1)) digits */
        if (n->type == LLT_FIXED && n->size < 16 && (json_int_t)(((8 * n->size - 1) * 30103) / 100000) < p) {
            ll_codec_err(c->err, c->errlen, "decimal precision %lld does not fit fixed %s of %zu bytes",
                         (long long)p, n->fullname, n->size);
            return -1;
        }
        n->logical = LLL_DECIMAL;
        n->precision = (int)p;
        n->scale = (int)sc;
        return 0;
    }
    static const struct {
        const char *name;
        ll_type base;
        ll_logical logical;
    } known[] = {{"date", LLT_INT, LLL_DATE},
                 {"timestamp-millis", LLT_LONG, LLL_TS_MILLIS},
                 {"timestamp-micros", LLT_LONG, LLL_TS_MICROS},
                 {"local-timestamp-millis", LLT_LONG, LLL_LTS_MILLIS},
                 {"local-timestamp-micros", LLT_LONG, LLL_LTS_MICROS},
                 {"uuid", LLT_STRING, LLL_UUID},
                 {"uuid", LLT_FIXED, LLL_UUID}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(l, known[i].name) == 0 && n->type == known[i].base &&
            (n->type != LLT_FIXED || n->size == 16)) {
            n->logical = known[i].logical;
            return 0;
        }
    }
    if (binary) {
        ll_codec_err(c->err, c->errlen, "logical type \"%.40s\" on %s is not supported", l,
                     ll_type_name(n->type));
        return -1;
    }
    return 0;
}

static const struct {
    const char *name;
    ll_type type;
} primitives[] = {
    {"null", LLT_NULL},   {"boolean", LLT_BOOLEAN}, {"int", LLT_INT},     {"long", LLT_LONG},
    {"float", LLT_FLOAT}, {"double", LLT_DOUBLE},   {"bytes", LLT_BYTES}, {"string", LLT_STRING},
};

ll_node *ll_sch_parse_type(pctx *c, json_t *json, const char *parent_ns, int depth)
{
    if (depth > LL_CODEC_MAX_SCHEMA_DEPTH) {
        ll_codec_err(c->err, c->errlen, "schema nested deeper than %d", LL_CODEC_MAX_SCHEMA_DEPTH);
        return NULL;
    }
    if (json_is_array(json))
        return parse_union(c, json, parent_ns, depth);
    json_t *jt = json_is_object(json) ? json_object_get(json, "type") : json;
    if (!json_is_string(jt)) {
        ll_codec_err(c->err, c->errlen, "a type must be a string, an object or an array");
        return NULL;
    }
    const char *t = json_string_value(jt);
    for (size_t i = 0; i < sizeof primitives / sizeof primitives[0]; i++) {
        if (strcmp(t, primitives[i].name) == 0) {
            ll_node *n = ll_sch_new_node(c, primitives[i].type);
            return n == NULL || parse_logical(c, n, json) != 0 ? NULL : n;
        }
    }
    int is_obj = json_is_object(json);
    if (strcmp(t, "record") == 0 || strcmp(t, "enum") == 0 || strcmp(t, "fixed") == 0 ||
        strcmp(t, "array") == 0 || strcmp(t, "map") == 0) {
        if (!is_obj) {
            ll_codec_err(c->err, c->errlen, "%s must be an object", t);
            return NULL;
        }
        if (t[0] == 'r')
            return parse_record(c, json, parent_ns, depth);
        if (t[0] == 'e')
            return parse_enum(c, json, parent_ns);
        if (t[0] == 'f') {
            ll_node *n = parse_fixed(c, json, parent_ns);
            return n == NULL || parse_logical(c, n, json) != 0 ? NULL : n;
        }
        json_t *sub = json_object_get(json, t[0] == 'a' ? "items" : "values");
        if (sub == NULL) {
            ll_codec_err(c->err, c->errlen, "%s without %s", t, t[0] == 'a' ? "items" : "values");
            return NULL;
        }
        ll_node *n = ll_sch_new_node(c, t[0] == 'a' ? LLT_ARRAY : LLT_MAP);
        if (n == NULL)
            return NULL;
        n->items = ll_sch_parse_type(c, sub, parent_ns, depth + 1);
        return n->items ? n : NULL;
    }
    char *full = ll_sch_qualify(t, parent_ns);
    if (full == NULL) {
        ll_codec_err(c->err, c->errlen, "out of memory");
        return NULL;
    }
    ll_node *n = ll_sch_lookup_name(c, full);
    if (n == NULL)
        ll_codec_err(c->err, c->errlen, "unknown type %.80s", full);
    free(full);
    return n;
}
