/*
 * kloop_kafka.c - the loop's Kafka side (kloop_int.h): the consumer and the transactional
 * producer, settings refused at start, rebalances, the committed offsets with their done-offset
 * metadata, rewinds, and the recovery of a broken producer in the same process.
 *
 * Error classes, where they arise (kafka-edition.md §3.4, issue 7 §7-§8): an abortable error
 * aborts the Kafka transaction and rewinds to the committed offsets; a fatal producer error
 * recreates the producer (same transactional.id: its init_transactions settles the open
 * transaction) and then rewinds; fenced or unauthorised ends the process (exit 2). A rewind that
 * cannot reach the broker keeps the assignment paused and is retried with backoff, while the
 * consumer is still polled so that the group keeps this member.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kloop_int.h"
#include "ll/dlq.h"
#include "ll/kclient.h"
#include "ll/log.h"
#include "ll/obs.h"

/* ---- partitions ----------------------------------------------------------------------------- */

part_state *ll_loop_part(ll_loop *l, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < l->n_parts; i++)
        if (l->parts[i]->partition == partition && strcmp(l->parts[i]->topic, topic) == 0)
            return l->parts[i];
    if (l->n_parts == l->cap_parts) {
        size_t cap = l->cap_parts ? l->cap_parts * 2 : 16;
        part_state **p = realloc(l->parts, cap * sizeof *p);
        if (!p)
            abort();
        l->parts = p;
        l->cap_parts = cap;
    }
    part_state *ps = calloc(1, sizeof *ps);
    if (!ps)
        abort();
    snprintf(ps->topic, sizeof ps->topic, "%s", topic);
    ps->partition = partition;
    ll_offtrack_init(&ps->track, 0);
    l->parts[l->n_parts++] = ps;
    return ps;
}

void ll_loop_forget_parts(ll_loop *l)
{
    for (size_t i = 0; i < l->n_parts; i++) {
        ll_loop_drop_held(l->parts[i]);
        free(l->parts[i]->held);
        free(l->parts[i]);
    }
    l->n_parts = 0;
}

/* Loads each listed partition's committed offset and metadata into its tracker (a partition
 * without a committed offset starts from whatever is delivered first). */
static void load_tracks(ll_loop *l, const rd_kafka_topic_partition_list_t *c)
{
    for (int i = 0; i < c->cnt; i++) {
        const rd_kafka_topic_partition_t *e = &c->elems[i];
        part_state *ps = ll_loop_part(l, e->topic, e->partition);
        char md[LL_OFFTRACK_METADATA_MAX] = "";
        if (e->metadata && e->metadata_size > 0 && e->metadata_size < sizeof md)
            memcpy(md, e->metadata, e->metadata_size);
        if (ll_offtrack_load(&ps->track, e->offset >= 0 ? e->offset : 0, md) != 0)
            ll_log(LL_WARN, NULL, "offset_metadata_ignored", "%s[%d]: commit metadata not understood: %.80s",
                   e->topic, (int)e->partition, md);
    }
}

/* {"<topic>": [partition, ...], ...} of a partition list, for the rebalance log lines. */
static json_t *partition_map(const rd_kafka_topic_partition_list_t *parts)
{
    json_t *m = json_object();
    for (int i = 0; i < parts->cnt; i++) {
        json_t *a = json_object_get(m, parts->elems[i].topic);
        if (!a) {
            a = json_array();
            json_object_set_new(m, parts->elems[i].topic, a);
        }
        json_array_append_new(a, json_integer(parts->elems[i].partition));
    }
    return json_pack("{s:o}", "partitions", m);
}

/* Resumes what this instance paused (partitions stopped by a full held queue, or the whole
 * assignment during a recovery) and nothing else: resuming a never-paused partition can refetch
 * from a stale position in librdkafka 2.0.2 (fixed in 2.4.0). */
static void resume_paused(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *tp = NULL;
    if (l->all_paused) {
        if (rd_kafka_assignment(l->consumer, &tp) != RD_KAFKA_RESP_ERR_NO_ERROR)
            tp = NULL;
    } else {
        tp = rd_kafka_topic_partition_list_new((int)(l->n_parts ? l->n_parts : 1));
        for (size_t i = 0; i < l->n_parts; i++)
            if (l->parts[i]->stopped)
                rd_kafka_topic_partition_list_add(tp, l->parts[i]->topic, l->parts[i]->partition);
    }
    if (tp && tp->cnt > 0)
        rd_kafka_resume_partitions(l->consumer, tp);
    if (tp)
        rd_kafka_topic_partition_list_destroy(tp);
    l->all_paused = 0;
    for (size_t i = 0; i < l->n_parts; i++)
        l->parts[i]->stopped = 0;
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
                         void *opaque)
{
    ll_loop *l = opaque;
    l->rebalance_gen++;
    /* the previous batch's commit (its offsets are of this generation) ends before the
     * assignment changes; a failure aborts it and its batch comes again from the committed
     * offsets (of the new assignment, for what stays assigned) */
    ll_loop_commit_wait(l);
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        ll_log_json(LL_INFO, NULL, "partitions_assigned", partition_map(parts), "assigned %d partitions",
                    parts->cnt);
        /* the committed offsets with the done offsets above them (metadata): what was applied
         * above the committed offset before a crash or a rebalance is skipped, not applied again */
        rd_kafka_topic_partition_list_t *c = rd_kafka_topic_partition_list_copy(parts);
        rd_kafka_resp_err_t ce = rd_kafka_committed(rk, c, 10000);
        if (ce)
            ll_log(LL_WARN, NULL, "committed_unknown",
                   "committed offsets not read (%s): messages above them may be answered again",
                   rd_kafka_err2str(ce));
        else
            load_tracks(l, c);
        rd_kafka_topic_partition_list_destroy(c);
        /* an eager assignment starts at the committed offsets: no rewind is owed any more (the
         * producer, if broken, is still recreated before anything is applied) */
        l->rewind_pending = 0;
        rd_kafka_assign(rk, parts);
        ll_obs_assigned(parts->cnt);
        if (l->producer_broken) {
            rd_kafka_pause_partitions(rk, parts);
            l->all_paused = 1;
        }
    } else {
        ll_log_json(LL_INFO, NULL, "partitions_revoked", partition_map(parts), "revoked %d partitions",
                    parts->cnt);
        resume_paused(l); /* while still assigned */
        ll_loop_forget_parts(l);
        rd_kafka_assign(rk, NULL);
        ll_obs_assigned(0);
    }
}

/* ---- clients -------------------------------------------------------------------------------- */

struct conf_ctx {
    rd_kafka_conf_t *conf;
    char *err;
    size_t errlen;
    int failed;
};

static void apply_passthrough(const char *key, const char *value, void *arg)
{
    struct conf_ctx *c = arg;
    char e[256];
    if (c->failed)
        return;
    const char *refusal = ll_kconf_refusal(key, value);
    if (refusal) {
        snprintf(c->err, c->errlen, "kafka.%s = %s is refused: %s", key, value, refusal);
        c->failed = 1;
    } else if (rd_kafka_conf_set(c->conf, key, value, e, sizeof e) != RD_KAFKA_CONF_OK) {
        snprintf(c->err, c->errlen, "kafka.%s: %s", key, e);
        c->failed = 1;
    }
}

static int conf_set(rd_kafka_conf_t *conf, const char *k, const char *v, char *err, size_t errlen)
{
    char e[256];
    if (rd_kafka_conf_set(conf, k, v, e, sizeof e) != RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "%s: %s", k, e);
        return -1;
    }
    return 0;
}

static rd_kafka_conf_t *base_conf(ll_loop *l, char *err, size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    struct conf_ctx c = {conf, err, errlen, 0};
    ll_config_foreach_prefix(l->cfg, "kafka.", apply_passthrough, &c);
    if (c.failed) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

/* The transactional producer (transactional.id <group>.<instance>), its transactions
 * initialised (which fences an earlier instance and settles its open transaction). init_ms
 * bounds the initialisation. 0, or -1 with err (l->producer then NULL). */
static int make_producer(ll_loop *l, int init_ms, char *err, size_t errlen)
{
    char e[512];
    rd_kafka_conf_t *pc = base_conf(l, err, errlen);
    if (!pc)
        return -1;
    if (conf_set(pc, "transactional.id", l->txid, err, errlen) ||
        conf_set(pc, "enable.idempotence", "true", err, errlen)) {
        rd_kafka_conf_destroy(pc);
        return -1;
    }
    if (!ll_config_get(l->cfg, "kafka.transaction.timeout.ms"))
        conf_set(pc, "transaction.timeout.ms", "60000", err, errlen);
    /* Latency defaults (issue 8 §5; docs/design.md §3): the commit of a batch's
     * transaction flushes its replies anyway, and with librdkafka's linger of 5 ms it waited for
     * it (commit p50 11 ms, 2-3 ms without); the next batch's AddOffsetsToTxn often meets the
     * previous commit still writing its markers (CONCURRENT_TRANSACTIONS), retried after
     * retry.backoff.ms: 100 ms by default, the p99 of the whole offset step. */
    if (!ll_config_get(l->cfg, "kafka.linger.ms"))
        conf_set(pc, "linger.ms", "0", err, errlen);
    if (!ll_config_get(l->cfg, "kafka.retry.backoff.ms"))
        conf_set(pc, "retry.backoff.ms", "20", err, errlen);
    if (!ll_config_get(l->cfg, "kafka.message.max.bytes")) {
        /* derived: a dead-letter record may be as large as the dead-letter topic takes */
        char mmb[32];
        snprintf(mmb, sizeof mmb, "%zu", l->dlq_limit);
        if (conf_set(pc, "message.max.bytes", mmb, err, errlen)) {
            rd_kafka_conf_destroy(pc);
            return -1;
        }
    }
    l->producer = rd_kafka_new(RD_KAFKA_PRODUCER, pc, e, sizeof e);
    if (!l->producer) {
        snprintf(err, errlen, "producer: %s", e);
        return -1;
    }
    for (int attempt = 0;; attempt++) {
        rd_kafka_error_t *ke = rd_kafka_init_transactions(l->producer, init_ms);
        if (!ke)
            return 0;
        int retry = rd_kafka_error_is_retriable(ke) && attempt < 10;
        snprintf(err, errlen, "init_transactions: %s", rd_kafka_error_string(ke));
        rd_kafka_error_destroy(ke);
        if (!retry) {
            rd_kafka_destroy(l->producer);
            l->producer = NULL;
            return -1;
        }
    }
}

/* The dead-letter topic's own limit, where the broker tells it: a smaller one than configured
 * lowers the limit, and must still take any accepted message whole (issue 7 §1). */
static int check_dead_letter_topic(ll_loop *l, char *err, size_t errlen)
{
    int64_t topic_max = 0, maxb = (int64_t)l->io[0].dopts.max_message_bytes;
    char why[300];
    if (ll_kafka_topic_max_message_bytes(l->producer, l->dlq_topic, 10000, &topic_max, why, sizeof why) !=
        0) {
        ll_log(LL_WARN, NULL, "dead_letter_topic_unknown", "%s: keeping loop.dead_letter_max_bytes = %zu",
               why, l->dlq_limit);
    } else if ((size_t)topic_max < l->dlq_limit) {
        if (ll_dlq_limits_check(maxb, topic_max, topic_max, err, errlen) != 0) {
            snprintf(why, sizeof why, "%s", err);
            snprintf(err, errlen, "topic %s has max.message.bytes = %lld: %s", l->dlq_topic,
                     (long long)topic_max, why);
            return -1;
        }
        l->dlq_limit = (size_t)topic_max;
    }
    return 0;
}

/* A configured kafka.<key> as a number into *out (left 0 when not configured). 0, or -1. */
static int kafka_int(ll_loop *l, const char *key, int64_t *out, char *err, size_t errlen)
{
    char k[96];
    snprintf(k, sizeof k, "kafka.%s", key);
    return ll_config_get(l->cfg, k) ? ll_config_int(l->cfg, k, out, err, errlen) : 0;
}

/*
 * The consumer's bounded fetch and prefetch sizes (ll_kfetch_settle, issue 8): the loop's
 * defaults where kafka.<property> is not configured, and a configuration refused at start when
 * a message of loop.max_message_bytes could not be fetched with it. 0, or -1 with err.
 */
static int fetch_bounds(ll_loop *l, rd_kafka_conf_t *cc, char *err, size_t errlen)
{
    ll_kfetch k = {0};
    int64_t message_max = 1000000; /* librdkafka's default message.max.bytes */
    if (kafka_int(l, "queued.min.messages", &k.queued_min_messages, err, errlen) ||
        kafka_int(l, "queued.max.messages.kbytes", &k.queued_max_kbytes, err, errlen) ||
        kafka_int(l, "fetch.max.bytes", &k.fetch_max_bytes, err, errlen) ||
        kafka_int(l, "fetch.message.max.bytes", &k.partition_fetch_bytes, err, errlen) ||
        kafka_int(l, "max.partition.fetch.bytes", &k.partition_fetch_bytes, err, errlen) ||
        kafka_int(l, "receive.message.max.bytes", &k.receive_max_bytes, err, errlen) ||
        kafka_int(l, "message.max.bytes", &message_max, err, errlen) ||
        ll_kfetch_settle((int64_t)l->io[0].dopts.max_message_bytes, message_max, &k, err, errlen))
        return -1;
    char v[4][32];
    snprintf(v[0], sizeof v[0], "%lld", (long long)k.queued_min_messages);
    snprintf(v[1], sizeof v[1], "%lld", (long long)k.queued_max_kbytes);
    snprintf(v[2], sizeof v[2], "%lld", (long long)k.fetch_max_bytes);
    snprintf(v[3], sizeof v[3], "%lld", (long long)k.partition_fetch_bytes);
    return conf_set(cc, "queued.min.messages", v[0], err, errlen) ||
                   conf_set(cc, "queued.max.messages.kbytes", v[1], err, errlen) ||
                   conf_set(cc, "fetch.max.bytes", v[2], err, errlen) ||
                   conf_set(cc, "max.partition.fetch.bytes", v[3], err, errlen)
               ? -1
               : 0;
}

/* The lag of one partition of a statistics sample: its end offset from librdkafka, its
 * committed offset from the loop itself (the first offset not done); unassigned ones skipped. */
static void lag_one(void *arg, const ll_obs_part_stats *p)
{
    ll_loop *l = arg;
    for (size_t i = 0; i < l->n_parts; i++)
        if (l->parts[i]->partition == p->partition && strcmp(l->parts[i]->topic, p->topic) == 0)
            ll_obs_lag_set(p->topic, p->partition, ll_obs_lag(p->end, l->parts[i]->track.base, p->lo));
}

/* librdkafka's statistics (the consumer lag per partition) for /metrics (obs.h): served by the
 * consumer poll on the loop's thread, so l->parts may be read; the document is librdkafka's
 * (returning 0 frees it). */
static int stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
    (void)rk;
    ll_obs_lag_begin();
    ll_obs_lag_parse(json, len, lag_one, opaque);
    return 0;
}

/* With an HTTP endpoint (http.listen), statistics every 5 s unless kafka.statistics.interval.ms
 * says otherwise. 0, or -1 with err. */
static int stats_conf(ll_loop *l, rd_kafka_conf_t *cc, char *err, size_t errlen)
{
    const char *listen = ll_config_get(l->cfg, "http.listen");
    if (!listen || !*listen)
        return 0;
    rd_kafka_conf_set_stats_cb(cc, stats_cb);
    return ll_config_get(l->cfg, "kafka.statistics.interval.ms")
               ? 0
               : conf_set(cc, "statistics.interval.ms", "5000", err, errlen);
}

int ll_loop_make_clients(ll_loop *l, char *err, size_t errlen)
{
    char host[128] = "host", e[512];
    const char *g = ll_config_get(l->cfg, "kafka.group.id");
    const char *prefix = ll_config_get(l->cfg, "topic.prefix");
    /* the default group follows the topic prefix, so two prefixes on one broker never share one */
    if (g)
        snprintf(l->group, sizeof l->group, "%s", g);
    else
        snprintf(l->group, sizeof l->group, "%s%s", prefix ? prefix : "", l->service);
    const char *inst = ll_config_get(l->cfg, "service.instance_id");
    if (!inst) {
        gethostname(host, sizeof host - 1);
        inst = host;
    }
    snprintf(l->txid, sizeof l->txid, "%s.%s", l->group, inst);

    rd_kafka_conf_t *cc = base_conf(l, err, errlen);
    if (!cc)
        return -1;
    /* what ll_kconf_refusal guards: set here, never to be changed by configuration */
    if (conf_set(cc, "group.id", l->group, err, errlen) ||
        conf_set(cc, "enable.auto.commit", "false", err, errlen) ||
        conf_set(cc, "enable.auto.offset.store", "false", err, errlen) ||
        conf_set(cc, "isolation.level", "read_committed", err, errlen) ||
        conf_set(cc, "auto.offset.reset", "earliest", err, errlen) ||
        (!ll_config_get(l->cfg, "kafka.partition.assignment.strategy") &&
         conf_set(cc, "partition.assignment.strategy", "range", err, errlen)) ||
        fetch_bounds(l, cc, err, errlen) != 0) {
        rd_kafka_conf_destroy(cc);
        return -1;
    }
    rd_kafka_conf_set_rebalance_cb(cc, rebalance_cb);
    if (stats_conf(l, cc, err, errlen) != 0) {
        rd_kafka_conf_destroy(cc);
        return -1;
    }
    rd_kafka_conf_set_opaque(cc, l);
    l->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cc, e, sizeof e);
    if (!l->consumer) {
        snprintf(err, errlen, "consumer: %s", e);
        return -1;
    }
    rd_kafka_poll_set_consumer(l->consumer);
    if (make_producer(l, 30000, err, errlen) != 0 || check_dead_letter_topic(l, err, errlen) != 0)
        return -1;
    ll_log(LL_INFO, NULL, "kafka_ready", "group %s, transactional.id %s, dead letters up to %zu bytes",
           l->group, l->txid, l->dlq_limit);
    return 0;
}

/* ---- producing and committing --------------------------------------------------------------- */

int ll_loop_produce(ll_loop *l, const char *topic, const void *key, size_t klen, void *val, size_t vlen,
                    rd_kafka_headers_t *hdrs, int free_val)
{
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            l->producer, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, klen), RD_KAFKA_V_VALUE(val, vlen),
            RD_KAFKA_V_MSGFLAGS(free_val ? RD_KAFKA_MSG_F_FREE : RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            return 0;
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(l->producer, 100);
            continue;
        }
        ll_log(LL_ERROR, NULL, "produce_failed", "produce to %s: %s", topic, rd_kafka_err2str(e));
        if (hdrs)
            rd_kafka_headers_destroy(hdrs);
        if (free_val)
            free(val);
        return -1;
    }
}

/* ---- recovery: abort, rewind, a new producer ------------------------------------------------ */

void ll_loop_pause_all(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *asg = NULL;
    if (l->all_paused || rd_kafka_assignment(l->consumer, &asg) != RD_KAFKA_RESP_ERR_NO_ERROR || !asg)
        return;
    if (asg->cnt > 0)
        rd_kafka_pause_partitions(l->consumer, asg);
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
 * Seeks every assigned partition back to its committed offset, reloads the done offsets above it
 * from the commit metadata and drops the held messages (they come again from the broker). A
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
    if (rd_kafka_assignment(l->consumer, &asg) != RD_KAFKA_RESP_ERR_NO_ERROR || !asg) {
        snprintf(why, sizeof why, "cannot read the assignment");
    } else if (asg->cnt > 0) {
        rd_kafka_resp_err_t ce = rd_kafka_committed(l->consumer, asg, 10000);
        for (int i = 0; !ce && i < asg->cnt; i++)
            ce = asg->elems[i].err;
        if (ce) {
            snprintf(why, sizeof why, "committed offsets: %s", rd_kafka_err2str(ce));
        } else {
            for (size_t i = 0; i < l->n_parts; i++)
                ll_loop_drop_held(l->parts[i]);
            load_tracks(l, asg);
            for (int i = 0; i < asg->cnt; i++)
                if (asg->elems[i].offset < 0)
                    asg->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
            ll_kafka_seek(l->consumer, asg, 10000, why, sizeof why);
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
    resume_paused(l);
    l->rewind_pending = 0;
    l->recover_backoff_ms = 0;
    return 0;
}

/*
 * The producer raised a fatal error. Fenced or unauthorised: this instance must stop (one clear
 * line, exit 2). Anything else: the producer is recreated in this process (issue 7 §8) before
 * anything is applied again.
 */
static void producer_fatal(ll_loop *l)
{
    char why[512] = "";
    rd_kafka_resp_err_t code = rd_kafka_fatal_error(l->producer, why, sizeof why);
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
    if (l->producer) {
        rd_kafka_purge(l->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_destroy(l->producer);
        l->producer = NULL;
    }
    if (make_producer(l, 10000, err, sizeof err) != 0) {
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
    ll_obs_stage_drop(); /* its replies and dead letters are not counted */
    for (int attempt = 0; attempt < 3; attempt++) {
        rd_kafka_error_t *ae = rd_kafka_abort_transaction(l->producer, 30000);
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
    if (rd_kafka_fatal_error(l->producer, fe, sizeof fe))
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

/* ---- a partition whose held queue is full ---------------------------------------------------- */

void ll_loop_stop_partition(ll_loop *l, part_state *ps, int64_t offset)
{
    if (l->all_paused || (ps->stopped && offset >= ps->stop_offset))
        return;
    rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(tp, ps->topic, ps->partition)->offset = offset;
    rd_kafka_pause_partitions(l->consumer, tp);
    char why[512];
    int failed = ll_kafka_seek(l->consumer, tp, 10000, why, sizeof why);
    rd_kafka_topic_partition_list_destroy(tp);
    ps->stopped = 1;
    ps->stop_offset = offset;
    ll_log_ctx ctx = {NULL, NULL, ps->topic, ps->partition, offset};
    ll_log(LL_WARN, &ctx, "partition_stopped", "%zu messages held (loop.max_held %lld): fetching paused",
           ps->n_held, (long long)l->max_held);
    if (failed) {
        /* the position is unknown: rewind once this batch is over (not now: the batch still
         * refers to the held messages a rewind drops) */
        ll_log(LL_WARN, &ctx, "seek_failed", "%s; rewinding", why);
        l->rewind_pending = 1;
        ll_loop_recover_later(l, 1);
    }
}

void ll_loop_resume_partition(ll_loop *l, part_state *ps)
{
    if (!ps->stopped || l->all_paused)
        return;
    rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(tp, ps->topic, ps->partition);
    rd_kafka_resume_partitions(l->consumer, tp);
    rd_kafka_topic_partition_list_destroy(tp);
    ps->stopped = 0;
}
