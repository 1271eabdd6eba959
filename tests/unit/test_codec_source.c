/*
 * test_codec_source.c - a Confluent id that the ids table lacks, looked up in a schema source
 * (ll_decode_opts.source: the schema registry, issue 30): the fetched text is an older writer
 * resolved against the reader (its missing field takes the reader's default), cached in the
 * reader like an embedded schema; the source's waits come back as LL_DECODE_UNAVAILABLE and
 * LL_DECODE_UNKNOWN_ID with the id named; a text over codec.max_schema_bytes is refused at once
 * (-1, the budget named); the ids table is asked first; without a source nothing changes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ll/codec.h"

static const char *READER =
    "{\"type\":\"record\",\"name\":\"T\",\"namespace\":\"t\",\"fields\":["
    "{\"name\":\"a\",\"type\":\"int\"},{\"name\":\"b\",\"type\":\"string\",\"default\":\"dflt\"}]}";
static const char *WRITER = "{\"type\":\"record\",\"name\":\"T\",\"namespace\":\"t\",\"fields\":["
                            "{\"name\":\"a\",\"type\":\"int\"}]}";

/* The stub source: one id known (7, WRITER), 8 unknown, 9 unavailable, 10 a huge text. */
typedef struct src {
    int calls;
    int32_t last_id;
} src;

static int source(void *ctx, int32_t id, char **text, size_t *len, char *err, size_t errlen)
{
    src *s = ctx;
    s->calls++;
    s->last_id = id;
    if (id == 7 || id == 10) {
        const char *t = WRITER;
        char *big = NULL;
        if (id == 10) { /* valid JSON, padded past the budget with blanks */
            size_t n = strlen(WRITER) + 5000;
            big = malloc(n + 1);
            memset(big, ' ', n);
            memcpy(big, WRITER, strlen(WRITER));
            big[n] = '\0';
            t = big;
        }
        *len = strlen(t);
        *text = big ? big : strdup(t);
        return 0;
    }
    snprintf(err, errlen, "schema id %d: %s", id, id == 8 ? "not found" : "unavailable");
    return id == 8 ? LL_DECODE_UNKNOWN_ID : LL_DECODE_UNAVAILABLE;
}

/* WRITER's datum {"a": 5} framed with id. */
static unsigned char *framed(int32_t id, size_t *len)
{
    char err[256];
    ll_schema *w = ll_schema_from_json(WRITER, err, sizeof err);
    assert_non_null(w);
    json_t *v = json_pack("{s:i}", "a", 5);
    ll_encode_opts eo = {.framing = LL_FRAMING_CONFLUENT, .schema = w, .schema_id = id};
    unsigned char *buf = NULL;
    assert_int_equal(ll_encode(&eo, v, &buf, len, err, sizeof err), 0);
    json_decref(v);
    ll_schema_free(w);
    return buf;
}

static void test_fetched_writer_resolved(void **state)
{
    (void)state;
    char err[512];
    ll_schema *r = ll_schema_from_json(READER, err, sizeof err);
    assert_non_null(r);
    src s = {0};
    ll_decode_opts o = {.framing = LL_FRAMING_CONFLUENT, .reader = r, .source = source, .source_ctx = &s};
    size_t len;
    unsigned char *buf = framed(7, &len);
    json_t *out = NULL;
    assert_int_equal(ll_decode(&o, buf, len, &out, err, sizeof err), 0);
    assert_int_equal(s.calls, 1);
    assert_int_equal(s.last_id, 7);
    assert_int_equal(json_integer_value(json_object_get(out, "a")), 5);
    assert_string_equal(json_string_value(json_object_get(out, "b")), "dflt");
    json_decref(out);
    /* decoded again: the source is asked again (its own cache is the registry client's), the
     * parsed writer comes from the reader's cache */
    assert_int_equal(ll_decode(&o, buf, len, &out, err, sizeof err), 0);
    assert_int_equal(s.calls, 2);
    json_decref(out);
    free(buf);
    ll_schema_free(r);
}

static void test_waits(void **state)
{
    (void)state;
    char err[512];
    ll_schema *r = ll_schema_from_json(READER, err, sizeof err);
    src s = {0};
    ll_decode_opts o = {.framing = LL_FRAMING_CONFLUENT, .reader = r, .source = source, .source_ctx = &s};
    size_t len;
    unsigned char *buf = framed(8, &len);
    json_t *out = NULL;
    assert_int_equal(ll_decode(&o, buf, len, &out, err, sizeof err), LL_DECODE_UNKNOWN_ID);
    assert_null(out);
    assert_non_null(strstr(err, "schema id 8"));
    free(buf);
    buf = framed(9, &len);
    assert_int_equal(ll_decode(&o, buf, len, &out, err, sizeof err), LL_DECODE_UNAVAILABLE);
    assert_null(out);
    assert_non_null(strstr(err, "schema id 9"));
    free(buf);
    ll_schema_free(r);
}

static void test_over_budget_at_once(void **state)
{
    (void)state;
    char err[512];
    ll_schema *r = ll_schema_from_json(READER, err, sizeof err);
    src s = {0};
    ll_decode_opts o = {.framing = LL_FRAMING_CONFLUENT,
                        .reader = r,
                        .source = source,
                        .source_ctx = &s,
                        .max_schema_bytes = 1024};
    size_t len;
    unsigned char *buf = framed(10, &len);
    json_t *out = NULL;
    assert_int_equal(ll_decode(&o, buf, len, &out, err, sizeof err), -1);
    assert_non_null(strstr(err, "schema id 10"));
    assert_non_null(strstr(err, "codec.max_schema_bytes"));
    free(buf);
    ll_schema_free(r);
}

static void test_ids_table_first_and_no_source(void **state)
{
    (void)state;
    char err[512];
    ll_schema *r = ll_schema_from_json(READER, err, sizeof err);
    ll_schema_ids *ids = ll_schema_ids_new();
    assert_int_equal(ll_schema_ids_put(ids, 7, ll_schema_from_json(WRITER, err, sizeof err)), 0);
    src s = {0};
    ll_decode_opts o = {
        .framing = LL_FRAMING_CONFLUENT, .reader = r, .ids = ids, .source = source, .source_ctx = &s};
    size_t len;
    unsigned char *buf = framed(7, &len);
    json_t *out = NULL;
    assert_int_equal(ll_decode(&o, buf, len, &out, err, sizeof err), 0);
    assert_int_equal(s.calls, 0); /* the table had it */
    json_decref(out);
    free(buf);
    /* no source: an unknown id is the old answer, -1 */
    o.source = NULL;
    buf = framed(8, &len);
    assert_int_equal(ll_decode(&o, buf, len, &out, err, sizeof err), -1);
    assert_string_equal(err, "unknown schema id 8");
    free(buf);
    ll_schema_ids_free(ids);
    ll_schema_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fetched_writer_resolved),
        cmocka_unit_test(test_waits),
        cmocka_unit_test(test_over_budget_at_once),
        cmocka_unit_test(test_ids_table_first_and_no_source),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
