/*
 * io.h - what the consumer loop asks of Kafka and of the database, as one table of
 * functions (not a public header). Each entry has the signature of the librdkafka or ll_db call
 * it stands for, and the real table (LL_LOOP_IO_REAL, io.c) is those calls: the loop's
 * behaviour is theirs. The loop's unit tests give the loop a table of their own
 * (ll_loop_new_io), scripted from cmocka, so that the batch, hold, set-based, undo, commit and
 * rewind paths run without a broker or a database (tests/unit/test_loop_*.c; docs/design.md
 * §3).
 */
#ifndef LL_LOOP_IO_H
#define LL_LOOP_IO_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stddef.h>

#include "ll/db.h"

struct ll_loop;

/* The loop's calls out, with the semantics of the calls they are named after (the rd_kafka
 * handle arguments are the loop's consumer or producer, NULL in a scripted table's loop). */
typedef struct ll_loop_io {
    /* the database (ll/db.h); db_connected: the connection is up (PQstatus CONNECTION_OK) */
    bool (*db_connected)(const ll_db *db);
    ll_db_rc (*db_ensure)(ll_db *db);
    ll_db_rc (*db_command)(ll_db *db, const char *sql);
    PGresult *(*db_exec)(ll_db *db, const ll_stmt *st, const char *const *params);
    /* a polled message: its topic's name (rd_kafka_topic_name of rkm->rkt) and its headers
     * (rd_kafka_message_headers: borrowed from the message) */
    const char *(*msg_topic)(const rd_kafka_message_t *rkm);
    rd_kafka_resp_err_t (*msg_headers)(const rd_kafka_message_t *rkm, rd_kafka_headers_t **hdrs);
    /* the transactional producer */
    rd_kafka_error_t *(*begin_transaction)(rd_kafka_t *rk);
    /* rd_kafka_producev with RD_KAFKA_MSG_F_FREE: on success val and hdrs are the producer's */
    rd_kafka_resp_err_t (*produce)(rd_kafka_t *rk, const char *topic, const void *key, size_t klen, void *val,
                                   size_t vlen, rd_kafka_headers_t *hdrs);
    rd_kafka_resp_err_t (*flush)(rd_kafka_t *rk, int timeout_ms);
    rd_kafka_error_t *(*send_offsets_to_transaction)(rd_kafka_t *rk,
                                                     const rd_kafka_topic_partition_list_t *offsets,
                                                     const rd_kafka_consumer_group_metadata_t *group,
                                                     int timeout_ms);
    rd_kafka_error_t *(*commit_transaction)(rd_kafka_t *rk, int timeout_ms);
    rd_kafka_error_t *(*abort_transaction)(rd_kafka_t *rk, int timeout_ms);
    rd_kafka_resp_err_t (*fatal_error)(rd_kafka_t *rk, char *errstr, size_t errstr_size);
    /* the producer destroyed (its queue purged) and a new one made, init_transactions waiting at
     * most init_ms (ll_loop_make_producer): 0, or -1 with err */
    int (*remake_producer)(struct ll_loop *l, int init_ms, char *err, size_t errlen);
    /* the consumer (group metadata: owned by the caller) */
    rd_kafka_consumer_group_metadata_t *(*group_metadata)(rd_kafka_t *rk);
    rd_kafka_resp_err_t (*assignment)(rd_kafka_t *rk, rd_kafka_topic_partition_list_t **parts);
    rd_kafka_resp_err_t (*committed)(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts, int timeout_ms);
    rd_kafka_resp_err_t (*assign)(rd_kafka_t *rk, const rd_kafka_topic_partition_list_t *parts);
    rd_kafka_resp_err_t (*pause)(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts);
    rd_kafka_resp_err_t (*resume)(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts);
    /* ll_kafka_seek (ll/kclient.h): 0, or -1 with why */
    int (*seek)(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *parts, int timeout_ms, char *why,
                size_t whylen);
    /* rd_kafka_query_watermark_offsets: a partition's log start (*lo) and end (*hi) offsets,
     * asked of the broker, waiting at most timeout_ms */
    rd_kafka_resp_err_t (*watermarks)(rd_kafka_t *rk, const char *topic, int32_t partition, int64_t *lo,
                                      int64_t *hi, int timeout_ms);
} ll_loop_io;

/* The table of the real calls (io.c). */
extern const ll_loop_io LL_LOOP_IO_REAL;

#endif
