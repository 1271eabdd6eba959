/*
 * kloop_gap.c - offsets the topic no longer holds (issue 39, item 6; docs/design.md §5, "Offsets
 * the topic no longer holds").
 *
 * A consumer position below a partition's log start means inputs deleted by the topic's retention
 * before this group read them (a service down longer than the retention, a ledger restored to a
 * position older than it). librdkafka's auto.offset.reset = earliest would read on from the log
 * start and mark the gap done without a word: its inputs lost, their runs stuck with no sign why.
 * The consumer's auto.offset.reset is error (kloop_clients.c): the fetch is refused with
 * RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET, and this file stops that partition (paused; the others go
 * on), logs offsets_unreadable once per range (level error, the range in its message; fields
 * topic, kafkaPartition, offset: the first offset lost), and counts the range in
 * loadledger_unreadable_offsets (alert LoadledgerOffsetsUnreadable). Nothing is marked done. An operator who
 * decided the range is lost records it with `loadctl accept-gap` (nifi_ops.offset_gap_acceptance: who, why,
 * when); the idle check finds it and rewinds, and the merge (kloop_position.c) reads on from the accepted
 * range's end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kloop_int.h"
#include "ll/kloop_decide.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/pgarray.h"

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
static part_state *assigned_part(ll_loop *l, const char *topic, int32_t partition)
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

void ll_loop_offset_refused(ll_loop *l, const rd_kafka_message_t *rkm)
{
    const char *topic = rkm->rkt ? l->kio->msg_topic(rkm) : NULL;
    if (!topic) {
        ll_log(LL_WARN, NULL, "consumer_error", "%s", rd_kafka_message_errstr(rkm));
        return;
    }
    part_state *ps = assigned_part(l, topic, rkm->partition);
    if (!ps || ll_loop_recovering(l))
        return; /* revoked since; or a rewind is owed, which seeks every partition to its position */
    int64_t from = ps->track.base, lo = -1, hi = -1;
    ll_log_ctx ctx = {NULL, NULL, topic, rkm->partition, from};
    rd_kafka_resp_err_t e =
        l->kio->watermarks(l->consumer, topic, rkm->partition, &lo, &hi, LL_LOOP_WATERMARK_MS);
    if (e) {
        ll_log(LL_WARN, &ctx, "offset_refused",
               "the broker refused the position (%s) and its log start is unknown (%s): read again after a "
               "rewind",
               rd_kafka_message_errstr(rkm), rd_kafka_err2str(e));
        ll_loop_owe_rewind(l, 0);
        return;
    }
    ll_gap_verdict v = ll_gap_decide(from, lo, hi);
    if (v == LL_GAP_NONE) {
        /* a partition assigned without an offset (the merge sets one): seek to the position again */
        ll_log(LL_INFO, &ctx, "offset_refused",
               "the broker refused the position (%s); the log holds [%lld, %lld): "
               "seeking there again",
               rd_kafka_message_errstr(rkm), (long long)lo, (long long)hi);
        ll_loop_owe_rewind(l, 0);
        return;
    }
    int64_t gap_from = v == LL_GAP_BELOW ? from : hi, gap_to = v == LL_GAP_BELOW ? lo : from;
    pause_partition(l, ps);
    if (ps->gap_from == gap_from && ps->gap_to == gap_to)
        return; /* said already */
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
}

void ll_loop_gaps_check(ll_loop *l)
{
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
        int found = 0;
        for (int k = 0; r && k < PQntuples(r); k++) {
            part_state *ps =
                assigned_part(l, PQgetvalue(r, k, 0), (int32_t)strtol(PQgetvalue(r, k, 1), NULL, 10));
            if (ps && ps->gap_to > 0) {
                ps->gap_accepted_to = strtoll(PQgetvalue(r, k, 2), NULL, 10);
                found++;
            }
        }
        PQclear(r);
        if (found > 0) {
            ll_log(LL_INFO, NULL, "offsets_gap_found_accepted",
                   "%d stopped partitions have an accepted gap: rewinding to read on after it", found);
            ll_loop_owe_rewind(l, 0);
        }
    }
    ll_pgarray_free(&topics);
    ll_pgarray_free(&parts);
    ll_pgarray_free(&offs);
}
