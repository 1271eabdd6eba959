/*
 * encode.c - ll_encode: JSON (the decoded shape of codec.h) -> avro-c generic value ->
 * avro_value_write, framed bare, Confluent (0x00, big-endian id, datum) or as a one-record
 * container file (null codec, random sync marker).
 *
 * Union branch by JSON type: null -> "null"; true/false -> boolean; string -> string or enum
 * (union order; an enum only when the symbol is its), then bytes or fixed (by length);
 * integer -> int (if it fits) or long in union order, then double or float; real -> double or
 * float; object -> the first record or map (union order) the object fits; array -> array.
 * A record accepts only its own field names; an absent field takes the schema default.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "codec_internal.h"

static const char *jtype(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "real";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

static int enum_index(const ll_node *n, const char *s)
{
    for (size_t i = 0; i < n->n; i++)
        if (strcmp(n->symbols[i], s) == 0)
            return (int)i;
    return -1;
}

static int choose_branch(const ll_node *u, const json_t *j, int depth);

/* 1 when j can be encoded as n. */
static int fits(const ll_node *n, const json_t *j, int depth)
{
    if (depth > LL_CODEC_MAX_SCHEMA_DEPTH + LL_CODEC_MAX_DEPTH)
        return 0;
    switch (n->type) {
    case LLT_UNION:
        return choose_branch(n, j, depth) >= 0;
    case LLT_NULL:
        return json_is_null(j);
    case LLT_BOOLEAN:
        return json_is_boolean(j);
    case LLT_INT:
        return json_is_integer(j) && json_integer_value(j) >= INT32_MIN && json_integer_value(j) <= INT32_MAX;
    case LLT_LONG:
        return json_is_integer(j);
    case LLT_FLOAT: /* a double beyond float's range would become infinity */
        return json_is_number(j) && json_number_value(j) <= FLT_MAX && json_number_value(j) >= -FLT_MAX;
    case LLT_DOUBLE:
        return json_is_number(j);
    case LLT_STRING:
    case LLT_BYTES:
        return json_is_string(j);
    case LLT_FIXED:
        return json_is_string(j) && json_string_length(j) == n->size;
    case LLT_ENUM:
        return json_is_string(j) && enum_index(n, json_string_value(j)) >= 0;
    case LLT_ARRAY: {
        size_t i;
        json_t *item;
        if (!json_is_array(j))
            return 0;
        json_array_foreach(j, i, item)
        {
            if (!fits(n->items, item, depth + 1))
                return 0;
        }
        return 1;
    }
    case LLT_MAP: {
        const char *k;
        json_t *item;
        if (!json_is_object(j))
            return 0;
        json_object_foreach((json_t *)j, k, item)
        {
            if (!fits(n->items, item, depth + 1))
                return 0;
        }
        return 1;
    }
    case LLT_RECORD: {
        if (!json_is_object(j))
            return 0;
        size_t present = 0;
        for (size_t i = 0; i < n->n; i++) {
            json_t *v = json_object_get(j, n->fields[i].name);
            if (v != NULL) {
                present++;
                if (!fits(n->fields[i].type, v, depth + 1))
                    return 0;
            } else if (n->fields[i].def == NULL) {
                return 0;
            }
        }
        return present == json_object_size(j); /* no unknown keys */
    }
    }
    return 0;
}

#define M(t) (1u << (t))

static int pick(const ll_node *u, const json_t *j, unsigned mask, int depth)
{
    for (size_t i = 0; i < u->n; i++)
        if ((mask & M(u->branches[i]->type)) && fits(u->branches[i], j, depth + 1))
            return (int)i;
    return -1;
}

static int choose_branch(const ll_node *u, const json_t *j, int depth)
{
    int i = -1;
    switch (json_typeof(j)) {
    case JSON_NULL:
        return pick(u, j, M(LLT_NULL), depth);
    case JSON_TRUE:
    case JSON_FALSE:
        return pick(u, j, M(LLT_BOOLEAN), depth);
    case JSON_STRING:
        i = pick(u, j, M(LLT_STRING) | M(LLT_ENUM), depth);
        return i >= 0 ? i : pick(u, j, M(LLT_BYTES) | M(LLT_FIXED), depth);
    case JSON_INTEGER:
        i = pick(u, j, M(LLT_INT) | M(LLT_LONG), depth);
        return i >= 0 ? i : pick(u, j, M(LLT_DOUBLE) | M(LLT_FLOAT), depth);
    case JSON_REAL:
        return pick(u, j, M(LLT_DOUBLE) | M(LLT_FLOAT), depth);
    case JSON_OBJECT:
        return pick(u, j, M(LLT_RECORD) | M(LLT_MAP), depth);
    case JSON_ARRAY:
        return pick(u, j, M(LLT_ARRAY), depth);
    }
    return -1;
}

static int set_value(ll_path *p, avro_value_t *v, const ll_node *n, const json_t *j, int depth);

static int avro_fail(ll_path *p)
{
    ll_path_err(p, "avro-c: %.100s", avro_strerror());
    return -1;
}

static int set_record(ll_path *p, avro_value_t *v, const ll_node *n, const json_t *j, int depth)
{
    const char *k;
    json_t *item;
    json_object_foreach((json_t *)j, k, item)
    {
        int known = 0;
        for (size_t i = 0; i < n->n && !known; i++)
            known = strcmp(n->fields[i].name, k) == 0;
        if (!known) {
            ll_path_err(p, "unknown field %.60s in %s", k, n->fullname);
            return -1;
        }
    }
    for (size_t i = 0; i < n->n; i++) {
        const ll_field *f = &n->fields[i];
        avro_value_t fv;
        if (avro_value_get_by_index(v, i, &fv, NULL) != 0)
            return avro_fail(p);
        json_t *given = json_object_get(j, f->name);
        ll_path_push(p, f->name);
        int rc;
        if (given != NULL) {
            rc = set_value(p, &fv, f->type, given, depth + 1);
        } else if (f->def != NULL) {
            char derr[160];
            json_t *dj =
                ll_default_to_json(f->type, f->def, 0, NULL, derr, sizeof derr); /* checked at load */
            if (dj == NULL) {
                ll_path_err(p, "default: %s", derr);
                rc = -1;
            } else if (f->type->type == LLT_UNION) { /* a union's default is its first branch */
                avro_value_t b;
                rc = avro_value_set_branch(&fv, 0, &b) != 0
                         ? avro_fail(p)
                         : set_value(p, &b, f->type->branches[0], dj, depth + 1);
            } else {
                rc = set_value(p, &fv, f->type, dj, depth + 1);
            }
            json_decref(dj);
        } else {
            ll_path_err(p, "missing field without default");
            rc = -1;
        }
        ll_path_pop(p);
        if (rc != 0)
            return -1;
    }
    return 0;
}

static int set_value(ll_path *p, avro_value_t *v, const ll_node *n, const json_t *j, int depth)
{
    if (depth > LL_CODEC_MAX_SCHEMA_DEPTH + LL_CODEC_MAX_DEPTH) {
        ll_path_err(p, "value nested too deeply");
        return -1;
    }
    if (n->type != LLT_UNION && n->type != LLT_RECORD && n->type != LLT_ARRAY && n->type != LLT_MAP &&
        !fits(n, j, depth)) {
        ll_path_err(p, "expected %s, got %s", n->fullname ? n->fullname : ll_type_name(n->type), jtype(j));
        return -1;
    }
    if ((n->type == LLT_STRING || n->type == LLT_BYTES || n->type == LLT_FIXED) && json_is_string(j) &&
        strlen(json_string_value(j)) != json_string_length(j)) {
        ll_path_err(p, "%s contains a NUL byte", ll_type_name(n->type)); /* ll_decode refuses it */
        return -1;
    }
    switch (n->type) {
    case LLT_UNION: {
        int i = choose_branch(n, j, depth);
        avro_value_t b;
        if (i < 0) {
            ll_path_err(p, "no branch of the union fits a JSON %s", jtype(j));
            return -1;
        }
        if (avro_value_set_branch(v, i, &b) != 0)
            return avro_fail(p);
        return set_value(p, &b, n->branches[i], j, depth + 1);
    }
    case LLT_NULL:
        return avro_value_set_null(v) ? avro_fail(p) : 0;
    case LLT_BOOLEAN:
        return avro_value_set_boolean(v, json_is_true(j)) ? avro_fail(p) : 0;
    case LLT_INT:
        return avro_value_set_int(v, (int32_t)json_integer_value(j)) ? avro_fail(p) : 0;
    case LLT_LONG:
        return avro_value_set_long(v, (int64_t)json_integer_value(j)) ? avro_fail(p) : 0;
    case LLT_FLOAT:
        return avro_value_set_float(v, (float)json_number_value(j)) ? avro_fail(p) : 0;
    case LLT_DOUBLE:
        return avro_value_set_double(v, json_number_value(j)) ? avro_fail(p) : 0;
    case LLT_STRING:
        return avro_value_set_string_len(v, json_string_value(j), json_string_length(j) + 1) ? avro_fail(p)
                                                                                             : 0;
    case LLT_BYTES: {
        size_t len = json_string_length(j);
        return avro_value_set_bytes(v, (void *)(len ? json_string_value(j) : ""), len) ? avro_fail(p) : 0;
    }
    case LLT_FIXED:
        return avro_value_set_fixed(v, (void *)json_string_value(j), n->size) ? avro_fail(p) : 0;
    case LLT_ENUM:
        return avro_value_set_enum(v, enum_index(n, json_string_value(j))) ? avro_fail(p) : 0;
    case LLT_ARRAY: {
        size_t i;
        json_t *item;
        if (!json_is_array(j)) {
            ll_path_err(p, "expected array, got %s", jtype(j));
            return -1;
        }
        json_array_foreach(j, i, item)
        {
            avro_value_t child;
            if (avro_value_append(v, &child, NULL) != 0)
                return avro_fail(p);
            if (set_value(p, &child, n->items, item, depth + 1) != 0)
                return -1;
        }
        return 0;
    }
    case LLT_MAP: {
        const char *k;
        json_t *item;
        if (!json_is_object(j)) {
            ll_path_err(p, "expected map (object), got %s", jtype(j));
            return -1;
        }
        json_object_foreach((json_t *)j, k, item)
        {
            avro_value_t child;
            if (avro_value_add(v, k, &child, NULL, NULL) != 0)
                return avro_fail(p);
            ll_path_push(p, k);
            int rc = set_value(p, &child, n->items, item, depth + 1);
            ll_path_pop(p);
            if (rc != 0)
                return -1;
        }
        return 0;
    }
    case LLT_RECORD:
        if (!json_is_object(j)) {
            ll_path_err(p, "expected %s (object), got %s", n->fullname, jtype(j));
            return -1;
        }
        return set_record(p, v, n, j, depth);
    }
    ll_path_err(p, "unknown schema type");
    return -1;
}

/* 1 when j nests more than limit objects/arrays deep (stops looking past the limit). */
static int too_deep(const json_t *j, int limit)
{
    if (!json_is_object(j) && !json_is_array(j))
        return 0;
    if (limit == 0)
        return 1;
    if (json_is_array(j)) {
        size_t i;
        json_t *item;
        json_array_foreach(j, i, item)
        {
            if (too_deep(item, limit - 1))
                return 1;
        }
        return 0;
    }
    const char *k;
    json_t *item;
    json_object_foreach((json_t *)j, k, item)
    {
        if (too_deep(item, limit - 1))
            return 1;
    }
    return 0;
}

static void random_sync(unsigned char sync[16])
{
    size_t got = 0;
    while (got < 16) {
        ssize_t r = getrandom(sync + got, 16 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got < 16) { /* no entropy source: still unique enough for a marker */
        static unsigned long counter;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t x = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uint64_t)++counter;
        for (size_t i = got; i < 16; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            sync[i] = (unsigned char)x;
        }
    }
}

static size_t put_bytes(unsigned char *o, const void *s, size_t len)
{
    size_t n = ll_write_long(o, (int64_t)len);
    memcpy(o + n, s, len);
    return n + len;
}

int ll_encode(const ll_encode_opts *opts, const json_t *value, unsigned char **buf, size_t *len, char *err,
              size_t errlen)
{
    if (buf != NULL)
        *buf = NULL;
    if (len != NULL)
        *len = 0;
    if (opts == NULL || opts->schema == NULL || value == NULL || buf == NULL || len == NULL) {
        ll_codec_err(err, errlen, "bad arguments");
        return -1;
    }
    if (opts->framing != LL_FRAMING_BARE && opts->framing != LL_FRAMING_CONFLUENT &&
        opts->framing != LL_FRAMING_CONTAINER) {
        ll_codec_err(err, errlen, "cannot write framing %s", ll_framing_name(opts->framing));
        return -1;
    }
    /* records, maps and arrays are the JSON objects and arrays: our decoder's bound applies */
    if (too_deep(value, LL_CODEC_MAX_DEPTH)) {
        ll_codec_err(err, errlen, "value nested deeper than %d", LL_CODEC_MAX_DEPTH);
        return -1;
    }
    const ll_schema *s = opts->schema;
    avro_value_t v;
    if (avro_generic_value_new(s->iface, &v) != 0) {
        ll_codec_err(err, errlen, "avro-c: %.100s", avro_strerror());
        return -1;
    }
    ll_path p = {.n = 0, .err = err, .errlen = errlen};
    unsigned char *out = NULL;
    size_t dsz = 0;
    if (set_value(&p, &v, s->root, value, 0) != 0)
        goto fail;
    if (avro_value_sizeof(&v, &dsz) != 0) {
        ll_codec_err(err, errlen, "avro-c: %.100s", avro_strerror());
        goto fail;
    }
    size_t textlen = strlen(s->text);
    size_t cap = dsz + 16;
    if (opts->framing == LL_FRAMING_CONTAINER)
        cap += 4 + 10 + 10 + 11 + 10 + textlen + 10 + 10 + 10 + 4 + 10 + 16 + 10 + 10 + 16;
    out = malloc(cap);
    if (out == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        goto fail;
    }
    size_t o = 0;
    unsigned char sync[16];
    if (opts->framing == LL_FRAMING_CONFLUENT) {
        uint32_t id = (uint32_t)opts->schema_id;
        out[o++] = 0;
        out[o++] = (unsigned char)(id >> 24);
        out[o++] = (unsigned char)(id >> 16);
        out[o++] = (unsigned char)(id >> 8);
        out[o++] = (unsigned char)id;
    } else if (opts->framing == LL_FRAMING_CONTAINER) {
        memcpy(out, "Obj\x01", 4);
        o = 4;
        o += ll_write_long(out + o, 2);
        o += put_bytes(out + o, "avro.schema", 11);
        o += put_bytes(out + o, s->text, textlen);
        o += put_bytes(out + o, "avro.codec", 10);
        o += put_bytes(out + o, "null", 4);
        o += ll_write_long(out + o, 0);
        random_sync(sync);
        memcpy(out + o, sync, 16);
        o += 16;
        o += ll_write_long(out + o, 1);
        o += ll_write_long(out + o, (int64_t)dsz);
    }
    unsigned char *datum = out + o;
    avro_writer_t w = avro_writer_memory((const char *)datum, (int64_t)dsz);
    if (w == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        goto fail;
    }
    int wrc = avro_value_write(w, &v);
    int64_t written = avro_writer_tell(w);
    avro_writer_free(w);
    if (wrc != 0 || written != (int64_t)dsz) {
        ll_codec_err(err, errlen, "avro-c cannot write the value: %.100s", avro_strerror());
        goto fail;
    }
    /* our own reader must accept what we write */
    size_t consumed = 0;
    char verr[160];
    ll_counter values = {SIZE_MAX, SIZE_MAX, "values per datum", "none"}; /* our own value: unbounded */
    if (ll_prevalidate(s->root, datum, dsz, SIZE_MAX, &values, &consumed, verr, sizeof verr) != 0) {
        ll_codec_err(err, errlen, "encoded datum does not validate: %s", verr);
        goto fail;
    }
    if (consumed != dsz) {
        ll_codec_err(err, errlen, "encoded datum does not validate: size mismatch");
        goto fail;
    }
    o += dsz;
    if (opts->framing == LL_FRAMING_CONTAINER) {
        memcpy(out + o, sync, 16);
        o += 16;
    }
    avro_value_decref(&v);
    *buf = out;
    *len = o;
    return 0;
fail:
    free(out);
    avro_value_decref(&v);
    return -1;
}
