/*
 * sink_kafka.c - delivers outbox commands to Kafka (the default sink, docs/contract.md K§2).
 *
 * An idempotent producer with acks=all; a command counts as delivered (SENT) only when the
 * broker acknowledged it. Key = run id; headers jobKey, runId, dispatchId, dispatchType so that
 * one NiFi control flow can route commands without decoding them. A duplicate (a lease expired
 * mid-send, a resend) is harmless: validation start and claims are CAS at the receiver.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher.h"
#include "ll/kclient.h"
#include "ll/kloop.h"
#include "ll/log.h"
#include "ll/registry.h"
#include "ll/topics.h"

struct pass_ctx {
    rd_kafka_conf_t *conf;
    char *err;
    size_t errlen;
    int failed;
};

static void pass(const char *key, const char *value, void *arg)
{
    struct pass_ctx *c = arg;
    char e[256];
    if (!c->failed && rd_kafka_conf_set(c->conf, key, value, e, sizeof e) != RD_KAFKA_CONF_OK) {
        snprintf(c->err, c->errlen, "kafka.%s: %s", key, e);
        c->failed = 1;
    }
}

/*
 * With schema.registry.url set, each Confluent-framed command topic's schema is registered (or
 * found) under "<topic>-value", or only looked up there with schema.registry.auto.register.schemas =
 * false, and the commands carry that id (docs/design.md §9: NiFi's registry-backed AvroReader reads
 * them); without it, topic.<commands>.schema_id as before. 0, or -1 with err.
 */
static int command_ids(kafka_sink *k, const ll_config *cfg, char *err, size_t errlen)
{
    ll_registry *r = NULL;
    if (ll_registry_from_config(cfg, &r, err, errlen))
        return -1;
    int rc = 0;
    if (r && k->validate_enc.framing == LL_FRAMING_CONFLUENT)
        rc = ll_registry_topic_id(r, k->validate_topic, k->validate_schema, &k->validate_enc.schema_id, err,
                                  errlen);
    if (r && rc == 0 && k->reissue_enc.framing == LL_FRAMING_CONFLUENT)
        rc = ll_registry_topic_id(r, k->reissue_topic, k->reissue_schema, &k->reissue_enc.schema_id, err,
                                  errlen);
    ll_registry_free(r);
    return rc;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    leased *l = m->_private;
    if (!l)
        return;
    if (m->err) {
        l->http_status = 0;
        snprintf(l->error, sizeof l->error, "kafka delivery failed: %s", rd_kafka_err2str(m->err));
    } else {
        l->http_status = 200;
        l->error[0] = '\0';
    }
}

int sink_open(kafka_sink *k, const ll_config *cfg, char *err, size_t errlen)
{
    memset(k, 0, sizeof *k);
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    ll_kafka_log_to_json(conf);
    struct pass_ctx c = {conf, err, errlen, 0};
    char e[256];
    ll_config_foreach_prefix(cfg, "kafka.", pass, &c);
    if (c.failed || rd_kafka_conf_set(conf, "enable.idempotence", "true", e, sizeof e) ||
        rd_kafka_conf_set(conf, "acks", "all", e, sizeof e)) {
        if (!c.failed)
            snprintf(err, errlen, "producer configuration: %s", e);
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    if (!(k->producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof e))) {
        snprintf(err, errlen, "producer: %s", e);
        return -1;
    }
    ll_topic_name(cfg, "validate-run-commands", k->validate_topic, sizeof k->validate_topic);
    ll_topic_name(cfg, "reissue-partition-commands", k->reissue_topic, sizeof k->reissue_topic);
    if (!(k->validate_schema = ll_topic_schema_load(cfg, "ValidateRunCommand.avsc", err, errlen)) ||
        !(k->reissue_schema = ll_topic_schema_load(cfg, "ReissuePartitionCommand.avsc", err, errlen)) ||
        ll_topic_framing(cfg, "validate-run-commands", &k->validate_enc.framing, err, errlen) ||
        ll_topic_framing(cfg, "reissue-partition-commands", &k->reissue_enc.framing, err, errlen))
        return -1;
    k->validate_enc.schema = k->validate_schema;
    k->reissue_enc.schema = k->reissue_schema;
    int64_t id = 0;
    if (ll_config_get(cfg, "topic.validate-run-commands.schema_id") &&
        ll_config_int(cfg, "topic.validate-run-commands.schema_id", &id, err, errlen) == 0)
        k->validate_enc.schema_id = (int32_t)id;
    if (ll_config_get(cfg, "topic.reissue-partition-commands.schema_id") &&
        ll_config_int(cfg, "topic.reissue-partition-commands.schema_id", &id, err, errlen) == 0)
        k->reissue_enc.schema_id = (int32_t)id;
    return command_ids(k, cfg, err, errlen);
}

static void publish(kafka_sink *k, leased *l)
{
    bool validate = strcmp(l->type, "VALIDATE_RUN") == 0;
    const ll_encode_opts *enc = validate ? &k->validate_enc : &k->reissue_enc;
    unsigned char *buf = NULL;
    size_t len = 0;
    char err[256];
    l->http_status = 0;
    if (ll_encode(enc, l->command, &buf, &len, err, sizeof err) != 0) {
        /* a command that does not fit its schema cannot be delivered: DEAD, not retried */
        json_decref(l->command);
        l->command = NULL;
        snprintf(l->build_error, sizeof l->build_error, "build failed: %.200s", err);
        return;
    }
    rd_kafka_headers_t *h = rd_kafka_headers_new(4);
    rd_kafka_header_add(h, "jobKey", -1, l->job_key, -1);
    rd_kafka_header_add(h, "runId", -1, l->run_id, -1);
    rd_kafka_header_add(h, "dispatchId", -1, l->dispatch_id, -1);
    rd_kafka_header_add(h, "dispatchType", -1, l->type, -1);
    snprintf(l->error, sizeof l->error, "kafka delivery not confirmed in time");
    rd_kafka_resp_err_t e =
        rd_kafka_producev(k->producer, RD_KAFKA_V_TOPIC(validate ? k->validate_topic : k->reissue_topic),
                          RD_KAFKA_V_KEY(l->run_id, strlen(l->run_id)), RD_KAFKA_V_VALUE(buf, len),
                          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE), RD_KAFKA_V_HEADERS(h),
                          RD_KAFKA_V_OPAQUE(l), RD_KAFKA_V_END);
    if (e) {
        rd_kafka_headers_destroy(h);
        free(buf);
        snprintf(l->error, sizeof l->error, "kafka produce failed: %s", rd_kafka_err2str(e));
    }
}

void sink_deliver(kafka_sink *k, leased *rows, size_t n, int64_t delivery_ms)
{
    for (size_t i = 0; i < n; i++)
        if (rows[i].command)
            publish(k, &rows[i]);
    /* waits for every delivery report; what is not confirmed in time counts as a failed send */
    if (rd_kafka_flush(k->producer, (int)delivery_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_purge(k->producer, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_poll(k->producer, 0);
    }
}

void sink_close(kafka_sink *k)
{
    if (k->producer) {
        rd_kafka_flush(k->producer, 10000);
        rd_kafka_destroy(k->producer);
    }
    ll_schema_free(k->validate_schema);
    ll_schema_free(k->reissue_schema);
    memset(k, 0, sizeof *k);
}
