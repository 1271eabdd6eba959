/*
 * position.h - the consumer group's read positions kept in the ledger (position.c): the merge
 * with Kafka's commits, the idle check, and every write a compare-and-set. Not a public header.
 */
#ifndef LL_LOOP_POSITION_H
#define LL_LOOP_POSITION_H

#include "ll/kloop_decide.h"
#include "loop_int.h"

/* A result of the open database transaction, produced after it commits. */
typedef struct out_item {
    lmsg *m;
    ll_replay_step replay_step; /* how its input is answered again (batch.c; LL_REPLAY_APPLY: fresh) */
    int is_reply;               /* 1: a reply (encoded at once: bytes, not a JSON tree, wait for the
                                 * commit), 0: a dead letter */
    unsigned char *reply;       /* the encoded reply, owned (NULL when it did not encode) */
    size_t reply_len;           /* bytes */
    char *encode_err;           /* why the reply did not fit its schema, owned, or NULL */
    char code[64];              /* dead-letter code, "" for a reply */
    char *reason;               /* dead-letter reason, owned */
    char run_id[128];
    char outcome[16], reply_code[48]; /* a reply's labels for loadledger_inputs_total (obs.h) */
    char *refusal; /* a REJECTED reply as compact JSON, owned, recorded before the commit so that
                    * a replay restates it (nifi_ops.input_refusal, batch.c); NULL: none */
} out_item;

/* An offset whose reply or dead letter is staged: marked done in its partition's tracker at the
 * end of the batch, all of them in offset order, so that the tracker never holds more ranges than
 * the offsets the batch leaves not done (marked one by one in run order, a batch of 1,000 runs
 * made and merged hundreds of ranges on the way; docs/design.md §3, the tracker). */
typedef struct done_mark {
    part_state *ps;
    int64_t offset;
} done_mark;

/* What the statement before a COMMIT writes (ll_positions_precommit): the heartbeats the
 * transaction asked for (ll_msg_touch_run), its results, and the offsets the batch's earlier
 * transactions staged (all borrowed for the call). */
typedef struct ll_precommit {
    const char (*touch)[37];
    size_t n_touch;
    const out_item *outs;
    size_t n_outs;
    const done_mark *marks;
    size_t n_marks;
} ll_precommit;

/* position.c: makes each listed partition's tracker (loaded from its Kafka commit) the
 * intersection with the ledger's position for this consumer group, and sets the list's offsets to
 * the trackers' bases: where fetching must start (docs/design.md §5, "After the database went back
 * in time"). A partition the ledger has no
 * position for keeps Kafka's. The rows read are fenced (a new write token, kept in each part_state
 * as what this instance's next write expects): an instance that still expects an older token is
 * refused its next write. 0, or -1 when the ledger cannot be read (l->db.err; nothing may be
 * applied until it can). */
int ll_loop_positions_merge(ll_loop *l, rd_kafka_topic_partition_list_t *c);
/* position.c: the idle check (every loop.position_check_interval, between batches): whether
 * each assigned partition's ledger position still carries the token this instance last read or
 * wrote, so that a database that went back in time is found without new input. 0 in step, 1 when
 * some did not (position_conflict logged: the caller owes a rewind), -1 when the ledger could not
 * be read (l->db.err; the next check or write finds it). */
int ll_loop_positions_check(ll_loop *l);
/* position.c: writes, in a statement of its own, the position of every partition changed in
 * this batch that no database transaction of the batch wrote (a batch that only skipped done
 * offsets or saw transaction markers), by the same compare-and-set as every write. 0, or -1
 * (logged; the caller rewinds: a position not written must not let Kafka's commit pass the
 * ledger, and one refused means the ledger is not the one this instance last saw). */
int ll_loop_positions_flush(ll_loop *l);

/* position.c: the statement before the COMMIT: the heartbeats asked for in this transaction
 * (ll_msg_touch_run) and the read position of every partition it answered on (docs/design.md §5,
 * "After the database went back in time"), in one statement. 0, or -1 with l->db.err. */
int ll_positions_precommit(ll_loop *l, const ll_precommit *pc);

/* The digest of m's key and value (ll_fingerprint64 of each, combined) a recorded refusal is
 * matched on: an offset of a topic made again is another input. */
static inline int64_t ll_msg_digest(const lmsg *m)
{
    uint64_t v = ll_fingerprint64(m->value, m->value ? m->len : 0);
    uint64_t k = ll_fingerprint64(m->key, m->key ? m->key_len : 0);
    return (int64_t)(v ^ ((k << 1) | (k >> 63)));
}

/* Whether o is recorded with its input before the COMMIT (nifi_ops.input_refusal): a refusal or a
 * dead letter, unless it restates one recorded already. */
static inline bool ll_out_recorded(const out_item *o)
{
    return o->replay_step != LL_REPLAY_RESTATE && (!o->is_reply || o->refusal);
}

#endif
