/*
 * setup.c - the consumer loop made and freed: its configuration keys and their ranges, topics,
 * schemas and dead-letter limits, the database, and the Kafka clients.
 *
 * the consumer loop's set-up (loop_int.h): its configuration keys and their
 * ranges (LL_LOOP_CONFIG_KEYS), the topics, schemas and dead-letter limits, the database and the
 * Kafka clients (setup.c) made and freed, and the replies the services build
 * (ll_reply_new). The run loop itself is loop.c.
 *
 * the loop's Kafka clients (loop_int.h): the consumer and the transactional
 * producer with their settings (the passthrough kafka.* keys, settings refused at start, the
 * fetch bounds, the statistics for the lag metrics), the dead-letter topic's check, and producing
 * one record.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commit.h"
#include "loop_int.h"
#include "partition.h"
#include "ll/dlq.h"
#include "ll/instance.h"
#include "ll/kclient.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/registry.h"
#include "ll/rules.h"
#include "ll/topics.h"

/* the consumer's topic.metadata.refresh.interval.ms unless kafka.topic.metadata.refresh.interval.ms
 * is set: half of loop.prerequisite_wait's default (ll_loop_make_clients) */
#define LL_CONSUMER_METADATA_REFRESH_MS "30000"

const ll_config_key LL_LOOP_CONFIG_KEYS[] = {
    {"service.instance_id", NULL, false,
     "stable id of this instance (transactional.id suffix); default: host name", LL_CONFIG_NO_RANGE},
    LL_INSTANCE_LEASE_KEY,
    {"db.conninfo", NULL, true, "libpq conninfo of the service's PostgreSQL role", LL_CONFIG_NO_RANGE},
    LL_DB_TX_ATTEMPTS_KEY,
    LL_TOPIC_KEYS,
    {"schema.ids_file", NULL, false, "JSON id->.avsc table for the Confluent framing", LL_CONFIG_NO_RANGE},
    LL_REGISTRY_CONFIG_KEYS,
    {"loop.batch_max", "240", false,
     "messages per poll batch, held in memory: each holds about 4 KiB while its batch runs", LL_CONFIG_INT, 1,
     LL_BATCH_MAX},
    {"loop.poll", "PT0.1S", false, "poll wait", LL_CONFIG_DURATION, LL_SEC / 100, 10 * LL_SEC},
    {"loop.max_message_bytes", "1048576", false, "largest message value accepted (bytes)",
     LL_CONFIG_NO_RANGE},
    {"loop.dead_letter_max_bytes", "2097152", false,
     "max.message.bytes of the dead-letter topic (bytes); no dead-letter record exceeds it",
     LL_CONFIG_NO_RANGE},
    {"codec.max_schema_bytes", "65536", false, "largest writer schema embedded in a message (bytes)",
     LL_CONFIG_INT, 1, LL_CONFIG_NO_MAX},
    {"codec.max_schema_expansions", "100000", false,
     "types an embedded writer schema may reach with its named types expanded", LL_CONFIG_INT, 1,
     LL_CONFIG_NO_MAX},
    {"codec.max_values", "100000", false, "values one message may hold (nulls too)", LL_CONFIG_INT, 1,
     LL_CONFIG_NO_MAX},
    {"codec.max_default_values", "10000", false, "values an embedded schema's defaults may build",
     LL_CONFIG_INT, 1, LL_CONFIG_NO_MAX},
    {"codec.writer_cache_entries", "32", false,
     "embedded writer schemas cached per topic (the cache holds 256 at most)", LL_CONFIG_INT, 1,
     LL_CONFIG_NO_MAX},
    {"codec.writer_cache_bytes", "1048576", false, "schema text cached per topic (bytes)", LL_CONFIG_INT, 1,
     LL_CONFIG_NO_MAX},
    {"loop.prerequisite_wait", "PT60S", false,
     "how long a message waits for its prerequisite before it is dead-lettered", LL_CONFIG_DURATION, 0,
     LL_DAY},
    {"loop.retry_backoff_min", "PT0.2S", false, "first pause of a held run", LL_CONFIG_DURATION, LL_SEC / 100,
     LL_MIN},
    {"loop.retry_backoff_max", "PT5S", false, "longest pause of a held run", LL_CONFIG_DURATION, LL_SEC / 10,
     LL_HOUR},
    {"loop.db_batch_max", "60", false,
     "savepoints per database transaction (PostgreSQL caches 64 subtransactions): messages applied one by"
     " one, a savepoint each; a batch needing more commits in parts; those the set-based apply decides"
     " need none. 1 = one transaction per message, without the set-based apply",
     LL_CONFIG_INT, 1, LL_BATCH_SAVEPOINTS},
    {"loop.overlap_commit", "true", false,
     "commit the Kafka transactions on a thread of its own while the next batches are applied and"
     " committed in the database (their replies go into the next Kafka transaction); false: each"
     " batch's Kafka commit on the loop's thread before the next poll",
     LL_CONFIG_NO_RANGE},
    {"loop.max_held", "64", false,
     "held messages per Kafka partition (the offset commit metadata must fit); beyond it the partition's"
     " fetching pauses",
     LL_CONFIG_INT, 1, LL_MAX_HELD},
    {"loop.position_missing", "earliest", false,
     "where a partition starts that has no read position in the ledger (nifi_ops.consumer_position):"
     " earliest (the ledger applied nothing of it: its first position was lost with the database's last"
     " transactions, or the database is new), or kafka (at the group's committed offset: only for the"
     " first start after the upgrade to migration 0009, docs/operations.md)",
     LL_CONFIG_NO_RANGE},
    {"loop.reapplied_wait", "PT1H", false,
     "how long an input answered before the database lost its effect waits for its prerequisite when it is"
     " applied again (the other service's re-read); then its dead letter is visible, for `loadctl redrive`"
     " (docs/design.md §5)",
     LL_CONFIG_DURATION, 0, 7 * LL_DAY},
    {"loop.position_check_interval", "PT5S", false,
     "how often, while no input comes, the ledger's read positions of the assigned partitions are compared"
     " with the ones this instance last read or wrote, so that a database that went back in time behind an"
     " unchanged connection (a pooler after a failover) is found without new input; 0: only at the next"
     " write (docs/design.md §5)",
     LL_CONFIG_DURATION, 0, LL_HOUR},
    {"loop.max_held_bytes", "8388608", false,
     "keys and values of the held messages per Kafka partition (bytes); beyond it the partition's"
     " fetching pauses (one message is always held)",
     LL_CONFIG_INT, 1 << 20, 1LL << 30},
    {"fault.crash_after_db_commits", "0", false,
     "TESTING: kill -9 self after N database commits, before the Kafka commit", LL_CONFIG_NO_RANGE},
    LL_LOG_LEVEL_KEY,
    LL_OBS_KEYS,
    {NULL, NULL, false, NULL, LL_CONFIG_NO_RANGE}};

/* ---- setup --------------------------------------------------------------------------------- */

/*
 * The dead-letter limit: min(kafka.message.max.bytes if set, loop.dead_letter_max_bytes), and
 * the start-up check that a message of loop.max_message_bytes can be dead-lettered whole
 * (docs/design.md §3: a dead-letter record always fits; settings that would break the guarantees
 * are refused at start). 0, or -1 with err naming the settings.
 */
static int dead_letter_limits(ll_loop *l, int64_t max_message_bytes, char *err, size_t errlen)
{
    int64_t topic_max = 0, producer_max;
    if (ll_config_int(l->cfg, "loop.dead_letter_max_bytes", &topic_max, err, errlen))
        return -1;
    producer_max = topic_max;
    if (ll_config_get(l->cfg, "kafka.message.max.bytes") &&
        ll_config_int(l->cfg, "kafka.message.max.bytes", &producer_max, err, errlen))
        return -1;
    if (ll_dlq_limits_check(max_message_bytes, producer_max, topic_max, err, errlen))
        return -1;
    l->dlq_limit = (size_t)(producer_max < topic_max ? producer_max : topic_max);
    return 0;
}

/*
 * A Confluent-framed reply topic's schema registered (or found) under "<topic>-value", or only
 * looked up there with schema.registry.auto.register.schemas = false; the id the registry gives is
 * the one the replies carry (docs/design.md §9, "Schema registry"). 0, or -1 with err (the service
 * exits 1).
 */
static int register_reply(ll_loop *l, topic_io *io, char *err, size_t errlen)
{
    return ll_registry_topic_id(l->registry, io->reply_topic, io->reply_schema, &io->eopts.schema_id, err,
                                errlen);
}

static int load_io(ll_loop *l, const ll_input *inputs, size_t n, char *err, size_t errlen)
{
    int64_t maxb = 0, cb[6];
    if (ll_config_int(l->cfg, "loop.max_message_bytes", &maxb, err, errlen) ||
        dead_letter_limits(l, maxb, err, errlen))
        return -1;
    static const char *const codec_keys[6] = {"codec.max_schema_bytes",     "codec.max_schema_expansions",
                                              "codec.max_values",           "codec.max_default_values",
                                              "codec.writer_cache_entries", "codec.writer_cache_bytes"};
    for (int k = 0; k < 6; k++)
        if (ll_config_int(l->cfg, codec_keys[k], &cb[k], err, errlen)) /* each at least 1 (the table) */
            return -1;
    const char *ids_file = ll_config_get(l->cfg, "schema.ids_file");
    if (ids_file && *ids_file && !(l->ids = ll_schema_ids_load(ids_file, err, errlen)))
        return -1;
    if (ll_registry_from_config(l->cfg, &l->registry, err, errlen))
        return -1;
    l->io = calloc(n, sizeof *l->io);
    l->n_io = n;
    for (size_t i = 0; i < n; i++) {
        topic_io *io = &l->io[i];
        io->in = &inputs[i];
        ll_topic_name(l->cfg, inputs[i].logical, io->topic, sizeof io->topic);
        ll_topic_name(l->cfg, inputs[i].reply_logical, io->reply_topic, sizeof io->reply_topic);
        if (!(io->schema = ll_topic_schema_load(l->cfg, inputs[i].schema_file, err, errlen)) ||
            !(io->reply_schema = ll_topic_schema_load(l->cfg, inputs[i].reply_schema, err, errlen)))
            return -1;
        if (ll_topic_framing(l->cfg, inputs[i].logical, &io->dopts.framing, err, errlen) ||
            ll_topic_framing(l->cfg, inputs[i].reply_logical, &io->eopts.framing, err, errlen))
            return -1;
        if (io->dopts.framing == LL_FRAMING_CONFLUENT && !l->ids && !l->registry) {
            snprintf(err, errlen,
                     "topic %s uses the confluent framing: set schema.ids_file or schema.registry.url",
                     inputs[i].logical);
            return -1;
        }
        io->dopts.reader = io->schema;
        io->dopts.ids = l->ids;
        io->dopts.max_message_bytes = (size_t)maxb;
        io->dopts.max_schema_bytes = (size_t)cb[0];
        io->dopts.max_schema_expansions = (size_t)cb[1];
        io->dopts.max_values = (size_t)cb[2];
        io->dopts.max_default_values = (size_t)cb[3];
        io->dopts.writer_cache_entries = (size_t)cb[4];
        io->dopts.writer_cache_bytes = (size_t)cb[5];
        io->eopts.schema = io->reply_schema;
        char key[160];
        int64_t sid = 0;
        snprintf(key, sizeof key, "topic.%s.schema_id", inputs[i].reply_logical);
        if (ll_config_get(l->cfg, key) && ll_config_int(l->cfg, key, &sid, err, errlen))
            return -1;
        io->eopts.schema_id = (int32_t)sid;
        if (l->registry) {
            io->dopts.source = ll_registry_source;
            io->dopts.source_ctx = l->registry;
            if (io->eopts.framing == LL_FRAMING_CONFLUENT && register_reply(l, io, err, errlen))
                return -1;
        }
    }
    ll_topic_name(l->cfg, "dead-letters", l->dlq_topic, sizeof l->dlq_topic);
    return 0;
}

/* The loop configured (its settings, topics and schemas), with the calls out of io: the real ones
 * open the database and make the Kafka clients; a scripted table (the unit tests) leaves both to
 * it. NULL with err. */
static ll_loop *loop_new(const char *service, const ll_config *cfg, const ll_input *inputs, size_t n,
                         void *svc, const ll_loop_io *io, char *err, size_t errlen)
{
    ll_loop *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->kio = io;
    snprintf(l->service, sizeof l->service, "%s", service);
    l->cfg = cfg;
    l->svc = svc;
    int64_t attempts = 0;
    bool overlap = true;
    /* the ranges are the table's (LL_LOOP_CONFIG_KEYS), checked by the readers */
    if (ll_config_int(cfg, "loop.batch_max", &l->batch_max, err, errlen) ||
        ll_config_duration_ms(cfg, "loop.poll", &l->poll_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "loop.prerequisite_wait", &l->prereq_wait_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "loop.position_check_interval", &l->position_check_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "loop.reapplied_wait", &l->reapplied_wait_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "loop.retry_backoff_min", &l->backoff_min_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "loop.retry_backoff_max", &l->backoff_max_ms, err, errlen) ||
        ll_config_int(cfg, "loop.max_held", &l->max_held, err, errlen) ||
        ll_config_int(cfg, "loop.max_held_bytes", &l->max_held_bytes, err, errlen) ||
        ll_config_int(cfg, "loop.db_batch_max", &l->db_batch_max, err, errlen) ||
        ll_config_bool(cfg, "loop.overlap_commit", &overlap, err, errlen) ||
        ll_config_int(cfg, "fault.crash_after_db_commits", &l->crash_after, err, errlen) ||
        ll_config_int(cfg, "db.tx_attempts", &attempts, err, errlen) || load_io(l, inputs, n, err, errlen)) {
        ll_loop_destroy(l);
        return NULL;
    }
    ll_loop_commit_make(l, overlap);
    static const char *const POSITION_MISSING[] = {"earliest", "kafka", NULL};
    int missing = ll_config_enum("loop.position_missing", ll_config_get(cfg, "loop.position_missing"),
                                 POSITION_MISSING, err, errlen);
    if (missing < 0) {
        ll_loop_destroy(l);
        return NULL;
    }
    l->position_missing_kafka = missing == 1;
    if (io != &LL_LOOP_IO_REAL) {
        snprintf(l->group, sizeof l->group, "%s", service);
        return l;
    }
    if (ll_db_open(&l->db, ll_config_get(cfg, "db.conninfo"), service, (int)attempts) != LL_DB_OK)
        ll_log(LL_WARN, NULL, "db_unavailable", "database not reachable at start: %s (will retry)",
               l->db.err.message);
    if (ll_db_configure_timeouts(&l->db, cfg, err, errlen) != 0) {
        ll_loop_destroy(l);
        return NULL;
    }
    if (ll_loop_make_clients(l, err, errlen) != 0) {
        ll_loop_destroy(l);
        return NULL;
    }
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(subs, l->io[i].topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t se = rd_kafka_subscribe(l->consumer, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (se) {
        snprintf(err, errlen, "subscribe: %s", rd_kafka_err2str(se));
        ll_loop_destroy(l);
        return NULL;
    }
    return l;
}

ll_loop *ll_loop_new(const char *service, const ll_config *cfg, const ll_input *inputs, size_t n, void *svc,
                     char *err, size_t errlen)
{
    return loop_new(service, cfg, inputs, n, svc, &LL_LOOP_IO_REAL, err, errlen);
}

ll_loop *ll_loop_new_io(const char *service, const ll_config *cfg, const ll_input *inputs, size_t n,
                        void *svc, const ll_loop_io *io, char *err, size_t errlen)
{
    return loop_new(service, cfg, inputs, n, svc, io, err, errlen);
}

ll_db *ll_loop_db(ll_loop *l)
{
    return &l->db;
}

void ll_loop_destroy(ll_loop *l)
{
    ll_loop_staged_drop(l); /* nothing staged goes with the close's revocation */
    if (l->consumer_q)
        rd_kafka_queue_destroy(l->consumer_q);
    l->consumer_q = NULL; /* a commit that the close's revocation begins wakes no poll */
    if (l->consumer) {
        rd_kafka_consumer_close(l->consumer);
        rd_kafka_destroy(l->consumer);
    }
    if (l->producer)
        rd_kafka_destroy(l->producer);
    for (size_t i = 0; i < l->n_io; i++) {
        ll_schema_free(l->io[i].schema);
        ll_schema_free(l->io[i].reply_schema);
    }
    free(l->io);
    ll_loop_parts_free(l);
    ll_schema_ids_free(l->ids);
    ll_registry_free(l->registry);
    ll_db_close(&l->db);
    ll_loop_commit_free(l); /* with a failure of a commit that the consumer's close began */
    free(l);
}

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
    ll_kafka_log_to_json(conf);
    struct conf_ctx c = {conf, err, errlen, 0};
    ll_config_foreach_prefix(l->cfg, "kafka.", apply_passthrough, &c);
    if (c.failed) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

/* The producer's metadata of the topics it writes (the reply topics, the dead-letter topic),
 * asked for now, each bounded by wait_ms. Without it the first record to a topic waited for
 * librdkafka's own lookup in the first Kafka transaction's flush (docs/design.md §3; the figures:
 * docs/performance-history.md, "2026-12-02, later"). A topic that does not answer is only logged: the lookup
 * on first use remains. */
static void warm_producer_topics(ll_loop *l, int wait_ms)
{
    for (size_t i = 0; i <= l->n_io; i++) {
        const char *name = i < l->n_io ? l->io[i].reply_topic : l->dlq_topic;
        size_t k = 0;
        while (k < i && k < l->n_io && strcmp(l->io[k].reply_topic, name) != 0)
            k++;
        if (k < i)
            continue; /* asked for already */
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(l->producer, name, NULL);
        if (!rkt)
            continue;
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t e = rd_kafka_metadata(l->producer, 0, rkt, &md, wait_ms);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
            ll_log(LL_WARN, NULL, "topic_metadata", "metadata of %s: %s (looked up on first use)", name,
                   rd_kafka_err2str(e));
        if (md)
            rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
    }
}

/* The transactional producer (transactional.id <group>.<instance>), its transactions
 * initialised (which fences an earlier instance and settles its open transaction), and the
 * metadata of its topics asked for (warm_producer_topics). init_ms bounds the initialisation
 * and each topic's lookup. 0, or -1 with err (l->producer then NULL). */
int ll_loop_remake_producer(ll_loop *l, int init_ms, char *err, size_t errlen)
{
    if (l->producer) {
        rd_kafka_purge(l->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_destroy(l->producer);
        l->producer = NULL;
    }
    return ll_loop_make_producer(l, init_ms, err, errlen);
}

int ll_loop_make_producer(ll_loop *l, int init_ms, char *err, size_t errlen)
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
    /* Latency defaults (docs/design.md §3; the figures: docs/performance.md,
     * "The loop's producer defaults"): the commit of a batch's transaction flushes its replies
     * anyway, and with librdkafka's linger of 5 ms it waited for it; the next batch's AddOffsetsToTxn often
     * meets the previous commit still writing its markers (CONCURRENT_TRANSACTIONS), retried after
     * retry.backoff.ms, whose default of 100 ms made the tail of the whole offset step. */
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
        if (!ke) {
            warm_producer_topics(l, init_ms);
            return 0;
        }
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
 * lowers the limit, and must still take any accepted message whole (docs/design.md §3). */
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
 * The consumer's bounded fetch and prefetch sizes (ll_kfetch_settle, docs/design.md §3): the loop's
 * defaults where kafka.<property> is not configured, and a configuration refused at start when a
 * response with one message of loop.max_message_bytes could not be received (a larger message is
 * still fetched whole: KIP-74), or that librdkafka would refuse. Keeps the settled sizes in
 * l->fetch for the fetcher's wake. 0, or -1 with err.
 */
static int fetch_bounds(ll_loop *l, rd_kafka_conf_t *cc, char *err, size_t errlen)
{
    ll_kfetch *k = &l->fetch;
    memset(k, 0, sizeof *k);
    if (kafka_int(l, "queued.min.messages", &k->queued_min_messages, err, errlen) ||
        kafka_int(l, "queued.max.messages.kbytes", &k->queued_max_kbytes, err, errlen) ||
        kafka_int(l, "fetch.max.bytes", &k->fetch_max_bytes, err, errlen) ||
        kafka_int(l, "fetch.message.max.bytes", &k->partition_fetch_bytes, err, errlen) ||
        kafka_int(l, "max.partition.fetch.bytes", &k->partition_fetch_bytes, err, errlen) ||
        kafka_int(l, "receive.message.max.bytes", &k->receive_max_bytes, err, errlen) ||
        kafka_int(l, "message.max.bytes", &k->message_max_bytes, err, errlen) ||
        ll_kfetch_settle((int64_t)l->io[0].dopts.max_message_bytes, k, err, errlen))
        return -1;
    char v[5][32];
    snprintf(v[0], sizeof v[0], "%lld", (long long)k->queued_min_messages);
    snprintf(v[1], sizeof v[1], "%lld", (long long)k->queued_max_kbytes);
    snprintf(v[2], sizeof v[2], "%lld", (long long)k->fetch_max_bytes);
    snprintf(v[3], sizeof v[3], "%lld", (long long)k->partition_fetch_bytes);
    snprintf(v[4], sizeof v[4], "%lld", (long long)k->message_max_bytes);
    /* message.max.bytes before fetch.max.bytes: librdkafka checks the pair when the handle is
     * made, so the order only matters for readers */
    return conf_set(cc, "queued.min.messages", v[0], err, errlen) ||
                   conf_set(cc, "queued.max.messages.kbytes", v[1], err, errlen) ||
                   conf_set(cc, "message.max.bytes", v[4], err, errlen) ||
                   conf_set(cc, "fetch.max.bytes", v[2], err, errlen) ||
                   conf_set(cc, "max.partition.fetch.bytes", v[3], err, errlen)
               ? -1
               : 0;
}

void ll_loop_fetch_count(ll_loop *l, const rd_kafka_message_t *rkm)
{
    l->fetch_run_bytes += (int64_t)rkm->len + (int64_t)rkm->key_len;
    l->fetch_run_msgs++;
}

void ll_loop_fetch_drained(ll_loop *l)
{
    if (!l->consumer_q || rd_kafka_queue_length(l->consumer_q) > 0)
        return;
    int due = ll_kfetch_wake_due(l->fetch_run_bytes, l->fetch_run_msgs, &l->fetch);
    l->fetch_run_bytes = l->fetch_run_msgs = 0;
    rd_kafka_topic_partition_list_t *a = NULL;
    if (!due || rd_kafka_assignment(l->consumer, &a) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    if (a->cnt > 0) {
        for (int i = 0; i < a->cnt; i++)
            a->elems[i].offset = RD_KAFKA_OFFSET_END; /* the latest offset: any answer will do */
        rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(l->consumer, a, LL_LOOP_FETCH_WAKE_MS);
        if (e && e != RD_KAFKA_RESP_ERR__TIMED_OUT) /* __TIMED_OUT: sent, not waited for */
            ll_log(LL_DEBUG, NULL, "fetch_wake", "waking the fetcher: %s", rd_kafka_err2str(e));
    }
    rd_kafka_topic_partition_list_destroy(a);
}

/* The lag of one partition of a statistics sample: its end offset from librdkafka, its
 * committed offset from the loop itself (the first offset not done); unassigned ones skipped. */
static void lag_one(void *arg, const ll_obs_part_stats *p)
{
    ll_loop *l = arg;
    const part_state *ps = ll_loop_part_find(l, p->topic, p->partition);
    if (ps)
        ll_obs_lag_set(p->topic, p->partition, ll_obs_lag(p->end, ll_loop_part_base(ps), p->lo));
}

/* librdkafka's statistics (the consumer lag per partition) for /metrics (obs.h): served by the
 * consumer poll on the loop's thread, so the partitions may be read; the document is librdkafka's
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

void ll_loop_identity(const ll_config *cfg, const char *service, char *group, size_t group_len,
                      char *instance, size_t instance_len)
{
    const char *g = ll_config_get(cfg, "kafka.group.id");
    const char *prefix = ll_config_get(cfg, "topic.prefix");
    /* the default group follows the topic prefix, so two prefixes on one broker never share one */
    if (g)
        snprintf(group, group_len, "%s", g);
    else
        snprintf(group, group_len, "%s%s", prefix ? prefix : "", service);
    const char *inst = ll_config_get(cfg, "service.instance_id");
    if (inst) {
        snprintf(instance, instance_len, "%s", inst);
        return;
    }
    char host[128] = "host";
    gethostname(host, sizeof host - 1);
    snprintf(instance, instance_len, "%s", host);
}

int ll_loop_make_clients(ll_loop *l, char *err, size_t errlen)
{
    char inst[256], e[512];
    ll_loop_identity(l->cfg, l->service, l->group, sizeof l->group, inst, sizeof inst);
    snprintf(l->txid, sizeof l->txid, "%s.%s", l->group, inst);

    rd_kafka_conf_t *cc = base_conf(l, err, errlen);
    if (!cc)
        return -1;
    /* what ll_kconf_refusal guards: set here, never to be changed by configuration */
    if (conf_set(cc, "group.id", l->group, err, errlen) ||
        conf_set(cc, "enable.auto.commit", "false", err, errlen) ||
        conf_set(cc, "enable.auto.offset.store", "false", err, errlen) ||
        conf_set(cc, "isolation.level", "read_committed", err, errlen) ||
        /* a position the broker no longer holds stops its partition (partition.c), never skipped;
         * a partition with no position anywhere is given the log's start by the merge */
        conf_set(cc, "auto.offset.reset", "error", err, errlen) ||
        (!ll_config_get(l->cfg, "kafka.partition.assignment.strategy") &&
         conf_set(cc, "partition.assignment.strategy", "range", err, errlen)) ||
        /* partitions added to an input topic are seen (and the group rebalanced over them) within
         * this, not librdkafka's 5 minutes: a run whose key moved there waits that long, and a
         * prerequisite sent there must be read within loop.prerequisite_wait (PT60S) of what
         * needs it on an old partition (scripts/drill.sh repartition, issue 41) */
        (!ll_config_get(l->cfg, "kafka.topic.metadata.refresh.interval.ms") &&
         conf_set(cc, "topic.metadata.refresh.interval.ms", LL_CONSUMER_METADATA_REFRESH_MS, err, errlen)) ||
        fetch_bounds(l, cc, err, errlen) != 0) {
        rd_kafka_conf_destroy(cc);
        return -1;
    }
    rd_kafka_conf_set_rebalance_cb(cc, ll_loop_rebalance_cb);
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
    l->consumer_q = rd_kafka_queue_get_consumer(l->consumer);
    if (ll_loop_make_producer(l, 30000, err, errlen) != 0 || check_dead_letter_topic(l, err, errlen) != 0)
        return -1;
    ll_log(LL_INFO, NULL, "kafka_ready", "group %s, transactional.id %s, dead letters up to %zu bytes",
           l->group, l->txid, l->dlq_limit);
    return 0;
}

int ll_topic_decode(const topic_io *io, const void *value, size_t len, json_t **out, char *why, size_t whylen)
{
    return ll_decode(&io->dopts, value, len, out, why, whylen);
}

int ll_topic_encode_reply(const topic_io *io, const json_t *reply, unsigned char **buf, size_t *len,
                          char *why, size_t whylen)
{
    return ll_encode(&io->eopts, reply, buf, len, why, whylen);
}

const char *ll_topic_reply_to(const topic_io *io)
{
    return io->reply_topic;
}

const ll_input *ll_topic_input(const topic_io *io)
{
    return io->in;
}

topic_io *ll_loop_topic_io(const ll_loop *l, const char *topic)
{
    for (size_t i = 0; i < l->n_io; i++)
        if (strcmp(l->io[i].topic, topic) == 0)
            return &l->io[i];
    return NULL;
}
