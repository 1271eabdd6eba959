/* test_rules_formats.c - shared input formats, UUID text forms, UTF-8 length (docs/contract.md §4.1, §4.3).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ll/rules.h"

/* prefix followed by n copies of c, in buf (NUL-terminated); returns buf. */
static char *fill(char *buf, const char *prefix, char c, size_t n)
{
    size_t p = strlen(prefix);
    memcpy(buf, prefix, p);
    memset(buf + p, c, n);
    buf[p + n] = '\0';
    return buf;
}

static void test_job_key(void **state)
{
    (void)state;
    char buf[300];
    assert_true(ll_is_job_key("ORACLE_INSP_DTL_DAILY"));
    assert_true(ll_is_job_key("A"));
    assert_true(ll_is_job_key("0_9"));
    assert_true(ll_is_job_key(fill(buf, "", 'A', 200)));
    assert_false(ll_is_job_key(fill(buf, "", 'A', 201)));
    assert_false(ll_is_job_key(""));
    assert_false(ll_is_job_key(NULL));
    assert_false(ll_is_job_key("lower"));
    assert_false(ll_is_job_key("A-B"));
    assert_false(ll_is_job_key("A B"));
    assert_false(ll_is_job_key("A\n"));
    assert_false(ll_is_job_key("\xc3\x89")); /* É */
}

static void test_business_key(void **state)
{
    (void)state;
    char buf[300];
    assert_true(ll_is_business_key("2026-09-28"));
    assert_true(ll_is_business_key("a.B_c:d-9"));
    assert_true(ll_is_business_key(fill(buf, "", 'x', 200)));
    assert_false(ll_is_business_key(fill(buf, "", 'x', 201)));
    assert_false(ll_is_business_key(""));
    assert_false(ll_is_business_key(NULL));
    assert_false(ll_is_business_key("2026/09/28"));
    assert_false(ll_is_business_key("a b"));
}

static void test_partition_id(void **state)
{
    (void)state;
    assert_true(ll_is_partition_id("0000"));
    assert_true(ll_is_partition_id("9999"));
    assert_true(ll_is_partition_id("NULL"));
    assert_false(ll_is_partition_id("000"));
    assert_false(ll_is_partition_id("00000"));
    assert_false(ll_is_partition_id("null"));
    assert_false(ll_is_partition_id("NULLX"));
    assert_false(ll_is_partition_id("12a4"));
    assert_false(ll_is_partition_id(""));
    assert_false(ll_is_partition_id(NULL));
}

static void test_decimal_str(void **state)
{
    (void)state;
    char buf[64];
    assert_true(ll_is_decimal_str("0"));
    assert_true(ll_is_decimal_str("-0"));
    assert_true(ll_is_decimal_str("007"));
    assert_true(ll_is_decimal_str("-123"));
    assert_true(ll_is_decimal_str(fill(buf, "", '9', 38)));
    assert_true(ll_is_decimal_str(fill(buf, "-", '9', 38)));
    assert_false(ll_is_decimal_str(fill(buf, "", '9', 39)));
    assert_false(ll_is_decimal_str(fill(buf, "-", '9', 39)));
    assert_false(ll_is_decimal_str(fill(buf, "", '0', 39))); /* digits count, not value */
    assert_false(ll_is_decimal_str(""));
    assert_false(ll_is_decimal_str("-"));
    assert_false(ll_is_decimal_str("+1"));
    assert_false(ll_is_decimal_str("--1"));
    assert_false(ll_is_decimal_str("1.0"));
    assert_false(ll_is_decimal_str("1e3"));
    assert_false(ll_is_decimal_str(" 1"));
    assert_false(ll_is_decimal_str("1 "));
    assert_false(ll_is_decimal_str(NULL));
}

static void test_table_prefix(void **state)
{
    (void)state;
    char buf[80];
    assert_true(ll_is_table_prefix("stg_"));
    assert_true(ll_is_table_prefix("_"));
    assert_true(ll_is_table_prefix("A"));
    assert_true(ll_is_table_prefix(fill(buf, "a", '1', 60))); /* 61 chars */
    assert_false(ll_is_table_prefix(fill(buf, "a", '1', 61)));
    assert_false(ll_is_table_prefix("1abc"));
    assert_false(ll_is_table_prefix(""));
    assert_false(ll_is_table_prefix("a-b"));
    assert_false(ll_is_table_prefix("a.b"));
    assert_false(ll_is_table_prefix(NULL));
}

static void test_hdfs_path(void **state)
{
    (void)state;
    char buf[1600];
    assert_true(ll_is_hdfs_path("/data/raw"));
    assert_true(ll_is_hdfs_path("/a"));
    assert_true(ll_is_hdfs_path("//"));
    assert_true(ll_is_hdfs_path("/x/run_id=1-2/part.0.parquet"));
    assert_true(ll_is_hdfs_path(fill(buf, "/", 'a', 1499))); /* 1500 chars */
    assert_false(ll_is_hdfs_path(fill(buf, "/", 'a', 1500)));
    assert_false(ll_is_hdfs_path("/"));
    assert_false(ll_is_hdfs_path("data/raw"));
    assert_false(ll_is_hdfs_path("/a b"));
    assert_false(ll_is_hdfs_path("/a:b"));
    assert_false(ll_is_hdfs_path("/a~"));
    assert_false(ll_is_hdfs_path(""));
    assert_false(ll_is_hdfs_path(NULL));
}

static void test_metric_name(void **state)
{
    (void)state;
    char buf[200];
    assert_true(ll_is_metric_name("STAGE_COUNT"));
    assert_true(ll_is_metric_name("amount.sum:v2-x"));
    assert_true(ll_is_metric_name(fill(buf, "", 'm', 150)));
    assert_false(ll_is_metric_name(fill(buf, "", 'm', 151)));
    assert_false(ll_is_metric_name(""));
    assert_false(ll_is_metric_name("a b"));
    assert_false(ll_is_metric_name("a/b"));
    assert_false(ll_is_metric_name(NULL));
}

static void test_uuid_forms(void **state)
{
    (void)state;
    char out[37] = "untouched";
    assert_true(ll_is_uuid("886313e1-3b8a-5372-9b90-0c9aee199e5d"));
    assert_true(ll_is_uuid("886313E1-3B8A-5372-9B90-0C9AEE199E5D"));
    assert_true(ll_is_uuid("886313e1-3B8A-5372-9b90-0C9aee199E5D"));
    assert_false(ll_is_uuid("886313e13b8a53729b900c9aee199e5d"));
    assert_false(ll_is_uuid("{886313e1-3b8a-5372-9b90-0c9aee199e5d}"));
    assert_false(ll_is_uuid("886313e1-3b8a-5372-9b90-0c9aee199e5"));
    assert_false(ll_is_uuid("886313e1-3b8a-5372-9b90-0c9aee199e5d0"));
    assert_false(ll_is_uuid("886313g1-3b8a-5372-9b90-0c9aee199e5d"));
    assert_false(ll_is_uuid("886313e1-3b8a-5372-9b90_0c9aee199e5d"));
    assert_false(ll_is_uuid(""));
    assert_false(ll_is_uuid(NULL));

    assert_int_equal(ll_uuid_canonical("886313E1-3B8A-5372-9B90-0C9AEE199E5D", out), 0);
    assert_string_equal(out, "886313e1-3b8a-5372-9b90-0c9aee199e5d");
    assert_int_equal(ll_uuid_canonical("not-a-uuid", out), -1);
    assert_string_equal(out, "886313e1-3b8a-5372-9b90-0c9aee199e5d"); /* untouched */
    assert_int_equal(ll_uuid_canonical(NULL, out), -1);
}

static void test_uuid_equal(void **state)
{
    (void)state;
    const char *a = "886313e1-3b8a-5372-9b90-0c9aee199e5d";
    assert_true(ll_uuid_equal(a, "886313E1-3B8A-5372-9B90-0C9AEE199E5D"));
    assert_true(ll_uuid_equal(a, a));
    assert_false(ll_uuid_equal(a, "886313e1-3b8a-5372-9b90-0c9aee199e5e"));
    assert_false(ll_uuid_equal(a, NULL));
    assert_false(ll_uuid_equal(NULL, a));
    assert_false(ll_uuid_equal(NULL, NULL));
    assert_false(ll_uuid_equal("x", "x")); /* malformed strings never match, even equal ones */
}

static void test_utf8_chars(void **state)
{
    (void)state;
    assert_int_equal(ll_utf8_chars(""), 0);
    assert_int_equal(ll_utf8_chars("abc"), 3);
    assert_int_equal(ll_utf8_chars("\xc3\xa9"), 1);                 /* é */
    assert_int_equal(ll_utf8_chars("\xed\x95\x9c\xea\xb8\x80"), 2); /* 한글 */
    assert_int_equal(ll_utf8_chars("\xf0\x9f\x98\x80!"), 2);        /* 😀! */
    assert_int_equal(ll_utf8_chars("\xef\xbf\xbf"), 1);             /* U+FFFF */
    assert_int_equal(ll_utf8_chars("\xf4\x8f\xbf\xbf"), 1);         /* U+10FFFF */
    assert_int_equal(ll_utf8_chars("\x80"), -1);                    /* lone continuation */
    assert_int_equal(ll_utf8_chars("\xc0\xaf"), -1);                /* overlong '/' */
    assert_int_equal(ll_utf8_chars("\xc1\xbf"), -1);                /* overlong */
    assert_int_equal(ll_utf8_chars("\xe0\x80\xaf"), -1);            /* overlong */
    assert_int_equal(ll_utf8_chars("\xf0\x80\x80\xaf"), -1);        /* overlong */
    assert_int_equal(ll_utf8_chars("\xed\xa0\x80"), -1);            /* surrogate U+D800 */
    assert_int_equal(ll_utf8_chars("\xf4\x90\x80\x80"), -1);        /* U+110000 */
    assert_int_equal(ll_utf8_chars("\xf5\x80\x80\x80"), -1);
    assert_int_equal(ll_utf8_chars("\xff"), -1);
    assert_int_equal(ll_utf8_chars("a\xe2\x82"), -1); /* truncated at the end */
    assert_int_equal(ll_utf8_chars("\xe2\x82x"), -1); /* bad continuation */
    assert_int_equal(ll_utf8_chars(NULL), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_key),      cmocka_unit_test(test_business_key),
        cmocka_unit_test(test_partition_id), cmocka_unit_test(test_decimal_str),
        cmocka_unit_test(test_table_prefix), cmocka_unit_test(test_hdfs_path),
        cmocka_unit_test(test_metric_name),  cmocka_unit_test(test_uuid_forms),
        cmocka_unit_test(test_uuid_equal),   cmocka_unit_test(test_utf8_chars),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
