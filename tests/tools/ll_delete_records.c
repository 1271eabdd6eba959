/*
 * ll_delete_records.c - a test tool: deletes the records of one Kafka partition below an offset
 * (the Admin API's DeleteRecords, what the topic's retention does to old segments), so that an
 * integration test can put a consumer group's position below the partition's log start
 * (tests/integration/test_offset_gap.py). Not installed.
 *
 * usage: ll-delete-records BOOTSTRAP TOPIC PARTITION OFFSET
 * Exit 0 deleted (prints the partition's new log start), 1 usage, 4 broker error (named).
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: ll-delete-records BOOTSTRAP TOPIC PARTITION OFFSET\n");
        return 1;
    }
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    if (rd_kafka_conf_set(conf, "bootstrap.servers", argv[1], err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "ll-delete-records: %s\n", err);
        rd_kafka_conf_destroy(conf);
        return 1;
    }
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "ll-delete-records: %s\n", err);
        return 1;
    }
    rd_kafka_topic_partition_list_t *offs = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(offs, argv[2], atoi(argv[3]))->offset = strtoll(argv[4], NULL, 10);
    rd_kafka_DeleteRecords_t *del = rd_kafka_DeleteRecords_new(offs);
    rd_kafka_topic_partition_list_destroy(offs);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DELETERECORDS);
    rd_kafka_AdminOptions_set_request_timeout(opt, 30000, err, sizeof err);
    rd_kafka_DeleteRecords(rk, &del, 1, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 60000);
    int rc = 4;
    if (!ev) {
        fprintf(stderr, "ll-delete-records: no answer from the broker\n");
    } else if (rd_kafka_event_error(ev)) {
        fprintf(stderr, "ll-delete-records: %s\n", rd_kafka_event_error_string(ev));
    } else {
        const rd_kafka_topic_partition_list_t *res =
            rd_kafka_DeleteRecords_result_offsets(rd_kafka_event_DeleteRecords_result(ev));
        if (res && res->cnt == 1 && !res->elems[0].err) {
            printf("%lld\n", (long long)res->elems[0].offset);
            rc = 0;
        } else {
            fprintf(stderr, "ll-delete-records: %s\n",
                    res && res->cnt == 1 ? rd_kafka_err2str(res->elems[0].err)
                                         : "no partition in the answer");
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_AdminOptions_destroy(opt);
    rd_kafka_DeleteRecords_destroy(del);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}
