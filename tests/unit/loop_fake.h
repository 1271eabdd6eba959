/*
 * loop_fake.h - the loop's unit tests' scripted service and driver (test_loop_*.c), over
 * the scripted world of loop_fake_io.h: the input's apply and set-based apply functions (their
 * answers from the test's script, their decisions recorded), the loop's set-up with the tests'
 * settings, one iteration of the run loop (recovery step, poll, turn), and what was answered.
 */
#ifndef KLOOP_FAKE_H
#define KLOOP_FAKE_H

#include "loop_fake_io.h"

/* ---- the service: apply and set-based apply --------------------------------------------------- */

static inline void fk_record(const ll_msg *m, int bulk, ll_apply a)
{
    assert_true(F.n_calls < FK_CALLMAX);
    F.calls[F.n_calls++] = (fk_call){m->partition, m->offset,
                                     (int)json_integer_value(json_object_get(m->value, "seq")), bulk, a};
}

static inline json_t *fk_reply(const ll_msg *m, const char *outcome)
{
    return ll_reply_new(m, m->key, NULL, outcome, NULL, NULL, "RUNNING", NULL);
}

static inline ll_apply fk_apply(void *svc, ll_db *db, const ll_msg *m, ll_apply_out *out)
{
    ll_apply a = F.decide ? F.decide(m) : LL_APPLY_COMMIT;
    fk_record(m, 0, a);
    switch (a) {
    case LL_APPLY_COMMIT:
        /* a reply that does not fit its schema (no outcome, no source coordinates) when scripted */
        out->reply =
            F.bad_reply_seq && (int)json_integer_value(json_object_get(m->value, "seq")) == F.bad_reply_seq
                ? json_pack("{s:s}", "runId", m->key)
                : fk_reply(m, "ACCEPTED");
        break;
    case LL_APPLY_ROLLBACK:
        out->reply = fk_reply(m, "REJECTED");
        break;
    case LL_APPLY_DEFER:
        snprintf(out->reason, sizeof out->reason, "prerequisite not there yet");
        break;
    case LL_APPLY_DEAD:
        snprintf(out->reason, sizeof out->reason, "scripted dead letter");
        snprintf(out->reason_code, sizeof out->reason_code, "INVALID_FIELD");
        break;
    case LL_APPLY_DB:
        fk_db_fail(db, F.apply_state);
        break;
    }
    return a;
}

static inline ll_apply fk_bulk(void *svc, ll_db *db, const ll_msg *const *msgs, size_t n, ll_bulk_out *outs)
{
    int call = ++F.bulk_calls;
    int fail = call == F.bulk_fail_call;
    for (size_t i = 0; i < n; i++) {
        int d = F.bulk_decide ? F.bulk_decide(msgs[i], call) : FK_LEAVE;
        if (d == FK_DECIDE) {
            outs[i].decided = true;
            if (!F.bulk_no_reply)
                ll_bulk_reply(&outs[i], fk_reply(msgs[i], "ACCEPTED"));
            if (!fail && !F.bulk_no_reply)
                fk_record(msgs[i], call, LL_APPLY_COMMIT);
        } else {
            outs[i].retry = d == FK_LEAVE_RETRY;
        }
    }
    if (fail) {
        fk_db_fail(db, F.bulk_state);
        return LL_APPLY_DB;
    }
    return LL_APPLY_COMMIT;
}

/* The seq field of a fake input's value (the tests' own numbering of inputs). */
static inline int seq_of(const ll_msg *m)
{
    return (int)json_integer_value(json_object_get(m->value, "seq"));
}

/* seq 1 waits for its prerequisite until F.prereq (a run held, then released). */
static inline ll_apply decide_prereq(const ll_msg *m)
{
    return seq_of(m) == 1 && !F.prereq ? LL_APPLY_DEFER : LL_APPLY_COMMIT;
}

static const ll_input FK_INPUT = {"kin", "kloop_in.avsc", "kout", "kloop_reply.avsc", fk_apply, NULL};
static const ll_input FK_INPUT_BULK = {"kin", "kloop_in.avsc", "kout", "kloop_reply.avsc", fk_apply, fk_bulk};

/* ---- set-up ----------------------------------------------------------------------------------- */

/* A loop over one input (bulk: with the set-based apply) and settings kv (key, value pairs, NULL-ended)
 * on top of the tests' own: Kafka commits on the calling thread, the test schemas. */
static inline void fk_open(int bulk, const char *const *kv)
{
    char err[512];
    const char *data = getenv("LL_TEST_DATA");
    assert_non_null(data);
    ll_log_init("kloop-test", LL_ERROR);
    setenv("LOADLEDGER_DB__CONNINFO", "host=/nonexistent", 1);
    F.cfg = ll_config_load(NULL, LL_LOOP_CONFIG_KEYS, LL_ALL_TOPICS, err, sizeof err);
    assert_non_null(F.cfg);
    ll_config_set(F.cfg, "schema.dir", data);
    ll_config_set(F.cfg, "loop.overlap_commit", "false");
    for (size_t i = 0; kv && kv[i]; i += 2)
        ll_config_set(F.cfg, kv[i], kv[i + 1]);
    char path[1024];
    snprintf(path, sizeof path, "%s/kloop_reply.avsc", data);
    assert_non_null(F.reply_schema = ll_schema_from_file(path, err, sizeof err));
    snprintf(path, sizeof path, "%s/kloop_in.avsc", data);
    assert_non_null(F.in_schema = ll_schema_from_file(path, err, sizeof err));
    F.kc = rd_kafka_topic_partition_list_new(FK_NPART);
    F.conn_ok = 1;
    snprintf(F.apply_state, sizeof F.apply_state, "08006");
    snprintf(F.bulk_state, sizeof F.bulk_state, "40001");
    pthread_mutex_init(&F.mu, NULL);
    pthread_cond_init(&F.cv, NULL);
    F.l = ll_loop_new_io("kloop-test", F.cfg, bulk ? &FK_INPUT_BULK : &FK_INPUT, 1, NULL, &FK_IO, err,
                         sizeof err);
    if (!F.l)
        fail_msg("ll_loop_new_io: %s", err);
}

static inline int fk_teardown(void **state)
{
    (void)state;
    if (F.l) {
        fk_gate_set(0, 1);
        ll_loop_commit_wait(F.l);
        ll_loop_free(F.l);
    }
    ll_config_free(F.cfg);
    ll_schema_free(F.reply_schema);
    ll_schema_free(F.in_schema);
    for (int p = 0; p < FK_NPART; p++)
        for (long long i = 0; i < F.log_n[p]; i++)
            free(F.log[p][i].val);
    rd_kafka_topic_partition_list_t **lists[] = {&F.asg, &F.assigned, &F.sought, &F.kc, &F.pend, &F.sent};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++)
        fk_list_set(lists[i], NULL);
    pthread_mutex_destroy(&F.mu);
    pthread_cond_destroy(&F.cv);
    memset(&F, 0, sizeof F);
    return 0;
}

/* ---- driving the loop ------------------------------------------------------------------------- */

/* The group assigns partitions 0..n-1 (eager: offsets unset). */
static inline void fk_assign_parts(int n)
{
    rd_kafka_topic_partition_list_t *p = rd_kafka_topic_partition_list_new(n);
    for (int i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(p, FK_TOPIC, i);
    ll_loop_rebalance_cb(NULL, RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS, p, F.l);
    rd_kafka_topic_partition_list_destroy(p);
}

/* The group takes the assignment away. */
static inline void fk_revoke(void)
{
    rd_kafka_topic_partition_list_t *p =
        F.asg ? rd_kafka_topic_partition_list_copy(F.asg) : rd_kafka_topic_partition_list_new(0);
    ll_loop_rebalance_cb(NULL, RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS, p, F.l);
    rd_kafka_topic_partition_list_destroy(p);
}

/* A poll of at most max messages from the assigned partitions that are not paused, at their
 * fetch positions, into ms (the structs) and polled (the batch). Returns the messages polled. */
static inline size_t fk_poll(rd_kafka_message_t *ms, rd_kafka_message_t **polled, size_t max)
{
    size_t n = 0;
    for (int p = 0; p < FK_NPART && n < max; p++) {
        if (!fk_find(F.asg, p) || F.paused[p])
            continue;
        for (; F.fetch_pos[p] < F.log_n[p] && n < max; F.fetch_pos[p]++) {
            fk_entry *e = &F.log[p][F.fetch_pos[p]];
            rd_kafka_message_t *m = &ms[n];
            memset(m, 0, sizeof *m);
            m->rkt = (rd_kafka_topic_t *)(void *)&F; /* a cookie: fk_msg_topic names the topic */
            m->partition = p;
            m->offset = F.fetch_pos[p];
            m->key = e->run;
            m->key_len = strlen(e->run);
            m->payload = e->val;
            m->len = e->len;
            polled[n++] = m;
        }
    }
    return n;
}

/* One iteration of ll_loop_run: the recovery step, a poll of at most max messages, the turn.
 * Returns the messages polled. */
static inline size_t fk_step(size_t max)
{
    int recovering = ll_loop_recover_step(F.l);
    unsigned gen = F.l->rebalance_gen;
    rd_kafka_message_t *ms = calloc(max ? max : 1, sizeof *ms);
    rd_kafka_message_t **polled = calloc(max ? max : 1, sizeof *polled);
    size_t n = fk_poll(ms, polled, max);
    ll_loop_turn(F.l, recovering, gen, polled, n);
    free(polled);
    free(ms);
    return n;
}

/* internal: every held message's retry and the recovery are due now (instead of waiting). */
static inline void fk_make_due(void)
{
    for (size_t i = 0; i < F.l->n_parts; i++)
        for (size_t k = 0; k < F.l->parts[i]->n_held; k++)
            F.l->parts[i]->held[k]->retry_at_ms = 0;
    F.l->rec.at_ms = 0;
}

/* internal: held messages on partition part. */
static inline size_t fk_held(int part)
{
    for (size_t i = 0; i < F.l->n_parts; i++)
        if (F.l->parts[i]->partition == part)
            return F.l->parts[i]->n_held;
    return 0;
}

/* internal: the loop's recovery state (ll_recovery): a rewind owed (alone, or after a new
 * producer), a new producer owed, the loop's end owed (fenced). */
static inline int fk_rewind_owed(void)
{
    return F.l->rec.owed == LL_RECOVERY_REWIND || F.l->rec.owed == LL_RECOVERY_PRODUCER;
}
static inline int fk_producer_owed(void)
{
    return F.l->rec.owed == LL_RECOVERY_PRODUCER;
}
static inline int fk_exit_owed(void)
{
    return F.l->rec.owed == LL_RECOVERY_EXIT;
}

/* internal: a recovery is owed (a rewind, or a new producer). */
static inline int fk_recovery_owed(void)
{
    return fk_rewind_owed();
}

/* Steps (making held retries and recoveries due) until nothing is polled, held or owed; at most
 * rounds steps. Returns the steps taken. */
static inline int fk_run(size_t max, int rounds)
{
    int i = 0;
    for (; i < rounds; i++) {
        fk_make_due();
        size_t held = 0;
        for (int p = 0; p < FK_NPART; p++)
            held += fk_held(p);
        if (fk_step(max) == 0 && held == 0 && !fk_recovery_owed() && !ll_loop_commit_in_flight(F.l))
            break;
    }
    return i;
}

/* Visible answers (replies and dead letters of committed Kafka transactions) to (part, off). */
static inline int fk_answers(int part, long long off)
{
    int n = 0;
    for (size_t i = 0; i < F.n_vis; i++)
        n += F.vis[i].part == part && F.vis[i].off == off;
    return n;
}

/* Every offset of partition part's log in [from, to) answered exactly once. */
static inline void fk_assert_answered_once(int part, long long from, long long to)
{
    for (long long o = from; o < to; o++)
        if (fk_answers(part, o) != 1)
            fail_msg("partition %d offset %lld answered %d times", part, o, fk_answers(part, o));
}

/* Apply decisions that stood for (part, off): per message COMMIT/ROLLBACK/DEAD, and set-based. */
static inline int fk_decisions(int part, long long off)
{
    int n = 0;
    for (size_t i = 0; i < F.n_calls; i++)
        n += F.calls[i].part == part && F.calls[i].off == off &&
             (F.calls[i].bulk > 0 || F.calls[i].answer == LL_APPLY_COMMIT);
    return n;
}

/* The offset last sent for part (-1: none sent), its metadata into md (mdlen bytes). */
static inline long long fk_sent(int part, char *md, size_t mdlen)
{
    rd_kafka_topic_partition_t *s = fk_find(F.sent, part);
    if (md) {
        md[0] = '\0';
        if (s && s->metadata && s->metadata_size < mdlen) {
            memcpy(md, s->metadata, s->metadata_size);
            md[s->metadata_size] = '\0';
        }
    }
    return s ? s->offset : -1;
}

/* Kafka's committed offset of part (-1: none). */
static inline long long fk_kafka_committed(int part)
{
    rd_kafka_topic_partition_t *c = fk_find(F.kc, part);
    return c ? c->offset : -1;
}

#endif
