/*
 * test_codec_budget.c - the budgets of ll_decode_opts (issue 7, item 2), checked before the
 * work: the 4 KB fan-out message (ChunkWritten plus a record R9 whose R_i have ten fields
 * of R_(i-1), R0 ten nulls: 10^10 values of no bytes) and its default bomb ("default": {} on
 * every field) are refused in well under a second with the budget named in the error; the
 * values budget counts zero-byte values; the writer-schema cache returns one parsed schema per
 * text and stays within its bounds. The hostile messages are built here, in C.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../../common/src/codec/codec_internal.h"
#include "codec_frames.h"
#include "ll/codec.h"

/* The path of ChunkWritten.avsc: $LL_SCHEMA_DIR, else the tree this file is in. */
static const char *chunk_path(char *path, size_t len)
{
    const char *dir = getenv("LL_SCHEMA_DIR");
    if (dir != NULL && *dir != '\0') {
        snprintf(path, len, "%s/ChunkWritten.avsc", dir);
    } else {
        snprintf(path, len, "%s", __FILE__);
        char *t = strstr(path, "tests/unit/");
        if (t != NULL)
            snprintf(t, len - (size_t)(t - path), "schemas/avro/ChunkWritten.avsc");
    }
    return path;
}

static ll_schema *chunk_schema(void)
{
    char path[1024], err[256];
    chunk_path(path, sizeof path);
    ll_schema *s = ll_schema_from_file(path, err, sizeof err);
    if (s == NULL)
        fail_msg("%s", err);
    return s;
}

/*
 * The fan-out record R<depth> as JSON: R_i has `width` fields of R_(i-1) (the first defines it,
 * the others name it), R0 `width` null fields; with_defaults puts "default": {} (null in R0) on
 * every field.
 */
static json_t *fanout(int depth, int width, int with_defaults)
{
    json_t *fields = json_array();
    for (int f = 0; f < width; f++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", f);
        json_t *type;
        if (depth == 0)
            type = json_string("null");
        else if (f == 0)
            type = fanout(depth - 1, width, with_defaults);
        else {
            char ref[16];
            snprintf(ref, sizeof ref, "R%d", depth - 1);
            type = json_string(ref);
        }
        json_t *field = json_pack("{s:s, s:o}", "name", name, "type", type);
        if (with_defaults)
            json_object_set_new(field, "default", depth == 0 ? json_null() : json_object());
        json_array_append_new(fields, field);
    }
    char rname[16];
    snprintf(rname, sizeof rname, "R%d", depth);
    return json_pack("{s:s, s:s, s:o}", "type", "record", "name", rname, "fields", fields);
}

/* ChunkWritten's schema text with a field "fan" of type R<depth> appended (first: prepended). */
static char *chunk_with_fanout(int depth, int with_defaults, int first)
{
    char path[1024];
    chunk_path(path, sizeof path);
    json_error_t je;
    json_t *s = json_load_file(path, 0, &je);
    assert_non_null(s);
    json_t *fields = json_object_get(s, "fields");
    json_t *f = json_pack("{s:s, s:o}", "name", "fan", "type", fanout(depth, 10, with_defaults));
    if (first)
        json_array_insert_new(fields, 0, f);
    else
        json_array_append_new(fields, f);
    char *text = json_dumps(s, JSON_COMPACT);
    json_decref(s);
    return text;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The time bound of one hostile message: a second; under valgrind (its preload library is in
 * LD_PRELOAD), which runs the unit tests 20-50 times slower, thirty. */
static double time_bound(void)
{
    const char *pre = getenv("LD_PRELOAD");
    return pre != NULL && strstr(pre, "vgpreload") != NULL ? 30.0 : 1.0;
}

/* Decodes a container of schema text and datum with opts (reader ChunkWritten); expects an
 * error containing want, within time_bound(). Prints the time taken. */
static void refused(ll_decode_opts *o, const char *what, const char *schema, const unsigned char *datum,
                    size_t dlen, const char *want)
{
    size_t len = 0;
    unsigned char *buf = tf_container(schema, strlen(schema), datum, dlen, &len);
    json_t *out = NULL;
    char err[512] = "";
    double t0 = now_s();
    int rc = ll_decode(o, buf, len, &out, err, sizeof err);
    double dt = now_s() - t0;
    free(buf);
    fprintf(stderr, "  %s: %zu-byte message refused in %.1f ms: %s\n", what, len, dt * 1e3, err);
    if (rc == 0) {
        json_decref(out);
        fail_msg("%s accepted", what);
    }
    if (strstr(err, want) == NULL)
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
    assert_true(dt < time_bound());
}

static void test_fanout_message_refused(void **state)
{
    (void)state;
    ll_schema *reader = chunk_schema();
    ll_decode_opts o = {.framing = LL_FRAMING_CONTAINER, .reader = reader};
    char *text = chunk_with_fanout(9, 0, 0); /* the message: about 4 KB */
    assert_true(strlen(text) < 5000);
    refused(&o, "fan-out R9", text, (const unsigned char *)"", 0,
            "schema expansion (types reached) over 100000 (budget codec.max_schema_expansions)");
    free(text);
    /* with the schema budget out of the way, the values budget stops the walk over the nulls
     * (10^5 of them, no byte each, in 11,111 records) before avro-c builds anything */
    o.max_schema_expansions = 5000000;
    text = chunk_with_fanout(4, 0, 1);
    refused(&o, "fan-out R4, values", text, (const unsigned char *)"", 0,
            "values per datum over 100000 (budget codec.max_values)");
    o.max_values = 500;
    refused(&o, "fan-out R4, values 500", text, (const unsigned char *)"", 0,
            "values per datum over 500 (budget codec.max_values)");
    free(text);
    ll_schema_free(reader);
}

static void test_default_bomb_refused(void **state)
{
    (void)state;
    ll_schema *reader = chunk_schema();
    ll_decode_opts o = {.framing = LL_FRAMING_CONTAINER, .reader = reader};
    char *text = chunk_with_fanout(9, 1, 0); /* the default bomb: about 5 KB */
    assert_true(strlen(text) < 6000);
    refused(&o, "default bomb R9", text, (const unsigned char *)"", 0,
            "(budget codec.max_schema_expansions)");
    free(text);
    /* the defaults alone: R4's {} builds 111,111 values */
    o.max_schema_expansions = 5000000;
    text = chunk_with_fanout(4, 1, 0);
    refused(&o, "default bomb R4", text, (const unsigned char *)"", 0,
            "default values built over 10000 (budget codec.max_default_values)");
    free(text);
    /* a small tree, many times: an array default of 40 {} over R2 (111 types each) */
    const char *arr =
        "{\"type\":\"record\",\"name\":\"A\",\"fields\":[{\"name\":\"a\",\"type\":{\"type\":\"array\","
        "\"items\":%s},\"default\":[%s]}]}";
    json_t *r2 = fanout(2, 10, 1);
    char *r2text = json_dumps(r2, JSON_COMPACT);
    json_decref(r2);
    char items[200] = "{}";
    for (int i = 1; i < 40; i++)
        strcat(items, ",{}");
    char *schema = malloc(strlen(arr) + strlen(r2text) + strlen(items) + 1);
    sprintf(schema, arr, r2text, items);
    o.max_schema_expansions = 0;
    refused(&o, "array default", schema, (const unsigned char *)"", 0,
            "default values built over 10000 (budget codec.max_default_values)");
    /* and loaded from a file or text: the same default budget */
    char err[256] = "";
    ll_schema *s = ll_schema_from_json(schema, err, sizeof err);
    assert_null(s);
    assert_non_null(strstr(err, "(budget codec.max_default_values)"));
    free(schema);
    free(r2text);
    ll_schema_free(reader);
}

static void test_schema_text_budget(void **state)
{
    (void)state;
    ll_schema *reader = chunk_schema();
    ll_decode_opts o = {.framing = LL_FRAMING_CONTAINER, .reader = reader};
    /* a 70,000-byte schema: a long "doc" */
    size_t n = 70000;
    char *text = malloc(n + 1);
    const char *head =
        "{\"type\":\"record\",\"name\":\"Big\",\"fields\":[{\"name\":\"a\",\"type\":\"null\"}],\"doc\":\"";
    strcpy(text, head);
    memset(text + strlen(head), 'x', n - strlen(head) - 2);
    strcpy(text + n - 2, "\"}");
    refused(&o, "70 kB schema", text, (const unsigned char *)"", 0,
            "schema text of 70000 bytes over 65536 (budget codec.max_schema_bytes)");
    /* within a larger budget the schema is read (and its datum then found not to fit the reader) */
    o.max_schema_bytes = 100000;
    refused(&o, "70 kB schema, budget 100000", text, (const unsigned char *)"", 0,
            "missing field without default");
    free(text);
    ll_schema_free(reader);
}

static void test_values_budget_counts_nulls(void **state)
{
    (void)state;
    char err[256];
    ll_schema *s = ll_schema_from_json("{\"type\":\"array\",\"items\":\"null\"}", err, sizeof err);
    assert_non_null(s);
    ll_decode_opts o = {.framing = LL_FRAMING_BARE, .reader = s};
    unsigned char d[16];
    /* the array itself and 99,999 nulls: exactly the budget */
    size_t n = tf_zz(d, 99999);
    n += tf_zz(d + n, 0);
    json_t *out = NULL;
    assert_int_equal(ll_decode(&o, d, n, &out, err, sizeof err), 0);
    assert_int_equal(json_array_size(out), 99999);
    json_decref(out);
    /* one more: refused before its items are walked */
    n = tf_zz(d, 100000);
    n += tf_zz(d + n, 0);
    assert_int_equal(ll_decode(&o, d, n, &out, err, sizeof err), -1);
    assert_string_equal(err, "values per datum over 100000 (budget codec.max_values)");
    /* a negative block count (with its byte size) is bounded the same way */
    n = tf_zz(d, -150000);
    n += tf_zz(d + n, 0);
    n += tf_zz(d + n, 0);
    assert_int_equal(ll_decode(&o, d, n, &out, err, sizeof err), -1);
    assert_string_equal(err, "values per datum over 100000 (budget codec.max_values)");
    ll_schema_free(s);
}

static void test_writer_cache(void **state)
{
    (void)state;
    ll_schema *reader = chunk_schema();
    ll_budgets b;
    ll_decode_opts o = {.writer_cache_entries = 2};
    ll_budgets_of(&o, &b);
    char err[256];
    const char *t1 = "{\"type\":\"record\",\"name\":\"W\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"}]}";
    const char *t2 = "{\"type\":\"record\",\"name\":\"W\",\"fields\":[{\"name\":\"b\",\"type\":\"int\"}]}";
    const char *t3 = "{\"type\":\"record\",\"name\":\"W\",\"fields\":[{\"name\":\"c\",\"type\":\"int\"}]}";
    ll_schema *a = ll_schema_embedded(reader, t1, strlen(t1), &b, err, sizeof err);
    ll_schema *a2 = ll_schema_embedded(reader, t1, strlen(t1), &b, err, sizeof err);
    assert_non_null(a);
    assert_ptr_equal(a, a2); /* parsed once */
    assert_int_equal(reader->cache_n, 1);
    assert_true(reader->cache[0].fp == ll_fingerprint64(t1, strlen(t1)));
    /* the reader's own text is the reader */
    ll_schema *self = ll_schema_embedded(reader, reader->orig, reader->orig_len, &b, err, sizeof err);
    assert_ptr_equal(self, reader);
    /* two more texts with 2 entries: the least recently used (t1) goes */
    ll_schema *c2 = ll_schema_embedded(reader, t2, strlen(t2), &b, err, sizeof err);
    ll_schema *c3 = ll_schema_embedded(reader, t3, strlen(t3), &b, err, sizeof err);
    assert_int_equal(reader->cache_n, 2);
    ll_schema *a3 = ll_schema_embedded(reader, t1, strlen(t1), &b, err, sizeof err);
    assert_ptr_not_equal(a3, a); /* parsed again */
    assert_int_equal(reader->cache_n, 2);
    ll_schema *c3b = ll_schema_embedded(reader, t3, strlen(t3), &b, err, sizeof err);
    assert_ptr_equal(c3b, c3);
    /* the byte bound: a text larger than the cache is parsed but not kept */
    o.writer_cache_bytes = 64;
    ll_budgets_of(&o, &b);
    ll_schema *big = ll_schema_embedded(reader, t3, strlen(t3), &b, err, sizeof err);
    assert_ptr_equal(big, c3); /* what is cached is still found */
    const char *t4 = "{\"type\":\"record\",\"name\":\"W\",\"fields\":[{\"name\":\"d\",\"type\":\"int\"}]}";
    ll_schema *d1 = ll_schema_embedded(reader, t4, strlen(t4), &b, err, sizeof err);
    ll_schema *d2 = ll_schema_embedded(reader, t4, strlen(t4), &b, err, sizeof err);
    assert_ptr_not_equal(d1, d2);
    assert_true(reader->cache_bytes <= 1048576);
    ll_schema *all[] = {a, a2, self, c2, c3, a3, c3b, big, d1, d2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        ll_schema_unref(all[i]);
    ll_schema_free(reader);
}

/* A record that holds itself through records only has no finite value (avro-c would recurse
 * for ever building one): refused at load. Through a union it is a list, and fine. */
static void test_self_containing_record(void **state)
{
    (void)state;
    char err[256] = "";
    ll_schema *s =
        ll_schema_from_json("{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"r\","
                            "\"type\":{\"type\":\"record\",\"name\":\"S\",\"fields\":[{\"name\":\"r\","
                            "\"type\":\"R\"}]}}]}",
                            err, sizeof err);
    assert_null(s);
    assert_non_null(strstr(err, "record R contains itself"));
    s = ll_schema_from_json(
        "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"r\",\"type\":[\"null\","
        "\"R\"]}]}",
        err, sizeof err);
    assert_non_null(s);
    ll_schema_free(s);
}

static void test_fingerprint(void **state)
{
    (void)state;
    /* CRC-64-AVRO of the empty input is the algorithm's seed; of "int" (quoted) the Avro test
     * vector 8f5c393f1ad57572, written little-endian there */
    assert_true(ll_fingerprint64("", 0) == 0xc15d213aa4d7a795ULL);
    assert_true(ll_fingerprint64("\"int\"", 5) == 0x7275d51a3f395c8fULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fanout_message_refused), cmocka_unit_test(test_default_bomb_refused),
        cmocka_unit_test(test_schema_text_budget),     cmocka_unit_test(test_values_budget_counts_nulls),
        cmocka_unit_test(test_writer_cache),           cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_self_containing_record),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
