/*
 * kloop_int.h - the consumer loop's own types, shared by its files (not a public header). The
 * functions below are grouped under the file that defines them (tests/style/check_header_map.py
 * checks it):
 *
 *   kloop.c          the turn (recover step, poll, batch, what it reported owed, Kafka commit)
 *                    and the rebalance callback: the loop decides, the parts below report
 *   kloop_setup.c    configuration, the loop made and freed, replies
 *   kloop_recover.c  the recovery state's one writer: aborts, rewinds to the committed offsets,
 *                    a producer recreated in-process
 *   kloop_batch.c    one batch (and kloop_work.c, kloop_held.c, kloop_tx.c, kloop_apply.c,
 *                    kloop_bulk.c: its parts, mapped in kloop_batch.h): held runs, the database
 *                    transaction with a savepoint per message, replies, the done offsets; its
 *                    end reported (ll_batch_end)
 *   kloop_commit.c   the Kafka transactions: the records of committed database transactions
 *                    staged, and carried with their offsets by a commit on a thread of its own
 *                    beside the next batches' database work; a failure returned (commit_err)
 *   kloop_position.c the consumer group's read positions kept in the ledger, merged with Kafka's
 *                    commits at an assignment or a rewind
 *   kloop_dlq.c      dead letters: the ledger event and the record that always fits
 *   kloop_gap.c      a partition whose position the broker no longer holds: stopped until an
 *                    operator accepts the gap
 *   kloop_parts.c    the assigned partitions: the committed offsets and their metadata, held
 *                    copies freed, a partition paused while its held queue is full, the whole
 *                    assignment paused and resumed for the recovery
 *   kloop_clients.c  the Kafka clients: consumer and transactional producer, their settings, the
 *                    fetcher's wake
 *   kloop_clock.c    the clocks (and the prerequisite clocks, kloop_batch.h)
 *   kloop_decide.c   the decision tables (ll/kloop_decide.h): a message's step once its apply
 *                    answered; when the staged records go into a Kafka transaction
 *   kloop_io.c       the calls out to Kafka and the database (kloop_io.h), the real table
 *
 * No two files call each other, directly or through others (docs/design.md §3 has the layers;
 * tests/style/check_loop_layers.py checks it).
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
#ifndef LL_KLOOP_INT_H
#define LL_KLOOP_INT_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "kloop_io.h"
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
    rd_kafka_message_t *rkm;
    topic_io *io;
    struct part_state *ps;
    int64_t offset;
    char run[128];   /* the key as text (the run id), "" when none or too long */
    const void *key; /* key bytes (into rkm, or owned copy) */
    size_t key_len;
    const void *value; /* value bytes (NULL: a tombstone) */
    size_t len;
    rd_kafka_headers_t *hdrs; /* owned copy for a held message; NULL: read from rkm */
    int held;                 /* 1 while in its partition's held queue (owns its copies) */
    int state;                /* in the current batch: 0 pending, 1 done, 2 held (its run waits) */
    int decided;              /* in the current batch: applied by its input's bulk function, in
                               * the batch's set-based call of this number (0: not decided) */
    int retry;                /* left by it only for its run's order (ll_bulk_out.retry) */
    int replay_step;          /* in the current batch: how an input the ledger answered before is
                               * answered again (ll_replay_step, kloop_restate.c); 0: a fresh one */
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

/* A reply or dead letter whose database transaction committed, staged for the next Kafka
 * transaction (kloop_commit.c), with the labels it is counted under in loadledger_inputs_total or
 * loadledger_dead_letters_total once that transaction commits (obs.h; docs/operations.md). */
typedef struct ll_staged_rec {
    const char *topic;        /* borrowed: a topic_io's reply topic, or the dead-letter topic */
    void *key, *val;          /* owned (NULL: none, a tombstone) */
    size_t klen, vlen;        /* bytes */
    rd_kafka_headers_t *hdrs; /* owned; NULL: none */
    const char *in_topic;     /* borrowed: the input's topic (the label) */
    uint16_t code_id;         /* the code label (ll_obs_code_id) */
    uint8_t outcome_id;       /* a reply's outcome label (ll_obs_outcome_id) */
    bool dead;                /* a dead letter (labels topic, code), or a reply (topic, outcome, code) */
} ll_staged_rec;

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
 * that settles it (kloop_recover.c, the one writer of ll_recovery_state). */
typedef enum ll_recovery {
    LL_RECOVERY_NONE = 0, /* applying */
    LL_RECOVERY_REWIND,   /* the assignment goes back to the committed offsets (and the ledger's) */
    LL_RECOVERY_PRODUCER, /* a new producer (same transactional.id), then the rewind */
    LL_RECOVERY_EXIT      /* fenced or unauthorised: the loop ends, exit 2 */
} ll_recovery;

/* The loop's recovery: what is owed, whether this instance paused its whole assignment for it
 * (the consumer is still polled, so that the group keeps this member), and when the next step is
 * tried (monotonic ms), with its backoff (ms, 200 doubling to 5000). */
typedef struct ll_recovery_state {
    ll_recovery owed;
    bool paused;
    int64_t at_ms, backoff_ms;
} ll_recovery_state;

/* Per assigned Kafka partition: done offsets, held messages, whether it is paused. */
typedef struct part_state {
    char topic[256];
    int32_t partition;
    ll_offtrack track;
    lmsg **held; /* held messages in offset order (their runs wait) */
    size_t n_held, cap_held;
    int stopped;         /* paused because the held queue is full: fetch resumes below half */
    int64_t stop_offset; /* where fetching resumes (the lowest message neither done nor held) */
    int64_t touched;     /* batch number of the last change to track (offsets to commit) */
    size_t held_bytes;   /* keys and values of the held copies (bytes; loop.max_held_bytes) */
    int64_t pos_batch;   /* batch number whose position of it is in the ledger (kloop_position.c) */
    char pos_token[37];  /* the write token its ledger position carries as this instance last read
                          * (merge) or wrote it; "": no row. Every write is a compare-and-set on it */
    run_clock clocks[LL_RUN_CLOCKS]; /* runs waiting for a prerequisite here (kloop_clock.c) */
    /* The offsets whose answers Kafka's commit holds (replies and dead letters commit with their
     * offsets) while the ledger lost their effects: applied again without a second answer
     * (kloop_position.c, docs/design.md §5). Kept while answered_any; NULL ranges otherwise. */
    ll_offtrack answered;
    int answered_any;
    /* The ledger's done offsets, kept while it holds some that Kafka's commit does not (a group
     * reset to earlier offsets, a Kafka commit that did not happen): inputs the ledger answered
     * before, read again; each restates its first answer (kloop_restate.c, docs/design.md §5, "A
     * replay restates"). NULL ranges while !replayed_any. */
    ll_offtrack replayed;
    int replayed_any;
    /* Stopped because the broker no longer holds [gap_from, gap_to) (deleted by retention before
     * it was read, or a position past the log's end): paused until an operator accepts the gap
     * (kloop_gap.c, docs/design.md §5). gap_to 0: none. */
    int64_t gap_from, gap_to;
    int64_t gap_accepted_to; /* the end of an operator's acceptance holding gap_from, found by the
                              * idle check (0: none yet); the next merge reads on after it */
} part_state;

struct ll_loop {
    char service[64];
    const ll_config *cfg;
    void *svc;
    topic_io *io;
    size_t n_io;
    const ll_loop_io *kio; /* the calls out to Kafka and the database (kloop_io.h; borrowed) */
    rd_kafka_t *consumer;
    rd_kafka_t *producer;
    ll_db db;
    ll_schema_ids *ids;
    struct ll_registry *registry; /* schema.registry.url set: the schema registry client, else NULL */
    char dlq_topic[256];
    volatile sig_atomic_t stop;
    int64_t batch_max, db_batch_max, poll_ms, prereq_wait_ms, backoff_min_ms, backoff_max_ms, max_held;
    int64_t max_held_bytes;     /* loop.max_held_bytes: keys and values held per partition */
    int64_t reapplied_wait_ms;  /* loop.reapplied_wait: the prerequisite wait of an input answered
                                 * before the database lost its effect (ms) */
    int64_t position_check_ms;  /* loop.position_check_interval (ms; 0: never): the idle check */
    int64_t position_check_at;  /* monotonic ms of the next idle check */
    int position_missing_kafka; /* loop.position_missing = kafka: a partition without a position in
                                 * the ledger starts at Kafka's commit (the first start after the
                                 * upgrade to migration 0009), not at its beginning */
    int64_t crash_after, db_commits, batch_no;
    part_state **parts;
    size_t n_parts, cap_parts;
    unsigned rebalance_gen;
    char group[256], txid[512];
    size_t dlq_limit; /* largest dead-letter record (bytes): min(producer, topic limit) */
    /* Recovery without a restart (docs/design.md §3, the Kafka errors): while the producer is being
     * recreated, the positions cannot be reset to the committed offsets, or the database is
     * unreachable, the whole assignment is paused, the consumer is still polled (the group keeps
     * this member), and the step is retried with backoff (kloop_recover.c). */
    ll_recovery_state rec;
    /* The Kafka commit in flight on its own thread (kloop_commit.c); NULL when none.
     * loop.overlap_commit = false commits on the loop's thread. The records staged for the next
     * one (replies and dead letters of database transactions committed since it began; owned),
     * their bytes, and the batch number when the last commit took its offsets. */
    struct ll_commit_job *commit;
    struct ll_staged_rec *staged;
    size_t n_staged, cap_staged, staged_bytes;
    int64_t offsets_batch_no;
    /* The Kafka commit that failed (owned; NULL: none) and the call that failed, left by
     * kloop_commit.c for the loop's recovery (ll_loop_commit_failed) */
    rd_kafka_error_t *commit_err;
    const char *commit_err_what;
    bool overlap_commit;
    int64_t last_commit_ms; /* how long the last Kafka commit took (ms) */
    /* The consumer's settled fetch sizes (ll_kfetch_settle), its queue (for its length; owned),
     * and what was delivered since the loop last found that queue empty (bytes of values and
     * keys, messages): ll_loop_fetch_drained wakes librdkafka's fetcher after a queue it may have
     * stopped at (ll_kfetch_wake_due). */
    ll_kfetch fetch;
    rd_kafka_queue_t *consumer_q;
    int64_t fetch_run_bytes, fetch_run_msgs;
};

/* kloop_setup.c */
/* The loop with its calls out scripted (io: borrowed for the loop's lifetime): configured as
 * ll_loop_new does, but with no database opened, no Kafka client made and nothing subscribed
 * (the loop's unit tests). NULL with err. */
ll_loop *ll_loop_new_io(const char *service, const ll_config *cfg, const ll_input *inputs, size_t n,
                        void *svc, const ll_loop_io *io, char *err, size_t errlen);

/* kloop.c */
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

/* kloop_clock.c: the clocks */
/* Monotonic clock (ms). */
int64_t ll_loop_now_ms(void);
/* Monotonic clock (microseconds), for the latency metrics. */
int64_t ll_loop_now_us(void);

/* kloop_clients.c */
/* The consumer and the producer (init_transactions), the dead-letter topic checked. 0, or -1 with
 * err. */
int ll_loop_make_clients(ll_loop *l, char *err, size_t errlen);
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

/* kloop_parts.c */
/* The state of (topic, partition), created on first use (owned by the loop). */
part_state *ll_loop_part(ll_loop *l, const char *topic, int32_t partition);
/* Forgets every partition's state (its held queue freed). */
void ll_loop_forget_parts(ll_loop *l);
/* Loads each listed partition's committed offset and metadata into its tracker. */
void ll_loop_load_tracks(ll_loop *l, const rd_kafka_topic_partition_list_t *c);
/* Frees a held copy (its key, value and headers). */
void ll_loop_free_copy(lmsg *m);
/* Frees a partition's held queue (and forgets its runs' prerequisite clocks). */
void ll_loop_drop_held(part_state *ps);
/* Pauses the whole assignment: 0, or -1 when the assignment cannot be read (nothing paused). */
int ll_loop_parts_pause_all(ll_loop *l);
/* Resumes what this instance paused and nothing else: the whole assignment (whole_assignment), or
 * the partitions stopped by a full held queue. */
void ll_loop_parts_resume(ll_loop *l, bool whole_assignment);
/* Pauses ps's fetching at offset (its held queue is full; nothing while the whole assignment is
 * paused): 0, or -1 when the seek there failed (the position is unknown: a rewind is owed). */
int ll_loop_stop_partition(ll_loop *l, part_state *ps, int64_t offset);
/* Resumes ps's fetching (stopped by a full held queue). */
void ll_loop_resume_partition(ll_loop *l, part_state *ps);
/* Resumes the stopped partitions whose held queue drained to half of both limits. */
void ll_loop_resume_drained(ll_loop *l);

/* Whether m's answer is already in Kafka, committed with its offset before the ledger lost its
 * effect (kloop_position.c): applied again, it is not answered again, and it waits for its
 * prerequisite up to loop.reapplied_wait (docs/design.md §5). */
static inline bool ll_msg_answered_before(const lmsg *m)
{
    return m->ps->answered_any && ll_offtrack_is_done(&m->ps->answered, m->offset);
}

/* Whether the ledger answered m before (its offset is done in the ledger's position for this
 * group, not in Kafka's commit): read again, m restates that answer (kloop_restate.c). */
static inline bool ll_msg_replayed(const lmsg *m)
{
    return m->ps->replayed_any && ll_offtrack_is_done(&m->ps->replayed, m->offset);
}

/* Whether a recovery is owed (nothing may be applied; ll_recovery). */
static inline bool ll_loop_recovering(const ll_loop *l)
{
    return l->rec.owed != LL_RECOVERY_NONE;
}

/* kloop_recover.c: the one writer of l->rec, called by the loop (kloop.c) */
/* A rewind reported by a part (the batch undone, a done offset not taken, positions not
 * written, a seek that failed): owed, the assignment paused, tried after delay_ms (0: the
 * backoff); nothing when a recovery is owed already. */
void ll_loop_owe_rewind(ll_loop *l, int64_t delay_ms);
/* The Kafka commit failed (l->commit_err, consumed; none: 0): fatal → the producer is recreated or
 * the loop exits (LL_RECOVERY_EXIT); otherwise the transaction is aborted and the assignment
 * rewound. Returns -1. */
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

/* kloop_gap.c: offsets the topic no longer holds (docs/design.md §5) */
/* A fetch the broker refused (rkm: an RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET event; auto.offset.reset
 * is error): the partition's log start and end are asked (at most LL_LOOP_WATERMARK_MS); a position
 * below the log start or past its end stops the partition (paused, offsets_unreadable naming the
 * range once, loadledger_unreadable_offsets); a readable one (a start without an offset) owes a
 * rewind, which seeks there again. */
void ll_loop_offset_refused(ll_loop *l, const rd_kafka_message_t *rkm);
/* Every loop.position_check_interval while a partition is stopped for a gap: whether an operator
 * accepted it (nifi_ops.offset_gap_acceptance: a range holding the gap's first offset); then a
 * rewind is owed, whose merge reads on after the accepted range (kloop_position.c). */
void ll_loop_gaps_check(ll_loop *l);
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

/* kloop_dlq.c: the DEAD_LETTER event in the open database transaction (0, or -1 with db->err),
 * and, once that transaction committed, the dead-letter record staged (ll_loop_stage_record) */
int ll_loop_dead_letter_event(ll_loop *l, const lmsg *m, const char *run_id, const char *code,
                              const char *reason);
void ll_loop_dead_letter_stage(ll_loop *l, const lmsg *m, const char *code, const char *reason);

/* kloop_commit.c */
/* Stages one record (a reply or a dead letter of a committed database transaction) for the next
 * Kafka transaction (ll_loop_commit_push): topic borrowed for the loop's lifetime, key copied,
 * val taken over when take_val (malloc'ed) or copied, hdrs taken over (NULL: none). The labels it
 * is counted under when that transaction commits: in_topic (borrowed for the loop's lifetime),
 * outcome (NULL: a dead letter) and code (NULL or "": none), kept as label ids (ll_obs_code_id). Aborts on
 * out of memory, as the loop's other bookkeeping does. */
void ll_loop_stage_record(ll_loop *l, const char *topic, const void *key, size_t klen, void *val, size_t vlen,
                          rd_kafka_headers_t *hdrs, int take_val, const char *in_topic, const char *outcome,
                          const char *code);
/* After a batch's last database commit: when no Kafka commit is in flight, one begins now with
 * every staged record and the offsets of every partition changed since the last one (on a thread
 * of its own, or here with loop.overlap_commit = false); when one is in flight and has ended, its
 * outcome is taken first; when one is in flight and the staged records reach
 * LL_LOOP_STAGED_BATCHES x loop.batch_max or LL_LOOP_STAGED_BYTES, the loop waits for it.
 * Nothing begins while a recovery is owed. 0, or -1 with l->commit_err (the loop recovers:
 * ll_loop_commit_failed). */
int ll_loop_commit_push(ll_loop *l);
/* The same without waiting, each turn of the loop: a commit that ended is taken, and the staged
 * records go into the next one. 0, or -1 with l->commit_err. */
int ll_loop_commit_poll(ll_loop *l);
/* Waits for the commit in flight, if any, and takes its outcome: 0 (committed, or none), or -1
 * with l->commit_err (the error and the call that failed). The staged records stay staged. */
int ll_loop_commit_wait(ll_loop *l);
/* Everything staged committed before the caller goes on (a rebalance, the exit): waits, begins a
 * commit of what is staged, waits for it. 0, or -1 with l->commit_err. */
int ll_loop_commit_drain(ll_loop *l);
/* Drops the staged records (a rewind: their messages come again and are answered as replays). */
void ll_loop_staged_drop(ll_loop *l);
/* TESTING (fault.crash_after_db_commits), just before the kill: the commit in flight waited for,
 * then a Kafka transaction begun with the staged records produced into it and delivered, and
 * left open: the most adverse form of the crash between the two commits for read_committed
 * readers (the broker holds them back until the restarted instance aborts it). */
void ll_loop_commit_fault_open(ll_loop *l);

/* The staged records of a Kafka commit waiting behind the one in flight: at most this many bytes
 * (values, keys and headers), and at most LL_LOOP_STAGED_BATCHES x loop.batch_max records; beyond
 * either the loop waits. Five batches (1,200 replies at the default loop.batch_max 240): every
 * Kafka transaction pays a fixed wait, its AddPartitionsToTxn meeting the previous transaction's
 * markers still being written (CONCURRENT_TRANSACTIONS, retried by librdkafka 2.0.2 every 20 ms),
 * so the replies a transaction carries set the loop's pace (docs/design.md §3; the figures:
 * docs/performance.md, "2026-12-02, later"). About 250 bytes a reply as counted: 1,200 fit in 320
 * KiB; a dead letter (up to 2 MiB) fills them alone. */
#define LL_LOOP_STAGED_BATCHES 5
#define LL_LOOP_STAGED_BYTES   (320 * 1024)

/* What a batch leaves to the loop (kloop.c): whether it ran to its end (its results staged: the
 * Kafka commit may take them, and the partitions drained below half resume), and whether a rewind
 * is owed (the batch undone, a done offset its tracker could not take, positions not written, a
 * seek that failed), after rewind_delay_ms (0: the recovery backoff). */
typedef struct ll_batch_end {
    bool ended;
    bool rewind;
    int64_t rewind_delay_ms;
} ll_batch_end;

/* kloop_batch.c: applies one poll batch (polled: borrowed, n messages) with the due held runs */
ll_batch_end ll_loop_batch(ll_loop *l, rd_kafka_message_t **polled, size_t n);
/* kloop_position.c: makes each listed partition's tracker (loaded from its Kafka commit) the
 * intersection with the ledger's position for this consumer group, and sets the list's offsets to
 * the trackers' bases: where fetching must start (docs/design.md §5, "After the database went back
 * in time"). A partition the ledger has no
 * position for keeps Kafka's. The rows read are fenced (a new write token, kept in each part_state
 * as what this instance's next write expects): an instance that still expects an older token is
 * refused its next write. 0, or -1 when the ledger cannot be read (l->db.err; nothing may be
 * applied until it can). */
int ll_loop_positions_merge(ll_loop *l, rd_kafka_topic_partition_list_t *c);
/* kloop_position.c: the idle check (every loop.position_check_interval, between batches): whether
 * each assigned partition's ledger position still carries the token this instance last read or
 * wrote, so that a database that went back in time is found without new input. 0 in step, 1 when
 * some did not (position_conflict logged: the caller owes a rewind), -1 when the ledger could not
 * be read (l->db.err; the next check or write finds it). */
int ll_loop_positions_check(ll_loop *l);
/* kloop_position.c: writes, in a statement of its own, the position of every partition changed in
 * this batch that no database transaction of the batch wrote (a batch that only skipped done
 * offsets or saw transaction markers), by the same compare-and-set as every write. 0, or -1
 * (logged; the caller rewinds: a position not written must not let Kafka's commit pass the
 * ledger, and one refused means the ledger is not the one this instance last saw). */
int ll_loop_positions_flush(ll_loop *l);

#endif
