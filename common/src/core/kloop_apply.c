/*
 * kloop_apply.c - one message in the batch's database transaction (kloop_batch.h): decoded,
 * applied under a savepoint by its input's apply function, and what the loop does with the
 * answer: keep and reply, undo and reply, hold its run, or dead-letter it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kloop_batch.h"
#include "ll/kloop_decide.h"
#include "ll/log.h"

/* A dead letter: its event in the open transaction, its record after the commit. */
w_result ll_batch_dead(batch *b, lmsg *m, const char *run_id, const char *code, const char *reason)
{
    if (ll_batch_tx_begin(b) != 0 || ll_loop_dead_letter_event(b->l, m, run_id, code, reason) != 0)
        return W_FAILED;
    ll_batch_out_push(b, m, NULL, code, reason, run_id);
    return W_DONE;
}

/* Undoes the message's part of the transaction: to its savepoint, or the whole transaction
 * (touches_before: the heartbeats asked for before this message, kept). */
int ll_batch_undo(batch *b, size_t touches_before)
{
    b->n_touch = touches_before;
    if (b->use_savepoints)
        return ll_batch_db_cmd(b, "ROLLBACK TO SAVEPOINT m");
    b->in_tx = 0;
    return ll_batch_db_cmd(b, "ROLLBACK");
}

int64_t ll_batch_prereq_wait(const batch *b, const lmsg *m)
{
    return ll_msg_answered_before(m) ? b->l->reapplied_wait_ms : b->l->prereq_wait_ms;
}

/* What an apply function sees of message m (value: its decoded record, borrowed; now in ms). */
ll_msg ll_batch_msg_view(batch *b, const lmsg *m, json_t *value, int64_t now)
{
    ll_loop *l = b->l;
    /* its own clock (held behind its run's first deferral), else its run's on the partition: a
     * message read again after a full queue's pause waited as long as the held ones */
    int64_t wait = ll_batch_prereq_wait(b, m);
    int64_t since = m->defer_since_ms ? m->defer_since_ms : ll_loop_clock_of(m->ps, m->run, wait, now);
    return (ll_msg){.logical = m->io->in->logical,
                    .topic = m->ps->topic,
                    .partition = m->ps->partition,
                    .offset = m->offset,
                    .key = m->run[0] ? m->run : NULL,
                    .value = value,
                    .service = l->service,
                    .wait_expired = since && now - since >= wait,
                    .txn = b};
}

json_t *ll_batch_decode(batch *b, lmsg *m, const char **err)
{
    if (!m->value) {
        *err = "empty message value";
        return NULL;
    }
    if (!m->decoded && !m->decode_err) {
        char why[1024];
        why[0] = '\0';
        json_t *v = NULL;
        b->n_decodes++;
        int rc = ll_decode(&m->io->dopts, m->value, m->len, &v, why, sizeof why);
        if (rc == 0 && v)
            m->decoded = v;
        else if (!(m->decode_err = strdup(why)))
            abort();
        m->decode_wait = rc == LL_DECODE_UNAVAILABLE || rc == LL_DECODE_UNKNOWN_ID ? rc : 0;
        b->n_kept++;
    }
    *err = m->decode_err;
    return m->decoded;
}

void ll_batch_decoded_drop(batch *b, lmsg *m)
{
    if (!m->decoded && !m->decode_err)
        return;
    json_decref(m->decoded);
    free(m->decode_err);
    m->decoded = NULL;
    m->decode_err = NULL;
    m->decode_wait = 0;
    b->n_kept--;
}

ll_loop_fault ll_batch_fault(const batch *b)
{
    const ll_db *db = &b->l->db;
    if (!b->l->kio->db_connected(db) || ll_db_err_state_is_unavailable(db))
        return LL_FAULT_UNAVAILABLE;
    return ll_db_err_is_input(db) ? LL_FAULT_INPUT : LL_FAULT_OTHER;
}

/*
 * A message whose writer schema the registry could not give (docs/design.md §9): unreachable or 5xx, the
 * run is held and retried with backoff (no dead letter: a fault, like a busy database); an id
 * the registry does not know, held like a missing prerequisite and after loop.prerequisite_wait
 * dead-lettered (DECODE_FAILED, naming the id).
 */
static w_result registry_wait(batch *b, lmsg *m, const char *why)
{
    const char *run = m->run[0] ? m->run : NULL;
    if (m->decode_wait == LL_DECODE_UNAVAILABLE) {
        w_result r = ll_batch_hold(b, m, 0, NULL, why);
        ll_batch_decoded_drop(b, m);
        return r;
    }
    ll_msg view = ll_batch_msg_view(b, m, NULL, ll_loop_now_ms());
    w_result r;
    if (view.wait_expired) {
        char err[1024];
        snprintf(err, sizeof err, "writer schema not in the registry after %lld ms: %s",
                 (long long)ll_batch_prereq_wait(b, m), why);
        r = ll_batch_dead(b, m, run, "DECODE_FAILED", err);
    } else {
        r = ll_batch_hold(b, m, 1, NULL, why);
    }
    ll_batch_decoded_drop(b, m);
    return r;
}

/* Applies one message inside the open transaction. */
w_result ll_batch_apply_one(batch *b, lmsg *m)
{
    ll_loop *l = b->l;
    char err[1024];
    if (!m->io)
        return ll_batch_dead(b, m, m->run[0] ? m->run : NULL, "UNKNOWN_TOPIC", "no handler for this topic");
    /* decoded once in this batch (the set-based part may have looked at it), released here: the
     * per-message path is its last use in the batch, whatever the answer */
    const char *why = NULL;
    json_t *value = ll_batch_decode(b, m, &why);
    if (!value && m->decode_wait)
        return registry_wait(b, m, why);
    if (!value) {
        w_result r = ll_batch_dead(b, m, m->run[0] ? m->run : NULL, "DECODE_FAILED", why);
        ll_batch_decoded_drop(b, m); /* the reason is copied into the dead letter */
        return r;
    }
    const char *run_id = json_string_value(json_object_get(value, "runId"));
    char rid[sizeof m->run];
    snprintf(rid, sizeof rid, "%s", run_id ? run_id : (m->run[0] ? m->run : ""));
    const char *pid = json_string_value(json_object_get(value, "partitionId"));
    ll_msg msg = ll_batch_msg_view(b, m, value, ll_loop_now_ms());
    if (ll_batch_tx_begin(b) != 0)
        goto failed;
    if (b->use_savepoints &&
        ll_batch_db_cmd(b, b->savepoints ? "RELEASE SAVEPOINT m; SAVEPOINT m" : "SAVEPOINT m") != 0)
        goto failed;
    b->savepoints += b->use_savepoints;
    b->tx_msgs++;
    ll_apply_out out;
    memset(&out, 0, sizeof out);
    size_t touches = b->n_touch;
    ll_apply d = m->io->in->apply(l->svc, &l->db, &msg, &out);
    /* the decision table (kloop_decide.h): the service's answer and the database's error class */
    ll_loop_step step = ll_loop_decide(d, false, msg.wait_expired, ll_batch_fault(b));
    ll_db_error e = l->db.err; /* the apply's error, kept over the undo */
    if (step == LL_STEP_UNDO_BATCH || (step != LL_STEP_KEEP_REPLY && ll_batch_undo(b, touches) != 0))
        goto failed_out;
    l->db.err = e;
    w_result r = W_DONE;
    switch (step) {
    case LL_STEP_KEEP_REPLY:
    case LL_STEP_UNDO_REPLY:
        if (!msg.wait_expired)
            ll_loop_clock_stop(m->ps, m->run); /* answered: its prerequisite is there */
        ll_batch_out_push(b, m, out.reply, NULL, NULL, rid);
        out.reply = NULL;
        break;
    case LL_STEP_UNDO_HOLD:
        r = ll_batch_hold(b, m, 1, pid, out.reason);
        break;
    case LL_STEP_UNDO_DEAD_PREREQ:
        snprintf(err, sizeof err, "prerequisite not in the ledger after %lld ms (%s): %s",
                 (long long)ll_batch_prereq_wait(b, m),
                 ll_msg_answered_before(m) ? "loop.reapplied_wait: answered before the database lost it"
                                           : "loop.prerequisite_wait",
                 out.reason);
        r = ll_batch_dead(b, m, rid, "PREREQUISITE_TIMEOUT", err);
        break;
    case LL_STEP_UNDO_DEAD:
        r = ll_batch_dead(b, m, rid, out.reason_code[0] ? out.reason_code : "INVALID_MESSAGE", out.reason);
        break;
    case LL_STEP_UNDO_DEAD_LEDGER:
        snprintf(err, sizeof err, "ledger refused the values (SQLSTATE %s %s): %s", e.sqlstate, e.constraint,
                 e.message);
        r = ll_batch_dead(b, m, rid, "LEDGER_REJECTED", err);
        break;
    case LL_STEP_UNDO_RETRY: {
        /* a bounded wait ran out (lock or statement timeout), a deadlock or serialization
         * failure, or an SQL error: the run waits and is tried again (docs/design.md §3) */
        snprintf(err, sizeof err, "%s %s", e.sqlstate, e.message);
        ll_log_ctx ctx = {rid[0] ? rid : NULL, pid, m->ps->topic, m->ps->partition, m->offset};
        int busy = ll_db_err_is_busy(&l->db) || ll_db_err_is_retryable(&l->db);
        ll_log(busy ? LL_WARN : LL_ERROR, &ctx, busy ? "db_busy" : "db_error", "holding the run: %s", err);
        r = ll_batch_hold(b, m, 0, pid, err);
        break;
    }
    case LL_STEP_UNDO_BATCH: /* handled above */
    case LL_STEP_BULK_KEEP:  /* bulk steps: never for one message */
    case LL_STEP_BULK_UNDO:
        goto failed_out;
    }
    json_decref(out.reply);
    ll_batch_decoded_drop(b, m);
    return r;
failed_out:
    json_decref(out.reply);
failed:
    ll_batch_decoded_drop(b, m);
    return W_FAILED;
}
