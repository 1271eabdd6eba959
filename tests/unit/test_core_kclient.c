/*
 * test_core_kclient.c - Kafka settings refused at start (issue 7 §5), the seek timeout argument
 * for librdkafka < 2.1.0 (issue 7 §7), which fatal producer errors end the process (§8), and the
 * consumer's bounded fetch sizes (issue 8: RSS ≤ 16 MiB with a backlog).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ll/kclient.h"

static void test_refused_settings(void **state)
{
    (void)state;
    assert_non_null(ll_kconf_refusal("enable.auto.commit", "true"));
    assert_non_null(ll_kconf_refusal("enable.auto.commit", "1"));
    assert_non_null(ll_kconf_refusal("enable.auto.offset.store", "true"));
    assert_non_null(ll_kconf_refusal("auto.offset.reset", "latest"));
    assert_non_null(ll_kconf_refusal("auto.offset.reset", "largest"));
    assert_non_null(ll_kconf_refusal("auto.offset.reset", "error"));
    assert_non_null(ll_kconf_refusal("isolation.level", "read_uncommitted"));
    assert_non_null(ll_kconf_refusal("partition.assignment.strategy", "cooperative-sticky"));
    assert_non_null(ll_kconf_refusal("partition.assignment.strategy", "range,cooperative-sticky"));
    assert_non_null(ll_kconf_refusal("enable.idempotence", "false"));
    assert_non_null(ll_kconf_refusal("transactional.id", "mine"));
    assert_true(strstr(ll_kconf_refusal("auto.offset.reset", "latest"), "earliest") != NULL);
}

static void test_allowed_settings(void **state)
{
    (void)state;
    assert_null(ll_kconf_refusal("enable.auto.commit", "false"));
    assert_null(ll_kconf_refusal("enable.auto.offset.store", "false"));
    assert_null(ll_kconf_refusal("auto.offset.reset", "earliest"));
    assert_null(ll_kconf_refusal("auto.offset.reset", "smallest"));
    assert_null(ll_kconf_refusal("auto.offset.reset", "beginning"));
    assert_null(ll_kconf_refusal("isolation.level", "read_committed"));
    assert_null(ll_kconf_refusal("partition.assignment.strategy", "roundrobin"));
    assert_null(ll_kconf_refusal("partition.assignment.strategy", "range"));
    assert_null(ll_kconf_refusal("bootstrap.servers", "127.0.0.1:9092"));
    assert_null(ll_kconf_refusal("message.max.bytes", "3000000"));
    assert_null(ll_kconf_refusal("group.id", "g"));
}

static void test_seek_timeout_scaled_before_2_1(void **state)
{
    (void)state;
    /* 2.0.2 takes the argument as microseconds: 10 s must be passed as 10,000,000 */
    assert_int_equal(ll_seek_timeout_arg(0x020002ff, 10000), 10000000);
    assert_int_equal(ll_seek_timeout_arg(0x020002ff, 0), 0);
    assert_int_equal(ll_seek_timeout_arg(0x020002ff, 5000000), 2147483647);
    /* fixed from 2.1.0 on */
    assert_int_equal(ll_seek_timeout_arg(0x020100ff, 10000), 10000);
    assert_int_equal(ll_seek_timeout_arg(0x020a00ff, 10000), 10000);
}

static void test_fatal_errors_that_end_the_process(void **state)
{
    (void)state;
    assert_true(ll_kafka_fatal_must_exit(RD_KAFKA_RESP_ERR__FENCED));
    assert_true(ll_kafka_fatal_must_exit(RD_KAFKA_RESP_ERR_PRODUCER_FENCED));
    assert_true(ll_kafka_fatal_must_exit(RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH));
    assert_true(ll_kafka_fatal_must_exit(RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED));
    /* survived in-process: a new producer */
    assert_false(ll_kafka_fatal_must_exit(RD_KAFKA_RESP_ERR__MSG_TIMED_OUT));
    assert_false(ll_kafka_fatal_must_exit(RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER));
    assert_false(ll_kafka_fatal_must_exit(RD_KAFKA_RESP_ERR__TRANSPORT));
    assert_false(ll_kafka_fatal_must_exit(RD_KAFKA_RESP_ERR_UNKNOWN_PRODUCER_ID));
}

/* Nothing configured: small bounded fetches, whatever the largest accepted message. */
static void test_fetch_defaults_are_bounded(void **state)
{
    (void)state;
    char err[400] = "";
    ll_kfetch k = {0};
    assert_int_equal(ll_kfetch_settle(1048576, &k, err, sizeof err), 0);
    assert_int_equal(k.partition_fetch_bytes, 65536);                       /* librdkafka: 1048576 */
    assert_int_equal(k.fetch_max_bytes, 65536);                             /* librdkafka: 52428800 */
    assert_int_equal(k.message_max_bytes, 65536);                           /* librdkafka: 1000000 */
    assert_int_equal(k.queued_max_kbytes, 2 * 64);                          /* librdkafka: 65536 */
    assert_int_equal(k.queued_min_messages, LL_KFETCH_QUEUED_MIN_MESSAGES); /* librdkafka: 100000 */
    assert_int_equal(k.receive_max_bytes, 0);                               /* librdkafka derives it */
    /* a larger loop.max_message_bytes changes none of them (KIP-74: fetched whole anyway) */
    ll_kfetch b = {0};
    assert_int_equal(ll_kfetch_settle(3000000, &b, err, sizeof err), 0);
    assert_int_equal(b.fetch_max_bytes, 65536);
    assert_int_equal(b.queued_max_kbytes, 128);
    /* a configured consumer message.max.bytes raises fetch.max.bytes (librdkafka's own rule) */
    ll_kfetch m = {.message_max_bytes = 4000000};
    assert_int_equal(ll_kfetch_settle(1048576, &m, err, sizeof err), 0);
    assert_int_equal(m.fetch_max_bytes, 4000000);
    assert_int_equal(m.message_max_bytes, 4000000);
    assert_int_equal(m.queued_max_kbytes, 2 * 3907);
    /* and so does a larger per-partition fetch */
    ll_kfetch p = {.partition_fetch_bytes = 1048576};
    assert_int_equal(ll_kfetch_settle(1048576, &p, err, sizeof err), 0);
    assert_int_equal(p.fetch_max_bytes, 1048576);
    assert_int_equal(p.message_max_bytes, 1048576);
}

/* Configured values are kept, even below the largest accepted message: it is fetched whole. */
static void test_fetch_overrides_kept(void **state)
{
    (void)state;
    char err[400] = "";
    ll_kfetch k = {.queued_min_messages = 20000,
                   .queued_max_kbytes = 64,
                   .fetch_max_bytes = 65536,
                   .partition_fetch_bytes = 32768,
                   .receive_max_bytes = 8389120};
    assert_int_equal(ll_kfetch_settle(1048576, &k, err, sizeof err), 0);
    assert_int_equal(k.queued_min_messages, 20000);
    assert_int_equal(k.queued_max_kbytes, 64);
    assert_int_equal(k.fetch_max_bytes, 65536);
    assert_int_equal(k.partition_fetch_bytes, 32768);
    assert_int_equal(k.receive_max_bytes, 8389120);
    assert_int_equal(k.message_max_bytes, 65536);
}

/* What could not receive a loop.max_message_bytes message, or that librdkafka refuses, is refused,
 * named. */
static void test_fetch_that_cannot_take_the_largest_message_refused(void **state)
{
    (void)state;
    char err[400];
    ll_kfetch r = {.receive_max_bytes = 1114112};
    assert_int_equal(ll_kfetch_settle(1048576, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "kafka.receive.message.max.bytes = 1114112 is below 1114624"));
    assert_non_null(strstr(err, "loop.max_message_bytes"));
    ll_kfetch f = {.fetch_max_bytes = 4000000, .receive_max_bytes = 2000000};
    assert_int_equal(ll_kfetch_settle(1048576, &f, err, sizeof err), -1);
    assert_non_null(strstr(err, "kafka.receive.message.max.bytes = 2000000 is below 4000512"));
    ll_kfetch m = {.fetch_max_bytes = 2000000, .message_max_bytes = 4000000};
    assert_int_equal(ll_kfetch_settle(1048576, &m, err, sizeof err), -1);
    assert_non_null(strstr(err, "kafka.fetch.max.bytes = 2000000 is below 4000000"));
    assert_non_null(strstr(err, "message.max.bytes"));
    /* the same receive limit is fine for a loop that accepts smaller messages */
    ll_kfetch s = {.receive_max_bytes = 1114112};
    assert_int_equal(ll_kfetch_settle(131072, &s, err, sizeof err), 0);
}

/* The fetcher is woken only after as much as may have filled the queue up to a threshold. */
static void test_fetch_wake_after_half_a_threshold(void **state)
{
    (void)state;
    char err[400];
    ll_kfetch k = {0};
    assert_int_equal(ll_kfetch_settle(1048576, &k, err, sizeof err), 0); /* 128 KiB, 100,000 msgs */
    assert_false(ll_kfetch_wake_due(0, 0, &k));
    assert_false(ll_kfetch_wake_due(65535, 150, &k));    /* a batch at half load: never stopped */
    assert_true(ll_kfetch_wake_due(65536, 150, &k));     /* half of 128 KiB */
    assert_true(ll_kfetch_wake_due(4 << 20, 10000, &k)); /* a backlog drained */
    assert_false(ll_kfetch_wake_due(1000, 49999, &k));   /* the count threshold, tiny values */
    assert_true(ll_kfetch_wake_due(1000, 50000, &k));
}

/* librdkafka's syslog levels onto the JSON log's (docs/operations.md, "Versions and logs"). */
static void test_kafka_log_levels(void **state)
{
    (void)state;
    const ll_level want[] = {LL_ERROR, LL_ERROR, LL_ERROR, LL_ERROR, LL_WARN, LL_INFO, LL_INFO, LL_DEBUG};
    for (int level = 0; level <= 7; level++)
        assert_int_equal(ll_kafka_log_level(level), want[level]);
    assert_int_equal(ll_kafka_log_level(8), LL_DEBUG);
    assert_int_equal(ll_kafka_log_level(-1), LL_DEBUG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_settings),
        cmocka_unit_test(test_allowed_settings),
        cmocka_unit_test(test_seek_timeout_scaled_before_2_1),
        cmocka_unit_test(test_fatal_errors_that_end_the_process),
        cmocka_unit_test(test_fetch_defaults_are_bounded),
        cmocka_unit_test(test_fetch_overrides_kept),
        cmocka_unit_test(test_fetch_that_cannot_take_the_largest_message_refused),
        cmocka_unit_test(test_fetch_wake_after_half_a_threshold),
        cmocka_unit_test(test_kafka_log_levels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
