/*
 * position.c - the consumer group's read positions kept in the ledger (docs/design.md §5,
 * "After the database went back in time", and §4; schemas/sql/0009_consumer_positions.sql).
 *
 * Written: every database transaction of a batch records, for each Kafka partition whose
 * messages it answered, the position the partition would have if the transaction's results were
 * already marked done: the first offset not done and the done offsets above it (the Kafka
 * commit's offset and metadata). It goes in the one statement the transaction already runs before
 * its COMMIT (the run heartbeats), so the hot path gains no round trip. A held message is not done
 * and keeps the position below it, as it keeps the Kafka commit.
 *
 * Every write is a compare-and-set (issue 39; docs/design.md §5, "Every write checks the ledger it
 * last saw"): a position row carries the write token of its last writer (a random UUID), and this
 * instance writes a partition's position only where the row still carries the token it last read
 * or wrote itself (part_position.write_token; no row where it saw none). Every write goes through
 * write_positions (the batch's statement before its COMMIT, and the statement of its own after a
 * batch that answered nothing in a transaction); a write that matches fewer rows than it names
 * fails, the batch is undone and the loop rewinds, whose merge reads the ledger as it is now. So a
 * database that went back in time is found at the first write after it, whatever the path to it
 * (a new connection, or a pooler that reconnected behind the same one), and an instance the group
 * evicted cannot write its older position over the new owner's: the merge fences (a new token on
 * the rows of the partitions it reads). A partition that receives nothing is checked every
 * loop.position_check_interval (ll_loop_positions_check), so its loss is found without new input.
 *
 * Read: on every assignment and every rewind, after the Kafka commits are loaded, each
 * partition's tracker becomes the intersection of Kafka's and the ledger's: it starts at the
 * lower of the two offsets, and an offset done for one of them only is read and applied again. The
 * ledger behind Kafka is a database that lost committed transactions (a failover to an
 * asynchronous standby, a point-in-time recovery): those messages are applied again, logged
 * (`ledger_behind_kafka`, loadledger_reread_offsets_total{behind="ledger"}) and recorded in
 * nifi_ops.position_rewind. Their answers are not given again: each one's reply or dead letter was
 * committed with its offset, so NiFi has it, and a second answer computed from a ledger that other
 * topics have moved on meanwhile can say something else (a duplicate claim answered REPLAY while its
 * partition ran, read again after the partition's chunks: RUN_STATUS_MISMATCH). Kafka's done set is
 * kept for that (part_state.answered) until the next merge. Kafka behind the ledger is a Kafka
 * commit that did not happen (a crash between the two commits): those answers were never visible and
 * are given now, as replays (behind="kafka"). docs/design.md §5.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "partition.h"
#include "position.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/pgarray.h"

/* The run heartbeats asked for (ll_msg_touch_run) and the positions, in one statement: each
 * position written only where its row still carries the token this instance expects ($7: "" = no
 * row), with the new token $8. Answers one row: how many positions were written (fewer than named:
 * the ledger is not the one this instance last saw). The UPDATE of the runs in WITH runs to
 * completion although nothing reads it (PostgreSQL, "Data-Modifying Statements in WITH"). */
static const ll_stmt ST_PRECOMMIT = {
    "kloop_precommit",
    "WITH touched AS (UPDATE nifi_ops.load_run SET heartbeat_at = clock_timestamp()"
    " WHERE run_id = ANY($1::uuid[])),"
    " k AS (SELECT * FROM unnest($3::text[], $4::int[], $5::bigint[], $6::text[], $7::text[])"
    " AS k(topic, part, next, done, expect)),"
    " moved AS (UPDATE nifi_ops.consumer_position c SET next_offset = k.next, done_above = k.done,"
    " updated_at = clock_timestamp(), write_token = $8::uuid FROM k"
    " WHERE c.consumer_group = $2 AND c.topic = k.topic AND c.kafka_partition = k.part"
    " AND c.write_token = NULLIF(k.expect, '')::uuid RETURNING 1),"
    " added AS (INSERT INTO nifi_ops.consumer_position (consumer_group, topic, kafka_partition, next_offset,"
    " done_above, updated_at, write_token) SELECT $2, k.topic, k.part, k.next, k.done, clock_timestamp(),"
    " $8::uuid FROM k WHERE k.expect = '' ON CONFLICT DO NOTHING RETURNING 1)"
    " SELECT (SELECT count(*) FROM moved) + (SELECT count(*) FROM added)",
    8};

static const ll_stmt ST_TOUCH_RUNS = {
    "kloop_touch_runs",
    "UPDATE nifi_ops.load_run SET heartbeat_at = clock_timestamp() WHERE run_id = ANY($1::uuid[])", 1};

/* The refusals and dead letters of the transaction, each with its input (batch.c; migration
 * 0013): a replay restates them. Written once, in the transaction that answered them ("" = NULL). */
static const ll_stmt ST_REFUSALS_RECORD = {
    "kloop_refusals_record",
    "INSERT INTO nifi_ops.input_refusal (consumer_group, topic, kafka_partition, kafka_offset, value_digest, "
    "kind,"
    " code, reply, reason) SELECT $1, k.topic, k.part, k.off, k.digest, k.kind, k.code, NULLIF(k.reply, ''),"
    " NULLIF(k.reason, '') FROM unnest($2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::text[], "
    "$7::text[],"
    " $8::text[], $9::text[]) AS k(topic, part, off, digest, kind, code, reply, reason) ON CONFLICT DO "
    "NOTHING",
    9};

/* The most bytes of a recorded dead letter's reason (the column's bound, migration 0013); a longer
 * one (never written by the loop's own reasons, ≤ 1 KiB) is recorded without it. */
#define LL_REFUSAL_REASON_MAX 65536

/* The merge's read, and its fence: the positions of the listed partitions, each row given the
 * token $4 (an instance that still expects the row's older token is refused its next write). */
static const ll_stmt ST_POSITIONS = {
    "kloop_positions",
    "UPDATE nifi_ops.consumer_position c SET write_token = $4::uuid"
    " FROM unnest($2::text[], $3::int[]) AS k(topic, part)"
    " WHERE c.consumer_group = $1 AND c.topic = k.topic AND c.kafka_partition = k.part"
    " RETURNING c.topic, c.kafka_partition, c.next_offset, c.done_above",
    4};

/* The idle check: how many of the listed partitions' rows do not carry the token this instance
 * expects ("" = no row). Reads one primary-key row per partition. */
static const ll_stmt ST_CHECK = {
    "kloop_position_check",
    "SELECT count(*) FROM unnest($2::text[], $3::int[], $4::text[]) AS k(topic, part, expect)"
    " LEFT JOIN nifi_ops.consumer_position c ON c.consumer_group = $1 AND c.topic = k.topic"
    " AND c.kafka_partition = k.part WHERE c.write_token IS DISTINCT FROM NULLIF(k.expect, '')::uuid",
    4};

static const ll_stmt ST_REWIND = {"kloop_position_rewind",
                                  "INSERT INTO nifi_ops.position_rewind (consumer_group, topic, "
                                  "kafka_partition, from_offset, to_offset, offsets)"
                                  " VALUES ($1, $2, $3::int, $4::bigint, $5::bigint, $6::bigint)",
                                  6};

/* Records that the ledger was found behind Kafka on ps: offsets [from, to) read again (the
 * statement commits on its own: the loop is between batches). 0, or -1. */
static int record_rewind(ll_loop *l, const part_state *ps, int64_t from, int64_t to, int64_t offsets)
{
    char part[16], f[24], t[24], n[24];
    snprintf(part, sizeof part, "%d", (int)ll_loop_part_no(ps));
    snprintf(f, sizeof f, "%lld", (long long)from);
    snprintf(t, sizeof t, "%lld", (long long)to);
    snprintf(n, sizeof n, "%lld", (long long)offsets);
    const char *p[6] = {l->group, ll_loop_part_topic(ps), part, f, t, n};
    PGresult *r = l->kio->db_exec(&l->db, &ST_REWIND, p);
    if (!r)
        return -1;
    PQclear(r);
    return 0;
}

/* The positions of one statement, as its array parameters, with the partitions they are of (the
 * tokens of those written are set after it). Zero-initialise; positions_free. */
typedef struct positions {
    ll_pgarray topics, parts, next, done, expect;
    part_state **ps; /* w->topics.n of them (owned array, borrowed states) */
    size_t cap;
} positions;

static void positions_free(positions *w)
{
    ll_pgarray_free(&w->topics);
    ll_pgarray_free(&w->parts);
    ll_pgarray_free(&w->next);
    ll_pgarray_free(&w->done);
    ll_pgarray_free(&w->expect);
    free(w->ps);
}

/* A fresh write token (a random UUID's text) into tok[37]. */
static void new_token(char tok[37])
{
    uuid_t u;
    uuid_generate_random(u);
    uuid_unparse_lower(u, tok);
}

/* Records in l->db.err that the ledger is not the one this instance last saw: `moved` of `named`
 * partitions' rows did not carry the token expected (what) and logs it once. */
static void position_conflict(ll_loop *l, const char *what, long long moved, long long named)
{
    snprintf(l->db.err.sqlstate, sizeof l->db.err.sqlstate, "LL001");
    snprintf(l->db.err.message, sizeof l->db.err.message,
             "%s: the ledger's position of %lld of %lld partitions is not the one this instance last read or"
             " wrote (the database went back in time, or another instance took the partition)",
             what, moved, named);
    ll_log(LL_WARN, NULL, "position_conflict",
           "%s: the ledger's positions are merged again before anything more is applied", l->db.err.message);
    ll_obs_position_conflict();
}

/* Writes the heartbeats of runs (an array literal) and the positions w in one statement
 * (ST_PRECOMMIT), each by compare-and-set on the token its partition expects; only the heartbeats
 * when there is no position. The one write of positions (every path comes here). 0 (each
 * partition's token now the new one), or -1 with l->db.err: the statement failed, or some row did
 * not carry its expected token (LL001, position_conflict; inside a transaction, nothing of it may
 * commit: the caller undoes it and the loop rewinds). */
static int write_positions(ll_loop *l, const char *runs, positions *w)
{
    if (w->topics.n == 0) {
        const char *p[1] = {runs};
        PGresult *r = l->kio->db_exec(&l->db, &ST_TOUCH_RUNS, p);
        PQclear(r);
        return r ? 0 : -1;
    }
    char tok[37];
    new_token(tok);
    const char *p[8] = {runs,
                        l->group,
                        ll_pgarray_text(&w->topics),
                        ll_pgarray_text(&w->parts),
                        ll_pgarray_text(&w->next),
                        ll_pgarray_text(&w->done),
                        ll_pgarray_text(&w->expect),
                        tok};
    PGresult *r = l->kio->db_exec(&l->db, &ST_PRECOMMIT, p);
    if (!r)
        return -1;
    long long written = PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
    PQclear(r);
    if (written != (long long)w->topics.n) {
        position_conflict(l, "position write", (long long)w->topics.n - written, (long long)w->topics.n);
        return -1;
    }
    for (size_t i = 0; i < w->topics.n; i++)
        memcpy(w->ps[i]->pos.write_token, tok, sizeof tok);
    return 0;
}

/* Adds the partition ps's position after this transaction: its tracker with the batch's earlier
 * marks and this transaction's results done, and the ledger's own done offsets of a replay. */
static void add_position(const ll_precommit *pc, part_state *ps, positions *w)
{
    ll_offtrack t;
    ll_offtrack_init(&t, 0);
    ll_loop_part_done_view(ps, &t);
    int full = 0;
    for (size_t i = 0; i < pc->n_marks; i++)
        if (pc->marks[i].ps == ps)
            full |= ll_offtrack_done(&t, pc->marks[i].offset) != 0;
    for (size_t i = 0; i < pc->n_outs; i++)
        if (pc->outs[i].m->ps == ps)
            full |= ll_offtrack_done(&t, pc->outs[i].m->offset) != 0;
    /* what the ledger answered before and Kafka's commit does not hold (a group reset): kept in
     * the ledger's position until it is read again, so that a replay interrupted (a rewind, a
     * restart) still knows which inputs restate their first answer (batch.c) */
    full |= ll_loop_part_add_replayed(ps, &t) != 0;
    char md[LL_OFFTRACK_METADATA_MAX];
    bool lossy = false;
    int n = ll_offtrack_metadata(&t, md, sizeof md, &lossy);
    if (n < 0 || full) {
        /* cannot happen within the checked limits; what is written stays behind the ledger */
        md[0] = '\0';
        t.base = ll_loop_part_base(ps);
    }
    (void)lossy; /* a lossy text names fewer offsets: behind the ledger, never ahead */
    if (w->topics.n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 8;
        part_state **a = realloc(w->ps, w->cap * sizeof *a);
        if (!a)
            abort();
        w->ps = a;
    }
    w->ps[w->topics.n] = ps;
    ll_pgarray_add(&w->topics, ll_loop_part_topic(ps));
    ll_pgarray_add_ll(&w->parts, ll_loop_part_no(ps));
    ll_pgarray_add_ll(&w->next, (long long)t.base);
    ll_pgarray_add(&w->done, md);
    ll_pgarray_add(&w->expect, ps->pos.write_token);
    ll_offtrack_free(&t);
}

/* Adds the position of every partition changed in this batch that no statement of the batch
 * wrote yet (markers seen, done offsets skipped), each written by this batch from now on. */
static void add_unwritten(ll_loop *l, const ll_precommit *pc, positions *w)
{
    int64_t bn = ll_loop_batch_no(l);
    part_state **changed = NULL;
    size_t n = ll_loop_parts_changed(l, bn - 1, bn, &changed);
    for (size_t i = 0; i < n; i++)
        if (changed[i]->pos.written_batch != bn) {
            changed[i]->pos.written_batch = bn;
            add_position(pc, changed[i], w);
        }
    free(changed);
}

/* Records the transaction's refusals and dead letters (not those restated: recorded already).
 * 0, or -1 with l->db.err. */
static int record_refusals(ll_loop *l, const ll_precommit *pc)
{
    ll_pgarray a[8] = {{0}};
    for (size_t i = 0; i < pc->n_outs; i++) {
        const out_item *o = &pc->outs[i];
        const lmsg *m = o->m;
        if (!ll_out_recorded(o))
            continue;
        const char *reason =
            !o->is_reply && o->reason && strlen(o->reason) <= LL_REFUSAL_REASON_MAX ? o->reason : "";
        const char *code = o->is_reply ? o->reply_code : o->code;
        ll_pgarray_add(&a[0], ll_loop_part_topic(m->ps));
        ll_pgarray_add_ll(&a[1], ll_loop_part_no(m->ps));
        ll_pgarray_add_ll(&a[2], (long long)m->offset);
        ll_pgarray_add_ll(&a[3], (long long)ll_msg_digest(m));
        ll_pgarray_add(&a[4], o->is_reply ? "REPLY" : "DEAD_LETTER");
        ll_pgarray_add(&a[5], code[0] ? code : "UNKNOWN");
        ll_pgarray_add(&a[6], o->is_reply ? o->refusal : "");
        ll_pgarray_add(&a[7], reason);
    }
    int rc = 0;
    if (a[0].n > 0) {
        const char *p[9] = {l->group};
        for (int k = 0; k < 8; k++)
            p[k + 1] = ll_pgarray_text(&a[k]);
        PGresult *r = l->kio->db_exec(&l->db, &ST_REFUSALS_RECORD, p);
        rc = r ? 0 : -1;
        PQclear(r);
    }
    for (int k = 0; k < 8; k++)
        ll_pgarray_free(&a[k]);
    return rc;
}

int ll_positions_precommit(ll_loop *l, const ll_precommit *pc)
{
    if (record_refusals(l, pc) != 0)
        return -1;
    ll_pgarray runs = {0};
    positions w = {0};
    for (size_t i = 0; i < pc->n_touch; i++)
        ll_pgarray_add(&runs, pc->touch[i]);
    /* the partitions this transaction answered on, each once (an earlier transaction of the
     * batch may have written one: its position has moved since), and those changed in this
     * batch whose position no transaction of it wrote yet (markers seen, done offsets skipped) */
    for (size_t i = 0; i < pc->n_outs; i++) {
        part_state *ps = pc->outs[i].m->ps;
        int again = 0;
        for (size_t j = 0; j < i && !again; j++)
            again = pc->outs[j].m->ps == ps;
        if (!again) {
            ps->pos.written_batch = ll_loop_batch_no(l);
            add_position(pc, ps, &w);
        }
    }
    add_unwritten(l, pc, &w);
    int rc = w.topics.n > 0 || runs.n > 0 ? write_positions(l, ll_pgarray_text(&runs), &w) : 0;
    ll_pgarray_free(&runs);
    positions_free(&w);
    return rc;
}

int ll_loop_positions_merge(ll_loop *l, rd_kafka_topic_partition_list_t *c)
{
    if (c->cnt == 0)
        return 0;
    ll_pgarray topics = {0}, parts = {0};
    for (int i = 0; i < c->cnt; i++) {
        ll_pgarray_add(&topics, c->elems[i].topic);
        ll_pgarray_add_ll(&parts, c->elems[i].partition);
    }
    char tok[37];
    new_token(tok);
    const char *p[4] = {l->group, ll_pgarray_text(&topics), ll_pgarray_text(&parts), tok};
    PGresult *r = l->kio->db_ensure(&l->db) == LL_DB_OK ? l->kio->db_exec(&l->db, &ST_POSITIONS, p) : NULL;
    ll_pgarray_free(&topics);
    ll_pgarray_free(&parts);
    if (!r)
        return -1;
    ll_offtrack ledger;
    ll_offtrack_init(&ledger, 0);
    int rc = 0;
    for (int i = 0; i < c->cnt && rc == 0; i++) {
        rd_kafka_topic_partition_t *e = &c->elems[i];
        int row = -1;
        for (int k = 0; k < PQntuples(r) && row < 0; k++)
            if (strcmp(PQgetvalue(r, k, 0), e->topic) == 0 &&
                strtol(PQgetvalue(r, k, 1), NULL, 10) == e->partition)
                row = k;
        int64_t kafka_base = e->offset >= 0 ? e->offset : -1;
        part_state *ps = ll_loop_part(l, e->topic, e->partition);
        /* what this instance's next write of the position expects: the row as fenced now */
        snprintf(ps->pos.write_token, sizeof ps->pos.write_token, "%s", row >= 0 ? tok : "");
        ll_part_merged mg;
        if (row < 0 && (kafka_base < 0 || l->position_missing_kafka)) {
            /* nothing anywhere: from the log's start (auto.offset.reset is error, partition.c); or the
             * first start after the upgrade to 0009: Kafka's commit */
            (void)ll_loop_part_merge(l, ps, NULL, false, &mg);
            if (kafka_base < 0)
                e->offset = RD_KAFKA_OFFSET_BEGINNING;
            continue;
        }
        int64_t next = row >= 0 ? strtoll(PQgetvalue(r, row, 2), NULL, 10) : 0;
        ll_log_ctx ctx = {NULL, NULL, e->topic, e->partition, next};
        /* no row: the ledger has applied nothing of the partition (its first position was lost
         * with the database's last transactions, or the database is new): from the start */
        if (row < 0)
            ll_offtrack_reset(&ledger, 0);
        else if (ll_offtrack_load(&ledger, next, PQgetvalue(r, row, 3)) != 0)
            ll_log(LL_WARN, &ctx, "position_ignored",
                   "the ledger's done offsets above %lld are not understood: read again from there",
                   (long long)next);
        e->offset = ll_loop_part_merge(l, ps, &ledger, kafka_base < 0, &mg);
        int64_t kafka_only = mg.kafka_only, ledger_only = mg.ledger_only;
        if (kafka_only > 0) {
            ll_log(
                LL_ERROR, &ctx, "ledger_behind_kafka",
                "the ledger lost %lld offsets that Kafka's commit (at %lld) says were applied: the database "
                "went back in time (a failover to an asynchronous standby, a restore); reading again from "
                "%lld and applying them again, without a second answer (NiFi has theirs)",
                (long long)kafka_only, (long long)kafka_base, (long long)e->offset);
            ll_obs_reread("ledger", kafka_only);
            if (record_rewind(l, ps, e->offset, mg.kafka_end, kafka_only) != 0)
                rc = -1;
        }
        if (ledger_only > 0) {
            ll_log(
                LL_INFO, &ctx, "kafka_behind_ledger",
                "%lld offsets applied in the ledger were not committed to Kafka (a group reset, or a Kafka "
                "commit that did not happen): each one read again restates its first answer",
                (long long)ledger_only);
            ll_obs_reread("kafka", ledger_only);
        }
    }
    ll_offtrack_free(&ledger);
    PQclear(r);
    return rc;
}

int ll_loop_positions_check(ll_loop *l)
{
    positions w = {0};
    for (size_t i = 0; i < ll_loop_n_parts(l); i++) {
        const part_state *ps = ll_loop_part_at(l, i);
        ll_pgarray_add(&w.topics, ll_loop_part_topic(ps));
        ll_pgarray_add_ll(&w.parts, ll_loop_part_no(ps));
        ll_pgarray_add(&w.expect, ps->pos.write_token);
    }
    int rc = 0;
    if (w.topics.n > 0) {
        const char *p[4] = {l->group, ll_pgarray_text(&w.topics), ll_pgarray_text(&w.parts),
                            ll_pgarray_text(&w.expect)};
        PGresult *r = l->kio->db_ensure(&l->db) == LL_DB_OK ? l->kio->db_exec(&l->db, &ST_CHECK, p) : NULL;
        if (!r) {
            rc = -1;
        } else {
            long long moved = PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
            PQclear(r);
            if (moved > 0) {
                position_conflict(l, "position check", moved, (long long)w.topics.n);
                rc = 1;
            }
        }
    }
    positions_free(&w);
    return rc;
}

int ll_loop_positions_flush(ll_loop *l)
{
    const ll_precommit none = {0}; /* no transaction: the trackers as they are */
    positions w = {0};
    add_unwritten(l, &none, &w);
    int rc = 0;
    if (w.topics.n > 0 && (l->kio->db_ensure(&l->db) != LL_DB_OK || write_positions(l, "{}", &w) != 0)) {
        ll_log(LL_WARN, NULL, "position_not_written", "%s %s (the ledger's positions stay behind)",
               l->db.err.sqlstate, l->db.err.message);
        rc = -1;
    }
    positions_free(&w);
    return rc;
}
