/*
 * decode_int.h - what the decoder's files share (common/src/codec only):
 *
 *   decode.c          ll_decode: unframe, pick the writer schema, pre-validate, read and project
 *   decode_frames.c   the framings' headers: Avro container file, headerless block
 *   decode_match.c    schema resolution: which reader type a writer type is read as
 *   decode_cursor.c   the binary encoding's values read at a cursor
 *   decode_project.c  a datum of the writer's type read into JSON of the reader's type
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

/* A datum being read: the next byte and the end (the bytes are the caller's). */
typedef struct ll_cur {
    const unsigned char *p, *end;
} ll_cur;

/* decode_cursor.c: reads at a cursor; each returns 0, or -1 with the error at p (a datum that
 * ends early, which ll_prevalidate rules out) */
/* "truncated datum (what)" at p; returns -1. */
int ll_short_datum(ll_path *p, const char *what);
/* A zig-zag varint into *v. */
int ll_cur_long(ll_path *p, ll_cur *c, int64_t *v, const char *what);
/* n raw bytes: *b points at them in the datum, the cursor past them. */
int ll_cur_raw(ll_path *p, ll_cur *c, size_t n, const unsigned char **b, const char *what);
/* A length-prefixed string or bytes value: *b and *n into the datum. */
int ll_cur_bytes(ll_path *p, ll_cur *c, const unsigned char **b, size_t *n, const char *what);
/* The n (4 or 8) little-endian bytes of a float or double as an unsigned integer. */
int ll_cur_le(ll_path *p, ll_cur *c, int n, uint64_t *u);
/* An array's or map's next block count (0: the end; a negative count's byte size is read past). */
int ll_cur_block(ll_path *p, ll_cur *c, int64_t *count);

/* decode_project.c: the JSON (new reference) of the value of writer type w at c (a datum that
 * ll_prevalidate accepted), read as reader type r; the cursor moves past the value. NULL with the
 * error at p. */
json_t *ll_dec_conv(ll_path *p, ll_cur *c, const ll_node *w, const ll_node *r, int depth);

/* decode_frames.c: the container file in buf (len bytes) into cp, or the datum of a headerless
 * block (pointers into buf). 0, or -1 with err. */
int ll_dec_parse_container(const unsigned char *buf, size_t len, container_parts *cp, char *err,
                           size_t errlen);
int ll_dec_parse_block(const unsigned char *buf, size_t len, const unsigned char **datum, size_t *dlen,
                       char *err, size_t errlen);

#endif
