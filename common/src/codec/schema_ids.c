/*
 * schema_ids.c - schema-id tables (the Confluent framing): an id -> schema map, loaded from the
 * JSON file of schema.ids_file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema_int.h"

typedef struct id_ent {
    int32_t id;
    ll_schema *s;
} id_ent;

struct ll_schema_ids {
    id_ent *v;
    size_t n, cap;
};

ll_schema_ids *ll_schema_ids_new(void)
{
    return calloc(1, sizeof(ll_schema_ids));
}

void ll_schema_ids_free(ll_schema_ids *ids)
{
    if (ids == NULL)
        return;
    for (size_t i = 0; i < ids->n; i++)
        ll_schema_free(ids->v[i].s);
    free(ids->v);
    free(ids);
}

const ll_schema *ll_schema_ids_get(const ll_schema_ids *ids, int32_t id)
{
    if (ids == NULL)
        return NULL;
    for (size_t i = 0; i < ids->n; i++)
        if (ids->v[i].id == id)
            return ids->v[i].s;
    return NULL;
}

int ll_schema_ids_put(ll_schema_ids *ids, int32_t id, ll_schema *s)
{
    if (ids == NULL || s == NULL || ll_schema_ids_get(ids, id) != NULL)
        return -1;
    if (ids->n == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 8;
        id_ent *v = realloc(ids->v, cap * sizeof *v);
        if (v == NULL)
            return -1;
        ids->v = v;
        ids->cap = cap;
    }
    ids->v[ids->n].id = id;
    ids->v[ids->n].s = s;
    ids->n++;
    return 0;
}

static int parse_id(const char *key, int32_t *out)
{
    if (key[0] == '\0' || strlen(key) > 10)
        return -1;
    long long v = 0;
    for (const char *p = key; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    if (v > INT32_MAX)
        return -1;
    *out = (int32_t)v;
    return 0;
}

ll_schema_ids *ll_schema_ids_load(const char *path, char *err, size_t errlen)
{
    if (path == NULL) {
        ll_codec_err(err, errlen, "no schema id file");
        return NULL;
    }
    json_error_t je;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (root == NULL) {
        ll_codec_err(err, errlen, "%s: %d:%d: %.80s", path, je.line, je.column, je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        ll_codec_err(err, errlen, "%s: not a JSON object", path);
        json_decref(root);
        return NULL;
    }
    ll_schema_ids *ids = ll_schema_ids_new();
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) : 0;
    const char *key;
    json_t *val;
    if (ids == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        goto fail;
    }
    json_object_foreach(root, key, val)
    {
        int32_t id;
        if (parse_id(key, &id) != 0) {
            ll_codec_err(err, errlen, "%s: bad schema id \"%.32s\"", path, key);
            goto fail;
        }
        if (!json_is_string(val) || json_string_length(val) == 0) {
            ll_codec_err(err, errlen, "%s: id %s: not a path", path, key);
            goto fail;
        }
        const char *rel = json_string_value(val);
        char *full;
        if (rel[0] == '/' || slash == NULL) {
            full = strdup(rel);
        } else {
            size_t rl = strlen(rel);
            full = malloc(dirlen + 1 + rl + 1);
            if (full != NULL) {
                memcpy(full, path, dirlen);
                full[dirlen] = '/';
                memcpy(full + dirlen + 1, rel, rl + 1);
            }
        }
        if (full == NULL) {
            ll_codec_err(err, errlen, "out of memory");
            goto fail;
        }
        char serr[256];
        ll_schema *s = ll_schema_from_file(full, serr, sizeof serr);
        free(full);
        if (s == NULL) {
            ll_codec_err(err, errlen, "id %s: %s", key, serr);
            goto fail;
        }
        if (ll_schema_ids_put(ids, id, s) != 0) {
            ll_schema_free(s);
            ll_codec_err(err, errlen, "%s: id %s twice", path, key);
            goto fail;
        }
    }
    json_decref(root);
    return ids;
fail:
    json_decref(root);
    ll_schema_ids_free(ids);
    return NULL;
}
