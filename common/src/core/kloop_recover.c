/*
 * kloop_recover.c - the loop's recovery on the Kafka side (kloop_int.h): aborting the transaction,
 * rewinding to the committed offsets with their done-offset metadata, and a broken producer
 * recreated in the same process.
 *
 * Error classes, where they arise (kafka-edition.md §3.4, docs/design.md §3): an abortable error
 * aborts the Kafka transaction and rewinds to the committed offsets; a fatal producer error
 * recreates the producer (same transactional.id: its init_transactions settles the open
 * transaction) and then rewinds; fenced or unauthorised ends the process (exit 2). A rewind that
 * cannot reach the broker keeps the assignment paused and is retried with backoff, while the
 * consumer is still polled so that the group keeps this member.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kloop_int.h"
#include "ll/kclient.h"
#include "ll/log.h"
#include "ll/obs.h"

void ll_loop_pause_all(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *asg = NULL;
    if (l->all_paused || l->kio->assignment(l->consumer, &asg) != RD_KAFKA_RESP_ERR_NO_ERROR || !asg)
        return;
    if (asg->cnt > 0)
        l->kio->pause(l->consumer, asg);
    rd_kafka_topic_partition_list_destroy(asg);
    l->all_paused = 1;
}

void ll_loop_recover_later(ll_loop *l, int64_t delay_ms)
{
    ll_loop_pause_all(l);
    if (delay_ms <= 0) {
        l->recover_backoff_ms = l->recover_backoff_ms ? l->recover_backoff_ms * 2 : 200;
        if (l->recover_backoff_ms > 5000)
            l->recover_backoff_ms = 5000;
        delay_ms = l->recover_backoff_ms;
    }
    l->recover_at_ms = ll_loop_now_ms() + delay_ms;
}

/*
 * Seeks every assigned partition back to its committed offset, or to the ledger's position when
 * that is lower (kloop_position.c), reloads the done offsets above it from the commit metadata
 * (intersected with the ledger's) and drops the held messages (they come again from the broker). A
 * partition without a committed offset starts at the beginning (auto.offset.reset is always
 * earliest). What this instance paused is resumed. If the positions cannot be reset (broker
 * unreachable), consuming on would skip messages: the assignment stays paused and the rewind is
 * retried with backoff. Returns 0 when the rewind is done.
 */
int ll_loop_rewind(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *asg = NULL;
    char why[512] = "";
    l->rewind_pending = 1;
    if (l->commit)
        ll_loop_commit_wait(l); /* the committed offsets are read below */
    /* what was staged comes again from the committed offsets, answered as replays */
    ll_loop_staged_drop(l);
    if (l->kio->assignment(l->consumer, &asg) != RD_KAFKA_RESP_ERR_NO_ERROR || !asg) {
        snprintf(why, sizeof why, "cannot read the assignment");
    } else if (asg->cnt > 0) {
        rd_kafka_resp_err_t ce = l->kio->committed(l->consumer, asg, 10000);
        for (int i = 0; !ce && i < asg->cnt; i++)
            ce = asg->elems[i].err;
        if (ce) {
            snprintf(why, sizeof why, "committed offsets: %s", rd_kafka_err2str(ce));
        } else {
            for (size_t i = 0; i < l->n_parts; i++)
                ll_loop_drop_held(l->parts[i]);
            ll_loop_load_tracks(l, asg);
            /* and the ledger's own positions: each partition goes back to the lower (docs/design.md §5) */
            if (ll_loop_positions_merge(l, asg) != 0) {
                snprintf(why, sizeof why, "the ledger's positions: %s %.400s", l->db.err.sqlstate,
                         l->db.err.message);
            } else {
                for (int i = 0; i < asg->cnt; i++)
                    if (asg->elems[i].offset < 0)
                        asg->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
                l->kio->seek(l->consumer, asg, 10000, why, sizeof why);
            }
        }
    }
    if (asg)
        rd_kafka_topic_partition_list_destroy(asg);
    if (why[0]) {
        ll_log(LL_WARN, NULL, "rewind_retry",
               "rewind to the committed offsets: %s (retrying, partitions paused)", why);
        ll_loop_recover_later(l, 0);
        return -1;
    }
    ll_loop_resume_paused(l);
    l->rewind_pending = 0;
    l->recover_backoff_ms = 0;
    return 0;
}

/*
 * The producer raised a fatal error. Fenced or unauthorised: this instance must stop (one clear
 * line, exit 2). Anything else: the producer is recreated in this process (docs/design.md §3) before
 * anything is applied again.
 */
static void producer_fatal(ll_loop *l)
{
    char why[512] = "";
    rd_kafka_resp_err_t code = l->kio->fatal_error(l->producer, why, sizeof why);
    if (ll_kafka_fatal_must_exit(code)) {
        ll_log(LL_ERROR, NULL, "producer_fenced",
               "transactional.id %s: %s: another instance took over (or access was denied); exiting", l->txid,
               why);
        l->fatal = 1;
        ll_obs_fenced();
        return;
    }
    ll_log(LL_ERROR, NULL, "producer_recreate", "fatal producer error %s: %s; recreating the producer",
           rd_kafka_err2name(code), why);
    l->producer_broken = 1;
    l->rewind_pending = 1;
    l->recover_backoff_ms = 0;
    ll_loop_pause_all(l);
    l->recover_at_ms = ll_loop_now_ms();
}

/* One try at a new producer; on success the rewind follows at once. */
static void recreate_producer(ll_loop *l)
{
    char err[512];
    if (l->kio->remake_producer(l, 10000, err, sizeof err) != 0) {
        ll_log(LL_WARN, NULL, "producer_recreate_retry", "%s (retrying)", err);
        ll_loop_recover_later(l, 0);
        return;
    }
    ll_log(LL_INFO, NULL, "producer_recreated", "transactional.id %s ready again", l->txid);
    l->producer_broken = 0;
    l->recover_backoff_ms = 0;
    ll_loop_rewind(l);
}

/* Aborts the open transaction (a fatal or unfinished abort leaves the producer to be recreated,
 * whose init_transactions aborts it instead); the caller rewinds. */
static void abort_txn(ll_loop *l)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        rd_kafka_error_t *ae = l->kio->abort_transaction(l->producer, 30000);
        if (!ae)
            return;
        int fatal = rd_kafka_error_is_fatal(ae);
        ll_log(LL_ERROR, NULL, "kafka_abort_error", "abort_transaction: %s", rd_kafka_error_string(ae));
        rd_kafka_error_destroy(ae);
        if (fatal) {
            producer_fatal(l);
            return;
        }
    }
    l->producer_broken = 1;
    l->rewind_pending = 1;
    ll_loop_pause_all(l);
    l->recover_at_ms = ll_loop_now_ms();
}

void ll_loop_abort(ll_loop *l)
{
    char fe[256];
    if (l->kio->fatal_error(l->producer, fe, sizeof fe))
        producer_fatal(l);
    else
        abort_txn(l);
    if (!l->fatal && !l->producer_broken)
        ll_loop_rewind(l);
}

int ll_loop_txn_failed(ll_loop *l, rd_kafka_error_t *e, const char *what)
{
    ll_log(LL_ERROR, NULL, "kafka_txn_error", "%s: %s", what, rd_kafka_error_string(e));
    int fatal = rd_kafka_error_is_fatal(e);
    rd_kafka_error_destroy(e);
    if (fatal)
        producer_fatal(l);
    else
        ll_loop_abort(l);
    return -1;
}

/* The recovery step that is due, if any. Returns 1 while a recovery is still owed (nothing may
 * be applied: the poll only keeps this member in its group). */
int ll_loop_recover_step(ll_loop *l)
{
    if (!l->producer_broken && !l->rewind_pending)
        return 0;
    /* a rewind reads the committed offsets: the commit in flight first */
    ll_loop_commit_wait(l);
    if (ll_loop_now_ms() >= l->recover_at_ms) {
        if (l->producer_broken)
            recreate_producer(l);
        else
            ll_loop_rewind(l);
    }
    return l->producer_broken || l->rewind_pending;
}
