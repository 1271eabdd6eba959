/*
 * defaults.c - a schema default (JSON as written in the .avsc) turned into the decoded JSON
 * shape of codec.h. A union's default is for its first branch; bytes and fixed defaults are
 * strings whose code points 0..255 are the bytes (Avro spec), and the bytes must then be UTF-8
 * like every decoded bytes value. Strings and bytes with a NUL are refused like decoded ones.
 * Every value built is taken from the caller's budget: a record default of {} over nested
 * records with defaults of their own expands to k^d values (the "default bomb").
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"

static json_t *bytes_default(const ll_node *n, const json_t *def, char *err, size_t errlen)
{
    if (!json_is_string(def)) {
        ll_codec_err(err, errlen, "expected a string for %s", ll_type_name(n->type));
        return NULL;
    }
    const unsigned char *s = (const unsigned char *)json_string_value(def);
    size_t len = json_string_length(def);
    unsigned char *out = malloc(len + 1);
    if (out == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        if (c < 0x80) {
            out[k++] = c;
            i++;
        } else if ((c == 0xc2 || c == 0xc3) && i + 1 < len) { /* U+0080..U+00FF */
            out[k++] = (unsigned char)(((c & 0x1f) << 6) | (s[i + 1] & 0x3f));
            i += 2;
        } else {
            free(out);
            ll_codec_err(err, errlen, "%s default has a code point above 255", ll_type_name(n->type));
            return NULL;
        }
    }
    if (n->type == LLT_FIXED && k != n->size) {
        free(out);
        ll_codec_err(err, errlen, "fixed default of %zu bytes, size is %zu", k, n->size);
        return NULL;
    }
    if (memchr(out, 0, k) != NULL) {
        free(out);
        ll_codec_err(err, errlen, "%s default contains a NUL byte", ll_type_name(n->type));
        return NULL;
    }
    json_t *r = ll_utf8_valid(out, k) ? json_stringn((const char *)out, k) : NULL;
    free(out);
    if (r == NULL)
        ll_codec_err(err, errlen, "%s default is not UTF-8", ll_type_name(n->type));
    return r;
}

json_t *ll_default_to_json(const ll_node *n, const json_t *def, int depth, ll_counter *budget, char *err,
                           size_t errlen)
{
    if (depth > LL_CODEC_MAX_SCHEMA_DEPTH) {
        ll_codec_err(err, errlen, "default nested deeper than %d", LL_CODEC_MAX_SCHEMA_DEPTH);
        return NULL;
    }
    if (def == NULL) {
        ll_codec_err(err, errlen, "no default");
        return NULL;
    }
    if (n->type != LLT_UNION && budget != NULL && ll_counter_take(budget, 1, err, errlen) != 0)
        return NULL;
    switch (n->type) {
    case LLT_UNION:
        return ll_default_to_json(n->branches[0], def, depth + 1, budget, err, errlen);
    case LLT_NULL:
        if (json_is_null(def))
            return json_null();
        break;
    case LLT_BOOLEAN:
        if (json_is_boolean(def))
            return json_boolean(json_is_true(def));
        break;
    case LLT_INT:
        if (json_is_integer(def) && json_integer_value(def) >= INT32_MIN &&
            json_integer_value(def) <= INT32_MAX)
            return json_integer(json_integer_value(def));
        break;
    case LLT_LONG:
        if (json_is_integer(def))
            return json_integer(json_integer_value(def));
        break;
    case LLT_FLOAT:
    case LLT_DOUBLE:
        if (json_is_number(def))
            return json_real(json_number_value(def));
        break;
    case LLT_STRING:
        if (json_is_string(def)) {
            if (strlen(json_string_value(def)) != json_string_length(def)) {
                ll_codec_err(err, errlen, "string default contains a NUL byte");
                return NULL;
            }
            return json_stringn(json_string_value(def), json_string_length(def));
        }
        break;
    case LLT_BYTES:
    case LLT_FIXED:
        return bytes_default(n, def, err, errlen);
    case LLT_ENUM:
        if (json_is_string(def)) {
            for (size_t i = 0; i < n->n; i++)
                if (strcmp(n->symbols[i], json_string_value(def)) == 0)
                    return json_string(n->symbols[i]);
            ll_codec_err(err, errlen, "%s is not a symbol of %s", json_string_value(def), n->fullname);
            return NULL;
        }
        break;
    case LLT_ARRAY:
        if (json_is_array(def)) {
            json_t *r = json_array();
            size_t i;
            json_t *item;
            if (r == NULL)
                goto oom;
            json_array_foreach(def, i, item)
            {
                json_t *v = ll_default_to_json(n->items, item, depth + 1, budget, err, errlen);
                if (v == NULL || json_array_append_new(r, v) != 0) {
                    json_decref(r);
                    return NULL;
                }
            }
            return r;
        }
        break;
    case LLT_MAP:
        if (json_is_object(def)) {
            json_t *r = json_object();
            const char *k;
            json_t *item;
            if (r == NULL)
                goto oom;
            json_object_foreach((json_t *)def, k, item)
            {
                json_t *v = ll_default_to_json(n->items, item, depth + 1, budget, err, errlen);
                if (v == NULL || json_object_set_new(r, k, v) != 0) {
                    json_decref(r);
                    return NULL;
                }
            }
            return r;
        }
        break;
    case LLT_RECORD:
        if (json_is_object(def)) {
            json_t *r = json_object();
            if (r == NULL)
                goto oom;
            for (size_t i = 0; i < n->n; i++) {
                const ll_field *f = &n->fields[i];
                json_t *given = json_object_get(def, f->name);
                if (given == NULL && f->def == NULL) {
                    ll_codec_err(err, errlen, "no value for %s.%s", n->fullname, f->name);
                    json_decref(r);
                    return NULL;
                }
                json_t *v =
                    ll_default_to_json(f->type, given ? given : f->def, depth + 1, budget, err, errlen);
                if (v == NULL || json_object_set_new(r, f->name, v) != 0) {
                    json_decref(r);
                    return NULL;
                }
            }
            return r;
        }
        break;
    }
    ll_codec_err(err, errlen, "expected %s", n->fullname ? n->fullname : ll_type_name(n->type));
    return NULL;
oom:
    ll_codec_err(err, errlen, "out of memory");
    return NULL;
}
