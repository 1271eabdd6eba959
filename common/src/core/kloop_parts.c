/*
 * kloop_parts.c - the loop's assigned Kafka partitions (kloop_int.h): their state (done offsets,
 * held queue), the rebalance callback that loads the committed offsets with their done-offset
 * metadata, and pausing a partition whose held queue is full (and resuming it).
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
    l->parts[l->n_parts++] = ps;
    return ps;
}

void ll_loop_forget_parts(ll_loop *l)
{
    for (size_t i = 0; i < l->n_parts; i++) {
        ll_loop_drop_held(l->parts[i]);
        free(l->parts[i]->held);
        ll_offtrack_free(&l->parts[i]->track);
        ll_offtrack_free(&l->parts[i]->answered);
        free(l->parts[i]);
    }
    l->n_parts = 0;
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

/* {"<topic>": [partition, ...], ...} of a partition list, for the rebalance log lines. */
static json_t *partition_map(const rd_kafka_topic_partition_list_t *parts)
{
    json_t *m = json_object();
    for (int i = 0; i < parts->cnt; i++) {
        json_t *a = json_object_get(m, parts->elems[i].topic);
        if (!a) {
            a = json_array();
            json_object_set_new(m, parts->elems[i].topic, a);
        }
        json_array_append_new(a, json_integer(parts->elems[i].partition));
    }
    return json_pack("{s:o}", "partitions", m);
}

/* Resumes what this instance paused (partitions stopped by a full held queue, or the whole
 * assignment during a recovery) and nothing else: resuming a never-paused partition can refetch
 * from a stale position in librdkafka 2.0.2 (fixed in 2.4.0). */
void ll_loop_resume_paused(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *tp = NULL;
    if (l->all_paused) {
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
    l->all_paused = 0;
    for (size_t i = 0; i < l->n_parts; i++)
        l->parts[i]->stopped = 0;
}

void ll_loop_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
                          void *opaque)
{
    ll_loop *l = opaque;
    l->rebalance_gen++;
    /* what is staged and in flight is committed (its offsets are of this generation) before
     * the assignment changes; a failure aborts it and its batches come again from the committed
     * offsets (of the new assignment, for what stays assigned) */
    ll_loop_commit_drain(l);
    if (l->n_staged > 0) {
        /* not committed (a rewind or a new producer was owed, or the commit failed): their
         * messages come again from the committed offsets, to this instance or the partition's
         * new owner, and are answered then as replays. Kept, they would be committed later
         * without their offsets: a second answer (docs/design.md §4) */
        ll_log(LL_INFO, NULL, "staged_dropped",
               "rebalance: %zu staged records dropped, answered again as replays", l->n_staged);
        ll_loop_staged_drop(l);
    }
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        ll_log_json(LL_INFO, NULL, "partitions_assigned", partition_map(parts), "assigned %d partitions",
                    parts->cnt);
        /* the committed offsets with the done offsets above them (metadata): what was applied
         * above the committed offset before a crash or a rebalance is skipped, not applied again */
        rd_kafka_topic_partition_list_t *c = rd_kafka_topic_partition_list_copy(parts);
        rd_kafka_resp_err_t ce = l->kio->committed(rk, c, 10000);
        int positions = -1;
        if (ce) {
            ll_log(LL_WARN, NULL, "committed_unknown",
                   "committed offsets not read (%s): messages above them may be answered again",
                   rd_kafka_err2str(ce));
        } else {
            ll_loop_load_tracks(l, c);
            /* and the ledger's own positions: each partition starts at the lower (docs/design.md §5) */
            positions = ll_loop_positions_merge(l, c);
            if (positions != 0)
                ll_log(LL_WARN, NULL, "positions_unknown",
                       "the ledger's positions not read (%s %s): the partitions stay paused until they are",
                       l->db.err.sqlstate, l->db.err.message);
        }
        /* an eager assignment starts at the offsets found: no rewind is owed any more (the
         * producer, if broken, is still recreated before anything is applied) */
        l->rewind_pending = 0;
        l->kio->assign(rk, positions == 0 ? c : parts);
        rd_kafka_topic_partition_list_destroy(c);
        ll_obs_assigned(parts->cnt);
        if (l->producer_broken || (positions != 0 && !ce)) {
            l->kio->pause(rk, parts);
            l->all_paused = 1;
        }
        if (positions != 0 && !ce) {
            l->rewind_pending = 1; /* the rewind reads both again */
            ll_loop_recover_later(l, 0);
        }
    } else {
        ll_log_json(LL_INFO, NULL, "partitions_revoked", partition_map(parts), "revoked %d partitions",
                    parts->cnt);
        ll_loop_resume_paused(l); /* while still assigned */
        ll_loop_forget_parts(l);
        l->kio->assign(rk, NULL);
        ll_obs_assigned(0);
    }
}

/* ---- a partition whose held queue is full ---------------------------------------------------- */

void ll_loop_stop_partition(ll_loop *l, part_state *ps, int64_t offset)
{
    if (l->all_paused || (ps->stopped && offset >= ps->stop_offset))
        return;
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
    if (failed) {
        /* the position is unknown: rewind once this batch is over (not now: the batch still
         * refers to the held messages a rewind drops) */
        ll_log(LL_WARN, &ctx, "seek_failed", "%s; rewinding", why);
        l->rewind_pending = 1;
        ll_loop_recover_later(l, 1);
    }
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
