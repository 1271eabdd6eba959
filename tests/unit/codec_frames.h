/*
 * codec_frames.h - helpers of the codec unit tests: zig-zag varints and an Avro object
 * container file (null codec, one block of one datum) around a datum, built by hand so a test
 * can embed any writer schema text, hostile ones included.
 */
#ifndef LL_TEST_CODEC_FRAMES_H
#define LL_TEST_CODEC_FRAMES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Writes v as a zig-zag varint at out (>= 10 bytes); returns the bytes written. */
static inline size_t tf_zz(unsigned char *out, int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;
    while (u > 0x7f) {
        out[n++] = (unsigned char)((u & 0x7f) | 0x80);
        u >>= 7;
    }
    out[n++] = (unsigned char)u;
    return n;
}

/* A container file of schema text slen bytes and one datum; malloc'd, *len bytes. */
static inline unsigned char *tf_container(const char *schema, size_t slen, const unsigned char *datum,
                                          size_t dlen, size_t *len)
{
    static const unsigned char sync[16] = "0123456789abcdef";
    unsigned char *b = malloc(slen + dlen + 96);
    size_t k = 0;
    if (b == NULL)
        return NULL;
    memcpy(b, "Obj\x01", 4);
    k = 4;
    k += tf_zz(b + k, 1);
    k += tf_zz(b + k, 11);
    memcpy(b + k, "avro.schema", 11);
    k += 11;
    k += tf_zz(b + k, (int64_t)slen);
    memcpy(b + k, schema, slen);
    k += slen;
    k += tf_zz(b + k, 0);
    memcpy(b + k, sync, 16);
    k += 16;
    k += tf_zz(b + k, 1);
    k += tf_zz(b + k, (int64_t)dlen);
    if (dlen > 0)
        memcpy(b + k, datum, dlen);
    k += dlen;
    memcpy(b + k, sync, 16);
    k += 16;
    *len = k;
    return b;
}

#endif
