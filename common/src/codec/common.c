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

static const char *const framing_names[] = {"bare", "confluent", "container", "block"};

int ll_framing_parse(const char *name, ll_framing *out)
{
    if (name == NULL || out == NULL)
        return -1;
    for (size_t i = 0; i < sizeof framing_names / sizeof framing_names[0]; i++) {
        if (strcmp(name, framing_names[i]) == 0) {
            *out = (ll_framing)i;
            return 0;
        }
    }
    return -1;
}

const char *ll_framing_name(ll_framing f)
{
    if ((unsigned)f < sizeof framing_names / sizeof framing_names[0])
        return framing_names[f];
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
