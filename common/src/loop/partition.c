/*
 * partition.c - the assigned partitions (partition.h): state, offsets trackers, held queues, the
 * prerequisite clocks, pause and resume, and offsets the topic no longer holds.
 *
 * the loop's assigned Kafka partitions (loop_int.h): their state (done offsets
 * loaded from the committed offsets with their done-offset metadata, the held queue's copies
 * freed), pausing a partition whose held queue is full (and resuming it), and pausing or resuming
 * the whole assignment for the loop's recovery. It reports a failure by its result and calls
 * nothing above it.
 *
 * the held queues of the loop (batch.h): a message whose run waits (a
 * missing prerequisite, a lock held elsewhere, a lost deadlock) is copied into its Kafka
 * partition's queue with the later messages of its run, retried with backoff
 * (loop.retry_backoff_min..max) and removed once done. A full queue (loop.max_held) pauses the
 * partition's fetching (partition.c), which frees the copies too.
 *
 * the loop's clocks (loop_int.h: monotonic ms and µs), and the prerequisite
 * clocks of the runs waiting on a Kafka partition (batch.h, docs/design.md §3): a run's
 * wait runs for all its messages at once, held or not.
 *
 * offsets the topic no longer holds (issue 39, item 6; docs/design.md §5, "Offsets
 * the topic no longer holds").
 *
 * A consumer position below a partition's log start means inputs deleted by the topic's retention
 * before this group read them (a service down longer than the retention, a ledger restored to a
 * position older than it). librdkafka's auto.offset.reset = earliest would read on from the log
 * start and mark the gap done without a word: its inputs lost, their runs stuck with no sign why.
 * The consumer's auto.offset.reset is error (setup.c): the fetch is refused with
 * RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET, and this file stops that partition (paused; the others go
 * on), logs offsets_unreadable once per range (level error, the range in its message; fields
 * topic, kafkaPartition, offset: the first offset lost), and counts the range in
 * loadledger_unreadable_offsets (alert LoadledgerOffsetsUnreadable). Nothing is marked done. An operator who
 * decided the range is lost records it with `loadctl accept-gap` (nifi_ops.offset_gap_acceptance: who, why,
 * when); the idle check finds it and rewinds, and the merge (position.c) reads on from the accepted
 * range's end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit.h"
#include "partition.h"
#include "position.h"
#include "txn.h"
#include "ll/kclient.h"
#include "ll/kloop_decide.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/pgarray.h"

part_state *ll_loop_part(ll_loop *l, const char *topic, int32_t partition)
{
    part_state *found = ll_loop_part_find(l, topic, partition);
    if (found)
        return found;
    if (l->n_parts == l->cap_parts) {
        size_t cap = l->cap_parts ? l->cap_parts * 2 : 16;
        part_state **p = realloc(l->parts, cap * sizeof *p);
        if (!p)
            abort();
        l->parts = p;
        l->cap_parts = cap;
    }
    part_state *ps = calloc(1, sizeof *ps);
    if (!ps)
        abort();
    snprintf(ps->topic, sizeof ps->topic, "%s", topic);
    ps->partition = partition;
    ll_offtrack_init(&ps->track, 0);
    ll_offtrack_init(&ps->answered, 0);
    ll_offtrack_init(&ps->replayed, 0);
    l->parts[l->n_parts++] = ps;
    return ps;
}

const rd_kafka_headers_t *ll_loop_msg_headers(const ll_loop *l, const lmsg *m)
{
    rd_kafka_headers_t *h = NULL;
    if (m->hdrs)
        return m->hdrs;
    if (m->rkm && l->kio->msg_headers(m->rkm, &h) == RD_KAFKA_RESP_ERR_NO_ERROR)
        return h;
    return NULL;
}

void ll_loop_free_copy(lmsg *m)
{
    free((void *)m->key);
    free((void *)m->value);
    if (m->hdrs)
        rd_kafka_headers_destroy(m->hdrs);
    free(m);
}

void ll_loop_drop_held(part_state *ps)
{
    for (size_t i = 0; i < ps->n_held; i++)
        ll_loop_free_copy(ps->held[i]);
    ps->n_held = 0;
    ps->held_bytes = 0;
    /* and the runs' prerequisite clocks: the messages come again, their wait starts again (a
     * rewind after a database failover may have lost the very prerequisite they wait for) */
    memset(ps->clocks, 0, sizeof ps->clocks);
}

/* What a partition's Kafka commit says is done: its tracker, and while the ledger has lost
 * answered inputs (position.c), those too. The commit records which inputs were answered
 * (their replies commit with it); an answered input the loop has not applied again yet (held, or
 * not read yet) stays in it, so that after a further loss or a restart it is applied again without
 * a second answer (docs/design.md §5). Into *out (initialised); returns out's tracker to read. */
static const ll_offtrack *committed_view(part_state *ps, ll_offtrack *out)
{
    if (!ps->answered_any)
        return &ps->track;
    int64_t last = ps->answered.n ? ps->answered.hi[ps->answered.n - 1] : ps->answered.base - 1;
    if (last < ps->track.base) {
        ps->answered_any = 0; /* every answered input is applied again */
        ll_offtrack_reset(&ps->answered, 0);
        return &ps->track;
    }
    ll_offtrack_copy(out, &ps->track);
    if (ll_offtrack_union(out, &ps->answered) != 0) /* at the limit: a later loss may answer some twice */
        ll_log(LL_WARN, NULL, "answered_offsets_partial",
               "%s[%d]: the answered offsets do not all fit the commit", ps->topic, (int)ps->partition);
    return out;
}

size_t ll_loop_parts_changed(const ll_loop *l, int64_t after, int64_t upto, part_state ***list)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n_parts; i++)
        n += l->parts[i]->touched > after && l->parts[i]->touched <= upto;
    if (!list)
        return n;
    *list = NULL;
    if (n == 0)
        return 0;
    part_state **a = malloc(n * sizeof *a);
    if (!a)
        abort();
    size_t k = 0;
    for (size_t i = 0; i < l->n_parts; i++)
        if (l->parts[i]->touched > after && l->parts[i]->touched <= upto)
            a[k++] = l->parts[i];
    *list = a;
    return n;
}

const char *ll_loop_part_topic(const part_state *ps)
{
    return ps->topic;
}

int32_t ll_loop_part_no(const part_state *ps)
{
    return ps->partition;
}

void ll_loop_part_done_view(const part_state *ps, ll_offtrack *t)
{
    ll_offtrack_copy(t, &ps->track);
}

int ll_loop_part_add_replayed(const part_state *ps, ll_offtrack *t)
{
    return ps->replayed_any && ll_offtrack_union(t, &ps->replayed) != 0 ? -1 : 0;
}

/* A partition stopped for a gap is merged (ll_loop_part_merge): when an operator's acceptance
 * found by the idle check (gap_accepted_to) holds its position, the range is marked done up to the
 * acceptance's end, never past the log start the refusal saw (a larger acceptance cannot skip
 * readable inputs), and it reads on from there; in every case the stop is over (a position still
 * refused stops it again, at its next fetch). */
static void gap_settle(ll_loop *l, part_state *ps)
{
    int64_t to = ps->gap_accepted_to < ps->gap_to ? ps->gap_accepted_to : ps->gap_to;
    if (ps->gap_accepted_to > 0 && ll_gap_accepted(ps->track.base, ps->gap_from, to)) {
        ll_offtrack gone;
        ll_offtrack_init(&gone, to);
        ll_offtrack_union(&ps->track, &gone);
        ll_offtrack_free(&gone);
        ll_log_ctx ctx = {NULL, NULL, ps->topic, ps->partition, to};
        ll_log(LL_WARN, &ctx, "offsets_gap_accepted",
               "offsets [%lld, %lld) accepted as lost by an operator (nifi_ops.offset_gap_acceptance): "
               "reading on "
               "from %lld",
               (long long)ps->gap_from, (long long)to, (long long)ps->track.base);
        ps->touched = l->batch_no + 1; /* the next batch writes its position, the next commit takes it */
    }
    ps->gap_from = ps->gap_to = ps->gap_accepted_to = 0;
    ll_obs_unreadable(ll_loop_unreadable(l));
}

int64_t ll_loop_part_merge(ll_loop *l, part_state *ps, const ll_offtrack *ledger, bool kafka_none,
                           ll_part_merged *out)
{
    *out = (ll_part_merged){0};
    ps->replayed_any = 0; /* set below when the ledger has applied offsets Kafka has not */
    ll_offtrack_reset(&ps->replayed, 0);
    if (!ledger)
        return ps->track.base;
    if (kafka_none)
        ll_offtrack_reset(&ps->track, 0); /* Kafka's done set: empty */
    /* one past the last offset Kafka knows as done */
    out->kafka_end = ps->track.n ? ps->track.hi[ps->track.n - 1] + 1 : ps->track.base;
    /* no Kafka commit: Kafka has done nothing (the group's first batch crashed before its Kafka
     * commit, or the committed offsets expired): what the ledger applied is answered again, as
     * replays, from the start */
    ll_offtrack_copy(&ps->answered, &ps->track);
    ll_offtrack_intersect(&ps->track, ledger, &out->kafka_only, &out->ledger_only);
    if (ps->gap_to > 0)
        gap_settle(l, ps);
    ps->answered_any = out->kafka_only > 0;
    if (!ps->answered_any)
        ll_offtrack_reset(&ps->answered, 0);
    /* the ledger's done set, while it holds offsets Kafka's does not: those inputs were answered
     * before (a group reset to earlier offsets, a Kafka commit that did not happen); read again,
     * each restates its first answer (batch.c) */
    ps->replayed_any = out->ledger_only > 0;
    if (ps->replayed_any)
        ll_offtrack_copy(&ps->replayed, ledger);
    return ps->track.base;
}

int64_t ll_loop_part_commit_point(part_state *ps, ll_offtrack *scratch, char *md, size_t mdcap, int *mdlen)
{
    const ll_offtrack *t = committed_view(ps, scratch);
    bool lossy = false;
    int n = ll_offtrack_metadata(t, md, mdcap, &lossy);
    if (lossy) /* past the bounds of docs/design.md §9: a crash now would answer some twice */
        ll_log(LL_ERROR, NULL, "offset_metadata_lossy",
               "%s[%d]: %zu done ranges above offset %lld do not fit the commit metadata (%d bytes); "
               "the later ones are applied again (as replays) after a crash or a rebalance",
               ps->topic, (int)ps->partition, ll_offtrack_ranges(t), (long long)t->base,
               LL_OFFTRACK_METADATA_MAX);
    *mdlen = n > 0 ? n : 0;
    return t->base;
}

size_t ll_loop_held_total(const ll_loop *l)
{
    size_t n = 0;
    for (size_t i = 0; i < l->n_parts; i++)
        n += l->parts[i]->n_held;
    return n;
}

size_t ll_loop_held_due(ll_loop *l, int64_t now, lmsg **out)
{
    size_t n = 0;
    for (size_t p = 0; p < l->n_parts; p++) {
        part_state *ps = l->parts[p];
        for (size_t i = 0; i < ps->n_held; i++) {
            lmsg *m = ps->held[i], *head = NULL;
            for (size_t j = 0; j <= i && !head; j++)
                if (strcmp(ps->held[j]->run, m->run) == 0)
                    head = ps->held[j];
            if (head->retry_at_ms <= now)
                out[n++] = m;
        }
    }
    return n;
}

void ll_loop_held_clock_share(part_state *ps, const char *run, int64_t since)
{
    for (size_t i = 0; i < ps->n_held; i++)
        if (!ps->held[i]->defer_since_ms && strcmp(ps->held[i]->run, run) == 0)
            ps->held[i]->defer_since_ms = since;
}

void ll_loop_held_counts(const ll_loop *l, size_t *msgs, size_t *runs, size_t *answered,
                         int64_t *oldest_since)
{
    *msgs = *runs = *answered = 0;
    *oldest_since = 0;
    for (size_t i = 0; i < l->n_parts; i++) {
        const part_state *ps = l->parts[i];
        *msgs += ps->n_held;
        for (size_t k = 0; k < ps->n_held; k++) {
            const lmsg *m = ps->held[k];
            *answered += ll_msg_answered_before(m);
            if (!ll_msg_answered_before(m) && m->defer_since_ms > 0 &&
                (*oldest_since == 0 || m->defer_since_ms < *oldest_since))
                *oldest_since = m->defer_since_ms;
            size_t j = 0;
            while (j < k && strcmp(ps->held[j]->run, ps->held[k]->run) != 0)
                j++;
            *runs += j == k;
        }
    }
}

ll_part_admit ll_loop_part_admit(ll_loop *l, part_state *ps, int64_t offset)
{
    if (ps->stopped && offset >= ps->stop_offset)
        return LL_ADMIT_PAUSED;
    if (ll_offtrack_seen(&ps->track, offset) != 0)
        return LL_ADMIT_TRACK_FULL;
    ps->touched = l->batch_no;
    if (ll_offtrack_is_done(&ps->track, offset))
        return LL_ADMIT_DONE;
    if (ll_loop_offset_held(ps, offset))
        return LL_ADMIT_HELD;
    return LL_ADMIT_NEW;
}

void ll_loop_part_touch(ll_loop *l, part_state *ps)
{
    ps->touched = l->batch_no;
}

int ll_loop_part_done(part_state *ps, int64_t offset, bool quiet)
{
    if (ll_offtrack_done(&ps->track, offset) == 0)
        return 0;
    if (!quiet)
        ll_log(LL_ERROR, NULL, "offset_track_full",
               "%s[%d]: offset %lld cannot be marked done (%zu ranges): rewinding to the committed offsets",
               ps->topic, (int)ps->partition, (long long)offset, ll_offtrack_ranges(&ps->track));
    return -1;
}

int64_t ll_loop_part_base(const part_state *ps)
{
    return ps->track.base;
}

void ll_loop_parts_tick(ll_loop *l)
{
    l->batch_no++;
}

int64_t ll_loop_batch_no(const ll_loop *l)
{
    return l->batch_no;
}

size_t ll_loop_n_parts(const ll_loop *l)
{
    return l->n_parts;
}

part_state *ll_loop_part_at(const ll_loop *l, size_t i)
{
    return l->parts[i];
}

void ll_loop_parts_free(ll_loop *l)
{
    ll_loop_forget_parts(l);
    free(l->parts);
    l->parts = NULL;
    l->cap_parts = 0;
}

void ll_loop_forget_parts(ll_loop *l)
{
    for (size_t i = 0; i < l->n_parts; i++) {
        ll_loop_drop_held(l->parts[i]);
        free(l->parts[i]->held);
        ll_offtrack_free(&l->parts[i]->track);
        ll_offtrack_free(&l->parts[i]->answered);
        ll_offtrack_free(&l->parts[i]->replayed);
        free(l->parts[i]);
    }
    l->n_parts = 0;
    ll_obs_unreadable(0); /* no partition, no gap of its */
}

/* Loads each listed partition's committed offset and metadata into its tracker (a partition
 * without a committed offset starts from whatever is delivered first). */
void ll_loop_load_tracks(ll_loop *l, const rd_kafka_topic_partition_list_t *c)
{
    for (int i = 0; i < c->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &c->elems[i];
        part_state *ps = ll_loop_part(l, e->topic, e->partition);
        char md[LL_OFFTRACK_METADATA_MAX] = "";
        if (e->metadata && e->metadata_size > 0 && e->metadata_size < sizeof md)
            memcpy(md, e->metadata, e->metadata_size);
        if (ll_offtrack_load(&ps->track, e->offset >= 0 ? e->offset : 0, md) != 0)
            ll_log(LL_WARN, NULL, "offset_metadata_ignored", "%s[%d]: commit metadata not understood: %.80s",
                   e->topic, (int)e->partition, md);
    }
}

int ll_loop_parts_pause_all(ll_loop *l)
{
    if (l->all_paused)
        return 0;
    rd_kafka_topic_partition_list_t *asg = NULL;
    if (l->kio->assignment(l->consumer, &asg) != RD_KAFKA_RESP_ERR_NO_ERROR || !asg)
        return -1;
    if (asg->cnt > 0)
        l->kio->pause(l->consumer, asg);
    rd_kafka_topic_partition_list_destroy(asg);
    l->all_paused = true;
    return 0;
}

void ll_loop_parts_assigned(ll_loop *l, rd_kafka_topic_partition_list_t *assigned, bool paused)
{
    if (paused)
        l->kio->pause(l->consumer, assigned);
    l->all_paused = paused;
}

bool ll_loop_parts_all_paused(const ll_loop *l)
{
    return l->all_paused;
}

/* Resumes what this instance paused and nothing else: resuming a never-paused partition can
 * refetch from a stale position in librdkafka 2.0.2 (fixed in 2.4.0). */
void ll_loop_parts_resume(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *tp = NULL;
    bool whole_assignment = l->all_paused;
    l->all_paused = false;
    if (whole_assignment) {
        if (l->kio->assignment(l->consumer, &tp) != RD_KAFKA_RESP_ERR_NO_ERROR)
            tp = NULL;
    } else {
        tp = rd_kafka_topic_partition_list_new((int)(l->n_parts ? l->n_parts : 1));
        for (size_t i = 0; i < l->n_parts; i++)
            if (l->parts[i]->stopped)
                rd_kafka_topic_partition_list_add(tp, l->parts[i]->topic, l->parts[i]->partition);
    }
    if (tp && tp->cnt > 0)
        l->kio->resume(l->consumer, tp);
    if (tp)
        rd_kafka_topic_partition_list_destroy(tp);
    for (size_t i = 0; i < l->n_parts; i++)
        l->parts[i]->stopped = 0;
}

/* ---- a partition whose held queue is full ---------------------------------------------------- */

int ll_loop_stop_partition(ll_loop *l, part_state *ps, int64_t offset)
{
    if (l->all_paused || (ps->stopped && offset >= ps->stop_offset))
        return 0;
    rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(tp, ps->topic, ps->partition)->offset = offset;
    l->kio->pause(l->consumer, tp);
    char why[512];
    int failed = l->kio->seek(l->consumer, tp, 10000, why, sizeof why);
    rd_kafka_topic_partition_list_destroy(tp);
    ps->stopped = 1;
    ps->stop_offset = offset;
    ll_log_ctx ctx = {NULL, NULL, ps->topic, ps->partition, offset};
    ll_log(LL_WARN, &ctx, "partition_stopped", "%zu messages held (loop.max_held %lld): fetching paused",
           ps->n_held, (long long)l->max_held);
    if (failed)
        ll_log(LL_WARN, &ctx, "seek_failed", "%s; rewinding", why);
    return failed ? -1 : 0;
}

void ll_loop_resume_partition(ll_loop *l, part_state *ps)
{
    if (!ps->stopped || l->all_paused)
        return;
    rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(tp, ps->topic, ps->partition);
    l->kio->resume(l->consumer, tp);
    rd_kafka_topic_partition_list_destroy(tp);
    ps->stopped = 0;
}

void ll_loop_resume_drained(ll_loop *l)
{
    for (size_t i = 0; i < l->n_parts; i++)
        if (l->parts[i]->stopped && (int64_t)l->parts[i]->n_held <= l->max_held / 2 &&
            (int64_t)l->parts[i]->held_bytes <= l->max_held_bytes / 2)
            ll_loop_resume_partition(l, l->parts[i]);
}

/* True when run r has a message in ps's held queue. */
int ll_loop_run_held(const part_state *ps, const char *r)
{
    for (size_t i = 0; i < ps->n_held; i++)
        if (strcmp(ps->held[i]->run, r) == 0)
            return 1;
    return 0;
}

int ll_loop_offset_held(const part_state *ps, int64_t offset)
{
    for (size_t i = 0; i < ps->n_held; i++)
        if (ps->held[i]->offset == offset)
            return 1;
    return 0;
}

/* Copies a fresh message into the held queue of its partition, in offset order. Returns the held
 * copy, or NULL when the queue is full: loop.max_held copies, or loop.max_held_bytes of keys and
 * values (one message is always taken into an empty queue; docs/design.md §9). */
lmsg *ll_loop_hold_copy(ll_loop *l, lmsg *m)
{
    part_state *ps = m->ps;
    size_t bytes = m->key_len + m->len;
    if ((int64_t)ps->n_held >= l->max_held ||
        (ps->n_held > 0 && (int64_t)(ps->held_bytes + bytes) > l->max_held_bytes))
        return NULL;
    if (ps->n_held == ps->cap_held) {
        size_t cap = ps->cap_held ? ps->cap_held * 2 : 8;
        lmsg **h = realloc(ps->held, cap * sizeof *h);
        if (!h)
            abort();
        ps->held = h;
        ps->cap_held = cap;
    }
    lmsg *c = malloc(sizeof *c);
    if (!c)
        abort();
    *c = *m;
    c->rkm = NULL;
    c->decoded = NULL; /* the batch's (ll_batch_decode): the copy keeps only its bytes */
    c->decode_err = NULL;
    c->key = m->key ? memcpy(malloc(m->key_len ? m->key_len : 1), m->key, m->key_len) : NULL;
    c->value = m->value ? memcpy(malloc(m->len ? m->len : 1), m->value, m->len) : NULL;
    rd_kafka_headers_t *h = NULL;
    c->hdrs = m->rkm && l->kio->msg_headers(m->rkm, &h) == RD_KAFKA_RESP_ERR_NO_ERROR && h
                  ? rd_kafka_headers_copy(h)
                  : NULL;
    c->held = 1;
    /* the prerequisite clock is the run's on this partition (docs/design.md §3): a message
     * queued behind a deferred one waits no longer than it, instead of a period of its own once
     * the one before it is dead-lettered */
    for (size_t i = 0; i < ps->n_held && !c->defer_since_ms; i++)
        if (ps->held[i]->defer_since_ms && strcmp(ps->held[i]->run, c->run) == 0)
            c->defer_since_ms = ps->held[i]->defer_since_ms;
    size_t at = ps->n_held;
    while (at > 0 && ps->held[at - 1]->offset > c->offset)
        at--;
    memmove(ps->held + at + 1, ps->held + at, (ps->n_held - at) * sizeof *ps->held);
    ps->held[at] = c;
    ps->n_held++;
    ps->held_bytes += bytes;
    return c;
}

/* Removes a done held message from its queue; it is freed when the batch ends (the batch's
 * work still refers to it). */
void ll_loop_unhold(lmsg *m)
{
    part_state *ps = m->ps;
    for (size_t i = 0; i < ps->n_held; i++)
        if (ps->held[i] == m) {
            memmove(ps->held + i, ps->held + i + 1, (ps->n_held - i - 1) * sizeof *ps->held);
            ps->n_held--;
            ps->held_bytes -= m->key_len + m->len;
            break;
        }
}

/* The slot of run on ps, or NULL. */
static run_clock *find(part_state *ps, const char *run)
{
    if (!run[0] || strlen(run) >= sizeof ps->clocks[0].run)
        return NULL;
    for (size_t i = 0; i < LL_RUN_CLOCKS; i++)
        if (ps->clocks[i].run[0] && strcmp(ps->clocks[i].run, run) == 0)
            return &ps->clocks[i];
    return NULL;
}

int64_t ll_loop_clock_of(part_state *ps, const char *run, int64_t wait_ms, int64_t now)
{
    run_clock *c = find(ps, run);
    if (!c)
        return 0;
    if (now - c->since_ms >= 2 * wait_ms) {
        c->run[0] = '\0';
        return 0;
    }
    return c->since_ms;
}

int64_t ll_loop_clock_start(part_state *ps, const char *run, int64_t since)
{
    if (!run[0] || strlen(run) >= sizeof ps->clocks[0].run)
        return since;
    run_clock *c = find(ps, run);
    if (c)
        return c->since_ms;
    c = &ps->clocks[0]; /* a free slot, else the oldest clock */
    for (size_t i = 0; i < LL_RUN_CLOCKS && c->run[0]; i++)
        if (!ps->clocks[i].run[0] || ps->clocks[i].since_ms < c->since_ms)
            c = &ps->clocks[i];
    snprintf(c->run, sizeof c->run, "%s", run);
    c->since_ms = since;
    return since;
}

void ll_loop_clock_stop(part_state *ps, const char *run)
{
    run_clock *c = find(ps, run);
    if (c)
        c->run[0] = '\0';
}

/* For each listed stopped partition ($2..$4: topic, partition, the first offset not readable), the
 * furthest end of an operator's acceptance whose range holds that offset (by the index on (group,
 * topic, partition, to_offset)); partitions without one are not in the answer. */
static const ll_stmt ST_GAPS_ACCEPTED = {
    "kloop_gaps_accepted",
    "SELECT k.topic, k.part, max(a.to_offset) FROM unnest($2::text[], $3::int[], $4::bigint[]) AS k(topic, "
    "part, off)"
    " JOIN nifi_ops.offset_gap_acceptance a ON a.consumer_group = $1 AND a.topic = k.topic"
    " AND a.kafka_partition = k.part AND a.to_offset > k.off AND a.from_offset <= k.off GROUP BY k.topic, "
    "k.part",
    4};

/* The state of an assigned (topic, partition), or NULL (an event of a partition revoked since). */
part_state *ll_loop_part_find(const ll_loop *l, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < l->n_parts; i++)
        if (l->parts[i]->partition == partition && strcmp(l->parts[i]->topic, topic) == 0)
            return l->parts[i];
    return NULL;
}

/* Pauses ps's fetching (it stays paused across the loop's own resumes only as long as the broker
 * refuses its position: each refusal comes back here). */
static void pause_partition(ll_loop *l, const part_state *ps)
{
    rd_kafka_topic_partition_list_t *one = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(one, ps->topic, ps->partition);
    l->kio->pause(l->consumer, one);
    rd_kafka_topic_partition_list_destroy(one);
}

bool ll_loop_offset_refused(ll_loop *l, const rd_kafka_message_t *rkm)
{
    const char *topic = rkm->rkt ? l->kio->msg_topic(rkm) : NULL;
    if (!topic) {
        ll_log(LL_WARN, NULL, "consumer_error", "%s", rd_kafka_message_errstr(rkm));
        return false;
    }
    part_state *ps = ll_loop_part_find(l, topic, rkm->partition);
    if (!ps || ll_loop_recovering(l))
        return false; /* revoked since; or a rewind is owed, which seeks every partition to its position */
    int64_t from = ps->track.base, lo = -1, hi = -1;
    ll_log_ctx ctx = {NULL, NULL, topic, rkm->partition, from};
    rd_kafka_resp_err_t e =
        l->kio->watermarks(l->consumer, topic, rkm->partition, &lo, &hi, LL_LOOP_WATERMARK_MS);
    if (e) {
        ll_log(LL_WARN, &ctx, "offset_refused",
               "the broker refused the position (%s) and its log start is unknown (%s): read again after a "
               "rewind",
               rd_kafka_message_errstr(rkm), rd_kafka_err2str(e));
        return true;
    }
    ll_gap_verdict v = ll_gap_decide(from, lo, hi);
    if (v == LL_GAP_NONE) {
        /* a partition assigned without an offset (the merge sets one): seek to the position again */
        ll_log(LL_INFO, &ctx, "offset_refused",
               "the broker refused the position (%s); the log holds [%lld, %lld): "
               "seeking there again",
               rd_kafka_message_errstr(rkm), (long long)lo, (long long)hi);
        return true;
    }
    int64_t gap_from = v == LL_GAP_BELOW ? from : hi, gap_to = v == LL_GAP_BELOW ? lo : from;
    pause_partition(l, ps);
    if (ps->gap_from == gap_from && ps->gap_to == gap_to)
        return false; /* said already */
    ps->gap_from = gap_from;
    ps->gap_to = gap_to;
    ps->gap_accepted_to = 0;
    ll_obs_unreadable(ll_loop_unreadable(l));
    if (v == LL_GAP_BELOW)
        ll_log(
            LL_ERROR, &ctx, "offsets_unreadable",
            "%s[%d]: offsets [%lld, %lld) were deleted by the topic's retention before this group read them "
            "(its log starts at %lld): the partition is stopped, nothing of it is marked done. Find the "
            "inputs' runs, then `loadctl accept-gap %s %s %d --from %lld --to %lld --reason ...` to read on",
            topic, (int)rkm->partition, (long long)gap_from, (long long)gap_to, (long long)lo, l->group,
            topic, (int)rkm->partition, (long long)gap_from, (long long)gap_to);
    else
        ll_log(
            LL_ERROR, &ctx, "offsets_unreadable",
            "%s[%d]: the position %lld is past the log's end %lld (the topic was deleted and made again, or "
            "the ledger's position is another cluster's): the partition is stopped; `loadctl offsets "
            "restore` sets the group's offsets",
            topic, (int)rkm->partition, (long long)from, (long long)hi);
    return false;
}

bool ll_loop_gaps_check(ll_loop *l)
{
    int found = 0;
    ll_pgarray topics = {0}, parts = {0}, offs = {0};
    for (size_t i = 0; i < l->n_parts; i++)
        /* a range below the log start (its first offset the position); a position past the log's
         * end is no range an acceptance can cover: the group's offsets are set again instead */
        if (l->parts[i]->gap_to > 0 && l->parts[i]->gap_accepted_to == 0 &&
            l->parts[i]->gap_from == l->parts[i]->track.base) {
            ll_pgarray_add(&topics, l->parts[i]->topic);
            ll_pgarray_add_ll(&parts, l->parts[i]->partition);
            ll_pgarray_add_ll(&offs, (long long)l->parts[i]->gap_from);
        }
    if (topics.n > 0) {
        const char *p[4] = {l->group, ll_pgarray_text(&topics), ll_pgarray_text(&parts),
                            ll_pgarray_text(&offs)};
        PGresult *r =
            l->kio->db_ensure(&l->db) == LL_DB_OK ? l->kio->db_exec(&l->db, &ST_GAPS_ACCEPTED, p) : NULL;
        for (int k = 0; r && k < PQntuples(r); k++) {
            part_state *ps =
                ll_loop_part_find(l, PQgetvalue(r, k, 0), (int32_t)strtol(PQgetvalue(r, k, 1), NULL, 10));
            if (ps && ps->gap_to > 0) {
                ps->gap_accepted_to = strtoll(PQgetvalue(r, k, 2), NULL, 10);
                found++;
            }
        }
        PQclear(r);
        if (found > 0) {
            ll_log(LL_INFO, NULL, "offsets_gap_found_accepted",
                   "%d stopped partitions have an accepted gap: rewinding to read on after it", found);
        }
    }
    ll_pgarray_free(&topics);
    ll_pgarray_free(&parts);
    ll_pgarray_free(&offs);
    return found > 0;
}
