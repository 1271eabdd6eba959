/*
 * encode_int.h - what the encoder's files share (common/src/codec only):
 *
 *   encode.c        ll_encode: checks, the avro-c value, the framings (bare, Confluent, container)
 *   encode_fit.c    whether a JSON value fits a type, and the union branch it takes
 *   encode_value.c  a JSON value set into an avro-c generic value of a type
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

/* encode_value.c: sets avro-c value v of type n from j. 0, or -1 with the error at p. */
int ll_enc_set_value(ll_path *p, avro_value_t *v, const ll_node *n, const json_t *j, int depth);

#endif
