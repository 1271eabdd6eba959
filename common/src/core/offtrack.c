/*
 * offtrack.c - done offsets of one Kafka partition above its committed offset (offtrack.h).
 */
#include "ll/offtrack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ll_offtrack_init(ll_offtrack *t, int64_t base)
{
    memset(t, 0, sizeof *t);
    ll_offtrack_reset(t, base);
}

void ll_offtrack_reset(ll_offtrack *t, int64_t base)
{
    t->n = 0;
    t->base = base < 0 ? 0 : base;
    t->next_seen = t->base;
}

void ll_offtrack_free(ll_offtrack *t)
{
    free(t->lo);
    free(t->hi);
    ll_offtrack_init(t, 0);
}

/* Room for one more range. 0, or -1 at LL_OFFTRACK_RANGES_LIMIT. */
static int reserve(ll_offtrack *t)
{
    if (t->n < t->cap)
        return 0;
    if (t->cap >= LL_OFFTRACK_RANGES_LIMIT)
        return -1;
    size_t cap = t->cap ? t->cap * 2 : 16;
    int64_t *lo = realloc(t->lo, cap * sizeof *lo);
    if (!lo)
        abort();
    t->lo = lo;
    int64_t *hi = realloc(t->hi, cap * sizeof *hi);
    if (!hi)
        abort();
    t->hi = hi;
    t->cap = cap;
    return 0;
}

/* Folds the first ranges into base while they start right at base. */
static void advance(ll_offtrack *t)
{
    size_t k = 0;
    while (k < t->n && t->lo[k] <= t->base) {
        if (t->hi[k] + 1 > t->base)
            t->base = t->hi[k] + 1;
        k++;
    }
    if (k > 0) {
        memmove(t->lo, t->lo + k, (t->n - k) * sizeof t->lo[0]);
        memmove(t->hi, t->hi + k, (t->n - k) * sizeof t->hi[0]);
        t->n -= k;
    }
    if (t->next_seen < t->base)
        t->next_seen = t->base;
}

/* First range whose end reaches lo - 1 (binary search: the ranges are sorted). */
static size_t first_reaching(const ll_offtrack *t, int64_t lo)
{
    size_t a = 0, b = t->n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (t->hi[mid] + 1 < lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

/* Adds [lo, hi] (lo > base) to the sorted ranges, merging neighbours. 0, or -1 at the limit. */
static int add_range(ll_offtrack *t, int64_t lo, int64_t hi)
{
    size_t i = first_reaching(t, lo);
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
    if (reserve(t) != 0)
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
    size_t i = first_reaching(t, offset + 1); /* the first range with hi >= offset */
    return i < t->n && t->lo[i] <= offset && offset <= t->hi[i];
}

size_t ll_offtrack_ranges(const ll_offtrack *t)
{
    return t->n;
}

/* Decimal digits of v ≥ 0. */
static size_t digits(int64_t v)
{
    size_t d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* Length of range i in the text, with its leading comma when it is not the first. */
static size_t range_len(const ll_offtrack *t, size_t i, size_t first)
{
    int64_t a = t->lo[i] - t->base, b = t->hi[i] - t->base;
    return (i > first ? 1 : 0) + digits(a) + (a == b ? 0 : 1 + digits(b));
}

/* Appends ranges [from, to) as text at buf + at. Returns the new length. */
static size_t put_ranges(const ll_offtrack *t, size_t from, size_t to, char *buf, size_t at, size_t buflen)
{
    for (size_t i = from; i < to; i++) {
        long long a = (long long)(t->lo[i] - t->base), b = (long long)(t->hi[i] - t->base);
        int w = a == b ? snprintf(buf + at, buflen - at, "%s%lld", i > from ? "," : "", a)
                       : snprintf(buf + at, buflen - at, "%s%lld-%lld", i > from ? "," : "", a, b);
        at += (size_t)w; /* the caller sized buf for it */
    }
    return at;
}

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Length of the bitmap form with ranges [0, split) as text (0 when it cannot be smaller than
 * limit bytes). */
static size_t ll2_len(const ll_offtrack *t, size_t split, size_t text_len, size_t limit)
{
    int64_t bits = t->hi[t->n - 1] - t->lo[split] + 1;
    if (bits <= 0 || bits / 6 > (int64_t)limit)
        return 0;
    size_t bytes = (size_t)(bits + 7) / 8, chars = (bytes * 4 + 2) / 3;
    return 4 + text_len + 1 + digits(t->lo[split] - t->base) + 1 + chars;
}

/* Writes the bitmap form with ranges [0, split) as text; buf holds len + 1 bytes. */
static int put_ll2(const ll_offtrack *t, size_t split, char *buf, size_t buflen)
{
    size_t at = (size_t)snprintf(buf, buflen, "ll2:");
    at = put_ranges(t, 0, split, buf, at, buflen);
    int64_t from = t->lo[split];
    at += (size_t)snprintf(buf + at, buflen - at, ";%lld:", (long long)(from - t->base));
    size_t bytes = (size_t)(t->hi[t->n - 1] - from + 1 + 7) / 8;
    unsigned char *bm = calloc(bytes + 2, 1);
    if (!bm)
        abort();
    for (size_t i = split; i < t->n; i++)
        for (int64_t o = t->lo[i]; o <= t->hi[i]; o++)
            bm[(o - from) / 8] |= (unsigned char)(1u << ((o - from) % 8));
    for (size_t k = 0; k < bytes; k += 3) {
        unsigned v = (unsigned)bm[k] << 16 | (unsigned)bm[k + 1] << 8 | bm[k + 2];
        size_t chars = bytes - k >= 3 ? 4 : bytes - k + 1;
        for (size_t c = 0; c < chars; c++)
            buf[at++] = B64[(v >> (18 - 6 * c)) & 63];
    }
    buf[at] = '\0';
    free(bm);
    return (int)at;
}

int ll_offtrack_metadata(const ll_offtrack *t, char *buf, size_t buflen, bool *lossy)
{
    if (lossy)
        *lossy = false;
    if (buflen < 8)
        return -1;
    buf[0] = '\0';
    if (t->n == 0)
        return 0;
    /* the ll1 length, and the shortest ll2 (ranges before the split as text, a bitmap after) */
    size_t text = 0, best = 0, best_split = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t l2 = ll2_len(t, i, text, buflen);
        if (l2 && (!best || l2 < best)) {
            best = l2;
            best_split = i;
        }
        text += range_len(t, i, 0);
    }
    size_t l1 = 4 + text;
    if (l1 < buflen && (!best || l1 <= best)) {
        size_t at = (size_t)snprintf(buf, buflen, "ll1:");
        at = put_ranges(t, 0, t->n, buf, at, buflen);
        return (int)at;
    }
    if (best && best < buflen)
        return put_ll2(t, best_split, buf, buflen);
    /* neither fits: the longest ll1 prefix that does */
    if (lossy)
        *lossy = true;
    size_t k = 0;
    for (size_t at = 4; k < t->n && at + range_len(t, k, 0) < buflen; k++)
        at += range_len(t, k, 0);
    if (k == 0)
        return 0;
    size_t at = (size_t)snprintf(buf, buflen, "ll1:");
    return (int)put_ranges(t, 0, k, buf, at, buflen);
}

/* Parses one decimal number ≥ 1 (at most 18 digits) at *p, advancing it. 0, or -1. */
static int parse_rel(const char **p, int64_t *out)
{
    const char *s = *p;
    if (*s < '1' || *s > '9')
        return -1;
    int64_t v = 0;
    int digits_n = 0;
    while (*s >= '0' && *s <= '9') {
        if (++digits_n > 18)
            return -1;
        v = v * 10 + (*s++ - '0');
    }
    *out = v;
    *p = s;
    return 0;
}

/* Parses ranges "a[-b],..." up to the first character that is not part of one; sorted, disjoint,
 * not touching. *last is the end of the last (0 for none). 0, or -1. */
static int parse_ranges(ll_offtrack *t, const char **p, int64_t *last)
{
    *last = 0;
    if (**p < '1' || **p > '9')
        return 0; /* none */
    for (;;) {
        int64_t a, b;
        if (parse_rel(p, &a) != 0)
            return -1;
        b = a;
        if (**p == '-') {
            (*p)++;
            if (parse_rel(p, &b) != 0 || b < a)
                return -1;
        }
        if (*last != 0 && a <= *last + 1)
            return -1;
        if (add_range(t, t->base + a, t->base + b) != 0)
            return -1;
        *last = b;
        if (**p != ',')
            return 0;
        (*p)++;
    }
}

/* Value of a base64url character, or -1. */
static int b64_value(char c)
{
    const char *at = c ? strchr(B64, c) : NULL;
    return at ? (int)(at - B64) : -1;
}

/* Parses the bitmap of ll2 from relative offset from. 0, or -1. */
static int parse_bitmap(ll_offtrack *t, const char *p, int64_t from)
{
    size_t len = strlen(p);
    if (len == 0 || len % 4 == 1 || len > LL_OFFTRACK_METADATA_MAX)
        return -1;
    int64_t run_lo = -1, k = 0;
    for (size_t c = 0; c < len; c += 4) {
        unsigned v = 0;
        size_t got = len - c >= 4 ? 4 : len - c;
        for (size_t i = 0; i < 4; i++) {
            int x = i < got ? b64_value(p[c + i]) : 0;
            if (x < 0)
                return -1;
            v = v << 6 | (unsigned)x;
        }
        size_t bytes = got == 4 ? 3 : got - 1;
        for (size_t i = 0; i < bytes; i++) {
            unsigned byte = (v >> (16 - 8 * i)) & 255;
            for (int bit = 0; bit < 8; bit++, k++) {
                bool done = (byte >> bit) & 1;
                if (done && run_lo < 0)
                    run_lo = k;
                if (!done && run_lo >= 0) {
                    if (add_range(t, t->base + from + run_lo, t->base + from + k - 1) != 0)
                        return -1;
                    run_lo = -1;
                }
            }
        }
    }
    if (run_lo >= 0 && add_range(t, t->base + from + run_lo, t->base + from + k - 1) != 0)
        return -1;
    return 0;
}

int ll_offtrack_load(ll_offtrack *t, int64_t base, const char *metadata)
{
    ll_offtrack_reset(t, base);
    if (!metadata || !*metadata)
        return 0;
    const char *p = metadata + 4;
    int64_t last = 0;
    if (strncmp(metadata, "ll1:", 4) == 0) {
        if (*p && parse_ranges(t, &p, &last) == 0 && last > 0 && *p == '\0')
            goto loaded;
    } else if (strncmp(metadata, "ll2:", 4) == 0) {
        int64_t from;
        if (parse_ranges(t, &p, &last) == 0 && *p++ == ';' && parse_rel(&p, &from) == 0 &&
            (last == 0 || from > last + 1) && *p++ == ':' && parse_bitmap(t, p, from) == 0)
            goto loaded;
    }
    ll_offtrack_reset(t, base);
    return -1;
loaded:
    t->next_seen = t->base; /* the partition is read again from base */
    return 0;
}

void ll_offtrack_copy(ll_offtrack *dst, const ll_offtrack *src)
{
    ll_offtrack_reset(dst, src->base);
    dst->next_seen = src->next_seen;
    for (size_t i = 0; i < src->n; i++) {
        if (reserve(dst) != 0)
            abort(); /* src holds as many: the same limit */
        dst->lo[dst->n] = src->lo[i];
        dst->hi[dst->n] = src->hi[i];
        dst->n++;
    }
}

/* The done offsets of t at or above from, as sorted ranges [lo, hi] through the callback's
 * index: the range below base first (when from < base), then t's ranges. */
static size_t ranges_from(const ll_offtrack *t, int64_t from, size_t k, int64_t *lo, int64_t *hi)
{
    if (from < t->base) {
        if (k == 0) {
            *lo = from;
            *hi = t->base - 1;
            return 1;
        }
        k--;
    }
    if (k >= t->n)
        return 0;
    *lo = t->lo[k];
    *hi = t->hi[k];
    return 1;
}

/* Offsets t marks done at or above from. */
static int64_t count_from(const ll_offtrack *t, int64_t from)
{
    int64_t lo, hi, c = 0;
    for (size_t k = 0; ranges_from(t, from, k, &lo, &hi); k++)
        c += hi - lo + 1;
    return c;
}

/* Marks [lo, hi] done in t. 0, or -1 at the limit. */
static int mark_range(ll_offtrack *t, int64_t lo, int64_t hi)
{
    if (hi < t->base)
        return 0;
    if (lo <= t->base) {
        t->base = hi + 1;
        advance(t);
        return 0;
    }
    if (add_range(t, lo, hi) != 0)
        return -1;
    advance(t);
    return 0;
}

int ll_offtrack_union(ll_offtrack *t, const ll_offtrack *other)
{
    int64_t lo, hi;
    int64_t from = t->base < other->base ? t->base : other->base;
    for (size_t k = 0; ranges_from(other, from, k, &lo, &hi); k++)
        if (mark_range(t, lo, hi) != 0)
            return -1;
    return 0;
}

int ll_offtrack_intersect(ll_offtrack *t, const ll_offtrack *other, int64_t *t_only, int64_t *other_only)
{
    int64_t from = t->base < other->base ? t->base : other->base;
    int64_t ct = count_from(t, from), co = count_from(other, from), both = 0;
    ll_offtrack r;
    ll_offtrack_init(&r, from);
    size_t i = 0, j = 0;
    int64_t alo, ahi, blo, bhi;
    int rc = 0;
    while (rc == 0 && ranges_from(t, from, i, &alo, &ahi) && ranges_from(other, from, j, &blo, &bhi)) {
        int64_t lo = alo > blo ? alo : blo, hi = ahi < bhi ? ahi : bhi;
        if (lo <= hi) {
            both += hi - lo + 1;
            rc = add_range(&r, lo, hi); /* lo > from: the lower base is done in neither */
        }
        if (ahi < bhi)
            i++;
        else
            j++;
    }
    if (rc != 0)
        ll_offtrack_reset(&r, from);
    advance(&r);
    r.next_seen = r.base;
    ll_offtrack_copy(t, &r);
    ll_offtrack_free(&r);
    if (t_only)
        *t_only = ct - both;
    if (other_only)
        *other_only = co - both;
    return rc;
}
