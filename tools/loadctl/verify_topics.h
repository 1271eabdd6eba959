/*
 * verify_topics.h - what the two files of `loadctl verify --topics` share (not a public header):
 *
 *   verify_topics.c  the check: which partitions, up to where, the file rows, the judgement
 *   verify_read.c    reading the partitions: inputs, replies and dead letters, within the bounds
 */
#ifndef LC_VERIFY_TOPICS_H
#define LC_VERIFY_TOPICS_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>

#include "ll/codec.h"
#include "ll/verify.h"
#include "routes.h"
#include "verify.h"

/* The longest wait for one broker answer (ms). */
#define KAFKA_WAIT_MS 10000

enum { K_INPUT, K_REPLY, K_DLQ };

/* One assigned partition: what it is and where reading stops (exclusive). */
typedef struct part {
    int kind, route; /* route: LC_ROUTES index (K_INPUT, K_REPLY), -1 for dead letters */
    int32_t partition;
    int64_t end; /* inputs: the committed offset; replies, dead letters: the high watermark */
    bool done;
} part;

/* An input record below the committed offset; a chunk report also carries its file key. */
typedef struct input {
    int route;
    int32_t partition;
    int64_t offset;
    char *run, *pid; /* chunks only, owned (NULL when undecodable) */
    int32_t chunk_index;
    bool file_row;
} input;

/* A reply or dead letter naming an input (route -1: a source topic no route knows). */
typedef struct trace {
    int route;
    int32_t partition;
    int64_t offset;
    bool dlq;
    char outcome[16]; /* replies: ACCEPTED, REPLAY, REJECTED */
    char code[64];    /* replies: the code, "" when null */
    ll_grant granted; /* replies: claimed / started, LL_GRANT_NA without such a field */
} trace;

/* The reading of one check: the topics, their schemas, the partitions and what was read. */
typedef struct reader {
    const ll_config *cfg;
    char names[LC_N_ROUTES][2][256], dlq[256];
    ll_schema *schemas[LC_N_ROUTES][2];
    ll_decode_opts dopts[LC_N_ROUTES][2];
    ll_schema_ids *ids;
    part *parts;
    size_t n_parts;
    input *inputs;
    size_t n_inputs, cap_inputs;
    trace *traces;
    size_t n_traces, cap_traces;
    json_t *restored; /* the offsets file of the restore (loadctl offsets save), borrowed, or NULL */
    int64_t records;
} reader;

/* verify_topics.c */
/* The broker topic of partition p. Borrowed from r. */
const char *vf_topics_topic_of(const reader *r, const part *p);

/* verify_read.c: reads until every partition reached its end, or a bound (b: max_records,
 * timeout_ms). Returns true when a bound stopped it. */
bool vf_topics_read_all(reader *r, rd_kafka_t *rk, const vf_bounds *b);

#endif
