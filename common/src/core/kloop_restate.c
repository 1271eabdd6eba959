/*
 * kloop_restate.c - a replay restates (docs/design.md §5, "A replay restates"; docs/contract.md
 * K§1: "a replayed input is answered as it was the first time, however far its run has moved
 * since"). The one owner of that rule, for every input of every service.
 *
 * An input read again whose offset the ledger's position for the group marks done (and Kafka's
 * commit does not: a group reset to earlier offsets, a Kafka commit that did not happen) was
 * answered before. What the ledger recorded for it decides, not the run's status now:
 *   - a refusal or a dead letter is recorded with its input (nifi_ops.input_refusal, written
 *     before the COMMIT of the transaction that answered it, kloop_position.c): the same answer
 *     is given again (the reply as recorded, or the dead letter with its code and reason; its
 *     event has a name-based id, so it is not written twice) and nothing is applied;
 *   - nothing recorded: it was applied. The rule runs (its conditional writes change nothing)
 *     and its answer goes out, except that a refusal it computes from a run that moved on since
 *     (a validation metric read again after SUCCESS: RUN_STATUS_MISMATCH) is answered REPLAY, with
 *     the rule's code as the notable replay's (ll_replay_outcome, applied in ll_batch_out_push).
 * The decision is the pure table ll_replay_decide (ll/kloop_decide.h). The lookup is one statement
 * per batch that has such inputs, by primary key; a batch without them costs nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kloop_batch.h"
#include "ll/log.h"
#include "ll/pgarray.h"

/* The recorded refusals and dead letters of the listed inputs ($2..$4 side by side), by primary
 * key. */
static const ll_stmt ST_REFUSALS_FIND = {
    "kloop_refusals_find",
    "SELECT r.topic, r.kafka_partition, r.kafka_offset, r.value_digest, r.kind, r.code, r.reply, r.reason"
    " FROM unnest($2::text[], $3::int[], $4::bigint[]) AS k(topic, part, off)"
    " JOIN nifi_ops.input_refusal r ON r.consumer_group = $1 AND r.topic = k.topic"
    " AND r.kafka_partition = k.part AND r.kafka_offset = k.off",
    4};

/* The row of r recording m, or -1. */
static int row_of(const PGresult *r, const lmsg *m)
{
    for (int i = 0; i < PQntuples(r); i++)
        if (strtoll(PQgetvalue(r, i, 2), NULL, 10) == m->offset &&
            strtol(PQgetvalue(r, i, 1), NULL, 10) == m->ps->partition &&
            strcmp(PQgetvalue(r, i, 0), m->ps->topic) == 0)
            return i;
    return -1;
}

/* Answers m as row i of r records (the reply, or the dead letter). 0, or -1 (database). */
static int restate(batch *b, lmsg *m, const PGresult *r, int i)
{
    ll_log_ctx ctx = {m->run[0] ? m->run : NULL, NULL, m->ps->topic, m->ps->partition, m->offset};
    if (strcmp(PQgetvalue(r, i, 4), "DEAD_LETTER") == 0) {
        m->decided = -1;
        ll_log(LL_DEBUG, &ctx, "input_restated", "read again: dead-lettered again (%s), as the first time",
               PQgetvalue(r, i, 5));
        return ll_batch_dead(b, m, m->run, PQgetvalue(r, i, 5), PQgetvalue(r, i, 7)) == W_DONE ? 0 : -1;
    }
    json_error_t jerr;
    json_t *reply = json_loads(PQgetvalue(r, i, 6), 0, &jerr);
    if (!json_is_object(reply)) {
        /* never written so: the rule answers it (as applied before, never REJECTED anew) */
        json_decref(reply);
        ll_log(LL_WARN, &ctx, "refusal_unreadable",
               "the recorded refusal is not a JSON object (%s): answered anew", jerr.text);
        m->replay_step = LL_REPLAY_AS_REPLAY;
        return 0;
    }
    m->decided = -1;
    ll_log(LL_DEBUG, &ctx, "input_restated", "read again: refused again (%s), as the first time",
           PQgetvalue(r, i, 5));
    ll_batch_out_push(b, m, reply, NULL, NULL, m->run);
    return 0;
}

int ll_batch_restate(batch *b)
{
    ll_loop *l = b->l;
    ll_pgarray topics = {0}, parts = {0}, offs = {0};
    for (size_t i = 0; i < b->n_work; i++) {
        lmsg *m = b->work[i];
        m->replay_step = LL_REPLAY_APPLY;
        if (ll_msg_replayed(m)) {
            ll_pgarray_add(&topics, m->ps->topic);
            ll_pgarray_add_ll(&parts, m->ps->partition);
            ll_pgarray_add_ll(&offs, (long long)m->offset);
        }
    }
    int rc = 0;
    if (topics.n > 0) {
        const char *p[4] = {l->group, ll_pgarray_text(&topics), ll_pgarray_text(&parts),
                            ll_pgarray_text(&offs)};
        PGresult *r = ll_batch_tx_begin(b) == 0 ? l->kio->db_exec(&l->db, &ST_REFUSALS_FIND, p) : NULL;
        if (!r) {
            rc = -1;
        } else {
            size_t restated = 0;
            for (size_t i = 0; i < b->n_work && rc == 0; i++) {
                lmsg *m = b->work[i];
                if (!ll_msg_replayed(m))
                    continue;
                int row = row_of(r, m);
                bool same = row >= 0 && strtoll(PQgetvalue(r, row, 3), NULL, 10) == ll_msg_digest(m);
                m->replay_step = (int)ll_replay_decide(true, row >= 0, same);
                if (m->replay_step == LL_REPLAY_RESTATE) {
                    rc = restate(b, m, r, row);
                    restated += m->decided == -1;
                }
            }
            PQclear(r);
            if (rc == 0 && restated > 0)
                ll_log(
                    LL_INFO, NULL, "inputs_restated",
                    "%zu inputs read again were refused or dead-lettered the first time: answered so again, "
                    "nothing applied",
                    restated);
        }
    }
    ll_pgarray_free(&topics);
    ll_pgarray_free(&parts);
    ll_pgarray_free(&offs);
    return rc;
}
