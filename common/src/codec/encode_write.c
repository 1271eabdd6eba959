/*
 * encode_write.c - for the encoder (encode_int.h): a JSON value written as the Avro binary
 * datum of its schema type, straight into a growing buffer (Avro 1.11 specification,
 * "Binary Encoding"): records field by field (an absent field takes the schema default), unions
 * as the branch index and the branch it fits, arrays and maps as one block of a positive count
 * and a closing 0 (the bytes avro-c's avro_value_write gives for the same value).
 *
 * No avro-c generic value is built: the loop's replies are encoded once per message, and the
 * generic values, their allocations and avro-c's sizeof walk were a large part of the completion
 * loop's CPU (the figures: docs/performance-history.md, 2026-12-02, session 12 and 13).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode_int.h"

int ll_wbuf_reserve(ll_path *p, ll_wbuf *w, size_t n)
{
    if (w->cap - w->len >= n)
        return 0;
    size_t cap = w->cap != 0 ? w->cap : 256;
    while (cap - w->len < n) {
        if (cap > SIZE_MAX / 2) {
            ll_path_err(p, "out of memory");
            return -1;
        }
        cap *= 2;
    }
    unsigned char *b = realloc(w->b, cap);
    if (b == NULL) {
        ll_path_err(p, "out of memory");
        return -1;
    }
    w->b = b;
    w->cap = cap;
    return 0;
}

/* Appends a zig-zag varint. */
static int put_long(ll_path *p, ll_wbuf *w, int64_t v)
{
    if (ll_wbuf_reserve(p, w, 10) != 0)
        return -1;
    w->len += ll_write_long(w->b + w->len, v);
    return 0;
}

/* Appends n raw bytes. */
static int put_raw(ll_path *p, ll_wbuf *w, const void *s, size_t n)
{
    if (ll_wbuf_reserve(p, w, n) != 0)
        return -1;
    if (n > 0)
        memcpy(w->b + w->len, s, n);
    w->len += n;
    return 0;
}

/* Appends the n low bytes of u, least significant first (float and double are little-endian). */
static int put_le(ll_path *p, ll_wbuf *w, uint64_t u, int n)
{
    if (ll_wbuf_reserve(p, w, (size_t)n) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        w->b[w->len++] = (unsigned char)(u >> (8 * i));
    return 0;
}

/* Appends a length-prefixed string or bytes value. */
static int put_bytes(ll_path *p, ll_wbuf *w, const char *s, size_t n)
{
    return put_long(p, w, (int64_t)n) != 0 ? -1 : put_raw(p, w, s, n);
}

/* The name of the first key of record j that is not a field of n (j has one). */
static const char *unknown_key(const ll_node *n, const json_t *j)
{
    const char *k;
    json_t *item;
    json_object_foreach((json_t *)j, k, item)
    {
        int known = 0;
        for (size_t i = 0; i < n->n && !known; i++)
            known = strcmp(n->fields[i].name, k) == 0;
        if (!known)
            return k;
    }
    return "?";
}

/* A field absent from the value: its schema default (a union's: its first branch). */
static int write_default(ll_path *p, ll_wbuf *w, const ll_field *f, int depth)
{
    char derr[160];
    json_t *dj = ll_default_to_json(f->type, f->def, 0, NULL, derr, sizeof derr); /* checked at load */
    if (dj == NULL) {
        ll_path_err(p, "default: %s", derr);
        return -1;
    }
    int rc;
    if (f->type->type == LLT_UNION)
        rc = put_long(p, w, 0) != 0 ? -1 : ll_enc_write(p, w, f->type->branches[0], dj, depth + 1);
    else
        rc = ll_enc_write(p, w, f->type, dj, depth + 1);
    json_decref(dj);
    return rc;
}

static int write_record(ll_path *p, ll_wbuf *w, const ll_node *n, const json_t *j, int depth)
{
    size_t present = 0;
    for (size_t i = 0; i < n->n; i++)
        present += json_object_get(j, n->fields[i].name) != NULL;
    if (present != json_object_size(j)) {
        ll_path_err(p, "unknown field %.60s in %s", unknown_key(n, j), n->fullname);
        return -1;
    }
    for (size_t i = 0; i < n->n; i++) {
        const ll_field *f = &n->fields[i];
        json_t *given = json_object_get(j, f->name);
        ll_path_push(p, f->name);
        int rc;
        if (given != NULL) {
            rc = ll_enc_write(p, w, f->type, given, depth + 1);
        } else if (f->def != NULL) {
            rc = write_default(p, w, f, depth);
        } else {
            ll_path_err(p, "missing field without default");
            rc = -1;
        }
        ll_path_pop(p);
        if (rc != 0)
            return -1;
    }
    return 0;
}

/* An array (JSON array) or a map (JSON object): one block of a positive count, then 0. */
static int write_block(ll_path *p, ll_wbuf *w, const ll_node *n, const json_t *j, int depth)
{
    int is_map = n->type == LLT_MAP;
    if (is_map ? !json_is_object(j) : !json_is_array(j)) {
        ll_path_err(p, "expected %s, got %s", is_map ? "map (object)" : "array", ll_enc_jtype(j));
        return -1;
    }
    size_t count = is_map ? json_object_size(j) : json_array_size(j);
    if (count > 0 && put_long(p, w, (int64_t)count) != 0)
        return -1;
    if (!is_map) {
        size_t i;
        json_t *item;
        json_array_foreach(j, i, item)
        {
            if (ll_enc_write(p, w, n->items, item, depth + 1) != 0)
                return -1;
        }
        return put_long(p, w, 0);
    }
    const char *k;
    json_t *item;
    json_object_foreach((json_t *)j, k, item)
    {
        if (put_bytes(p, w, k, strlen(k)) != 0)
            return -1;
        ll_path_push(p, k);
        int rc = ll_enc_write(p, w, n->items, item, depth + 1);
        ll_path_pop(p);
        if (rc != 0)
            return -1;
    }
    return put_long(p, w, 0);
}

int ll_enc_write(ll_path *p, ll_wbuf *w, const ll_node *n, const json_t *j, int depth)
{
    if (depth > LL_CODEC_MAX_SCHEMA_DEPTH + LL_CODEC_MAX_DEPTH) {
        ll_path_err(p, "value nested too deeply");
        return -1;
    }
    if (n->type != LLT_UNION && n->type != LLT_RECORD && n->type != LLT_ARRAY && n->type != LLT_MAP &&
        !ll_enc_fits(n, j, depth)) {
        ll_path_err(p, "expected %s, got %s", n->fullname ? n->fullname : ll_type_name(n->type),
                    ll_enc_jtype(j));
        return -1;
    }
    if ((n->type == LLT_STRING || n->type == LLT_BYTES || n->type == LLT_FIXED) && json_is_string(j) &&
        strlen(json_string_value(j)) != json_string_length(j)) {
        ll_path_err(p, "%s contains a NUL byte", ll_type_name(n->type)); /* ll_decode refuses it */
        return -1;
    }
    switch (n->type) {
    case LLT_UNION: {
        int i = ll_enc_choose_branch(n, j, depth);
        if (i < 0) {
            ll_path_err(p, "no branch of the union fits a JSON %s", ll_enc_jtype(j));
            return -1;
        }
        return put_long(p, w, i) != 0 ? -1 : ll_enc_write(p, w, n->branches[i], j, depth + 1);
    }
    case LLT_NULL:
        return 0;
    case LLT_BOOLEAN:
        return put_le(p, w, json_is_true(j) ? 1 : 0, 1);
    case LLT_INT:
    case LLT_LONG: /* an int is the same varint; ll_enc_fits checked its range */
        return put_long(p, w, (int64_t)json_integer_value(j));
    case LLT_FLOAT: {
        float f = (float)json_number_value(j);
        uint32_t u;
        memcpy(&u, &f, sizeof u);
        return put_le(p, w, u, 4);
    }
    case LLT_DOUBLE: {
        double d = json_number_value(j);
        uint64_t u;
        memcpy(&u, &d, sizeof u);
        return put_le(p, w, u, 8);
    }
    case LLT_STRING:
    case LLT_BYTES:
        return put_bytes(p, w, json_string_value(j), json_string_length(j));
    case LLT_FIXED:
        return put_raw(p, w, json_string_value(j), n->size);
    case LLT_ENUM:
        return put_long(p, w, ll_enc_enum_index(n, json_string_value(j)));
    case LLT_ARRAY:
    case LLT_MAP:
        return write_block(p, w, n, j, depth);
    case LLT_RECORD:
        if (!json_is_object(j)) {
            ll_path_err(p, "expected %s (object), got %s", n->fullname, ll_enc_jtype(j));
            return -1;
        }
        return write_record(p, w, n, j, depth);
    }
    ll_path_err(p, "unknown schema type");
    return -1;
}
