/*
 * decode_project.c - projection (decode_int.h): a pre-validated binary datum of writer type w
 * read straight into JSON of reader type r (Avro 1.11 specification, "Binary Encoding"; no
 * avro-c value is built), records by field name with the reader's defaults, unions by branch,
 * logical values as text. ll_prevalidate has bounded every length, count and depth of the datum
 * before it gets here; the cursor's reads (decode_cursor.c) check the end again all the same.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_int.h"

static json_t *real_json(ll_path *p, double d)
{
    if (!isfinite(d)) {
        ll_path_err(p, "non-finite float");
        return NULL;
    }
    json_t *j = json_real(d);
    if (j == NULL)
        ll_path_err(p, "out of memory");
    return j;
}

/* A string, bytes or fixed value as a JSON string: UTF-8 and without NUL (a NUL would cut it
 * short in every C string and PostgreSQL text it reaches). */
static json_t *text_json(ll_path *p, const void *s, size_t len, const char *what)
{
    if (len > 0 && memchr(s, 0, len) != NULL) {
        ll_path_err(p, "%s contains a NUL byte", what);
        return NULL;
    }
    json_t *j = ll_utf8_valid(s, len) ? json_stringn(s, len) : NULL;
    if (j == NULL)
        ll_path_err(p, "%s is not valid UTF-8", what);
    return j;
}

static json_t *str_json(ll_path *p, const char *s)
{
    json_t *j = json_string(s);
    if (j == NULL)
        ll_path_err(p, "out of memory");
    return j;
}

/* The text of a writer logical value (decimal, uuid fixed: the bytes b/len; date, timestamps:
 * the number l). */
static json_t *logical_json(ll_path *p, const ll_node *w, const void *b, size_t len, int64_t l)
{
    char text[64], lerr[120];
    int rc = 0;
    switch (w->logical) {
    case LLL_DECIMAL:
        rc = ll_decimal_text(b, len, w->precision, w->scale, text, sizeof text, lerr, sizeof lerr);
        break;
    case LLL_DATE:
        rc = ll_date_text(l, text, sizeof text, lerr, sizeof lerr);
        break;
    case LLL_UUID:
        ll_uuid_text(b, text);
        break;
    default:
        rc = ll_timestamp_text(l, w->logical, text, sizeof text, lerr, sizeof lerr);
        break;
    }
    if (rc != 0) {
        ll_path_err(p, "%s", lerr);
        return NULL;
    }
    return str_json(p, text);
}

/* Moves the cursor past a value of type n, building nothing: the pre-validator's walk (validate.c)
 * over a value it has already accepted, so no budget of the datum is spent again. */
static int skip(ll_path *p, ll_cur *c, const ll_node *n)
{
    ll_counter values = {SIZE_MAX, SIZE_MAX, "values per datum", "none"};
    size_t used = 0;
    char verr[160];
    if (ll_prevalidate(n, c->p, (size_t)(c->end - c->p), SIZE_MAX, &values, &used, verr, sizeof verr) != 0) {
        ll_path_err(p, "%s", verr);
        return -1;
    }
    c->p += used;
    return 0;
}

/* The writer field that reader field rf reads (by name, then by its aliases), or -1. */
static long writer_field(const ll_node *w, const ll_field *rf)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->fields[i].name, rf->name) == 0)
            return (long)i;
    for (size_t a = 0; rf->aliases && a < json_array_size(rf->aliases); a++) {
        const char *al = json_string_value(json_array_get(rf->aliases, a));
        for (size_t i = 0; al && i < w->n; i++)
            if (strcmp(w->fields[i].name, al) == 0)
                return (long)i;
    }
    return -1;
}

/*
 * A record. Read as its own type, the fields come in order. Projected, the reader's fields may
 * take the writer's in another order, or one writer field twice (a name and an alias): the
 * writer's fields are first skipped to find where each starts, then read from there. A byte is
 * skipped at most once per projected record around it, and records are projected only as deep as
 * the reader's schema nests them (ours: two), however deep the writer's datum goes.
 */
static json_t *conv_record(ll_path *p, ll_cur *c, const ll_node *w, const ll_node *r, int depth)
{
    const unsigned char *small[32], **at = NULL, *end = NULL;
    if (r != w) {
        at = w->n <= 32 ? small : malloc(w->n * sizeof *at);
        if (at == NULL) {
            ll_path_err(p, "out of memory");
            return NULL;
        }
        for (size_t i = 0; i < w->n; i++) {
            at[i] = c->p;
            if (skip(p, c, w->fields[i].type) != 0) {
                if (at != small)
                    free(at);
                return NULL;
            }
        }
        end = c->p;
    }
    json_t *obj = json_object();
    if (obj == NULL)
        ll_path_err(p, "out of memory");
    for (size_t j = 0; obj != NULL && j < r->n; j++) {
        const ll_field *rf = &r->fields[j];
        long wi = r == w ? (long)j : writer_field(w, rf);
        json_t *val;
        ll_path_push(p, rf->name);
        if (wi >= 0 && r == w) {
            val = ll_dec_conv(p, c, w->fields[wi].type, rf->type, depth + 1);
        } else if (wi >= 0) {
            ll_cur fc = {at[wi], end};
            val = ll_dec_conv(p, &fc, w->fields[wi].type, rf->type, depth + 1);
        } else if (rf->def != NULL) {
            char derr[160];
            val = ll_default_to_json(rf->type, rf->def, 0, p->values, derr, sizeof derr);
            if (val == NULL)
                ll_path_err(p, "default: %s", derr);
        } else {
            ll_path_err(p, "missing field without default");
            val = NULL;
        }
        ll_path_pop(p);
        if (val == NULL || json_object_set_new(obj, rf->name, val) != 0) {
            json_decref(obj);
            obj = NULL;
        }
    }
    if (at != small)
        free(at);
    return obj;
}

/* An array or a map of writer type w read as reader type r. */
static json_t *conv_blocks(ll_path *p, ll_cur *c, const ll_node *w, const ll_node *r, int depth)
{
    int is_map = w->type == LLT_MAP;
    json_t *out = is_map ? json_object() : json_array();
    if (out == NULL) {
        ll_path_err(p, "out of memory");
        return NULL;
    }
    for (;;) {
        int64_t count;
        if (ll_cur_block(p, c, &count) != 0)
            break;
        if (count == 0)
            return out;
        int64_t i = 0;
        for (; i < count; i++) {
            const unsigned char *key = NULL;
            size_t klen = 0;
            if (is_map && ll_cur_bytes(p, c, &key, &klen, "map key") != 0)
                break;
            json_t *cj = ll_dec_conv(p, c, w->items, r->items, depth + 1);
            if (cj == NULL)
                break;
            int bad = is_map ? json_object_setn_new(out, (const char *)key, klen, cj) != 0
                             : json_array_append_new(out, cj) != 0;
            if (bad) {
                ll_path_err(p, is_map ? "map key is not valid UTF-8" : "out of memory");
                break;
            }
        }
        if (i < count)
            break;
    }
    json_decref(out);
    return NULL;
}

json_t *ll_dec_conv(ll_path *p, ll_cur *c, const ll_node *w, const ll_node *r, int depth)
{
    if (depth > LL_CODEC_MAX_DEPTH * 2 + 2) {
        ll_path_err(p, "nesting deeper than %d", LL_CODEC_MAX_DEPTH);
        return NULL;
    }
    if (w->type == LLT_UNION) {
        int64_t d;
        if (ll_cur_long(p, c, &d, "union") != 0)
            return NULL;
        if (d < 0 || (uint64_t)d >= w->n) {
            ll_path_err(p, "union index %lld out of range", (long long)d);
            return NULL;
        }
        const ll_node *wb = w->branches[d];
        return ll_dec_conv(p, c, wb, r == w ? wb : r, depth);
    }
    if (r->type == LLT_UNION) {
        int i = ll_dec_match_branch(w, r);
        if (i < 0) {
            char a[120], b[240];
            ll_path_err(p, "writer %s fits no branch of the reader union %s", ll_dec_lname(w, a, sizeof a),
                        ll_dec_union_name(r, b, sizeof b));
            return NULL;
        }
        r = r->branches[i];
    }
    if (r != w && ll_dec_match_level(w, r) < 0) {
        char a[120], b[120];
        ll_path_err(p, "writer %s cannot be read as %s", ll_dec_lname(w, a, sizeof a),
                    ll_dec_lname(r, b, sizeof b));
        return NULL;
    }
    /* text of a logical value: decimals and uuid fixed always, dates and timestamps into text */
    int as_text = w->logical != LLL_NONE && ll_dec_logical_read(w, r) == 1;
    int64_t l = 0;
    uint64_t u = 0;
    const unsigned char *b = NULL;
    size_t len = 0;
    switch (w->type) {
    case LLT_NULL:
        return json_null();
    case LLT_BOOLEAN:
        if (ll_cur_raw(p, c, 1, &b, "boolean") != 0)
            return NULL;
        return json_boolean(*b != 0);
    case LLT_INT: /* ll_prevalidate: within 32 bits */
    case LLT_LONG:
        if (ll_cur_long(p, c, &l, ll_type_name(w->type)) != 0)
            return NULL;
        if (w->type == LLT_INT)
            l = (int32_t)l;
        if (as_text)
            return logical_json(p, w, NULL, 0, l);
        return (r->type == LLT_FLOAT || r->type == LLT_DOUBLE) ? real_json(p, (double)l) : json_integer(l);
    case LLT_FLOAT: {
        float f;
        uint32_t u32;
        if (ll_cur_le(p, c, 4, &u) != 0)
            return NULL;
        u32 = (uint32_t)u;
        memcpy(&f, &u32, sizeof f);
        return real_json(p, (double)f);
    }
    case LLT_DOUBLE: {
        double d;
        if (ll_cur_le(p, c, 8, &u) != 0)
            return NULL;
        memcpy(&d, &u, sizeof d);
        return real_json(p, d);
    }
    case LLT_STRING:
        if (ll_cur_bytes(p, c, &b, &len, "string") != 0)
            return NULL;
        return text_json(p, len ? (const char *)b : "", len, "string");
    case LLT_BYTES:
        if (ll_cur_bytes(p, c, &b, &len, "bytes") != 0)
            return NULL;
        if (as_text)
            return logical_json(p, w, b, len, 0);
        return text_json(p, len ? (const char *)b : "", len, "bytes");
    case LLT_FIXED:
        if (ll_cur_raw(p, c, w->size, &b, "fixed") != 0)
            return NULL;
        if (as_text)
            return logical_json(p, w, b, w->size, 0);
        if (w->size != r->size) {
            ll_path_err(p, "fixed of %zu bytes read as %zu", w->size, r->size);
            return NULL;
        }
        return text_json(p, w->size ? (const char *)b : "", w->size, "fixed");
    case LLT_ENUM: {
        if (ll_cur_long(p, c, &l, "enum") != 0)
            return NULL;
        if (l < 0 || (uint64_t)l >= w->n) {
            ll_path_err(p, "enum index %lld out of range", (long long)l);
            return NULL;
        }
        const char *sym = w->symbols[l];
        for (size_t i = 0; i < r->n; i++)
            if (strcmp(r->symbols[i], sym) == 0)
                return json_string(sym);
        if (r->enum_default != NULL)
            return json_string(r->enum_default);
        ll_path_err(p, "symbol %s not in reader enum %s", sym, r->fullname);
        return NULL;
    }
    case LLT_ARRAY:
    case LLT_MAP:
        return conv_blocks(p, c, w, r, depth);
    case LLT_RECORD:
        return conv_record(p, c, w, r, depth);
    case LLT_UNION:
        break;
    }
    ll_path_err(p, "unknown schema type");
    return NULL;
}
