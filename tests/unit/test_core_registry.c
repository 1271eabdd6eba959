/*
 * test_core_registry.c - the pure part of the schema registry client (registry.h, issue 30):
 * schema.registry.url split into URLs (blanks and a trailing '/' dropped, non-HTTP refused), the
 * answers of GET /schemas/ids/{id} and POST /subjects/{s}/versions parsed (a non-Avro schemaType,
 * a missing schema, an over-long body refused), the register body, the id cache bounded by count
 * and bytes with the least recently used evicted, and the per-id backoff. The lookup of
 * schema.registry.auto.register.schemas = false: the subject paths (percent-encoded, bounded), the
 * answer of POST /subjects/{s} (extra members ignored, a wrong subject or version refused), the
 * 404 bodies 40401/40403 and the key read into the client's mode.
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

#include "ll/config.h"
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

/* schema.registry.start_wait: the pause between start-up tries, cut to the wait; -1 once it is over */
static void test_start_pause(void **state)
{
    (void)state;
    assert_int_equal(ll_registry_start_pause_ms(0, 1, 60000, 500, 10000), 500);
    assert_int_equal(ll_registry_start_pause_ms(700, 2, 60000, 500, 10000), 1000);
    assert_int_equal(ll_registry_start_pause_ms(5000, 40, 60000, 500, 10000), 10000); /* capped */
    assert_int_equal(ll_registry_start_pause_ms(59000, 40, 60000, 500, 10000), 1000); /* what is left */
    assert_int_equal(ll_registry_start_pause_ms(60000, 3, 60000, 500, 10000), -1);
    assert_int_equal(ll_registry_start_pause_ms(0, 1, 0, 500, 10000), -1); /* no wait: one try */
}

static void test_bad_url_refused_by_new(void **state)
{
    (void)state;
    char err[256];
    ll_registry_opts o = {.urls = "localhost:8081"};
    assert_null(ll_registry_new(&o, err, sizeof err));
    assert_non_null(strstr(err, "schema.registry.url"));
}

static void test_subject_path(void **state)
{
    (void)state;
    char p[LL_REGISTRY_PATH_MAX];
    assert_int_equal(ll_registry_subject_path("loadledger.run-decisions-value", false, p, sizeof p), 0);
    assert_string_equal(p, "/subjects/loadledger.run-decisions-value");
    assert_int_equal(ll_registry_subject_path("loadledger.run-decisions-value", true, p, sizeof p), 0);
    assert_string_equal(p, "/subjects/loadledger.run-decisions-value/versions");
    /* every byte but the unreserved ones percent-encoded (as curl_easy_escape): '/', ' ', UTF-8 */
    assert_int_equal(ll_registry_subject_path("a/b c~_\xc3\xa9", false, p, sizeof p), 0);
    assert_string_equal(p, "/subjects/a%2Fb%20c~_%C3%A9");
    assert_int_equal(ll_registry_subject_path("", false, p, sizeof p), -1);
    assert_int_equal(ll_registry_subject_path(NULL, true, p, sizeof p), -1);
    /* bounded: "/subjects/ab" needs 13 bytes, "/subjects/ab/versions" 22 */
    assert_int_equal(ll_registry_subject_path("ab", false, p, 13), 0);
    assert_int_equal(ll_registry_subject_path("ab", false, p, 12), -1);
    assert_string_equal(p, "");
    assert_int_equal(ll_registry_subject_path("ab", true, p, 22), 0);
    assert_string_equal(p, "/subjects/ab/versions");
    assert_int_equal(ll_registry_subject_path("ab", true, p, 21), -1);
    assert_string_equal(p, "");
    assert_int_equal(ll_registry_subject_path("a b", false, p, 14), -1); /* "%20" does not fit */
    /* a subject of 255 bytes, each one encoded, fits LL_REGISTRY_PATH_MAX */
    char longest[256];
    memset(longest, '/', 255);
    longest[255] = '\0';
    assert_int_equal(ll_registry_subject_path(longest, true, p, sizeof p), 0);
    assert_int_equal(strlen(p), strlen("/subjects/") + 3 * 255 + strlen("/versions"));
}

static void test_parse_lookup(void **state)
{
    (void)state;
    char err[256];
    ll_registry_version v = {0};
    /* the Confluent answer, with members a registry may add (Confluent 7's "references", others) */
    const char *ok = "{\"subject\":\"t-value\",\"id\":17,\"version\":3,\"schema\":\"\\\"int\\\"\","
                     "\"schemaType\":\"AVRO\",\"references\":[],\"metadata\":{\"x\":1}}";
    assert_int_equal(ll_registry_parse_lookup(ok, strlen(ok), "t-value", &v, err, sizeof err), 0);
    assert_int_equal(v.id, 17);
    assert_int_equal(v.version, 3);
    /* Apicurio 2.0.2's member order; the subject not checked when NULL */
    const char *apicurio = "{\"id\":1,\"subject\":\"other-value\",\"version\":1,\"schema\":\"{}\"}";
    assert_int_equal(ll_registry_parse_lookup(apicurio, strlen(apicurio), NULL, &v, err, sizeof err), 0);
    assert_int_equal(v.id, 1);
    assert_int_equal(ll_registry_parse_lookup(apicurio, strlen(apicurio), "t-value", &v, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "other-value"));
    /* without "subject": accepted */
    const char *no_subject = "{\"id\":0,\"version\":1}";
    assert_int_equal(ll_registry_parse_lookup(no_subject, strlen(no_subject), "t-value", &v, err, sizeof err),
                     0);
    assert_int_equal(v.id, 0);
    const char *no_version = "{\"subject\":\"t-value\",\"id\":17}";
    assert_int_equal(ll_registry_parse_lookup(no_version, strlen(no_version), "t-value", &v, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "\"version\""));
    const char *version0 = "{\"id\":17,\"version\":0}";
    assert_int_equal(ll_registry_parse_lookup(version0, strlen(version0), NULL, &v, err, sizeof err), -1);
    const char *no_id = "{\"subject\":\"t-value\",\"version\":2}";
    assert_int_equal(ll_registry_parse_lookup(no_id, strlen(no_id), "t-value", &v, err, sizeof err), -1);
    assert_non_null(strstr(err, "\"id\""));
    const char *big_id = "{\"id\":2147483648,\"version\":2}";
    assert_int_equal(ll_registry_parse_lookup(big_id, strlen(big_id), NULL, &v, err, sizeof err), -1);
    const char *bad_subject = "{\"subject\":7,\"id\":1,\"version\":2}";
    assert_int_equal(ll_registry_parse_lookup(bad_subject, strlen(bad_subject), NULL, &v, err, sizeof err),
                     -1);
    assert_int_equal(ll_registry_parse_lookup("[1]", 3, NULL, &v, err, sizeof err), -1);
    assert_int_equal(ll_registry_parse_lookup("{oops", 5, NULL, &v, err, sizeof err), -1);
    assert_non_null(strstr(err, "not JSON"));
    /* the lookup's request body is the registration's */
    char *body = ll_registry_register_body("\"int\"");
    assert_string_equal(body, "{\"schema\":\"\\\"int\\\"\"}");
    free(body);
}

static void test_error_codes(void **state)
{
    (void)state;
    char msg[64];
    /* Confluent's two 404s of a lookup, and Apicurio 2.0.2's (40401 for a subject that lacks the schema too)
     */
    const char *subject = "{\"error_code\":40401,\"message\":\"Subject 't-value' not found.\"}";
    assert_int_equal(ll_registry_error_code(subject, strlen(subject), msg, sizeof msg), 40401);
    assert_string_equal(msg, "Subject 't-value' not found.");
    assert_string_equal(ll_registry_error_name(40401), "subject not found");
    const char *schema = "{\"error_code\":40403,\"message\":\"Schema not found\"}";
    assert_int_equal(ll_registry_error_code(schema, strlen(schema), msg, sizeof msg),
                     LL_REGISTRY_SCHEMA_NOT_FOUND);
    assert_string_equal(msg, "Schema not found");
    assert_string_equal(ll_registry_error_name(40403), "schema not found");
    assert_string_equal(ll_registry_error_name(40402), "version not found");
    assert_string_equal(ll_registry_error_name(50001), "");
    const char *apicurio = "{\"message\":\"No artifact with ID 't-value' in group 'null' was found.\","
                           "\"error_code\":40401}";
    assert_int_equal(ll_registry_error_code(apicurio, strlen(apicurio), NULL, 0), 40401);
    /* the message cut to msg; absent: "" */
    assert_int_equal(ll_registry_error_code(apicurio, strlen(apicurio), msg, 8), 40401);
    assert_string_equal(msg, "No arti");
    const char *bare = "{\"error_code\":40403}";
    assert_int_equal(ll_registry_error_code(bare, strlen(bare), msg, sizeof msg), 40403);
    assert_string_equal(msg, "");
    /* no such answer: 0 (a proxy's page, a string code, an empty body) */
    assert_int_equal(ll_registry_error_code("<html>404</html>", 16, msg, sizeof msg), 0);
    assert_string_equal(msg, "");
    const char *text_code = "{\"error_code\":\"40401\"}";
    assert_int_equal(ll_registry_error_code(text_code, strlen(text_code), msg, sizeof msg), 0);
    assert_int_equal(ll_registry_error_code("", 0, msg, sizeof msg), 0);
    assert_int_equal(ll_registry_error_code(NULL, 0, msg, sizeof msg), 0);
}

/* schema.registry.auto.register.schemas read into the client's mode (no request is made). */
static void test_auto_register_key(void **state)
{
    (void)state;
    static const ll_config_key keys[] = {LL_REGISTRY_CONFIG_KEYS,
                                         {NULL, NULL, false, NULL, LL_CONFIG_NO_RANGE}};
    char err[256];
    ll_config *c = ll_config_load(NULL, keys, NULL, err, sizeof err);
    assert_non_null(c);
    ll_registry *r = NULL;
    assert_int_equal(ll_registry_from_config(c, &r, err, sizeof err), 0);
    assert_null(r); /* no URL: no client, the key not read */
    assert_int_equal(ll_config_set(c, "schema.registry.url", "http://127.0.0.1:1"), 0);
    assert_int_equal(ll_registry_from_config(c, &r, err, sizeof err), 0);
    assert_true(ll_registry_auto_register(r)); /* the default, as the Confluent clients' */
    ll_registry_free(r);
    assert_int_equal(ll_config_set(c, "schema.registry.auto.register.schemas", "false"), 0);
    assert_int_equal(ll_registry_from_config(c, &r, err, sizeof err), 0);
    assert_false(ll_registry_auto_register(r));
    ll_registry_free(r);
    assert_int_equal(ll_config_set(c, "schema.registry.auto.register.schemas", "maybe"), 0);
    assert_int_equal(ll_registry_from_config(c, &r, err, sizeof err), -1);
    assert_null(r);
    assert_non_null(strstr(err, "schema.registry.auto.register.schemas"));
    ll_config_free(c);
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
        cmocka_unit_test(test_subject_path),
        cmocka_unit_test(test_parse_lookup),
        cmocka_unit_test(test_error_codes),
        cmocka_unit_test(test_auto_register_key),
        cmocka_unit_test(test_start_pause),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
