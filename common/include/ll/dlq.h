/*
 * dlq.h - the size of a dead-letter record (docs/design.md §3): a dead letter that cannot be produced
 * would hold its partition for ever, so the record is planned to fit before it is produced.
 *
 * The record keeps the original key, value and headers when they fit, with the loop's own
 * ll.error.* / ll.source.* headers, under the limit min(producer message.max.bytes, the
 * dead-letter topic's max.message.bytes) less LL_DLQ_OVERHEAD. When they do not, the value is
 * dropped first, then the original headers, then the key, and headers say so
 * (ll.payload.omitted, ll.payload.size in bytes, ll.payload.sha256), so an operator can still
 * find the message by topic, partition and offset.
 */
#ifndef LL_DLQ_H
#define LL_DLQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes kept free under the limit for the record batch and per-record framing (bytes). */
#define LL_DLQ_OVERHEAD 1024
/* Room for key, original headers and the loop's own headers that the limit must leave above
 * loop.max_message_bytes, checked at start (bytes). */
#define LL_DLQ_HEADROOM 65536

/* Which parts of the original message go into its dead-letter record. */
typedef struct ll_dlq_fit {
    bool keep_value;   /* the original value */
    bool keep_headers; /* the original headers */
    bool keep_key;     /* the original key */
} ll_dlq_fit;

/*
 * Decides what the record keeps so that key + value + original headers + own_headers (all in
 * bytes, headers as name + value + 8 each) + LL_DLQ_OVERHEAD fit limit: everything if it fits,
 * else without the value, else also without the original headers, else also without the key.
 * Returns 0, or -1 when even the loop's own headers alone do not fit (out says keep nothing).
 */
int ll_dlq_fit_decide(size_t key_len, size_t value_len, size_t headers_len, size_t own_headers_len,
                      size_t limit, ll_dlq_fit *out);

/*
 * Checks at start that any accepted message (up to max_message_bytes) can be dead-lettered whole:
 * max_message_bytes + LL_DLQ_HEADROOM ≤ min(producer_max, topic_max). Returns 0, or -1 with err
 * naming the three settings (loop.max_message_bytes, kafka.message.max.bytes,
 * loop.dead_letter_max_bytes) and their values.
 */
int ll_dlq_limits_check(int64_t max_message_bytes, int64_t producer_max, int64_t topic_max, char *err,
                        size_t errlen);

/* The SHA-256 of len bytes at data as 64 lowercase hex digits and a NUL in out. */
void ll_sha256_hex(const void *data, size_t len, char out[65]);

#endif
