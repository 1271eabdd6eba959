/*
 * codec.h - Avro messages as NiFi 2.x writes them, read into and written from jansson values.
 *
 * Every input message is untrusted. Before any value of a datum is read, the codec walks it against
 * the writer schema and checks every length (string, bytes, block, fixed) against the remaining buffer
 * and the configured maximum message size, bounds the nesting depth, and requires that the datum
 * consumes the buffer exactly (docs/contract.md K§5: avro-c 1.11.1 trusts lengths, and leftover
 * bytes mean the schema is not the writer's). The codec then reads and writes the binary datum
 * itself; avro-c only parses the schemas (a cross-check of the codec's own parse).
 *
 * JSON shape of a decoded value: record -> object by field name; union -> JSON null or the plain
 * value of the branch (no {"type": v} wrapper); enum -> string; map -> object; array -> array;
 * int/long -> integer; float/double -> real; boolean -> true/false; string -> string;
 * bytes/fixed -> string of the raw bytes (must be valid UTF-8, else a decode error). Strings,
 * bytes and fixed read as text must not contain NUL (a decode error, never cut short).
 *
 * Logical types: the writer's decides. decimal (bytes, fixed) -> exact decimal text with the
 * writer's scale ("125.94", "-0.01"); date -> "2026-09-28" and timestamp-millis/-micros,
 * local-timestamp-millis/-micros -> "2026-09-28T12:34:56.789Z" (micros: 6 digits; local: no
 * "Z") when the reader's type is string (into the same type they stay integers); uuid -> text.
 * Any other pairing is a decode error naming the field and both types ("v: writer
 * long(timestamp-millis) cannot be read as double").
 *
 * Schema evolution: when the writer schema (embedded in a container file, or named by a Confluent
 * schema id) differs from the reader schema of the topic, the datum is decoded with the writer
 * schema and projected onto the reader schema by field name: fields the writer lacks take the
 * reader's default (the whole tree: nested records in arrays, maps and unions too), fields the
 * reader lacks are dropped. A reader field without a default that the writer lacks is an error.
 * avro-c's own resolver is never used (it does not apply defaults and double-frees on failure).
 */
#ifndef LL_CODEC_H
#define LL_CODEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Value framing of a topic (docs/contract.md K§5). Configuration, never guessed from bytes. */
typedef enum ll_framing {
    LL_FRAMING_BARE = 0,  /* the bare binary datum ("Do Not Write Schema") */
    LL_FRAMING_CONFLUENT, /* 0x00, 4-byte big-endian schema id, datum */
    LL_FRAMING_CONTAINER, /* an Avro object container file ("Obj" 0x01 ...), null codec only */
    LL_FRAMING_BLOCK      /* a container block without the file header: count, size, datum, 16-byte sync;
                           * a whole container file too (NiFi's "Embed Avro Schema" writer sends the
                           * first record of a FlowFile as a container, the following ones as blocks;
                           * the container magic cannot start a block of one record) */
} ll_framing;

/* Parses "bare", "confluent", "container" or "block". Returns 0, or -1 for an unknown name. */
int ll_framing_parse(const char *name, ll_framing *out);
/* The configuration names of the framings in ll_framing's order ("bare", "confluent", "container",
 * "block"), NULL-terminated: topic.<logical>.framing's words for ll_config_enum. Static. */
extern const char *const LL_FRAMING_NAMES[];
/* The configuration name of a framing (static string). */
const char *ll_framing_name(ll_framing f);

/*
 * A parsed Avro schema: the avro-c schema plus its JSON text (for defaults and embedding).
 * Immutable once loaded, so threads may share one; ll_schema_free must not race with its use.
 *
 * Loading checks the JSON before avro-c sees it and refuses: a fixed size outside 1..1 MiB
 * (negative sizes corrupt avro-c's heap; avro-c cannot read a fixed of size 0), a record without
 * fields (avro-c refuses them), unknown or duplicate type names, duplicate field names or enum
 * symbols, invalid names, a union inside a union or with two branches of one type, nesting deeper
 * than 64 types, duplicate JSON keys, a default that does not fit its type (a union's default
 * is for its first branch; an enum's own "default" must be one of its symbols) or contains NUL,
 * a record that contains itself with no union, array or map between, a decimal whose precision
 * is outside 1..38 (or does not fit its fixed) or scale outside 0..precision, another logical
 * type on bytes or fixed, and a schema over the default budgets of ll_decode_opts (types reached
 * with named types expanded, values built by its defaults).
 */
typedef struct ll_schema ll_schema;

/* Loads a schema from an .avsc file. Returns NULL and fills err on failure. Caller frees. */
ll_schema *ll_schema_from_file(const char *path, char *err, size_t errlen);
/* Parses a schema from JSON text. Returns NULL and fills err on failure. Caller frees. */
ll_schema *ll_schema_from_json(const char *json_text, char *err, size_t errlen);
/* Frees a schema (NULL is allowed). */
void ll_schema_free(ll_schema *s);
/*
 * The full name of a named schema ("loadledger.ChunkWritten"); borrowed, valid with s. For an
 * unnamed schema, its type name ("string", "array", "map", "union"); "" for NULL.
 */
const char *ll_schema_fullname(const ll_schema *s);
/* The schema's compact JSON text (as embedded in container files; registered with a schema
 * registry); borrowed, valid with s; "" for NULL. */
const char *ll_schema_text(const ll_schema *s);

/*
 * A local schema-id table for the Confluent framing at sites without a registry: a JSON file
 * {"<id>": "<path to .avsc, relative to the file's folder>", ...}. Ids are decimal 0..2^31-1;
 * an absolute path is used as is. Any bad entry fails the whole load (err names the id).
 */
typedef struct ll_schema_ids ll_schema_ids;

/* Loads the id table and every schema it names. Returns NULL and fills err on failure. */
ll_schema_ids *ll_schema_ids_load(const char *path, char *err, size_t errlen);
/* Frees the table and its schemas (NULL is allowed). */
void ll_schema_ids_free(ll_schema_ids *ids);
/* The schema of an id, borrowed, or NULL when the id is unknown. */
const ll_schema *ll_schema_ids_get(const ll_schema_ids *ids, int32_t id);
/* Adds a schema under an id (the table takes ownership of s). Returns 0, or -1 if id exists. */
int ll_schema_ids_put(ll_schema_ids *ids, int32_t id, ll_schema *s);
/* A new, empty table. Caller frees with ll_schema_ids_free. */
ll_schema_ids *ll_schema_ids_new(void);

/*
 * Where a Confluent schema id that the ids table lacks is looked up (a schema registry,
 * registry.h; docs/design.md "Schema registry"): returns 0 with *text (malloc'd, *len bytes,
 * the caller frees), LL_DECODE_UNKNOWN_ID when the source does not know the id, or
 * LL_DECODE_UNAVAILABLE when it cannot be asked now (a wait); err says why.
 */
typedef int (*ll_schema_source_fn)(void *ctx, int32_t id, char **text, size_t *len, char *err, size_t errlen);

/* ll_decode's answers besides 0 and -1, only with a schema source (ll_decode_opts.source). */
#define LL_DECODE_UNAVAILABLE (-2) /* the writer schema's source cannot be reached: wait, try again */
#define LL_DECODE_UNKNOWN_ID  (-3) /* the source does not know the writer schema's id (yet) */

/*
 * How one topic's messages are read. All pointers are borrowed. The budgets bound the work one
 * message can cause and are checked before that work (docs/design.md "Input safety"); 0 takes
 * the default. A refusal names the budget and its configuration key in the error.
 */
typedef struct ll_decode_opts {
    ll_framing framing;
    const ll_schema *reader;  /* the topic's current schema; also the writer for bare and block */
    const ll_schema_ids *ids; /* for LL_FRAMING_CONFLUENT; may be NULL for other framings */
    size_t max_message_bytes; /* a message longer than this is refused (bytes); 0 = 1 MiB */
    size_t max_schema_bytes;  /* embedded writer schema text (bytes); 0 = 64 KiB */
    /* types reached in an embedded writer schema with every named-type reference expanded
     * (ChunkWritten: about 20); 0 = 100,000 */
    size_t max_schema_expansions;
    size_t max_values;           /* values walked per datum, zero-byte ones (null) too; 0 = 100,000 */
    size_t max_default_values;   /* values built checking an embedded schema's defaults; 0 = 10,000 */
    size_t writer_cache_entries; /* embedded writer schemas cached per reader; 0 = 32 (max 256) */
    size_t writer_cache_bytes;   /* their schema text in total (bytes); 0 = 1 MiB */
    /* for LL_FRAMING_CONFLUENT: ids the table lacks are looked up here (NULL: none); the text
     * found is checked and cached as an embedded writer schema (the budgets above) */
    ll_schema_source_fn source;
    void *source_ctx;
} ll_decode_opts;

/*
 * Decodes one Kafka message value into *out (a new reference the caller releases with
 * json_decref). Returns 0, or -1 with a one-line reason in err (for the dead-letter header):
 * truncated input, a length beyond the buffer or the maximum, bad magic, unknown schema id,
 * a compressed container block, a container with other than exactly one record, leftover bytes
 * after the datum, a missing field without default, nesting deeper than 32.
 *
 * Details: *out is NULL on failure. Nesting counts records, arrays and maps (unions do not
 * count). Arrays and maps may use negative block counts (the byte size that follows must match
 * the block); their items in total may not exceed max_message_bytes (zero-size items such as
 * nulls are bounded too). Booleans must be 0 or 1, ints fit 32 bits, strings, bytes, fixed and
 * map keys must be UTF-8 without NUL, floats must be finite. The budgets of opts are spent
 * before the work they bound (a refusal names the budget: "values per datum over 100000 (budget
 * codec.max_values)"). A writer enum symbol
 * the reader lacks takes the reader enum's "default", else it is an error. Writer and reader
 * fields match by name or by the reader field's "aliases"; promotions int->long/float/double,
 * long->float/double, float->double, string<->bytes. A container's embedded schema equal to
 * the reader's text needs no projection; other embedded schemas are parsed with the same
 * checks as ll_schema_from_json within the budgets and cached in the reader by fingerprint
 * (bounded by writer_cache_entries and writer_cache_bytes; thread-safe).
 * Concurrent calls may share opts, reader and ids. With opts->source set, a Confluent id that
 * ids lacks is looked up there; its text is parsed like an embedded schema (the same checks and
 * budgets, cached in the reader); the source's waits are returned as LL_DECODE_UNAVAILABLE or
 * LL_DECODE_UNKNOWN_ID (err names the id). Without a source, the answer is 0 or -1 only.
 */
int ll_decode(const ll_decode_opts *opts, const void *buf, size_t len, json_t **out, char *err,
              size_t errlen);

/* How one topic's messages are written. */
typedef struct ll_encode_opts {
    ll_framing framing;      /* BARE, CONFLUENT or CONTAINER (BLOCK is input only) */
    const ll_schema *schema; /* writer schema, borrowed */
    int32_t schema_id;       /* written with LL_FRAMING_CONFLUENT */
} ll_encode_opts;

/*
 * Encodes value (shape as above; a union branch is chosen by the JSON type; an absent record
 * field takes the schema default) into a malloc'd buffer *buf of *len bytes that the caller
 * frees. Returns 0, or -1 with a reason in err (a value that does not fit the schema).
 *
 * Union branch by JSON type, first fitting branch in union order: null -> null; true/false ->
 * boolean; string -> string or enum (a symbol of it), else bytes or fixed (of that length);
 * integer -> int (if it fits 32 bits) or long, else double or float; real -> double or float;
 * object -> the record it fits (only its field names, every field without default present) or
 * a map; array -> array. A record's unknown keys are an error; an absent union field takes its
 * default for the first branch. Errors name the field path ("items.name: expected string, got
 * integer"). Values nested deeper than 32 objects/arrays are refused (ll_decode would refuse
 * them), and the datum is checked by the decoder's own walker before it is returned.
 * LL_FRAMING_CONTAINER writes avro.schema (the schema's compact JSON) and avro.codec "null",
 * a random 16-byte sync marker and one block with the one datum. *buf is NULL on failure.
 */
int ll_encode(const ll_encode_opts *opts, const json_t *value, unsigned char **buf, size_t *len, char *err,
              size_t errlen);

/* The CRC-64-AVRO (Rabin) fingerprint of len bytes (the Avro specification, "Schema
 * Fingerprints"): the writer-schema cache's key, and the digest of an input's bytes a recorded
 * refusal is matched on (batch.c). Not a cryptographic hash. */
uint64_t ll_fingerprint64(const void *buf, size_t len);

#endif
