/*
 * redrive_publish.c - the publishing step of `loadctl redrive` (redrive_publish.h): a
 * transactional producer of its own, each chosen record produced to its source topic and
 * partition with the original key and headers plus ll.redrive.of/at/by/reason, committed in one
 * Kafka transaction (or aborted: nothing visible); the delivery reports give the new offsets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ll/kclient.h"
#include "ll/redrive.h"
#include "redrive_publish.h"

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    item *it = m->_private;
    if (!it)
        return;
    it->err = m->err;
    it->new_offset = m->err ? -1 : m->offset;
}

static void copy_kafka(const char *key, const char *value, void *arg)
{
    if (strcmp(key, "group.id") == 0 || strcmp(key, "transactional.id") == 0 ||
        strcmp(key, "group.instance.id") == 0 || strncmp(key, "isolation", 9) == 0 ||
        strncmp(key, "enable.auto", 11) == 0 || strncmp(key, "auto.", 5) == 0)
        return;
    char e[256];
    rd_kafka_conf_set((rd_kafka_conf_t *)arg, key, value, e, sizeof e);
}

/* The headers of the new record: the original's except ll.*, then the link and who. */
static rd_kafka_headers_t *new_headers(const item *it, const char *at, const char *by, const char *reason)
{
    rd_kafka_headers_t *h = rd_kafka_headers_new(8);
    const char *name;
    const void *val;
    size_t vlen;
    for (size_t i = 0; it->d.headers && rd_kafka_header_get_all(it->d.headers, i, &name, &val, &vlen) ==
                                            RD_KAFKA_RESP_ERR_NO_ERROR;
         i++)
        if (ll_redrive_keeps_header(name))
            rd_kafka_header_add(h, name, -1, val, (ssize_t)vlen);
    rd_kafka_header_add(h, LL_REDRIVE_HEADER, -1, it->link, -1);
    rd_kafka_header_add(h, "ll.redrive.at", -1, at, -1);
    rd_kafka_header_add(h, "ll.redrive.by", -1, by, -1);
    if (reason)
        rd_kafka_header_add(h, "ll.redrive.reason", -1, reason, -1);
    return h;
}

/* Publishes every item in one transaction. 0, or -1 with err (then nothing is visible). */
int lc_redrive_publish(const dl_ctx *c, item *items, int n, const char *reason, char *err, size_t errlen)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    ll_kafka_log_to_json(conf);
    ll_config_foreach_prefix(c->cfg, "kafka.", copy_kafka, conf);
    char txid[128], host[64] = "host", e[256];
    gethostname(host, sizeof host - 1);
    snprintf(txid, sizeof txid, "loadctl-redrive.%s.%ld.%ld", host, (long)getpid(), (long)time(NULL));
    if (rd_kafka_conf_set(conf, "transactional.id", txid, e, sizeof e) != RD_KAFKA_CONF_OK ||
        rd_kafka_conf_set(conf, "enable.idempotence", "true", e, sizeof e) != RD_KAFKA_CONF_OK) {
        snprintf(err, errlen, "kafka producer: %s", e);
        rd_kafka_conf_destroy(conf);
        return -1;
    }
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof e);
    if (!rk) {
        snprintf(err, errlen, "kafka producer: %s", e);
        return -1;
    }
    char at[40];
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_t *who = lc_audit_details();
    char *by = json_dumps(who, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(who);
    rd_kafka_error_t *x = rd_kafka_init_transactions(rk, TXN_WAIT_MS);
    if (!x)
        x = rd_kafka_begin_transaction(rk);
    int rc = -1;
    if (x) {
        snprintf(err, errlen, "transaction: %s", rd_kafka_error_string(x));
        rd_kafka_error_destroy(x);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        items[i].new_offset = -1;
        rd_kafka_headers_t *h = new_headers(&items[i], at, by ? by : "", reason);
        rd_kafka_resp_err_t pe = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(items[i].d.src_topic), RD_KAFKA_V_PARTITION(items[i].d.src_partition),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(items[i].d.key, items[i].d.key_len),
            RD_KAFKA_V_VALUE(items[i].value, items[i].value_len), RD_KAFKA_V_HEADERS(h),
            RD_KAFKA_V_OPAQUE(&items[i]), RD_KAFKA_V_END);
        if (pe != RD_KAFKA_RESP_ERR_NO_ERROR) {
            rd_kafka_headers_destroy(h);
            snprintf(err, errlen, "produce to %s [%" PRId32 "]: %s", items[i].d.src_topic,
                     items[i].d.src_partition, rd_kafka_err2str(pe));
            goto abort;
        }
    }
    if ((x = rd_kafka_commit_transaction(rk, TXN_WAIT_MS))) {
        snprintf(err, errlen, "commit: %s", rd_kafka_error_string(x));
        rd_kafka_error_destroy(x);
        goto abort;
    }
    rd_kafka_poll(rk, 0); /* serve the delivery reports */
    rc = 0;
    goto out;
abort:
    if ((x = rd_kafka_abort_transaction(rk, TXN_WAIT_MS)))
        rd_kafka_error_destroy(x);
out:
    free(by);
    rd_kafka_destroy(rk);
    return rc;
}
