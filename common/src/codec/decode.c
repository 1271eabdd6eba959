/*
 * decode.c - ll_decode: unframe (bare, Confluent, container file, headerless block), pick the
 * writer schema, pre-validate the datum (validate.c), let avro-c read it, and turn the avro-c
 * value into JSON projected onto the reader schema (defaults from the reader's JSON).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "codec_internal.h"

/* ---- projection: avro-c value of writer type w -> JSON of reader type r ---- */

static int is_named(ll_type t)
{
    return t == LLT_RECORD || t == LLT_ENUM || t == LLT_FIXED;
}

/*
 * How a value of writer type w with a logical type (or read as a reader logical type) is read
 * as r: 1 as the text of the writer's logical value, 0 as the plain value, -1 not at all. The
 * writer's logical type decides: decimal -> text (into a string, bytes, or a decimal of the same
 * scale and no smaller precision); date/timestamps -> ISO text into a string, else the number
 * into the same type (plain or the same logical type); uuid -> text. A reader decimal needs a
 * writer decimal (plain bytes are not a decimal).
 */
static int logical_read(const ll_node *w, const ll_node *r)
{
    if (w->logical == LLL_NONE)
        return r->logical == LLL_DECIMAL ? -1 : 0;
    int same_or_plain = r->logical == LLL_NONE || r->logical == w->logical;
    if (r->type == LLT_STRING)
        return same_or_plain ? 1 : -1;
    switch (w->logical) {
    case LLL_DECIMAL:
        if (r->type != LLT_BYTES && r->type != LLT_FIXED)
            return -1;
        if (r->logical == LLL_NONE ||
            (r->logical == LLL_DECIMAL && r->scale == w->scale && r->precision >= w->precision))
            return 1;
        return -1;
    case LLL_UUID:
        return (r->type == LLT_BYTES || r->type == w->type) && same_or_plain ? 1 : -1;
    default:
        return r->type == w->type && same_or_plain ? 0 : -1;
    }
}

/* 2: same type (named: same full name); 1: promotion or same short name; 0: same named kind. */
static int match_level(const ll_node *w, const ll_node *r)
{
    if (w->logical != LLL_NONE || r->logical != LLL_NONE) {
        int lr = logical_read(w, r);
        if (lr < 0)
            return -1;
        if (lr == 1 && (r->type == LLT_STRING || (r->type == LLT_BYTES && w->type != LLT_BYTES)))
            return 1; /* the logical value's text */
    }
    if (w->type == r->type) {
        if (!is_named(w->type))
            return 2;
        if (strcmp(w->fullname, r->fullname) == 0)
            return 2;
        if (strcmp(w->name, r->name) == 0)
            return 1;
        if (w->type == LLT_FIXED && w->size != r->size)
            return -1;
        return 0;
    }
    switch (w->type) {
    case LLT_INT:
        return (r->type == LLT_LONG || r->type == LLT_FLOAT || r->type == LLT_DOUBLE) ? 1 : -1;
    case LLT_LONG:
        return (r->type == LLT_FLOAT || r->type == LLT_DOUBLE) ? 1 : -1;
    case LLT_FLOAT:
        return r->type == LLT_DOUBLE ? 1 : -1;
    case LLT_STRING:
        return r->type == LLT_BYTES ? 1 : -1;
    case LLT_BYTES:
        return r->type == LLT_STRING ? 1 : -1;
    default:
        return -1;
    }
}

/* The reader union branch a writer (non-union) type is read as, or -1. */
static int match_branch(const ll_node *w, const ll_node *ru)
{
    for (int level = 2; level >= 0; level--)
        for (size_t i = 0; i < ru->n; i++)
            if (match_level(w, ru->branches[i]) == level)
                return (int)i;
    return -1;
}

static const char *tname(const ll_node *n)
{
    return n->fullname ? n->fullname : ll_type_name(n->type);
}

/* A type for error messages, with its logical type: "bytes(decimal(38,2))", "long(date)". */
static const char *lname(const ll_node *n, char *buf, size_t len)
{
    if (n->logical == LLL_DECIMAL)
        snprintf(buf, len, "%s(decimal(%d,%d))", tname(n), n->precision, n->scale);
    else if (n->logical != LLL_NONE)
        snprintf(buf, len, "%s(%s)", tname(n), ll_logical_name(n->logical));
    else
        snprintf(buf, len, "%s", tname(n));
    return buf;
}

/* "[null, string]": the branches of a reader union, for error messages. */
static const char *union_name(const ll_node *u, char *buf, size_t len)
{
    size_t k = 0;
    k += (size_t)snprintf(buf, len, "[");
    for (size_t i = 0; i < u->n && k < len; i++) {
        char b[80];
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", lname(u->branches[i], b, sizeof b));
    }
    if (k < len)
        snprintf(buf + k, len - k, "]");
    return buf;
}

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

static json_t *conv(ll_path *p, avro_value_t *v, const ll_node *w, const ll_node *r, int depth);

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
                val = conv(p, &fv, w->fields[wi].type, rf->type, depth + 1);
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

static json_t *conv(ll_path *p, avro_value_t *v, const ll_node *w, const ll_node *r, int depth)
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
        return conv(p, &b, wb, r == w ? wb : r, depth);
    }
    if (r->type == LLT_UNION) {
        int i = match_branch(w, r);
        if (i < 0) {
            char a[120], b[240];
            ll_path_err(p, "writer %s fits no branch of the reader union %s", lname(w, a, sizeof a),
                        union_name(r, b, sizeof b));
            return NULL;
        }
        r = r->branches[i];
    }
    if (r != w && match_level(w, r) < 0) {
        char a[120], b[120];
        ll_path_err(p, "writer %s cannot be read as %s", lname(w, a, sizeof a), lname(r, b, sizeof b));
        return NULL;
    }
    /* text of a logical value: decimals and uuid fixed always, dates and timestamps into text */
    int as_text = w->logical != LLL_NONE && logical_read(w, r) == 1;
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
            json_t *cj = conv(p, &child, w->items, r->items, depth + 1);
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

/* ---- the datum ---- */

/*
 * Pre-validates, reads and projects one datum. The values budget is spent by the walk (every
 * value of the writer's datum) and then by the reader defaults the projection fills in.
 */
static int decode_datum(const ll_schema *writer, const ll_schema *reader, const unsigned char *datum,
                        size_t dlen, size_t max_items, const ll_budgets *b, json_t **out, char *err,
                        size_t errlen)
{
    static const unsigned char empty[1];
    size_t consumed = 0;
    if (datum == NULL)
        datum = empty;
    ll_counter values = {b->values, b->values, "values per datum", "codec.max_values"};
    if (ll_prevalidate(writer->root, datum, dlen, max_items, &values, &consumed, err, errlen) != 0)
        return -1;
    if (consumed != dlen) {
        ll_codec_err(err, errlen, "leftover bytes (%zu) after datum", dlen - consumed);
        return -1;
    }
    avro_value_t v;
    if (avro_generic_value_new(writer->iface, &v) != 0) {
        ll_codec_err(err, errlen, "avro-c: %.100s", avro_strerror());
        return -1;
    }
    avro_reader_t rd = avro_reader_memory((const char *)datum, (int64_t)dlen);
    if (rd == NULL) {
        avro_value_decref(&v);
        ll_codec_err(err, errlen, "out of memory");
        return -1;
    }
    int rc = avro_value_read(rd, &v);
    avro_reader_free(rd);
    if (rc != 0) {
        ll_codec_err(err, errlen, "avro-c cannot read the datum: %.100s", avro_strerror());
        avro_value_decref(&v);
        return -1;
    }
    const ll_node *r = ll_schema_same(writer, reader) ? writer->root : reader->root;
    ll_path p = {.n = 0, .err = err, .errlen = errlen, .values = &values};
    json_t *j = conv(&p, &v, writer->root, r, 0);
    avro_value_decref(&v);
    if (j == NULL)
        return -1;
    *out = j;
    return 0;
}

/* ---- framings ---- */

static int hdr_long(const unsigned char **p, const unsigned char *end, int64_t *v, const char *what,
                    char *err, size_t errlen)
{
    int rc = ll_read_long(p, end, v);
    if (rc == -1)
        ll_codec_err(err, errlen, "truncated %s", what);
    else if (rc != 0)
        ll_codec_err(err, errlen, "malformed varint (%s)", what);
    return rc ? -1 : 0;
}

static int hdr_bytes(const unsigned char **p, const unsigned char *end, const unsigned char **s, size_t *len,
                     const char *what, char *err, size_t errlen)
{
    int64_t n;
    if (hdr_long(p, end, &n, what, err, errlen) != 0)
        return -1;
    if (n < 0 || (uint64_t)n > (size_t)(end - *p)) {
        ll_codec_err(err, errlen, "%s length %lld beyond buffer (%zu bytes left)", what, (long long)n,
                     (size_t)(end - *p));
        return -1;
    }
    *s = *p;
    *len = (size_t)n;
    *p += n;
    return 0;
}

static void printable(char *dst, size_t dstlen, const unsigned char *s, size_t len)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < dstlen; i++)
        dst[k++] = (s[i] >= 0x20 && s[i] < 0x7f) ? (char)s[i] : '?';
    dst[k] = '\0';
}

typedef struct container_parts {
    const unsigned char *schema;
    size_t schema_len;
    const unsigned char *datum;
    size_t dlen;
} container_parts;

static int parse_container(const unsigned char *buf, size_t len, container_parts *cp, char *err,
                           size_t errlen)
{
    const unsigned char *p = buf, *end = buf + len;
    const unsigned char *codec = NULL;
    size_t codec_len = 0;
    if (len < 4 || memcmp(p, "Obj\x01", 4) != 0) {
        ll_codec_err(err, errlen, "bad container magic");
        return -1;
    }
    p += 4;
    cp->schema = NULL;
    for (;;) {
        int64_t count;
        if (hdr_long(&p, end, &count, "container metadata", err, errlen) != 0)
            return -1;
        if (count == 0)
            break;
        if (count < 0) {
            const unsigned char *skip;
            size_t bytes;
            if (count == INT64_MIN) {
                ll_codec_err(err, errlen, "container metadata count out of range");
                return -1;
            }
            count = -count;
            if (hdr_bytes(&p, end, &skip, &bytes, "container metadata block", err, errlen) != 0)
                return -1;
            p = skip; /* the size only says how far the entries go */
        }
        if ((uint64_t)count > (size_t)(end - p) / 2) {
            ll_codec_err(err, errlen, "container metadata count %lld beyond buffer", (long long)count);
            return -1;
        }
        for (int64_t i = 0; i < count; i++) {
            const unsigned char *k, *v;
            size_t kl, vl;
            if (hdr_bytes(&p, end, &k, &kl, "container metadata key", err, errlen) != 0 ||
                hdr_bytes(&p, end, &v, &vl, "container metadata value", err, errlen) != 0)
                return -1;
            if (kl == 11 && memcmp(k, "avro.schema", 11) == 0) {
                if (cp->schema != NULL) {
                    ll_codec_err(err, errlen, "container with two avro.schema entries");
                    return -1;
                }
                cp->schema = v;
                cp->schema_len = vl;
            } else if (kl == 10 && memcmp(k, "avro.codec", 10) == 0) {
                codec = v;
                codec_len = vl;
            }
        }
    }
    if ((size_t)(end - p) < 16) {
        ll_codec_err(err, errlen, "truncated container header (sync marker)");
        return -1;
    }
    const unsigned char *sync = p;
    p += 16;
    if (codec != NULL && !(codec_len == 4 && memcmp(codec, "null", 4) == 0)) {
        char name[40];
        printable(name, sizeof name, codec, codec_len);
        ll_codec_err(err, errlen, "compressed container (codec %s) not supported", name);
        return -1;
    }
    if (cp->schema == NULL) {
        ll_codec_err(err, errlen, "container without avro.schema");
        return -1;
    }
    if (p == end) {
        ll_codec_err(err, errlen, "container with no records");
        return -1;
    }
    int64_t count;
    if (hdr_long(&p, end, &count, "container block", err, errlen) != 0)
        return -1;
    if (count != 1) {
        ll_codec_err(err, errlen, "container block with %lld records (exactly 1 expected)", (long long)count);
        return -1;
    }
    if (hdr_bytes(&p, end, &cp->datum, &cp->dlen, "container block", err, errlen) != 0)
        return -1;
    if ((size_t)(end - p) < 16) {
        ll_codec_err(err, errlen, "truncated container block (sync marker)");
        return -1;
    }
    if (memcmp(p, sync, 16) != 0) {
        ll_codec_err(err, errlen, "container sync marker mismatch");
        return -1;
    }
    p += 16;
    if (p != end) {
        ll_codec_err(err, errlen, "container with more than one block (%zu bytes after the first)",
                     (size_t)(end - p));
        return -1;
    }
    return 0;
}

static int parse_block(const unsigned char *buf, size_t len, const unsigned char **datum, size_t *dlen,
                       char *err, size_t errlen)
{
    const unsigned char *p = buf, *end = buf + len;
    int64_t count, size;
    if (hdr_long(&p, end, &count, "block count", err, errlen) != 0)
        return -1;
    if (count != 1) {
        ll_codec_err(err, errlen, "block with %lld records (exactly 1 expected)", (long long)count);
        return -1;
    }
    if (hdr_long(&p, end, &size, "block size", err, errlen) != 0)
        return -1;
    size_t left = (size_t)(end - p);
    if (size < 0 || (uint64_t)size > left) {
        ll_codec_err(err, errlen, "block size %lld beyond buffer (%zu bytes left)", (long long)size, left);
        return -1;
    }
    if (left - (size_t)size < 16) {
        ll_codec_err(err, errlen, "truncated block (sync marker)");
        return -1;
    }
    if (left - (size_t)size > 16) {
        ll_codec_err(err, errlen, "leftover bytes (%zu) after block sync marker", left - (size_t)size - 16);
        return -1;
    }
    *datum = p;
    *dlen = (size_t)size;
    return 0;
}

/* True when buf starts with the object container file magic ("Obj" 0x01). */
static int is_container(const unsigned char *buf, size_t len)
{
    return len >= 4 && memcmp(buf, "Obj\x01", 4) == 0;
}

/* A container file's one datum and its embedded writer schema (*owned, the caller's reference). */
static int unframe_container(const ll_schema *reader, const unsigned char *b, size_t len,
                             const ll_budgets *budgets, ll_schema **owned, const unsigned char **datum,
                             size_t *dlen, char *err, size_t errlen)
{
    container_parts cp;
    memset(&cp, 0, sizeof cp);
    if (parse_container(b, len, &cp, err, errlen) != 0)
        return -1;
    char serr[200];
    *owned = ll_schema_embedded(reader, (const char *)cp.schema, cp.schema_len, budgets, serr, sizeof serr);
    if (*owned == NULL) {
        ll_codec_err(err, errlen, "embedded schema: %s", serr);
        return -1;
    }
    *datum = cp.datum;
    *dlen = cp.dlen;
    return 0;
}

int ll_decode(const ll_decode_opts *opts, const void *buf, size_t len, json_t **out, char *err, size_t errlen)
{
    static const unsigned char empty[1];
    if (out != NULL)
        *out = NULL;
    if (opts == NULL || opts->reader == NULL || out == NULL || (buf == NULL && len > 0)) {
        ll_codec_err(err, errlen, "bad arguments");
        return -1;
    }
    size_t max = opts->max_message_bytes ? opts->max_message_bytes : LL_CODEC_DEFAULT_MAX_MESSAGE;
    if (len > max) {
        ll_codec_err(err, errlen, "message of %zu bytes exceeds the maximum %zu", len, max);
        return -1;
    }
    const unsigned char *b = buf ? buf : empty;
    ll_budgets budgets;
    ll_budgets_of(opts, &budgets);
    const ll_schema *reader = opts->reader;
    const ll_schema *writer = reader;
    ll_schema *owned = NULL;
    const unsigned char *datum = b;
    size_t dlen = len;
    int rc = -1;

    switch (opts->framing) {
    case LL_FRAMING_BARE:
        break;
    case LL_FRAMING_CONFLUENT: {
        if (len < 5) {
            ll_codec_err(err, errlen, "truncated confluent header (%zu bytes)", len);
            return -1;
        }
        if (b[0] != 0) {
            ll_codec_err(err, errlen, "bad confluent magic byte 0x%02x", b[0]);
            return -1;
        }
        int32_t id = (int32_t)(((uint32_t)b[1] << 24) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 8) |
                               (uint32_t)b[4]);
        if (opts->ids == NULL) {
            ll_codec_err(err, errlen, "no schema id table for confluent framing (id %d)", id);
            return -1;
        }
        writer = ll_schema_ids_get(opts->ids, id);
        if (writer == NULL) {
            ll_codec_err(err, errlen, "unknown schema id %d", id);
            return -1;
        }
        datum = b + 5;
        dlen = len - 5;
        break;
    }
    case LL_FRAMING_BLOCK:
        /* NiFi's embedded-schema writer with one message per record: the first record of a
         * FlowFile is a whole container file, the following ones headerless blocks (kafka-edition.md
         * section 5). A block of one record starts with 0x02, never with the container magic. */
        if (!is_container(b, len)) {
            if (parse_block(b, len, &datum, &dlen, err, errlen) != 0)
                return -1;
            break;
        }
        if (unframe_container(reader, b, len, &budgets, &owned, &datum, &dlen, err, errlen) != 0)
            return -1;
        writer = owned;
        break;
    case LL_FRAMING_CONTAINER:
        if (unframe_container(reader, b, len, &budgets, &owned, &datum, &dlen, err, errlen) != 0)
            return -1;
        writer = owned;
        break;
    default:
        ll_codec_err(err, errlen, "unknown framing %d", (int)opts->framing);
        return -1;
    }
    rc = decode_datum(writer, reader, datum, dlen, max, &budgets, out, err, errlen);
    ll_schema_unref(owned);
    return rc;
}
