/*
 * kloop_parts.c - the loop's assigned Kafka partitions (kloop_int.h): their state (done offsets
 * loaded from the committed offsets with their done-offset metadata, the held queue's copies
 * freed), pausing a partition whose held queue is full (and resuming it), and pausing or resuming
 * the whole assignment for the loop's recovery. It reports a failure by its result and calls
 * nothing above it.
 */
#include <stdlib.h>
#include <string.h>

#include "kloop_int.h"
#include "ll/kclient.h"
#include "ll/log.h"
#include "ll/obs.h"

part_state *ll_loop_part(ll_loop *l, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < l->n_parts; i++)
        if (l->parts[i]->partition == partition && strcmp(l->parts[i]->topic, topic) == 0)
            return l->parts[i];
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
    rd_kafka_topic_partition_list_t *asg = NULL;
    if (l->kio->assignment(l->consumer, &asg) != RD_KAFKA_RESP_ERR_NO_ERROR || !asg)
        return -1;
    if (asg->cnt > 0)
        l->kio->pause(l->consumer, asg);
    rd_kafka_topic_partition_list_destroy(asg);
    return 0;
}

/* Resumes what this instance paused and nothing else: resuming a never-paused partition can
 * refetch from a stale position in librdkafka 2.0.2 (fixed in 2.4.0). */
void ll_loop_parts_resume(ll_loop *l, bool whole_assignment)
{
    rd_kafka_topic_partition_list_t *tp = NULL;
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
    if (l->rec.paused || (ps->stopped && offset >= ps->stop_offset))
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
    if (!ps->stopped || l->rec.paused)
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
