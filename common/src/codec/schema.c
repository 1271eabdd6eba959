/*
 * schema.c - schema loading: our own checking parse (mirroring avro-c 1.11.1's name rules),
 * then avro-c's parse, then a structural comparison of the two; schema-id tables.
 *
 * Why parse twice: avro-c trusts its schema JSON (a negative fixed size corrupts its heap, a
 * duplicate name or a failed field leaks), and it drops defaults. Our parse refuses all of that
 * before avro-c sees the text, and keeps every field's default for schema evolution.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"

typedef struct name_ent {
    const char *fullname; /* owned by the node */
    ll_node *node;
} name_ent;

typedef struct pctx {
    ll_schema *s;
    name_ent *names;
    size_t nnames, capnames;
    char *err;
    size_t errlen;
} pctx;

static ll_node *new_node(pctx *c, ll_type t)
{
    ll_schema *s = c->s;
    if (s->nnodes == s->capnodes) {
        size_t cap = s->capnodes ? s->capnodes * 2 : 16;
        ll_node **v = realloc(s->nodes, cap * sizeof *v);
        if (v == NULL)
            goto oom;
        s->nodes = v;
        s->capnodes = cap;
    }
    ll_node *n = calloc(1, sizeof *n);
    if (n == NULL)
        goto oom;
    n->type = t;
    s->nodes[s->nnodes++] = n;
    return n;
oom:
    ll_codec_err(c->err, c->errlen, "out of memory");
    return NULL;
}

static void free_node(ll_node *n)
{
    if (n == NULL)
        return;
    free(n->fullname);
    free(n->fields);
    free(n->symbols);
    free(n->branches);
    free(n);
}

/* avro-c's is_avro_id, restricted to ASCII: [A-Za-z_][A-Za-z0-9_]*. */
static int is_id(const char *s)
{
    if (s == NULL || *s == '\0')
        return 0;
    for (size_t i = 0; s[i]; i++) {
        char ch = s[i];
        int alpha = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_';
        int digit = ch >= '0' && ch <= '9';
        if (!(alpha || (i > 0 && digit)))
            return 0;
    }
    return 1;
}

/* avro-c's qualify_name: "ns.name" when ns is set and name has no dot, else name. */
static char *qualify(const char *name, const char *ns)
{
    if (ns != NULL && strchr(name, '.') == NULL) {
        size_t len = strlen(ns) + strlen(name) + 2;
        char *r = malloc(len);
        if (r == NULL)
            return NULL;
        snprintf(r, len, "%s.%s", ns, name);
        return r;
    }
    return strdup(name);
}

static ll_node *lookup_name(const pctx *c, const char *fullname)
{
    for (size_t i = 0; i < c->nnames; i++)
        if (strcmp(c->names[i].fullname, fullname) == 0)
            return c->names[i].node;
    return NULL;
}

static int register_name(pctx *c, ll_node *n)
{
    if (lookup_name(c, n->fullname) != NULL) {
        ll_codec_err(c->err, c->errlen, "duplicate type name %s", n->fullname);
        return -1;
    }
    if (c->nnames == c->capnames) {
        size_t cap = c->capnames ? c->capnames * 2 : 8;
        name_ent *v = realloc(c->names, cap * sizeof *v);
        if (v == NULL) {
            ll_codec_err(c->err, c->errlen, "out of memory");
            return -1;
        }
        c->names = v;
        c->capnames = cap;
    }
    c->names[c->nnames].fullname = n->fullname;
    c->names[c->nnames].node = n;
    c->nnames++;
    return 0;
}

/*
 * Names a record, enum or fixed as avro-c does: a dotted "name" carries its namespace, else
 * "namespace", else the enclosing namespace. *ns_out receives the namespace (malloc'd or NULL).
 */
static int name_node(pctx *c, ll_node *n, json_t *json, const char *parent_ns, char **ns_out)
{
    const char *what = ll_type_name(n->type);
    json_t *jn = json_object_get(json, "name");
    if (!json_is_string(jn)) {
        ll_codec_err(c->err, c->errlen, "%s without a name", what);
        return -1;
    }
    const char *full = json_string_value(jn);
    const char *dot = strrchr(full, '.');
    char *ns = NULL;
    const char *shortname;
    json_t *jns = json_object_get(json, "namespace");
    if (dot != NULL) {
        ns = strndup(full, (size_t)(dot - full));
        shortname = dot + 1;
        if (ns == NULL)
            goto oom;
    } else if (json_is_string(jns)) { /* avro-c: an empty "namespace" is none */
        shortname = full;
        if (json_string_length(jns) > 0 && (ns = strdup(json_string_value(jns))) == NULL)
            goto oom;
    } else {
        shortname = full;
        if (parent_ns != NULL && (ns = strdup(parent_ns)) == NULL)
            goto oom;
    }
    if (!is_id(shortname)) {
        ll_codec_err(c->err, c->errlen, "invalid %s name \"%.64s\"", what, full);
        free(ns);
        return -1;
    }
    n->name = shortname;
    n->fullname = qualify(shortname, ns);
    if (n->fullname == NULL) {
        free(ns);
        goto oom;
    }
    if (register_name(c, n) != 0) {
        free(ns);
        return -1;
    }
    *ns_out = ns;
    return 0;
oom:
    ll_codec_err(c->err, c->errlen, "out of memory");
    return -1;
}

static int same_branch_kind(const ll_node *a, const ll_node *b)
{
    if (a->type != b->type)
        return 0;
    if (a->type == LLT_RECORD || a->type == LLT_ENUM || a->type == LLT_FIXED)
        return strcmp(a->fullname, b->fullname) == 0;
    return 1;
}

static ll_node *parse_type(pctx *c, json_t *json, const char *parent_ns, int depth);

static ll_node *parse_record(pctx *c, json_t *json, const char *parent_ns, int depth)
{
    ll_node *n = new_node(c, LLT_RECORD);
    char *ns = NULL;
    if (n == NULL || name_node(c, n, json, parent_ns, &ns) != 0)
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
        if (!json_is_string(fname) || !is_id(json_string_value(fname))) {
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
        n->fields[i].type = parse_type(c, ftype, ns, depth + 1);
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
    ll_node *n = new_node(c, LLT_ENUM);
    char *ns = NULL;
    if (n == NULL || name_node(c, n, json, parent_ns, &ns) != 0)
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
        if (!json_is_string(s) || !is_id(json_string_value(s))) {
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
    ll_node *n = new_node(c, LLT_FIXED);
    char *ns = NULL;
    if (n == NULL || name_node(c, n, json, parent_ns, &ns) != 0)
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
    ll_node *n = new_node(c, LLT_UNION);
    if (n == NULL)
        return NULL;
    n->branches = calloc(nb, sizeof *n->branches);
    if (n->branches == NULL) {
        ll_codec_err(c->err, c->errlen, "out of memory");
        return NULL;
    }
    for (size_t i = 0; i < nb; i++) {
        ll_node *b = parse_type(c, json_array_get(json, i), parent_ns, depth + 1);
        if (b == NULL)
            return NULL;
        if (b->type == LLT_UNION) {
            ll_codec_err(c->err, c->errlen, "union inside a union");
            return NULL;
        }
        for (size_t k = 0; k < i; k++) {
            if (same_branch_kind(n->branches[k], b)) {
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

static ll_node *parse_type(pctx *c, json_t *json, const char *parent_ns, int depth)
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
            ll_node *n = new_node(c, primitives[i].type);
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
        ll_node *n = new_node(c, t[0] == 'a' ? LLT_ARRAY : LLT_MAP);
        if (n == NULL)
            return NULL;
        n->items = parse_type(c, sub, parent_ns, depth + 1);
        return n->items ? n : NULL;
    }
    char *full = qualify(t, parent_ns);
    if (full == NULL) {
        ll_codec_err(c->err, c->errlen, "out of memory");
        return NULL;
    }
    ll_node *n = lookup_name(c, full);
    if (n == NULL)
        ll_codec_err(c->err, c->errlen, "unknown type %.80s", full);
    free(full);
    return n;
}

/* ---- expansion budget ---- */

/*
 * Walks the schema as a datum would: every named-type reference expanded where it is used, so
 * that the budget sees the shape's real size (ten fields of R8 in R9, ten of R7 in R8, ...: 10^9
 * types from a 4 KB text). A record already being walked on the current path (recursion) is not
 * expanded again; if nothing but records lies between the two (no union, array or map: `dyn`
 * is the depth of the last of those), it contains itself and has no finite value. Every type
 * reached takes one unit of c.
 */
static int expand(ll_node *n, ll_counter *c, int depth, int dyn, char *err, size_t errlen)
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
            rc = expand(n->fields[i].type, c, depth + 1, dyn, err, errlen);
        n->walking = 0;
        return rc;
    case LLT_ARRAY:
    case LLT_MAP: /* parse_type never returns an array or map without items */
        return n->items ? expand(n->items, c, depth + 1, depth + 1, err, errlen) : 0;
    case LLT_UNION:
        for (size_t i = 0; i < n->n && rc == 0; i++)
            rc = expand(n->branches[i], c, depth + 1, depth + 1, err, errlen);
        return rc;
    default:
        return 0;
    }
}

/* ---- structural comparison with avro-c's parse ---- */

typedef struct pair {
    const ll_node *n;
    avro_schema_t a;
} pair;

typedef struct cmpctx {
    pair *seen;
    size_t nseen, capseen;
} cmpctx;

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

static int same_structure(cmpctx *c, const ll_node *n, avro_schema_t a, int depth)
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
        char *full = qualify(nm, avro_schema_namespace(a));
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
                !same_structure(c, n->fields[i].type, avro_schema_record_field_get_by_index(a, (int)i),
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
        return same_structure(c, n->items, avro_schema_array_items(a), depth + 1);
    case LLT_MAP:
        return same_structure(c, n->items, avro_schema_map_values(a), depth + 1);
    case LLT_UNION:
        if (avro_schema_union_size(a) != n->n)
            return 0;
        for (size_t i = 0; i < n->n; i++)
            if (!same_structure(c, n->branches[i], avro_schema_union_branch(a, (int)i), depth + 1))
                return 0;
        return 1;
    default:
        return 1;
    }
}

/* ---- the public face ---- */

static void schema_destroy(ll_schema *s)
{
    for (size_t i = 0; i < s->cache_n; i++)
        ll_schema_unref(s->cache[i].s);
    pthread_mutex_destroy(&s->lock);
    if (s->iface != NULL)
        avro_value_iface_decref(s->iface);
    if (s->avro != NULL)
        avro_schema_decref(s->avro);
    for (size_t i = 0; i < s->nnodes; i++)
        free_node(s->nodes[i]);
    free(s->nodes);
    json_decref(s->json);
    free(s->text);
    free(s->orig);
    free(s);
}

ll_schema *ll_schema_ref(ll_schema *s)
{
    if (s != NULL)
        __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
    return s;
}

void ll_schema_unref(ll_schema *s)
{
    if (s != NULL && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
        schema_destroy(s);
}

void ll_schema_free(ll_schema *s)
{
    ll_schema_unref(s);
}

static int text_is(const ll_schema *s, const char *text, size_t len)
{
    return (len == s->orig_len && memcmp(text, s->orig, len) == 0) ||
           (strlen(s->text) == len && memcmp(text, s->text, len) == 0);
}

/* Drops cache entry i (r->lock held); the schema reference is returned for unref outside. */
static ll_schema *cache_drop(ll_schema *r, size_t i)
{
    ll_schema *old = r->cache[i].s;
    r->cache_bytes -= r->cache[i].bytes;
    r->cache[i] = r->cache[--r->cache_n];
    return old;
}

ll_schema *ll_schema_embedded(const ll_schema *reader, const char *text, size_t len, const ll_budgets *b,
                              char *err, size_t errlen)
{
    ll_budgets defaults;
    if (b == NULL) {
        ll_budgets_of(NULL, &defaults);
        b = &defaults;
    }
    ll_schema *r = (ll_schema *)reader; /* the cache is internal, guarded by r->lock */
    if (text_is(r, text, len))
        return ll_schema_ref(r);
    if (len > b->schema_bytes) {
        ll_codec_err(err, errlen, "schema text of %zu bytes over %zu (budget codec.max_schema_bytes)", len,
                     b->schema_bytes);
        return NULL;
    }
    uint64_t fp = ll_fingerprint64(text, len);
    ll_schema *hit = NULL;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->cache_n && hit == NULL; i++) {
        if (r->cache[i].fp == fp && r->cache[i].s->orig_len == len &&
            memcmp(r->cache[i].s->orig, text, len) == 0) {
            hit = ll_schema_ref(r->cache[i].s);
            r->cache[i].used = ++r->cache_clock;
        }
    }
    pthread_mutex_unlock(&r->lock);
    if (hit != NULL)
        return hit;
    ll_schema *w = ll_schema_parse(text, len, b, err, errlen);
    if (w == NULL)
        return NULL;
    size_t bytes = len + strlen(w->text);
    ll_schema *evicted[LL_CODEC_WRITER_CACHE_MAX];
    size_t nev = 0;
    pthread_mutex_lock(&r->lock);
    if (bytes <= b->cache_bytes) {
        /* evict the least recently used until the new entry fits both bounds */
        while (r->cache_n > 0 &&
               (r->cache_n >= b->cache_entries || r->cache_bytes + bytes > b->cache_bytes)) {
            size_t lru = 0;
            for (size_t i = 1; i < r->cache_n; i++)
                if (r->cache[i].used < r->cache[lru].used)
                    lru = i;
            evicted[nev++] = cache_drop(r, lru);
        }
        r->cache[r->cache_n].fp = fp;
        r->cache[r->cache_n].bytes = bytes;
        r->cache[r->cache_n].used = ++r->cache_clock;
        r->cache[r->cache_n].s = ll_schema_ref(w);
        r->cache_n++;
        r->cache_bytes += bytes;
    }
    pthread_mutex_unlock(&r->lock);
    for (size_t i = 0; i < nev; i++)
        ll_schema_unref(evicted[i]);
    return w;
}

ll_schema *ll_schema_parse(const char *text, size_t len, const ll_budgets *b, char *err, size_t errlen)
{
    ll_budgets defaults;
    if (b == NULL) {
        ll_budgets_of(NULL, &defaults);
        b = &defaults;
    }
    if (text == NULL) {
        ll_codec_err(err, errlen, "no schema text");
        return NULL;
    }
    ll_schema *s = calloc(1, sizeof *s);
    if (s == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        return NULL;
    }
    s->refs = 1;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        ll_codec_err(err, errlen, "cannot create a mutex");
        return NULL;
    }
    pctx c = {.s = s, .err = err, .errlen = errlen};
    json_error_t je;
    s->json = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (s->json == NULL) {
        ll_codec_err(err, errlen, "schema is not JSON: %d:%d: %.80s", je.line, je.column, je.text);
        goto fail;
    }
    s->orig = malloc(len + 1);
    s->text = json_dumps(s->json, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s->orig == NULL || s->text == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        goto fail;
    }
    memcpy(s->orig, text, len);
    s->orig[len] = '\0';
    s->orig_len = len;
    s->root = parse_type(&c, s->json, NULL, 1);
    if (s->root == NULL)
        goto fail;
    free(c.names);
    c.names = NULL;
    ll_counter types = {b->expansions, b->expansions, "schema expansion (types reached)",
                        "codec.max_schema_expansions"};
    if (expand(s->root, &types, 0, -1, err, errlen) != 0)
        goto fail;

    /* every default must fit its type (a union's default fits its first branch), all of them
     * together building at most b->default_values values */
    ll_counter built = {b->default_values, b->default_values, "default values built",
                        "codec.max_default_values"};
    for (size_t i = 0; i < s->nnodes; i++) {
        ll_node *n = s->nodes[i];
        if (n->type != LLT_RECORD)
            continue;
        for (size_t k = 0; k < n->n; k++) {
            if (n->fields[k].def == NULL)
                continue;
            char derr[160];
            json_t *v = ll_default_to_json(n->fields[k].type, n->fields[k].def, 0, &built, derr, sizeof derr);
            if (v == NULL) {
                ll_codec_err(err, errlen, "%s.%s: bad default: %s", n->fullname, n->fields[k].name, derr);
                goto fail;
            }
            json_decref(v);
        }
    }

    if (avro_schema_from_json_length(s->text, strlen(s->text), &s->avro) != 0) {
        s->avro = NULL;
        ll_codec_err(err, errlen, "avro-c refuses the schema: %.120s", avro_strerror());
        goto fail;
    }
    cmpctx cc = {0};
    int same = same_structure(&cc, s->root, s->avro, 0);
    free(cc.seen);
    if (!same) {
        ll_codec_err(err, errlen, "avro-c reads the schema differently");
        goto fail;
    }
    s->iface = avro_generic_class_from_schema(s->avro);
    if (s->iface == NULL) {
        ll_codec_err(err, errlen, "avro-c cannot make a class: %.120s", avro_strerror());
        goto fail;
    }
    return s;
fail:
    free(c.names);
    ll_schema_free(s);
    return NULL;
}

ll_schema *ll_schema_from_json(const char *json_text, char *err, size_t errlen)
{
    if (json_text == NULL) {
        ll_codec_err(err, errlen, "no schema text");
        return NULL;
    }
    return ll_schema_parse(json_text, strlen(json_text), NULL, err, errlen);
}

ll_schema *ll_schema_from_file(const char *path, char *err, size_t errlen)
{
    if (path == NULL) {
        ll_codec_err(err, errlen, "no schema path");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        ll_codec_err(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (len == cap) {
            if (cap >= LL_CODEC_MAX_SCHEMA_FILE) {
                ll_codec_err(err, errlen, "%s: schema file larger than %u bytes", path,
                             LL_CODEC_MAX_SCHEMA_FILE);
                free(buf);
                fclose(f);
                return NULL;
            }
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (buf == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        return NULL;
    }
    if (rerr) {
        ll_codec_err(err, errlen, "%s: read error", path);
        free(buf);
        return NULL;
    }
    char perr[200];
    ll_schema *s = ll_schema_parse(buf, len, NULL, perr, sizeof perr);
    free(buf);
    if (s == NULL)
        ll_codec_err(err, errlen, "%s: %s", path, perr);
    return s;
}

const char *ll_schema_fullname(const ll_schema *s)
{
    if (s == NULL || s->root == NULL)
        return "";
    if (s->root->fullname != NULL) /* avro-c's "ns.name"; an empty namespace is none */
        return s->root->fullname[0] == '.' ? s->root->fullname + 1 : s->root->fullname;
    return ll_type_name(s->root->type);
}

int ll_schema_same(const ll_schema *a, const ll_schema *b)
{
    if (a == b)
        return 1;
    if (a == NULL || b == NULL)
        return 0;
    if (strcmp(a->text, b->text) == 0)
        return 1;
    return json_equal(a->json, b->json);
}

/* ---- schema-id tables ---- */

typedef struct id_ent {
    int32_t id;
    ll_schema *s;
} id_ent;

struct ll_schema_ids {
    id_ent *v;
    size_t n, cap;
};

ll_schema_ids *ll_schema_ids_new(void)
{
    return calloc(1, sizeof(ll_schema_ids));
}

void ll_schema_ids_free(ll_schema_ids *ids)
{
    if (ids == NULL)
        return;
    for (size_t i = 0; i < ids->n; i++)
        ll_schema_free(ids->v[i].s);
    free(ids->v);
    free(ids);
}

const ll_schema *ll_schema_ids_get(const ll_schema_ids *ids, int32_t id)
{
    if (ids == NULL)
        return NULL;
    for (size_t i = 0; i < ids->n; i++)
        if (ids->v[i].id == id)
            return ids->v[i].s;
    return NULL;
}

int ll_schema_ids_put(ll_schema_ids *ids, int32_t id, ll_schema *s)
{
    if (ids == NULL || s == NULL || ll_schema_ids_get(ids, id) != NULL)
        return -1;
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 8;
        id_ent *v = realloc(ids->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n].id = id;
    ids->v[ids->n].s = s;
    ids->n++;
    return 0;
}

static int parse_id(const char *key, int32_t *out)
{
    if (key[0] == '\0' || strlen(key) > 10)
        return -1;
    long long v = 0;
    for (const char *p = key; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (v > INT32_MAX)
        return -1;
    *out = (int32_t)v;
    return 0;
}

ll_schema_ids *ll_schema_ids_load(const char *path, char *err, size_t errlen)
{
    if (path == NULL) {
        ll_codec_err(err, errlen, "no schema id file");
        return NULL;
    }
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        ll_codec_err(err, errlen, "%s: %d:%d: %.80s", path, je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        ll_codec_err(err, errlen, "%s: not a JSON object", path);
        json_decref(root);
        return NULL;
    }
    ll_schema_ids *ids = ll_schema_ids_new();
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) : 0;
    const char *key;
    json_t *val;
    if (ids == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        goto fail;
    }
    json_object_foreach(root, key, val)
    {
        int32_t id;
        if (parse_id(key, &id) != 0) {
            ll_codec_err(err, errlen, "%s: bad schema id \"%.32s\"", path, key);
            goto fail;
        }
        if (!json_is_string(val) || json_string_length(val) == 0) {
            ll_codec_err(err, errlen, "%s: id %s: not a path", path, key);
            goto fail;
        }
        const char *rel = json_string_value(val);
        char *full;
        if (rel[0] == '/' || slash == NULL) {
            full = strdup(rel);
        } else {
            size_t rl = strlen(rel);
            full = malloc(dirlen + 1 + rl + 1);
            if (full != NULL) {
                memcpy(full, path, dirlen);
                full[dirlen] = '/';
                memcpy(full + dirlen + 1, rel, rl + 1);
            }
        }
        if (full == NULL) {
            ll_codec_err(err, errlen, "out of memory");
            goto fail;
        }
        char serr[256];
        ll_schema *s = ll_schema_from_file(full, serr, sizeof serr);
        free(full);
        if (s == NULL) {
            ll_codec_err(err, errlen, "id %s: %s", key, serr);
            goto fail;
        }
        if (ll_schema_ids_put(ids, id, s) != 0) {
            ll_schema_free(s);
            ll_codec_err(err, errlen, "%s: id %s twice", path, key);
            goto fail;
        }
    }
    json_decref(root);
    return ids;
fail:
    json_decref(root);
    ll_schema_ids_free(ids);
    return NULL;
}
