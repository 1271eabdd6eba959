/*
 * kclient.c - Kafka client settings refused at start, the seek with a real wait, and the
 * classification of fatal producer errors, librdkafka's log lines in the JSON log (kclient.h).
 */
#include "ll/kclient.h"

#include "ll/config.h"

#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A librdkafka boolean property set to a true value (true, 1, yes, on). */
static bool truthy(const char *v)
{
    return strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcasecmp(v, "yes") == 0 ||
           strcasecmp(v, "on") == 0;
}

const char *ll_kconf_refusal(const char *key, const char *value)
{
    const char *v = value ? value : "";
    if (strcmp(key, "enable.auto.commit") == 0 && truthy(v))
        return "offsets are committed only in the Kafka transaction after the database commit";
    if (strcmp(key, "enable.auto.offset.store") == 0 && truthy(v))
        return "offsets are stored only in the Kafka transaction after the database commit";
    if (strcmp(key, "auto.offset.reset") == 0 && strcmp(v, "earliest") != 0 && strcmp(v, "smallest") != 0 &&
        strcmp(v, "beginning") != 0)
        return "a new consumer group must start at the earliest offset, or it skips messages already on the "
               "topic";
    if (strcmp(key, "isolation.level") == 0 && strcmp(v, "read_committed") != 0)
        return "inputs are read committed: an aborted transaction's messages must not be applied";
    if (strcmp(key, "partition.assignment.strategy") == 0 && strstr(v, "cooperative"))
        return "librdkafka 2.0.2 mishandles commits during cooperative rebalances: use range or roundrobin";
    if (strcmp(key, "enable.idempotence") == 0 && !truthy(v))
        return "the transactional producer needs idempotence";
    if (strcmp(key, "transactional.id") == 0)
        return "the transactional id is <group>.<service.instance_id>: set service.instance_id";
    return NULL;
}

/* A configured size below its floor: err says which, and how to fix it. -1. */
static int below(const char *key, int64_t value, const char *unit, int64_t floor, const char *why, char *err,
                 size_t errlen)
{
    snprintf(err, errlen, "kafka.%s = %lld%s is below %lld%s: %s", key, (long long)value, unit,
             (long long)floor, unit, why);
    return -1;
}

int ll_kfetch_settle(int64_t max_message_bytes, ll_kfetch *k, char *err, size_t errlen)
{
    int64_t need = max_message_bytes + LL_KFETCH_HEADROOM; /* one response, one largest message */
    if (!k->partition_fetch_bytes)
        k->partition_fetch_bytes = LL_KFETCH_FETCH_BYTES;
    if (!k->fetch_max_bytes) {
        k->fetch_max_bytes = LL_KFETCH_FETCH_BYTES;
        if (k->fetch_max_bytes < k->partition_fetch_bytes)
            k->fetch_max_bytes = k->partition_fetch_bytes;
        if (k->fetch_max_bytes < k->message_max_bytes)
            k->fetch_max_bytes = k->message_max_bytes;
    } else if (k->fetch_max_bytes < k->message_max_bytes) {
        return below("fetch.max.bytes", k->fetch_max_bytes, "", k->message_max_bytes,
                     "librdkafka requires fetch.max.bytes >= kafka.message.max.bytes; raise it", err, errlen);
    }
    if (!k->message_max_bytes)
        k->message_max_bytes = k->fetch_max_bytes;
    if (!k->queued_max_kbytes)
        k->queued_max_kbytes = LL_KFETCH_QUEUED_FETCHES * ((k->fetch_max_bytes + 1023) / 1024);
    if (!k->queued_min_messages)
        k->queued_min_messages = LL_KFETCH_QUEUED_MIN_MESSAGES;
    if (k->receive_max_bytes && k->receive_max_bytes < need + 512)
        return below("receive.message.max.bytes", k->receive_max_bytes, "", need + 512,
                     "a response with one message of loop.max_message_bytes (plus 64 KiB for its key, "
                     "headers and framing) could not be received; raise it, or lower loop.max_message_bytes",
                     err, errlen);
    if (k->receive_max_bytes && k->receive_max_bytes < k->fetch_max_bytes + 512)
        return below("receive.message.max.bytes", k->receive_max_bytes, "", k->fetch_max_bytes + 512,
                     "a whole fetch response (fetch.max.bytes + 512) must be received; raise it", err,
                     errlen);
    return 0;
}

bool ll_kfetch_wake_due(int64_t run_bytes, int64_t run_msgs, const ll_kfetch *k)
{
    return run_bytes * 2 >= k->queued_max_kbytes * 1024 || run_msgs * 2 >= k->queued_min_messages;
}

int ll_seek_timeout_arg(int rdk_version, int timeout_ms)
{
    if (rdk_version >= 0x02010000 || timeout_ms <= 0)
        return timeout_ms;
    return timeout_ms > INT_MAX / 1000 ? INT_MAX : timeout_ms * 1000;
}

int ll_kafka_seek(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts, int timeout_ms, char *why,
                  size_t whylen)
{
    rd_kafka_error_t *e =
        rd_kafka_seek_partitions(rk, parts, ll_seek_timeout_arg(rd_kafka_version(), timeout_ms));
    if (e) {
        snprintf(why, whylen, "seek: %s", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return -1;
    }
    for (int i = 0; i < parts->cnt; i++)
        if (parts->elems[i].err) {
            snprintf(why, whylen, "seek %s[%d]: %s", parts->elems[i].topic, (int)parts->elems[i].partition,
                     rd_kafka_err2str(parts->elems[i].err));
            return -1;
        }
    return 0;
}

bool ll_kafka_fatal_must_exit(rd_kafka_resp_err_t err)
{
    switch (err) {
    case RD_KAFKA_RESP_ERR__FENCED:
    case RD_KAFKA_RESP_ERR_PRODUCER_FENCED:
    case RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
        return true;
    default:
        return false;
    }
}

/* The value of max.message.bytes in one described resource. 0, or -1 with why. */
static int entry_max_bytes(const rd_kafka_ConfigResource_t *res, int64_t *out, char *why, size_t whylen)
{
    if (rd_kafka_ConfigResource_error(res)) {
        snprintf(why, whylen, "describe %s: %s", rd_kafka_ConfigResource_name(res),
                 rd_kafka_ConfigResource_error_string(res));
        return -1;
    }
    size_t n = 0;
    const rd_kafka_ConfigEntry_t **entries = rd_kafka_ConfigResource_configs(res, &n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(rd_kafka_ConfigEntry_name(entries[i]), "max.message.bytes") == 0 &&
            rd_kafka_ConfigEntry_value(entries[i])) {
            *out = strtoll(rd_kafka_ConfigEntry_value(entries[i]), NULL, 10);
            return *out > 0 ? 0 : -1;
        }
    snprintf(why, whylen, "describe %s: no max.message.bytes", rd_kafka_ConfigResource_name(res));
    return -1;
}

int ll_kafka_topic_max_message_bytes(rd_kafka_t *rk, const char *topic, int timeout_ms, int64_t *out,
                                     char *why, size_t whylen)
{
    char e[256];
    int rc = -1;
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic);
    rd_kafka_AdminOptions_t *opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, e, sizeof e);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DescribeConfigs(rk, &res, 1, opts, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 1000);
    const rd_kafka_DescribeConfigs_result_t *result = ev ? rd_kafka_event_DescribeConfigs_result(ev) : NULL;
    if (!ev) {
        snprintf(why, whylen, "describe %s: timed out", topic);
    } else if (rd_kafka_event_error(ev)) {
        snprintf(why, whylen, "describe %s: %s", topic, rd_kafka_event_error_string(ev));
    } else if (result) {
        size_t n = 0;
        const rd_kafka_ConfigResource_t **rs = rd_kafka_DescribeConfigs_result_resources(result, &n);
        if (n == 1)
            rc = entry_max_bytes(rs[0], out, why, whylen);
        else
            snprintf(why, whylen, "describe %s: %zu resources in the answer", topic, n);
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_ConfigResource_destroy(res);
    return rc;
}

ll_level ll_kafka_log_level(int level)
{
    if (level >= 0 && level <= 3)
        return LL_ERROR;
    if (level == 4)
        return LL_WARN;
    if (level == 5 || level == 6)
        return LL_INFO;
    return LL_DEBUG;
}

/* librdkafka's log callback (rd_kafka_conf_set_log_cb): one JSON line per librdkafka line. Runs
 * on librdkafka's threads. */
static void kafka_log_cb(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    const char *msg = buf ? buf : "";
    size_t len = strnlen(msg, LL_KAFKA_LOG_MAX + 1);
    bool cut = len > LL_KAFKA_LOG_MAX;
    json_t *fields = json_object();
    json_t *jfac = json_string(fac ? fac : "");
    json_t *jname = json_string(rk ? rd_kafka_name(rk) : "");
    json_object_set_new(fields, "fac", jfac ? jfac : json_string("?"));
    json_object_set_new(fields, "client", jname ? jname : json_string("?"));
    ll_log_json(ll_kafka_log_level(level), NULL, "librdkafka", fields, "%.*s%s",
                (int)(cut ? LL_KAFKA_LOG_MAX : len), msg, cut ? "..." : "");
}

void ll_kafka_log_to_json(rd_kafka_conf_t *conf)
{
    rd_kafka_conf_set_log_cb(conf, kafka_log_cb);
}

/* kafka.<key> of the configuration, except what would make a reader commit or join a group as
 * something else. */
static void reader_copy(const char *key, const char *value, void *arg)
{
    if (strcmp(key, "group.id") == 0 || strcmp(key, "transactional.id") == 0 ||
        strcmp(key, "group.instance.id") == 0)
        return;
    char e[256];
    rd_kafka_conf_set((rd_kafka_conf_t *)arg, key, value, e, sizeof e);
}

rd_kafka_t *ll_kafka_reader_new(const struct ll_config *cfg, const char *group, const char *const extra[][2],
                                size_t n_extra, char *err, size_t errlen)
{
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    ll_kafka_log_to_json(c);
    ll_config_foreach_prefix(cfg, "kafka.", reader_copy, c);
    const char *fixed[][2] = {{"group.id", group},
                              {"enable.auto.commit", "false"},
                              {"enable.auto.offset.store", "false"},
                              {"isolation.level", "read_committed"}};
    char e[256];
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0] + n_extra; i++) {
        const char *const *kv =
            i < sizeof fixed / sizeof fixed[0] ? fixed[i] : extra[i - sizeof fixed / sizeof fixed[0]];
        if (rd_kafka_conf_set(c, kv[0], kv[1], e, sizeof e) != RD_KAFKA_CONF_OK) {
            snprintf(err, errlen, "kafka %s: %s", kv[0], e);
            rd_kafka_conf_destroy(c);
            return NULL;
        }
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, e, sizeof e);
    if (!rk)
        snprintf(err, errlen, "kafka consumer: %s", e);
    return rk;
}
