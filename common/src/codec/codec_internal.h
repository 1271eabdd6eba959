/*
 * codec_internal.h - private types of the Avro codec (common/src/codec only).
 *
 * A schema is parsed twice: once by our own parser (schema.c) into a tree of ll_node, which
 * checks everything avro-c 1.11.1 would trip over (negative or huge fixed sizes, unknown or
 * duplicate names, nesting) and carries the JSON defaults avro-c drops; then by avro-c itself.
 * The two parses are compared structurally, so walking the ll_node tree walks the very layout
 * avro-c reads and writes.
 */
#ifndef LL_CODEC_INTERNAL_H
#define LL_CODEC_INTERNAL_H

#include <avro.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "ll/codec.h"

/* Limits. */
#define LL_CODEC_MAX_DEPTH           32      /* records/arrays/maps nested in one datum */
#define LL_CODEC_MAX_SCHEMA_DEPTH    64      /* type nodes nested in a schema's JSON */
#define LL_CODEC_MAX_FIXED           1048576 /* largest fixed size a schema may declare */
#define LL_CODEC_DEFAULT_MAX_MESSAGE 1048576
#define LL_CODEC_MAX_SCHEMA_FILE     (4u * 1024u * 1024u)
#define LL_CODEC_WRITER_CACHE        4 /* embedded writer schemas remembered per reader */

typedef enum ll_type {
    LLT_NULL = 0,
    LLT_BOOLEAN,
    LLT_INT,
    LLT_LONG,
    LLT_FLOAT,
    LLT_DOUBLE,
    LLT_BYTES,
    LLT_STRING,
    LLT_RECORD,
    LLT_ENUM,
    LLT_ARRAY,
    LLT_MAP,
    LLT_UNION,
    LLT_FIXED
} ll_type;

struct ll_node;

typedef struct ll_field {
    const char *name; /* borrowed from the schema JSON */
    struct ll_node *type;
    json_t *def;     /* the "default" JSON, borrowed, or NULL */
    json_t *aliases; /* the "aliases" array, borrowed, or NULL */
} ll_field;

typedef struct ll_node {
    ll_type type;
    char *fullname;            /* named types: as avro-c qualifies it; malloc'd */
    const char *name;          /* named types: the short name (borrowed) */
    size_t n;                  /* fields, symbols or branches */
    ll_field *fields;          /* record */
    const char **symbols;      /* enum, borrowed strings */
    const char *enum_default;  /* enum "default", borrowed, or NULL */
    struct ll_node **branches; /* union */
    struct ll_node *items;     /* array items, map values */
    size_t size;               /* fixed */
} ll_node;

struct ll_schema {
    avro_schema_t avro;
    avro_value_iface_t *iface; /* generic class of avro */
    json_t *json;              /* the parsed schema JSON (owns every borrowed string) */
    char *text;                /* compact JSON text, embedded in container files */
    char *orig;                /* the text as given */
    size_t orig_len;
    ll_node *root;
    ll_node **nodes; /* every node, for freeing */
    size_t nnodes, capnodes;
    /*
     * Reference count (ll_schema_free drops one) and, for a reader, the last writer schemas
     * embedded in container files, keyed by their text, so a topic's messages do not parse the
     * same embedded schema every time. The lock guards the cache only.
     */
    unsigned refs;
    pthread_mutex_t lock;
    ll_schema *cache[LL_CODEC_WRITER_CACHE];
    unsigned cache_next;
};

/* err helpers (common.c) */
void ll_codec_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *ll_type_name(ll_type t);

/* Parses schema JSON text of len bytes (not necessarily NUL-terminated). */
ll_schema *ll_schema_parse(const char *text, size_t len, char *err, size_t errlen);
/* Takes and drops a reference. */
ll_schema *ll_schema_ref(ll_schema *s);
void ll_schema_unref(ll_schema *s);
/*
 * The writer schema of an embedded schema text (len bytes) for decoding with reader: the reader
 * itself when the text is the reader's, else a cached or newly parsed schema. Returns a new
 * reference (release with ll_schema_unref), or NULL with err.
 */
ll_schema *ll_schema_embedded(const ll_schema *reader, const char *text, size_t len, char *err,
                              size_t errlen);
/* 1 when a and b describe the same schema (same object, or equal JSON). */
int ll_schema_same(const ll_schema *a, const ll_schema *b);

/*
 * Reader-shaped JSON for a default value of type n (union: the first branch). Returns a new
 * reference, or NULL with err filled.
 */
json_t *ll_default_to_json(const ll_node *n, const json_t *def, int depth, char *err, size_t errlen);

/*
 * Walks the binary datum buf[0..len) against n, with every length bounded by the buffer, at
 * most max_items array/map items in total and LL_CODEC_MAX_DEPTH nesting. On success stores
 * the bytes consumed in *consumed and returns 0; else -1 with err.
 */
int ll_prevalidate(const ll_node *n, const unsigned char *buf, size_t len, size_t max_items, size_t *consumed,
                   char *err, size_t errlen);

/* Zig-zag varint helpers (varint.c). */
/* Reads a long at *p (< end). Returns 0, -1 truncated, -2 longer than 10 bytes / overflow. */
int ll_read_long(const unsigned char **p, const unsigned char *end, int64_t *out);
/* Writes v as a zig-zag varint into out (>= 10 bytes). Returns the bytes written. */
size_t ll_write_long(unsigned char *out, int64_t v);

/* Field path for error messages ("items.name: expected string"), common.c. */
#define LL_PATH_MAX 80
typedef struct ll_path {
    const char *names[LL_PATH_MAX];
    int n;
    char *err;
    size_t errlen;
} ll_path;
void ll_path_push(ll_path *p, const char *name);
void ll_path_pop(ll_path *p);
void ll_path_err(ll_path *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* UTF-8 validity (common.c). */
int ll_utf8_valid(const unsigned char *s, size_t len);

#endif
