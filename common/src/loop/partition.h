/*
 * partition.h - the loop's assigned partitions (partition.c): state made on first use, offsets
 * trackers, held queues, the prerequisite clocks of waiting runs, pause and resume, and offsets the
 * topic no longer holds. Not a public header.
 */
#ifndef LL_LOOP_PARTITION_H
#define LL_LOOP_PARTITION_H

#include "loop_int.h"

/* partition.c */
/* The state of (topic, partition), created on first use (owned by the loop). */
part_state *ll_loop_part(ll_loop *l, const char *topic, int32_t partition);
/* The partitions' change clock: a batch begins (the batch number counts on), and the batch being
 * applied, or the last one (counted from 1; part_state.touched and part_position.written_batch name one). */
void ll_loop_parts_tick(ll_loop *l);
int64_t ll_loop_batch_no(const ll_loop *l);
/* What a polled offset of ps is to the batch (ll_loop_part_admit). */
typedef enum ll_part_admit {
    LL_ADMIT_NEW,        /* work: apply it */
    LL_ADMIT_PAUSED,     /* fetched before ps's pause took effect: it comes again after the seek */
    LL_ADMIT_TRACK_FULL, /* the tracker holds too many ranges to take it: pause ps (the queue drains) */
    LL_ADMIT_DONE,       /* applied above the committed offset before a crash or a rebalance: skip */
    LL_ADMIT_HELD        /* refetched after a seek below it: its held copy is the one applied */
} ll_part_admit;
/* Admits a polled offset of ps into this batch: the tracker sees it (ps changed in this batch
 * unless it is paused or the tracker is full), and what it is to the batch is returned. */
ll_part_admit ll_loop_part_admit(ll_loop *l, part_state *ps, int64_t offset);
/* ps changed in this batch (an offset done: its position and commit are owed). */
void ll_loop_part_touch(ll_loop *l, part_state *ps);
/* Marks offset done in ps's tracker: 0, or -1 at its guard (LL_OFFTRACK_RANGES_LIMIT; logged
 * offset_track_full unless quiet, when a rewind is owed already: the caller owes one). */
int ll_loop_part_done(part_state *ps, int64_t offset, bool quiet);
/* ps's first offset not done (the committed one, moved by what is done). */
int64_t ll_loop_part_base(const part_state *ps);
/* The held messages of every partition. */
size_t ll_loop_held_total(const ll_loop *l);
/* The held messages whose run's first queued message is due (retry_at_ms <= now, monotonic ms),
 * every one of those runs in offset order, into out (room for ll_loop_held_total; borrowed: the
 * queues own them). Returns how many. */
size_t ll_loop_held_due(ll_loop *l, int64_t now, lmsg **out);
/* The run's clock starts at since for its messages queued on ps without one (a deferral's clock is
 * the run's on its partition). */
void ll_loop_held_clock_share(part_state *ps, const char *run, int64_t since);
/* What is held: messages, (partition, run) pairs, and those answered before a database loss; in
 * *oldest_since the earliest prerequisite clock (defer_since_ms, monotonic ms) of a held message
 * not answered before a loss, 0 when none. */
void ll_loop_held_counts(const ll_loop *l, size_t *msgs, size_t *runs, size_t *answered,
                         int64_t *oldest_since);
/* The partitions that changed after batch `after` up to batch `upto` (batch numbers; INT64_MAX:
 * up to now), in assignment order: how many, and with list non-NULL those (*list an array the
 * caller frees, NULL when none; the states borrowed). */
size_t ll_loop_parts_changed(const ll_loop *l, int64_t after, int64_t upto, part_state ***list);
/* ps's topic (borrowed: lives as long as ps) and partition number. */
const char *ll_loop_part_topic(const part_state *ps);
int32_t ll_loop_part_no(const part_state *ps);
/* ps's done offsets (its tracker) copied into t (made by the caller: ll_offtrack_init; freed by it). */
void ll_loop_part_done_view(const part_state *ps, ll_offtrack *t);
/* Adds to t the ledger's done offsets that Kafka's commit does not hold, while ps has some (read
 * again, they restate their first answer): 0, or -1 when t's ranges are at their limit. */
int ll_loop_part_add_replayed(const part_state *ps, ll_offtrack *t);
/* What ll_loop_part_merge found (offsets). */
typedef struct ll_part_merged {
    int64_t kafka_only;  /* done in Kafka's commit, not in the ledger: the ledger lost them */
    int64_t ledger_only; /* done in the ledger, not in Kafka's commit: answered before, read again */
    int64_t kafka_end;   /* one past the last offset Kafka's commit knew as done */
} ll_part_merged;
/* Makes ps's tracker (Kafka's done set, loaded from its commit; kafka_none: there is no commit,
 * the set is empty) the intersection with the ledger's done set (borrowed), and keeps what only
 * one of them holds: the inputs answered before the ledger lost them (ll_msg_answered_before) and
 * those the ledger answered and Kafka's commit does not hold (ll_msg_replayed). A stop for a gap
 * an operator accepted is settled (docs/design.md §5). ledger NULL: the ledger has no say (no
 * row, Kafka's commit kept), nothing of it is kept. Returns ps's first offset not done, where
 * fetching starts; *out what was found (zero when ledger is NULL). */
int64_t ll_loop_part_merge(ll_loop *l, part_state *ps, const ll_offtrack *ledger, bool kafka_none,
                           ll_part_merged *out);
/* Where ps's Kafka commit goes: returns its first offset not done, with the done offsets above it
 * as metadata in md (at most mdcap bytes; *mdlen its length, 0: none), the inputs answered before
 * a database loss included (docs/design.md §5). scratch: a tracker the caller made (ll_offtrack_init)
 * and frees; it may hold the view. Metadata that cannot name every done range is logged
 * (offset_metadata_lossy: those are applied again as replays after a crash). */
int64_t ll_loop_part_commit_point(part_state *ps, ll_offtrack *scratch, char *md, size_t mdcap, int *mdlen);
/* The assigned partitions: how many, and the i-th (i < ll_loop_n_parts; owned by the loop). */
size_t ll_loop_n_parts(const ll_loop *l);
part_state *ll_loop_part_at(const ll_loop *l, size_t i);
/* The state of (topic, partition) when it has one (an assigned partition), else NULL. */
part_state *ll_loop_part_find(const ll_loop *l, const char *topic, int32_t partition);
/* Forgets every partition and frees the table (the loop's end). */
void ll_loop_parts_free(ll_loop *l);
/* Forgets every partition's state (its held queue freed). */
void ll_loop_forget_parts(ll_loop *l);
/* Loads each listed partition's committed offset and metadata into its tracker. */
void ll_loop_load_tracks(ll_loop *l, const rd_kafka_topic_partition_list_t *c);
/* m's headers as read (borrowed: a held copy's own, or its Kafka message's), or NULL: none. */
const rd_kafka_headers_t *ll_loop_msg_headers(const ll_loop *l, const lmsg *m);
/* Frees a held copy (its key, value and headers). */
void ll_loop_free_copy(lmsg *m);
/* Frees a partition's held queue (and forgets its runs' prerequisite clocks). */
void ll_loop_drop_held(part_state *ps);
/* Pauses the whole assignment (once: nothing while it is paused): 0, or -1 when the assignment
 * cannot be read (nothing paused). */
int ll_loop_parts_pause_all(ll_loop *l);
/* A new (eager) assignment: paused as a whole when paused, else nothing of it is paused. */
void ll_loop_parts_assigned(ll_loop *l, rd_kafka_topic_partition_list_t *assigned, bool paused);
/* Whether this instance paused its whole assignment (the loop's recovery). */
bool ll_loop_parts_all_paused(const ll_loop *l);
/* Resumes what this instance paused and nothing else: the whole assignment when it paused it, or
 * else the partitions stopped by a full held queue. */
void ll_loop_parts_resume(ll_loop *l);
/* Pauses ps's fetching at offset (its held queue is full; nothing while the whole assignment is
 * paused): 0, or -1 when the seek there failed (the position is unknown: a rewind is owed). */
int ll_loop_stop_partition(ll_loop *l, part_state *ps, int64_t offset);
/* Resumes ps's fetching (stopped by a full held queue). */
void ll_loop_resume_partition(ll_loop *l, part_state *ps);
/* Resumes the stopped partitions whose held queue drained to half of both limits. */
void ll_loop_resume_drained(ll_loop *l);

/* Whether m's answer is already in Kafka, committed with its offset before the ledger lost its
 * effect (position.c): applied again, it is not answered again, and it waits for its
 * prerequisite up to loop.reapplied_wait (docs/design.md §5). */
static inline bool ll_msg_answered_before(const lmsg *m)
{
    return m->ps->answered_any && ll_offtrack_is_done(&m->ps->answered, m->offset);
}

/* Whether the ledger answered m before (its offset is done in the ledger's position for this
 * group, not in Kafka's commit): read again, m restates that answer (batch.c). */
static inline bool ll_msg_replayed(const lmsg *m)
{
    return m->ps->replayed_any && ll_offtrack_is_done(&m->ps->replayed, m->offset);
}

/* partition.c */
/* True when ps's held queue has a copy of offset. */
int ll_loop_offset_held(const part_state *ps, int64_t offset);
/* True when run r has a message in ps's held queue. */
int ll_loop_run_held(const part_state *ps, const char *r);
/* Copies a fresh message into the held queue of its partition, in offset order (a seek below held
 * messages can bring an older one after them). Returns the held copy (owned by the queue), or NULL when the
 * queue is full. */
lmsg *ll_loop_hold_copy(ll_loop *l, lmsg *m);
/* Removes a done held message from its queue (the copy stays m's: the batch frees it when it ends,
 * its work still refers to it). */
void ll_loop_unhold(lmsg *m);

/* partition.c: the prerequisite clocks of a partition's waiting runs (run_clock). A run's clock
 * starts at its first deferral there and holds for every message of the run read before it ran
 * out; it is forgotten once a message of the run is answered (its prerequisite came), or two
 * loop.prerequisite_wait periods after it started (a message that comes that much later waits a
 * period of its own). With LL_RUN_CLOCKS runs waiting, a new one replaces the oldest (whose later
 * messages then wait a period of their own: longer, never shorter). */
/* The first deferral of run on ps (monotonic ms), or 0 when it has no clock (now: monotonic ms). */
int64_t ll_loop_clock_of(part_state *ps, const char *run, int64_t wait_ms, int64_t now);
/* Starts run's clock on ps at since (monotonic ms) unless it has one. Returns the clock's start. */
int64_t ll_loop_clock_start(part_state *ps, const char *run, int64_t since);
/* Forgets run's clock on ps (a message of it was answered). */
void ll_loop_clock_stop(part_state *ps, const char *run);

/* partition.c: offsets the topic no longer holds (docs/design.md §5) */
/* A fetch the broker refused (rkm: an RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET event; auto.offset.reset
 * is error): the partition's log start and end are asked (at most LL_LOOP_WATERMARK_MS); a position
 * below the log start or past its end stops the partition (paused, offsets_unreadable naming the
 * range once, loadledger_unreadable_offsets). Returns true when a rewind is owed (the caller, the
 * loop, owes it): a readable position (a start without an offset: the rewind seeks there again),
 * or log bounds the broker did not give. */
bool ll_loop_offset_refused(ll_loop *l, const rd_kafka_message_t *rkm);
/* Every loop.position_check_interval while a partition is stopped for a gap: whether an operator
 * accepted it (nifi_ops.offset_gap_acceptance: a range holding the gap's first offset). Returns
 * true when one was: the caller owes a rewind, whose merge reads on after the accepted range
 * (position.c). */
bool ll_loop_gaps_check(ll_loop *l);
/* The offsets of every stopped partition's gap, summed (loadledger_unreadable_offsets). */
static inline int64_t ll_loop_unreadable(const ll_loop *l)
{
    int64_t n = 0;
    for (size_t i = 0; i < l->n_parts; i++)
        n += l->parts[i]->gap_to - l->parts[i]->gap_from;
    return n;
}
/* The broker's answer to the log start and end (ms). */
#define LL_LOOP_WATERMARK_MS 5000

#endif
