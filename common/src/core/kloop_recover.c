/*
 * kloop_recover.c - the loop's recovery (kloop_int.h), called by the loop alone (kloop.c): what
 * is owed (ll_recovery_state, written here and nowhere else), aborting the Kafka transaction,
 * rewinding to the committed offsets with their done-offset metadata and the ledger's positions,
 * and a broken producer recreated in the same process. The parts below the loop (the batch, the
 * Kafka commit, the partitions) report a failure by their result; the loop hands it here.
 *
 * Error classes, where they arise (docs/contract.md K§3.4, docs/design.md §3): an abortable error
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

/* Raises what is owed to need (never lowers it). */
static void owe(ll_loop *l, ll_recovery need)
{
    if (l->rec.owed < need)
        l->rec.owed = need;
}

/* Pauses the whole assignment (once). */
static void pause_all(ll_loop *l)
{
    if (!l->rec.paused && ll_loop_parts_pause_all(l) == 0)
        l->rec.paused = true;
}

/* The assignment paused and the next step due after delay_ms (0 or less: after the backoff,
 * 200 ms doubling to 5 s). */
static void retry_later(ll_loop *l, int64_t delay_ms)
{
    pause_all(l);
    if (delay_ms <= 0) {
        l->rec.backoff_ms = l->rec.backoff_ms ? l->rec.backoff_ms * 2 : 200;
        if (l->rec.backoff_ms > 5000)
            l->rec.backoff_ms = 5000;
        delay_ms = l->rec.backoff_ms;
    }
    l->rec.at_ms = ll_loop_now_ms() + delay_ms;
}

void ll_loop_owe_rewind(ll_loop *l, int64_t delay_ms)
{
    if (l->rec.owed != LL_RECOVERY_NONE)
        return; /* a step is owed already, with its own schedule */
    owe(l, LL_RECOVERY_REWIND);
    retry_later(l, delay_ms);
}

void ll_loop_resume_all(ll_loop *l)
{
    ll_loop_parts_resume(l, l->rec.paused);
    l->rec.paused = false;
}

void ll_loop_recovery_assigned(ll_loop *l, rd_kafka_topic_partition_list_t *assigned, int positions_read)
{
    /* an eager assignment starts at the offsets found: no rewind is owed any more (a broken
     * producer is still recreated before anything is applied) */
    if (l->rec.owed == LL_RECOVERY_REWIND)
        l->rec.owed = LL_RECOVERY_NONE;
    if (l->rec.owed == LL_RECOVERY_PRODUCER || !positions_read) {
        l->kio->pause(l->consumer, assigned);
        l->rec.paused = true;
    }
    if (!positions_read) {
        owe(l, LL_RECOVERY_REWIND); /* the rewind reads both again */
        retry_later(l, 0);
    }
}

/*
 * Seeks every assigned partition back to its committed offset, or to the ledger's position when
 * that is lower (kloop_position.c), reloads the done offsets above it from the commit metadata
 * (intersected with the ledger's) and drops the held messages (they come again from the broker). A
 * partition without a position anywhere starts at the log's start (the merge says so: the
 * consumer's auto.offset.reset is error, kloop_gap.c). What this instance paused is resumed. If
 * the positions cannot be reset (broker unreachable), consuming on would skip messages: the
 * assignment stays paused and the rewind is retried with backoff. Returns 0 when the rewind is
 * done.
 */
/* Whether a seek of asg failed on a partition that is not fetching (RD_KAFKA_RESP_ERR__STATE). */
static bool fetch_stopped(const rd_kafka_topic_partition_list_t *asg)
{
    for (int i = 0; i < asg->cnt; i++)
        if (asg->elems[i].err == RD_KAFKA_RESP_ERR__STATE)
            return true;
    return false;
}

int ll_loop_rewind(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *asg = NULL;
    char why[512] = "";
    owe(l, LL_RECOVERY_REWIND);
    if (l->commit && ll_loop_commit_wait(l) != 0) /* the committed offsets are read below */
        ll_loop_commit_failed(l);
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
                if (l->kio->seek(l->consumer, asg, 10000, why, sizeof why) != 0 && fetch_stopped(asg)) {
                    /* a partition whose fetch the broker refused (its position deleted, kloop_gap.c)
                     * has stopped fetching, and librdkafka 2.0.2 refuses to seek it (__STATE): the
                     * assignment is given again at the merged offsets, which starts its fetch */
                    why[0] = '\0';
                    for (int i = 0; i < asg->cnt; i++)
                        asg->elems[i].err = RD_KAFKA_RESP_ERR_NO_ERROR;
                    rd_kafka_resp_err_t ae = l->kio->assign(l->consumer, asg);
                    if (ae)
                        snprintf(why, sizeof why, "assign: %s", rd_kafka_err2str(ae));
                }
            }
        }
    }
    if (asg)
        rd_kafka_topic_partition_list_destroy(asg);
    if (why[0]) {
        ll_log(LL_WARN, NULL, "rewind_retry",
               "rewind to the committed offsets: %s (retrying, partitions paused)", why);
        retry_later(l, 0);
        return -1;
    }
    ll_loop_resume_all(l);
    if (l->rec.owed == LL_RECOVERY_REWIND)
        l->rec.owed = LL_RECOVERY_NONE;
    l->rec.backoff_ms = 0;
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
        owe(l, LL_RECOVERY_EXIT);
        ll_obs_fenced();
        return;
    }
    ll_log(LL_ERROR, NULL, "producer_recreate", "fatal producer error %s: %s; recreating the producer",
           rd_kafka_err2name(code), why);
    owe(l, LL_RECOVERY_PRODUCER);
    l->rec.backoff_ms = 0;
    pause_all(l);
    l->rec.at_ms = ll_loop_now_ms();
}

/* One try at a new producer; on success the rewind follows at once. */
static void recreate_producer(ll_loop *l)
{
    char err[512];
    if (l->kio->remake_producer(l, 10000, err, sizeof err) != 0) {
        ll_log(LL_WARN, NULL, "producer_recreate_retry", "%s (retrying)", err);
        retry_later(l, 0);
        return;
    }
    ll_log(LL_INFO, NULL, "producer_recreated", "transactional.id %s ready again", l->txid);
    if (l->rec.owed == LL_RECOVERY_PRODUCER)
        l->rec.owed = LL_RECOVERY_REWIND;
    l->rec.backoff_ms = 0;
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
    owe(l, LL_RECOVERY_PRODUCER);
    pause_all(l);
    l->rec.at_ms = ll_loop_now_ms();
}

int ll_loop_commit_failed(ll_loop *l)
{
    rd_kafka_error_t *e = l->commit_err;
    if (!e)
        return 0;
    l->commit_err = NULL;
    ll_log(LL_ERROR, NULL, "kafka_txn_error", "%s: %s", l->commit_err_what, rd_kafka_error_string(e));
    int fatal = rd_kafka_error_is_fatal(e);
    rd_kafka_error_destroy(e);
    char fe[256];
    if (fatal || l->kio->fatal_error(l->producer, fe, sizeof fe))
        producer_fatal(l);
    else
        abort_txn(l);
    if (l->rec.owed < LL_RECOVERY_PRODUCER)
        ll_loop_rewind(l);
    return -1;
}

int ll_loop_recover_step(ll_loop *l)
{
    if (l->rec.owed != LL_RECOVERY_REWIND && l->rec.owed != LL_RECOVERY_PRODUCER)
        return 0;
    /* a rewind reads the committed offsets: the commit in flight first */
    if (ll_loop_commit_wait(l) != 0)
        ll_loop_commit_failed(l);
    if (ll_loop_now_ms() >= l->rec.at_ms) {
        if (l->rec.owed == LL_RECOVERY_PRODUCER)
            recreate_producer(l);
        else if (l->rec.owed == LL_RECOVERY_REWIND)
            ll_loop_rewind(l);
    }
    return l->rec.owed == LL_RECOVERY_REWIND || l->rec.owed == LL_RECOVERY_PRODUCER;
}
