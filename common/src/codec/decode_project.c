/*
 * decode_project.c - projection (decode_int.h): an avro-c value of writer type w turned into JSON
 * of reader type r, records by field name with the reader's defaults, unions by branch, logical
 * values as text.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "decode_int.h"

static json_t *real_json(ll_path *p, double d)
{
    if (!isfinite(d)) {
        ll_path_err(p, "non-finite float");
        return NULL;
    }
    json_t *j = json_real(d);
    if (j == NULL)
        ll_path_err(p, "out of memory");
    return j;
}

/* A string, bytes or fixed value as a JSON string: UTF-8 and without NUL (a NUL would cut it
 * short in every C string and PostgreSQL text it reaches). */
static json_t *text_json(ll_path *p, const void *s, size_t len, const char *what)
{
    if (len > 0 && memchr(s, 0, len) != NULL) {
        ll_path_err(p, "%s contains a NUL byte", what);
        return NULL;
    }
    json_t *j = ll_utf8_valid(s, len) ? json_stringn(s, len) : NULL;
    if (j == NULL)
        ll_path_err(p, "%s is not valid UTF-8", what);
    return j;
}

static json_t *str_json(ll_path *p, const char *s)
{
    json_t *j = json_string(s);
    if (j == NULL)
        ll_path_err(p, "out of memory");
    return j;
}

/* The text of a writer logical value (decimal, uuid fixed: the bytes b/len; date, timestamps:
 * the number l). */
static json_t *logical_json(ll_path *p, const ll_node *w, const void *b, size_t len, int64_t l)
{
    char text[64], lerr[120];
    int rc = 0;
    switch (w->logical) {
    case LLL_DECIMAL:
        rc = ll_decimal_text(b, len, w->precision, w->scale, text, sizeof text, lerr, sizeof lerr);
        break;
    case LLL_DATE:
        rc = ll_date_text(l, text, sizeof text, lerr, sizeof lerr);
        break;
    case LLL_UUID:
        ll_uuid_text(b, text);
        break;
    default:
        rc = ll_timestamp_text(l, w->logical, text, sizeof text, lerr, sizeof lerr);
        break;
    }
    if (rc != 0) {
        ll_path_err(p, "%s", lerr);
        return NULL;
    }
    return str_json(p, text);
}

static json_t *conv_record(ll_path *p, avro_value_t *v, const ll_node *w, const ll_node *r, int depth)
{
    json_t *obj = json_object();
    if (obj == NULL) {
        ll_path_err(p, "out of memory");
        return NULL;
    }
    for (size_t j = 0; j < r->n; j++) {
        const ll_field *rf = &r->fields[j];
        long wi = -1;
        if (r == w) {
            wi = (long)j;
        } else {
            for (size_t i = 0; i < w->n && wi < 0; i++)
                if (strcmp(w->fields[i].name, rf->name) == 0)
                    wi = (long)i;
            for (size_t a = 0; wi < 0 && rf->aliases && a < json_array_size(rf->aliases); a++) {
                const char *al = json_string_value(json_array_get(rf->aliases, a));
                for (size_t i = 0; al && i < w->n && wi < 0; i++)
                    if (strcmp(w->fields[i].name, al) == 0)
                        wi = (long)i;
            }
        }
        json_t *val;
        ll_path_push(p, rf->name);
        if (wi >= 0) {
            avro_value_t fv;
            if (avro_value_get_by_index(v, (size_t)wi, &fv, NULL) != 0) {
                ll_path_err(p, "avro-c: %.100s", avro_strerror());
                val = NULL;
            } else {
                val = ll_dec_conv(p, &fv, w->fields[wi].type, rf->type, depth + 1);
            }
        } else if (rf->def != NULL) {
            char derr[160];
            val = ll_default_to_json(rf->type, rf->def, 0, p->values, derr, sizeof derr);
            if (val == NULL)
                ll_path_err(p, "default: %s", derr);
        } else {
            ll_path_err(p, "missing field without default");
            val = NULL;
        }
        ll_path_pop(p);
        if (val == NULL || json_object_set_new(obj, rf->name, val) != 0) {
            json_decref(obj);
            return NULL;
        }
    }
    return obj;
}

json_t *ll_dec_conv(ll_path *p, avro_value_t *v, const ll_node *w, const ll_node *r, int depth)
{
    if (depth > LL_CODEC_MAX_DEPTH * 2 + 2) {
        ll_path_err(p, "nesting deeper than %d", LL_CODEC_MAX_DEPTH);
        return NULL;
    }
    if (w->type == LLT_UNION) {
        int d;
        avro_value_t b;
        if (avro_value_get_discriminant(v, &d) != 0 || d < 0 || (size_t)d >= w->n ||
            avro_value_get_current_branch(v, &b) != 0) {
            ll_path_err(p, "avro-c union without a branch");
            return NULL;
        }
        const ll_node *wb = w->branches[d];
        return ll_dec_conv(p, &b, wb, r == w ? wb : r, depth);
    }
    if (r->type == LLT_UNION) {
        int i = ll_dec_match_branch(w, r);
        if (i < 0) {
            char a[120], b[240];
            ll_path_err(p, "writer %s fits no branch of the reader union %s", ll_dec_lname(w, a, sizeof a),
                        ll_dec_union_name(r, b, sizeof b));
            return NULL;
        }
        r = r->branches[i];
    }
    if (r != w && ll_dec_match_level(w, r) < 0) {
        char a[120], b[120];
        ll_path_err(p, "writer %s cannot be read as %s", ll_dec_lname(w, a, sizeof a),
                    ll_dec_lname(r, b, sizeof b));
        return NULL;
    }
    /* text of a logical value: decimals and uuid fixed always, dates and timestamps into text */
    int as_text = w->logical != LLL_NONE && ll_dec_logical_read(w, r) == 1;
    int rc = 0;
    switch (w->type) {
    case LLT_NULL:
        return json_null();
    case LLT_BOOLEAN: {
        int b = 0;
        rc = avro_value_get_boolean(v, &b);
        if (rc == 0)
            return json_boolean(b);
        break;
    }
    case LLT_INT: {
        int32_t i = 0;
        rc = avro_value_get_int(v, &i);
        if (rc == 0 && as_text)
            return logical_json(p, w, NULL, 0, i);
        if (rc == 0)
            return (r->type == LLT_FLOAT || r->type == LLT_DOUBLE) ? real_json(p, (double)i)
                                                                   : json_integer(i);
        break;
    }
    case LLT_LONG: {
        int64_t l = 0;
        rc = avro_value_get_long(v, &l);
        if (rc == 0 && as_text)
            return logical_json(p, w, NULL, 0, l);
        if (rc == 0)
            return (r->type == LLT_FLOAT || r->type == LLT_DOUBLE) ? real_json(p, (double)l)
                                                                   : json_integer(l);
        break;
    }
    case LLT_FLOAT: {
        float f = 0;
        rc = avro_value_get_float(v, &f);
        if (rc == 0)
            return real_json(p, (double)f);
        break;
    }
    case LLT_DOUBLE: {
        double d = 0;
        rc = avro_value_get_double(v, &d);
        if (rc == 0)
            return real_json(p, d);
        break;
    }
    case LLT_STRING: {
        const char *s = NULL;
        size_t size = 0;
        rc = avro_value_get_string(v, &s, &size);
        if (rc == 0)
            return text_json(p, s, size > 0 ? size - 1 : 0, "string");
        break;
    }
    case LLT_BYTES: {
        const void *b = NULL;
        size_t size = 0;
        rc = avro_value_get_bytes(v, &b, &size);
        if (rc == 0 && as_text)
            return logical_json(p, w, b, size, 0);
        if (rc == 0)
            return text_json(p, size ? b : "", size, "bytes");
        break;
    }
    case LLT_FIXED: {
        const void *b = NULL;
        size_t size = 0;
        rc = avro_value_get_fixed(v, &b, &size);
        if (rc == 0 && as_text) {
            if (size != w->size) {
                ll_path_err(p, "fixed of %zu bytes, %zu declared", size, w->size);
                return NULL;
            }
            return logical_json(p, w, b, size, 0);
        }
        if (rc == 0) {
            if (size != r->size) {
                ll_path_err(p, "fixed of %zu bytes read as %zu", size, r->size);
                return NULL;
            }
            return text_json(p, size ? b : "", size, "fixed");
        }
        break;
    }
    case LLT_ENUM: {
        int idx = -1;
        rc = avro_value_get_enum(v, &idx);
        if (rc == 0) {
            if (idx < 0 || (size_t)idx >= w->n) {
                ll_path_err(p, "enum index %d out of range", idx);
                return NULL;
            }
            const char *sym = w->symbols[idx];
            for (size_t i = 0; i < r->n; i++)
                if (strcmp(r->symbols[i], sym) == 0)
                    return json_string(sym);
            if (r->enum_default != NULL)
                return json_string(r->enum_default);
            ll_path_err(p, "symbol %s not in reader enum %s", sym, r->fullname);
            return NULL;
        }
        break;
    }
    case LLT_ARRAY:
    case LLT_MAP: {
        size_t n = 0;
        rc = avro_value_get_size(v, &n);
        if (rc != 0)
            break;
        int is_map = w->type == LLT_MAP;
        json_t *out = is_map ? json_object() : json_array();
        if (out == NULL) {
            ll_path_err(p, "out of memory");
            return NULL;
        }
        for (size_t i = 0; i < n; i++) {
            avro_value_t child;
            const char *key = NULL;
            if (avro_value_get_by_index(v, i, &child, is_map ? &key : NULL) != 0) {
                ll_path_err(p, "avro-c: %.100s", avro_strerror());
                json_decref(out);
                return NULL;
            }
            json_t *cj = ll_dec_conv(p, &child, w->items, r->items, depth + 1);
            if (cj == NULL) {
                json_decref(out);
                return NULL;
            }
            int bad = is_map ? (key == NULL || json_object_set_new(out, key, cj) != 0)
                             : json_array_append_new(out, cj) != 0;
            if (bad) {
                ll_path_err(p, is_map ? "map key is not valid UTF-8" : "out of memory");
                json_decref(out);
                return NULL;
            }
        }
        return out;
    }
    case LLT_RECORD:
        return conv_record(p, v, w, r, depth);
    case LLT_UNION:
        break;
    }
    ll_path_err(p, "avro-c: %.100s", rc ? avro_strerror() : "unexpected value");
    return NULL;
}
