/*
 * strmap.h - a fixed-capacity hash map from borrowed NUL-terminated strings to indexes, for the
 * lookups of one batch (which message, row or run a key names) in O(1) instead of a scan.
 *
 * Open addressing with linear probing (FNV-1a); the capacity is fixed at init for the expected
 * number of keys, so a batch's work stays linear in its length.
 */
#ifndef LL_STRMAP_H
#define LL_STRMAP_H

#include <stdbool.h>
#include <stddef.h>

/* A map. Keys are borrowed: they must outlive it. Zero-initialise, then ll_strmap_init. */
typedef struct ll_strmap {
    const char **keys; /* NULL = empty slot */
    size_t *vals;
    size_t cap, n, max; /* slots (a power of two), keys held, keys allowed */
} ll_strmap;

/* Makes room for up to `expected` keys (at least 1). Aborts on allocation failure. */
void ll_strmap_init(ll_strmap *m, size_t expected);
/* The value of key, or NULL when absent. */
const size_t *ll_strmap_get(const ll_strmap *m, const char *key);
/* Sets key to val (replacing an existing value). False when the map already holds `expected`
 * keys and key is new: nothing is stored. */
bool ll_strmap_put(ll_strmap *m, const char *key, size_t val);
/* Frees the tables (not the keys) and empties m. */
void ll_strmap_free(ll_strmap *m);

#endif
