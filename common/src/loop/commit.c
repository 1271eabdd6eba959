/*
 * commit.c - the Kafka side of the loop's batches (docs/design.md §3): the replies and dead
 * letters of committed database transactions are staged here, and a Kafka transaction carries
 * them with the offsets (and their done-offset metadata) of every partition changed since the
 * previous one: begun, produced, flushed, offsets sent and committed on a thread of its own
 * (loop.overlap_commit, the default) while the loop polls, applies and commits the next batches
 * in the database; or on the loop's thread, batch by batch.
 *
 * Why (the command's latency): a Kafka transaction takes tens of milliseconds, with a long tail,
 * whatever it carries (AddPartitionsToTxn, produce, AddOffsetsToTxn, TxnOffsetCommit, EndTxn;
 * the figures: docs/performance-history.md, "2026-12-01, late night"). When each batch's database commit
 * waited for the previous batch's Kafka commit, the loop ran at the pace of Kafka commits and a slow one held
 * back every run's next database commit, hence its outbox row and its command. Now the database commits go
 * on; what they staged while a commit is in flight goes into the next one, which begins as soon as the one in
 * flight ends (its thread wakes the loop's poll). The staged records are bounded (LL_LOOP_STAGED_BATCHES x
 * loop.batch_max records, LL_LOOP_STAGED_BYTES bytes): beyond that the loop waits for the commit in flight.
 *
 * Why this keeps the contract (docs/design.md §4): an offset is still committed only in the Kafka
 * transaction that carries its replies, after their database commit. Before a Kafka commit ends,
 * several database transactions may be committed whose replies are staged or in the open Kafka
 * transaction: a crash there, or a failed commit (aborted, rewound, the staged records dropped),
 * has their messages read again from the committed offsets and applied as replays, whose replies
 * then commit, exactly as after a crash between one batch's two commits. The messages named done
 * by the last committed metadata are skipped as before.
 *
 * The thread touches only the producer (librdkafka's handles are thread-safe), the consumer's
 * queue (to wake the loop's poll) and the job it was given; every decision on the loop's state,
 * the metrics' staging included, stays on the loop's thread. A commit that failed is returned
 * (-1, with its failure left: ll_loop_commit_take_error): the loop decides what follows (loop.c).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "commit.h"
#include "partition.h"
#include "ll/kloop_decide.h"
#include "ll/log.h"
#include "ll/obs.h"

/* A reply or dead letter whose database transaction committed, staged for the next Kafka
 * transaction (commit.c), with the labels it is counted under in loadledger_inputs_total or
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

/* One commit in flight: what the thread needs, and what it found. */
struct ll_commit_job {
    pthread_t thread;
    const ll_loop_io *io; /* the loop's calls out (borrowed) */
    rd_kafka_t *producer;
    rd_kafka_queue_t *wake; /* the consumer's queue, yielded when done */
    ll_staged_rec *recs;    /* owned; the thread hands them to the producer */
    size_t n_recs;
    rd_kafka_topic_partition_list_t *offsets;    /* owned */
    rd_kafka_consumer_group_metadata_t *group;   /* owned; NULL when no offsets */
    rd_kafka_error_t *err;                       /* owned; NULL: committed */
    const char *what;                            /* the call that failed */
    int64_t started_us, us;                      /* when it started, how long it took (µs) */
    int64_t produced_us, flushed_us, offsets_us; /* when each step ended (µs, monotonic) */
    atomic_int done;                             /* set by the thread as its last step */
};

/* The loop's Kafka commit: the one in flight on its own thread (NULL: none; loop.overlap_commit =
 * false commits on the loop's thread), the records staged for the next one (replies and dead
 * letters of database transactions committed since it began; owned) with their bytes, the batch
 * number when the last commit took its offsets, the commit that failed (owned; NULL: none) and
 * the call that failed, left for the loop's recovery (ll_loop_commit_take_error), and how long the
 * last commit took (ms). */
struct ll_commit {
    struct ll_commit_job *job;
    ll_staged_rec *staged;
    size_t n_staged, cap_staged, staged_bytes;
    int64_t offsets_batch_no;
    rd_kafka_error_t *err;
    const char *err_what;
    bool overlap;
    int64_t last_ms;
};

void ll_loop_commit_make(ll_loop *l, bool overlap)
{
    ll_commit *c = calloc(1, sizeof *c);
    if (!c)
        abort();
    c->overlap = overlap;
    l->commit = c;
}

size_t ll_loop_staged_count(const ll_loop *l)
{
    return l->commit->n_staged;
}

bool ll_loop_commit_in_flight(const ll_loop *l)
{
    return l->commit->job != NULL;
}

int64_t ll_loop_commit_last_ms(const ll_loop *l)
{
    return l->commit->last_ms;
}

const rd_kafka_error_t *ll_loop_commit_error(const ll_loop *l)
{
    return l->commit->err;
}

rd_kafka_error_t *ll_loop_commit_take_error(ll_loop *l, const char **what)
{
    ll_commit *c = l->commit;
    rd_kafka_error_t *e = c->err;
    *what = c->err_what;
    c->err = NULL;
    return e;
}

static void rec_free(ll_staged_rec *r)
{
    free(r->key);
    free(r->val);
    if (r->hdrs)
        rd_kafka_headers_destroy(r->hdrs);
    memset(r, 0, sizeof *r);
}

void ll_loop_stage_record(ll_loop *l, const char *topic, const void *key, size_t klen, void *val, size_t vlen,
                          rd_kafka_headers_t *hdrs, int take_val, const char *in_topic, const char *outcome,
                          const char *code)
{
    ll_commit *c = l->commit;
    if (c->n_staged == c->cap_staged) {
        size_t cap = c->cap_staged ? c->cap_staged * 2 : 64;
        ll_staged_rec *s = realloc(c->staged, cap * sizeof *s);
        if (!s)
            abort();
        c->staged = s;
        c->cap_staged = cap;
    }
    ll_staged_rec *r = &c->staged[c->n_staged++];
    memset(r, 0, sizeof *r);
    r->topic = topic;
    if (key && klen > 0) {
        if (!(r->key = malloc(klen)))
            abort();
        memcpy(r->key, key, klen);
        r->klen = klen;
    }
    if (val && !take_val) {
        void *copy = malloc(vlen ? vlen : 1);
        if (!copy)
            abort();
        memcpy(copy, val, vlen);
        val = copy;
    }
    r->val = val;
    r->vlen = val ? vlen : 0;
    r->hdrs = hdrs;
    r->in_topic = in_topic;
    r->dead = outcome == NULL;
    r->outcome_id = ll_obs_outcome_id(outcome);
    r->code_id = ll_obs_code_id(code);
    c->staged_bytes += r->klen + r->vlen + 64;
    const char *name;
    const void *hv;
    size_t hl;
    for (size_t i = 0;
         hdrs && rd_kafka_header_get_all(hdrs, i, &name, &hv, &hl) == RD_KAFKA_RESP_ERR_NO_ERROR; i++)
        c->staged_bytes += strlen(name) + hl + 8;
}

void ll_loop_staged_drop(ll_loop *l)
{
    if (!l->commit)
        return; /* a loop whose set-up failed before its commit was made */
    ll_commit *c = l->commit;
    for (size_t i = 0; i < c->n_staged; i++)
        rec_free(&c->staged[i]);
    c->n_staged = 0;
    c->staged_bytes = 0;
    if (c->cap_staged > 1024) { /* a burst's array is not kept */
        free(c->staged);
        c->staged = NULL;
        c->cap_staged = 0;
    }
}

void ll_loop_commit_free(ll_loop *l)
{
    ll_commit *c = l->commit;
    l->commit = NULL;
    if (!c)
        return;
    for (size_t i = 0; i < c->n_staged; i++)
        rec_free(&c->staged[i]);
    free(c->staged);
    if (c->err)
        rd_kafka_error_destroy(c->err);
    free(c);
}

/* One record into the open transaction (the value and headers are the producer's from here; a
 * full queue is waited out, 100 ms at a time). NULL, or the error. */
static rd_kafka_error_t *produce_rec(const ll_loop_io *io, rd_kafka_t *producer, ll_staged_rec *r)
{
    for (;;) {
        rd_kafka_resp_err_t e = io->produce(producer, r->topic, r->key, r->klen, r->val, r->vlen, r->hdrs);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
            r->val = NULL; /* freed by the producer */
            r->hdrs = NULL;
            free(r->key);
            r->key = NULL; /* the labels stay: counted when the transaction commits */
            return NULL;
        }
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(producer, 100);
            continue;
        }
        rd_kafka_error_t *err = rd_kafka_error_new(e, "produce to %s: %s", r->topic, rd_kafka_err2str(e));
        rec_free(r);
        return err;
    }
}

/* Begins a Kafka transaction and produces recs into it (each handed to the producer, or freed).
 * NULL, or the error with *what the call that failed (the records not produced stay owned). */
static rd_kafka_error_t *begin_and_produce(const ll_loop_io *io, rd_kafka_t *producer, ll_staged_rec *recs,
                                           size_t n, const char **what)
{
    *what = "begin_transaction";
    rd_kafka_error_t *e = io->begin_transaction(producer);
    for (size_t i = 0; i < n && !e; i++) {
        *what = "produce";
        e = produce_rec(io, producer, &recs[i]);
    }
    return e;
}

/* Begin, the records, the replies delivered, the offsets, then the commit (a retriable commit
 * error is tried again, 5 times at most). Blocks up to 30 s for the flush, 30 s for the offsets
 * and 60 s per commit attempt (the transaction's timeout). */
static void commit_job_run(struct ll_commit_job *j)
{
    if ((j->err = begin_and_produce(j->io, j->producer, j->recs, j->n_recs, &j->what)))
        return;
    /* the replies delivered first: their partitions' AddPartitionsToTxn is then over, and the
     * AddOffsetsToTxn below cannot meet it at the coordinator (CONCURRENT_TRANSACTIONS, retried
     * 20 ms later by librdkafka 2.0.2; docs/design.md §3). A flush that times out is the
     * commit's to report: commit_transaction flushes again and fails the same way. */
    j->produced_us = ll_now_us();
    (void)j->io->flush(j->producer, 30000);
    j->flushed_us = ll_now_us();
    if (j->offsets->cnt > 0) {
        j->err = j->io->send_offsets_to_transaction(j->producer, j->offsets, j->group, 30000);
        if (j->err) {
            j->what = "send_offsets_to_transaction";
            return;
        }
    }
    j->offsets_us = ll_now_us();
    for (int attempt = 0;; attempt++) {
        j->err = j->io->commit_transaction(j->producer, 60000);
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
    j->us = ll_now_us() - j->started_us;
    atomic_store(&j->done, 1);
    if (j->wake)
        rd_kafka_queue_yield(j->wake); /* the loop's poll returns: the next commit may begin */
    return NULL;
}

/* Counts the records of a committed transaction under their labels (runs of equal labels in one
 * call each: a batch's ACCEPTED replies are one). */
static void count_committed(const ll_staged_rec *recs, size_t n)
{
    for (size_t i = 0; i < n;) {
        const ll_staged_rec *r = &recs[i];
        size_t k = 1;
        while (i + k < n && recs[i + k].dead == r->dead && recs[i + k].in_topic == r->in_topic &&
               recs[i + k].outcome_id == r->outcome_id && recs[i + k].code_id == r->code_id)
            k++;
        if (r->dead)
            ll_obs_dead_letters(r->in_topic, ll_obs_code_name(r->code_id), k);
        else
            ll_obs_inputs(r->in_topic, ll_obs_outcome_name(r->outcome_id), ll_obs_code_name(r->code_id), k);
        i += k;
    }
}

static void commit_job_free(struct ll_commit_job *j)
{
    for (size_t i = 0; i < j->n_recs; i++)
        rec_free(&j->recs[i]); /* those not produced (a failure) */
    free(j->recs);
    rd_kafka_topic_partition_list_destroy(j->offsets);
    if (j->group)
        rd_kafka_consumer_group_metadata_destroy(j->group);
    free(j);
}

/* The job's outcome on the loop's thread: 0, or -1 with l->commit->err (the error, owned by the
 * loop until its recovery takes it) and l->commit->err_what. */
static int commit_job_end(ll_loop *l, struct ll_commit_job *j)
{
    ll_commit *c = l->commit;
    rd_kafka_error_t *e = j->err;
    const char *what = j->what;
    c->last_ms = j->us / 1000;
    if (!e) {
        /* where a slow commit spent its time: the flush includes AddPartitionsToTxn, which meets
         * the previous commit's markers still being written (CONCURRENT_TRANSACTIONS, retried by
         * librdkafka 2.0.2 every 20 ms; docs/performance-history.md, "2026-12-02, later") */
        ll_log(LL_DEBUG, NULL, "kafka_commit",
               "%zu records, %d partitions' offsets: produce %lld, flush %lld, offsets %lld, commit %lld µs",
               j->n_recs, j->offsets->cnt, (long long)(j->produced_us - j->started_us),
               (long long)(j->flushed_us - j->produced_us), (long long)(j->offsets_us - j->flushed_us),
               (long long)(j->started_us + j->us - j->offsets_us));
        ll_obs_kafka_commit((double)j->us / 1e6);
        count_committed(j->recs, j->n_recs); /* its replies and dead letters are visible now */
    }
    commit_job_free(j);
    if (!e)
        return 0;
    if (c->err) /* not taken (the exit): the latest one is reported */
        rd_kafka_error_destroy(c->err);
    c->err = e;
    c->err_what = what;
    return -1;
}

/* The offsets to commit: every partition changed since the last commit took its offsets, at its
 * first message not done, with the done offsets above it as metadata. */
static rd_kafka_topic_partition_list_t *offsets_of(ll_loop *l)
{
    ll_commit *c = l->commit;
    rd_kafka_topic_partition_list_t *o = rd_kafka_topic_partition_list_new((int)ll_loop_n_parts(l));
    ll_offtrack view;
    ll_offtrack_init(&view, 0);
    part_state **changed = NULL;
    size_t n_changed = ll_loop_parts_changed(l, c->offsets_batch_no, INT64_MAX, &changed);
    for (size_t i = 0; i < n_changed; i++) {
        part_state *ps = changed[i];
        char md[LL_OFFTRACK_METADATA_MAX];
        int n = 0;
        int64_t offset = ll_loop_part_commit_point(ps, &view, md, sizeof md, &n);
        rd_kafka_topic_partition_t *tp =
            rd_kafka_topic_partition_list_add(o, ll_loop_part_topic(ps), ll_loop_part_no(ps));
        tp->offset = offset;
        if (n > 0) {
            tp->metadata = malloc((size_t)n);
            memcpy(tp->metadata, md, (size_t)n);
            tp->metadata_size = (size_t)n;
        }
    }
    ll_offtrack_free(&view);
    free(changed);
    c->offsets_batch_no = ll_loop_batch_no(l);
    return o;
}

/* Whether anything waits for a Kafka commit: staged records, or offsets changed. */
static int commit_owed(const ll_loop *l)
{
    const ll_commit *c = l->commit;
    if (c->n_staged > 0)
        return 1;
    return ll_loop_parts_changed(l, c->offsets_batch_no, INT64_MAX, NULL) > 0;
}

/* Begins the next commit with everything staged (none in flight; ll_loop_commit_decide said
 * START). 0, or -1. */
static int commit_start(ll_loop *l)
{
    ll_commit *c = l->commit;
    struct ll_commit_job *j = calloc(1, sizeof *j);
    if (!j)
        abort();
    j->io = l->kio;
    j->producer = l->producer;
    j->recs = c->staged; /* taken over */
    j->n_recs = c->n_staged;
    c->staged = NULL;
    c->n_staged = c->cap_staged = c->staged_bytes = 0;
    j->offsets = offsets_of(l);
    j->group = j->offsets->cnt > 0 ? l->kio->group_metadata(l->consumer) : NULL;
    j->started_us = ll_now_us();
    if (c->overlap) {
        j->wake = l->consumer_q;
        if (pthread_create(&j->thread, NULL, commit_thread, j) == 0) {
            c->job = j;
            return 0;
        }
        j->wake = NULL;
    }
    /* loop.overlap_commit off, or no thread to be had: commit here and now */
    commit_thread(j);
    return commit_job_end(l, j);
}

int ll_loop_commit_wait(ll_loop *l)
{
    ll_commit *c = l->commit;
    struct ll_commit_job *j = c->job;
    if (!j)
        return 0;
    c->job = NULL;
    pthread_join(j->thread, NULL);
    return commit_job_end(l, j);
}

/* The staged records into a Kafka commit, as ll_loop_commit_decide says. 0, or -1. */
static int commit_step(ll_loop *l, bool may_wait)
{
    ll_commit *c = l->commit;
    ll_commit_state st = {
        .in_flight = c->job != NULL,
        .ended = c->job && atomic_load(&c->job->done),
        .owed = commit_owed(l),
        .blocked = ll_loop_recovering(l),
        .staged = c->n_staged,
        .staged_bytes = c->staged_bytes,
        .max_staged = LL_LOOP_STAGED_BATCHES * (size_t)l->batch_max,
        .max_staged_bytes = LL_LOOP_STAGED_BYTES,
    };
    switch (ll_loop_commit_decide(&st, may_wait)) {
    case LL_COMMIT_LEAVE:
        return 0;
    case LL_COMMIT_START:
        return commit_start(l);
    case LL_COMMIT_TAKE_START:
    case LL_COMMIT_WAIT_START:
        break;
    }
    /* the commit in flight taken; then the table again, with none in flight (a failure goes
     * back to the loop, which recovers) */
    if (ll_loop_commit_wait(l) != 0)
        return -1;
    return commit_step(l, may_wait);
}

int ll_loop_commit_poll(ll_loop *l)
{
    return commit_step(l, false);
}

int ll_loop_commit_push(ll_loop *l)
{
    return commit_step(l, true);
}

int ll_loop_commit_drain(ll_loop *l)
{
    if (ll_loop_commit_wait(l) != 0 || commit_step(l, true) != 0)
        return -1;
    return ll_loop_commit_wait(l);
}

void ll_loop_commit_fault_open(ll_loop *l)
{
    ll_commit *c = l->commit;
    if (ll_loop_commit_wait(l) != 0)
        return; /* the kill follows: the error goes with the process */
    const char *what;
    rd_kafka_error_t *e = begin_and_produce(l->kio, l->producer, c->staged, c->n_staged, &what);
    if (e)
        rd_kafka_error_destroy(e);
    ll_loop_staged_drop(l);
    l->kio->flush(l->producer, 10000);
}
