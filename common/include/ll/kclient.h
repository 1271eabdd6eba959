/*
 * kclient.h - the Kafka client settings and calls the consumer loop relies on, with the
 * librdkafka 2.0.2 (Debian 12) defects worked around where they arise:
 *
 *   - settings that would break the loop's guarantees are refused at start, never overridden in
 *     silence (docs/design.md §3, docs/contract.md K§3): offsets are committed only inside the Kafka
 *     transaction after the database commit, a new consumer group starts at the earliest offset,
 *     replies are read committed, and the assignor is eager (2.0.2 mishandles commits during a
 *     cooperative rebalance, fixed in 2.10.0);
 *   - rd_kafka_seek_partitions() of librdkafka < 2.1.0 waits its timeout in microseconds where
 *     milliseconds are passed (fixed upstream in 2.1.0): ll_kafka_seek scales the argument so the
 *     wait is the one asked for, and checks every per-partition error.
 */
#ifndef LL_KCLIENT_H
#define LL_KCLIENT_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ll/log.h"

/*
 * Why a consumer/producer property given as kafka.<key> = value must be refused at start, or
 * NULL when it is allowed. The reason is a static string naming what the setting would break.
 * Refused: enable.auto.commit and enable.auto.offset.store other than false, auto.offset.reset
 * other than earliest (or its aliases smallest, beginning), isolation.level other than
 * read_committed, a cooperative partition.assignment.strategy, enable.idempotence other than
 * true, and transactional.id (derived from the group and service.instance_id).
 */
const char *ll_kconf_refusal(const char *key, const char *value);

/*
 * The timeout argument to pass to rd_kafka_seek_partitions() so that it really waits timeout_ms
 * milliseconds with librdkafka version rdk_version (rd_kafka_version(): 0xMMmmrrxx): versions
 * before 2.1.0 take it as microseconds, so it is scaled by 1000 (capped at INT_MAX).
 */
int ll_seek_timeout_arg(int rdk_version, int timeout_ms);

/*
 * Seeks the consumer rk to the offsets in parts (the list is updated with per-partition errors),
 * waiting up to timeout_ms milliseconds. Returns 0 when every partition was positioned, -1 with
 * a one-line reason in why (the call's error, or the first partition's) otherwise.
 */
int ll_kafka_seek(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts, int timeout_ms, char *why,
                  size_t whylen);

/*
 * The broker's max.message.bytes of topic (its own or the broker default, in bytes), asked with
 * DescribeConfigs through client rk and waiting up to timeout_ms. Returns 0 with *out set, or -1
 * with a one-line reason in why (topic missing, broker unreachable, timed out).
 */
int ll_kafka_topic_max_message_bytes(rd_kafka_t *rk, const char *topic, int timeout_ms, int64_t *out,
                                     char *why, size_t whylen);

/*
 * The consumer's fetch and prefetch sizes (memory under a backlog: docs/design.md §3). librdkafka's own
 * defaults fetch up to 50 MiB a response and prefetch up to 100,000 messages or 64 MiB before
 * the loop asks for them; the loop's defaults fetch LL_KFETCH_FETCH_BYTES a response and queue
 * LL_KFETCH_QUEUED_FETCHES responses (the consumer's one queue, all partitions together: each
 * partition's fetch queue is forwarded to it, and librdkafka compares that queue's size). A field
 * is 0 when kafka.<property> is not configured.
 *
 * A message larger than the fetch sizes is still fetched whole: since Kafka 0.10.1 (KIP-74) the
 * broker returns the first record batch of a fetch even when it exceeds fetch.max.bytes or
 * max.partition.fetch.bytes, and the queue threshold only stops further fetches. What must hold
 * the largest accepted message is receive.message.max.bytes (librdkafka refuses a larger
 * response and reconnects, for ever).
 */
typedef struct ll_kfetch {
    int64_t queued_min_messages;   /* queued.min.messages (messages, the consumer's queue) */
    int64_t queued_max_kbytes;     /* queued.max.messages.kbytes (KiB, the consumer's queue) */
    int64_t fetch_max_bytes;       /* fetch.max.bytes (bytes, one fetch response) */
    int64_t partition_fetch_bytes; /* max.partition.fetch.bytes (bytes, per partition) */
    int64_t receive_max_bytes;     /* receive.message.max.bytes (bytes, one response) */
    int64_t message_max_bytes;     /* the consumer's message.max.bytes (bytes, its largest request) */
} ll_kfetch;

/* The loop's default queued.min.messages (messages): librdkafka's own; the byte threshold below
 * is the one a backlog reaches. */
#define LL_KFETCH_QUEUED_MIN_MESSAGES 100000
/* The loop's default fetch.max.bytes and max.partition.fetch.bytes (bytes): 64 KiB, about 150
 * chunk events, some 15 ms of work at 10,000 events/s; librdkafka's are 50 MiB and 1 MiB. With
 * two of them queued ll-completion ran a backlog as fast as with 2 MiB (docs/performance.md). */
#define LL_KFETCH_FETCH_BYTES 65536
/* The loop's default queued.max.messages.kbytes, in fetch responses (fetch.max.bytes): what a
 * backlog keeps in memory before the loop asks for it. librdkafka 2.0.2 stops fetching once the
 * queue reaches it and looks again only when its broker thread wakes (at the latest a second
 * later: fetch.queue.backoff.ms is librdkafka >= 2.2); the loop wakes it (ll_kfetch_wake_due). */
#define LL_KFETCH_QUEUED_FETCHES 2
/* Room a response needs above loop.max_message_bytes for the key, the headers, the record
 * batch framing of the largest accepted message and the protocol's own (bytes). */
#define LL_KFETCH_HEADROOM 65536

/*
 * Settles the consumer's fetch sizes for a loop that accepts values of up to max_message_bytes
 * (loop.max_message_bytes). Every 0 field of *k gets its bounded default:
 *   max.partition.fetch.bytes = LL_KFETCH_FETCH_BYTES,
 *   fetch.max.bytes = max(LL_KFETCH_FETCH_BYTES, max.partition.fetch.bytes, a configured
 *   message.max.bytes) (librdkafka requires fetch.max.bytes >= message.max.bytes),
 *   message.max.bytes = fetch.max.bytes (the consumer's requests are small; librdkafka's
 *   default, 1,000,000, would force a 1 MB fetch),
 *   queued.max.messages.kbytes = LL_KFETCH_QUEUED_FETCHES x fetch.max.bytes in KiB,
 *   queued.min.messages = LL_KFETCH_QUEUED_MIN_MESSAGES, receive.message.max.bytes stays 0
 *   (librdkafka derives max(100 MB, fetch.max.bytes + 512)).
 * A configured receive.message.max.bytes must hold a response with one message of
 * max_message_bytes (+ LL_KFETCH_HEADROOM) and fetch.max.bytes + 512 (librdkafka's rule); a
 * configured fetch.max.bytes must be >= message.max.bytes (librdkafka's rule).
 * Returns 0, or -1 with err naming the setting, its value and what it must reach.
 */
int ll_kfetch_settle(int64_t max_message_bytes, ll_kfetch *k, char *err, size_t errlen);

/*
 * Whether the loop should wake librdkafka's fetcher now that it found the consumer's queue
 * empty, after run_bytes bytes (values and keys) in run_msgs messages since it last found it
 * empty. librdkafka 2.0.2 stops fetching once the queue reaches queued.max.messages.kbytes or
 * queued.min.messages, and looks again only when its broker thread wakes for some other
 * reason, up to a second later: a backlog would then pay a second for every queue it drains.
 * The queue reached a threshold only if at least that much was delivered since it was last
 * empty, so the wake is due from half a threshold on (an estimate: librdkafka counts values
 * only); below it, the fetcher never stopped and a wake would be a wasted request.
 */
bool ll_kfetch_wake_due(int64_t run_bytes, int64_t run_msgs, const ll_kfetch *k);

/* True when a fatal producer error must end the process rather than recreate the producer:
 * another instance took this transactional.id over (fenced), or an authorization failure
 * (docs/contract.md K§3.4). Any other fatal error is survived in-process (docs/design.md §3). */
bool ll_kafka_fatal_must_exit(rd_kafka_resp_err_t err);

/* The longest librdkafka message copied into a log line (bytes; longer ones are cut, marked "..."). */
#define LL_KAFKA_LOG_MAX 1024

/* The ll_log level of a librdkafka log line of syslog level `level` (0 emerg ... 7 debug):
 * 0-3 (emerg, alert, crit, err) error, 4 (warning) warn, 5-6 (notice, info) info, 7 and
 * anything else debug. Pure. */
ll_level ll_kafka_log_level(int level);

/* Routes the log lines of the client made from conf into the JSON log (docs/operations.md,
 * "Versions and logs"): event "librdkafka", its level mapped by ll_kafka_log_level, the fields
 * fac (librdkafka's facility, e.g. FAIL, CONFWARN) and client (rd_kafka_name), the message cut
 * at LL_KAFKA_LOG_MAX bytes. It replaces librdkafka's own logger (plain text on stderr). The
 * callback runs on librdkafka's threads (log.queue is not set): ll_log is thread-safe. Call on
 * every rd_kafka_conf_t the project makes, before rd_kafka_new. */
void ll_kafka_log_to_json(rd_kafka_conf_t *conf);

/* A read_committed consumer that neither commits nor stores offsets (a reader: loadctl's topic
 * reader, the sweeper's lag reading): cfg's kafka.* settings except group.id, transactional.id
 * and group.instance.id, then group.id = group, enable.auto.commit and enable.auto.offset.store
 * false, isolation.level read_committed, then the n_extra pairs of extra (key, value), its log
 * lines as JSON (ll_kafka_log_to_json). Owned by the caller (rd_kafka_destroy). NULL with err
 * ("kafka KEY: why", or librdkafka's refusal of the handle). */
struct ll_config;
rd_kafka_t *ll_kafka_reader_new(const struct ll_config *cfg, const char *group, const char *const extra[][2],
                                size_t n_extra, char *err, size_t errlen);

#endif
