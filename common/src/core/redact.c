/*
 * redact.c - passwords out of conninfo strings and connection errors (redact.h).
 *
 * Two passes mark the bytes of a secret in a mask over the text, then the text is copied with
 * each run of marked bytes written as LL_REDACTED:
 *   URI pass:     postgres[ql]://USER:SECRET@... ; the user info ends at the last '@' before
 *                 '/', '?', '#', a quote or the end (more, never less, when unsure)
 *   keyword pass: KEY = VALUE where KEY (percent-decoded, any case) ends in "password"; VALUE
 *                 as libpq reads it: '...' with \-escapes, else up to white space
 * Every occurrence anywhere in the text is found (a conninfo nested in a dbname value, a URI
 * quoted by an error message).
 */
#include "ll/redact.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* A %XX escape at s[i] (within n). */
static bool pct_at(const char *s, size_t n, size_t i)
{
    return s[i] == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0;
}

/* URI pass: the password of the user info of every postgres:// or postgresql:// URI. */
static void mark_uris(const char *s, size_t n, unsigned char *mask)
{
    static const char *const schemes[] = {"postgresql://", "postgres://"};
    for (size_t i = 0; i < n; i++) {
        size_t a = 0;
        for (size_t k = 0; k < 2 && !a; k++) {
            size_t len = strlen(schemes[k]);
            if (n - i >= len && strncasecmp(s + i, schemes[k], len) == 0)
                a = i + len;
        }
        if (!a)
            continue;
        size_t e = a;
        while (e < n && !strchr("/?#'\"", s[e]))
            e++;
        size_t at = e;
        while (at > a && s[at - 1] != '@')
            at--;
        if (at == a) /* no '@': no user info */
            continue;
        at--; /* the last '@' */
        const char *colon = memchr(s + a, ':', at - a);
        if (colon)
            memset(mask + (colon - s) + 1, 1, at - (size_t)(colon - s) - 1);
    }
}

/* Marks the value starting at s[k] as libpq reads it; returns the index after it. */
static size_t mark_value(const char *s, size_t n, size_t k, unsigned char *mask)
{
    bool quoted = k < n && s[k] == '\'';
    if (quoted)
        k++;
    while (k < n && (quoted ? s[k] != '\'' : !isspace((unsigned char)s[k]))) {
        size_t step = s[k] == '\\' && k + 1 < n ? 2 : 1;
        memset(mask + k, 1, step);
        k += step;
    }
    return k;
}

/* Whether the key s[b..e) percent-decoded ends in "password" (any case). */
static bool is_password_key(const char *s, size_t b, size_t e)
{
    char dec[64];
    size_t m = 0;
    for (size_t i = b; i < e; m++) {
        if (s[i] == '%') {
            dec[m % sizeof dec] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 3;
        } else {
            dec[m % sizeof dec] = s[i++];
        }
    }
    /* only the last 8 decoded characters matter: a ring of 64 holds them */
    static const char want[] = "password";
    size_t wl = sizeof want - 1;
    if (m < wl)
        return false;
    for (size_t j = 0; j < wl; j++)
        if (tolower((unsigned char)dec[(m - wl + j) % sizeof dec]) != want[j])
            return false;
    return true;
}

/* Keyword pass: the value of every key ending in "password". */
static void mark_keywords(const char *s, size_t n, unsigned char *mask)
{
    size_t i = 0;
    while (i < n) {
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && !pct_at(s, n, i)) {
            i++;
            continue;
        }
        size_t b = i;
        while (i < n && (isalnum((unsigned char)s[i]) || s[i] == '_' || pct_at(s, n, i)))
            i += s[i] == '%' ? 3 : 1;
        size_t k = i;
        while (k < n && isspace((unsigned char)s[k]))
            k++;
        if (k >= n || s[k] != '=' || !is_password_key(s, b, i))
            continue;
        for (k++; k < n && isspace((unsigned char)s[k]);)
            k++;
        i = mark_value(s, n, k, mask);
    }
}

/* Writes s[0..n) into out with each run of marked bytes as LL_REDACTED. */
static char *emit(const char *s, size_t n, const unsigned char *mask, char *out, size_t outlen)
{
    size_t w = 0;
    for (size_t i = 0; i < n && w + 1 < outlen;) {
        if (!mask[i]) {
            out[w++] = s[i++];
            continue;
        }
        for (const char *r = LL_REDACTED; *r && w + 1 < outlen;)
            out[w++] = *r++;
        while (i < n && mask[i])
            i++;
    }
    out[w] = '\0';
    return out;
}

static char *redacted_whole(char *out, size_t outlen)
{
    size_t n = strlen(LL_REDACTED) < outlen ? strlen(LL_REDACTED) : outlen - 1;
    memcpy(out, LL_REDACTED, n);
    out[n] = '\0';
    return out;
}

/* The mask of the two passes over s (length n); NULL when out of memory. */
static unsigned char *secret_mask(const char *s, size_t n)
{
    unsigned char *mask = calloc(n + 1, 1);
    if (mask) {
        mark_uris(s, n, mask);
        mark_keywords(s, n, mask);
    }
    return mask;
}

char *ll_redact_conninfo(const char *conninfo, char *out, size_t outlen)
{
    const char *s = conninfo ? conninfo : "";
    size_t n = strlen(s);
    unsigned char *mask = secret_mask(s, n);
    if (!mask)
        return redacted_whole(out, outlen);
    emit(s, n, mask, out, outlen);
    free(mask);
    return out;
}

/* Marks every occurrence of needle[0..len) in s[0..n). */
static void mark_occurrences(const char *s, size_t n, const char *needle, size_t len, unsigned char *mask)
{
    if (len == 0)
        return;
    for (size_t i = 0; i + len <= n; i++)
        if (memcmp(s + i, needle, len) == 0)
            memset(mask + i, 1, len);
}

/* Marks in text every form of the secret sec[0..len): as written, unescaped, percent-decoded. */
static void mark_secret_forms(const char *text, size_t n, const char *sec, size_t len, unsigned char *mask,
                              char *buf)
{
    mark_occurrences(text, n, sec, len, mask);
    size_t m = 0;
    for (size_t i = 0; i < len; i++) /* \x -> x */
        buf[m++] = sec[i] == '\\' && i + 1 < len ? sec[++i] : sec[i];
    mark_occurrences(text, n, buf, m, mask);
    m = 0;
    for (size_t i = 0; i < len; i++) { /* %XX -> byte */
        if (sec[i] == '%' && i + 2 < len && hexval(sec[i + 1]) >= 0 && hexval(sec[i + 2]) >= 0) {
            buf[m++] = (char)(hexval(sec[i + 1]) * 16 + hexval(sec[i + 2]));
            i += 2;
        } else {
            buf[m++] = sec[i];
        }
    }
    mark_occurrences(text, n, buf, m, mask);
}

char *ll_redact_secrets(const char *text, const char *conninfo, char *out, size_t outlen)
{
    const char *t = text ? text : "", *c = conninfo ? conninfo : "";
    size_t n = strlen(t), cn = strlen(c);
    unsigned char *tmask = secret_mask(t, n), *cmask = secret_mask(c, cn);
    char *buf = malloc(cn + 1);
    if (!tmask || !cmask || !buf) {
        free(tmask);
        free(cmask);
        free(buf);
        return redacted_whole(out, outlen);
    }
    for (size_t i = 0; i < cn;) {
        if (!cmask[i]) {
            i++;
            continue;
        }
        size_t b = i;
        while (i < cn && cmask[i])
            i++;
        mark_secret_forms(t, n, c + b, i - b, tmask, buf);
    }
    emit(t, n, tmask, out, outlen);
    free(tmask);
    free(cmask);
    free(buf);
    return out;
}
