/*
 * kloop_held.c - the held queues of the loop (kloop_batch.h): a message whose run waits (a
 * missing prerequisite, a lock held elsewhere, a lost deadlock) is copied into its Kafka
 * partition's queue with the later messages of its run, retried with backoff
 * (loop.retry_backoff_min..max) and removed once done. A full queue (loop.max_held) pauses the
 * partition's fetching (kloop_parts.c), which frees the copies too.
 */
#include <stdlib.h>
#include <string.h>

#include "kloop_batch.h"
#include "ll/log.h"

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
void ll_batch_unhold(batch *b, lmsg *m)
{
    part_state *ps = m->ps;
    for (size_t i = 0; i < ps->n_held; i++)
        if (ps->held[i] == m) {
            memmove(ps->held + i, ps->held + i + 1, (ps->n_held - i - 1) * sizeof *ps->held);
            ps->n_held--;
            ps->held_bytes -= m->key_len + m->len;
            break;
        }
    if (b->n_done_held == b->cap_done_held) {
        size_t cap = b->cap_done_held ? b->cap_done_held * 2 : 16;
        lmsg **d = realloc(b->done_held, cap * sizeof *d);
        if (!d)
            abort();
        b->done_held = d;
        b->cap_done_held = cap;
    }
    b->done_held[b->n_done_held++] = m;
}

void ll_batch_stop_partition(batch *b, part_state *ps, int64_t offset)
{
    /* a seek that failed leaves the position unknown: the loop rewinds once this batch is over
     * (not now: the batch still refers to the held messages a rewind drops) */
    if (ll_loop_stop_partition(b->l, ps, offset) != 0 && !b->rewind) {
        b->rewind = 1;
        b->rewind_delay_ms = 1;
    }
}

/* Holds m (its run waits) with backoff; deferred = a missing prerequisite (starts its clock). */
w_result ll_batch_hold(batch *b, lmsg *m, int deferred, const char *pid, const char *why)
{
    ll_loop *l = b->l;
    int64_t now = ll_loop_now_ms();
    m->state = 2;
    /* the run's clock on the partition (kloop_clock.c): started by its first deferral, kept for
     * its messages that find the queue full, read again after the pause */
    int64_t since =
        deferred ? ll_loop_clock_start(m->ps, m->run, m->defer_since_ms ? m->defer_since_ms : now) : 0;
    lmsg *h = m->held ? m : ll_loop_hold_copy(l, m);
    if (!h) {
        /* the queue is full: not held, not done; fetched again once the queue drains */
        ll_batch_stop_partition(b, m->ps, m->offset);
        return W_HELD;
    }
    if (deferred && !h->defer_since_ms) {
        h->defer_since_ms = since;
        /* the run's clock: its messages already queued behind this one start it too */
        for (size_t i = 0; i < h->ps->n_held; i++)
            if (!h->ps->held[i]->defer_since_ms && strcmp(h->ps->held[i]->run, h->run) == 0)
                h->ps->held[i]->defer_since_ms = since;
    }
    h->backoff_ms = h->backoff_ms ? h->backoff_ms * 2 : l->backoff_min_ms;
    if (h->backoff_ms > l->backoff_max_ms)
        h->backoff_ms = l->backoff_max_ms;
    h->retry_at_ms = now + h->backoff_ms;
    ll_log_ctx ctx = {h->run[0] ? h->run : NULL, pid, h->ps->topic, h->ps->partition, h->offset};
    ll_log(deferred ? LL_INFO : LL_WARN, &ctx, deferred ? "message_deferred" : "run_held",
           "held for %lld ms: %s", (long long)h->backoff_ms, why);
    return W_HELD;
}
