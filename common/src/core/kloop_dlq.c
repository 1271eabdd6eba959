/*
 * kloop_dlq.c - dead letters of the loop (docs/contract.md K§4): a message that cannot be applied
 * at all gets a DEAD_LETTER event in load_event, written in the batch's database transaction
 * (its id is a name-based UUID of topic/partition/offset, so a replay writes it once), and after
 * that transaction commits, a record on the dead-letter topic with the original key, value and
 * headers plus ll.* headers, staged for the Kafka transaction that commits its offset. The record always fits
 * (dlq.h, docs/design.md §3): what does not fit is left out and named.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kloop_int.h"
#include "ll/dlq.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/rules.h"

static const ll_stmt ST_DEAD_LETTER_EVENT = {
    "kloop_dead_letter_event",
    "INSERT INTO nifi_ops.load_event (event_id, event_level, event_name, run_id, process_group,"
    " processor_name, error_class, error_code, message, details)"
    " VALUES ($1::uuid, 'ERROR', 'DEAD_LETTER', $2::uuid, 'LOADLEDGER', $3, 'DEAD_LETTER', $4,"
    " left($5, 2000), $6::jsonb) ON CONFLICT (event_id) DO NOTHING",
    6};

/* The dead-letter reason as a header: at most this many bytes, cut on a UTF-8 boundary. */
#define DL_REASON_MAX 1000

int ll_loop_dead_letter_event(ll_loop *l, const lmsg *m, const char *run_id, const char *code,
                              const char *reason)
{
    const char *topic = m->ps->topic;
    char coord[400], event_id[37], canon[37];
    snprintf(coord, sizeof coord, "dead-letter/%s/%d/%lld", topic, (int)m->ps->partition,
             (long long)m->offset);
    ll_uuid_v5(LL_UUID_NAMESPACE, coord, event_id);
    json_t *details =
        json_pack("{s:s,s:i,s:I,s:s}", "sourceTopic", topic, "sourcePartition", (int)m->ps->partition,
                  "sourceOffset", (json_int_t)m->offset, "service", l->service);
    char *dj = json_dumps(details, JSON_COMPACT);
    json_decref(details);
    int have_run = run_id && ll_uuid_canonical(run_id, canon) == 0;
    const char *params[6] = {event_id, have_run ? canon : NULL, l->service, code, reason, dj};
    PGresult *r = l->kio->db_exec(&l->db, &ST_DEAD_LETTER_EVENT, params);
    free(dj);
    if (!r)
        return -1;
    PQclear(r);
    ll_log_ctx ctx = {have_run ? canon : NULL, NULL, topic, m->ps->partition, m->offset};
    ll_log(LL_ERROR, &ctx, "dead_letter", "%s: %s", code, reason);
    return 0;
}

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

/* The message's original headers (borrowed), or NULL. */
static const rd_kafka_headers_t *orig_headers(const ll_loop *l, const lmsg *m)
{
    rd_kafka_headers_t *h = NULL;
    if (m->hdrs)
        return m->hdrs;
    if (m->rkm && l->kio->msg_headers(m->rkm, &h) == RD_KAFKA_RESP_ERR_NO_ERROR)
        return h;
    return NULL;
}

void ll_loop_dead_letter_stage(ll_loop *l, const lmsg *m, const char *code, const char *reason)
{
    char ts[40], why[DL_REASON_MAX + 1], size[32], sha[65] = "", part[16], off[32];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(part, sizeof part, "%d", (int)m->ps->partition);
    snprintf(off, sizeof off, "%lld", (long long)m->offset);
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
    rd_kafka_header_add(own, "ll.source.topic", -1, m->ps->topic, -1);
    rd_kafka_header_add(own, "ll.source.partition", -1, part, -1);
    rd_kafka_header_add(own, "ll.source.offset", -1, off, -1);
    rd_kafka_header_add(own, "ll.service", -1, l->service, -1);
    rd_kafka_header_add(own, "ll.dead_at", -1, ts, -1);
    size_t own_len = headers_size(own) + 200; /* room for the ll.payload.* headers */
    const rd_kafka_headers_t *orig = orig_headers(l, m);
    ll_dlq_fit fit;
    ll_dlq_fit_decide(m->key_len, m->len, headers_size(orig), own_len, l->dlq_limit, &fit);

    rd_kafka_headers_t *h = fit.keep_headers && orig ? rd_kafka_headers_copy(orig) : rd_kafka_headers_new(12);
    const char *name;
    const void *val;
    size_t vlen;
    for (size_t i = 0; rd_kafka_header_get_all(own, i, &name, &val, &vlen) == RD_KAFKA_RESP_ERR_NO_ERROR; i++)
        rd_kafka_header_add(h, name, -1, val, (ssize_t)vlen);
    rd_kafka_headers_destroy(own);
    if (!fit.keep_value) {
        snprintf(size, sizeof size, "%zu", m->len);
        ll_sha256_hex(m->value, m->value ? m->len : 0, sha);
        rd_kafka_header_add(h, "ll.payload.omitted", -1,
                            "payload omitted: the record would exceed the dead-letter limit", -1);
        rd_kafka_header_add(h, "ll.payload.size", -1, size, -1);
        rd_kafka_header_add(h, "ll.payload.sha256", -1, sha, -1);
        ll_log_ctx ctx = {NULL, NULL, m->ps->topic, m->ps->partition, m->offset};
        ll_log(LL_WARN, &ctx, "dead_letter_payload_omitted",
               "value of %zu bytes (sha256 %s) not copied: over %zu bytes", m->len, sha, l->dlq_limit);
    }
    if (!fit.keep_headers && orig)
        rd_kafka_header_add(h, "ll.headers.omitted", -1, "original headers omitted (size)", -1);
    if (!fit.keep_key && m->key)
        rd_kafka_header_add(h, "ll.key.omitted", -1, "original key omitted (size)", -1);
    /* counted when the transaction commits, under a bounded code label */
    ll_loop_stage_record(l, l->dlq_topic, fit.keep_key ? m->key : NULL, fit.keep_key ? m->key_len : 0,
                         fit.keep_value ? (void *)m->value : NULL, fit.keep_value ? m->len : 0, h, 0,
                         m->io->topic, NULL, ll_obs_code_ok(code) ? code : "OTHER");
}
