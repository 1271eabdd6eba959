/*
 * test_core_kclient.c - Kafka settings refused at start (issue 7 §5), the seek timeout argument
 * for librdkafka < 2.1.0 (issue 7 §7) and which fatal producer errors end the process (§8).
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_settings),
        cmocka_unit_test(test_allowed_settings),
        cmocka_unit_test(test_seek_timeout_scaled_before_2_1),
        cmocka_unit_test(test_fatal_errors_that_end_the_process),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
