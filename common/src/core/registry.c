/*
 * registry.c - the pure part of the schema registry client (registry.h): the URL list, the
 * request paths and bodies, the answers parsed (schema, id, lookup, error code), the bounded id
 * cache, the per-id backoff. No I/O; the HTTP calls are registry_http.c.
 */
#include "ll/registry.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ll_registry_status_name(ll_registry_status st)
{
    switch (st) {
    case LL_REGISTRY_OK:
        return "ok";
    case LL_REGISTRY_NOT_FOUND:
        return "not found";
    case LL_REGISTRY_UNAVAILABLE:
        return "unavailable";
    case LL_REGISTRY_INVALID:
        return "invalid answer";
    }
    return "?";
}

int ll_registry_parse_urls(const char *text, char urls[][LL_REGISTRY_URL_MAX + 1], int max, char *err,
                           size_t errlen)
{
    int n = 0;
    const char *p = text ? text : "";
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        const char *end = strchr(p, ',');
        size_t l = end ? (size_t)(end - p) : strlen(p);
        while (l > 0 && (p[l - 1] == ' ' || p[l - 1] == '\t'))
            l--;
        while (l > 0 && p[l - 1] == '/')
            l--;
        if (l == 0) {
            snprintf(err, errlen, "schema.registry.url: empty entry %d", n + 1);
            return -1;
        }
        if (l > LL_REGISTRY_URL_MAX) {
            snprintf(err, errlen, "schema.registry.url: entry %d longer than %d bytes", n + 1,
                     LL_REGISTRY_URL_MAX);
            return -1;
        }
        if (!(l > 7 && strncmp(p, "http://", 7) == 0) && !(l > 8 && strncmp(p, "https://", 8) == 0)) {
            snprintf(err, errlen, "schema.registry.url: entry %d '%.*s' is not an http:// or https:// URL",
                     n + 1, (int)(l > 64 ? 64 : l), p);
            return -1;
        }
        if (n == max) {
            snprintf(err, errlen, "schema.registry.url: more than %d URLs", max);
            return -1;
        }
        memcpy(urls[n], p, l);
        urls[n][l] = '\0';
        n++;
        if (!end)
            return n;
        p = end + 1;
    }
}

char *ll_registry_parse_schema(const char *body, size_t len, size_t max_body, size_t *text_len, char *err,
                               size_t errlen)
{
    if (len > max_body) {
        snprintf(err, errlen, "answer of %zu bytes over %zu", len, max_body);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "answer is not JSON: %.80s", je.text);
        return NULL;
    }
    char *out = NULL;
    json_t *type = json_object_get(root, "schemaType");
    json_t *schema = json_object_get(root, "schema");
    if (type && !(json_is_string(type) && strcmp(json_string_value(type), "AVRO") == 0))
        snprintf(err, errlen, "schemaType %.32s is not AVRO",
                 json_is_string(type) ? json_string_value(type) : "?");
    else if (!json_is_string(schema) || json_string_length(schema) == 0)
        snprintf(err, errlen, "answer has no \"schema\" string");
    else if (memchr(json_string_value(schema), '\0', json_string_length(schema)))
        snprintf(err, errlen, "schema text contains NUL");
    else if (!(out = strdup(json_string_value(schema))))
        snprintf(err, errlen, "out of memory");
    else
        *text_len = json_string_length(schema);
    json_decref(root);
    return out;
}

int ll_registry_parse_id(const char *body, size_t len, int32_t *id, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "answer is not JSON: %.80s", je.text);
        return -1;
    }
    json_t *v = json_object_get(root, "id");
    int rc = -1;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
        snprintf(err, errlen, "answer has no \"id\" in 0..2147483647");
    } else {
        *id = (int32_t)json_integer_value(v);
        rc = 0;
    }
    json_decref(root);
    return rc;
}

char *ll_registry_register_body(const char *schema_text)
{
    json_t *o = json_pack("{s:s}", "schema", schema_text);
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

int ll_registry_subject_path(const char *subject, bool versions, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    static const char head[] = "/subjects/", tail[] = "/versions";
    if (outlen > 0)
        out[0] = '\0';
    if (!subject || !*subject || outlen < sizeof head)
        return -1;
    memcpy(out, head, sizeof head); /* with its NUL */
    size_t n = sizeof head - 1;
    for (const unsigned char *p = (const unsigned char *)subject; *p; p++) {
        int plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
                    *p == '-' || *p == '.' || *p == '_' || *p == '~';
        if (n + (plain ? 1 : 3) >= outlen) {
            out[0] = '\0';
            return -1;
        }
        if (plain) {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    if (versions) {
        if (n + sizeof tail > outlen) {
            out[0] = '\0';
            return -1;
        }
        memcpy(out + n, tail, sizeof tail - 1);
        n += sizeof tail - 1;
    }
    out[n] = '\0';
    return 0;
}

int ll_registry_parse_lookup(const char *body, size_t len, const char *subject, ll_registry_version *out,
                             char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errlen, "answer is not JSON: %.80s", je.text);
        return -1;
    }
    json_t *id = json_object_get(root, "id");
    json_t *version = json_object_get(root, "version");
    json_t *subj = json_object_get(root, "subject");
    int rc = -1;
    if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > INT32_MAX) {
        snprintf(err, errlen, "answer has no \"id\" in 0..2147483647");
    } else if (!json_is_integer(version) || json_integer_value(version) < 1 ||
               json_integer_value(version) > INT32_MAX) {
        snprintf(err, errlen, "answer has no \"version\" in 1..2147483647");
    } else if (subj && !json_is_string(subj)) {
        snprintf(err, errlen, "answer's \"subject\" is not a string");
    } else if (subj && subject && strcmp(json_string_value(subj), subject) != 0) {
        snprintf(err, errlen, "answer names subject '%.120s', not the one asked", json_string_value(subj));
    } else {
        out->id = (int32_t)json_integer_value(id);
        out->version = (int32_t)json_integer_value(version);
        rc = 0;
    }
    json_decref(root);
    return rc;
}

int ll_registry_error_code(const char *body, size_t len, char *msg, size_t msglen)
{
    if (msg && msglen > 0)
        msg[0] = '\0';
    json_t *root = body ? json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    json_t *code = json_object_get(root, "error_code"); /* NULL for a non-object */
    json_t *text = json_object_get(root, "message");
    int out = 0;
    if (json_is_integer(code) && json_integer_value(code) > 0 && json_integer_value(code) <= INT32_MAX) {
        out = (int)json_integer_value(code);
        if (msg && msglen > 0 && json_is_string(text))
            snprintf(msg, msglen, "%s", json_string_value(text));
    }
    json_decref(root);
    return out;
}

const char *ll_registry_error_name(int code)
{
    switch (code) {
    case LL_REGISTRY_SUBJECT_NOT_FOUND:
        return "subject not found";
    case LL_REGISTRY_VERSION_NOT_FOUND:
        return "version not found";
    case LL_REGISTRY_SCHEMA_NOT_FOUND:
        return "schema not found";
    default:
        return "";
    }
}

/* ---- the id cache ---------------------------------------------------------------------------- */

typedef struct cache_ent {
    int32_t id;
    char *text;
    size_t len;
    uint64_t used; /* the cache clock at its last get or put */
} cache_ent;

struct ll_registry_cache {
    cache_ent *v;
    size_t n, max_entries, bytes, max_bytes;
    uint64_t clock;
};

ll_registry_cache *ll_registry_cache_new(size_t max_entries, size_t max_bytes)
{
    if (max_entries == 0 || max_bytes == 0)
        return NULL;
    ll_registry_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->v = calloc(max_entries, sizeof *c->v);
    if (!c->v) {
        free(c);
        return NULL;
    }
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    return c;
}

void ll_registry_cache_free(ll_registry_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->v[i].text);
    free(c->v);
    free(c);
}

const char *ll_registry_cache_get(ll_registry_cache *c, int32_t id, size_t *len)
{
    for (size_t i = 0; c && i < c->n; i++)
        if (c->v[i].id == id) {
            c->v[i].used = ++c->clock;
            *len = c->v[i].len;
            return c->v[i].text;
        }
    return NULL;
}

/* Drops entry i. */
static void cache_drop(ll_registry_cache *c, size_t i)
{
    c->bytes -= c->v[i].len;
    free(c->v[i].text);
    c->n--;
    if (i != c->n)
        c->v[i] = c->v[c->n];
    memset(&c->v[c->n], 0, sizeof c->v[c->n]); /* the vacated slot keeps no pointer */
}

int ll_registry_cache_put(ll_registry_cache *c, int32_t id, const char *text, size_t len)
{
    if (!c || len > c->max_bytes)
        return -1;
    for (size_t i = 0; i < c->n; i++)
        if (c->v[i].id == id) {
            cache_drop(c, i);
            break;
        }
    char *copy = malloc(len + 1);
    if (!copy)
        return -1;
    memcpy(copy, text, len);
    copy[len] = '\0';
    while (c->n > 0 && (c->n >= c->max_entries || c->bytes + len > c->max_bytes)) {
        size_t lru = 0;
        for (size_t i = 1; i < c->n; i++)
            if (c->v[i].used < c->v[lru].used)
                lru = i;
        cache_drop(c, lru);
    }
    c->v[c->n] = (cache_ent){.id = id, .text = copy, .len = len, .used = ++c->clock};
    c->n++;
    c->bytes += len;
    return 0;
}

size_t ll_registry_cache_count(const ll_registry_cache *c)
{
    return c ? c->n : 0;
}

size_t ll_registry_cache_bytes(const ll_registry_cache *c)
{
    return c ? c->bytes : 0;
}

/* backoff_min_ms doubling per failure after the first, capped at backoff_max_ms (no overflow). */
static int64_t backoff_ms(unsigned failures, int64_t backoff_min_ms, int64_t backoff_max_ms)
{
    int64_t wait = backoff_min_ms;
    for (unsigned i = 1; i < failures && wait < backoff_max_ms; i++)
        wait *= 2;
    return wait > backoff_max_ms ? backoff_max_ms : wait;
}

int64_t ll_registry_start_pause_ms(int64_t elapsed_ms, unsigned failures, int64_t wait_ms,
                                   int64_t backoff_min_ms, int64_t backoff_max_ms)
{
    if (elapsed_ms >= wait_ms)
        return -1;
    int64_t pause = backoff_ms(failures, backoff_min_ms, backoff_max_ms);
    return pause < wait_ms - elapsed_ms ? pause : wait_ms - elapsed_ms;
}

int ll_registry_retry_due(int64_t now_ms, int64_t last_failure_ms, unsigned failures, int64_t backoff_min_ms,
                          int64_t backoff_max_ms)
{
    return failures == 0 || now_ms - last_failure_ms >= backoff_ms(failures, backoff_min_ms, backoff_max_ms);
}
