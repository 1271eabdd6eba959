/*
 * position.h - the consumer group's read positions kept in the ledger (position.c): the merge
 * with Kafka's commits, the idle check, and every write a compare-and-set. Not a public header.
 */
#ifndef LL_LOOP_POSITION_H
#define LL_LOOP_POSITION_H

#include "batch.h"

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
int ll_batch_precommit(batch *b);

/* Whether o is recorded with its input before the COMMIT (nifi_ops.input_refusal): a refusal or a
 * dead letter, unless it restates one recorded already. */
static inline bool ll_out_recorded(const out_item *o)
{
    return o->m->replay_step != LL_REPLAY_RESTATE && (!o->is_reply || o->refusal);
}

#endif
