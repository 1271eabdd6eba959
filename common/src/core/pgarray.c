/* pgarray.c - PostgreSQL array literals for set-based statements (pgarray.h). */
#include "ll/pgarray.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reserve(ll_pgarray *a, size_t more)
{
    if (a->len + more + 2 <= a->cap) /* room for the closing brace and NUL */
        return;
    size_t cap = a->cap ? a->cap : 64;
    while (cap < a->len + more + 2)
        cap *= 2;
    char *b = realloc(a->buf, cap);
    if (!b)
        abort();
    a->buf = b;
    a->cap = cap;
}

/* The separator (or the opening brace) before a new element. */
static void next(ll_pgarray *a)
{
    reserve(a, 1);
    a->buf[a->len++] = a->n++ ? ',' : '{';
}

void ll_pgarray_add(ll_pgarray *a, const char *s)
{
    next(a);
    if (!s) {
        reserve(a, 4);
        memcpy(a->buf + a->len, "NULL", 4);
        a->len += 4;
        return;
    }
    size_t n = strlen(s);
    reserve(a, 2 * n + 2); /* every byte escaped, and the quotes */
    a->buf[a->len++] = '"';
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\')
            a->buf[a->len++] = '\\';
        a->buf[a->len++] = s[i];
    }
    a->buf[a->len++] = '"';
}

void ll_pgarray_add_ll(ll_pgarray *a, long long v)
{
    char t[24];
    snprintf(t, sizeof t, "%lld", v);
    ll_pgarray_add(a, t);
}

const char *ll_pgarray_text(ll_pgarray *a)
{
    if (a->n == 0) { /* nothing added: "{}" without opening the array being built */
        reserve(a, 2);
        memcpy(a->buf, "{}", 3);
        return a->buf;
    }
    a->buf[a->len] = '}';
    a->buf[a->len + 1] = '\0';
    return a->buf;
}

void ll_pgarray_free(ll_pgarray *a)
{
    free(a->buf);
    *a = (ll_pgarray){0};
}
