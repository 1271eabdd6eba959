/*
 * decode_frames.c - the framings' headers for the decoder (decode_int.h): an Avro object container
 * file (magic, metadata, one block) and a headerless block (count, size, datum), every length
 * checked against the buffer.
 */
#include <stdio.h>
#include <string.h>

#include "decode_int.h"

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

int ll_dec_parse_container(const unsigned char *buf, size_t len, container_parts *cp, char *err,
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

int ll_dec_parse_block(const unsigned char *buf, size_t len, const unsigned char **datum, size_t *dlen,
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
