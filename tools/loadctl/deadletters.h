/*
 * deadletters.h - the dead-letter workflow of loadctl (docs/contract.md K§4): `dead-letters`
 * lists and shows the records of the dead-letter topic, `redrive` republishes chosen ones to
 * their source topic. dl_kafka.c holds what both share: the configuration (a service's file),
 * the read_committed reader of the dead-letter topic with its bounds, one record by its
 * coordinates, and the source topic's schema and framing; deadletters.c and redrive.c are the
 * commands.
 */
#ifndef LOADCTL_DEADLETTERS_H
#define LOADCTL_DEADLETTERS_H

#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>

#include "ll/codec.h"
#include "ll/config.h"
#include "loadctl.h"

/* Bounds of a read: records read in all, and wall time (milliseconds). */
typedef struct dl_bounds {
    int64_t max_records;
    int64_t timeout_ms;
} dl_bounds;

/* One dead letter as read: its own coordinates, the ll.* headers, key and value (owned). */
typedef struct dl_record {
    char topic[256];
    int32_t partition;
    int64_t offset;
    char src_topic[256], service[64], code[64], dead_at[40];
    int32_t src_partition; /* -1 when the header is missing */
    int64_t src_offset;    /* -1 when the header is missing */
    char *reason;          /* ll.error.message, "" when missing */
    bool value_omitted;    /* ll.payload.omitted: the value was too large to keep */
    void *key, *value;     /* copies (NULL when absent) */
    size_t key_len, value_len;
    rd_kafka_headers_t *headers; /* every header, copied (NULL when none) */
} dl_record;

/* A deep copy of src into dst (dst's previous contents are not released). */
void dl_record_copy(dl_record *dst, const dl_record *src);
/* Releases what a record owns (the struct itself is the caller's). */
void dl_record_clear(dl_record *d);

/* How the value of a source topic is read and written. */
typedef struct dl_source {
    char topic[256];
    const char *logical; /* static; NULL when the topic is none of the services' inputs */
    ll_schema *schema;   /* owned; NULL for an unknown topic */
    ll_framing framing;
    int32_t schema_id; /* topic.<logical>.schema_id, for the confluent framing; -1 unset */
} dl_source;

/* At most this many source topics are cached per command (the services have 12 inputs). */
#define DL_MAX_SOURCES 32

/* The shared state of a dead-letter command: the configuration and the topic schemas. */
typedef struct dl_ctx {
    ll_config *cfg;
    ll_config_key *keys; /* borrowed by cfg: freed after it */
    ll_schema_ids *ids;  /* schema.ids_file, or NULL */
    char dlq[256];       /* the dead-letter topic's name */
    dl_source src[DL_MAX_SOURCES];
    size_t n_src;
} dl_ctx;

/*
 * Loads the configuration of --config FILE (NULL: the environment only; the keys of a service's
 * file, kafka.bootstrap.servers required) and the schema id table. Returns LC_OK, or LC_USAGE
 * after reporting CONFIG_INVALID with lc_fail.
 */
int dl_open(const lc_opts *o, const char *config, dl_ctx *c);
/* Frees what dl_open loaded. */
void dl_close(dl_ctx *c);

/* Parses --max-records (1..100000000) and --timeout (up to a day) into b; LC_OK or LC_USAGE. */
int dl_parse_bounds(const lc_opts *o, const char *max_records, const char *timeout, dl_bounds *b);

/* A read_committed consumer of c's broker that never commits (group id `group`); NULL + err. */
rd_kafka_t *dl_consumer(const dl_ctx *c, const char *group, char *err, size_t errlen);

/*
 * Calls fn for every record of the dead-letter topic, oldest first per partition, from the low
 * to the high watermark as they were when it started (read_committed). Stops when fn returns
 * non-zero, or a bound is reached (*bounded = true). Returns 0, or -1 with err (broker).
 */
int dl_scan(const dl_ctx *c, const dl_bounds *b, int (*fn)(const dl_record *d, void *arg), void *arg,
            bool *bounded, char *err, size_t errlen);

/* dl_scan over any topic (the source topic of a redrive); the ll.* fields of d are those of
 * the record's own headers. */
int dl_scan_topic(const dl_ctx *c, const char *topic, const dl_bounds *b,
                  int (*fn)(const dl_record *d, void *arg), void *arg, bool *bounded, char *err,
                  size_t errlen);

/* Reads the one record of the dead-letter topic at partition/offset into *d. Returns 1 found,
 * 0 no record there, -1 err (broker). */
int dl_fetch(const dl_ctx *c, int32_t partition, int64_t offset, dl_record *d, char *err, size_t errlen);

/* The source topic's logical name, schema and framing, loaded once per topic (owned by c).
 * NULL with err: a schema that does not load, a bad framing, too many topics. */
const dl_source *dl_source_get(dl_ctx *c, const char *topic, char *err, size_t errlen);
/* Decodes a value of the source topic; a new JSON value, or NULL with err. */
json_t *dl_source_decode(const dl_ctx *c, const dl_source *s, const void *buf, size_t len, char *err,
                         size_t errlen);

/* The record as the JSON object both commands print (without the value). */
json_t *dl_record_json(const dl_record *d);
/* The run id of a dead letter: the decoded value's runId, else its key when that is a UUID;
 * written to out (37 bytes), "" when neither. */
void dl_run_of(dl_ctx *c, const dl_record *d, char *out);

/*
 * Finds the dead letter of COORD (TOPIC:PARTITION:OFFSET): on the dead-letter topic its own
 * coordinates (*own = true), else the source message's (the newest of its dead letters, *count
 * of them, found within b). Fills *d (the caller clears it). Returns LC_OK, or the exit code
 * after reporting USAGE, DEAD_LETTER_NOT_FOUND (LC_REFUSED) or BROKER_UNAVAILABLE (LC_DB).
 */
int dl_find(const lc_opts *o, dl_ctx *c, const dl_bounds *b, const char *coord, dl_record *d, bool *own,
            long *count);

#endif
