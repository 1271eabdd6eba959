/*
 * strlist.c - a growable list of malloc'd strings, the carrier of violations and reasons.
 *
 * The manifest invariants (docs/contract.md §5.2 step 4) produce one string per violation, which the
 * caller joins with "; " into error_message and also returns as details.violations; the
 * validation gates (§3.5) produce "FAIL <metricName>" reasons the same way. The list owns its
 * strings; ll_strlist_clear frees them. A zero-initialised ll_strlist is an empty list.
 */
#include "ll/rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for one more item. Returns 0, or -1 on allocation failure (list unchanged). */
static int strlist_reserve(ll_strlist *l)
{
    if (l->n < l->cap)
        return 0;
    size_t cap = l->cap == 0 ? 8 : l->cap * 2;
    if (cap > SIZE_MAX / sizeof *l->items)
        return -1;
    char **items = realloc(l->items, cap * sizeof *items);
    if (items == NULL)
        return -1;
    l->items = items;
    l->cap = cap;
    return 0;
}

/* Appends printf(fmt, ...) as a new malloc'd item. Returns 0, or -1 on NULL list/fmt, a format
 * error or allocation failure (the list is then unchanged). */
int ll_strlist_addf(ll_strlist *l, const char *fmt, ...)
{
    if (l == NULL || fmt == NULL || strlist_reserve(l) != 0)
        return -1;
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = len < 0 ? NULL : malloc((size_t)len + 1);
    if (s != NULL)
        vsnprintf(s, (size_t)len + 1, fmt, ap2);
    va_end(ap2);
    if (s == NULL)
        return -1;
    l->items[l->n++] = s;
    return 0;
}

/* Joins the items with sep (NULL = "") into a new malloc'd string the caller frees; "" for an
 * empty or NULL list. Returns NULL only on allocation failure. */
char *ll_strlist_join(const ll_strlist *l, const char *sep)
{
    size_t n = l != NULL ? l->n : 0;
    size_t seplen = sep != NULL ? strlen(sep) : 0;
    size_t total = 1;
    for (size_t i = 0; i < n; i++)
        total += strlen(l->items[i]) + (i > 0 ? seplen : 0);
    char *out = malloc(total);
    if (out == NULL)
        return NULL;
    char *p = out;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && seplen > 0) {
            memcpy(p, sep, seplen);
            p += seplen;
        }
        size_t len = strlen(l->items[i]);
        memcpy(p, l->items[i], len);
        p += len;
    }
    *p = '\0';
    return out;
}

/* Frees every item and the array; the list is an empty, reusable list afterwards. NULL is a no-op. */
void ll_strlist_clear(ll_strlist *l)
{
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
    l->cap = 0;
}
