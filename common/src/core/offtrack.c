/*
 * offtrack.c - done offsets of one Kafka partition above its committed offset (offtrack.h).
 */
#include "ll/offtrack.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ll_offtrack_init(ll_offtrack *t, int64_t base)
{
    memset(t, 0, sizeof *t);
    t->base = base < 0 ? 0 : base;
    t->next_seen = t->base;
}

/* Folds the first range into base while it starts right at base. */
static void advance(ll_offtrack *t)
{
    while (t->n > 0 && t->lo[0] <= t->base) {
        if (t->hi[0] + 1 > t->base)
            t->base = t->hi[0] + 1;
        memmove(t->lo, t->lo + 1, (t->n - 1) * sizeof t->lo[0]);
        memmove(t->hi, t->hi + 1, (t->n - 1) * sizeof t->hi[0]);
        t->n--;
    }
    if (t->next_seen < t->base)
        t->next_seen = t->base;
}

/* Adds [lo, hi] (lo > base) to the sorted ranges, merging neighbours. 0, or -1 when full. */
static int add_range(ll_offtrack *t, int64_t lo, int64_t hi)
{
    size_t i = 0;
    while (i < t->n && t->hi[i] + 1 < lo)
        i++;
    size_t j = i; /* ranges i..j-1 overlap or touch [lo, hi] */
    while (j < t->n && t->lo[j] <= hi + 1)
        j++;
    if (j > i) {
        int64_t nlo = t->lo[i] < lo ? t->lo[i] : lo, nhi = t->hi[j - 1] > hi ? t->hi[j - 1] : hi;
        t->lo[i] = nlo;
        t->hi[i] = nhi;
        memmove(t->lo + i + 1, t->lo + j, (t->n - j) * sizeof t->lo[0]);
        memmove(t->hi + i + 1, t->hi + j, (t->n - j) * sizeof t->hi[0]);
        t->n -= j - i - 1;
        return 0;
    }
    if (t->n >= LL_OFFTRACK_MAX_RANGES)
        return -1;
    memmove(t->lo + i + 1, t->lo + i, (t->n - i) * sizeof t->lo[0]);
    memmove(t->hi + i + 1, t->hi + i, (t->n - i) * sizeof t->hi[0]);
    t->lo[i] = lo;
    t->hi[i] = hi;
    t->n++;
    return 0;
}

int ll_offtrack_done(ll_offtrack *t, int64_t offset)
{
    if (ll_offtrack_is_done(t, offset))
        return 0;
    if (offset == t->base) {
        t->base++;
        advance(t);
        return 0;
    }
    if (add_range(t, offset, offset) != 0)
        return -1;
    advance(t);
    return 0;
}

int ll_offtrack_seen(ll_offtrack *t, int64_t offset)
{
    if (offset < t->next_seen)
        return 0;
    if (offset > t->next_seen) {
        /* next_seen .. offset-1 were never delivered: markers or compacted records */
        int64_t lo = t->next_seen, hi = offset - 1;
        if (lo == t->base) {
            t->base = hi + 1;
            advance(t);
        } else if (add_range(t, lo, hi) != 0) {
            return -1;
        } else {
            advance(t);
        }
    }
    t->next_seen = offset + 1;
    return 0;
}

bool ll_offtrack_is_done(const ll_offtrack *t, int64_t offset)
{
    if (offset < t->base)
        return true;
    for (size_t i = 0; i < t->n && t->lo[i] <= offset; i++)
        if (offset <= t->hi[i])
            return true;
    return false;
}

size_t ll_offtrack_ranges(const ll_offtrack *t)
{
    return t->n;
}

int ll_offtrack_metadata(const ll_offtrack *t, char *buf, size_t buflen)
{
    if (buflen == 0)
        return -1;
    buf[0] = '\0';
    if (t->n == 0)
        return 0;
    size_t at = 0;
    int w = snprintf(buf, buflen, "ll1:");
    at = (size_t)w;
    for (size_t i = 0; i < t->n; i++) {
        long long a = (long long)(t->lo[i] - t->base), b = (long long)(t->hi[i] - t->base);
        w = a == b ? snprintf(buf + at, buflen - at, "%s%lld", i ? "," : "", a)
                   : snprintf(buf + at, buflen - at, "%s%lld-%lld", i ? "," : "", a, b);
        if (w < 0 || (size_t)w >= buflen - at) {
            buf[0] = '\0';
            return -1;
        }
        at += (size_t)w;
    }
    return (int)at;
}

/* Parses one decimal number ≥ 1 (at most 18 digits) at *p, advancing it. 0, or -1. */
static int parse_rel(const char **p, int64_t *out)
{
    const char *s = *p;
    if (*s < '1' || *s > '9')
        return -1;
    int64_t v = 0;
    int digits = 0;
    while (*s >= '0' && *s <= '9') {
        if (++digits > 18)
            return -1;
        v = v * 10 + (*s++ - '0');
    }
    *out = v;
    *p = s;
    return 0;
}

int ll_offtrack_load(ll_offtrack *t, int64_t base, const char *metadata)
{
    ll_offtrack_init(t, base);
    if (!metadata || !*metadata)
        return 0;
    if (strncmp(metadata, "ll1:", 4) != 0)
        return -1;
    const char *p = metadata + 4;
    int64_t last = 0;
    for (;;) {
        int64_t a, b;
        if (parse_rel(&p, &a) != 0)
            break;
        b = a;
        if (*p == '-') {
            p++;
            if (parse_rel(&p, &b) != 0 || b < a)
                break;
        }
        if (a <= last + 1 && last != 0) /* ranges are sorted, disjoint and not adjacent */
            break;
        if (add_range(t, t->base + a, t->base + b) != 0)
            break;
        last = b;
        if (*p == '\0') {
            t->next_seen = t->base; /* the partition is read again from base */
            return 0;
        }
        if (*p++ != ',')
            break;
    }
    ll_offtrack_init(t, base);
    return -1;
}
