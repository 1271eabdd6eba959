/*
 * common.c - small helpers of the codec: errors, framing names, zig-zag varints, UTF-8.
 */
#include <stdio.h>
#include <string.h>

#include "codec_internal.h"

void ll_codec_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *ll_type_name(ll_type t)
{
    switch (t) {
    case LLT_NULL:
        return "null";
    case LLT_BOOLEAN:
        return "boolean";
    case LLT_INT:
        return "int";
    case LLT_LONG:
        return "long";
    case LLT_FLOAT:
        return "float";
    case LLT_DOUBLE:
        return "double";
    case LLT_BYTES:
        return "bytes";
    case LLT_STRING:
        return "string";
    case LLT_RECORD:
        return "record";
    case LLT_ENUM:
        return "enum";
    case LLT_ARRAY:
        return "array";
    case LLT_MAP:
        return "map";
    case LLT_UNION:
        return "union";
    case LLT_FIXED:
        return "fixed";
    }
    return "?";
}

const char *const LL_FRAMING_NAMES[] = {"bare", "confluent", "container", "block", NULL};
/* The framings named in LL_FRAMING_NAMES (its NULL aside). */
#define N_FRAMINGS (sizeof LL_FRAMING_NAMES / sizeof LL_FRAMING_NAMES[0] - 1)

int ll_framing_parse(const char *name, ll_framing *out)
{
    if (name == NULL || out == NULL)
        return -1;
    for (size_t i = 0; i < N_FRAMINGS; i++) {
        if (strcmp(name, LL_FRAMING_NAMES[i]) == 0) {
            *out = (ll_framing)i;
            return 0;
        }
    }
    return -1;
}

const char *ll_framing_name(ll_framing f)
{
    if ((unsigned)f < N_FRAMINGS)
        return LL_FRAMING_NAMES[f];
    return "unknown";
}

int ll_read_long(const unsigned char **p, const unsigned char *end, int64_t *out)
{
    const unsigned char *q = *p;
    uint64_t u = 0;
    for (unsigned i = 0;; i++) {
        if (i == 10)
            return -2;
        if (q >= end)
            return -1;
        unsigned char b = *q++;
        if (i == 9 && b > 0x01)
            return -2; /* bits beyond 64 */
        u |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80))
            break;
    }
    *p = q;
    *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return 0;
}

size_t ll_write_long(unsigned char *out, int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;
    while (u > 0x7f) {
        out[n++] = (unsigned char)((u & 0x7f) | 0x80);
        u >>= 7;
    }
    out[n++] = (unsigned char)u;
    return n;
}

int ll_utf8_valid(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t n;
        uint32_t cp;
        if (c >= 0xc2 && c <= 0xdf) {
            n = 1;
            cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (len - i - 1 < n)
            return 0;
        for (size_t k = 1; k <= n; k++) {
            unsigned char d = s[i + k];
            if ((d & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (d & 0x3f);
        }
        if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += n + 1;
    }
    return 1;
}

void ll_path_push(ll_path *p, const char *name)
{
    if (p->n < LL_PATH_MAX)
        p->names[p->n] = name;
    p->n++;
}

void ll_path_pop(ll_path *p)
{
    if (p->n > 0)
        p->n--;
}

void ll_path_err(ll_path *p, const char *fmt, ...)
{
    if (p->err == NULL || p->errlen == 0)
        return;
    char path[160] = "";
    size_t used = 0;
    int n = p->n < LL_PATH_MAX ? p->n : LL_PATH_MAX;
    for (int i = 0; i < n && used < sizeof path - 1; i++) {
        int w = snprintf(path + used, sizeof path - used, "%s%s", i ? "." : "", p->names[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (used >= sizeof path)
        used = sizeof path - 1;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (used > 0)
        snprintf(p->err, p->errlen, "%s: %s", path, msg);
    else
        snprintf(p->err, p->errlen, "%s", msg);
}

static size_t or_default(size_t v, size_t def)
{
    return v ? v : def;
}

void ll_budgets_of(const ll_decode_opts *o, ll_budgets *b)
{
    static const ll_decode_opts none;
    if (o == NULL)
        o = &none;
    b->schema_bytes = or_default(o->max_schema_bytes, LL_CODEC_DEF_SCHEMA_BYTES);
    b->expansions = or_default(o->max_schema_expansions, LL_CODEC_DEF_EXPANSIONS);
    b->values = or_default(o->max_values, LL_CODEC_DEF_VALUES);
    b->default_values = or_default(o->max_default_values, LL_CODEC_DEF_DEFAULT_VALUES);
    b->cache_entries = or_default(o->writer_cache_entries, LL_CODEC_DEF_CACHE_ENTRIES);
    if (b->cache_entries > LL_CODEC_WRITER_CACHE_MAX)
        b->cache_entries = LL_CODEC_WRITER_CACHE_MAX;
    b->cache_bytes = or_default(o->writer_cache_bytes, LL_CODEC_DEF_CACHE_BYTES);
}

int ll_counter_take(ll_counter *c, size_t n, char *err, size_t errlen)
{
    if (n > c->left) {
        c->left = 0;
        ll_codec_err(err, errlen, "%s over %zu (budget %s)", c->what, c->budget, c->key);
        return -1;
    }
    c->left -= n;
    return 0;
}

const char *ll_logical_name(ll_logical l)
{
    switch (l) {
    case LLL_NONE:
        return "";
    case LLL_DECIMAL:
        return "decimal";
    case LLL_DATE:
        return "date";
    case LLL_TS_MILLIS:
        return "timestamp-millis";
    case LLL_TS_MICROS:
        return "timestamp-micros";
    case LLL_LTS_MILLIS:
        return "local-timestamp-millis";
    case LLL_LTS_MICROS:
        return "local-timestamp-micros";
    case LLL_UUID:
        return "uuid";
    }
    return "?";
}
