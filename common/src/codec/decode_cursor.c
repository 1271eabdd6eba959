/*
 * decode_cursor.c - for the decoder (decode_int.h): the binary encoding's values read at a cursor
 * over a datum that ll_prevalidate accepted, and values skipped (Avro 1.11 specification,
 * "Binary Encoding"). Every read checks the datum's end again all the same.
 */
#include <stdint.h>
#include <string.h>

#include "decode_int.h"

/* The datum ends before a value it declares (ll_prevalidate rules this out). -1, error at p. */
int ll_short_datum(ll_path *p, const char *what)
{
    ll_path_err(p, "truncated datum (%s)", what);
    return -1;
}

int ll_cur_long(ll_path *p, ll_cur *c, int64_t *v, const char *what)
{
    return ll_read_long(&c->p, c->end, v) == 0 ? 0 : ll_short_datum(p, what);
}

/* n raw bytes at the cursor into *b, the cursor past them. */
int ll_cur_raw(ll_path *p, ll_cur *c, size_t n, const unsigned char **b, const char *what)
{
    if ((size_t)(c->end - c->p) < n)
        return ll_short_datum(p, what);
    *b = c->p;
    c->p += n;
    return 0;
}

/* A length-prefixed string or bytes value: *b and *n into the datum. */
int ll_cur_bytes(ll_path *p, ll_cur *c, const unsigned char **b, size_t *n, const char *what)
{
    int64_t len;
    if (ll_cur_long(p, c, &len, what) != 0)
        return -1;
    if (len < 0)
        return ll_short_datum(p, what);
    *n = (size_t)len;
    return ll_cur_raw(p, c, *n, b, what);
}

/* The little-endian bytes of a float (4) or double (8) as an unsigned integer. */
int ll_cur_le(ll_path *p, ll_cur *c, int n, uint64_t *u)
{
    const unsigned char *b;
    if (ll_cur_raw(p, c, (size_t)n, &b, n == 4 ? "float" : "double") != 0)
        return -1;
    *u = 0;
    for (int i = n - 1; i >= 0; i--)
        *u = (*u << 8) | b[i];
    return 0;
}

/* An array's or map's next block count (0: the end). A negative count is followed by the block's
 * byte size, which ll_prevalidate matched against the items. */
int ll_cur_block(ll_path *p, ll_cur *c, int64_t *count)
{
    if (ll_cur_long(p, c, count, "block count") != 0)
        return -1;
    if (*count < 0) {
        int64_t bytes;
        if (*count == INT64_MIN || ll_cur_long(p, c, &bytes, "block size") != 0)
            return ll_short_datum(p, "block");
        *count = -*count;
    }
    return 0;
}

/* Moves the cursor past a value of type n, building nothing (a record's fields that a reader
 * reads in another order, or not at all). */
int ll_skip(ll_path *p, ll_cur *c, const ll_node *n, int depth)
{
    const unsigned char *b;
    int64_t v;
    size_t len;
    if (depth > LL_CODEC_MAX_DEPTH * 2 + 2) {
        ll_path_err(p, "nesting deeper than %d", LL_CODEC_MAX_DEPTH);
        return -1;
    }
    switch (n->type) {
    case LLT_NULL:
        return 0;
    case LLT_BOOLEAN:
        return ll_cur_raw(p, c, 1, &b, "boolean");
    case LLT_INT:
    case LLT_LONG:
    case LLT_ENUM:
        return ll_cur_long(p, c, &v, ll_type_name(n->type));
    case LLT_FLOAT:
        return ll_cur_raw(p, c, 4, &b, "float");
    case LLT_DOUBLE:
        return ll_cur_raw(p, c, 8, &b, "double");
    case LLT_STRING:
    case LLT_BYTES:
        return ll_cur_bytes(p, c, &b, &len, ll_type_name(n->type));
    case LLT_FIXED:
        return ll_cur_raw(p, c, n->size, &b, "fixed");
    case LLT_UNION:
        if (ll_cur_long(p, c, &v, "union") != 0)
            return -1;
        if (v < 0 || (uint64_t)v >= n->n)
            return ll_short_datum(p, "union index");
        return ll_skip(p, c, n->branches[v], depth);
    case LLT_RECORD:
        for (size_t i = 0; i < n->n; i++)
            if (ll_skip(p, c, n->fields[i].type, depth + 1) != 0)
                return -1;
        return 0;
    case LLT_ARRAY:
    case LLT_MAP:
        for (;;) {
            int64_t count;
            if (ll_cur_block(p, c, &count) != 0)
                return -1;
            if (count == 0)
                return 0;
            for (int64_t i = 0; i < count; i++)
                if ((n->type == LLT_MAP && ll_cur_bytes(p, c, &b, &len, "map key") != 0) ||
                    ll_skip(p, c, n->items, depth + 1) != 0)
                    return -1;
        }
    }
    ll_path_err(p, "unknown schema type");
    return -1;
}
