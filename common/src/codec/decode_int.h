/*
 * decode_int.h - what the decoder's files share (common/src/codec only):
 *
 *   decode.c          ll_decode: unframe, pick the writer schema, pre-validate, read, project
 *   decode_frames.c   the framings' headers: Avro container file, headerless block
 *   decode_match.c    schema resolution: which reader type a writer type is read as
 *   decode_project.c  an avro-c value of the writer's type turned into JSON of the reader's type
 */
#ifndef LL_DECODE_INT_H
#define LL_DECODE_INT_H

#include "codec_internal.h"

/* The parts of an Avro container file: the writer schema's text and the datum (into the buffer). */
typedef struct container_parts {
    const unsigned char *schema;
    size_t schema_len;
    const unsigned char *datum;
    size_t dlen;
} container_parts;

/* decode_match.c */
/* How a writer's logical type is read as reader type r: 1 as text, 0 as the plain value, -1 not. */
int ll_dec_logical_read(const ll_node *w, const ll_node *r);
/* 2: same type (named: same full name); 1: promotion or same short name; 0: same named kind. */
int ll_dec_match_level(const ll_node *w, const ll_node *r);
/* The reader union branch a writer (non-union) type is read as, or -1. */
int ll_dec_match_branch(const ll_node *w, const ll_node *ru);
/* A type for error messages, with its logical type, written into buf (len bytes); returns buf or
 * a constant. */
const char *ll_dec_lname(const ll_node *n, char *buf, size_t len);
/* "[null, string]": the branches of a reader union, for error messages, into buf. */
const char *ll_dec_union_name(const ll_node *u, char *buf, size_t len);

/* decode_project.c: the JSON (new reference) of avro-c value v of writer type w read as reader
 * type r; NULL with the error at p. */
json_t *ll_dec_conv(ll_path *p, avro_value_t *v, const ll_node *w, const ll_node *r, int depth);

/* decode_frames.c: the container file in buf (len bytes) into cp, or the datum of a headerless
 * block (pointers into buf). 0, or -1 with err. */
int ll_dec_parse_container(const unsigned char *buf, size_t len, container_parts *cp, char *err,
                           size_t errlen);
int ll_dec_parse_block(const unsigned char *buf, size_t len, const unsigned char **datum, size_t *dlen,
                       char *err, size_t errlen);

#endif
