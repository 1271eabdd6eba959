/*
 * kreader.h - loadctl's topic reader: a read_committed Kafka consumer that never commits (verify,
 * dead-letters), configured from the kafka.* keys of a service configuration.
 */
#ifndef LOADCTL_KREADER_H
#define LOADCTL_KREADER_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>

#include "ll/config.h"

/* A consumer with group id `group` (offsets never committed or stored, earliest, partition EOF
 * reported) and cfg's kafka.* settings except group.id, transactional.id and group.instance.id.
 * The caller assigns partitions and frees it with lc_reader_close. NULL with err on a setting
 * librdkafka refuses. */
rd_kafka_t *lc_reader_new(const ll_config *cfg, const char *group, char *err, size_t errlen);
/* The longest single wait for the broker's answer (metadata, committed offsets, watermarks) of a
 * command, in ms. */
#define LC_BROKER_WAIT_MAX_MS 10000

/* One wait for the broker's answer within a command given timeout_ms (its --timeout, ms): at most
 * LC_BROKER_WAIT_MAX_MS, never longer than the command's whole bound, at least 1 ms. */
int lc_broker_wait_ms(int64_t timeout_ms);

/* The partition count of topic from rk's metadata, waiting up to timeout_ms; -1 with err (the
 * broker unreachable, the topic missing). */
int lc_topic_partitions(rd_kafka_t *rk, const char *topic, int timeout_ms, char *err, size_t errlen);
/* Destroys a reader without leaving a group (it never joined one); NULL is ignored. */
void lc_reader_close(rd_kafka_t *rk);

#endif
