/*
 * kloop_setup.c - the consumer loop's set-up (kloop_int.h): its configuration keys and their
 * ranges (LL_LOOP_CONFIG_KEYS), the topics, schemas and dead-letter limits, the database and the
 * Kafka clients (kloop_clients.c) made and freed, and the replies the services build
 * (ll_reply_new). The run loop itself is kloop.c.
 */
#include "kloop_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ll/dlq.h"
#include "ll/kclient.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/registry.h"
#include "ll/rules.h"
#include "ll/topics.h"

const ll_config_key LL_LOOP_CONFIG_KEYS[] = {
    {"service.instance_id", NULL, false,
     "stable id of this instance (transactional.id suffix); default: host name", LL_CONFIG_NO_RANGE},
    {"db.conninfo", NULL, true, "libpq conninfo of the service's PostgreSQL role", LL_CONFIG_NO_RANGE},
    LL_DB_TX_ATTEMPTS_KEY,
    LL_TOPIC_KEYS,
    {"schema.ids_file", NULL, false, "JSON id->.avsc table for the Confluent framing", LL_CONFIG_NO_RANGE},
    LL_REGISTRY_CONFIG_KEYS,
    {"loop.batch_max", "240", false,
     "messages per poll batch, held in memory: each holds about 4 KiB while its batch runs", LL_CONFIG_INT, 1,
     LL_BATCH_MAX},
    {"loop.poll", "PT0.1S", false, "poll wait", LL_CONFIG_NO_RANGE},
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
     "how long a message waits for its prerequisite before it is dead-lettered", LL_CONFIG_NO_RANGE},
    {"loop.retry_backoff_min", "PT0.2S", false, "first pause of a held run", LL_CONFIG_NO_RANGE},
    {"loop.retry_backoff_max", "PT5S", false, "longest pause of a held run", LL_CONFIG_NO_RANGE},
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
     LL_CONFIG_NO_RANGE},
    {"loop.position_check_interval", "PT5S", false,
     "how often, while no input comes, the ledger's read positions of the assigned partitions are compared"
     " with the ones this instance last read or wrote, so that a database that went back in time behind an"
     " unchanged connection (a pooler after a failover) is found without new input; 0: only at the next"
     " write (docs/design.md §5)",
     LL_CONFIG_NO_RANGE},
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
        ll_config_bool(cfg, "loop.overlap_commit", &l->overlap_commit, err, errlen) ||
        ll_config_int(cfg, "fault.crash_after_db_commits", &l->crash_after, err, errlen) ||
        ll_config_int(cfg, "db.tx_attempts", &attempts, err, errlen) || load_io(l, inputs, n, err, errlen)) {
        ll_loop_free(l);
        return NULL;
    }
    const char *missing = ll_config_get(cfg, "loop.position_missing");
    if (!missing || (strcmp(missing, "earliest") != 0 && strcmp(missing, "kafka") != 0)) {
        snprintf(err, errlen, "loop.position_missing must be earliest or kafka");
        ll_loop_free(l);
        return NULL;
    }
    l->position_missing_kafka = strcmp(missing, "kafka") == 0;
    if (io != &LL_LOOP_IO_REAL) {
        snprintf(l->group, sizeof l->group, "%s", service);
        return l;
    }
    if (ll_db_open(&l->db, ll_config_get(cfg, "db.conninfo"), service, (int)attempts) != LL_DB_OK)
        ll_log(LL_WARN, NULL, "db_unavailable", "database not reachable at start: %s (will retry)",
               l->db.err.message);
    if (ll_db_configure_timeouts(&l->db, cfg, err, errlen) != 0) {
        ll_loop_free(l);
        return NULL;
    }
    if (ll_loop_make_clients(l, err, errlen) != 0) {
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
    if (ll_loop_commit_wait(l) != 0)
        ll_loop_commit_failed(l);
    ll_loop_staged_drop(l);
    free(l->staged);
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
    ll_loop_forget_parts(l);
    free(l->parts);
    ll_schema_ids_free(l->ids);
    ll_registry_free(l->registry);
    ll_db_close(&l->db);
    if (l->commit_err) /* a commit that failed while the consumer closed */
        rd_kafka_error_destroy(l->commit_err);
    free(l);
}

/* ---- replies ------------------------------------------------------------------------------- */

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
