/*
 * offtrack.h - which offsets of one Kafka partition are done, when the loop applies messages out
 * of offset order (issue 8 §4: a run waiting for its prerequisite holds only its own later
 * events, every other run of the partition flows past it).
 *
 * The committed offset may never pass a message that is not done (applied, answered or
 * dead-lettered), so it stays at the first one that is not; the done offsets above it travel in
 * the offset commit's metadata, in the same Kafka transaction as the replies (the technique of
 * Confluent's Parallel Consumer). After a crash or a rebalance the partition is read again from
 * the committed offset and the offsets the metadata names are skipped: neither applied nor
 * answered twice.
 *
 * Offsets the consumer never sees (transaction markers of transactional producers such as NiFi's
 * PublishKafka, compacted records) count as done: the tracker is told every delivered offset in
 * order (ll_offtrack_seen), and a gap between two delivered offsets is done by definition.
 *
 * Metadata text: "ll1:" then comma-separated ranges of done offsets relative to the committed
 * offset, "a" or "a-b" (decimal, a ≥ 1, inclusive), e.g. "ll1:2-40,42". Its length is bounded by
 * the number of ranges: at most LL_OFFTRACK_MAX_RANGES, so that it stays under the broker's
 * offset.metadata.max.bytes (4096 by default).
 */
#ifndef LL_OFFTRACK_H
#define LL_OFFTRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most ranges of done offsets kept above the committed offset; the loop pauses a partition
 * before it would need more (loop.max_held is checked against it). */
#define LL_OFFTRACK_MAX_RANGES 150
/* Longest metadata text (bytes, with its NUL): 150 ranges of two 10-digit numbers. */
#define LL_OFFTRACK_METADATA_MAX 3400

/* One partition's done offsets. Plain value; no heap. */
typedef struct ll_offtrack {
    int64_t base;                           /* the committable offset: first not done */
    int64_t next_seen;                      /* one past the last delivered offset; base if none */
    size_t n;                               /* ranges in use */
    int64_t lo[LL_OFFTRACK_MAX_RANGES + 1]; /* done ranges above base, sorted, disjoint, */
    int64_t hi[LL_OFFTRACK_MAX_RANGES + 1]; /* not adjacent, all > base (inclusive bounds) */
} ll_offtrack;

/* Starts at the committed offset base (≥ 0) with nothing done above it. */
void ll_offtrack_init(ll_offtrack *t, int64_t base);

/*
 * Loads the committed offset and its metadata (NULL or "" = nothing above it). Returns 0, or -1
 * for metadata that is not ours or not well formed (the tracker is then reset to base with
 * nothing done above: the messages are applied again, which the ledger makes harmless).
 */
int ll_offtrack_load(ll_offtrack *t, int64_t base, const char *metadata);

/*
 * A message at offset was delivered (in offset order). Every offset between the previous
 * delivered one and this one is done (markers, compacted records). Offsets below next_seen are
 * ignored (a re-delivery). Returns -1 if more ranges would be needed than fit, else 0.
 */
int ll_offtrack_seen(ll_offtrack *t, int64_t offset);

/* Marks one offset done. Returns -1 if more ranges would be needed than fit (nothing changed),
 * else 0. Marking an offset already done is a no-op. */
int ll_offtrack_done(ll_offtrack *t, int64_t offset);

/* True when offset is done (below base, or inside a done range). */
bool ll_offtrack_is_done(const ll_offtrack *t, int64_t offset);

/* Ranges in use (the loop pauses the partition when they near LL_OFFTRACK_MAX_RANGES). */
size_t ll_offtrack_ranges(const ll_offtrack *t);

/* Writes the metadata text into buf (≥ LL_OFFTRACK_METADATA_MAX bytes advised); "" when nothing
 * is done above base. Returns its length, or -1 if buf is too small. */
int ll_offtrack_metadata(const ll_offtrack *t, char *buf, size_t buflen);

#endif
