/*
 * loop_fake_io.h - the scripted world of the loop's unit tests (test_loop_*.c): a table of
 * calls out (ll_loop_io, io.h) over a fake database, a fake transactional producer whose
 * committed transactions are "visible", and a fake consumer with a partition log, positions,
 * pauses and a committed-offset store, so that rewinds and replays run end to end. One world per
 * process (the table's functions get NULL handles), reset by each test's setup.
 *
 * This header is the world and its table (FK_IO); loop_fake.h adds the service's fake apply
 * functions, the set-up and the helpers that drive the loop and check what it did. The loop's
 * internals read by the tests are kept in the fk_* helpers marked "internal".
 *
 * The connection's state is the table's too (db_connected: F.conn_ok), so an SQL error is classed
 * by its SQLSTATE while the scripted connection is up.
 */
#ifndef KLOOP_FAKE_IO_H
#define KLOOP_FAKE_IO_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../../common/src/loop/batch.h"
#include "../../common/src/loop/commit.h"
#include "../../common/src/loop/partition.h"
#include "../../common/src/loop/position.h"
#include "../../common/src/loop/txn.h"
#include "ll/codec.h"
#include "ll/log.h"
#include "ll/topics.h"

#define FK_TOPIC   "loadledger.kin"
#define FK_REPLY   "loadledger.kout"
#define FK_DLQ     "loadledger.dead-letters"
#define FK_NPART   4
#define FK_LOGMAX  4096
#define FK_RECMAX  8192
#define FK_CALLMAX 16384
#define FK_TXMAX   512

/* One record produced: what it answers (source partition and offset), its outcome. */
typedef struct fk_rec {
    char topic[64];
    char key[48];
    int part;
    long long off;
    char outcome[16];
} fk_rec;

/* One message of the partition log. */
typedef struct fk_entry {
    char run[40];
    int seq;
    unsigned char *val; /* encoded, owned */
    size_t len;
} fk_entry;

/* An apply decision recorded: per message (bulk 0), or in a set-based call that stood (bulk = the call). */
typedef struct fk_call {
    int part;
    long long off;
    int seq;
    int bulk;
    ll_apply answer;
} fk_call;

/* What a set-based call does with one message: decide it, leave it, or leave it for its run's order. */
enum { FK_DECIDE = 0, FK_LEAVE, FK_LEAVE_RETRY };

typedef struct fake {
    ll_loop *l;
    ll_config *cfg;
    ll_schema *reply_schema, *in_schema;
    /* the partition log and the consumer */
    fk_entry log[FK_NPART][FK_LOGMAX];
    long long log_n[FK_NPART];
    long long fetch_pos[FK_NPART]; /* next offset fetched */
    int paused[FK_NPART];
    rd_kafka_topic_partition_list_t *asg;      /* the assignment (NULL: none) */
    rd_kafka_topic_partition_list_t *assigned; /* the last list given to assign */
    rd_kafka_topic_partition_list_t *sought;   /* the last list given to seek */
    rd_kafka_topic_partition_list_t *kc;       /* Kafka's committed offsets (+ metadata) */
    int n_assign, n_pause, n_resume, n_seek, n_committed_calls;
    int fail_committed; /* fail the next committed() calls */
    /* the producer */
    fk_rec txn[FK_RECMAX], vis[FK_RECMAX];
    size_t n_txn, n_vis;
    rd_kafka_topic_partition_list_t *pend; /* offsets sent in the open transaction */
    rd_kafka_topic_partition_list_t *sent; /* the last offsets sent (copy) */
    size_t txn_recs[FK_TXMAX];             /* records of each committed transaction */
    int n_begin, n_send, n_commit_ok, n_commit_fail, n_abort, n_remake, n_produce_fail;
    int fail_begin, fail_produce, fail_send, fail_commit, fail_remake; /* fail the next k calls */
    rd_kafka_resp_err_t fatal_code;                                    /* what fatal_error says */
    int visible_at_revoke; /* visible records when the assignment was last taken away */
    /* a commit_transaction held until the gate opens (overlap on) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gate_closed, gate_open;
    int commits_returned;
    /* the database */
    int conn_ok;
    int db_down; /* db_ensure fails */
    int n_db_commit, fail_db_commit, n_rollback, n_rollback_to, n_tx;
    int tx_open, cur_sp, max_sp;
    int tx_sp[FK_TXMAX];
    int fail_positions; /* fail the next positions reads */
    int fail_precommit; /* fail the next precommit statements (positions and heartbeats) */
    int reconnect;      /* the next db_ensure makes a new connection */
    int ledger_moved;   /* the ledger's positions are not the ones the loop last read or wrote (it went
                         * back in time behind the same connection): every position write and check
                         * finds them moved until the next positions read (the merge's fence) */
    int n_position_checks, n_position_refused;
    int n_positions_read, n_precommit, n_rewind_rows, n_dead_events;
    char first_precommit_next[64]; /* the next offsets ($5) of the first position write */
    struct {
        int part;
        char next[24], done[256];
    } pos[FK_NPART];
    int n_pos;
    int pos_scripted; /* the rows are pos[]; 0: the ledger's positions are Kafka's commits */
    /* the service's functions */
    fk_call calls[FK_CALLMAX];
    size_t n_calls;
    ll_apply (*decide)(const ll_msg *m); /* per message; NULL: COMMIT */
    char apply_state[6];                 /* SQLSTATE of an LL_APPLY_DB answer */
    int (*bulk_decide)(const ll_msg *m, int call);
    int bulk_fail_call; /* this set-based call (1-based) fails with bulk_state after deciding */
    char bulk_state[6];
    int bulk_calls;
    int bulk_no_reply; /* the set-based apply decides without handing the replies over (its defect) */
    int bad_reply_seq; /* this seq's reply does not fit its schema (0: none) */
    int prereq;        /* scenario state the decide functions read */
} fake;

static fake F;

/* The scripted connection's state (ll_loop_io.db_connected). */
static bool fk_db_connected(const ll_db *db)
{
    (void)db;
    return F.conn_ok != 0;
}

/* ---- small helpers ---------------------------------------------------------------------------- */

static inline rd_kafka_topic_partition_t *fk_find(rd_kafka_topic_partition_list_t *l, int part)
{
    return l ? rd_kafka_topic_partition_list_find(l, FK_TOPIC, part) : NULL;
}

static inline void fk_list_set(rd_kafka_topic_partition_list_t **dst,
                               const rd_kafka_topic_partition_list_t *src)
{
    if (*dst)
        rd_kafka_topic_partition_list_destroy(*dst);
    *dst = src ? rd_kafka_topic_partition_list_copy(src) : NULL;
}

static inline void fk_set_metadata(rd_kafka_topic_partition_t *tp, const void *md, size_t n)
{
    free(tp->metadata);
    tp->metadata = NULL;
    tp->metadata_size = 0;
    if (md && n > 0) {
        tp->metadata = malloc(n);
        memcpy(tp->metadata, md, n);
        tp->metadata_size = n;
    }
}

static inline void fk_run_id(int run, char *out)
{
    snprintf(out, 40, "00000000-0000-4000-8000-%012d", run);
}

/* ---- the database ----------------------------------------------------------------------------- */

static inline void fk_db_fail(ll_db *db, const char *state)
{
    snprintf(db->err.sqlstate, sizeof db->err.sqlstate, "%s", state);
    snprintf(db->err.message, sizeof db->err.message, "scripted failure %s", state);
    db->err.constraint[0] = '\0';
}

static inline ll_db_rc fk_db_ensure(ll_db *db)
{
    if (F.reconnect) { /* a new connection, maybe to another server */
        F.reconnect = 0;
        db->connects++;
    }
    if (F.db_down) {
        fk_db_fail(db, "08006");
        return LL_DB_UNAVAILABLE;
    }
    return LL_DB_OK;
}

static inline ll_db_rc fk_db_command(ll_db *db, const char *sql)
{
    if (strncmp(sql, "BEGIN", 5) == 0) {
        F.tx_open = 1;
        F.cur_sp = 0;
    } else if (strcmp(sql, "SAVEPOINT m") == 0 || strcmp(sql, "RELEASE SAVEPOINT m; SAVEPOINT m") == 0) {
        F.cur_sp++;
        if (F.cur_sp > F.max_sp)
            F.max_sp = F.cur_sp;
    } else if (strcmp(sql, "ROLLBACK TO SAVEPOINT m") == 0) {
        F.n_rollback_to++;
    } else if (strcmp(sql, "ROLLBACK") == 0) {
        F.n_rollback++;
        F.tx_open = 0;
    } else if (strcmp(sql, "COMMIT") == 0) {
        F.n_db_commit++;
        F.tx_open = 0;
        if (F.fail_db_commit == F.n_db_commit) {
            fk_db_fail(db, "08006");
            return LL_DB_UNAVAILABLE;
        }
        if (F.n_tx < FK_TXMAX)
            F.tx_sp[F.n_tx] = F.cur_sp;
        F.n_tx++;
    }
    return LL_DB_OK;
}

static inline PGresult *fk_result(ExecStatusType st)
{
    return PQmakeEmptyPGresult(NULL, st);
}

/* The rows of nifi_ops.consumer_position (topic, kafka_partition, next_offset, done_above). */
static inline PGresult *fk_positions_result(void)
{
    PGresult *r = fk_result(PGRES_TUPLES_OK);
    PGresAttDesc att[4];
    memset(att, 0, sizeof att);
    static char *names[4] = {"topic", "kafka_partition", "next_offset", "done_above"};
    for (int i = 0; i < 4; i++) {
        att[i].name = names[i];
        att[i].typid = 25;
        att[i].typlen = -1;
        att[i].atttypmod = -1;
    }
    assert_true(PQsetResultAttrs(r, 4, att));
    if (!F.pos_scripted) /* the ledger in step with Kafka's commits */
        for (int i = 0; F.kc && i < F.kc->cnt && F.n_pos < FK_NPART; i++) {
            const rd_kafka_topic_partition_t *c = &F.kc->elems[i];
            F.pos[F.n_pos].part = c->partition;
            snprintf(F.pos[F.n_pos].next, sizeof F.pos[F.n_pos].next, "%lld", (long long)c->offset);
            snprintf(F.pos[F.n_pos].done, sizeof F.pos[F.n_pos].done, "%.*s", (int)c->metadata_size,
                     c->metadata ? (const char *)c->metadata : "");
            F.n_pos++;
        }
    for (int k = 0; k < F.n_pos; k++) {
        char part[16];
        snprintf(part, sizeof part, "%d", F.pos[k].part);
        assert_true(PQsetvalue(r, k, 0, FK_TOPIC, (int)strlen(FK_TOPIC)));
        assert_true(PQsetvalue(r, k, 1, part, (int)strlen(part)));
        assert_true(PQsetvalue(r, k, 2, F.pos[k].next, (int)strlen(F.pos[k].next)));
        assert_true(PQsetvalue(r, k, 3, F.pos[k].done, (int)strlen(F.pos[k].done)));
    }
    if (!F.pos_scripted)
        F.n_pos = 0;
    return r;
}

/* Elements of a PostgreSQL array literal as ll_pgarray writes it (every element quoted). */
static inline long long fk_array_len(const char *a)
{
    long long n = 0;
    int quoted = 0;
    for (const char *c = a; *c; c++) {
        if (*c == '\\' && quoted && c[1]) {
            c++;
        } else if (*c == '"') {
            quoted = !quoted;
            n += quoted;
        }
    }
    return n;
}

/* A one-row, one-column result holding v (what a count(*) answers). */
static inline PGresult *fk_count_result(long long v)
{
    PGresult *r = fk_result(PGRES_TUPLES_OK);
    PGresAttDesc att;
    memset(&att, 0, sizeof att);
    att.name = (char *)"count";
    att.typid = 20;
    att.typlen = 8;
    att.atttypmod = -1;
    assert_true(PQsetResultAttrs(r, 1, &att));
    char t[24];
    snprintf(t, sizeof t, "%lld", v);
    assert_true(PQsetvalue(r, 0, 0, t, (int)strlen(t)));
    return r;
}

static inline PGresult *fk_db_exec(ll_db *db, const ll_stmt *st, const char *const *params)
{
    if (strcmp(st->name, "kloop_position_check") == 0) {
        F.n_position_checks++;
        return fk_count_result(F.ledger_moved ? 1 : 0);
    }
    if (strcmp(st->name, "kloop_positions") == 0) {
        F.n_positions_read++;
        F.ledger_moved = 0; /* fenced: the loop expects the ledger as it is now */
        if (F.fail_positions > 0) {
            F.fail_positions--;
            fk_db_fail(db, "08006");
            return NULL;
        }
        return fk_positions_result();
    }
    if (strcmp(st->name, "kloop_precommit") == 0 && F.fail_precommit > 0) {
        F.fail_precommit--;
        fk_db_fail(db, "08006");
        return NULL;
    }
    if (strcmp(st->name, "kloop_precommit") == 0) {
        if (F.n_precommit++ == 0)
            snprintf(F.first_precommit_next, sizeof F.first_precommit_next, "%s", params[4]);
        if (F.ledger_moved)
            F.n_position_refused++;
        return fk_count_result(F.ledger_moved ? 0 : fk_array_len(params[2])); /* the positions written */
    }
    if (strcmp(st->name, "kloop_position_rewind") == 0)
        F.n_rewind_rows++;
    if (strcmp(st->name, "kloop_dead_letter_event") == 0)
        F.n_dead_events++;
    return fk_result(PGRES_COMMAND_OK);
}

/* A ledger position row (the database's own view of partition part). */
static inline void fk_ledger_position(int part, long long next, const char *done)
{
    F.pos_scripted = 1;
    F.pos[F.n_pos].part = part;
    snprintf(F.pos[F.n_pos].next, sizeof F.pos[F.n_pos].next, "%lld", next);
    snprintf(F.pos[F.n_pos].done, sizeof F.pos[F.n_pos].done, "%s", done);
    F.n_pos++;
}

/* ---- the messages ----------------------------------------------------------------------------- */

static inline const char *fk_msg_topic(const rd_kafka_message_t *rkm)
{
    (void)rkm; /* every polled message is of the one input topic (rkt: a cookie, never read) */
    return FK_TOPIC;
}

static inline rd_kafka_resp_err_t fk_msg_headers(const rd_kafka_message_t *rkm, rd_kafka_headers_t **hdrs)
{
    *hdrs = NULL;
    return RD_KAFKA_RESP_ERR__NOENT;
}

/* Appends a message of run (number) to partition part's log: its offset. */
static inline long long fk_put(int part, int run, int seq)
{
    long long off = F.log_n[part]++;
    assert_true(off < FK_LOGMAX);
    fk_entry *e = &F.log[part][off];
    fk_run_id(run, e->run);
    e->seq = seq;
    ll_encode_opts eo = {.framing = LL_FRAMING_BARE, .schema = F.in_schema};
    json_t *v = json_pack("{s:s,s:i}", "runId", e->run, "seq", seq);
    char err[256];
    assert_int_equal(ll_encode(&eo, v, &e->val, &e->len, err, sizeof err), 0);
    json_decref(v);
    return off;
}

/* ---- the producer ----------------------------------------------------------------------------- */

static inline rd_kafka_error_t *fk_begin(rd_kafka_t *rk)
{
    F.n_begin++;
    if (F.fail_begin > 0) {
        F.fail_begin--;
        return rd_kafka_error_new(RD_KAFKA_RESP_ERR__STATE, "scripted begin failure");
    }
    F.n_txn = 0;
    return NULL;
}

/* A header's value as text (a dead letter's source coordinates). */
static inline long long fk_header_ll(rd_kafka_headers_t *h, const char *name)
{
    const void *v = NULL;
    size_t n = 0;
    char buf[32] = "";
    if (h && rd_kafka_header_get_last(h, name, &v, &n) == RD_KAFKA_RESP_ERR_NO_ERROR && n < sizeof buf)
        memcpy(buf, v, n);
    return strtoll(buf, NULL, 10);
}

static inline rd_kafka_resp_err_t fk_produce(rd_kafka_t *rk, const char *topic, const void *key, size_t klen,
                                             void *val, size_t vlen, rd_kafka_headers_t *hdrs)
{
    if (F.fail_produce > 0) {
        F.fail_produce--;
        F.n_produce_fail++;
        return RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
    }
    assert_true(F.n_txn < FK_RECMAX);
    fk_rec *r = &F.txn[F.n_txn++];
    memset(r, 0, sizeof *r);
    snprintf(r->topic, sizeof r->topic, "%s", topic);
    if (key && klen < sizeof r->key)
        memcpy(r->key, key, klen);
    if (strcmp(topic, FK_REPLY) == 0) {
        ll_decode_opts o = {.framing = LL_FRAMING_BARE, .reader = F.reply_schema};
        json_t *v = NULL;
        char err[256];
        assert_int_equal(ll_decode(&o, val, vlen, &v, err, sizeof err), 0);
        r->part = (int)json_integer_value(json_object_get(v, "sourcePartition"));
        r->off = json_integer_value(json_object_get(v, "sourceOffset"));
        snprintf(r->outcome, sizeof r->outcome, "%s", json_string_value(json_object_get(v, "outcome")));
        json_decref(v);
    } else {
        r->part = (int)fk_header_ll(hdrs, "ll.source.partition");
        r->off = fk_header_ll(hdrs, "ll.source.offset");
        snprintf(r->outcome, sizeof r->outcome, "DEAD");
    }
    free(val); /* RD_KAFKA_MSG_F_FREE: the producer's */
    if (hdrs)
        rd_kafka_headers_destroy(hdrs);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static inline rd_kafka_resp_err_t fk_flush(rd_kafka_t *rk, int timeout_ms)
{
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static inline rd_kafka_error_t *fk_send_offsets(rd_kafka_t *rk,
                                                const rd_kafka_topic_partition_list_t *offsets,
                                                const rd_kafka_consumer_group_metadata_t *group,
                                                int timeout_ms)
{
    F.n_send++;
    assert_non_null(group);
    if (F.fail_send > 0) {
        F.fail_send--;
        return rd_kafka_error_new(RD_KAFKA_RESP_ERR__TIMED_OUT, "scripted send_offsets failure");
    }
    fk_list_set(&F.pend, offsets);
    fk_list_set(&F.sent, offsets);
    return NULL;
}

/* A commit held at the gate (the overlap tests): until it opens. */
static inline void fk_gate_wait(void)
{
    pthread_mutex_lock(&F.mu);
    while (F.gate_closed && !F.gate_open)
        pthread_cond_wait(&F.cv, &F.mu);
    pthread_mutex_unlock(&F.mu);
}

static inline void fk_gate_set(int closed, int open)
{
    pthread_mutex_lock(&F.mu);
    F.gate_closed = closed;
    F.gate_open = open;
    pthread_cond_broadcast(&F.cv);
    pthread_mutex_unlock(&F.mu);
}

static inline rd_kafka_error_t *fk_commit_txn(rd_kafka_t *rk, int timeout_ms)
{
    fk_gate_wait();
    rd_kafka_error_t *e = NULL;
    if (F.fail_commit > 0) {
        F.fail_commit--;
        F.n_commit_fail++;
        e = rd_kafka_error_new(RD_KAFKA_RESP_ERR__TIMED_OUT, "scripted commit failure");
    } else {
        assert_true(F.n_vis + F.n_txn <= FK_RECMAX);
        memcpy(&F.vis[F.n_vis], F.txn, F.n_txn * sizeof *F.txn);
        F.n_vis += F.n_txn;
        if (F.n_commit_ok < FK_TXMAX)
            F.txn_recs[F.n_commit_ok] = F.n_txn;
        F.n_commit_ok++;
        for (int i = 0; F.pend && i < F.pend->cnt; i++) {
            const rd_kafka_topic_partition_t *s = &F.pend->elems[i];
            rd_kafka_topic_partition_t *c = fk_find(F.kc, s->partition);
            if (!c)
                c = rd_kafka_topic_partition_list_add(F.kc, s->topic, s->partition);
            c->offset = s->offset;
            fk_set_metadata(c, s->metadata, s->metadata_size);
        }
        F.n_txn = 0;
        fk_list_set(&F.pend, NULL);
    }
    pthread_mutex_lock(&F.mu);
    F.commits_returned++;
    pthread_mutex_unlock(&F.mu);
    return e;
}

static inline rd_kafka_error_t *fk_abort_txn(rd_kafka_t *rk, int timeout_ms)
{
    F.n_abort++;
    F.n_txn = 0; /* aborted: never visible */
    fk_list_set(&F.pend, NULL);
    return NULL;
}

static inline rd_kafka_resp_err_t fk_fatal_error(rd_kafka_t *rk, char *errstr, size_t errstr_size)
{
    if (F.fatal_code)
        snprintf(errstr, errstr_size, "scripted fatal error");
    return F.fatal_code;
}

static inline int fk_remake(ll_loop *l, int init_ms, char *err, size_t errlen)
{
    F.n_remake++;
    if (F.fail_remake > 0) {
        F.fail_remake--;
        snprintf(err, errlen, "scripted init_transactions failure");
        return -1;
    }
    F.fatal_code = RD_KAFKA_RESP_ERR_NO_ERROR; /* a new producer; its init aborted the open transaction */
    F.n_txn = 0;
    fk_list_set(&F.pend, NULL);
    return 0;
}

/* ---- the consumer ----------------------------------------------------------------------------- */

static inline rd_kafka_consumer_group_metadata_t *fk_group_metadata(rd_kafka_t *rk)
{
    return rd_kafka_consumer_group_metadata_new("loadledger.test");
}

static inline rd_kafka_resp_err_t fk_assignment(rd_kafka_t *rk, rd_kafka_topic_partition_list_t **parts)
{
    *parts = F.asg ? rd_kafka_topic_partition_list_copy(F.asg) : rd_kafka_topic_partition_list_new(0);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static inline rd_kafka_resp_err_t fk_committed(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts,
                                               int timeout_ms)
{
    F.n_committed_calls++;
    if (F.fail_committed > 0) {
        F.fail_committed--;
        return RD_KAFKA_RESP_ERR__TIMED_OUT;
    }
    for (int i = 0; i < parts->cnt; i++) {
        rd_kafka_topic_partition_t *e = &parts->elems[i], *c = fk_find(F.kc, e->partition);
        e->err = RD_KAFKA_RESP_ERR_NO_ERROR;
        e->offset = c ? c->offset : RD_KAFKA_OFFSET_INVALID;
        fk_set_metadata(e, c ? c->metadata : NULL, c ? c->metadata_size : 0);
    }
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

/* Where fetching starts for an offset of an assign or a seek. */
static inline long long fk_start_at(const rd_kafka_topic_partition_t *e)
{
    if (e->offset >= 0)
        return e->offset;
    if (e->offset == RD_KAFKA_OFFSET_INVALID) {
        rd_kafka_topic_partition_t *c = fk_find(F.kc, e->partition);
        return c && c->offset >= 0 ? c->offset : 0;
    }
    return 0; /* BEGINNING (auto.offset.reset is earliest) */
}

static inline rd_kafka_resp_err_t fk_assign(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *parts)
{
    F.n_assign++;
    fk_list_set(&F.asg, parts);
    memset(F.paused, 0, sizeof F.paused);
    if (!parts) {
        F.visible_at_revoke = (int)F.n_vis;
        return RD_KAFKA_RESP_ERR_NO_ERROR;
    }
    fk_list_set(&F.assigned, parts);
    for (int i = 0; i < parts->cnt; i++)
        F.fetch_pos[parts->elems[i].partition] = fk_start_at(&parts->elems[i]);
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static inline rd_kafka_resp_err_t fk_pause(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts)
{
    F.n_pause++;
    for (int i = 0; i < parts->cnt; i++)
        F.paused[parts->elems[i].partition] = 1;
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static inline rd_kafka_resp_err_t fk_resume(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts)
{
    F.n_resume++;
    for (int i = 0; i < parts->cnt; i++)
        F.paused[parts->elems[i].partition] = 0;
    return RD_KAFKA_RESP_ERR_NO_ERROR;
}

static inline int fk_seek(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts, int timeout_ms, char *why,
                          size_t whylen)
{
    F.n_seek++;
    fk_list_set(&F.sought, parts);
    for (int i = 0; i < parts->cnt; i++)
        F.fetch_pos[parts->elems[i].partition] = fk_start_at(&parts->elems[i]);
    return 0;
}

static const ll_loop_io FK_IO = {
    .db_connected = fk_db_connected,
    .db_ensure = fk_db_ensure,
    .db_command = fk_db_command,
    .db_exec = fk_db_exec,
    .msg_topic = fk_msg_topic,
    .msg_headers = fk_msg_headers,
    .begin_transaction = fk_begin,
    .produce = fk_produce,
    .flush = fk_flush,
    .send_offsets_to_transaction = fk_send_offsets,
    .commit_transaction = fk_commit_txn,
    .abort_transaction = fk_abort_txn,
    .fatal_error = fk_fatal_error,
    .remake_producer = fk_remake,
    .group_metadata = fk_group_metadata,
    .assignment = fk_assignment,
    .committed = fk_committed,
    .assign = fk_assign,
    .pause = fk_pause,
    .resume = fk_resume,
    .seek = fk_seek,
};

#endif
