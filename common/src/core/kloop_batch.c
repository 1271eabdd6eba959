/*
 * kloop_batch.c - one batch of the loop (kloop_int.h): the work, its database transaction, its
 * Kafka transaction.
 *
 *   work     = the held messages of runs whose retry is due (in offset order), then the polled
 *              messages (a message of a run that is still held joins its run's queue instead),
 *              sorted by run id, stably, so that every transaction locks runs in one order and
 *              two instances cannot deadlock each other, while a run keeps its own order;
 *   database = BEGIN; per message SAVEPOINT, apply, and on a rejection, deferral, dead letter or
 *              SQL error ROLLBACK TO SAVEPOINT, so it undoes alone; COMMIT after at most
 *              loop.db_batch_max messages (at most LL_BATCH_SAVEPOINTS: PostgreSQL's
 *              subtransaction cache) and at the end. One message per transaction needs no
 *              savepoint (loop.batch_max = 1 or loop.db_batch_max = 1: the old design);
 *   Kafka    = after each database commit, and only then, the replies and dead letters of its
 *              messages; at the end the offsets (the first message not done, plus the done
 *              offsets above it as metadata) and the commit, in one Kafka transaction.
 *
 * A message whose prerequisite is missing (DEFER), or whose run's rows stay locked by someone
 * else (lock or statement timeout), or that lost a deadlock, is held: copied into its
 * partition's held queue with the later messages of its run, and retried with backoff
 * (loop.retry_backoff_min..max). Every other run flows past it. Once loop.prerequisite_wait has
 * passed since its first deferral it is applied with wait_expired (the contract's business
 * answer), and a still missing prerequisite becomes a dead letter (PREREQUISITE_TIMEOUT). A full
 * held queue (loop.max_held) pauses the partition's fetching until it drains to half.
 *
 * An unreachable database, or a failed Kafka transaction, undoes the whole batch: the Kafka
 * transaction is aborted and the loop rewinds to the committed offsets (held queues dropped,
 * done offsets reloaded from the commit metadata) after a backoff.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kloop_int.h"
#include "ll/pgarray.h"
#include "ll/log.h"
#include "ll/obs.h"

/* What became of one message in the database transaction. */
typedef enum {
    W_DONE,  /* a reply or a dead letter waits for the commit */
    W_HELD,  /* held: its run waits */
    W_FAILED /* the database went away (or the transaction broke): the batch is undone */
} w_result;

/* A result of the open database transaction, produced after it commits. */
typedef struct out_item {
    lmsg *m;
    int is_reply;         /* 1: a reply (encoded at once: bytes, not a JSON tree, wait for the
                           * commit), 0: a dead letter */
    unsigned char *reply; /* the encoded reply, owned (NULL when it did not encode) */
    size_t reply_len;     /* bytes */
    char *encode_err;     /* why the reply did not fit its schema, owned, or NULL */
    char code[64];        /* dead-letter code, "" for a reply */
    char *reason;         /* dead-letter reason, owned */
    char run_id[128];
    char outcome[16], reply_code[48]; /* a reply's labels for loadledger_inputs_total (obs.h) */
} out_item;

typedef struct batch {
    ll_loop *l;
    lmsg **work;
    size_t n_work;
    lmsg *fresh; /* the polled messages' lmsg structs */
    size_t n_fresh;
    out_item *outs;
    size_t n_outs, cap_outs;
    char (*touch)[37]; /* runs whose heartbeat is refreshed before the commit */
    size_t n_touch, cap_touch;
    lmsg **done_held; /* held copies done in this batch, freed when it ends */
    size_t n_done_held, cap_done_held;
    int in_tx, use_savepoints, kafka_open;
    int kafka_failed; /* the previous batch's Kafka commit failed: aborted and rewound already */
    int savepoints;   /* savepoints made in the open transaction */
    int tx_msgs;      /* messages applied in it (with or without a savepoint) */
    size_t n_bulk;    /* messages the set-based part applied in this batch */
    int bulk_on;      /* the inputs' set-based apply is used (loop.db_batch_max > 1) */
} batch;

int64_t ll_loop_now_ms(void);

/* ---- held queues ---------------------------------------------------------------------------- */

static void lmsg_free_copy(lmsg *m)
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
        lmsg_free_copy(ps->held[i]);
    ps->n_held = 0;
}

/* True when run r has a message in ps's held queue. */
static int run_held(const part_state *ps, const char *r)
{
    for (size_t i = 0; i < ps->n_held; i++)
        if (strcmp(ps->held[i]->run, r) == 0)
            return 1;
    return 0;
}

/* Copies a fresh message into the held queue of its partition (appended: fresher than every
 * queued one). Returns the held copy, or NULL when the queue is full. */
static lmsg *hold_copy(ll_loop *l, lmsg *m)
{
    part_state *ps = m->ps;
    if ((int64_t)ps->n_held >= l->max_held)
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
    c->key = m->key ? memcpy(malloc(m->key_len ? m->key_len : 1), m->key, m->key_len) : NULL;
    c->value = m->value ? memcpy(malloc(m->len ? m->len : 1), m->value, m->len) : NULL;
    rd_kafka_headers_t *h = NULL;
    c->hdrs = m->rkm && rd_kafka_message_headers(m->rkm, &h) == RD_KAFKA_RESP_ERR_NO_ERROR && h
                  ? rd_kafka_headers_copy(h)
                  : NULL;
    c->held = 1;
    ps->held[ps->n_held++] = c;
    return c;
}

/* Removes a done held message from its queue; it is freed when the batch ends (the batch's
 * work still refers to it). */
static void unhold(struct batch *b, lmsg *m)
{
    part_state *ps = m->ps;
    for (size_t i = 0; i < ps->n_held; i++)
        if (ps->held[i] == m) {
            memmove(ps->held + i, ps->held + i + 1, (ps->n_held - i - 1) * sizeof *ps->held);
            ps->n_held--;
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

size_t ll_loop_held_due(ll_loop *l, int64_t now)
{
    size_t due = 0;
    for (size_t p = 0; p < l->n_parts; p++)
        for (size_t i = 0; i < l->parts[p]->n_held; i++)
            if (l->parts[p]->held[i]->retry_at_ms <= now)
                due++;
    return due;
}

/* ---- the work ------------------------------------------------------------------------------- */

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
    const char *topic = rd_kafka_topic_name(rkm->rkt);
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

static int cmp_run(const void *a, const void *b)
{
    const lmsg *x = *(lmsg *const *)a, *y = *(lmsg *const *)b;
    int c = strcmp(x->run, y->run);
    if (c)
        return c;
    /* stable: held before fresh, then by offset within a partition, then by address */
    if (x->held != y->held)
        return x->held ? -1 : 1;
    if (x->ps == y->ps && x->offset != y->offset)
        return x->offset < y->offset ? -1 : 1;
    return x < y ? -1 : (x > y);
}

/* Collects the due held runs and the polled messages into b->work. */
static void collect(batch *b, rd_kafka_message_t **polled, size_t n, int64_t now)
{
    ll_loop *l = b->l;
    size_t cap = n;
    for (size_t p = 0; p < l->n_parts; p++)
        cap += l->parts[p]->n_held;
    b->work = calloc(cap ? cap : 1, sizeof *b->work);
    b->fresh = calloc(n ? n : 1, sizeof *b->fresh);
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
            ll_loop_stop_partition(l, ps, m->offset); /* too many ranges: wait for the queue */
            continue;
        }
        ps->touched = l->batch_no;
        if (ll_offtrack_is_done(&ps->track, m->offset))
            continue; /* applied above the committed offset before a crash or a rebalance */
        if (run_held(ps, m->run)) {
            int due = 0;
            for (size_t w = 0; w < b->n_work; w++)
                if (b->work[w]->ps == ps && strcmp(b->work[w]->run, m->run) == 0)
                    due = 1;
            if (!due) {
                if (!hold_copy(l, m))
                    ll_loop_stop_partition(l, ps, m->offset);
                continue;
            }
        }
        b->work[b->n_work++] = m;
    }
    qsort(b->work, b->n_work, sizeof *b->work, cmp_run);
}

/* ---- the database transaction --------------------------------------------------------------- */

static const ll_stmt ST_TOUCH_RUNS = {
    "kloop_touch_runs",
    "UPDATE nifi_ops.load_run SET heartbeat_at = clock_timestamp() WHERE run_id = ANY($1::uuid[])", 1};

void ll_msg_touch_run(const ll_msg *m, const char *run_id)
{
    batch *b = m->txn;
    if (!b || !run_id || strlen(run_id) != 36)
        return;
    for (size_t i = 0; i < b->n_touch; i++)
        if (strcmp(b->touch[i], run_id) == 0)
            return;
    if (b->n_touch == b->cap_touch) {
        size_t cap = b->cap_touch ? b->cap_touch * 2 : 16;
        char(*t)[37] = realloc(b->touch, cap * sizeof *t);
        if (!t)
            abort();
        b->touch = t;
        b->cap_touch = cap;
    }
    memcpy(b->touch[b->n_touch++], run_id, 37);
}

/* The heartbeats asked for in this transaction, in one statement. 0, or -1. */
static int touch_runs(batch *b)
{
    if (b->n_touch == 0)
        return 0;
    ll_pgarray runs = {0};
    for (size_t i = 0; i < b->n_touch; i++)
        ll_pgarray_add(&runs, b->touch[i]);
    const char *params[1] = {ll_pgarray_text(&runs)};
    PGresult *r = ll_db_exec(&b->l->db, &ST_TOUCH_RUNS, params);
    ll_pgarray_free(&runs);
    b->n_touch = 0;
    if (!r)
        return -1;
    PQclear(r);
    return 0;
}

static int db_cmd(batch *b, const char *sql)
{
    return ll_db_command(&b->l->db, sql) == LL_DB_OK ? 0 : -1;
}

static int tx_begin(batch *b)
{
    if (b->in_tx)
        return 0;
    if (ll_db_ensure(&b->l->db) != LL_DB_OK || db_cmd(b, "BEGIN ISOLATION LEVEL READ COMMITTED") != 0)
        return -1;
    b->in_tx = 1;
    b->savepoints = b->tx_msgs = 0;
    return 0;
}

/* Queues a result of the open transaction: a reply (taken over, encoded now, its tree freed) or a
 * dead letter (code and reason copied). */
static void out_push(batch *b, lmsg *m, json_t *reply, const char *code, const char *reason,
                     const char *run_id)
{
    if (b->n_outs == b->cap_outs) {
        size_t cap = b->cap_outs ? b->cap_outs * 2 : 32;
        out_item *o = realloc(b->outs, cap * sizeof *o);
        if (!o)
            abort();
        b->outs = o;
        b->cap_outs = cap;
    }
    out_item *o = &b->outs[b->n_outs++];
    memset(o, 0, sizeof *o);
    o->m = m;
    if (reply) {
        char why[400];
        o->is_reply = 1;
        ll_obs_reply_labels(reply, o->outcome, sizeof o->outcome, o->reply_code, sizeof o->reply_code);
        if (ll_encode(&m->io->eopts, reply, &o->reply, &o->reply_len, why, sizeof why) != 0) {
            o->reply = NULL;
            o->encode_err = strdup(why);
        }
        json_decref(reply);
    }
    if (code) {
        snprintf(o->code, sizeof o->code, "%s", code);
        o->reason = strdup(reason ? reason : "");
    }
    snprintf(o->run_id, sizeof o->run_id, "%s", run_id ? run_id : "");
}

/* Drops the queued results from index keep on (the undone part of a transaction). */
static void outs_truncate(batch *b, size_t keep)
{
    for (size_t i = keep; i < b->n_outs; i++) {
        free(b->outs[i].reply);
        free(b->outs[i].encode_err);
        free(b->outs[i].reason);
    }
    if (keep < b->n_outs)
        b->n_outs = keep;
}

static void outs_clear(batch *b)
{
    outs_truncate(b, 0);
}

/* A dead letter: its event in the open transaction, its record after the commit. */
static w_result dead(batch *b, lmsg *m, const char *run_id, const char *code, const char *reason)
{
    if (tx_begin(b) != 0 || ll_loop_dead_letter_event(b->l, m, run_id, code, reason) != 0)
        return W_FAILED;
    out_push(b, m, NULL, code, reason, run_id);
    return W_DONE;
}

/* Holds m (its run waits) with backoff; deferred = a missing prerequisite (starts its clock). */
static w_result hold(batch *b, lmsg *m, int deferred, const char *pid, const char *why)
{
    ll_loop *l = b->l;
    int64_t now = ll_loop_now_ms();
    m->state = 2;
    lmsg *h = m->held ? m : hold_copy(l, m);
    if (!h) {
        /* the queue is full: not held, not done; fetched again once the queue drains */
        ll_loop_stop_partition(l, m->ps, m->offset);
        return W_HELD;
    }
    if (deferred && !h->defer_since_ms)
        h->defer_since_ms = now;
    h->backoff_ms = h->backoff_ms ? h->backoff_ms * 2 : l->backoff_min_ms;
    if (h->backoff_ms > l->backoff_max_ms)
        h->backoff_ms = l->backoff_max_ms;
    h->retry_at_ms = now + h->backoff_ms;
    ll_log_ctx ctx = {h->run[0] ? h->run : NULL, pid, h->ps->topic, h->ps->partition, h->offset};
    ll_log(deferred ? LL_INFO : LL_WARN, &ctx, deferred ? "message_deferred" : "run_held",
           "held for %lld ms: %s", (long long)h->backoff_ms, why);
    return W_HELD;
}

/* Undoes the message's part of the transaction: to its savepoint, or the whole transaction
 * (touches_before: the heartbeats asked for before this message, kept). */
static int undo(batch *b, size_t touches_before)
{
    b->n_touch = touches_before;
    if (b->use_savepoints)
        return db_cmd(b, "ROLLBACK TO SAVEPOINT m");
    b->in_tx = 0;
    return db_cmd(b, "ROLLBACK");
}

/* What an apply function sees of message m (value: its decoded record, borrowed; now in ms). */
static ll_msg msg_view(batch *b, const lmsg *m, json_t *value, int64_t now)
{
    ll_loop *l = b->l;
    return (ll_msg){.logical = m->io->in->logical,
                    .topic = m->ps->topic,
                    .partition = m->ps->partition,
                    .offset = m->offset,
                    .key = m->run[0] ? m->run : NULL,
                    .value = value,
                    .service = l->service,
                    .wait_expired = m->defer_since_ms && now - m->defer_since_ms >= l->prereq_wait_ms,
                    .txn = b};
}

/* Applies one message inside the open transaction. */
static w_result apply_one(batch *b, lmsg *m)
{
    ll_loop *l = b->l;
    char err[1024];
    if (!m->io)
        return dead(b, m, m->run[0] ? m->run : NULL, "UNKNOWN_TOPIC", "no handler for this topic");
    json_t *value = NULL;
    if (!m->value || ll_decode(&m->io->dopts, m->value, m->len, &value, err, sizeof err) != 0)
        return dead(b, m, m->run[0] ? m->run : NULL, "DECODE_FAILED", m->value ? err : "empty message value");
    const char *run_id = json_string_value(json_object_get(value, "runId"));
    char rid[sizeof m->run];
    snprintf(rid, sizeof rid, "%s", run_id ? run_id : (m->run[0] ? m->run : ""));
    const char *pid = json_string_value(json_object_get(value, "partitionId"));
    ll_msg msg = msg_view(b, m, value, ll_loop_now_ms());
    if (tx_begin(b) != 0)
        goto failed;
    if (b->use_savepoints &&
        db_cmd(b, b->savepoints ? "RELEASE SAVEPOINT m; SAVEPOINT m" : "SAVEPOINT m") != 0)
        goto failed;
    b->savepoints += b->use_savepoints;
    b->tx_msgs++;
    ll_apply_out out;
    memset(&out, 0, sizeof out);
    size_t touches = b->n_touch;
    ll_apply d = m->io->in->apply(l->svc, &l->db, &msg, &out);
    w_result r = W_DONE;
    switch (d) {
    case LL_APPLY_COMMIT:
        out_push(b, m, out.reply, NULL, NULL, rid);
        out.reply = NULL;
        break;
    case LL_APPLY_ROLLBACK:
        if (undo(b, touches) != 0)
            goto failed_out;
        out_push(b, m, out.reply, NULL, NULL, rid);
        out.reply = NULL;
        break;
    case LL_APPLY_DEFER:
        if (undo(b, touches) != 0)
            goto failed_out;
        if (msg.wait_expired) {
            snprintf(err, sizeof err, "prerequisite not in the ledger after %lld ms: %s",
                     (long long)l->prereq_wait_ms, out.reason);
            r = dead(b, m, rid, "PREREQUISITE_TIMEOUT", err);
        } else {
            r = hold(b, m, 1, pid, out.reason);
        }
        break;
    case LL_APPLY_DEAD:
        if (undo(b, touches) != 0)
            goto failed_out;
        r = dead(b, m, rid, out.reason_code[0] ? out.reason_code : "INVALID_MESSAGE", out.reason);
        break;
    case LL_APPLY_DB:
    default: {
        ll_db_error e = l->db.err;
        if (ll_db_err_is_unavailable(&l->db) || undo(b, touches) != 0)
            goto failed_out;
        l->db.err = e;
        if (ll_db_err_is_input(&l->db)) {
            snprintf(err, sizeof err, "ledger refused the values (SQLSTATE %s %s): %s", e.sqlstate,
                     e.constraint, e.message);
            r = dead(b, m, rid, "LEDGER_REJECTED", err);
        } else {
            /* a bounded wait ran out (lock or statement timeout), a deadlock or serialization
             * failure, or an SQL error: the run waits and is tried again (issue 7 §6) */
            snprintf(err, sizeof err, "%s %s", e.sqlstate, e.message);
            ll_log_ctx ctx = {rid[0] ? rid : NULL, pid, m->ps->topic, m->ps->partition, m->offset};
            int busy = ll_db_err_is_busy(&l->db) || ll_db_err_is_retryable(&l->db);
            ll_log(busy ? LL_WARN : LL_ERROR, &ctx, busy ? "db_busy" : "db_error", "holding the run: %s",
                   err);
            r = hold(b, m, 0, pid, err);
        }
        break;
    }
    }
    json_decref(out.reply);
    json_decref(value);
    return r;
failed_out:
    json_decref(out.reply);
failed:
    json_decref(value);
    return W_FAILED;
}

/* ---- the set-based part of a transaction (ll_bulk_fn) ---------------------------------------- */

/* The Kafka partitions on which the run being walked has a message that waits (held, or applied
 * one by one later): its later messages there must wait too. A run's messages are next to each
 * other in the sorted work, so the list is reset when the run changes. Few partitions per run
 * (one per topic); beyond LL_WAIT_PARTS every later message of the run waits. */
#define LL_WAIT_PARTS 8
typedef struct run_waits {
    const char *run;
    const part_state *ps[LL_WAIT_PARTS];
    size_t n;
    int all;
} run_waits;

/* Moves w to m's run (a new run: nothing waits yet). */
static void waits_enter(run_waits *w, const lmsg *m)
{
    if (!w->run || strcmp(w->run, m->run) != 0)
        *w = (run_waits){.run = m->run};
}

static void waits_add(run_waits *w, const part_state *ps)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->ps[i] == ps)
            return;
    if (w->n < LL_WAIT_PARTS)
        w->ps[w->n++] = ps;
    else
        w->all = 1;
}

static int waits_on(const run_waits *w, const part_state *ps)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->ps[i] == ps)
            return 1;
    return w->all;
}

/* Hands the messages of one input among work[from..to) to its bulk function; what it decides is
 * marked and its reply queued. *decided counts them. W_DONE, W_FAILED (the database went away), or
 * W_HELD when a statement failed: the transaction is then rolled back (nothing of it is kept). */
static w_result bulk_input(batch *b, topic_io *io, size_t from, size_t to, const char *run, size_t *decided)
{
    ll_loop *l = b->l;
    size_t n = to - from;
    lmsg **ms = calloc(n, sizeof *ms);
    ll_msg *msgs = calloc(n, sizeof *msgs);
    const ll_msg **ptrs = calloc(n, sizeof *ptrs);
    ll_bulk_out *outs = calloc(n, sizeof *outs);
    if (!ms || !msgs || !ptrs || !outs)
        abort();
    size_t got = 0;
    int64_t now = ll_loop_now_ms();
    char err[512];
    run_waits w = {0};
    /* the run at `from` may have messages before it that are held in this batch */
    waits_enter(&w, b->work[from]);
    for (size_t j = from; j-- > 0 && strcmp(b->work[j]->run, w.run) == 0;)
        if (b->work[j]->state == 2)
            waits_add(&w, b->work[j]->ps);
    for (size_t i = from; i < to; i++) {
        lmsg *m = b->work[i];
        json_t *value = NULL;
        waits_enter(&w, m);
        if (m->decided)
            continue;
        if (m->io != io || m->state != 0 || (run && strcmp(m->run, run) != 0) || waits_on(&w, m->ps) ||
            !m->value || ll_decode(&io->dopts, m->value, m->len, &value, err, sizeof err) != 0) {
            waits_add(&w, m->ps); /* applied one by one in its turn (or dead-lettered): later
                                   * messages of its run there wait for it */
            continue;
        }
        ms[got] = m;
        msgs[got] = msg_view(b, m, value, now);
        ptrs[got] = &msgs[got];
        got++;
    }
    w_result r = W_DONE;
    if (got >= 2) { /* one message: the per-message path is as cheap */
        ll_apply a = tx_begin(b) == 0 ? io->in->bulk(l->svc, &l->db, ptrs, got, outs) : LL_APPLY_DB;
        if (a == LL_APPLY_COMMIT) {
            for (size_t i = 0; i < got; i++)
                ms[i]->retry = !outs[i].decided && outs[i].retry;
            for (size_t i = 0; i < got; i++)
                if (outs[i].decided) {
                    const char *rid = json_string_value(json_object_get(msgs[i].value, "runId"));
                    ms[i]->decided = 1;
                    (*decided)++;
                    out_push(b, ms[i], outs[i].reply, NULL, NULL, rid ? rid : ms[i]->run);
                    outs[i].reply = NULL;
                }
        } else if (!b->in_tx || ll_db_err_is_unavailable(&b->l->db)) {
            r = W_FAILED;
        } else {
            ll_log(
                LL_WARN, NULL, "bulk_fallback",
                "set-based apply of %zu %s messages failed, the transaction's messages go one by one: %s %s",
                got, io->in->logical, l->db.err.sqlstate, l->db.err.message);
            r = W_HELD;
        }
    }
    for (size_t i = 0; i < got; i++) {
        json_decref(outs[i].reply);
        json_decref(msgs[i].value);
    }
    free(ms);
    free(msgs);
    free(ptrs);
    free(outs);
    return r;
}

/* Runs the bulk functions over work[from..to) (run: only that run's messages, or NULL for all).
 * When the transaction already holds other messages' effects, the set-based part gets a savepoint
 * of its own (it counts toward LL_BATCH_SAVEPOINTS: a rerun follows a message applied one by one
 * and precedes one decided here, so savepoints stay below the transaction's length). After a
 * failed statement its part alone is undone and every message goes one by one. *decided counts
 * what was decided. W_DONE, or W_FAILED (database gone). */
static w_result apply_bulk(batch *b, size_t from, size_t to, const char *run, size_t *decided)
{
    ll_loop *l = b->l;
    *decided = 0;
    int sp = b->in_tx && (b->tx_msgs > 0 || b->n_outs > 0); /* effects to keep */
    if (sp && db_cmd(b, b->savepoints ? "RELEASE SAVEPOINT m; SAVEPOINT m" : "SAVEPOINT m") != 0)
        return W_FAILED;
    b->savepoints += sp;
    size_t outs_before = b->n_outs, touches = b->n_touch;
    for (size_t k = 0; k < l->n_io; k++) {
        if (!l->io[k].in->bulk)
            continue;
        w_result r = bulk_input(b, &l->io[k], from, to, run, decided);
        if (r == W_FAILED)
            return r;
        if (r == W_HELD) {
            for (size_t i = from; i < to; i++)
                b->work[i]->decided = 0;
            *decided = 0;
            outs_truncate(b, outs_before);
            b->n_touch = touches;
            if (sp)
                return db_cmd(b, "ROLLBACK TO SAVEPOINT m") == 0 ? W_DONE : W_FAILED;
            b->in_tx = 0;
            return db_cmd(b, "ROLLBACK") == 0 ? W_DONE : W_FAILED;
        }
    }
    return W_DONE;
}

/* ---- after the database commit -------------------------------------------------------------- */

/* Produces the replies and dead letters of the committed transaction and marks their offsets
 * done. 0, or -1 when the Kafka transaction must be aborted. */
/*
 * Before this batch's first record: the previous batch's Kafka commit is over (it ran beside
 * this batch's database work, kloop_commit.c), then this batch's Kafka transaction begins.
 * 0, or -1: the previous commit failed (aborted and rewound: b->kafka_failed) or the begin did.
 */
static int kafka_ready(batch *b)
{
    if (b->kafka_open)
        return 0;
    if (ll_loop_commit_wait(b->l) != 0) {
        b->kafka_failed = 1;
        return -1;
    }
    if (ll_loop_begin(b->l) != 0) {
        b->kafka_failed = 1;
        return -1;
    }
    b->kafka_open = 1;
    return 0;
}

/* Produces the queued results into the batch's Kafka transaction and marks their offsets done.
 * 0, or -1 (the caller undoes the batch). */
static int flush_outs(batch *b)
{
    ll_loop *l = b->l;
    if (b->n_outs > 0 && kafka_ready(b) != 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; i < b->n_outs && rc == 0; i++) {
        out_item *o = &b->outs[i];
        lmsg *m = o->m;
        if (o->is_reply) {
            char err[800];
            if (o->encode_err) {
                /* a reply that does not fit its schema: a dead letter, in a transaction of its
                 * own (the batch's is committed), rather than the same message for ever */
                snprintf(err, sizeof err, "the reply to %s does not fit its schema: %s", m->io->reply_topic,
                         o->encode_err);
                if (ll_db_ensure(&l->db) != LL_DB_OK || ll_db_command(&l->db, "BEGIN") != LL_DB_OK ||
                    ll_loop_dead_letter_event(l, m, o->run_id, "REPLY_ENCODE_FAILED", err) != 0 ||
                    ll_db_command(&l->db, "COMMIT") != LL_DB_OK ||
                    ll_loop_dead_letter_produce(l, m, "REPLY_ENCODE_FAILED", err) != 0)
                    rc = -1;
            } else {
                unsigned char *buf = o->reply; /* the producer owns it from here */
                o->reply = NULL;
                if (ll_loop_produce(l, m->io->reply_topic, m->key, m->key_len, buf, o->reply_len, NULL, 1) !=
                    0)
                    rc = -1;
                ll_obs_stage_input(m->io->topic, o->outcome, o->reply_code);
            }
        } else if (ll_loop_dead_letter_produce(l, m, o->code, o->reason) != 0) {
            rc = -1;
        }
        if (rc == 0) {
            ll_offtrack_done(&m->ps->track, m->offset); /* cannot fail: a new range never */
            m->ps->touched = l->batch_no;
            m->state = 1;
            if (m->held)
                unhold(b, m);
        }
    }
    outs_clear(b);
    return rc;
}

/* Commits the open database transaction and produces its results. 0, or -1 (batch undone). */
static int tx_commit(batch *b)
{
    ll_loop *l = b->l;
    if (!b->in_tx) {
        return flush_outs(b);
    }
    if (touch_runs(b) != 0)
        return -1; /* still in the (failed) transaction: undo_batch rolls it back */
    /* the previous batch's Kafka commit ends before this database commit: the durable steps
     * keep their order (kloop_commit.c); if it failed, this transaction is rolled back */
    if (ll_loop_commit_wait(l) != 0) {
        b->kafka_failed = 1;
        return -1;
    }
    b->in_tx = 0;
    if (db_cmd(b, "COMMIT") != 0)
        return -1;
    if (l->crash_after > 0 && ++l->db_commits >= l->crash_after) {
        ll_log(LL_WARN, NULL, "fault_injected", "killing self after database commit %lld",
               (long long)l->db_commits);
        /* the replies of earlier commits go to the broker first: it then holds an open
         * transaction, the most adverse form of this crash point for read_committed readers */
        rd_kafka_flush(l->producer, 10000);
        raise(SIGKILL);
    }
    return flush_outs(b);
}

/* The offsets to commit: every partition this batch touched, at its first message not done,
 * with the done offsets above it as metadata. */
static rd_kafka_topic_partition_list_t *offsets_of(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *o = rd_kafka_topic_partition_list_new((int)l->n_parts);
    for (size_t i = 0; i < l->n_parts; i++) {
        part_state *ps = l->parts[i];
        if (ps->touched != l->batch_no)
            continue;
        rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_add(o, ps->topic, ps->partition);
        tp->offset = ps->track.base;
        char md[LL_OFFTRACK_METADATA_MAX];
        int n = ll_offtrack_metadata(&ps->track, md, sizeof md);
        if (n > 0) {
            tp->metadata = malloc((size_t)n);
            memcpy(tp->metadata, md, (size_t)n);
            tp->metadata_size = (size_t)n;
        }
    }
    return o;
}

/* The batch failed (database gone, Kafka error): undo it all and rewind after a backoff. */
static void undo_batch(batch *b)
{
    ll_loop *l = b->l;
    if (b->in_tx && l->db.conn && PQstatus(l->db.conn) == CONNECTION_OK)
        ll_db_command(&l->db, "ROLLBACK");
    b->in_tx = 0;
    b->n_touch = 0;
    outs_clear(b);
    if (b->kafka_open)
        ll_loop_abort(l);
    if (!l->fatal && !l->producer_broken && !b->kafka_failed) {
        ll_log(LL_WARN, NULL, "db_unavailable", "batch undone: %s %s (retrying from the committed offsets)",
               l->db.err.sqlstate, l->db.err.message);
        l->rewind_pending = 1;
        ll_loop_recover_later(l, 0);
    }
}

/* Whether the open transaction must commit now: loop.db_batch_max savepoints (PostgreSQL caches
 * 64 subtransactions per backend), or, with loop.db_batch_max = 1, one message (the old design).
 * What the set-based part decided needs no savepoint and does not count. */
static int tx_full(const batch *b)
{
    if (!b->in_tx)
        return 0;
    return b->l->db_batch_max == 1 ? b->tx_msgs >= 1 : b->savepoints >= b->l->db_batch_max;
}

/* Whether a later message of work[i]'s run and Kafka partition was left by the set-based apply
 * only to keep the run's order (ll_bulk_out.retry). */
static int run_waits_after(const batch *b, size_t i)
{
    const lmsg *m = b->work[i];
    for (size_t j = i + 1; j < b->n_work && strcmp(b->work[j]->run, m->run) == 0; j++)
        if (b->work[j]->ps == m->ps && !b->work[j]->decided && b->work[j]->retry)
            return 1;
    return 0;
}

/* The set-based part over work[from..) (run: only its messages), then a commit if the
 * transaction is full. 0, or -1 after undoing the batch. */
static int bulk_step(batch *b, size_t from, const char *run)
{
    size_t decided = 0;
    if (apply_bulk(b, from, b->n_work, run, &decided) != W_DONE) {
        undo_batch(b);
        return -1;
    }
    b->n_bulk += decided;
    if (apply_bulk(b, from, b->n_work, run, &decided) != W_DONE || (tx_full(b) && tx_commit(b) != 0)) {
        undo_batch(b);
        return -1;
    }
    return 0;
}

void ll_loop_batch(ll_loop *l, rd_kafka_message_t **polled, size_t n)
{
    int64_t now = ll_loop_now_ms();
    batch b;
    memset(&b, 0, sizeof b);
    b.l = l;
    l->batch_no++;
    collect(&b, polled, n, now);
    int touched = 0;
    for (size_t i = 0; i < l->n_parts; i++)
        touched |= l->parts[i]->touched == l->batch_no;
    if (b.n_work == 0 && !touched)
        goto out;
    b.use_savepoints = b.n_work > 1 && l->db_batch_max > 1;
    b.bulk_on = l->db_batch_max > 1;
    run_waits held_runs = {0}; /* partitions where the current run has a message held */
    for (size_t i = 0; i < b.n_work; i++) {
        lmsg *m = b.work[i];
        /* the set-based part, first over the whole batch */
        if (b.bulk_on && i == 0 && bulk_step(&b, 0, NULL) != 0)
            goto out;
        if (m->decided)
            continue; /* applied by the set-based part, in a transaction committed or still open */
        /* an earlier message of the same run and partition is held in this batch: this one
         * waits behind it (already queued if it was held before) */
        waits_enter(&held_runs, m);
        if (waits_on(&held_runs, m->ps)) {
            m->state = 2;
            if (!m->held && !hold_copy(l, m))
                ll_loop_stop_partition(l, m->ps, m->offset);
            continue;
        }
        if (apply_one(&b, m) == W_FAILED) {
            undo_batch(&b);
            goto out;
        }
        if (m->state == 2)
            waits_add(&held_runs, m->ps);
        if (tx_full(&b) && tx_commit(&b) != 0) {
            undo_batch(&b);
            goto out;
        }
        /* the set-based part left the later messages of m's run behind m; now that m is
         * applied (not held), they may go set-based again */
        if (b.bulk_on && m->state != 2 && run_waits_after(&b, i) && bulk_step(&b, i + 1, m->run) != 0)
            goto out;
    }
    if (tx_commit(&b) != 0 || kafka_ready(&b) != 0) {
        undo_batch(&b);
        goto out;
    }
    int64_t t_db = ll_loop_now_ms();
    ll_log(LL_DEBUG, NULL, "batch_done",
           "%zu messages (%zu polled, %zu set-based): database and replies %lld ms; the previous Kafka "
           "commit took %lld ms",
           b.n_work, n, b.n_bulk, (long long)(t_db - now), (long long)l->last_commit_ms);
    /* the commit runs beside the next batch (a failure aborts and rewinds when it is waited for,
     * or here when loop.overlap_commit is off) */
    ll_loop_commit_start(l, offsets_of(l));
    for (size_t i = 0; i < l->n_parts; i++)
        if (l->parts[i]->stopped && (int64_t)l->parts[i]->n_held <= l->max_held / 2)
            ll_loop_resume_partition(l, l->parts[i]);
out:
    outs_clear(&b);
    for (size_t i = 0; i < b.n_done_held; i++)
        lmsg_free_copy(b.done_held[i]);
    free(b.done_held);
    free(b.touch);
    free(b.outs);
    free(b.work);
    free(b.fresh);
}
