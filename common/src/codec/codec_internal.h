/*
 * codec_internal.h - private types of the Avro codec (common/src/codec only).
 *
 * A schema is parsed by our own parser (schema_parse.c) into a tree of ll_node, which refuses
 * what avro-c 1.11.1 would trip over (negative or huge fixed sizes, unknown or duplicate names,
 * nesting), follows avro-c's name rules and keeps the JSON defaults avro-c drops. The codec reads
 * and writes every datum itself along that tree; no service links avro-c. That avro-c reads every
 * schema we accept as the same structure is checked by the tests and by the fuzz_schema target
 * (ll/codecavro.h, common/src/codecavro), not at run time.
 */
#ifndef LL_CODEC_INTERNAL_H
#define LL_CODEC_INTERNAL_H

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
#define LL_CODEC_WRITER_CACHE_MAX    256 /* most writer schemas a reader's cache can hold */

/* Budget defaults (ll_decode_opts: 0 = these). */
#define LL_CODEC_DEF_SCHEMA_BYTES   65536u   /* embedded writer schema text */
#define LL_CODEC_DEF_EXPANSIONS     100000u  /* types reached with named references expanded */
#define LL_CODEC_DEF_VALUES         100000u  /* values walked in one datum */
#define LL_CODEC_DEF_DEFAULT_VALUES 10000u   /* values built while checking a schema's defaults */
#define LL_CODEC_DEF_CACHE_ENTRIES  32u      /* writer schemas cached per reader */
#define LL_CODEC_DEF_CACHE_BYTES    1048576u /* schema text cached per reader (bytes) */

/* The budgets in force for one call, every field resolved (never 0). */
typedef struct ll_budgets {
    size_t schema_bytes, expansions, values, default_values, cache_entries, cache_bytes;
} ll_budgets;

/* The budgets of opts (NULL: all defaults), zeros replaced by the defaults. */
void ll_budgets_of(const ll_decode_opts *opts, ll_budgets *out);

/*
 * A budget being spent: `left` units remain of `budget`; `what` and `key` name it in the
 * error ("values per datum over 100000 (budget codec.max_values)").
 */
typedef struct ll_counter {
    size_t left, budget;
    const char *what, *key;
} ll_counter;

/* Takes n units. Returns 0, or -1 with the budget named in err when fewer than n remain. */
int ll_counter_take(ll_counter *c, size_t n, char *err, size_t errlen);

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

/* Logical types the codec honours (the writer's decides how a value is read). */
typedef enum ll_logical {
    LLL_NONE = 0,
    LLL_DECIMAL,    /* bytes or fixed: two's complement big-endian unscaled value */
    LLL_DATE,       /* int: days since 1970-01-01 */
    LLL_TS_MILLIS,  /* long: UTC milliseconds since the epoch */
    LLL_TS_MICROS,  /* long: UTC microseconds */
    LLL_LTS_MILLIS, /* long: local milliseconds (no zone) */
    LLL_LTS_MICROS, /* long: local microseconds */
    LLL_UUID        /* string */
} ll_logical;

/* The Avro name of a logical type ("timestamp-millis"; "" for LLL_NONE). */
const char *ll_logical_name(ll_logical l);

struct ll_node;

typedef struct ll_field {
    const char *name; /* borrowed from the schema JSON */
    struct ll_node *type;
    json_t *def;     /* the "default" JSON, borrowed, or NULL */
    json_t *aliases; /* the "aliases" array, borrowed, or NULL */
} ll_field;

typedef struct ll_node {
    ll_type type;
    ll_logical logical;        /* the "logicalType" honoured for this node, LLL_NONE else */
    int precision, scale;      /* decimal */
    int walking;               /* set while the expansion walk is inside this node (parse only) */
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
    json_t *json; /* the parsed schema JSON (owns every borrowed string) */
    char *text;   /* compact JSON text, embedded in container files */
    char *orig;   /* the text as given */
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
    struct ll_cache_ent {
        uint64_t fp;   /* CRC-64-AVRO of the text as embedded */
        size_t bytes;  /* text bytes charged to the cache */
        uint64_t used; /* last use, for eviction */
        ll_schema *s;
    } cache[LL_CODEC_WRITER_CACHE_MAX];
    size_t cache_n, cache_bytes;
    uint64_t cache_clock;
};

/* err helpers (common.c) */
void ll_codec_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
const char *ll_type_name(ll_type t);

/*
 * Parses schema JSON text of len bytes (not necessarily NUL-terminated), refusing a schema that
 * expands to more than b->expansions types or whose defaults build more than b->default_values
 * values (b NULL: the defaults). The text size is the caller's to bound.
 */
ll_schema *ll_schema_parse(const char *text, size_t len, const ll_budgets *b, char *err, size_t errlen);
/* Takes and drops a reference. */
ll_schema *ll_schema_ref(ll_schema *s);
void ll_schema_unref(ll_schema *s);
/*
 * The writer schema of an embedded schema text (len bytes) for decoding with reader: the reader
 * itself when the text is the reader's, else one cached by fingerprint (the text compared too),
 * else newly parsed within b and cached (at most b->cache_entries schemas and b->cache_bytes of
 * text, least recently used evicted). A text over b->schema_bytes is refused unparsed. Returns a
 * new reference (release with ll_schema_unref), or NULL with err.
 */
ll_schema *ll_schema_embedded(const ll_schema *reader, const char *text, size_t len, const ll_budgets *b,
                              char *err, size_t errlen);
/* 1 when a and b describe the same schema (same object, or equal JSON). */
int ll_schema_same(const ll_schema *a, const ll_schema *b);

/*
 * Reader-shaped JSON for a default value of type n (union: the first branch), each value built
 * taken from *budget (NULL: unbounded, for callers that bound it otherwise). Returns a new
 * reference, or NULL with err filled.
 */
json_t *ll_default_to_json(const ll_node *n, const json_t *def, int depth, ll_counter *budget, char *err,
                           size_t errlen);

/*
 * Walks the binary datum buf[0..len) against n, with every length bounded by the buffer, at
 * most max_items array/map items in total, LL_CODEC_MAX_DEPTH nesting and at most
 * values->left values walked (every value counts, zero-byte ones too; the counter is spent).
 * On success stores the bytes consumed in *consumed and returns 0; else -1 with err.
 */
int ll_prevalidate(const ll_node *n, const unsigned char *buf, size_t len, size_t max_items,
                   ll_counter *values, size_t *consumed, char *err, size_t errlen);

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
    ll_counter *values; /* decoding: the datum's values budget, also spent by reader defaults */
} ll_path;
void ll_path_push(ll_path *p, const char *name);
void ll_path_pop(ll_path *p);
void ll_path_err(ll_path *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- logical types (logical.c) ---- */

/*
 * The decimal text of n bytes of two's complement big-endian unscaled value with the given
 * scale ("125.94", "-0.01", "7" for scale 0) into out (64 bytes suffice). Returns 0, or -1 with
 * err: no bytes, or more digits than precision.
 */
int ll_decimal_text(const unsigned char *b, size_t n, int precision, int scale, char *out, size_t outlen,
                    char *err, size_t errlen);
/* "YYYY-MM-DD" of a day count since 1970-01-01 (out >= 11 bytes). -1 outside years 1..9999. */
int ll_date_text(int64_t days, char *out, size_t outlen, char *err, size_t errlen);
/*
 * ISO-8601 text of a timestamp of logical type l (millis: ".mmm", micros: ".uuuuuu"; UTC ones
 * end in "Z", local ones have no zone), out >= 32 bytes. -1 outside years 1..9999.
 */
int ll_timestamp_text(int64_t v, ll_logical l, char *out, size_t outlen, char *err, size_t errlen);
/* The canonical lower-case text of a 16-byte UUID. */
void ll_uuid_text(const unsigned char b[16], char out[37]);

/* UTF-8 validity (common.c). */
int ll_utf8_valid(const unsigned char *s, size_t len);

#endif
