/* kreader.c - loadctl's read_committed topic reader that never commits (kreader.h). */
#include "kreader.h"

#include <stdio.h>
#include <string.h>

#include "ll/kclient.h"

rd_kafka_t *lc_reader_new(const ll_config *cfg, const char *group, char *err, size_t errlen)
{
    static const char *const extra[][2] = {{"enable.partition.eof", "true"},
                                           {"auto.offset.reset", "earliest"}};
    return ll_kafka_reader_new(cfg, group, extra, sizeof extra / sizeof extra[0], err, errlen);
}

int lc_broker_wait_ms(int64_t timeout_ms)
{
    if (timeout_ms < 1)
        return 1;
    return timeout_ms < LC_BROKER_WAIT_MAX_MS ? (int)timeout_ms : LC_BROKER_WAIT_MAX_MS;
}

int lc_topic_partitions(rd_kafka_t *rk, const char *topic, int timeout_ms, char *err, size_t errlen)
{
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    const rd_kafka_metadata_t *md = NULL;
    rd_kafka_resp_err_t e = t ? rd_kafka_metadata(rk, 0, t, &md, timeout_ms) : RD_KAFKA_RESP_ERR__FAIL;
    int n = -1;
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
        snprintf(err, errlen, "metadata of %s: %s", topic, rd_kafka_err2str(e));
    else if (md->topic_cnt != 1 || md->topics[0].err)
        snprintf(err, errlen, "topic %s: %s", topic,
                 md->topic_cnt ? rd_kafka_err2str(md->topics[0].err) : "not found");
    else
        n = md->topics[0].partition_cnt;
    if (md)
        rd_kafka_metadata_destroy(md);
    if (t)
        rd_kafka_topic_destroy(t);
    return n;
}

void lc_reader_close(rd_kafka_t *rk)
{
    if (rk)
        rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
}
