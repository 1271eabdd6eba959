/*
 * test_core_registry.c - the pure part of the schema registry client (registry.h, issue 30):
 * schema.registry.url split into URLs (blanks and a trailing '/' dropped, non-HTTP refused), the
 * answers of GET /schemas/ids/{id} and POST /subjects/{s}/versions parsed (a non-Avro schemaType,
 * a missing schema, an over-long body refused), the register body, the id cache bounded by count
 * and bytes with the least recently used evicted, and the per-id backoff.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "ll/registry.h"

static void test_urls(void **state)
{
    (void)state;
    char u[LL_REGISTRY_MAX_URLS][LL_REGISTRY_URL_MAX + 1], err[256];
    assert_int_equal(
        ll_registry_parse_urls(" http://a:8081/ , https://b:9/x/", u, LL_REGISTRY_MAX_URLS, err, sizeof err),
        2);
    assert_string_equal(u[0], "http://a:8081");
    assert_string_equal(u[1], "https://b:9/x");
    assert_int_equal(ll_registry_parse_urls("http://a,,http://b", u, LL_REGISTRY_MAX_URLS, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "empty entry 2"));
    assert_int_equal(ll_registry_parse_urls("ftp://a", u, LL_REGISTRY_MAX_URLS, err, sizeof err), -1);
    assert_non_null(strstr(err, "not an http"));
    assert_int_equal(ll_registry_parse_urls("http://", u, LL_REGISTRY_MAX_URLS, err, sizeof err), -1);
    assert_int_equal(ll_registry_parse_urls("http://a,http://b,http://c", u, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "more than 2"));
    assert_int_equal(ll_registry_parse_urls("", u, LL_REGISTRY_MAX_URLS, err, sizeof err), -1);
}

static void test_parse_schema(void **state)
{
    (void)state;
    char err[256];
    size_t len = 0;
    const char *ok = "{\"schema\":\"{\\\"type\\\":\\\"string\\\"}\"}";
    char *t = ll_registry_parse_schema(ok, strlen(ok), 1 << 20, &len, err, sizeof err);
    assert_non_null(t);
    assert_string_equal(t, "{\"type\":\"string\"}");
    assert_int_equal(len, strlen("{\"type\":\"string\"}"));
    free(t);
    const char *avro = "{\"schemaType\":\"AVRO\",\"schema\":\"\\\"int\\\"\"}";
    t = ll_registry_parse_schema(avro, strlen(avro), 1 << 20, &len, err, sizeof err);
    assert_non_null(t);
    assert_string_equal(t, "\"int\"");
    free(t);
    const char *proto = "{\"schemaType\":\"PROTOBUF\",\"schema\":\"syntax\"}";
    assert_null(ll_registry_parse_schema(proto, strlen(proto), 1 << 20, &len, err, sizeof err));
    assert_non_null(strstr(err, "PROTOBUF"));
    const char *none = "{\"id\":3}";
    assert_null(ll_registry_parse_schema(none, strlen(none), 1 << 20, &len, err, sizeof err));
    assert_non_null(strstr(err, "no \"schema\""));
    assert_null(ll_registry_parse_schema("{oops", 5, 1 << 20, &len, err, sizeof err));
    assert_non_null(strstr(err, "not JSON"));
    assert_null(ll_registry_parse_schema(ok, strlen(ok), 10, &len, err, sizeof err));
    assert_non_null(strstr(err, "over 10"));
}

static void test_parse_id_and_body(void **state)
{
    (void)state;
    char err[256];
    int32_t id = -1;
    assert_int_equal(ll_registry_parse_id("{\"id\": 42}", 10, &id, err, sizeof err), 0);
    assert_int_equal(id, 42);
    assert_int_equal(ll_registry_parse_id("{\"id\": -1}", 10, &id, err, sizeof err), -1);
    assert_int_equal(ll_registry_parse_id("{\"id\": 2147483648}", 18, &id, err, sizeof err), -1);
    assert_int_equal(ll_registry_parse_id("{\"x\": 1}", 8, &id, err, sizeof err), -1);
    char *body = ll_registry_register_body("{\"type\":\"int\"}");
    json_error_t je;
    json_t *j = json_loads(body, 0, &je);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "schema")), "{\"type\":\"int\"}");
    assert_int_equal(json_object_size(j), 1);
    json_decref(j);
    free(body);
}

static void test_cache_bounds(void **state)
{
    (void)state;
    ll_registry_cache *c = ll_registry_cache_new(3, 100);
    size_t len = 0;
    assert_int_equal(ll_registry_cache_put(c, 1, "aaaaaaaaaa", 10), 0);
    assert_int_equal(ll_registry_cache_put(c, 2, "bbbbbbbbbb", 10), 0);
    assert_int_equal(ll_registry_cache_put(c, 3, "cccccccccc", 10), 0);
    assert_non_null(ll_registry_cache_get(c, 1, &len)); /* 1 used: 2 is now the oldest */
    assert_int_equal(ll_registry_cache_put(c, 4, "dddddddddd", 10), 0);
    assert_int_equal(ll_registry_cache_count(c), 3);
    assert_null(ll_registry_cache_get(c, 2, &len));
    assert_string_equal(ll_registry_cache_get(c, 1, &len), "aaaaaaaaaa");
    assert_int_equal(len, 10);
    assert_int_equal(ll_registry_cache_bytes(c), 30);
    /* the byte bound: an entry of 85 bytes leaves room for one of 10 at most */
    char big[86];
    memset(big, 'x', 85);
    big[85] = '\0';
    assert_int_equal(ll_registry_cache_put(c, 5, big, 85), 0);
    assert_true(ll_registry_cache_bytes(c) <= 100);
    assert_int_equal(ll_registry_cache_count(c), 2);
    assert_non_null(ll_registry_cache_get(c, 5, &len));
    /* larger than the whole cache: not cached, nothing evicted */
    char huge[102];
    memset(huge, 'y', 101);
    huge[101] = '\0';
    assert_int_equal(ll_registry_cache_put(c, 6, huge, 101), -1);
    assert_int_equal(ll_registry_cache_count(c), 2);
    /* the same id again replaces its text */
    assert_int_equal(ll_registry_cache_put(c, 5, "z", 1), 0);
    assert_string_equal(ll_registry_cache_get(c, 5, &len), "z");
    assert_int_equal(ll_registry_cache_count(c), 2);
    ll_registry_cache_free(c);
    assert_null(ll_registry_cache_new(0, 100));
}

static void test_backoff(void **state)
{
    (void)state;
    assert_true(ll_registry_retry_due(0, 0, 0, 500, 10000));
    assert_false(ll_registry_retry_due(499, 0, 1, 500, 10000));
    assert_true(ll_registry_retry_due(500, 0, 1, 500, 10000));
    assert_false(ll_registry_retry_due(1999, 0, 3, 500, 10000)); /* 500 * 2^2 */
    assert_true(ll_registry_retry_due(2000, 0, 3, 500, 10000));
    assert_false(ll_registry_retry_due(9999, 0, 40, 500, 10000)); /* capped, no overflow */
    assert_true(ll_registry_retry_due(10000, 0, 40, 500, 10000));
}

static void test_bad_url_refused_by_new(void **state)
{
    (void)state;
    char err[256];
    ll_registry_opts o = {.urls = "localhost:8081"};
    assert_null(ll_registry_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "schema.registry.url"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_parse_schema),
        cmocka_unit_test(test_parse_id_and_body),
        cmocka_unit_test(test_cache_bounds),
        cmocka_unit_test(test_backoff),
        cmocka_unit_test(test_bad_url_refused_by_new),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
