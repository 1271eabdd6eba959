/*
 * io.c - the real table of the loop's calls out (io.h): librdkafka's and ll_db's own
 * functions, and thin wrappers where the call is variadic or needs the loop.
 */
#include "io.h"
#include "loop_int.h"
#include "ll/kclient.h"

static bool db_connected(const ll_db *db)
{
    return db->conn && PQstatus(db->conn) == CONNECTION_OK;
}

static const char *msg_topic(const rd_kafka_message_t *rkm)
{
    return rd_kafka_topic_name(rkm->rkt);
}

static rd_kafka_resp_err_t produce(rd_kafka_t *rk, const char *topic, const void *key, size_t klen, void *val,
                                   size_t vlen, rd_kafka_headers_t *hdrs)
{
    return rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, klen),
                             RD_KAFKA_V_VALUE(val, vlen), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_FREE),
                             RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
}

static rd_kafka_resp_err_t assign(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *parts)
{
    return rd_kafka_assign(rk, parts);
}

const ll_loop_io LL_LOOP_IO_REAL = {
    .db_connected = db_connected,
    .db_ensure = ll_db_ensure,
    .db_command = ll_db_command,
    .db_exec = ll_db_exec,
    .msg_topic = msg_topic,
    .msg_headers = rd_kafka_message_headers,
    .begin_transaction = rd_kafka_begin_transaction,
    .produce = produce,
    .flush = rd_kafka_flush,
    .send_offsets_to_transaction = rd_kafka_send_offsets_to_transaction,
    .commit_transaction = rd_kafka_commit_transaction,
    .abort_transaction = rd_kafka_abort_transaction,
    .fatal_error = rd_kafka_fatal_error,
    .remake_producer = ll_loop_remake_producer,
    .group_metadata = rd_kafka_consumer_group_metadata,
    .assignment = rd_kafka_assignment,
    .committed = rd_kafka_committed,
    .assign = assign,
    .pause = rd_kafka_pause_partitions,
    .watermarks = rd_kafka_query_watermark_offsets,
    .resume = rd_kafka_resume_partitions,
    .seek = ll_kafka_seek,
};
