/*
 * schema_avro.c - avro-c's parse of a schema compared with our ll_node tree (ll/codecavro.h).
 * Test-only: linked by test_codecavro_agree and the fuzz_schema target, never by a service.
 */
#include <avro.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/codecavro.h"
#include "schema_int.h"

/* A node and avro-c's schema already found to match (recursion through named records). */
typedef struct pair {
    const ll_node *n;
    avro_schema_t a;
} pair;

/* One comparison: the records already matched, the first difference. seen is freed by the caller. */
typedef struct cmp {
    pair *seen;
    size_t nseen, capseen;
    char *err;
    size_t errlen;
} cmp;

/* Records the difference at path; returns 0 (different). */
static int differ(cmp *c, const char *path, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s: %s", path, what);
    return 0;
}

/* Our type of avro-c's type t; -1 for one we do not have. */
static int map_type(avro_type_t t, ll_type *out)
{
    static const struct {
        avro_type_t a;
        ll_type l;
    } m[] = {
        {AVRO_STRING, LLT_STRING},   {AVRO_BYTES, LLT_BYTES}, {AVRO_INT32, LLT_INT},
        {AVRO_INT64, LLT_LONG},      {AVRO_FLOAT, LLT_FLOAT}, {AVRO_DOUBLE, LLT_DOUBLE},
        {AVRO_BOOLEAN, LLT_BOOLEAN}, {AVRO_NULL, LLT_NULL},   {AVRO_RECORD, LLT_RECORD},
        {AVRO_ENUM, LLT_ENUM},       {AVRO_FIXED, LLT_FIXED}, {AVRO_MAP, LLT_MAP},
        {AVRO_ARRAY, LLT_ARRAY},     {AVRO_UNION, LLT_UNION},
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
        if (m[i].a == t) {
            *out = m[i].l;
            return 0;
        }
    return -1;
}

static int same(cmp *c, const ll_node *n, avro_schema_t a, const char *path, int depth);

/* The child at path.step compared (path bounded: a deep one is cut, the comparison goes on). */
static int same_at(cmp *c, const ll_node *n, avro_schema_t a, const char *path, const char *step, int depth)
{
    char sub[512];
    snprintf(sub, sizeof sub, "%s%s", path, step);
    return same(c, n, a, sub, depth + 1);
}

/* Whether a named record pair was already matched (recursion); else records it. -1: no memory. */
static int seen_before(cmp *c, const ll_node *n, avro_schema_t a)
{
    for (size_t i = 0; i < c->nseen; i++)
        if (c->seen[i].n == n && c->seen[i].a == a)
            return 1;
    if (c->nseen == c->capseen) {
        size_t cap = c->capseen ? c->capseen * 2 : 16;
        pair *v = realloc(c->seen, cap * sizeof *v);
        if (v == NULL)
            return -1;
        c->seen = v;
        c->capseen = cap;
    }
    c->seen[c->nseen++] = (pair){n, a};
    return 0;
}

static int same_record(cmp *c, const ll_node *n, avro_schema_t a, const char *path, int depth)
{
    int before = seen_before(c, n, a);
    if (before != 0)
        return before > 0 ? 1 : differ(c, path, "out of memory");
    if (avro_schema_record_size(a) != n->n)
        return differ(c, path, "avro-c has %zu fields, ours %zu", avro_schema_record_size(a), n->n);
    for (size_t i = 0; i < n->n; i++) {
        const char *fn = avro_schema_record_field_name(a, (int)i);
        if (fn == NULL || strcmp(fn, n->fields[i].name) != 0)
            return differ(c, path, "field %zu is %s in avro-c, %s in ours", i, fn ? fn : "(none)",
                          n->fields[i].name);
        char step[160];
        snprintf(step, sizeof step, ".%.120s", n->fields[i].name);
        if (!same_at(c, n->fields[i].type, avro_schema_record_field_get_by_index(a, (int)i), path, step,
                     depth))
            return 0;
    }
    return 1;
}

static int same(cmp *c, const ll_node *n, avro_schema_t a, const char *path, int depth)
{
    for (int hops = 0; a != NULL && is_avro_link(a) && hops < 4; hops++)
        a = avro_schema_link_target(a);
    if (depth > LL_CODEC_MAX_SCHEMA_DEPTH + 1)
        return differ(c, path, "nested deeper than %d", LL_CODEC_MAX_SCHEMA_DEPTH);
    ll_type t;
    if (a == NULL || map_type(avro_typeof(a), &t) != 0)
        return differ(c, path, "avro-c has no type we know here");
    if (t != n->type)
        return differ(c, path, "avro-c reads %s, ours %s", ll_type_name(t), ll_type_name(n->type));
    if (t == LLT_RECORD || t == LLT_ENUM || t == LLT_FIXED) {
        const char *nm = avro_schema_name(a);
        char *full = nm ? ll_sch_qualify(nm, avro_schema_namespace(a)) : NULL;
        int eq = full != NULL && strcmp(full, n->fullname) == 0;
        if (!eq)
            differ(c, path, "avro-c names it %s, ours %s", full ? full : "(none)", n->fullname);
        free(full);
        if (!eq)
            return 0;
    }
    switch (t) {
    case LLT_RECORD:
        return same_record(c, n, a, path, depth);
    case LLT_ENUM:
        if ((size_t)avro_schema_enum_number_of_symbols(a) != n->n)
            return differ(c, path, "avro-c has %d symbols, ours %zu", avro_schema_enum_number_of_symbols(a),
                          n->n);
        for (size_t i = 0; i < n->n; i++) {
            const char *s = avro_schema_enum_get(a, (int)i);
            if (s == NULL || strcmp(s, n->symbols[i]) != 0)
                return differ(c, path, "symbol %zu is %s in avro-c, %s in ours", i, s ? s : "(none)",
                              n->symbols[i]);
        }
        return 1;
    case LLT_FIXED:
        if (avro_schema_fixed_size(a) != (int64_t)n->size)
            return differ(c, path, "avro-c has size %lld, ours %zu", (long long)avro_schema_fixed_size(a),
                          n->size);
        return 1;
    case LLT_ARRAY:
        return same_at(c, n->items, avro_schema_array_items(a), path, "[]", depth);
    case LLT_MAP:
        return same_at(c, n->items, avro_schema_map_values(a), path, "{}", depth);
    case LLT_UNION:
        if (avro_schema_union_size(a) != n->n)
            return differ(c, path, "avro-c has %zu branches, ours %zu", avro_schema_union_size(a), n->n);
        for (size_t i = 0; i < n->n; i++) {
            char step[32];
            snprintf(step, sizeof step, "|%zu", i);
            if (!same_at(c, n->branches[i], avro_schema_union_branch(a, (int)i), path, step, depth))
                return 0;
        }
        return 1;
    default:
        return 1;
    }
}

int ll_schema_avro_agrees_with(const ll_schema *s, const char *avro_text, char *err, size_t errlen)
{
    avro_schema_t a = NULL;
    if (avro_schema_from_json_length(avro_text, strlen(avro_text), &a) != 0) {
        snprintf(err, errlen, "avro-c refuses the schema: %.200s", avro_strerror());
        return -1;
    }
    cmp c = {.err = err, .errlen = errlen};
    int r = same(&c, s->root, a, "root", 0);
    free(c.seen);
    avro_schema_decref(a);
    return r;
}

int ll_schema_avro_agrees(const ll_schema *s, char *err, size_t errlen)
{
    return ll_schema_avro_agrees_with(s, s->text, err, errlen);
}
