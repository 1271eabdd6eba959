/*
 * txn.c - the open database transaction of a batch (txn.h): BEGIN, savepoints, the queued
 * results, the heartbeats, the commit with its results staged, the undo, and the dead-letter event.
 *
 * the open database transaction of a batch (batch.h): BEGIN and plain
 * commands, the run heartbeats asked for by apply functions (ll_msg_touch_run, written once
 * before the commit with the positions, position.c), the results (replies, dead letters)
 * queued until the commit, the commit itself with its results then staged for the Kafka commit
 * (commit.c) and their offsets remembered, and the undo. A failure is returned to the batch,
 * which decides (batch.c).
 *
 * dead letters of the loop (docs/contract.md K§4): a message that cannot be applied
 * at all gets a DEAD_LETTER event in load_event, written in the batch's database transaction
 * (its id is a name-based UUID of topic/partition/offset, so a replay writes it once), and after
 * that transaction commits, a record on the dead-letter topic with the original key, value and
 * headers plus ll.* headers, staged for the Kafka transaction that commits its offset. The record always fits
 * (dlq.h, docs/design.md §3): what does not fit is left out and named.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commit.h"
#include "partition.h"
#include "position.h"
#include "txn.h"
#include "ll/dlq.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/rules.h"

/* The open database transaction of one batch: whether one is open, whether messages get a
 * savepoint each (use_savepoints) and how many it made, the messages applied in it, its results
 * queued for its commit, the runs whose heartbeat is written before the COMMIT, and the messages
 * whose results its commits staged (taken by the batch: ll_txn_committed). */
struct ll_txn {
    ll_loop *l;
    bool use_savepoints, open;
    int savepoints, msgs;
    out_item *outs;
    size_t n_outs, cap_outs;
    char (*touch)[37];
    size_t n_touch, cap_touch;
    lmsg **committed;
    size_t n_committed, cap_committed;
};

ll_txn *ll_txn_new(ll_loop *l, bool use_savepoints)
{
    ll_txn *t = calloc(1, sizeof *t);
    if (!t)
        abort();
    t->l = l;
    t->use_savepoints = use_savepoints;
    return t;
}

/* Drops the queued results from index keep on (the undone part of a transaction). */
static void outs_truncate(ll_txn *t, size_t keep)
{
    for (size_t i = keep; i < t->n_outs; i++) {
        free(t->outs[i].reply);
        free(t->outs[i].encode_err);
        free(t->outs[i].reason);
        free(t->outs[i].refusal);
    }
    if (keep < t->n_outs)
        t->n_outs = keep;
}

void ll_txn_free(ll_txn *t)
{
    if (!t)
        return;
    outs_truncate(t, 0);
    free(t->outs);
    free(t->touch);
    free(t->committed);
    free(t);
}

/* ll_msg_ops.touch_run: the heartbeat of run_id asked for in the open transaction. */
static void touch_run(void *txn, const char *run_id)
{
    ll_txn *t = txn;
    if (!t || !run_id || strlen(run_id) != 36)
        return;
    for (size_t i = 0; i < t->n_touch; i++)
        if (strcmp(t->touch[i], run_id) == 0)
            return;
    if (t->n_touch == t->cap_touch) {
        size_t cap = t->cap_touch ? t->cap_touch * 2 : 16;
        char(*r)[37] = realloc(t->touch, cap * sizeof *r);
        if (!r)
            abort();
        t->touch = r;
        t->cap_touch = cap;
    }
    memcpy(t->touch[t->n_touch++], run_id, 37);
}

const ll_msg_ops LL_TXN_MSG_OPS = {.touch_run = touch_run};

/* One command on the loop's connection. 0, or -1 with l->db.err. */
static int db_cmd(ll_txn *t, const char *sql)
{
    return t->l->kio->db_command(&t->l->db, sql) == LL_DB_OK ? 0 : -1;
}

int ll_txn_begin(ll_txn *t)
{
    if (t->open)
        return 0;
    ll_loop *l = t->l;
    if (l->kio->db_ensure(&l->db) != LL_DB_OK)
        return -1;
    /* no check of the connection here: whether the ledger is still the one this instance last saw
     * is the position write's compare-and-set before the COMMIT (position.c), which every
     * path passes, whatever the path to the server (a new connection, a pooler behind the same one) */
    if (db_cmd(t, "BEGIN ISOLATION LEVEL READ COMMITTED") != 0)
        return -1;
    t->open = true;
    t->savepoints = t->msgs = 0;
    return 0;
}

/* A savepoint (the one before it released: one name, "m"), counted. */
static int savepoint(ll_txn *t)
{
    if (db_cmd(t, t->savepoints ? "RELEASE SAVEPOINT m; SAVEPOINT m" : "SAVEPOINT m") != 0)
        return -1;
    t->savepoints++;
    return 0;
}

int ll_txn_msg_begin(ll_txn *t, ll_txn_mark *mk)
{
    if (ll_txn_begin(t) != 0 || (t->use_savepoints && savepoint(t) != 0))
        return -1;
    t->msgs++;
    *mk = (ll_txn_mark){t->n_outs, t->n_touch, t->use_savepoints};
    return 0;
}

int ll_txn_bulk_begin(ll_txn *t, ll_txn_mark *mk)
{
    bool sp = t->open && (t->msgs > 0 || t->n_outs > 0); /* effects to keep */
    if (sp && savepoint(t) != 0)
        return -1;
    *mk = (ll_txn_mark){t->n_outs, t->n_touch, sp};
    return 0;
}

int ll_txn_undo_to(ll_txn *t, const ll_txn_mark *mk)
{
    outs_truncate(t, mk->outs);
    t->n_touch = mk->touches;
    if (mk->savepoint)
        return db_cmd(t, "ROLLBACK TO SAVEPOINT m");
    t->open = false;
    return db_cmd(t, "ROLLBACK");
}

void ll_txn_out_push(ll_txn *t, lmsg *m, ll_replay_step step, json_t *reply, const char *code,
                     const char *reason, const char *run_id)
{
    if (t->n_outs == t->cap_outs) {
        size_t cap = t->cap_outs ? t->cap_outs * 2 : 32;
        out_item *o = realloc(t->outs, cap * sizeof *o);
        if (!o)
            abort();
        t->outs = o;
        t->cap_outs = cap;
    }
    out_item *o = &t->outs[t->n_outs++];
    memset(o, 0, sizeof *o);
    o->m = m;
    o->replay_step = step;
    if (reply) {
        char why[400];
        o->is_reply = 1;
        /* an input applied before, read again: a refusal computed from a run that moved on since
         * is no answer of it (batch.c) */
        const char *was = json_string_value(json_object_get(reply, "outcome"));
        const char *now = ll_replay_outcome(step, was);
        if (now != was)
            json_object_set_new(reply, "outcome", json_string(now));
        ll_obs_reply_labels(reply, o->outcome, sizeof o->outcome, o->reply_code, sizeof o->reply_code);
        /* a refusal is recorded with its input, so that a replay restates it: not one restated,
         * and not one withheld (an input answered before a database loss keeps the answer NiFi
         * has, which a later replay must restate as applied) */
        if (step != LL_REPLAY_RESTATE && !ll_msg_answered_before(m) && strcmp(o->outcome, "REJECTED") == 0 &&
            !(o->refusal = json_dumps(reply, JSON_COMPACT)))
            abort();
        if (ll_topic_encode_reply(m->io, reply, &o->reply, &o->reply_len, why, sizeof why) != 0) {
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

int ll_txn_dead(ll_txn *t, lmsg *m, ll_replay_step step, const char *run_id, const char *code,
                const char *reason)
{
    if (ll_txn_begin(t) != 0 || ll_loop_dead_letter_event(t->l, m, run_id, code, reason) != 0)
        return -1;
    ll_txn_out_push(t, m, step, NULL, code, reason, run_id);
    return 0;
}

bool ll_txn_full(const ll_txn *t)
{
    return ll_txn_full_decide(t->open, t->l->db_batch_max, t->msgs, t->n_outs, t->savepoints);
}

/* ---- the commit and what follows it ---------------------------------------------------------- */

/* Remembers m as done by a commit of this transaction (taken by the batch: ll_txn_committed). */
static void committed(ll_txn *t, lmsg *m)
{
    if (t->n_committed == t->cap_committed) {
        size_t cap = t->cap_committed ? t->cap_committed * 2 : 64;
        lmsg **c = realloc(t->committed, cap * sizeof *c);
        if (!c)
            abort();
        t->committed = c;
        t->cap_committed = cap;
    }
    t->committed[t->n_committed++] = m;
}

/* Stages the results of the committed database transaction for the next Kafka transaction
 * (commit.c) and remembers their messages as done. 0, or -1 (the caller undoes the batch). */
static int flush_outs(ll_txn *t)
{
    ll_loop *l = t->l;
    int rc = 0;
    for (size_t i = 0; i < t->n_outs && rc == 0; i++) {
        out_item *o = &t->outs[i];
        lmsg *m = o->m;
        if (ll_msg_answered_before(m) && o->is_reply) {
            ll_obs_answer_withheld();
        } else if (o->is_reply) {
            char err[800];
            if (o->encode_err) {
                /* a reply that does not fit its schema: a dead letter, in a transaction of its
                 * own (the batch's is committed), rather than the same message for ever */
                snprintf(err, sizeof err, "the reply to %s does not fit its schema: %s",
                         ll_topic_reply_to(m->io), o->encode_err);
                if (l->kio->db_ensure(&l->db) != LL_DB_OK ||
                    l->kio->db_command(&l->db, "BEGIN") != LL_DB_OK ||
                    ll_loop_dead_letter_event(l, m, o->run_id, "REPLY_ENCODE_FAILED", err) != 0 ||
                    l->kio->db_command(&l->db, "COMMIT") != LL_DB_OK)
                    rc = -1;
                else
                    ll_loop_dead_letter_stage(l, m, "REPLY_ENCODE_FAILED", err);
            } else {
                unsigned char *buf = o->reply; /* staged from here */
                o->reply = NULL;
                ll_loop_stage_record(l, ll_topic_reply_to(m->io), m->key, m->key_len, buf, o->reply_len, NULL,
                                     1, ll_loop_part_topic(m->ps), o->outcome, o->reply_code);
            }
        } else {
            /* a dead letter is staged even for an input answered before the loss (issue 39, item
             * 4): it is applied again and its effect is not in the ledger, so withheld it would be
             * lost for good; visible, `loadctl redrive` applies it once its cause is fixed */
            if (ll_msg_answered_before(m)) {
                ll_log_ctx ctx = {o->run_id[0] ? o->run_id : NULL, NULL, ll_loop_part_topic(m->ps),
                                  ll_loop_part_no(m->ps), m->offset};
                ll_log(LL_ERROR, &ctx, "answered_input_dead_lettered",
                       "an input answered before the database lost its effect is dead-lettered on its "
                       "re-application"
                       " (%s): its effect is not in the ledger until `loadctl redrive` applies it",
                       o->code);
            }
            ll_loop_dead_letter_stage(l, m, o->code, o->reason);
        }
        if (rc == 0)
            committed(t, m);
    }
    outs_truncate(t, 0);
    return rc;
}

int ll_txn_commit(ll_txn *t, const done_mark *marks, size_t n_marks)
{
    ll_loop *l = t->l;
    if (!t->open) {
        /* a refusal whose transaction was rolled back whole (one message, no savepoint) is still
         * recorded before it is answered: in a transaction of its own, with the positions */
        bool record = false;
        for (size_t i = 0; i < t->n_outs && !record; i++)
            record = ll_out_recorded(&t->outs[i]);
        if (!record)
            return flush_outs(t);
        if (ll_txn_begin(t) != 0)
            return -1;
    }
    ll_precommit pc = {t->touch, t->n_touch, t->outs, t->n_outs, marks, n_marks};
    int pre = ll_positions_precommit(l, &pc);
    t->n_touch = 0; /* written, or undone with the transaction */
    if (pre != 0)
        return -1; /* still in the (failed) transaction: the batch undoes it (ll_txn_undo) */
    /* not waiting for the Kafka commit in flight: this database commit may come before it
     * ends, its results staged for the next one. If that fails, the messages of every database
     * transaction not yet in a committed Kafka transaction are read again from the committed
     * offsets and applied as replays, as after a crash between the two commits (commit.c,
     * docs/design.md §4) */
    t->open = false;
    if (db_cmd(t, "COMMIT") != 0)
        return -1;
    if (l->crash_after > 0 && ++l->db_commits >= l->crash_after) {
        ll_log(LL_WARN, NULL, "fault_injected", "killing self after database commit %lld",
               (long long)l->db_commits);
        /* the replies of earlier commits go to the broker first, in a transaction left open:
         * the most adverse form of this crash point for read_committed readers */
        ll_loop_commit_fault_open(l);
        raise(SIGKILL);
    }
    return flush_outs(t);
}

lmsg *const *ll_txn_committed(const ll_txn *t, size_t *n)
{
    *n = t->n_committed;
    return t->committed;
}

void ll_txn_committed_clear(ll_txn *t)
{
    t->n_committed = 0;
}

void ll_txn_undo(ll_txn *t)
{
    ll_loop *l = t->l;
    if (t->open && l->kio->db_connected(&l->db))
        l->kio->db_command(&l->db, "ROLLBACK");
    t->open = false;
    t->n_touch = 0;
    outs_truncate(t, 0);
}

static const ll_stmt ST_DEAD_LETTER_EVENT = {
    "kloop_dead_letter_event",
    "INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, run_id, process_group,"
    " processor_name, error_class, error_code, message, details)"
    " VALUES ($1::uuid, 'ERROR', 'DEAD_LETTER', $2::uuid, 'LOADLEDGER', $3, 'DEAD_LETTER', $4,"
    " left($5, 2000), $6::jsonb) ON CONFLICT (event_id) DO NOTHING",
    6};

/* The dead-letter reason as a header: at most this many bytes, cut on a UTF-8 boundary. */
#define DL_REASON_MAX 1000

int ll_loop_dead_letter_event(ll_loop *l, const lmsg *m, const char *run_id, const char *code,
                              const char *reason)
{
    const char *topic = ll_loop_part_topic(m->ps);
    char coord[400], event_id[37], canon[37];
    snprintf(coord, sizeof coord, "dead-letter/%s/%d/%lld", topic, (int)ll_loop_part_no(m->ps),
             (long long)m->offset);
    ll_uuid_v5(LL_UUID_NAMESPACE, coord, event_id);
    json_t *details =
        json_pack("{s:s,s:i,s:I,s:s}", "sourceTopic", topic, "sourcePartition", (int)ll_loop_part_no(m->ps),
                  "sourceOffset", (json_int_t)m->offset, "service", l->service);
    char *dj = json_dumps(details, JSON_COMPACT);
    json_decref(details);
    int have_run = run_id && ll_uuid_canonical(run_id, canon) == 0;
    const char *params[6] = {event_id, have_run ? canon : NULL, l->service, code, reason, dj};
    PGresult *r = l->kio->db_exec(&l->db, &ST_DEAD_LETTER_EVENT, params);
    free(dj);
    if (!r)
        return -1;
    PQclear(r);
    ll_log_ctx ctx = {have_run ? canon : NULL, NULL, topic, ll_loop_part_no(m->ps), m->offset};
    ll_log(LL_ERROR, &ctx, "dead_letter", "%s: %s", code, reason);
    return 0;
}

/* Serialized size of a header set as the producer counts it (bytes). */
static size_t headers_size(const rd_kafka_headers_t *h)
{
    size_t n = 0, vlen = 0;
    const char *name;
    const void *val;
    for (size_t i = 0; h && rd_kafka_header_get_all(h, i, &name, &val, &vlen) == RD_KAFKA_RESP_ERR_NO_ERROR;
         i++)
        n += strlen(name) + vlen + 8;
    return n;
}

void ll_loop_dead_letter_stage(ll_loop *l, const lmsg *m, const char *code, const char *reason)
{
    char ts[40], why[DL_REASON_MAX + 1], size[32], sha[65] = "", part[16], off[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(part, sizeof part, "%d", (int)ll_loop_part_no(m->ps));
    snprintf(off, sizeof off, "%lld", (long long)m->offset);
    size_t rl = strlen(reason);
    if (rl > DL_REASON_MAX) {
        rl = DL_REASON_MAX;
        while (rl > 0 && ((unsigned char)reason[rl] & 0xC0) == 0x80)
            rl--;
    }
    memcpy(why, reason, rl);
    why[rl] = '\0';
    rd_kafka_headers_t *own = rd_kafka_headers_new(12);
    rd_kafka_header_add(own, "ll.error.code", -1, code, -1);
    rd_kafka_header_add(own, "ll.error.message", -1, why, -1);
    rd_kafka_header_add(own, "ll.source.topic", -1, ll_loop_part_topic(m->ps), -1);
    rd_kafka_header_add(own, "ll.source.partition", -1, part, -1);
    rd_kafka_header_add(own, "ll.source.offset", -1, off, -1);
    rd_kafka_header_add(own, "ll.service", -1, l->service, -1);
    rd_kafka_header_add(own, "ll.dead_at", -1, ts, -1);
    size_t own_len = headers_size(own) + 200; /* room for the ll.payload.* headers */
    const rd_kafka_headers_t *orig = ll_loop_msg_headers(l, m);
    ll_dlq_fit fit;
    ll_dlq_fit_decide(m->key_len, m->len, headers_size(orig), own_len, l->dlq_limit, &fit);

    rd_kafka_headers_t *h = fit.keep_headers && orig ? rd_kafka_headers_copy(orig) : rd_kafka_headers_new(12);
    const char *name;
    const void *val;
    size_t vlen;
    for (size_t i = 0; rd_kafka_header_get_all(own, i, &name, &val, &vlen) == RD_KAFKA_RESP_ERR_NO_ERROR; i++)
        rd_kafka_header_add(h, name, -1, val, (ssize_t)vlen);
    rd_kafka_headers_destroy(own);
    if (!fit.keep_value) {
        snprintf(size, sizeof size, "%zu", m->len);
        ll_sha256_hex(m->value, m->value ? m->len : 0, sha);
        rd_kafka_header_add(h, "ll.payload.omitted", -1,
                            "payload omitted: the record would exceed the dead-letter limit", -1);
        rd_kafka_header_add(h, "ll.payload.size", -1, size, -1);
        rd_kafka_header_add(h, "ll.payload.sha256", -1, sha, -1);
        ll_log_ctx ctx = {NULL, NULL, ll_loop_part_topic(m->ps), ll_loop_part_no(m->ps), m->offset};
        ll_log(LL_WARN, &ctx, "dead_letter_payload_omitted",
               "value of %zu bytes (sha256 %s) not copied: over %zu bytes", m->len, sha, l->dlq_limit);
    }
    if (!fit.keep_headers && orig)
        rd_kafka_header_add(h, "ll.headers.omitted", -1, "original headers omitted (size)", -1);
    if (!fit.keep_key && m->key)
        rd_kafka_header_add(h, "ll.key.omitted", -1, "original key omitted (size)", -1);
    /* counted when the transaction commits, under a bounded code label */
    ll_loop_stage_record(l, l->dlq_topic, fit.keep_key ? m->key : NULL, fit.keep_key ? m->key_len : 0,
                         fit.keep_value ? (void *)m->value : NULL, fit.keep_value ? m->len : 0, h, 0,
                         ll_loop_part_topic(m->ps), NULL, ll_obs_code_ok(code) ? code : "OTHER");
}
