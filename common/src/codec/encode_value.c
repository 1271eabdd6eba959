/*
 * encode_value.c - for the encoder (encode_int.h): a JSON value set into an avro-c generic value
 * of its schema type, records field by field (an absent field takes the schema default), unions
 * by the branch it fits, logical values from their text.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "encode_int.h"

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
            rc = ll_enc_set_value(p, &fv, f->type, given, depth + 1);
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
                         : ll_enc_set_value(p, &b, f->type->branches[0], dj, depth + 1);
            } else {
                rc = ll_enc_set_value(p, &fv, f->type, dj, depth + 1);
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

int ll_enc_set_value(ll_path *p, avro_value_t *v, const ll_node *n, const json_t *j, int depth)
{
    if (depth > LL_CODEC_MAX_SCHEMA_DEPTH + LL_CODEC_MAX_DEPTH) {
        ll_path_err(p, "value nested too deeply");
        return -1;
    }
    if (n->type != LLT_UNION && n->type != LLT_RECORD && n->type != LLT_ARRAY && n->type != LLT_MAP &&
        !ll_enc_fits(n, j, depth)) {
        ll_path_err(p, "expected %s, got %s", n->fullname ? n->fullname : ll_type_name(n->type),
                    ll_enc_jtype(j));
        return -1;
    }
    if ((n->type == LLT_STRING || n->type == LLT_BYTES || n->type == LLT_FIXED) && json_is_string(j) &&
        strlen(json_string_value(j)) != json_string_length(j)) {
        ll_path_err(p, "%s contains a NUL byte", ll_type_name(n->type)); /* ll_decode refuses it */
        return -1;
    }
    switch (n->type) {
    case LLT_UNION: {
        int i = ll_enc_choose_branch(n, j, depth);
        avro_value_t b;
        if (i < 0) {
            ll_path_err(p, "no branch of the union fits a JSON %s", ll_enc_jtype(j));
            return -1;
        }
        if (avro_value_set_branch(v, i, &b) != 0)
            return avro_fail(p);
        return ll_enc_set_value(p, &b, n->branches[i], j, depth + 1);
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
        return avro_value_set_enum(v, ll_enc_enum_index(n, json_string_value(j))) ? avro_fail(p) : 0;
    case LLT_ARRAY: {
        size_t i;
        json_t *item;
        if (!json_is_array(j)) {
            ll_path_err(p, "expected array, got %s", ll_enc_jtype(j));
            return -1;
        }
        json_array_foreach(j, i, item)
        {
            avro_value_t child;
            if (avro_value_append(v, &child, NULL) != 0)
                return avro_fail(p);
            if (ll_enc_set_value(p, &child, n->items, item, depth + 1) != 0)
                return -1;
        }
        return 0;
    }
    case LLT_MAP: {
        const char *k;
        json_t *item;
        if (!json_is_object(j)) {
            ll_path_err(p, "expected map (object), got %s", ll_enc_jtype(j));
            return -1;
        }
        json_object_foreach((json_t *)j, k, item)
        {
            avro_value_t child;
            if (avro_value_add(v, k, &child, NULL, NULL) != 0)
                return avro_fail(p);
            ll_path_push(p, k);
            int rc = ll_enc_set_value(p, &child, n->items, item, depth + 1);
            ll_path_pop(p);
            if (rc != 0)
                return -1;
        }
        return 0;
    }
    case LLT_RECORD:
        if (!json_is_object(j)) {
            ll_path_err(p, "expected %s (object), got %s", n->fullname, ll_enc_jtype(j));
            return -1;
        }
        return set_record(p, v, n, j, depth);
    }
    ll_path_err(p, "unknown schema type");
    return -1;
}
