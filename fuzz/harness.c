/*
 * harness.c - the schemas, the id table and the decode call shared by the fuzz targets.
 */
#include "harness.h"

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef LL_FUZZ_SCHEMA_DIRS
#define LL_FUZZ_SCHEMA_DIRS "schemas/avro:tests/unit/data"
#endif
#define MAX_SCHEMAS 128

static ll_schema *readers[MAX_SCHEMAS];
static size_t nreaders;
static ll_schema_ids *ids;
static int verbose; /* LL_FUZZ_VERBOSE set: print each decoded value or refusal */

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Loads path; puts one copy into readers[] and, when id >= 0, another into the id table. */
static void load_schema(const char *path, int32_t id, int as_reader)
{
    char err[256];
    ll_schema *s = as_reader ? ll_schema_from_file(path, err, sizeof err) : NULL;
    if (as_reader && s == NULL) {
        fprintf(stderr, "fuzz: %s\n", err);
        return;
    }
    if (s != NULL && nreaders < MAX_SCHEMAS)
        readers[nreaders++] = s;
    else
        ll_schema_free(s);
    if (id < 0)
        return;
    ll_schema *w = ll_schema_from_file(path, err, sizeof err);
    if (w == NULL || ll_schema_ids_put(ids, id, w) != 0)
        ll_schema_free(w);
}

/* Loads dir's .avsc files sorted by name (readers, ids 100 + index) and dir/ids.json's ids. */
static void load_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "fuzz: cannot open %s\n", dir);
        return;
    }
    char *names[MAX_SCHEMAS];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < MAX_SCHEMAS) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".avsc") == 0)
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof names[0], by_name);
    char path[4096];
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        load_schema(path, (int32_t)(100 + nreaders), 1);
        free(names[i]);
    }
    snprintf(path, sizeof path, "%s/ids.json", dir);
    json_t *table = json_load_file(path, 0, NULL);
    const char *key;
    json_t *val;
    json_object_foreach(table, key, val)
    {
        if (!json_is_string(val))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, json_string_value(val));
        load_schema(path, (int32_t)atol(key), 0);
    }
    json_decref(table);
}

void ll_fuzz_init(void)
{
    if (nreaders > 0)
        return;
    verbose = getenv("LL_FUZZ_VERBOSE") != NULL;
    const char *env = getenv("LL_FUZZ_SCHEMA_DIRS");
    char *dirs = strdup(env && *env ? env : LL_FUZZ_SCHEMA_DIRS);
    ids = ll_schema_ids_new();
    if (dirs == NULL || ids == NULL)
        abort();
    for (char *save = NULL, *dir = strtok_r(dirs, ":", &save); dir; dir = strtok_r(NULL, ":", &save))
        load_dir(dir);
    free(dirs);
    if (nreaders == 0) {
        fprintf(stderr, "fuzz: no schemas loaded (LL_FUZZ_SCHEMA_DIRS)\n");
        abort();
    }
}

void ll_fuzz_decode(ll_framing framing, const uint8_t *data, size_t size)
{
    ll_fuzz_init();
    if (size < 1)
        return;
    ll_decode_opts o = {.framing = framing, .reader = readers[data[0] % nreaders], .ids = ids};
    json_t *out = NULL;
    char err[256];
    err[0] = '\0';
    int rc = ll_decode(&o, data + 1, size - 1, &out, err, sizeof err);
    if (rc == 0) {
        /* the value must be serialisable JSON, as the services log and store it */
        char *text = json_dumps(out, JSON_COMPACT | JSON_ENCODE_ANY);
        if (text == NULL)
            abort();
        if (verbose)
            fprintf(stderr, "fuzz: %s\n", text);
        free(text);
        json_decref(out);
        out = NULL;
    } else if (verbose) {
        fprintf(stderr, "fuzz: refused: %s\n", err);
    }
    if (rc != 0 && (out != NULL || err[0] == '\0')) {
        abort(); /* the contract: *out is NULL and err says why */
    }
}
