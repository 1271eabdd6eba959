/*
 * kloop_work.c - the work of one batch (kloop_batch.h): the held messages of runs whose retry is
 * due (in offset order), then the polled messages (a message of a run that is still held joins
 * its run's queue instead), sorted by run id, stably, so that every transaction locks runs in one
 * order and two instances cannot deadlock each other, while a run keeps its own order.
 */
#include <stdlib.h>
#include <string.h>

#include "kloop_batch.h"

static topic_io *io_for(ll_loop *l, const char *topic)
{
    for (size_t i = 0; i < l->n_io; i++)
        if (strcmp(l->io[i].topic, topic) == 0)
            return &l->io[i];
    return NULL;
}

static void lmsg_fresh(ll_loop *l, lmsg *m, rd_kafka_message_t *rkm)
{
    memset(m, 0, sizeof *m);
    const char *topic = l->kio->msg_topic(rkm);
    m->rkm = rkm;
    m->io = io_for(l, topic);
    m->ps = ll_loop_part(l, topic, rkm->partition);
    m->offset = rkm->offset;
    m->key = rkm->key;
    m->key_len = rkm->key_len;
    m->value = rkm->payload;
    m->len = rkm->len;
    if (rkm->key && rkm->key_len < sizeof m->run) {
        memcpy(m->run, rkm->key, rkm->key_len);
        m->run[rkm->key_len] = '\0';
    }
}

int ll_work_cmp(const void *a, const void *b)
{
    const lmsg *x = *(lmsg *const *)a, *y = *(lmsg *const *)b;
    int c = strcmp(x->run, y->run);
    if (c)
        return c;
    /* a total key: (run, topic, partition, offset). Within a Kafka partition the offset is the
     * order of a run's messages (a held one is older than a fresh one of its partition, unless a
     * seek refetched below it); across partitions any fixed order will do */
    if (x->ps != y->ps) {
        c = strcmp(x->ps->topic, y->ps->topic);
        if (c)
            return c;
        return x->ps->partition < y->ps->partition ? -1 : (x->ps->partition > y->ps->partition);
    }
    return x->offset < y->offset ? -1 : (x->offset > y->offset);
}

/* Collects the due held runs and the polled messages into b->work (b: a fresh batch). */
void ll_batch_collect(batch *b, rd_kafka_message_t **polled, size_t n, int64_t now)
{
    ll_loop *l = b->l;
    size_t cap = n;
    for (size_t p = 0; p < l->n_parts; p++)
        cap += l->parts[p]->n_held;
    b->work = calloc(cap ? cap : 1, sizeof *b->work);
    b->fresh = calloc(n ? n : 1, sizeof *b->fresh);
    b->n_work = b->n_fresh = 0; /* a fresh batch (zeroed by ll_loop_batch), said for the analyser */
    /* held runs whose first queued message is due: all their queued messages, in order */
    for (size_t p = 0; p < l->n_parts; p++)
        for (size_t i = 0; i < l->parts[p]->n_held; i++) {
            lmsg *h = l->parts[p]->held[i];
            h->state = h->decided = 0;
            h->retry = 0;
        }
    for (size_t p = 0; p < l->n_parts; p++) {
        part_state *ps = l->parts[p];
        for (size_t i = 0; i < ps->n_held; i++) {
            lmsg *m = ps->held[i], *head = NULL;
            for (size_t j = 0; j <= i && !head; j++)
                if (strcmp(ps->held[j]->run, m->run) == 0)
                    head = ps->held[j];
            if (head->retry_at_ms <= now)
                b->work[b->n_work++] = m;
        }
    }
    for (size_t i = 0; i < n; i++) {
        lmsg *m = &b->fresh[b->n_fresh++];
        lmsg_fresh(l, m, polled[i]);
        part_state *ps = m->ps;
        if (ps->stopped && m->offset >= ps->stop_offset)
            continue; /* fetched before the pause: it comes again after the seek */
        if (ll_offtrack_seen(&ps->track, m->offset) != 0) {
            ll_batch_stop_partition(b, ps, m->offset); /* too many ranges: wait for the queue */
            continue;
        }
        ps->touched = l->batch_no;
        if (ll_offtrack_is_done(&ps->track, m->offset))
            continue; /* applied above the committed offset before a crash or a rebalance */
        if (ll_loop_offset_held(ps, m->offset))
            continue; /* refetched after a seek below it: its held copy is the one applied */
        if (ll_loop_run_held(ps, m->run)) {
            int due = 0;
            for (size_t w = 0; w < b->n_work; w++)
                if (b->work[w]->ps == ps && strcmp(b->work[w]->run, m->run) == 0)
                    due = 1;
            if (!due) {
                if (!ll_loop_hold_copy(l, m))
                    ll_batch_stop_partition(b, ps, m->offset);
                continue;
            }
        }
        b->work[b->n_work++] = m;
    }
    qsort(b->work, b->n_work, sizeof *b->work, ll_work_cmp);
}
