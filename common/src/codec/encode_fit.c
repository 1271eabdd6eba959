/*
 * encode_fit.c - for the encoder (encode_int.h): whether a JSON value fits a schema type, and the
 * union branch it is encoded as (the rules of encode.c's header: by JSON type, in union order).
 */
#include <float.h>
#include <string.h>

#include "encode_int.h"

const char *ll_enc_jtype(const json_t *j)
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

int ll_enc_enum_index(const ll_node *n, const char *s)
{
    for (size_t i = 0; i < n->n; i++)
        if (strcmp(n->symbols[i], s) == 0)
            return (int)i;
    return -1;
}

/* 1 when j can be encoded as n. */
int ll_enc_fits(const ll_node *n, const json_t *j, int depth)
{
    if (depth > LL_CODEC_MAX_SCHEMA_DEPTH + LL_CODEC_MAX_DEPTH)
        return 0;
    switch (n->type) {
    case LLT_UNION:
        return ll_enc_choose_branch(n, j, depth) >= 0;
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
        return json_is_string(j) && ll_enc_enum_index(n, json_string_value(j)) >= 0;
    case LLT_ARRAY: {
        size_t i;
        json_t *item;
        if (!json_is_array(j))
            return 0;
        json_array_foreach(j, i, item)
        {
            if (!ll_enc_fits(n->items, item, depth + 1))
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
            if (!ll_enc_fits(n->items, item, depth + 1))
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
                if (!ll_enc_fits(n->fields[i].type, v, depth + 1))
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
        if ((mask & M(u->branches[i]->type)) && ll_enc_fits(u->branches[i], j, depth + 1))
            return (int)i;
    return -1;
}

int ll_enc_choose_branch(const ll_node *u, const json_t *j, int depth)
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
