/*
 * encode.c - ll_encode: JSON (the decoded shape of codec.h) -> the Avro binary datum
 * (encode_write.c), checked by our own reader, framed bare, Confluent (0x00, big-endian id,
 * datum) or as a one-record container file (null codec, random sync marker).
 *
 * Union branch by JSON type: null -> "null"; true/false -> boolean; string -> string or enum
 * (union order; an enum only when the symbol is its), then bytes or fixed (by length);
 * integer -> int (if it fits) or long in union order, then double or float; real -> double or
 * float; object -> the first record or map (union order) the object fits; array -> array.
 * A record accepts only its own field names; an absent field takes the schema default.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "encode_int.h"

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
    ll_path p = {.n = 0, .err = err, .errlen = errlen};
    /* the Confluent header first, then the datum in the same buffer; a container's header needs
     * the datum's size, so its datum is copied once behind it */
    size_t head = opts->framing == LL_FRAMING_CONFLUENT ? 5 : 0;
    ll_wbuf w = {0};
    unsigned char *out = NULL;
    if (ll_wbuf_reserve(&p, &w, head + 1) != 0) /* never NULL, even for a datum of zero bytes */
        goto fail;
    w.len = head;
    if (ll_enc_write(&p, &w, s->root, value, 0) != 0)
        goto fail;
    size_t dsz = w.len - head;
    const unsigned char *datum = w.b + head;
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
    if (opts->framing == LL_FRAMING_CONFLUENT) {
        uint32_t id = (uint32_t)opts->schema_id;
        w.b[0] = 0;
        w.b[1] = (unsigned char)(id >> 24);
        w.b[2] = (unsigned char)(id >> 16);
        w.b[3] = (unsigned char)(id >> 8);
        w.b[4] = (unsigned char)id;
    }
    if (opts->framing != LL_FRAMING_CONTAINER) {
        /* to its size: a reply's buffer lives on in the producer's queue until delivered (the
         * RSS of a backlog) */
        unsigned char *fit = w.len > 0 && w.len < w.cap ? realloc(w.b, w.len) : NULL;
        *buf = fit != NULL ? fit : w.b;
        *len = w.len;
        return 0;
    }
    size_t textlen = strlen(s->text);
    out = malloc(4 + 10 + 10 + 11 + 10 + textlen + 10 + 10 + 10 + 4 + 10 + 16 + 10 + 10 + 16 + dsz);
    if (out == NULL) {
        ll_codec_err(err, errlen, "out of memory");
        goto fail;
    }
    unsigned char sync[16];
    size_t o = 4;
    memcpy(out, "Obj\x01", 4);
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
    memcpy(out + o, datum, dsz);
    o += dsz;
    memcpy(out + o, sync, 16);
    o += 16;
    free(w.b);
    *buf = out;
    *len = o;
    return 0;
fail:
    free(out);
    free(w.b);
    return -1;
}
