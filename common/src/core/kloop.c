/*
 * kloop.c - the consume / apply / produce-and-commit loop of kafka-edition.md §3.
 *
 * Crash points and what they leave (docs/design.md has the long form):
 *   - before the database commit: nothing happened; the message is consumed again.
 *   - after the database commit, before the Kafka commit: the Kafka transaction (reply and
 *     offsets) is aborted by the broker when the same transactional.id starts again; the message
 *     is consumed again, the CAS finds the ledger already moved and answers the same way
 *     (REPLAY), and that reply commits. A read_committed reader sees one reply.
 *   - after the Kafka commit: done.
 * Nothing is ever skipped: a message is either applied (reply + offset), dead-lettered (the
 * dead-letter record + offset, after its ledger event commits), or held (no offset).
 */
#include "ll/kloop.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ll/dlq.h"
#include "ll/kclient.h"
#include "ll/log.h"
#include "ll/rules.h"
#include "ll/topics.h"

const ll_config_key LL_LOOP_CONFIG_KEYS[] = {
    {"service.instance_id", NULL, false,
     "stable id of this instance (transactional.id suffix); default: host name"},
    {"db.conninfo", NULL, true, "libpq conninfo of the service's PostgreSQL role"},
    {"db.tx_attempts", "3", false, "tries per transaction on deadlock/serialization failure"},
    {"topic.prefix", "loadledger.", false, "prefix of every broker topic name"},
    {"schema.dir", NULL, false, "folder of the .avsc files"},
    {"schema.ids_file", NULL, false, "JSON id->.avsc table for the Confluent framing"},
    {"loop.batch_max", "200", false, "messages per poll batch"},
    {"loop.poll", "PT0.1S", false, "poll wait"},
    {"loop.max_message_bytes", "1048576", false, "largest message value accepted (bytes)"},
    {"loop.dead_letter_max_bytes", "2097152", false,
     "max.message.bytes of the dead-letter topic (bytes); no dead-letter record exceeds it"},
    {"codec.max_schema_bytes", "65536", false, "largest writer schema embedded in a message (bytes)"},
    {"codec.max_schema_expansions", "100000", false,
     "types an embedded writer schema may reach with its named types expanded"},
    {"codec.max_values", "100000", false, "values one message may hold (nulls too)"},
    {"codec.max_default_values", "10000", false, "values an embedded schema's defaults may build"},
    {"codec.writer_cache_entries", "32", false, "embedded writer schemas cached per topic (1..256)"},
    {"codec.writer_cache_bytes", "1048576", false, "schema text cached per topic (bytes)"},
    {"loop.prerequisite_wait", "PT60S", false,
     "how long a message waits for its prerequisite before it is dead-lettered"},
    {"loop.retry_backoff_min", "PT0.2S", false, "first pause of a held partition"},
    {"loop.retry_backoff_max", "PT5S", false, "longest pause of a held partition"},
    {"fault.crash_after_db_commits", "0", false,
     "TESTING: kill -9 self after N database commits, before the Kafka commit"},
    {"log.level", "info", false, "debug, info, warn or error"},
    {NULL, NULL, false, NULL}};

typedef struct topic_io {
    const ll_input *in;
    char topic[256];
    char reply_topic[256];
    ll_schema *schema;
    ll_schema *reply_schema;
    ll_decode_opts dopts;
    ll_encode_opts eopts;
} topic_io;

/* Per Kafka partition: hold state (paused after a DEFER or an unavailable database). */
typedef struct part_state {
    char topic[256];
    int32_t partition;
    int paused;
    int64_t resume_at_ms;
    int64_t hold_offset;   /* the message we wait on, -1 none */
    int64_t hold_since_ms; /* first hold of hold_offset */
    int64_t backoff_ms;
    /* The prerequisite clock: the first DEFER of defer_offset. Kept apart from the hold, which
     * also covers an unreachable database: an outage longer than loop.prerequisite_wait must not
     * count as waiting for a prerequisite that nobody could have applied meanwhile. */
    int64_t defer_offset; /* -1 none */
    int64_t defer_since_ms;
    int held_in_batch;
} part_state;

struct ll_loop {
    char service[64];
    const ll_config *cfg;
    void *svc;
    topic_io *io;
    size_t n_io;
    rd_kafka_t *consumer;
    rd_kafka_t *producer;
    ll_db db;
    ll_schema_ids *ids;
    char dlq_topic[256];
    volatile sig_atomic_t stop;
    int fatal;
    int64_t batch_max, poll_ms, prereq_wait_ms, backoff_min_ms, backoff_max_ms;
    int64_t crash_after, db_commits;
    part_state *parts;
    size_t n_parts, cap_parts;
    unsigned rebalance_gen;
    char group[256], txid[512];
    size_t dlq_limit; /* largest dead-letter record (bytes): min(producer, topic limit) */
    /* Recovery without a restart (issue 7 §8): while the producer is being recreated or the
     * positions cannot be reset to the committed offsets, the whole assignment is paused
     * (all_paused), the consumer is still polled (the group keeps this member), and the step is
     * retried with backoff from recover_at_ms. */
    int producer_broken, rewind_pending, all_paused;
    int64_t recover_at_ms, recover_backoff_ms;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static part_state *part_get(ll_loop *l, const char *topic, int32_t partition)
{
    for (size_t i = 0; i < l->n_parts; i++)
        if (l->parts[i].partition == partition && strcmp(l->parts[i].topic, topic) == 0)
            return &l->parts[i];
    if (l->n_parts == l->cap_parts) {
        size_t cap = l->cap_parts ? l->cap_parts * 2 : 16;
        part_state *p = realloc(l->parts, cap * sizeof *p);
        if (!p)
            abort();
        l->parts = p;
        l->cap_parts = cap;
    }
    part_state *ps = &l->parts[l->n_parts++];
    memset(ps, 0, sizeof *ps);
    snprintf(ps->topic, sizeof ps->topic, "%s", topic);
    ps->partition = partition;
    ps->hold_offset = -1;
    ps->defer_offset = -1;
    return ps;
}

static topic_io *io_for(ll_loop *l, const char *topic)
{
    for (size_t i = 0; i < l->n_io; i++)
        if (strcmp(l->io[i].topic, topic) == 0)
            return &l->io[i];
    return NULL;
}

/* ---- setup --------------------------------------------------------------------------------- */

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

/* Resumes what this instance paused (held partitions, or the whole assignment during a
 * recovery) and nothing else: resuming a never-paused partition can refetch from a stale
 * position in librdkafka 2.0.2 (fixed in 2.4.0). Forgets the hold state. */
static void resume_paused(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *tp = NULL;
    if (l->all_paused) {
        if (rd_kafka_assignment(l->consumer, &tp) != RD_KAFKA_RESP_ERR_NO_ERROR)
            tp = NULL;
    } else {
        tp = rd_kafka_topic_partition_list_new((int)(l->n_parts ? l->n_parts : 1));
        for (size_t i = 0; i < l->n_parts; i++)
            if (l->parts[i].paused)
                rd_kafka_topic_partition_list_add(tp, l->parts[i].topic, l->parts[i].partition);
    }
    if (tp && tp->cnt > 0)
        rd_kafka_resume_partitions(l->consumer, tp);
    if (tp)
        rd_kafka_topic_partition_list_destroy(tp);
    l->all_paused = 0;
    l->n_parts = 0;
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
                         void *opaque)
{
    ll_loop *l = opaque;
    l->rebalance_gen++;
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        ll_log_json(LL_INFO, NULL, "partitions_assigned", partition_map(parts), "assigned %d partitions",
                    parts->cnt);
        /* an eager assignment starts at the committed offsets: no rewind is owed any more (the
         * producer, if broken, is still recreated before anything is applied) */
        l->rewind_pending = 0;
        rd_kafka_assign(rk, parts);
        if (l->producer_broken) {
            rd_kafka_pause_partitions(rk, parts);
            l->all_paused = 1;
        }
    } else {
        ll_log_json(LL_INFO, NULL, "partitions_revoked", partition_map(parts), "revoked %d partitions",
                    parts->cnt);
        resume_paused(l); /* while still assigned; the hold state belongs to this assignment */
        rd_kafka_assign(rk, NULL);
    }
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
 * initialised (which fences an earlier instance and aborts its open transaction). init_ms
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

/*
 * The dead-letter limit: min(kafka.message.max.bytes if set, loop.dead_letter_max_bytes), and
 * the start-up check that a message of loop.max_message_bytes can be dead-lettered whole
 * (issue 7 §1, §5). 0, or -1 with err naming the settings.
 */
static int dead_letter_limits(ll_loop *l, int64_t max_message_bytes, char *err, size_t errlen)
{
    int64_t topic_max = 2097152, producer_max;
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

static int make_clients(ll_loop *l, char *err, size_t errlen)
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
         conf_set(cc, "partition.assignment.strategy", "range", err, errlen))) {
        rd_kafka_conf_destroy(cc);
        return -1;
    }
    rd_kafka_conf_set_rebalance_cb(cc, rebalance_cb);
    rd_kafka_conf_set_opaque(cc, l);
    l->consumer = rd_kafka_new(RD_KAFKA_CONSUMER, cc, e, sizeof e);
    if (!l->consumer) {
        snprintf(err, errlen, "consumer: %s", e);
        return -1;
    }
    rd_kafka_poll_set_consumer(l->consumer);
    if (make_producer(l, 30000, err, errlen) != 0)
        return -1;
    /* the dead-letter topic's own limit, where the broker tells it: a smaller one than
     * configured lowers the limit, and must still take any accepted message whole */
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
    ll_log(LL_INFO, NULL, "kafka_ready", "group %s, transactional.id %s, dead letters up to %zu bytes",
           l->group, l->txid, l->dlq_limit);
    return 0;
}

static int load_io(ll_loop *l, const ll_input *inputs, size_t n, char *err, size_t errlen)
{
    int64_t maxb = 1048576, cb[6];
    if (ll_config_int(l->cfg, "loop.max_message_bytes", &maxb, err, errlen) ||
        dead_letter_limits(l, maxb, err, errlen))
        return -1;
    static const char *const codec_keys[6] = {"codec.max_schema_bytes",     "codec.max_schema_expansions",
                                              "codec.max_values",           "codec.max_default_values",
                                              "codec.writer_cache_entries", "codec.writer_cache_bytes"};
    for (int k = 0; k < 6; k++) {
        if (ll_config_int(l->cfg, codec_keys[k], &cb[k], err, errlen))
            return -1;
        if (cb[k] < 1) {
            snprintf(err, errlen, "configuration key '%s' must be at least 1", codec_keys[k]);
            return -1;
        }
    }
    const char *ids_file = ll_config_get(l->cfg, "schema.ids_file");
    if (ids_file && *ids_file && !(l->ids = ll_schema_ids_load(ids_file, err, errlen)))
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
        if (io->dopts.framing == LL_FRAMING_CONFLUENT && !l->ids) {
            snprintf(err, errlen, "topic %s uses the confluent framing: set schema.ids_file",
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
    }
    ll_topic_name(l->cfg, "dead-letters", l->dlq_topic, sizeof l->dlq_topic);
    return 0;
}

ll_loop *ll_loop_new(const char *service, const ll_config *cfg, const ll_input *inputs, size_t n, void *svc,
                     char *err, size_t errlen)
{
    ll_loop *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    snprintf(l->service, sizeof l->service, "%s", service);
    l->cfg = cfg;
    l->svc = svc;
    int64_t attempts = 3;
    if (ll_config_int(cfg, "loop.batch_max", &l->batch_max, err, errlen) ||
        ll_config_duration_ms(cfg, "loop.poll", &l->poll_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "loop.prerequisite_wait", &l->prereq_wait_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "loop.retry_backoff_min", &l->backoff_min_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "loop.retry_backoff_max", &l->backoff_max_ms, err, errlen) ||
        ll_config_int(cfg, "fault.crash_after_db_commits", &l->crash_after, err, errlen) ||
        ll_config_int(cfg, "db.tx_attempts", &attempts, err, errlen) || load_io(l, inputs, n, err, errlen)) {
        ll_loop_free(l);
        return NULL;
    }
    if (l->batch_max < 1)
        l->batch_max = 1;
    if (ll_db_open(&l->db, ll_config_get(cfg, "db.conninfo"), service, (int)attempts) != LL_DB_OK)
        ll_log(LL_WARN, NULL, "db_unavailable", "database not reachable at start: %s (will retry)",
               l->db.err.message);
    if (ll_db_configure_timeouts(&l->db, cfg, err, errlen) != 0) {
        ll_loop_free(l);
        return NULL;
    }
    if (make_clients(l, err, errlen) != 0) {
        ll_loop_free(l);
        return NULL;
    }
    rd_kafka_topic_partition_list_t *subs = rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(subs, l->io[i].topic, RD_KAFKA_PARTITION_UA);
    rd_kafka_resp_err_t se = rd_kafka_subscribe(l->consumer, subs);
    rd_kafka_topic_partition_list_destroy(subs);
    if (se) {
        snprintf(err, errlen, "subscribe: %s", rd_kafka_err2str(se));
        ll_loop_free(l);
        return NULL;
    }
    return l;
}

void ll_loop_stop(ll_loop *l)
{
    l->stop = 1;
}
ll_db *ll_loop_db(ll_loop *l)
{
    return &l->db;
}

void ll_loop_free(ll_loop *l)
{
    if (!l)
        return;
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
    free(l->parts);
    ll_schema_ids_free(l->ids);
    ll_db_close(&l->db);
    free(l);
}

/* ---- replies and dead letters --------------------------------------------------------------- */

ll_apply ll_apply_exec(ll_db *db, const ll_stmt *st, const char *const *params)
{
    PGresult *r = ll_db_exec(db, st, params);
    if (!r)
        return LL_APPLY_DB;
    PQclear(r);
    return LL_APPLY_COMMIT;
}

json_t *ll_reply_new(const ll_msg *m, const char *run_id, const char *partition_id, const char *outcome,
                     const char *code, const char *message, const char *run_status, const char *part_status)
{
    json_t *r = json_object();
    json_object_set_new(r, "runId", json_string(run_id ? run_id : ""));
    json_object_set_new(r, "partitionId", partition_id ? json_string(partition_id) : json_null());
    json_object_set_new(r, "outcome", json_string(outcome));
    json_object_set_new(r, "code", code ? json_string(code) : json_null());
    json_object_set_new(r, "message", message ? json_string(message) : json_null());
    json_object_set_new(r, "runStatus", run_status ? json_string(run_status) : json_null());
    if (part_status) /* absent: the schema's default (null), and legal for replies without it */
        json_object_set_new(r, "partitionStatus", json_string(part_status));
    json_object_set_new(r, "sourceTopic", json_string(m->topic));
    json_object_set_new(r, "sourcePartition", json_integer(m->partition));
    json_object_set_new(r, "sourceOffset", json_integer(m->offset));
    return r;
}

/* Produces inside the open Kafka transaction, waiting out a full local queue. 0 or -1. */
static int produce(ll_loop *l, const char *topic, const void *key, size_t klen, void *val, size_t vlen,
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

static const ll_stmt ST_DEAD_LETTER_EVENT = {
    "kloop_dead_letter_event",
    "INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, run_id, process_group,"
    " processor_name, error_class, error_code, message, details)"
    " VALUES ($1::uuid, 'ERROR', 'DEAD_LETTER', $2::uuid, 'LOADLEDGER', $3, 'DEAD_LETTER', $4,"
    " left($5, 2000), $6::jsonb) ON CONFLICT (event_id) DO NOTHING",
    6};

struct dl_arg {
    const char *params[6];
};

static ll_db_rc dl_tx(ll_db *db, void *arg)
{
    struct dl_arg *a = arg;
    PGresult *r = ll_db_exec(db, &ST_DEAD_LETTER_EVENT, a->params);
    if (!r)
        return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
    PQclear(r);
    return LL_DB_OK;
}

/* What became of one message in the batch: done (reply or dead letter produced, offset may
 * pass it), held (no offset), abort (the Kafka transaction must be aborted), or a reply that
 * could not be encoded (turned into a dead letter by process_one). */
typedef enum { MSG_DONE, MSG_HOLD, MSG_ABORT, MSG_UNENCODABLE } msg_result;

/*
 * Dead-letters one message: the ledger event first (its id derives from topic/partition/offset,
 * so a replay writes it once), then the record with the original key, value and headers plus
 * ll.error.* headers into the open Kafka transaction.
 */
static void hold(ll_loop *l, part_state *ps, int64_t offset, const char *why);

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

/* The dead-letter reason as a header: at most this many bytes, cut on a UTF-8 boundary. */
#define DL_REASON_MAX 1000

/*
 * Produces the dead-letter record of rkm into the open Kafka transaction: the loop's ll.error.* and
 * ll.source.* headers, plus the original key, value and headers where they fit under the
 * dead-letter limit (dlq.h); what does not fit is named in ll.payload.* headers (size in bytes,
 * SHA-256), so the record always fits and never blocks the partition.
 */
static msg_result produce_dead_letter(ll_loop *l, const rd_kafka_message_t *rkm, const char *topic,
                                      const char *part, const char *off, const char *code, const char *reason)
{
    char ts[40], why[DL_REASON_MAX + 1], size[32], sha[65] = "";
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
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
    rd_kafka_header_add(own, "ll.source.topic", -1, topic, -1);
    rd_kafka_header_add(own, "ll.source.partition", -1, part, -1);
    rd_kafka_header_add(own, "ll.source.offset", -1, off, -1);
    rd_kafka_header_add(own, "ll.service", -1, l->service, -1);
    rd_kafka_header_add(own, "ll.dead_at", -1, ts, -1);
    /* room for the ll.payload.* headers, in case they are needed */
    size_t own_len = headers_size(own) + 200;
    const rd_kafka_headers_t *orig = NULL;
    if (rd_kafka_message_headers(rkm, (rd_kafka_headers_t **)&orig) != RD_KAFKA_RESP_ERR_NO_ERROR)
        orig = NULL;
    ll_dlq_fit fit;
    ll_dlq_fit_decide(rkm->key_len, rkm->len, headers_size(orig), own_len, l->dlq_limit, &fit);

    rd_kafka_headers_t *h = fit.keep_headers && orig ? rd_kafka_headers_copy(orig) : rd_kafka_headers_new(12);
    const char *name;
    const void *val;
    size_t vlen;
    for (size_t i = 0; rd_kafka_header_get_all(own, i, &name, &val, &vlen) == RD_KAFKA_RESP_ERR_NO_ERROR; i++)
        rd_kafka_header_add(h, name, -1, val, (ssize_t)vlen);
    rd_kafka_headers_destroy(own);
    if (!fit.keep_value) {
        snprintf(size, sizeof size, "%zu", rkm->len);
        ll_sha256_hex(rkm->payload, rkm->payload ? rkm->len : 0, sha);
        rd_kafka_header_add(h, "ll.payload.omitted", -1,
                            "payload omitted: the record would exceed the dead-letter limit", -1);
        rd_kafka_header_add(h, "ll.payload.size", -1, size, -1);
        rd_kafka_header_add(h, "ll.payload.sha256", -1, sha, -1);
    }
    if (!fit.keep_headers && orig)
        rd_kafka_header_add(h, "ll.headers.omitted", -1, "original headers omitted (size)", -1);
    if (!fit.keep_key && rkm->key)
        rd_kafka_header_add(h, "ll.key.omitted", -1, "original key omitted (size)", -1);
    ll_log_ctx ctx = {NULL, NULL, topic, rkm->partition, rkm->offset};
    if (!fit.keep_value)
        ll_log(LL_WARN, &ctx, "dead_letter_payload_omitted",
               "value of %zu bytes (sha256 %s) not copied: over %zu bytes", rkm->len, sha, l->dlq_limit);
    if (produce(l, l->dlq_topic, fit.keep_key ? rkm->key : NULL, fit.keep_key ? rkm->key_len : 0,
                fit.keep_value ? rkm->payload : NULL, fit.keep_value ? rkm->len : 0, h, 0) != 0)
        return MSG_ABORT;
    return MSG_DONE;
}

static msg_result dead_letter(ll_loop *l, part_state *ps, const rd_kafka_message_t *rkm, const char *run_id,
                              const char *code, const char *reason)
{
    const char *topic = rd_kafka_topic_name(rkm->rkt);
    char coord[400], event_id[37], part[16], off[32], canon[37];
    snprintf(coord, sizeof coord, "dead-letter/%s/%d/%lld", topic, (int)rkm->partition,
             (long long)rkm->offset);
    ll_uuid_v5(LL_UUID_NAMESPACE, coord, event_id);
    snprintf(part, sizeof part, "%d", (int)rkm->partition);
    snprintf(off, sizeof off, "%lld", (long long)rkm->offset);
    json_t *details =
        json_pack("{s:s,s:i,s:I,s:s}", "sourceTopic", topic, "sourcePartition", (int)rkm->partition,
                  "sourceOffset", (json_int_t)rkm->offset, "service", l->service);
    char *dj = json_dumps(details, JSON_COMPACT);
    json_decref(details);
    int have_run = run_id && ll_uuid_canonical(run_id, canon) == 0;
    struct dl_arg a = {{event_id, have_run ? canon : NULL, l->service, code, reason, dj}};
    ll_db_rc rc = ll_db_transaction(&l->db, dl_tx, &a);
    free(dj);
    if (rc != LL_DB_OK) {
        /* held like any message the database could not take: on this very offset (a hold on
         * another offset would seek the partition past this message, or back before it) */
        ll_log(LL_WARN, NULL, "dead_letter_event_failed", "cannot record dead letter: %s", l->db.err.message);
        hold(l, ps, rkm->offset, l->db.err.message);
        return MSG_HOLD;
    }
    ps->hold_offset = ps->defer_offset = -1;
    ll_log_ctx ctx = {have_run ? canon : NULL, NULL, topic, rkm->partition, rkm->offset};
    ll_log(LL_ERROR, &ctx, "dead_letter", "%s: %s", code, reason);
    return produce_dead_letter(l, rkm, topic, part, off, code, reason);
}

/* ---- applying one message ------------------------------------------------------------------- */

struct tx_arg {
    ll_loop *l;
    topic_io *io;
    ll_msg *m;
    ll_apply_out out;
    ll_apply decision;
};

static ll_db_rc apply_tx(ll_db *db, void *arg)
{
    struct tx_arg *a = arg;
    json_decref(a->out.reply);
    memset(&a->out, 0, sizeof a->out);
    a->decision = a->io->in->apply(a->l->svc, db, a->m, &a->out);
    switch (a->decision) {
    case LL_APPLY_COMMIT:
        return LL_DB_OK;
    case LL_APPLY_ROLLBACK:
    case LL_APPLY_DEFER:
    case LL_APPLY_DEAD:
        return LL_DB_ROLLBACK;
    case LL_APPLY_DB:
    default:
        return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
    }
}

static void hold(ll_loop *l, part_state *ps, int64_t offset, const char *why)
{
    int64_t now = now_ms();
    if (ps->hold_offset != offset) {
        ps->hold_offset = offset;
        ps->hold_since_ms = now;
        ps->backoff_ms = l->backoff_min_ms;
    } else {
        ps->backoff_ms = ps->backoff_ms * 2 > l->backoff_max_ms ? l->backoff_max_ms : ps->backoff_ms * 2;
    }
    ps->held_in_batch = 1;
    ps->resume_at_ms = now + ps->backoff_ms;
    ll_log_ctx ctx = {NULL, NULL, ps->topic, ps->partition, offset};
    ll_log(LL_DEBUG, &ctx, "partition_held", "held for %lld ms: %s", (long long)ps->backoff_ms, why);
}

/* Produces the reply into the open Kafka transaction. MSG_UNENCODABLE (with the reason in err)
 * when the reply does not fit its schema: the caller dead-letters the input instead, so the
 * process neither exits nor meets the same message again. */
static msg_result send_reply(ll_loop *l, topic_io *io, const rd_kafka_message_t *rkm, json_t *reply,
                             char *err, size_t errlen)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    char why[400];
    if (ll_encode(&io->eopts, reply, &buf, &len, why, sizeof why) != 0) {
        snprintf(err, errlen, "the reply to %s does not fit its schema: %s", io->reply_topic, why);
        return MSG_UNENCODABLE;
    }
    if (produce(l, io->reply_topic, rkm->key, rkm->key_len, buf, len, NULL, 1) != 0)
        return MSG_ABORT;
    return MSG_DONE;
}

static msg_result process_one(ll_loop *l, const rd_kafka_message_t *rkm, part_state *ps)
{
    const char *topic = rd_kafka_topic_name(rkm->rkt);
    topic_io *io = io_for(l, topic);
    char err[1024], key[128] = "";
    if (rkm->key && rkm->key_len < sizeof key) {
        memcpy(key, rkm->key, rkm->key_len);
        key[rkm->key_len] = '\0';
    }
    const char *keyp = rkm->key ? key : NULL;
    if (!io)
        return dead_letter(l, ps, rkm, keyp, "UNKNOWN_TOPIC", "no handler for this topic");
    json_t *value = NULL;
    if (!rkm->payload || ll_decode(&io->dopts, rkm->payload, rkm->len, &value, err, sizeof err) != 0)
        return dead_letter(l, ps, rkm, keyp, "DECODE_FAILED", rkm->payload ? err : "empty message value");

    ll_msg m = {io->in->logical, topic, rkm->partition, rkm->offset, keyp, value, l->service};
    struct tx_arg a = {l, io, &m, {0}, LL_APPLY_DB};
    ll_db_rc rc = ll_db_transaction(&l->db, apply_tx, &a);
    const char *run_id = json_string_value(json_object_get(value, "runId"));
    ll_log_ctx ctx = {run_id, json_string_value(json_object_get(value, "partitionId")), topic, rkm->partition,
                      rkm->offset};
    msg_result res = MSG_DONE;

    if (rc == LL_DB_OK || (rc == LL_DB_ROLLBACK && a.decision == LL_APPLY_ROLLBACK)) {
        if (rc == LL_DB_OK && l->crash_after > 0 && ++l->db_commits >= l->crash_after) {
            ll_log(LL_WARN, &ctx, "fault_injected", "killing self after database commit %lld",
                   (long long)l->db_commits);
            /* the replies of this batch's earlier messages go to the broker first: it then holds
             * an open transaction, the most adverse form of this crash point for read_committed
             * readers (without the flush they may die in the local queue, which hides it) */
            rd_kafka_flush(l->producer, 10000);
            raise(SIGKILL);
        }
        ps->hold_offset = -1;
        ps->defer_offset = -1;
        res = a.out.reply ? send_reply(l, io, rkm, a.out.reply, err, sizeof err) : MSG_DONE;
        if (res == MSG_UNENCODABLE)
            res = dead_letter(l, ps, rkm, run_id ? run_id : keyp, "REPLY_ENCODE_FAILED", err);
    } else if (rc == LL_DB_ROLLBACK && a.decision == LL_APPLY_DEFER) {
        if (ps->defer_offset != rkm->offset) {
            ps->defer_offset = rkm->offset;
            ps->defer_since_ms = now_ms();
        }
        if (now_ms() - ps->defer_since_ms >= l->prereq_wait_ms) {
            char reason[700];
            snprintf(reason, sizeof reason, "prerequisite not in the ledger after %lld ms: %s",
                     (long long)l->prereq_wait_ms, a.out.reason);
            res = dead_letter(l, ps, rkm, run_id ? run_id : keyp, "PREREQUISITE_TIMEOUT", reason);
        } else {
            ll_log(LL_INFO, &ctx, "message_deferred", "deferred: %s", a.out.reason);
            hold(l, ps, rkm->offset, a.out.reason);
            res = MSG_HOLD;
        }
    } else if (rc == LL_DB_ROLLBACK && a.decision == LL_APPLY_DEAD) {
        res = dead_letter(l, ps, rkm, run_id ? run_id : keyp,
                          a.out.reason_code[0] ? a.out.reason_code : "INVALID_MESSAGE", a.out.reason);
    } else if (rc == LL_DB_ERROR && ll_db_err_is_input(&l->db)) {
        char reason[700];
        snprintf(reason, sizeof reason, "ledger refused the values (SQLSTATE %s %s): %s", l->db.err.sqlstate,
                 l->db.err.constraint, l->db.err.message);
        res = dead_letter(l, ps, rkm, run_id ? run_id : keyp, "LEDGER_REJECTED", reason);
    } else {
        /* unreachable, or a bounded wait that ran out (lock or statement timeout, issue 7 §6):
         * held and retried with backoff, never a dead letter */
        int busy = rc == LL_DB_ERROR && ll_db_err_is_busy(&l->db);
        ll_log(rc == LL_DB_UNAVAILABLE || busy ? LL_WARN : LL_ERROR, &ctx,
               rc == LL_DB_UNAVAILABLE ? "db_unavailable"
               : busy                  ? "db_busy"
                                       : "db_error",
               "holding partition: %s %s", l->db.err.sqlstate, l->db.err.message);
        hold(l, ps, rkm->offset, l->db.err.message);
        res = MSG_HOLD;
    }
    if (res == MSG_HOLD)
        ps->held_in_batch = 1;
    json_decref(a.out.reply);
    json_decref(value);
    return res;
}

/* ---- recovery: abort, rewind, a new producer ------------------------------------------------ */

/* Pauses the whole assignment while a recovery step is owed (rewind or a new producer): nothing
 * is consumed past the committed offsets meanwhile, and the consumer is still polled. */
static void pause_all(ll_loop *l)
{
    rd_kafka_topic_partition_list_t *asg = NULL;
    if (l->all_paused || rd_kafka_assignment(l->consumer, &asg) != RD_KAFKA_RESP_ERR_NO_ERROR || !asg)
        return;
    if (asg->cnt > 0)
        rd_kafka_pause_partitions(l->consumer, asg);
    rd_kafka_topic_partition_list_destroy(asg);
    l->all_paused = 1;
}

/* Schedules the next try of a recovery step with backoff (0.2 s doubling to 5 s). */
static void recover_later(ll_loop *l)
{
    pause_all(l);
    l->recover_backoff_ms = l->recover_backoff_ms ? l->recover_backoff_ms * 2 : 200;
    if (l->recover_backoff_ms > 5000)
        l->recover_backoff_ms = 5000;
    l->recover_at_ms = now_ms() + l->recover_backoff_ms;
}

/*
 * Seeks every assigned partition back to its committed offset and forgets the hold state (after
 * an aborted transaction, a failed seek, or a batch dropped by a rebalance). A partition without
 * a committed offset starts at the beginning (auto.offset.reset is always earliest). What this
 * instance paused is resumed: whatever it held comes again from the committed offset. If the
 * positions cannot be reset (broker unreachable), consuming on would skip the dropped messages:
 * the assignment stays paused and the rewind is retried with backoff (issue 7 §8). Returns 0
 * when the rewind is done.
 */
static int rewind_to_committed(ll_loop *l)
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
        recover_later(l);
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
 * anything is applied again; its init_transactions waits for or aborts the open transaction.
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
        return;
    }
    ll_log(LL_ERROR, NULL, "producer_recreate", "fatal producer error %s: %s; recreating the producer",
           rd_kafka_err2name(code), why);
    l->producer_broken = 1;
    l->rewind_pending = 1;
    l->recover_backoff_ms = 0;
    pause_all(l);
    l->recover_at_ms = now_ms();
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
        recover_later(l);
        return;
    }
    ll_log(LL_INFO, NULL, "producer_recreated", "transactional.id %s ready again", l->txid);
    l->producer_broken = 0;
    l->recover_backoff_ms = 0;
    rewind_to_committed(l);
}

/*
 * Aborts the open transaction and rewinds. An abort that fails fatally, or that cannot finish
 * after a few tries, leaves the producer to be recreated (its init_transactions aborts the
 * transaction instead).
 */
static void abort_and_rewind(ll_loop *l)
{
    for (int attempt = 0; attempt < 3; attempt++) {
        rd_kafka_error_t *ae = rd_kafka_abort_transaction(l->producer, 30000);
        if (!ae) {
            rewind_to_committed(l);
            return;
        }
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
    pause_all(l);
    l->recover_at_ms = now_ms();
}

/* A transactional call failed: fatal → producer_fatal; otherwise abort and rewind. Returns -1. */
static int txn_failed(ll_loop *l, rd_kafka_error_t *e, const char *what)
{
    ll_log(LL_ERROR, NULL, "kafka_txn_error", "%s: %s", what, rd_kafka_error_string(e));
    int fatal = rd_kafka_error_is_fatal(e);
    rd_kafka_error_destroy(e);
    if (fatal)
        producer_fatal(l);
    else
        abort_and_rewind(l);
    return -1;
}

/* ---- the batch ------------------------------------------------------------------------------ */

static void resume_due(ll_loop *l)
{
    int64_t now = now_ms();
    for (size_t i = 0; i < l->n_parts; i++) {
        part_state *ps = &l->parts[i];
        if (ps->paused && ps->resume_at_ms <= now) {
            rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
            rd_kafka_topic_partition_list_add(tp, ps->topic, ps->partition);
            rd_kafka_resume_partitions(l->consumer, tp);
            rd_kafka_topic_partition_list_destroy(tp);
            ps->paused = 0;
        }
    }
}

/* Pauses the partitions held in this batch and seeks each to the message it waits on. A seek
 * that fails would leave the position past the held message: the loop rewinds instead. */
static void pause_held(ll_loop *l)
{
    for (size_t i = 0; i < l->n_parts; i++) {
        part_state *ps = &l->parts[i];
        if (!ps->held_in_batch)
            continue;
        ps->held_in_batch = 0;
        rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_list_add(tp, ps->topic, ps->partition)->offset = ps->hold_offset;
        rd_kafka_pause_partitions(l->consumer, tp);
        ps->paused = 1;
        char why[512];
        int failed = ll_kafka_seek(l->consumer, tp, 10000, why, sizeof why);
        rd_kafka_topic_partition_list_destroy(tp);
        if (failed) {
            ll_log(LL_WARN, NULL, "seek_failed", "hold %s[%d] at %lld: %s; rewinding", ps->topic,
                   ps->partition, (long long)ps->hold_offset, why);
            rewind_to_committed(l); /* forgets the hold state */
            return;
        }
    }
}

static int process_batch(ll_loop *l, rd_kafka_message_t **batch, size_t n)
{
    rd_kafka_error_t *e = rd_kafka_begin_transaction(l->producer);
    if (e)
        return txn_failed(l, e, "begin_transaction");
    rd_kafka_topic_partition_list_t *offsets = rd_kafka_topic_partition_list_new((int)n);
    int aborted = 0;
    for (size_t i = 0; i < n && !aborted; i++) {
        rd_kafka_message_t *rkm = batch[i];
        const char *topic = rd_kafka_topic_name(rkm->rkt);
        part_state *ps = part_get(l, topic, rkm->partition);
        if (ps->held_in_batch)
            continue;
        switch (process_one(l, rkm, ps)) {
        case MSG_DONE: {
            rd_kafka_topic_partition_t *tp =
                rd_kafka_topic_partition_list_find(offsets, topic, rkm->partition);
            if (!tp)
                tp = rd_kafka_topic_partition_list_add(offsets, topic, rkm->partition);
            tp->offset = rkm->offset + 1;
            break;
        }
        case MSG_HOLD:
            break;
        case MSG_ABORT:
        case MSG_UNENCODABLE:
            aborted = 1;
            break;
        }
    }
    if (aborted) {
        rd_kafka_topic_partition_list_destroy(offsets);
        char fe[256];
        if (rd_kafka_fatal_error(l->producer, fe, sizeof fe))
            producer_fatal(l);
        else
            abort_and_rewind(l);
        return -1;
    }
    if (offsets->cnt > 0) {
        rd_kafka_consumer_group_metadata_t *gm = rd_kafka_consumer_group_metadata(l->consumer);
        e = rd_kafka_send_offsets_to_transaction(l->producer, offsets, gm, 30000);
        rd_kafka_consumer_group_metadata_destroy(gm);
        if (e) {
            rd_kafka_topic_partition_list_destroy(offsets);
            return txn_failed(l, e, "send_offsets_to_transaction");
        }
    }
    rd_kafka_topic_partition_list_destroy(offsets);
    for (int attempt = 0;; attempt++) {
        e = rd_kafka_commit_transaction(l->producer, 60000);
        if (!e)
            break;
        if (rd_kafka_error_is_retriable(e) && attempt < 5) {
            rd_kafka_error_destroy(e);
            continue;
        }
        return txn_failed(l, e, "commit_transaction");
    }
    pause_held(l);
    return 0;
}

/* The recovery step that is due, if any. Returns 1 while a recovery is still owed (nothing may
 * be applied: the poll only keeps this member in its group). */
static int recover_step(ll_loop *l)
{
    if (!l->producer_broken && !l->rewind_pending)
        return 0;
    if (now_ms() >= l->recover_at_ms) {
        if (l->producer_broken)
            recreate_producer(l);
        else
            rewind_to_committed(l);
    }
    return l->producer_broken || l->rewind_pending;
}

int ll_loop_run(ll_loop *l)
{
    rd_kafka_message_t **batch = calloc((size_t)l->batch_max, sizeof *batch);
    while (!l->stop && !l->fatal) {
        int recovering = recover_step(l);
        if (!recovering)
            resume_due(l);
        size_t n = 0;
        unsigned gen = l->rebalance_gen;
        rd_kafka_message_t *rkm = rd_kafka_consumer_poll(l->consumer, (int)l->poll_ms);
        while (rkm) {
            if (rkm->err) {
                if (rkm->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                    ll_log(LL_WARN, NULL, "consumer_error", "%s", rd_kafka_message_errstr(rkm));
                rd_kafka_message_destroy(rkm);
            } else {
                batch[n++] = rkm;
            }
            if (n >= (size_t)l->batch_max)
                break;
            rkm = rd_kafka_consumer_poll(l->consumer, 0);
        }
        if (l->producer)
            rd_kafka_poll(l->producer, 0);
        if (n > 0 && (recovering || l->producer_broken || l->rewind_pending)) {
            /* fetched before the pause took effect: it comes again from the committed offset */
        } else if (n > 0 && gen == l->rebalance_gen) {
            process_batch(l, batch, n);
        } else if (n > 0) {
            /* A rebalance while the batch was collected: drop the batch. Messages fetched under
             * the old assignment come again from the committed offsets of the new one, but those
             * fetched under the new assignment already moved its position past themselves:
             * rewind, or they would be skipped and a later offset committed over them. */
            ll_log(LL_INFO, NULL, "batch_dropped",
                   "rebalance during the poll: %zu messages dropped, rewinding", n);
            rewind_to_committed(l);
        }
        for (size_t i = 0; i < n; i++)
            rd_kafka_message_destroy(batch[i]);
    }
    free(batch);
    return l->fatal ? 2 : 0;
}
