/*
 * validate.c - the bounded pre-validator: walks a binary datum against the writer schema
 * before any value of it is read (docs/contract.md K§5; decode_project.c reads it afterwards).
 *
 * Checked: varints at most 10 bytes without bits beyond 64 (ints: at most 5 bytes and within
 * 32 bits), booleans 0 or 1, string/bytes lengths >= 0 and within the buffer, map keys without
 * NUL, fixed sizes within the buffer, union and enum indexes in range, array/map blocks
 * (negative counts legal: a byte size follows, which must match the block) with the total of
 * items bounded by max_items, records/arrays/maps nested at most LL_CODEC_MAX_DEPTH deep, and
 * every value walked (a null field of a record too: it occupies no byte, but a JSON null is
 * built for it) taken from the values budget, an array/map block's count before its items are walked.
 * Nothing is allocated.
 */
#include <string.h>

#include "codec_internal.h"

typedef struct vctx {
    const unsigned char *p, *end;
    size_t items_left;
    ll_counter *values;
    char *err;
    size_t errlen;
} vctx;

static int rd_long(vctx *c, int64_t *v, const char *what)
{
    int rc = ll_read_long(&c->p, c->end, v);
    if (rc == -1) {
        ll_codec_err(c->err, c->errlen, "truncated datum (%s)", what);
        return -1;
    }
    if (rc != 0) {
        ll_codec_err(c->err, c->errlen, "malformed varint (%s)", what);
        return -1;
    }
    return 0;
}

static size_t left(const vctx *c)
{
    return (size_t)(c->end - c->p);
}

static int rd_len(vctx *c, const char *what, size_t *out)
{
    int64_t n;
    if (rd_long(c, &n, what) != 0)
        return -1;
    if (n < 0) {
        ll_codec_err(c->err, c->errlen, "negative %s length %lld", what, (long long)n);
        return -1;
    }
    if ((uint64_t)n > left(c)) {
        ll_codec_err(c->err, c->errlen, "%s length %lld beyond buffer (%zu bytes left)", what, (long long)n,
                     left(c));
        return -1;
    }
    *out = (size_t)n;
    return 0;
}

static int walk(vctx *c, const ll_node *n, int depth);

static int walk_blocks(vctx *c, const ll_node *n, int depth)
{
    int is_map = n->type == LLT_MAP;
    const char *what = is_map ? "map" : "array";
    for (;;) {
        int64_t count;
        if (rd_long(c, &count, what) != 0)
            return -1;
        if (count == 0)
            return 0;
        const unsigned char *block_end = NULL;
        if (count < 0) {
            if (count == INT64_MIN) {
                ll_codec_err(c->err, c->errlen, "%s block count out of range", what);
                return -1;
            }
            count = -count;
            size_t bytes;
            if (rd_len(c, "block", &bytes) != 0)
                return -1;
            block_end = c->p + bytes;
        }
        if ((uint64_t)count > c->items_left) {
            ll_codec_err(c->err, c->errlen, "%s block count %lld exceeds the item limit", what,
                         (long long)count);
            return -1;
        }
        c->items_left -= (size_t)count;
        if ((uint64_t)count > c->values->left) { /* refused before the items are walked */
            ll_counter_take(c->values, (size_t)count, c->err, c->errlen); /* fails: names the budget */
            return -1;
        }
        for (int64_t i = 0; i < count; i++) {
            if (is_map) {
                size_t kl;
                if (rd_len(c, "map key", &kl) != 0)
                    return -1;
                if (memchr(c->p, 0, kl) != NULL) {
                    ll_codec_err(c->err, c->errlen, "NUL in map key");
                    return -1;
                }
                c->p += kl;
            }
            if (walk(c, n->items, depth) != 0)
                return -1;
        }
        if (block_end != NULL && c->p != block_end) {
            ll_codec_err(c->err, c->errlen, "%s block size does not match its items", what);
            return -1;
        }
    }
}

static int walk(vctx *c, const ll_node *n, int depth)
{
    int64_t v;
    size_t len;
    if (n->type != LLT_UNION && ll_counter_take(c->values, 1, c->err, c->errlen) != 0)
        return -1;
    switch (n->type) {
    case LLT_NULL:
        return 0;
    case LLT_BOOLEAN:
        if (left(c) < 1) {
            ll_codec_err(c->err, c->errlen, "truncated datum (boolean)");
            return -1;
        }
        if (*c->p > 1) {
            ll_codec_err(c->err, c->errlen, "boolean byte 0x%02x", *c->p);
            return -1;
        }
        c->p++;
        return 0;
    case LLT_INT: {
        const unsigned char *start = c->p;
        if (rd_long(c, &v, "int") != 0)
            return -1;
        if (c->p - start > 5 || v < INT32_MIN || v > INT32_MAX) {
            ll_codec_err(c->err, c->errlen, "int out of range");
            return -1;
        }
        return 0;
    }
    case LLT_LONG:
        return rd_long(c, &v, "long");
    case LLT_FLOAT:
    case LLT_DOUBLE:
        len = n->type == LLT_FLOAT ? 4 : 8;
        if (left(c) < len) {
            ll_codec_err(c->err, c->errlen, "truncated datum (%s)", ll_type_name(n->type));
            return -1;
        }
        c->p += len;
        return 0;
    case LLT_STRING:
    case LLT_BYTES:
        if (rd_len(c, ll_type_name(n->type), &len) != 0)
            return -1;
        c->p += len;
        return 0;
    case LLT_FIXED:
        if (left(c) < n->size) {
            ll_codec_err(c->err, c->errlen, "truncated datum (fixed %s)", n->fullname);
            return -1;
        }
        c->p += n->size;
        return 0;
    case LLT_ENUM:
        if (rd_long(c, &v, "enum") != 0)
            return -1;
        if (v < 0 || (uint64_t)v >= n->n) {
            ll_codec_err(c->err, c->errlen, "enum index %lld out of range for %s", (long long)v, n->fullname);
            return -1;
        }
        return 0;
    case LLT_UNION:
        if (rd_long(c, &v, "union") != 0)
            return -1;
        if (v < 0 || (uint64_t)v >= n->n) {
            ll_codec_err(c->err, c->errlen, "union index %lld out of range (%zu branches)", (long long)v,
                         n->n);
            return -1;
        }
        return walk(c, n->branches[v], depth);
    case LLT_RECORD:
    case LLT_ARRAY:
    case LLT_MAP:
        if (depth + 1 > LL_CODEC_MAX_DEPTH) {
            ll_codec_err(c->err, c->errlen, "nesting deeper than %d", LL_CODEC_MAX_DEPTH);
            return -1;
        }
        if (n->type != LLT_RECORD)
            return walk_blocks(c, n, depth + 1);
        for (size_t i = 0; i < n->n; i++)
            if (walk(c, n->fields[i].type, depth + 1) != 0)
                return -1;
        return 0;
    }
    ll_codec_err(c->err, c->errlen, "unknown schema type");
    return -1;
}

int ll_prevalidate(const ll_node *n, const unsigned char *buf, size_t len, size_t max_items,
                   ll_counter *values, size_t *consumed, char *err, size_t errlen)
{
    static const unsigned char empty[1];
    if (buf == NULL)
        buf = empty;
    vctx c = {
        .p = buf, .end = buf + len, .items_left = max_items, .values = values, .err = err, .errlen = errlen};
    if (walk(&c, n, 0) != 0)
        return -1;
    *consumed = (size_t)(c.p - buf);
    return 0;
}
