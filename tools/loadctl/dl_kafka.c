/*
 * dl_kafka.c - what the dead-letter commands share (deadletters.h): the configuration, the
 * bounded read_committed reader of the dead-letter topic, one record by its coordinates, and the
 * schema and framing of a source topic. The reader has a group id of its own, assigns
 * partitions and never commits.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "deadletters.h"
#include "ll/clock.h"
#include "ll/kloop.h"
#include "ll/rules.h"
#include "ll/svc.h"
#include "ll/topics.h"
#include "kreader.h"
#include "routes.h"

#define KAFKA_WAIT_MS 10000

int dl_open(const lc_opts *o, const char *config, dl_ctx *c)
{
    memset(c, 0, sizeof *c);
    char err[512];
    c->keys = ll_config_keys_merge(LL_LOOP_CONFIG_KEYS, LL_DB_TIMEOUT_KEYS, NULL);
    for (size_t i = 0; c->keys && c->keys[i].key; i++)
        c->keys[i].required = false;
    c->cfg = c->keys ? ll_config_load(config, c->keys, LL_ALL_TOPICS, err, sizeof err) : NULL;
    if (!c->cfg) {
        lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL, "%s", c->keys ? err : "out of memory");
        dl_close(c);
        return LC_USAGE;
    }
    if (!ll_config_get(c->cfg, "kafka.bootstrap.servers")) {
        lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL,
                "no broker: give --config FILE with kafka.bootstrap.servers (or "
                "LOADLEDGER_KAFKA__BOOTSTRAP__SERVERS)");
        dl_close(c);
        return LC_USAGE;
    }
    const char *ids_file = ll_config_get(c->cfg, "schema.ids_file");
    if (ids_file && *ids_file && !(c->ids = ll_schema_ids_load(ids_file, err, sizeof err))) {
        lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL, "schema.ids_file: %s", err);
        dl_close(c);
        return LC_USAGE;
    }
    ll_topic_name(c->cfg, "dead-letters", c->dlq, sizeof c->dlq);
    return LC_OK;
}

void dl_close(dl_ctx *c)
{
    for (size_t i = 0; i < c->n_src; i++)
        ll_schema_free(c->src[i].schema);
    ll_schema_ids_free(c->ids);
    ll_config_free(c->cfg);
    free(c->keys);
    memset(c, 0, sizeof *c);
}

int dl_parse_bounds(const lc_opts *o, const char *max_records, const char *timeout, dl_bounds *b)
{
    long n;
    if (lc_parse_int(max_records, 1, 100000000, &n) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--max-records must be 1..100000000");
    if (lc_parse_duration(timeout, &b->timeout_ms) != 0 || b->timeout_ms <= 0 || b->timeout_ms > 86400000)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--timeout must be a duration up to one day");
    b->max_records = n;
    return LC_OK;
}

rd_kafka_t *dl_consumer(const dl_ctx *c, const char *group, char *err, size_t errlen)
{
    return lc_reader_new(c->cfg, group, err, errlen);
}

void dl_record_clear(dl_record *d)
{
    free(d->reason);
    free(d->key);
    free(d->value);
    if (d->headers)
        rd_kafka_headers_destroy(d->headers);
    memset(d, 0, sizeof *d);
}

/* A header's last value into buf (cut to fit), "" when absent. */
static void hdr(const rd_kafka_headers_t *h, const char *name, char *buf, size_t len)
{
    const void *val;
    size_t vlen;
    buf[0] = '\0';
    if (!h || rd_kafka_header_get_last(h, name, &val, &vlen) != RD_KAFKA_RESP_ERR_NO_ERROR || !val)
        return;
    if (vlen >= len)
        vlen = len - 1;
    memcpy(buf, val, vlen);
    buf[vlen] = '\0';
}

static void *dup_bytes(const void *p, size_t n)
{
    if (!p)
        return NULL;
    void *q = malloc(n ? n : 1);
    if (!q)
        abort();
    memcpy(q, p, n);
    return q;
}

void dl_record_copy(dl_record *dst, const dl_record *src)
{
    *dst = *src;
    dst->reason = strdup(src->reason ? src->reason : "");
    if (!dst->reason)
        abort();
    dst->key = dup_bytes(src->key, src->key_len);
    dst->value = dup_bytes(src->value, src->value_len);
    dst->headers = src->headers ? rd_kafka_headers_copy(src->headers) : NULL;
}

/* Fills d from a consumed message (copies). */
static void fill(dl_record *d, const rd_kafka_message_t *m)
{
    memset(d, 0, sizeof *d);
    snprintf(d->topic, sizeof d->topic, "%s", rd_kafka_topic_name(m->rkt));
    d->partition = m->partition;
    d->offset = m->offset;
    rd_kafka_headers_t *h = NULL;
    if (rd_kafka_message_headers(m, &h) == RD_KAFKA_RESP_ERR_NO_ERROR && h)
        d->headers = rd_kafka_headers_copy(h);
    char num[32], reason[1100];
    hdr(d->headers, "ll.source.topic", d->src_topic, sizeof d->src_topic);
    hdr(d->headers, "ll.service", d->service, sizeof d->service);
    hdr(d->headers, "ll.error.code", d->code, sizeof d->code);
    hdr(d->headers, "ll.dead_at", d->dead_at, sizeof d->dead_at);
    hdr(d->headers, "ll.error.message", reason, sizeof reason);
    if (!(d->reason = strdup(reason)))
        abort();
    long v;
    hdr(d->headers, "ll.source.partition", num, sizeof num);
    d->src_partition = lc_parse_int(num, 0, INT32_MAX, &v) == 0 ? (int32_t)v : -1;
    hdr(d->headers, "ll.source.offset", num, sizeof num);
    d->src_offset = lc_parse_int(num, 0, INT64_MAX, &v) == 0 ? v : -1;
    hdr(d->headers, "ll.payload.omitted", num, sizeof num);
    d->value_omitted = num[0] != '\0';
    d->key = dup_bytes(m->key, m->key_len);
    d->key_len = m->key ? m->key_len : 0;
    d->value = dup_bytes(m->payload, m->len);
    d->value_len = m->payload ? m->len : 0;
}

int dl_scan(const dl_ctx *c, const dl_bounds *b, int (*fn)(const dl_record *d, void *arg), void *arg,
            bool *bounded, char *err, size_t errlen)
{
    return dl_scan_topic(c, c->dlq, b, fn, arg, bounded, err, errlen);
}

int dl_scan_topic(const dl_ctx *c, const char *topic, const dl_bounds *b,
                  int (*fn)(const dl_record *d, void *arg), void *arg, bool *bounded, char *err,
                  size_t errlen)
{
    *bounded = false;
    rd_kafka_t *rk = dl_consumer(c, "loadctl-dead-letters", err, errlen);
    if (!rk)
        return -1;
    int n = lc_topic_partitions(rk, topic, lc_broker_wait_ms(b->timeout_ms), err, errlen), rc = -1;
    int64_t *end = n > 0 ? calloc((size_t)n, sizeof *end) : NULL;
    rd_kafka_topic_partition_list_t *asg = rd_kafka_topic_partition_list_new(n > 0 ? n : 1);
    if (n < 0)
        goto out;
    int open = 0;
    for (int p = 0; p < n; p++) {
        int64_t lo, hi;
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, lc_broker_wait_ms(b->timeout_ms));
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(err, errlen, "watermarks of %s [%d]: %s", topic, p, rd_kafka_err2str(e));
            goto out;
        }
        end[p] = hi;
        if (lo < hi) {
            rd_kafka_topic_partition_list_add(asg, topic, p)->offset = lo;
            open++;
        }
    }
    if (open && rd_kafka_assign(rk, asg) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "assign %s failed", topic);
        goto out;
    }
    int64_t deadline = ll_now_ms() + b->timeout_ms, records = 0;
    while (open > 0) {
        if (records >= b->max_records || ll_now_ms() >= deadline) {
            *bounded = true;
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (!m)
            continue;
        int p = m->partition;
        if (p < 0 || p >= n || end[p] < 0 || (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)) {
            rd_kafka_message_destroy(m);
            continue;
        }
        bool stop = false;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF || m->offset >= end[p]) {
            end[p] = -1;
            open--;
        } else {
            records++;
            dl_record d;
            fill(&d, m);
            stop = fn(&d, arg) != 0;
            dl_record_clear(&d);
            if (m->offset + 1 >= end[p]) {
                end[p] = -1;
                open--;
            }
        }
        rd_kafka_message_destroy(m);
        if (stop)
            break;
    }
    rc = 0;
out:
    rd_kafka_topic_partition_list_destroy(asg);
    free(end);
    lc_reader_close(rk);
    return rc;
}

int dl_fetch(const dl_ctx *c, int32_t partition, int64_t offset, dl_record *d, char *err, size_t errlen)
{
    rd_kafka_t *rk = dl_consumer(c, "loadctl-dead-letters", err, errlen);
    if (!rk)
        return -1;
    int64_t lo, hi;
    int rc = -1;
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, c->dlq, partition, &lo, &hi, KAFKA_WAIT_MS);
    if (e == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION || e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        rc = 0;
        goto out;
    }
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        snprintf(err, errlen, "watermarks of %s [%" PRId32 "]: %s", c->dlq, partition, rd_kafka_err2str(e));
        goto out;
    }
    if (offset < lo || offset >= hi) {
        rc = 0;
        goto out;
    }
    rd_kafka_topic_partition_list_t *asg = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(asg, c->dlq, partition)->offset = offset;
    rd_kafka_assign(rk, asg);
    rd_kafka_topic_partition_list_destroy(asg);
    int64_t deadline = ll_now_ms() + KAFKA_WAIT_MS;
    rc = 0;
    while (ll_now_ms() < deadline) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (!m)
            continue;
        bool last = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF || (!m->err && m->offset >= offset);
        if (!m->err && m->offset == offset) {
            fill(d, m);
            rc = 1;
        }
        rd_kafka_message_destroy(m);
        if (last)
            goto out;
    }
    snprintf(err, errlen, "%s [%" PRId32 "] offset %" PRId64 ": no answer within %d ms", c->dlq, partition,
             offset, KAFKA_WAIT_MS);
    rc = -1;
out:
    lc_reader_close(rk);
    return rc;
}

const dl_source *dl_source_get(dl_ctx *c, const char *topic, char *err, size_t errlen)
{
    for (size_t i = 0; i < c->n_src; i++)
        if (strcmp(c->src[i].topic, topic) == 0)
            return &c->src[i];
    if (c->n_src == DL_MAX_SOURCES) {
        snprintf(err, errlen, "more than %d source topics", DL_MAX_SOURCES);
        return NULL;
    }
    dl_source *s = &c->src[c->n_src];
    memset(s, 0, sizeof *s);
    snprintf(s->topic, sizeof s->topic, "%s", topic);
    s->schema_id = -1;
    for (size_t i = 0; i < (size_t)LC_N_ROUTES; i++) {
        char name[256];
        ll_topic_name(c->cfg, LC_ROUTES[i].input, name, sizeof name);
        if (strcmp(name, topic) != 0)
            continue;
        s->logical = LC_ROUTES[i].input;
        if (!(s->schema = ll_topic_schema_load(c->cfg, LC_ROUTES[i].input_schema, err, errlen)) ||
            ll_topic_framing(c->cfg, s->logical, &s->framing, err, errlen) != 0) {
            ll_schema_free(s->schema);
            return NULL;
        }
        char key[300];
        snprintf(key, sizeof key, "topic.%s.schema_id", s->logical);
        const char *sid = ll_config_get(c->cfg, key);
        long v;
        if (sid && *sid && lc_parse_int(sid, 0, INT32_MAX, &v) == 0)
            s->schema_id = (int32_t)v;
        break;
    }
    return &c->src[c->n_src++];
}

json_t *dl_source_decode(const dl_ctx *c, const dl_source *s, const void *buf, size_t len, char *err,
                         size_t errlen)
{
    if (!s->schema) {
        snprintf(err, errlen, "the source topic is none of the services' inputs");
        return NULL;
    }
    ll_decode_opts d = {.framing = s->framing, .reader = s->schema, .ids = c->ids};
    json_t *v = NULL;
    if (ll_decode(&d, buf, len, &v, err, errlen) != 0)
        return NULL;
    return v;
}

json_t *dl_record_json(const dl_record *d)
{
    json_t *j = json_object();
    json_object_set_new(j, "topic", lc_json_str(d->topic));
    json_object_set_new(j, "partition", json_integer(d->partition));
    json_object_set_new(j, "offset", json_integer(d->offset));
    json_object_set_new(j, "sourceTopic", d->src_topic[0] ? lc_json_str(d->src_topic) : json_null());
    json_object_set_new(j, "sourcePartition",
                        d->src_partition >= 0 ? json_integer(d->src_partition) : json_null());
    json_object_set_new(j, "sourceOffset", d->src_offset >= 0 ? json_integer(d->src_offset) : json_null());
    json_object_set_new(j, "service", d->service[0] ? lc_json_str(d->service) : json_null());
    json_object_set_new(j, "code", d->code[0] ? lc_json_str(d->code) : json_null());
    json_object_set_new(j, "reason", lc_json_str(d->reason ? d->reason : ""));
    json_object_set_new(j, "deadAt", d->dead_at[0] ? lc_json_str(d->dead_at) : json_null());
    json_object_set_new(j, "valueOmitted", json_boolean(d->value_omitted));
    return j;
}

void dl_run_of(dl_ctx *c, const dl_record *d, char *out)
{
    out[0] = '\0';
    char err[256];
    const dl_source *s = d->value && d->src_topic[0] ? dl_source_get(c, d->src_topic, err, sizeof err) : NULL;
    json_t *v = s && s->schema ? dl_source_decode(c, s, d->value, d->value_len, err, sizeof err) : NULL;
    const char *run = json_string_value(json_object_get(v, "runId"));
    if (run && ll_uuid_canonical(run, out) != 0)
        out[0] = '\0';
    json_decref(v);
    if (!out[0] && d->key && d->key_len == 36) {
        char k[37];
        memcpy(k, d->key, 36);
        k[36] = '\0';
        if (ll_uuid_canonical(k, out) != 0)
            out[0] = '\0';
    }
}
