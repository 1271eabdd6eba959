/*
 * encode_int.h - what the encoder's files share (common/src/codec only):
 *
 *   encode.c        ll_encode: checks, the framings (bare, Confluent, container)
 *   encode_fit.c    whether a JSON value fits a type, and the union branch it takes
 *   encode_write.c  a JSON value written as the binary datum of a type
 */
#ifndef LL_ENCODE_INT_H
#define LL_ENCODE_INT_H

#include "codec_internal.h"

/* encode_fit.c */
/* The JSON type of j for error messages ("string", "integer", ...): a constant. */
const char *ll_enc_jtype(const json_t *j);
/* The index of symbol s in enum n, or -1. */
int ll_enc_enum_index(const ll_node *n, const char *s);
/* 1 when j can be encoded as n (depth: nesting so far). */
int ll_enc_fits(const ll_node *n, const json_t *j, int depth);
/* The branch of union u that j is encoded as (the rules of encode.c's header), or -1. */
int ll_enc_choose_branch(const ll_node *u, const json_t *j, int depth);

/* encode_write.c */
/* A growing output buffer: b (malloc'd, the caller frees it, also on failure) holds len bytes of cap. */
typedef struct ll_wbuf {
    unsigned char *b;
    size_t len, cap;
} ll_wbuf;

/* Makes room for n more bytes (doubling from 256). 0, or -1 with "out of memory" at p. */
int ll_wbuf_reserve(ll_path *p, ll_wbuf *w, size_t n);

/* Appends j as the Avro binary datum of type n (depth: nesting so far). 0, or -1 with the error
 * at p (the field path and why: "items.name: missing field without default"). */
int ll_enc_write(ll_path *p, ll_wbuf *w, const ll_node *n, const json_t *j, int depth);

#endif
