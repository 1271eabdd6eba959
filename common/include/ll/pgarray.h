/*
 * pgarray.h - a PostgreSQL array literal ('{"a","b",NULL}') built from values, to bind as one
 * text parameter of a set-based statement (unnest($1::text[]), = ANY($1::uuid[])).
 *
 * Every element is double-quoted with '"' and '\' escaped, so any text (commas, braces, quotes,
 * the word NULL) arrives as itself; a NULL element is SQL NULL. The literal goes to the server as
 * a bound parameter, never into SQL text. Text without NUL bytes only (the codec refuses NUL).
 */
#ifndef LL_PGARRAY_H
#define LL_PGARRAY_H

#include <stddef.h>
#include <stdint.h>

/* An array literal being built. Zero-initialise; free with ll_pgarray_free. */
typedef struct ll_pgarray {
    char *buf; /* "{..." while building, owned */
    size_t len, cap;
    size_t n; /* elements added */
} ll_pgarray;

/* Appends a text element (NULL = SQL NULL). Aborts on allocation failure. */
void ll_pgarray_add(ll_pgarray *a, const char *s);
/* Appends an integer element. */
void ll_pgarray_add_ll(ll_pgarray *a, long long v);
/* The literal, "{}" when empty; valid until the next add or free (owned by a). */
const char *ll_pgarray_text(ll_pgarray *a);
/* Frees the buffer and empties a. */
void ll_pgarray_free(ll_pgarray *a);

#endif
