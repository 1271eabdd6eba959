/*
 * kloop.h - the consumer loop every consuming service shares (docs/contract.md K§3).
 *
 *   1. poll a batch; decode and validate each message against its topic's schema;
 *   2. apply the batch in one PostgreSQL transaction (or a few, of at most loop.db_batch_max
 *      messages), a savepoint per message so that a rejection, a deferral, a dead letter or an
 *      SQL error undoes that message alone; the service's apply function runs inside it and
 *      follows the lock order; messages are applied in run-id order (one lock order for all);
 *   3. after each database commit, and only then, stage its replies; a Kafka transaction carries
 *      the staged replies of one or more database commits with their consumed offsets
 *      (send_offsets_to_transaction), on a thread of its own while the next batches are applied
 *      (loop.overlap_commit): a database commit never waits for a Kafka commit, and an offset is
 *      committed only with its replies, after their database commit (docs/design.md §3);
 *   4. abortable Kafka error: abort, rewind to the committed offsets, apply again (idempotent);
 *      fatal producer error: a new producer in the same process; fenced or unauthorised: exit 2;
 *   5. PostgreSQL unreachable: nothing is committed or skipped; the assignment is paused and
 *      polled on, retried with backoff, and resumed by itself;
 *   6. rebalance: eager assignor; a rebalance during the poll drops the batch and seeks the new
 *      assignment back to its committed offsets (what was fetched under it is fetched again).
 *
 * A message whose prerequisite is not in the ledger yet (a chunk before its claim), or whose run
 * is locked by someone else past db.lock_timeout, is held with the later messages of its run on
 * its Kafka partition and retried with backoff; every other run flows past it. The committed
 * offset stays below it and the done offsets above it travel as commit metadata (offtrack.h), so
 * nothing is applied or answered twice after a crash. After loop.prerequisite_wait (counted from
 * its first deferral, not from a database outage) the apply function is called once more with
 * wait_expired set for the contract's business answer (a run that exists but never reached the
 * status the event needs); a prerequisite that never appeared becomes a dead letter
 * (docs/contract.md K§6). A message that cannot be applied at all goes to the dead-letter topic
 * with its key, value and headers plus ll.error.* headers, an event DEAD_LETTER is written to
 * load_event, and the partition moves on.
 *
 * The functions here are the loop's (common/src/loop/, mapped in loop_int.h and docs/design.md §3):
 * ll_loop_new in setup.c, the run, ll_loop_stop and ll_loop_free in loop.c; ll_msg_touch_run and
 * ll_bulk_reply call through the tables the loop sets (txn.c, batch.c); the reply builder is
 * ll/reply.h's. Topic names and the schema folder are topics.h's.
 */
#ifndef LL_KLOOP_H
#define LL_KLOOP_H

#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>

#include "ll/codec.h"
#include "ll/config.h"
#include "ll/db.h"

/* What the apply function decided. */
typedef enum ll_apply {
    LL_APPLY_COMMIT = 0, /* commit the transaction, then send the reply */
    LL_APPLY_ROLLBACK,   /* roll back (a rejection that must change nothing), then send the reply */
    LL_APPLY_DEFER,      /* a prerequisite is not in the ledger yet: roll back, retry later */
    LL_APPLY_DEAD,       /* cannot be applied at all: roll back, dead letter with the reason */
    LL_APPLY_DB          /* an SQL call failed: the loop reads db->err (retry, wait or dead letter) */
} ll_apply;

/* What a message offers its apply function of the loop's open database transaction: one table of
 * calls, set by the loop, so that a service reaches the transaction only through it (ll_msg_touch_run;
 * docs/design.md §3). */
typedef struct ll_msg_ops {
    /* the heartbeat of run_id asked for (txn: ll_msg.txn) */
    void (*touch_run)(void *txn, const char *run_id);
} ll_msg_ops;

/* One decoded input message. Borrowed by the apply function. */
typedef struct ll_msg {
    const char *logical; /* logical topic name, e.g. "chunks" */
    const char *topic;   /* broker topic name */
    int32_t partition;
    int64_t offset;
    const char *key;       /* the run id (NUL-terminated copy), or NULL */
    json_t *value;         /* decoded and projected onto the topic's schema; read only: one batch
                            * hands the same value to the set-based and the per-message apply */
    const char *service;   /* the consuming service's name */
    int wait_expired;      /* 1 when loop.prerequisite_wait has passed since this message's first
                            * deferral: answer with the contract's business answer instead of
                            * deferring; an unknown prerequisite is then dead-lettered by the loop */
    const ll_msg_ops *ops; /* the loop's calls (NULL: none, ll_msg_touch_run does nothing) */
    void *txn;             /* the loop's database transaction, handed to ops; opaque */
} ll_msg;

/*
 * Refreshes the heartbeat of run_id (canonical uuid text, copied) once, right before the
 * database transaction that holds this message's effect commits, instead of once per message
 * (the run row is written once per database transaction, docs/design.md §3). Dropped if the message's effect
 * is rolled back. The run row must already be locked by this transaction (contract lock order).
 */
static inline void ll_msg_touch_run(const ll_msg *m, const char *run_id)
{
    if (m->ops)
        m->ops->touch_run(m->txn, run_id);
}

/* What the apply function returns besides its decision. */
typedef struct ll_apply_out {
    json_t *reply;        /* the reply record (owned by the loop after return), or NULL */
    char reason[512];     /* for DEFER and DEAD: why (goes to the dead-letter header) */
    char reason_code[64]; /* for DEAD: e.g. INVALID_FIELD, PREREQUISITE_TIMEOUT */
} ll_apply_out;

/* Applies one message inside an open transaction. May be called again for the same message. */
typedef ll_apply (*ll_apply_fn)(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out);

/* Where ll_bulk_reply hands a reply: the loop's table, set before a bulk call. */
typedef struct ll_bulk_ops {
    /* the reply of the call's message at index at, taken over (sink: ll_bulk_out.sink) */
    void (*reply)(void *sink, size_t at, json_t *reply);
} ll_bulk_ops;

/* What a bulk apply decided for one message (see ll_bulk_fn). */
typedef struct ll_bulk_out {
    bool decided;           /* true: applied, its reply handed over by ll_bulk_reply; false: left to
                             * the per-message apply */
    bool retry;             /* when not decided: left only to keep its run's order, and it could be
                             * decided on its own; worth another set-based try once the earlier one is
                             * applied */
    bool replied;           /* set by ll_bulk_reply */
    const ll_bulk_ops *ops; /* the loop's, set before the call */
    void *sink;             /* handed to ops; opaque */
    size_t at;              /* the message's index in the call, set before the call */
} ll_bulk_out;

/*
 * Hands the reply record of a decided message to the loop, which encodes it at once and owns it
 * from here (a record that does not fit its schema becomes a dead letter, as for
 * ll_apply_out.reply). A bulk function calls it once per decided message, in message order, as
 * it builds each reply, so that a batch's replies are never all in memory as records (memory
 * under a backlog, docs/design.md §3). If the function then returns LL_APPLY_DB, the loop drops what was
 * handed over.
 */
static inline void ll_bulk_reply(ll_bulk_out *out, json_t *reply)
{
    out->ops->reply(out->sink, out->at, reply);
    out->replied = true;
}

/*
 * Optional, per input: applies many messages of one input at the start of a database transaction
 * with a few set-based statements instead of an apply call and a savepoint each (docs/design.md
 * §3, the set-based part). It
 * decides the messages it can (their effect is then written and their reply set: LL_APPLY_COMMIT
 * semantics) and leaves the others (decided false) to the per-message apply, which runs after it
 * in the same transaction. It must never decide a message after leaving an earlier one of the
 * same key (run) undecided, so that a run's messages keep their order, and it writes nothing for
 * a message it leaves. It waits for no lock (SKIP LOCKED: a run locked elsewhere is left).
 * Returns LL_APPLY_COMMIT, or LL_APPLY_DB when a statement failed (db->err says why): the loop then
 * rolls the transaction back and applies each of its messages one by one. msgs[i]->txn is set
 * (ll_msg_touch_run works); outs has n elements, zeroed but for sink and at. A message decided
 * without a reply handed over is a defect of the function: the loop then undoes the call and
 * applies its messages one by one.
 */
typedef ll_apply (*ll_bulk_fn)(void *svc, ll_db *db, const ll_msg *const *msgs, size_t n, ll_bulk_out *outs);

/* One consumed topic and where its replies go. */
typedef struct ll_input {
    const char *logical;       /* input topic, e.g. "chunks" */
    const char *schema_file;   /* its .avsc, in the schema dir, e.g. "ChunkWritten.avsc" */
    const char *reply_logical; /* reply topic, e.g. "chunk-outcomes" */
    const char *reply_schema;  /* the reply's .avsc */
    ll_apply_fn apply;
    ll_bulk_fn bulk; /* NULL: every message goes through apply */
} ll_input;

/* A running loop. Opaque. */
typedef struct ll_loop ll_loop;

/* The configuration keys the loop reads (for a service's key table); {NULL}-terminated. */
extern const ll_config_key LL_LOOP_CONFIG_KEYS[];

/*
 * Creates the loop for service `service` over `inputs` (n of them): loads schemas, builds the
 * transactional producer and the consumer (group loadledger.<service> unless kafka.group.id is
 * set; transactional.id <group>.<service.instance_id>), opens the database. Returns NULL with
 * err filled on a configuration, schema or Kafka setup error.
 */
ll_loop *ll_loop_new(const char *service, const ll_config *cfg, const ll_input *inputs, size_t n, void *svc,
                     char *err, size_t errlen);
/*
 * The consumer group and the instance id of service under cfg, as ll_loop_new uses them (setup.c):
 * the group is kafka.group.id, else <topic.prefix><service>; the instance is service.instance_id,
 * else the host name; the transactional.id is "<group>.<instance>". Written NUL-terminated into
 * the caller's buffers (truncated to their sizes). Used by the instance lease (ll/instance.h).
 */
void ll_loop_identity(const ll_config *cfg, const char *service, char *group, size_t group_len,
                      char *instance, size_t instance_len);
/* Runs until ll_loop_stop or a fatal Kafka error. Returns 0 on a clean stop, 2 on fatal. */
int ll_loop_run(ll_loop *l);
/* Asks the loop to stop after the current batch (async-signal-safe). */
void ll_loop_stop(ll_loop *l);
/* Frees everything (closes the consumer, leaving the group). */
void ll_loop_free(ll_loop *l);
/* The loop's database connection (for start-up checks). */
ll_db *ll_loop_db(ll_loop *l);

/* The reply builder (ll_reply_new) is core/reply.c, declared in ll/reply.h. */
#include "ll/reply.h"

#endif
