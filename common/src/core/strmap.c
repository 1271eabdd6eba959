/* strmap.c - a fixed-capacity string -> index map for the lookups of one batch (strmap.h). */
#include "ll/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

void ll_strmap_init(ll_strmap *m, size_t expected)
{
    size_t cap = 8;
    if (expected < 1)
        expected = 1;
    while (cap < 2 * expected) /* at most half full: short probes */
        cap *= 2;
    m->keys = calloc(cap, sizeof *m->keys);
    m->vals = calloc(cap, sizeof *m->vals);
    if (!m->keys || !m->vals)
        abort();
    m->cap = cap;
    m->n = 0;
    m->max = expected;
}

/* The slot of key, or the empty slot where it would go. */
static size_t slot(const ll_strmap *m, const char *key)
{
    size_t i = (size_t)fnv1a(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

const size_t *ll_strmap_get(const ll_strmap *m, const char *key)
{
    if (!m->cap || !key)
        return NULL;
    size_t i = slot(m, key);
    return m->keys[i] ? &m->vals[i] : NULL;
}

bool ll_strmap_put(ll_strmap *m, const char *key, size_t val)
{
    if (!m->cap || !key)
        return false;
    size_t i = slot(m, key);
    if (!m->keys[i]) {
        if (m->n >= m->max)
            return false;
        m->keys[i] = key;
        m->n++;
    }
    m->vals[i] = val;
    return true;
}

void ll_strmap_free(ll_strmap *m)
{
    free(m->keys);
    free(m->vals);
    *m = (ll_strmap){0};
}
