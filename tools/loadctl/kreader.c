/* kreader.c - loadctl's read_committed topic reader that never commits (kreader.h). */
#include "kreader.h"

#include <stdio.h>
#include <string.h>

#include "ll/kclient.h"

/* kafka.<key> of the configuration, except what would make the reader commit or join a group. */
static void copy_kafka(const char *key, const char *value, void *arg)
{
    if (strcmp(key, "group.id") == 0 || strcmp(key, "transactional.id") == 0 ||
        strcmp(key, "group.instance.id") == 0)
        return;
    char e[256];
    rd_kafka_conf_set((rd_kafka_conf_t *)arg, key, value, e, sizeof e);
}

rd_kafka_t *lc_reader_new(const ll_config *cfg, const char *group, char *err, size_t errlen)
{
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    ll_kafka_log_to_json(c);
    ll_config_foreach_prefix(cfg, "kafka.", copy_kafka, c);
    char e[256];
    const char *fixed[][2] = {{"group.id", group},
                              {"enable.auto.commit", "false"},
                              {"enable.auto.offset.store", "false"},
                              {"isolation.level", "read_committed"},
                              {"enable.partition.eof", "true"},
                              {"auto.offset.reset", "earliest"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (rd_kafka_conf_set(c, fixed[i][0], fixed[i][1], e, sizeof e) != RD_KAFKA_CONF_OK) {
            snprintf(err, errlen, "kafka %s: %s", fixed[i][0], e);
            rd_kafka_conf_destroy(c);
            return NULL;
        }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, e, sizeof e);
    if (!rk)
        snprintf(err, errlen, "kafka consumer: %s", e);
    return rk;
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
