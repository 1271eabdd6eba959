/*
 * kloop_commit.c - the batch's Kafka transaction: begun before its first record, committed (its
 * offsets sent with it) on the loop's thread, or, with loop.overlap_commit, on a thread of its own
 * while the loop polls and applies the next batch (docs/design.md §3).
 *
 * Why a thread (issue 8: time outside PostgreSQL): the commit of a batch's Kafka transaction
 * (AddOffsetsToTxn, TxnOffsetCommit, EndTxn: 20-30 ms a batch on the test machine) is waiting for
 * the broker. The next batch's poll and database work (all but its COMMIT) need nothing from that
 * commit, so they may run beside it; the loop waits for it (ll_loop_commit_wait) before anything
 * durable of the next batch: its database COMMIT, its first record produced, a rewind, a
 * rebalance, the exit. The durable order is therefore the same (database commit k, Kafka commit
 * k, database commit k+1, ...): only work that a crash or a failed commit throws away (the next
 * batch's uncommitted statements) is overlapped. A failed commit is handled as before (abort,
 * rewind to the committed offsets), and the next batch's database transaction, still open, is
 * rolled back by the caller. Off by default: with the broker on the same 2 cores it gained
 * nothing (docs/performance.md).
 *
 * The thread touches only the producer (librdkafka's handles are thread-safe) and the job it was
 * given; every decision on the loop's state stays on the loop's thread.
 */
#include <pthread.h>
#include <stdlib.h>

#include "kloop_int.h"
#include "ll/log.h"
#include "ll/obs.h"

/* One commit in flight: what the thread needs, and what it found. */
struct ll_commit_job {
    pthread_t thread;
    rd_kafka_t *producer;
    rd_kafka_topic_partition_list_t *offsets;  /* owned */
    rd_kafka_consumer_group_metadata_t *group; /* owned; NULL when no offsets */
    rd_kafka_error_t *err;                     /* owned; NULL: committed */
    const char *what;                          /* the call that failed */
    int64_t started_us, us;                    /* when it started, how long it took (µs) */
};

int ll_loop_begin(ll_loop *l)
{
    ll_obs_stage_drop(); /* what an earlier transaction staged did not commit */
    rd_kafka_error_t *e = rd_kafka_begin_transaction(l->producer);
    return e ? ll_loop_txn_failed(l, e, "begin_transaction") : 0;
}

/* The replies delivered, the offsets, then the commit (a retriable commit error is tried again,
 * 5 times at most). Blocks up to 30 s for the flush, 30 s for the offsets and 60 s per commit
 * attempt (the transaction's timeout). */
static void commit_job_run(struct ll_commit_job *j)
{
    /* the replies delivered first: their partitions' AddPartitionsToTxn is then over, and the
     * AddOffsetsToTxn below cannot meet it at the coordinator (CONCURRENT_TRANSACTIONS, retried
     * 20 ms later by librdkafka 2.0.2; docs/design.md §3). A flush that times out is the
     * commit's to report: commit_transaction flushes again and fails the same way. */
    (void)rd_kafka_flush(j->producer, 30000);
    if (j->offsets->cnt > 0) {
        j->err = rd_kafka_send_offsets_to_transaction(j->producer, j->offsets, j->group, 30000);
        if (j->err) {
            j->what = "send_offsets_to_transaction";
            return;
        }
    }
    for (int attempt = 0;; attempt++) {
        j->err = rd_kafka_commit_transaction(j->producer, 60000);
        if (!j->err || !rd_kafka_error_is_retriable(j->err) || attempt >= 5)
            break;
        rd_kafka_error_destroy(j->err);
    }
    j->what = "commit_transaction";
}

static void *commit_thread(void *arg)
{
    struct ll_commit_job *j = arg;
    commit_job_run(j);
    j->us = ll_loop_now_us() - j->started_us;
    return NULL;
}

static void commit_job_free(struct ll_commit_job *j)
{
    rd_kafka_topic_partition_list_destroy(j->offsets);
    if (j->group)
        rd_kafka_consumer_group_metadata_destroy(j->group);
    free(j);
}

/* The job's outcome on the loop's thread: 0, or -1 after ll_loop_txn_failed (abort, rewind). */
static int commit_job_end(ll_loop *l, struct ll_commit_job *j)
{
    rd_kafka_error_t *e = j->err;
    const char *what = j->what;
    l->last_commit_ms = j->us / 1000;
    if (!e) {
        ll_obs_kafka_commit((double)j->us / 1e6);
        ll_obs_stage_commit(); /* the batch's replies and dead letters are visible now */
    }
    commit_job_free(j);
    return e ? ll_loop_txn_failed(l, e, what) : 0;
}

int ll_loop_commit_start(ll_loop *l, rd_kafka_topic_partition_list_t *offsets)
{
    struct ll_commit_job *j = calloc(1, sizeof *j);
    if (!j) {
        rd_kafka_topic_partition_list_destroy(offsets);
        return ll_loop_txn_failed(
            l, rd_kafka_error_new(RD_KAFKA_RESP_ERR__CRIT_SYS_RESOURCE, "out of memory"), "commit");
    }
    j->producer = l->producer;
    j->offsets = offsets;
    j->group = offsets->cnt > 0 ? rd_kafka_consumer_group_metadata(l->consumer) : NULL;
    j->started_us = ll_loop_now_us();
    if (l->overlap_commit && pthread_create(&j->thread, NULL, commit_thread, j) == 0) {
        l->commit = j;
        return 0;
    }
    /* loop.overlap_commit off, or no thread to be had: commit here and now */
    commit_thread(j);
    return commit_job_end(l, j);
}

int ll_loop_commit_wait(ll_loop *l)
{
    struct ll_commit_job *j = l->commit;
    if (!j)
        return 0;
    l->commit = NULL;
    pthread_join(j->thread, NULL);
    return commit_job_end(l, j);
}
