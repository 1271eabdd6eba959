/*
 * commit.h - the loop's Kafka transactions (commit.c): records of committed database
 * transactions staged, then carried with their offsets by one commit at a time. Not a public header.
 */
#ifndef LL_LOOP_COMMIT_H
#define LL_LOOP_COMMIT_H

#include "loop_int.h"

/* commit.c: the loop's Kafka commit, one object (its struct private to commit.c) */
typedef struct ll_commit ll_commit;
/* The loop's Kafka commit made, nothing staged and none in flight; overlap: loop.overlap_commit (a
 * commit runs on a thread of its own beside the next batches). Freed by ll_loop_commit_free. Aborts
 * on out of memory. */
void ll_loop_commit_make(ll_loop *l, bool overlap);
/* Frees the loop's Kafka commit: its staged records and a failure not taken (none made: nothing).
 * No commit may be in flight. */
void ll_loop_commit_free(ll_loop *l);
/* The records staged for the next Kafka transaction. */
size_t ll_loop_staged_count(const ll_loop *l);
/* Whether a Kafka commit is in flight (begun, its outcome not taken). */
bool ll_loop_commit_in_flight(const ll_loop *l);
/* How long the last Kafka commit took (ms; the batch_done debug line). */
int64_t ll_loop_commit_last_ms(const ll_loop *l);
/* The failure of the last Kafka commit, not yet taken (borrowed), or NULL. */
const rd_kafka_error_t *ll_loop_commit_error(const ll_loop *l);
/* Takes the failure left by a commit that returned -1 (owned by the caller; NULL: none) and the
 * call that failed (*what, static text). */
rd_kafka_error_t *ll_loop_commit_take_error(ll_loop *l, const char **what);

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
 * Nothing begins while a recovery is owed. 0, or -1 with the failure left (ll_loop_commit_take_error; the
 * loop recovers: ll_loop_commit_failed). */
int ll_loop_commit_push(ll_loop *l);
/* The same without waiting, each turn of the loop: a commit that ended is taken, and the staged
 * records go into the next one. 0, or -1 with the failure left. */
int ll_loop_commit_poll(ll_loop *l);
/* Waits for the commit in flight, if any, and takes its outcome: 0 (committed, or none), or -1
 * with the failure left (the error and the call that failed). The staged records stay staged. */
int ll_loop_commit_wait(ll_loop *l);
/* Everything staged committed before the caller goes on (a rebalance, the exit): waits, begins a
 * commit of what is staged, waits for it. 0, or -1 with the failure left. */
int ll_loop_commit_drain(ll_loop *l);
/* Drops the staged records (a rewind: their messages come again and are answered as replays; no
 * commit made: nothing). */
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
 * docs/performance-history.md, "2026-12-02, later"). About 250 bytes a reply as counted: 1,200 fit in 320
 * KiB; a dead letter (up to 2 MiB) fills them alone. */
#define LL_LOOP_STAGED_BATCHES 5
#define LL_LOOP_STAGED_BYTES   (320 * 1024)

#endif
