/*
 * schema.c - schema loading (schema_int.h maps the schema files): our own checking parse
 * (mirroring avro-c 1.11.1's name rules) and the budgets; references, the cache of embedded
 * writer schemas, accessors.
 *
 * Why not avro-c's parser: it trusts its schema JSON (a negative fixed size corrupts its heap, a
 * duplicate name or a failed field leaks), it drops defaults, and an embedded writer schema is
 * hostile input. Our parse refuses all of that and keeps every field's default for schema
 * evolution. The services do not link avro-c (about 1.3 MiB of resident libraries: avro-c,
 * snappy, libstdc++); that avro-c reads every schema we accept as the same structure is checked
 * by test_codecavro_agree and the fuzz_schema target (ll/codecavro.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema_int.h"

static void schema_destroy(ll_schema *s)
{
    for (size_t i = 0; i < s->cache_n; i++)
        ll_schema_unref(s->cache[i].s);
    pthread_mutex_destroy(&s->lock);
    for (size_t i = 0; i < s->nnodes; i++)
        ll_sch_free_node(s->nodes[i]);
    free(s->nodes);
    json_decref(s->json);
    free(s->text);
    free(s->orig);
    free(s);
}

ll_schema *ll_schema_ref(ll_schema *s)
{
    if (s != NULL)
        __atomic_add_fetch(&s->refs, 1, __ATOMIC_RELAXED);
    return s;
}

void ll_schema_unref(ll_schema *s)
{
    if (s != NULL && __atomic_sub_fetch(&s->refs, 1, __ATOMIC_ACQ_REL) == 0)
        schema_destroy(s);
}

void ll_schema_free(ll_schema *s)
{
    ll_schema_unref(s);
}

static int text_is(const ll_schema *s, const char *text, size_t len)
{
    return (len == s->orig_len && memcmp(text, s->orig, len) == 0) ||
           (strlen(s->text) == len && memcmp(text, s->text, len) == 0);
}

/* Drops cache entry i (r->lock held); the schema reference is returned for unref outside. */
static ll_schema *cache_drop(ll_schema *r, size_t i)
{
    ll_schema *old = r->cache[i].s;
    r->cache_bytes -= r->cache[i].bytes;
    r->cache[i] = r->cache[--r->cache_n];
    return old;
}

ll_schema *ll_schema_embedded(const ll_schema *reader, const char *text, size_t len, const ll_budgets *b,
                              char *err, size_t errlen)
{
    ll_budgets defaults;
    if (b == NULL) {
        ll_budgets_of(NULL, &defaults);
        b = &defaults;
    }
    ll_schema *r = (ll_schema *)reader; /* the cache is internal, guarded by r->lock */
    if (text_is(r, text, len))
        return ll_schema_ref(r);
    if (len > b->schema_bytes) {
        ll_codec_err(err, errlen, "schema text of %zu bytes over %zu (budget codec.max_schema_bytes)", len,
                     b->schema_bytes);
        return NULL;
    }
    uint64_t fp = ll_fingerprint64(text, len);
    ll_schema *hit = NULL;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->cache_n && hit == NULL; i++) {
        if (r->cache[i].fp == fp && r->cache[i].s->orig_len == len &&
            memcmp(r->cache[i].s->orig, text, len) == 0) {
            hit = ll_schema_ref(r->cache[i].s);
            r->cache[i].used = ++r->cache_clock;
        }
    }
    pthread_mutex_unlock(&r->lock);
    if (hit != NULL)
        return hit;
    ll_schema *w = ll_schema_parse(text, len, b, err, errlen);
    if (w == NULL)
        return NULL;
    size_t bytes = len + strlen(w->text);
    ll_schema *evicted[LL_CODEC_WRITER_CACHE_MAX];
    size_t nev = 0;
    pthread_mutex_lock(&r->lock);
    if (bytes <= b->cache_bytes) {
        /* evict the least recently used until the new entry fits both bounds */
        while (r->cache_n > 0 &&
               (r->cache_n >= b->cache_entries || r->cache_bytes + bytes > b->cache_bytes)) {
            size_t lru = 0;
            for (size_t i = 1; i < r->cache_n; i++)
                if (r->cache[i].used < r->cache[lru].used)
                    lru = i;
            evicted[nev++] = cache_drop(r, lru);
        }
        r->cache[r->cache_n].fp = fp;
        r->cache[r->cache_n].bytes = bytes;
        r->cache[r->cache_n].used = ++r->cache_clock;
        r->cache[r->cache_n].s = ll_schema_ref(w);
        r->cache_n++;
        r->cache_bytes += bytes;
    }
    pthread_mutex_unlock(&r->lock);
    for (size_t i = 0; i < nev; i++)
        ll_schema_unref(evicted[i]);
    return w;
}

ll_schema *ll_schema_parse(const char *text, size_t len, const ll_budgets *b, char *err, size_t errlen)
{
    ll_budgets defaults;
    if (b == NULL) {
        ll_budgets_of(NULL, &defaults);
        b = &defaults;
    }
    if (text == NULL) {
        ll_codec_err(err, errlen, "no schema text");
        return NULL;
    }
    ll_schema *s = calloc(1, sizeof *s);
    if (s == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        return NULL;
    }
    s->refs = 1;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        free(s);
        ll_codec_err(err, errlen, "cannot create a mutex");
        return NULL;
    }
    pctx c = {.s = s, .err = err, .errlen = errlen};
    json_error_t je;
    s->json = json_loadb(text, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (s->json == NULL) {
        ll_codec_err(err, errlen, "schema is not JSON: %d:%d: %.80s", je.line, je.column, je.text);
        goto fail;
    }
    s->orig = malloc(len + 1);
    s->text = json_dumps(s->json, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s->orig == NULL || s->text == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        goto fail;
    }
    memcpy(s->orig, text, len);
    s->orig[len] = '\0';
    s->orig_len = len;
    s->root = ll_sch_parse_type(&c, s->json, NULL, 1);
    if (s->root == NULL)
        goto fail;
    free(c.names);
    c.names = NULL;
    ll_counter types = {b->expansions, b->expansions, "schema expansion (types reached)",
                        "codec.max_schema_expansions"};
    if (ll_sch_expand(s->root, &types, 0, -1, err, errlen) != 0)
        goto fail;

    /* every default must fit its type (a union's default fits its first branch), all of them
     * together building at most b->default_values values */
    ll_counter built = {b->default_values, b->default_values, "default values built",
                        "codec.max_default_values"};
    for (size_t i = 0; i < s->nnodes; i++) {
        ll_node *n = s->nodes[i];
        if (n->type != LLT_RECORD)
            continue;
        for (size_t k = 0; k < n->n; k++) {
            if (n->fields[k].def == NULL)
                continue;
            char derr[160];
            json_t *v = ll_default_to_json(n->fields[k].type, n->fields[k].def, 0, &built, derr, sizeof derr);
            if (v == NULL) {
                ll_codec_err(err, errlen, "%s.%s: bad default: %s", n->fullname, n->fields[k].name, derr);
                goto fail;
            }
            json_decref(v);
        }
    }

    return s;
fail:
    free(c.names);
    ll_schema_free(s);
    return NULL;
}

ll_schema *ll_schema_from_json(const char *json_text, char *err, size_t errlen)
{
    if (json_text == NULL) {
        ll_codec_err(err, errlen, "no schema text");
        return NULL;
    }
    return ll_schema_parse(json_text, strlen(json_text), NULL, err, errlen);
}

ll_schema *ll_schema_from_file(const char *path, char *err, size_t errlen)
{
    if (path == NULL) {
        ll_codec_err(err, errlen, "no schema path");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        ll_codec_err(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 8192, len = 0;
    char *buf = malloc(cap);
    while (buf != NULL) {
        if (len == cap) {
            if (cap >= LL_CODEC_MAX_SCHEMA_FILE) {
                ll_codec_err(err, errlen, "%s: schema file larger than %u bytes", path,
                             LL_CODEC_MAX_SCHEMA_FILE);
                free(buf);
                fclose(f);
                return NULL;
            }
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int rerr = ferror(f);
    fclose(f);
    if (buf == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        return NULL;
    }
    if (rerr) {
        ll_codec_err(err, errlen, "%s: read error", path);
        free(buf);
        return NULL;
    }
    char perr[200];
    ll_schema *s = ll_schema_parse(buf, len, NULL, perr, sizeof perr);
    free(buf);
    if (s == NULL)
        ll_codec_err(err, errlen, "%s: %s", path, perr);
    return s;
}

const char *ll_schema_fullname(const ll_schema *s)
{
    if (s == NULL || s->root == NULL)
        return "";
    if (s->root->fullname != NULL) /* avro-c's "ns.name"; an empty namespace is none */
        return s->root->fullname[0] == '.' ? s->root->fullname + 1 : s->root->fullname;
    return ll_type_name(s->root->type);
}

int ll_schema_same(const ll_schema *a, const ll_schema *b)
{
    if (a == b)
        return 1;
    if (a == NULL || b == NULL)
        return 0;
    if (strcmp(a->text, b->text) == 0)
        return 1;
    return json_equal(a->json, b->json);
}

const char *ll_schema_text(const ll_schema *s)
{
    return s && s->text ? s->text : "";
}
