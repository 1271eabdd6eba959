/*
 * offtrack.h - which offsets of one Kafka partition are done, when the loop applies messages out
 * of offset order (docs/design.md §3: a run waiting for its prerequisite holds only its own later
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
 * In memory the done offsets are sorted ranges in an array that grows as needed (docs/design.md §3: a
 * fixed array of 150 ranges overflowed while a batch of 1,000 runs marked its offsets in run
 * order, and an offset that could not be marked stopped the committed offset for good). Its size
 * is bounded by what the loop can leave not done: ranges ≤ offsets seen but not done + 1, which
 * the loop bounds by loop.batch_max and loop.max_held; LL_OFFTRACK_RANGES_LIMIT is a last guard.
 *
 * Metadata text (≤ LL_OFFTRACK_METADATA_MAX bytes: the broker's offset.metadata.max.bytes is 4096
 * by default), the shorter of:
 *   "ll1:" comma-separated ranges of done offsets relative to the committed offset, "a" or "a-b"
 *          (decimal, a ≥ 1, inclusive, sorted, not touching), e.g. "ll1:2-40,42";
 *   "ll2:" the same ranges for the offsets below t, then ";t:" and a bitmap of the offsets from
 *          base + t on (base64url without padding; bit k, least significant first in byte k/8,
 *          is offset base + t + k; a set bit is done), e.g. "ll2:2-40;45:Cw". The bitmap keeps
 *          a long run of alternating done and held offsets (one batch's) short.
 */
#ifndef LL_OFFTRACK_H
#define LL_OFFTRACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Most ranges of done offsets kept in memory above the committed offset: a guard far above what
 * the loop can reach (loop.batch_max + loop.max_held + 1 ≤ 2,141); ll_offtrack_seen and
 * ll_offtrack_done refuse to go past it. */
#define LL_OFFTRACK_RANGES_LIMIT 65536
/* Longest metadata text (bytes, with its NUL), under the broker's default 4096. */
#define LL_OFFTRACK_METADATA_MAX 4000

/* One partition's done offsets. Zero it (or ll_offtrack_init) before use; it owns the arrays,
 * released by ll_offtrack_free. */
typedef struct ll_offtrack {
    int64_t base;      /* the committable offset: first not done */
    int64_t next_seen; /* one past the last delivered offset; base if none */
    size_t n;          /* ranges in use */
    size_t cap;        /* ranges the arrays hold */
    int64_t *lo;       /* done ranges above base, sorted, disjoint, */
    int64_t *hi;       /* not adjacent, all > base (inclusive bounds); heap, owned */
} ll_offtrack;

/* Starts a tracker that owns nothing yet at the committed offset base (≥ 0), nothing done above. */
void ll_offtrack_init(ll_offtrack *t, int64_t base);

/* Starts again at base with nothing done above it, keeping the arrays. */
void ll_offtrack_reset(ll_offtrack *t, int64_t base);

/* Releases the arrays; the tracker is then as after ll_offtrack_init(t, 0). */
void ll_offtrack_free(ll_offtrack *t);

/*
 * Loads the committed offset and its metadata (NULL or "" = nothing above it) into an
 * initialised tracker. Returns 0, or -1 for metadata that is not ours or not well formed (the
 * tracker is then reset to base with nothing done above: the messages are applied again, which
 * the ledger makes harmless).
 */
int ll_offtrack_load(ll_offtrack *t, int64_t base, const char *metadata);

/*
 * A message at offset was delivered (in offset order). Every offset between the previous
 * delivered one and this one is done (markers, compacted records). Offsets below next_seen are
 * ignored (a re-delivery). Returns -1 past LL_OFFTRACK_RANGES_LIMIT ranges (nothing changed),
 * else 0.
 */
int ll_offtrack_seen(ll_offtrack *t, int64_t offset);

/* Marks one offset done. Returns -1 past LL_OFFTRACK_RANGES_LIMIT ranges (nothing changed), else
 * 0. Marking an offset already done is a no-op. */
int ll_offtrack_done(ll_offtrack *t, int64_t offset);

/* Makes dst (initialised) the same as src, reusing dst's arrays. */
void ll_offtrack_copy(ll_offtrack *dst, const ll_offtrack *src);

/*
 * Keeps in t only the offsets that other marks done too: its base becomes the lower of the two,
 * next_seen that base (docs/design.md §5: a partition starts at min(ledger position, Kafka commit), and
 * an offset either of them does not know as done is read and applied again). Sets *t_only to the
 * number of offsets t had done and other not, *other_only to the reverse (either may be NULL).
 * Returns 0, or -1 past LL_OFFTRACK_RANGES_LIMIT (t is then reset to the lower base: everything
 * above it is read again).
 */
int ll_offtrack_intersect(ll_offtrack *t, const ll_offtrack *other, int64_t *t_only, int64_t *other_only);

/*
 * Marks done in t every offset other marks done too (below other's base, and its ranges): t's done
 * set becomes the union of the two; next_seen stays t's, or the new base when that is above it.
 * Used for the Kafka commit, which must keep every offset whose answer it ever carried (commit.c
 * offsets_of, docs/design.md §5). Returns 0, or -1 past LL_OFFTRACK_RANGES_LIMIT (t then holds
 * part of the union: fewer offsets done, never more).
 */
int ll_offtrack_union(ll_offtrack *t, const ll_offtrack *other);

/* True when offset is done (below base, or inside a done range). */
bool ll_offtrack_is_done(const ll_offtrack *t, int64_t offset);

/* Ranges in use. */
size_t ll_offtrack_ranges(const ll_offtrack *t);

/*
 * Writes the metadata text into buf (LL_OFFTRACK_METADATA_MAX bytes advised): "" when nothing is
 * done above base, else the shorter of the two forms. Returns its length. When neither form fits
 * buflen it writes the longest ll1 prefix that does (the done offsets it leaves out are applied
 * again after a crash or a rebalance, answered as replays), sets *lossy when lossy is not NULL,
 * and returns that length; -1 only when buflen < 8.
 */
int ll_offtrack_metadata(const ll_offtrack *t, char *buf, size_t buflen, bool *lossy);

#endif
