/*
 * decode.c - ll_decode: unframe (bare, Confluent, container file, headerless block), pick the
 * writer schema, pre-validate the datum (validate.c), then read it straight into JSON projected
 * onto the reader schema (decode_project.c; defaults from the reader's JSON). avro-c parses the
 * schemas (schema.c); it reads no datum.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_int.h"

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
    const ll_node *r = ll_schema_same(writer, reader) ? writer->root : reader->root;
    ll_path p = {.n = 0, .err = err, .errlen = errlen, .values = &values};
    ll_cur cur = {datum, datum + dlen};
    json_t *j = ll_dec_conv(&p, &cur, writer->root, r, 0);
    if (j != NULL && cur.p != cur.end) { /* the pre-validator consumed exactly dlen */
        json_decref(j);
        ll_codec_err(err, errlen, "decoder out of step with the pre-validator");
        return -1;
    }
    if (j == NULL)
        return -1;
    *out = j;
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
    if (ll_dec_parse_container(b, len, &cp, err, errlen) != 0)
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

/*
 * The writer schema of a Confluent id from opts->source (*owned, the caller's reference): its
 * text checked and cached like an embedded schema. 0, -1 (the text is refused), or the
 * source's wait (LL_DECODE_UNAVAILABLE, LL_DECODE_UNKNOWN_ID).
 */
static int from_source(const ll_decode_opts *opts, const ll_schema *reader, int32_t id,
                       const ll_budgets *budgets, ll_schema **owned, char *err, size_t errlen)
{
    char *text = NULL, why[400] = "";
    size_t tlen = 0;
    int rc = opts->source(opts->source_ctx, id, &text, &tlen, why, sizeof why);
    if (rc == LL_DECODE_UNAVAILABLE || rc == LL_DECODE_UNKNOWN_ID) {
        ll_codec_err(err, errlen, "%s", why);
        return rc;
    }
    if (rc != 0 || text == NULL) {
        free(text);
        ll_codec_err(err, errlen, "schema id %d: %s", id, why[0] ? why : "no schema");
        return -1;
    }
    char serr[200];
    *owned = ll_schema_embedded(reader, text, tlen, budgets, serr, sizeof serr);
    free(text);
    if (*owned == NULL) {
        ll_codec_err(err, errlen, "schema id %d from the registry: %s", id, serr);
        return -1;
    }
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
        if (opts->ids == NULL && opts->source == NULL) {
            ll_codec_err(err, errlen, "no schema id table for confluent framing (id %d)", id);
            return -1;
        }
        writer = ll_schema_ids_get(opts->ids, id);
        if (writer == NULL && opts->source != NULL) {
            int src = from_source(opts, reader, id, &budgets, &owned, err, errlen);
            if (src != 0)
                return src;
            writer = owned;
        }
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
            if (ll_dec_parse_block(b, len, &datum, &dlen, err, errlen) != 0)
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
