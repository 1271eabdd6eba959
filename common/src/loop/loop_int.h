/*
 * loop_int.h - the consumer loop's own types (not a public header). The loop is this folder, one
 * object per file, each reached through its header; a file calls only the files below it
 * (tests/style/check_loop_layers.py; the map in docs/design.md §3 is compared with it):
 *
 *   loop.c       the turn (recover step, poll, batch, what it reported owed, Kafka commit), the
 *                rebalance callback, and the recovery: the one writer of the recovery state
 *                (aborts, rewinds to the committed offsets, a producer made again in-process)
 *   setup.c      configuration keys, topics and schemas, the Kafka clients, the loop made and
 *                freed
 *   batch.c      one batch (batch.h): work collected and ordered by run, decoded once, the
 *                set-based step, one message with its savepoint and the decision table applied,
 *                replays restated, its end reported (ll_batch_end)
 *   txn.c        the open database transaction (txn.h): BEGIN, savepoints, undo, the queued
 *                results, the heartbeats asked for, the commit with its results staged, the
 *                dead-letter event
 *   partition.c  the assigned partitions (partition.h): offsets trackers, held queues, the
 *                prerequisite clocks, pause and resume, offsets the topic no longer holds
 *   position.c   the ledger's read positions (position.h): the merge, and every write a
 *                compare-and-set; the one owner of "is this still the ledger I last saw"
 *   commit.c     the Kafka transactions (commit.h): records staged, the commit (on a thread of
 *                its own), its failure returned to the loop, drain
 *   io.c         the calls out to Kafka and the database (io.h), the real table
 *   decide.c     the pure decision tables (ll/kloop_decide.h)
 *
 * The functions below are grouped under the file that defines them
 * (tests/style/check_header_map.py checks it).
 *
 * The unit of work is the poll batch (one database transaction, or a few of at most
 * LL_BATCH_SAVEPOINTS savepoints each; its replies then go into the next Kafka transaction, with
 * those of the batches committed while the previous one was in flight); the unit of ordering is the
 * run: a message whose run waits (for a prerequisite, or a lock someone else holds) is held in
 * memory with the later messages of that run on its Kafka partition, and every other run flows
 * past it. The committed offset stays below the first message that is not done; the done
 * offsets above it go with the commit as metadata (offtrack.h), so nothing is applied or answered
 * twice after a crash or a rebalance (docs/design.md §3, §4).
 */
#ifndef LL_LOOP_INT_H
#define LL_LOOP_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "io.h"
#include "ll/clock.h"
#include "ll/kclient.h"
#include "ll/kloop.h"
#include "ll/offtrack.h"

/* Savepoints of one database transaction at most: PostgreSQL caches 64 subtransactions per
 * backend; beyond that every session slows (suboverflow). A longer batch commits in parts. */
#define LL_BATCH_SAVEPOINTS 60

/* Messages per poll batch at most (loop.batch_max): the batch is held in memory and the set-based
 * apply's work grows with it. */
#define LL_BATCH_MAX 2000
/* Most held messages per partition (loop.max_held). The offset commit's metadata (offtrack.h,
 * ≤ LL_OFFTRACK_METADATA_MAX bytes) then holds the done ranges between up to LL_MAX_HELD + 1 held
 * messages as text (≤ 22 bytes a range while offsets stay within 10^9 of the committed one) and
 * the one or two latest batches' spans (≤ 2 × loop.batch_max offsets with transaction markers
 * between them, ≤ 1,400 bytes as a bitmap) where the offsets they leave behind lie (docs/design.md
 * §9). */
#define LL_MAX_HELD 140

/* One consumed topic and where its replies go. */
typedef struct topic_io {
    const ll_input *in;
    char topic[256];
    char reply_topic[256];
    ll_schema *schema;
    ll_schema *reply_schema;
    ll_decode_opts dopts;
    ll_encode_opts eopts;
} topic_io;

/*
 * One input message. A fresh one points into its rd_kafka_message_t (rkm, owned until the batch
 * ends); a held one owns copies of key, value and headers (rkm NULL), so that holding it does
 * not pin librdkafka's fetch buffer.
 */
typedef struct lmsg {
    /* ---- handed down: the message's coordinates and bytes, read by every object it is handed to ---- */
    rd_kafka_message_t *rkm;
    topic_io *io;
    struct part_state *ps;
    int64_t offset;
    char run[128];   /* the key as text (the run id), "" when none or too long */
    const void *key; /* key bytes (into rkm, or owned copy) */
    size_t key_len;
    const void *value; /* value bytes (NULL: a tombstone) */
    size_t len;
    /* ---- owned by batch.c and partition.c: the message in a batch, and its held copy ---- */
    rd_kafka_headers_t *hdrs; /* owned copy for a held message; NULL: read from rkm */
    int held;                 /* 1 while in its partition's held queue (owns its copies) */
    int state;                /* in the current batch: 0 pending, 1 done, 2 held (its run waits) */
    int decided;              /* in the current batch: applied by its input's bulk function, in
                               * the batch's set-based call of this number (0: not decided) */
    int retry;                /* left by it only for its run's order (ll_bulk_out.retry) */
    int replay_step;          /* in the current batch: how an input the ledger answered before is
                               * answered again (ll_replay_step, batch.c); 0: a fresh one */
    json_t *decoded;          /* in the current batch: its value decoded once (ll_batch_decode), owned
                               * by the batch until ll_batch_decoded_drop (at the latest the batch's
                               * end); NULL: not decoded (yet), or it did not decode. A held copy
                               * never keeps it: its bytes are decoded again in the batch that
                               * retries it */
    char *decode_err;         /* in the current batch: why its value did not decode (owned likewise),
                               * NULL: none */
    int decode_wait;          /* with decode_err: the schema registry's wait (LL_DECODE_UNAVAILABLE,
                               * LL_DECODE_UNKNOWN_ID: the message is held, docs/design.md §9), 0: none */
    int64_t defer_since_ms;   /* first DEFER of its run on its partition (the prerequisite clock,
                               * shared by the run's held messages there), 0 none */
    int64_t retry_at_ms;      /* when a held message is tried again */
    int64_t backoff_ms;
} lmsg;

/* The prerequisite clock of one run on one partition: when its first message there deferred
 * (docs/design.md §3: the clock outlives the held copies). Kept while the run still waits, so that its
 * messages that found the held queue full and are read again after the pause wait no longer than the held
 * ones. */
#define LL_RUN_CLOCKS 32
typedef struct run_clock {
    char run[40];     /* the run id (a UUID's text); "" free */
    int64_t since_ms; /* monotonic ms of the first deferral */
} run_clock;

/* What the loop owes before it may apply anything again (docs/design.md §3, the Kafka errors), in
 * the order of precedence: a state is only ever replaced by a higher one, or cleared by the step
 * that settles it (loop.c, the one writer of ll_recovery_state). */
typedef enum ll_recovery {
    LL_RECOVERY_NONE = 0, /* applying */
    LL_RECOVERY_REWIND,   /* the assignment goes back to the committed offsets (and the ledger's) */
    LL_RECOVERY_PRODUCER, /* a new producer (same transactional.id), then the rewind */
    LL_RECOVERY_EXIT      /* fenced or unauthorised: the loop ends, exit 2 */
} ll_recovery;

/* The loop's recovery: what is owed, and when the next step is tried (monotonic ms), with its
 * backoff (ms, 200 doubling to 5000). Meanwhile the whole assignment is paused (partition.c keeps
 * what it paused: ll_loop_parts_all_paused; the consumer is still polled, so that the group keeps
 * this member). */
typedef struct ll_recovery_state {
    ll_recovery owed;
    int64_t at_ms, backoff_ms;
} ll_recovery_state;

/* What position.c keeps of one partition's read position in the ledger (docs/design.md §5): the
 * one object that reads and writes these members. Zero: no position read or written yet. */
typedef struct part_position {
    int64_t written_batch; /* batch number whose position of it is in the ledger */
    char write_token[37];  /* the write token its ledger position carries as this instance last read
                            * (merge) or wrote it; "": no row. Every write is a compare-and-set on it */
} part_position;

/* Per assigned Kafka partition (partition.c): done offsets, held messages, whether it is paused. */
typedef struct part_state {
    char topic[256];
    int32_t partition;
    ll_offtrack track;
    lmsg **held; /* held messages in offset order (their runs wait) */
    size_t n_held, cap_held;
    int stopped;                     /* paused because the held queue is full: fetch resumes below half */
    int64_t stop_offset;             /* where fetching resumes (the lowest message neither done nor held) */
    int64_t touched;                 /* batch number of the last change to track (offsets to commit) */
    size_t held_bytes;               /* keys and values of the held copies (bytes; loop.max_held_bytes) */
    part_position pos;               /* its position in the ledger (owned by position.c) */
    run_clock clocks[LL_RUN_CLOCKS]; /* runs waiting for a prerequisite here (partition.c) */
    /* The offsets whose answers Kafka's commit holds (replies and dead letters commit with their
     * offsets) while the ledger lost their effects: applied again without a second answer
     * (position.c, docs/design.md §5). Kept while answered_any; NULL ranges otherwise. */
    ll_offtrack answered;
    int answered_any;
    /* The ledger's done offsets, kept while it holds some that Kafka's commit does not (a group
     * reset to earlier offsets, a Kafka commit that did not happen): inputs the ledger answered
     * before, read again; each restates its first answer (batch.c, docs/design.md §5, "A
     * replay restates"). NULL ranges while !replayed_any. */
    ll_offtrack replayed;
    int replayed_any;
    /* Stopped because the broker no longer holds [gap_from, gap_to) (deleted by retention before
     * it was read, or a position past the log's end): paused until an operator accepts the gap
     * (partition.c, docs/design.md §5). gap_to 0: none. */
    int64_t gap_from, gap_to;
    int64_t gap_accepted_to; /* the end of an operator's acceptance holding gap_from, found by the
                              * idle check (0: none yet); the next merge reads on after it */
} part_state;

struct ll_loop {
    /* ---- the environment: made by setup.c, read by every object of the loop ---- */
    char service[64];
    const ll_config *cfg;
    void *svc;
    topic_io *io;
    size_t n_io;
    const ll_loop_io *kio; /* the calls out to Kafka and the database (io.h; borrowed) */
    rd_kafka_t *consumer;
    rd_kafka_t *producer;
    ll_db db;
    ll_schema_ids *ids;
    struct ll_registry *registry; /* schema.registry.url set: the schema registry client, else NULL */
    char dlq_topic[256];
    char group[256], txid[512];
    size_t dlq_limit; /* largest dead-letter record (bytes): min(producer, topic limit) */
    int64_t batch_max, db_batch_max, poll_ms, prereq_wait_ms, backoff_min_ms, backoff_max_ms, max_held;
    int64_t max_held_bytes;       /* loop.max_held_bytes: keys and values held per partition */
    int64_t reapplied_wait_ms;    /* loop.reapplied_wait: the prerequisite wait of an input answered
                                   * before the database lost its effect (ms) */
    int64_t position_check_ms;    /* loop.position_check_interval (ms; 0: never): the idle check */
    int position_missing_kafka;   /* loop.position_missing = kafka: a partition without a position in
                                   * the ledger starts at Kafka's commit (the first start after the
                                   * upgrade to migration 0009), not at its beginning */
    int64_t crash_after;          /* fault.crash_after_db_commits (TESTING; 0: off) */
    rd_kafka_queue_t *consumer_q; /* the consumer's queue (its length; a commit's end wakes its poll) */
    /* ---- owned by loop.c ---- */
    volatile sig_atomic_t stop;
    unsigned rebalance_gen;
    int64_t position_check_at; /* monotonic ms of the next idle check */
    /* Recovery without a restart (docs/design.md §3, the Kafka errors): while the producer is being
     * recreated, the positions cannot be reset to the committed offsets, or the database is
     * unreachable, the whole assignment is paused, the consumer is still polled (the group keeps
     * this member), and the step is retried with backoff (loop.c). */
    ll_recovery_state rec;
    /* ---- owned by txn.c ---- */
    int64_t db_commits; /* database commits made (fault.crash_after_db_commits) */
    /* ---- owned by partition.c ---- */
    int64_t batch_no; /* the batch being applied (counted from 1; part_state.touched names one) */
    part_state **parts;
    size_t n_parts, cap_parts;
    bool all_paused; /* this instance paused its whole assignment (the loop's recovery: only what it
                      * paused is resumed, docs/design.md §3) */
    /* ---- owned by commit.c ---- */
    /* The Kafka commit (owned): the one in flight, the records staged for the next one, a failure
     * left for the loop's recovery (ll_loop_commit_failed) */
    struct ll_commit *commit;
    /* ---- owned by setup.c ---- */
    /* The consumer's settled fetch sizes (ll_kfetch_settle), and what was delivered since the loop last found
     * that queue empty (bytes of values and keys, messages): ll_loop_fetch_drained wakes librdkafka's fetcher
     * after a queue it may have stopped at (ll_kfetch_wake_due). */
    ll_kfetch fetch;
    int64_t fetch_run_bytes, fetch_run_msgs;
};

/* setup.c */
/* The loop with its calls out scripted (io: borrowed for the loop's lifetime): configured as
 * ll_loop_new does, but with no database opened, no Kafka client made and nothing subscribed
 * (the loop's unit tests). NULL with err. */
ll_loop *ll_loop_new_io(const char *service, const ll_config *cfg, const ll_input *inputs, size_t n,
                        void *svc, const ll_loop_io *io, char *err, size_t errlen);

/* setup.c: a consumed topic's codec and where its replies go (docs/design.md §9) */
/* Decodes value (len bytes) by the topic's framing and schema: 0 with *out (owned by the caller),
 * or -1 with why (ll_decode's errors). */
int ll_topic_decode(const topic_io *io, const void *value, size_t len, json_t **out, char *why,
                    size_t whylen);
/* Encodes reply by the topic's reply schema and framing: 0 with *buf (len bytes, owned by the
 * caller), or -1 with why. */
int ll_topic_encode_reply(const topic_io *io, const json_t *reply, unsigned char **buf, size_t *len,
                          char *why, size_t whylen);
/* The topic the replies to io's inputs go to (borrowed: lives as long as the loop). */
const char *ll_topic_reply_to(const topic_io *io);
/* The service's input io consumes (its apply and bulk functions; borrowed). */
const ll_input *ll_topic_input(const topic_io *io);
/* The consumed topic named topic (the i-th of l->io is &l->io[i]; borrowed), or NULL. */
topic_io *ll_loop_topic_io(const ll_loop *l, const char *topic);

/* setup.c */
/* The consumer and the producer (init_transactions), the dead-letter topic checked. 0, or -1 with
 * err. */
int ll_loop_make_clients(ll_loop *l, char *err, size_t errlen);
/* The producer destroyed (its queue purged) and a new one made (ll_loop_make_producer): the real
 * table's remake_producer (io.c). 0, or -1 with err. */
int ll_loop_remake_producer(ll_loop *l, int init_ms, char *err, size_t errlen);
/* A new transactional producer, init_transactions waiting at most init_ms. 0, or -1 with err. */
int ll_loop_make_producer(ll_loop *l, int init_ms, char *err, size_t errlen);
/* Counts a delivered message toward the fetcher's wake (ll_loop_fetch_drained). */
void ll_loop_fetch_count(ll_loop *l, const rd_kafka_message_t *rkm);
/* After a poll: when the consumer's queue is empty and as much was delivered since it was last
 * empty as may have stopped librdkafka 2.0.2's fetcher at its queue threshold, wakes the
 * fetcher of every assigned partition's leader with one ListOffsets request per leader
 * (rd_kafka_offsets_for_times with a timeout of LL_LOOP_FETCH_WAKE_MS: the answer is not needed,
 * only the broker thread's wake-up, and librdkafka drops a late one). */
void ll_loop_fetch_drained(ll_loop *l);
/* How long ll_loop_fetch_drained waits for the ListOffsets answers (ms): not at all. With the
 * leaders in librdkafka's metadata cache (an assigned partition's always are) the call sends the
 * requests and returns __TIMED_OUT at once; with one not cached it asks for metadata and returns
 * (the next wake finds it). */
#define LL_LOOP_FETCH_WAKE_MS 0

/* What ll_loop_free does after the loop's last Kafka commit was waited for (and a failed one
 * aborted): the staged records dropped, the clients closed (the consumer leaves its group), the
 * database closed, everything freed (l not NULL). */
void ll_loop_destroy(ll_loop *l);

/* loop.c */
/* One turn of the loop after its poll: the batch of the n messages polled (borrowed), or, while a
 * recovery is owed (recovering: what ll_loop_recover_step returned before the poll) or a rebalance
 * came during the poll (gen: l->rebalance_gen before it), the batch dropped and a rewind; then the
 * Kafka commit that ended is taken and the staged records go into the next; then, when due, the
 * idle check of the ledger's positions (loop.position_check_interval). */
void ll_loop_turn(ll_loop *l, int recovering, unsigned gen, rd_kafka_message_t **batch, size_t n);
/* The consumer's rebalance callback (opaque: the loop): what is staged committed first, then the
 * new assignment at the committed offsets merged with the ledger's positions, or the revoked
 * partitions forgotten. */
void ll_loop_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
                          void *opaque);

/* Whether a recovery is owed (nothing may be applied; ll_recovery). */
static inline bool ll_loop_recovering(const ll_loop *l)
{
    return l->rec.owed != LL_RECOVERY_NONE;
}

/* loop.c: the one writer of l->rec, called by the loop (loop.c) */
/* A rewind reported by a part (the batch undone, a done offset not taken, positions not
 * written, a seek that failed): owed, the assignment paused, tried after delay_ms (0: the
 * backoff); nothing when a recovery is owed already. */
void ll_loop_owe_rewind(ll_loop *l, int64_t delay_ms);
/* The Kafka commit failed (its failure taken: ll_loop_commit_take_error; none: 0): fatal → the producer is
 * recreated or the loop exits (LL_RECOVERY_EXIT); otherwise the transaction is aborted and the assignment
 * rewound at once (never from inside a rewind: that one only owes it). Returns -1. */
int ll_loop_commit_failed(ll_loop *l);
/* Rewinds the assignment to the committed offsets merged with the ledger's positions (held and
 * staged dropped); on failure owed and retried with backoff. 0 when done. */
int ll_loop_rewind(ll_loop *l);
/* Resumes what this instance paused (the whole assignment when the recovery paused it). */
void ll_loop_resume_all(ll_loop *l);
/* After an assignment (rebalance): a rewind owed is settled by it; the assignment stays paused
 * while a producer is owed, or while the committed offsets or the ledger's positions were not
 * read (positions_read 0: then a rewind is owed, which reads both again). */
void ll_loop_recovery_assigned(ll_loop *l, rd_kafka_topic_partition_list_t *assigned, int positions_read);
/* The recovery step that is due, if any. Returns 1 while a rewind or a producer is still owed
 * (nothing may be applied: the poll only keeps this member in its group). */
int ll_loop_recover_step(ll_loop *l);

#endif
