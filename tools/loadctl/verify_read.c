/*
 * verify_read.c - reading for `loadctl verify --topics` (verify_topics.h): every assigned
 * partition up to its end, within max_records and timeout_ms; inputs (a chunk report with its file
 * key), replies (by their source coordinates) and dead letters (by their ll.source.* headers).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/clock.h"
#include "ll/rules.h"
#include "verify_topics.h"

static part *find_part(reader *r, const char *topic, int32_t p)
{
    for (size_t i = 0; i < r->n_parts; i++)
        if (r->parts[i].partition == p && strcmp(vf_topics_topic_of(r, &r->parts[i]), topic) == 0)
            return &r->parts[i];
    return NULL;
}

static int route_of_input(const reader *r, const char *topic)
{
    for (int i = 0; i < LC_N_ROUTES; i++)
        if (strcmp(r->names[i][0], topic) == 0)
            return i;
    return -1;
}

static trace *new_trace(reader *r)
{
    if (r->n_traces == r->cap_traces) {
        r->cap_traces = r->cap_traces ? r->cap_traces * 2 : 1024;
        r->traces = realloc(r->traces, r->cap_traces * sizeof *r->traces);
        if (!r->traces)
            abort();
    }
    trace *t = &r->traces[r->n_traces++];
    memset(t, 0, sizeof *t);
    return t;
}

static void take_input(reader *r, const part *p, const rd_kafka_message_t *m)
{
    if (r->n_inputs == r->cap_inputs) {
        r->cap_inputs = r->cap_inputs ? r->cap_inputs * 2 : 1024;
        r->inputs = realloc(r->inputs, r->cap_inputs * sizeof *r->inputs);
        if (!r->inputs)
            abort();
    }
    input *in = &r->inputs[r->n_inputs++];
    memset(in, 0, sizeof *in);
    in->route = p->route;
    in->partition = p->partition;
    in->offset = m->offset;
    if (p->route != LC_CHUNK_ROUTE)
        return;
    json_t *v = NULL;
    char e[256];
    if (ll_decode(&r->dopts[p->route][0], m->payload, m->len, &v, e, sizeof e) == 0) {
        const char *run = json_string_value(json_object_get(v, "runId"));
        const char *pid = json_string_value(json_object_get(v, "partitionId"));
        json_t *idx = json_object_get(v, "chunkIndex");
        if (run && pid && json_is_integer(idx) && ll_is_uuid(run)) {
            in->run = strdup(run);
            in->pid = strdup(pid);
            in->chunk_index = (int32_t)json_integer_value(idx);
        }
    }
    json_decref(v);
}

static void take_reply(reader *r, const part *p, const rd_kafka_message_t *m)
{
    json_t *v = NULL;
    char e[256];
    if (ll_decode(&r->dopts[p->route][1], m->payload, m->len, &v, e, sizeof e) != 0)
        return; /* not a reply of ours: it names no input */
    const char *src = json_string_value(json_object_get(v, "sourceTopic"));
    json_t *sp = json_object_get(v, "sourcePartition"), *so = json_object_get(v, "sourceOffset");
    const char *outcome = json_string_value(json_object_get(v, "outcome"));
    if (src && json_is_integer(sp) && json_is_integer(so)) {
        trace *t = new_trace(r);
        t->route = route_of_input(r, src);
        t->partition = (int32_t)json_integer_value(sp);
        t->offset = json_integer_value(so);
        snprintf(t->outcome, sizeof t->outcome, "%s", outcome ? outcome : "");
        const char *code = json_string_value(json_object_get(v, "code"));
        snprintf(t->code, sizeof t->code, "%s", code ? code : "");
        /* the exclusive grants of the reply schemas: ClaimDecision, PublishClaimDecision,
         * ValidationStartDecision */
        json_t *g = json_object_get(v, "claimed");
        if (!json_is_boolean(g))
            g = json_object_get(v, "started");
        t->granted = json_is_boolean(g) ? (json_is_true(g) ? LL_GRANT_YES : LL_GRANT_NO) : LL_GRANT_NA;
    }
    json_decref(v);
}

/* A header's value as a NUL-terminated string in buf, or NULL. */
static const char *header(const rd_kafka_message_t *m, const char *name, char *buf, size_t len)
{
    rd_kafka_headers_t *h = NULL;
    const void *val;
    size_t vlen;
    if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(h, name, &val, &vlen) != RD_KAFKA_RESP_ERR_NO_ERROR || !val || vlen >= len)
        return NULL;
    memcpy(buf, val, vlen);
    buf[vlen] = '\0';
    return buf;
}

static void take_dead_letter(reader *r, const rd_kafka_message_t *m)
{
    char topic[256], pb[32], ob[32];
    if (!header(m, "ll.source.topic", topic, sizeof topic) ||
        !header(m, "ll.source.partition", pb, sizeof pb) || !header(m, "ll.source.offset", ob, sizeof ob))
        return;
    trace *t = new_trace(r);
    t->route = route_of_input(r, topic);
    t->partition = (int32_t)strtol(pb, NULL, 10);
    t->offset = strtoll(ob, NULL, 10);
    t->dlq = true;
}

/* Reads until every partition reached its end, or a bound. Returns true when a bound stopped it. */
bool vf_topics_read_all(reader *r, rd_kafka_t *rk, const vf_bounds *b)
{
    int64_t deadline = ll_now_ms() + b->timeout_ms;
    size_t open = 0;
    for (size_t i = 0; i < r->n_parts; i++)
        open += !r->parts[i].done;
    while (open > 0) {
        if (r->records >= b->max_records || ll_now_ms() >= deadline)
            return true;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        if (!m)
            continue;
        part *p = find_part(r, rd_kafka_topic_name(m->rkt), m->partition);
        if (!p || p->done || (m->err && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)) {
            rd_kafka_message_destroy(m);
            continue;
        }
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF || m->offset >= p->end) {
            p->done = true;
        } else {
            r->records++;
            if (p->kind == K_INPUT)
                take_input(r, p, m);
            else if (p->kind == K_REPLY)
                take_reply(r, p, m);
            else
                take_dead_letter(r, m);
            p->done = m->offset + 1 >= p->end;
        }
        if (p->done) {
            open--;
            rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
            rd_kafka_topic_partition_list_add(l, vf_topics_topic_of(r, p), p->partition);
            rd_kafka_pause_partitions(rk, l);
            rd_kafka_topic_partition_list_destroy(l);
        }
        rd_kafka_message_destroy(m);
    }
    return false;
}
