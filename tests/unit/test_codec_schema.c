/*
 * test_codec_schema.c - schema loading, hostile schema JSON, schema-id tables, framing names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ll/codec.h"

static char data_path[1024];

static const char *data_file(const char *name)
{
    const char *dir = getenv("LL_TEST_DATA");
    char fallback[900];
    if (dir == NULL || *dir == '\0') {
        snprintf(fallback, sizeof fallback, "%s", __FILE__);
        char *slash = strrchr(fallback, '/');
        if (slash != NULL)
            snprintf(slash, sizeof fallback - (size_t)(slash - fallback), "/data");
        else
            snprintf(fallback, sizeof fallback, "tests/unit/data");
        dir = fallback;
    }
    snprintf(data_path, sizeof data_path, "%s/%s", dir, name);
    return data_path;
}

static void test_framing_names(void **state)
{
    (void)state;
    ll_framing f = LL_FRAMING_BARE;
    assert_int_equal(ll_framing_parse("bare", &f), 0);
    assert_int_equal(f, LL_FRAMING_BARE);
    assert_int_equal(ll_framing_parse("confluent", &f), 0);
    assert_int_equal(f, LL_FRAMING_CONFLUENT);
    assert_int_equal(ll_framing_parse("container", &f), 0);
    assert_int_equal(f, LL_FRAMING_CONTAINER);
    assert_int_equal(ll_framing_parse("block", &f), 0);
    assert_int_equal(f, LL_FRAMING_BLOCK);
    assert_int_equal(ll_framing_parse("Bare", &f), -1);
    assert_int_equal(ll_framing_parse("", &f), -1);
    assert_int_equal(ll_framing_parse(NULL, &f), -1);
    assert_string_equal(ll_framing_name(LL_FRAMING_BARE), "bare");
    assert_string_equal(ll_framing_name(LL_FRAMING_CONFLUENT), "confluent");
    assert_string_equal(ll_framing_name(LL_FRAMING_CONTAINER), "container");
    assert_string_equal(ll_framing_name(LL_FRAMING_BLOCK), "block");
    assert_string_equal(ll_framing_name((ll_framing)42), "unknown");
}

static void test_load_files(void **state)
{
    (void)state;
    char err[256] = "";
    const char *names[] = {"sample_v0.avsc", "sample_v1.avsc", "sample_v2.avsc", "sample_nifi.avsc"};
    for (size_t i = 0; i < 4; i++) {
        ll_schema *s = ll_schema_from_file(data_file(names[i]), err, sizeof err);
        assert_non_null(s);
        assert_string_equal(ll_schema_fullname(s), "loadledger.test.Sample");
        ll_schema_free(s);
    }
    ll_schema *n = ll_schema_from_file(data_file("node.avsc"), err, sizeof err);
    assert_non_null(n);
    assert_string_equal(ll_schema_fullname(n), "loadledger.test.Node");
    ll_schema_free(n);

    assert_null(ll_schema_from_file(data_file("no-such.avsc"), err, sizeof err));
    assert_non_null(strstr(err, "no-such.avsc"));
    assert_null(ll_schema_from_file(data_file("sample_v1_bare.bin"), err, sizeof err));
    assert_non_null(strstr(err, "not JSON"));
    ll_schema_free(NULL);
}

static void test_fullnames(void **state)
{
    (void)state;
    char err[256];
    struct {
        const char *json, *fullname;
    } cases[] = {
        {"\"string\"", "string"},
        {"{\"type\":\"map\",\"values\":\"long\"}", "map"},
        {"[\"null\",\"string\"]", "union"},
        {"{\"type\":\"record\",\"name\":\"a.b.R\",\"namespace\":\"ignored\","
         "\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]}",
         "a.b.R"},
        {"{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"n.s\","
         "\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]}",
         "n.s.R"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]}", "R"},
        {"{\"type\":\"enum\",\"name\":\"E\",\"namespace\":\"n\",\"symbols\":[\"A\"]}", "n.E"},
        {"{\"type\":\"fixed\",\"name\":\"F\",\"size\":16}", "F"},
        {"{\"type\":\"fixed\",\"name\":\"F\",\"namespace\":\"\",\"size\":1}", "F"},
        {"{\"type\":\"record\",\"name\":\".R\",\"fields\":[{\"name\":\"x\",\"type\":"
         "{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"]}},{\"name\":\"y\",\"type\":\"E\"}]}",
         "R"},
        {"{\"type\":\"record\",\"name\":\"Empty\",\"fields\":[]}", "Empty"},
        /* a nested record inherits the namespace and can be referenced by short name */
        {"{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"n\",\"fields\":["
         "{\"name\":\"a\",\"type\":{\"type\":\"record\",\"name\":\"In\",\"fields\":["
         "{\"name\":\"x\",\"type\":\"int\"}]}},{\"name\":\"b\",\"type\":\"In\"},"
         "{\"name\":\"c\",\"type\":\"n.In\"}]}",
         "n.R"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ll_schema *s = ll_schema_from_json(cases[i].json, err, sizeof err);
        if (s == NULL)
            fail_msg("case %zu: %s", i, err);
        assert_string_equal(ll_schema_fullname(s), cases[i].fullname);
        ll_schema_free(s);
    }
}

/* Schemas avro-c would crash on, leak on, or that are simply wrong: refused with a reason. */
static void test_hostile_schemas(void **state)
{
    (void)state;
    char err[256];
    struct {
        const char *json, *reason;
    } cases[] = {
        {"{\"type\":\"fixed\",\"name\":\"F\",\"size\":-1}", "fixed size -1"},
        {"{\"type\":\"fixed\",\"name\":\"F\",\"size\":0}", "fixed size 0"},
        {"{\"type\":\"fixed\",\"name\":\"F\",\"size\":4294967296}", "fixed size 4294967296"},
        {"{\"type\":\"fixed\",\"name\":\"F\",\"size\":\"16\"}", "integer size"},
        {"{\"type\":\"fixed\",\"size\":16}", "without a name"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"f\",\"type\":"
         "{\"type\":\"fixed\",\"name\":\"F\",\"size\":-7}}]}",
         "fixed size -7"},
        {"\"nosuchtype\"", "unknown type nosuchtype"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"f\",\"type\":\"Other\"}]}",
         "unknown type Other"},
        {"{\"type\":\"record\",\"name\":\"R\"}", "without fields"},
        {"{\"type\":\"record\",\"name\":\"1R\",\"fields\":[{\"name\":\"f\",\"type\":\"int\"}]}",
         "invalid record name"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"f-g\",\"type\":\"int\"}]}",
         "no valid name"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"f\"}]}", "has no type"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"f\",\"type\":\"int\"},"
         "{\"name\":\"f\",\"type\":\"long\"}]}",
         "duplicate field f"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"f\",\"type\":"
         "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"g\",\"type\":\"int\"}]}}]}",
         "duplicate type name R"},
        {"[\"null\",[\"int\",\"long\"]]", "union inside a union"},
        {"[\"int\",\"int\"]", "two int branches"},
        /* F has no namespace (empty is none), so "F" inside namespace n is n.F (as avro-c) */
        {"{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"n\",\"fields\":["
         "{\"name\":\"a\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"namespace\":\"\",\"size\":1}},"
         "{\"name\":\"b\",\"type\":\"F\"}]}",
         "unknown type n.F"},
        {"[]", "empty union"},
        {"{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[]}", "without symbols"},
        {"{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"A\"]}", "duplicate symbol A"},
        {"{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\"],\"default\":\"B\"}",
         "default is not a symbol"},
        {"{\"type\":\"array\"}", "array without items"},
        {"{\"type\":\"map\"}", "map without values"},
        {"42", "a type must be"},
        {"{\"type\":{\"type\":\"string\"}}", "a type must be"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"f\",\"type\":"
         "[\"null\",\"string\"],\"default\":\"x\"}]}",
         "R.f: bad default: expected null"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"f\",\"type\":\"int\","
         "\"default\":4294967296}]}",
         "R.f: bad default: expected int"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"f\",\"type\":\"R\","
         "\"default\":{}}]}",
         "record R contains itself"},
        {"{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"f\",\"type\":\"int\"}],"
         "\"name\":\"S\"}",
         "not JSON"},
        {"{\"type\":\"record\",", "not JSON"},
        {"", "not JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        ll_schema *s = ll_schema_from_json(cases[i].json, err, sizeof err);
        if (s != NULL) {
            ll_schema_free(s);
            fail_msg("case %zu accepted: %s", i, cases[i].json);
        }
        if (strstr(err, cases[i].reason) == NULL)
            fail_msg("case %zu: err \"%s\" lacks \"%s\"", i, err, cases[i].reason);
    }
    assert_null(ll_schema_from_json(NULL, err, sizeof err));
}

static void test_schema_nesting_bounded(void **state)
{
    (void)state;
    char err[256];
    /* 200 nested arrays: jansson parses it, our parser refuses before avro-c recurses */
    size_t depth = 200;
    size_t cap = depth * 40 + 64;
    char *json = malloc(cap);
    assert_non_null(json);
    size_t o = 0;
    for (size_t i = 0; i < depth; i++)
        o += (size_t)snprintf(json + o, cap - o, "{\"type\":\"array\",\"items\":");
    o += (size_t)snprintf(json + o, cap - o, "\"int\"");
    for (size_t i = 0; i < depth; i++)
        json[o++] = '}';
    json[o] = '\0';
    assert_null(ll_schema_from_json(json, err, sizeof err));
    assert_non_null(strstr(err, "nested deeper"));

    /* 20 levels are fine */
    o = 0;
    for (size_t i = 0; i < 20; i++)
        o += (size_t)snprintf(json + o, cap - o, "{\"type\":\"array\",\"items\":");
    o += (size_t)snprintf(json + o, cap - o, "\"int\"");
    for (size_t i = 0; i < 20; i++)
        json[o++] = '}';
    json[o] = '\0';
    ll_schema *s = ll_schema_from_json(json, err, sizeof err);
    assert_non_null(s);
    assert_string_equal(ll_schema_fullname(s), "array");
    ll_schema_free(s);
    free(json);
}

static void test_schema_ids(void **state)
{
    (void)state;
    char err[256];
    ll_schema_ids *ids = ll_schema_ids_load(data_file("ids.json"), err, sizeof err);
    if (ids == NULL)
        fail_msg("%s", err);
    assert_non_null(ll_schema_ids_get(ids, 3));
    assert_non_null(ll_schema_ids_get(ids, 7));
    assert_non_null(ll_schema_ids_get(ids, 9));
    assert_non_null(ll_schema_ids_get(ids, 11));
    assert_null(ll_schema_ids_get(ids, 4));
    assert_null(ll_schema_ids_get(NULL, 7));
    assert_string_equal(ll_schema_fullname(ll_schema_ids_get(ids, 7)), "loadledger.test.Sample");

    ll_schema *extra = ll_schema_from_file(data_file("node.avsc"), err, sizeof err);
    assert_non_null(extra);
    assert_int_equal(ll_schema_ids_put(ids, 7, extra), -1); /* taken: still ours to free */
    assert_int_equal(ll_schema_ids_put(ids, 100, extra), 0);
    assert_ptr_equal(ll_schema_ids_get(ids, 100), extra);
    ll_schema_ids_free(ids);
    ll_schema_ids_free(NULL);

    ll_schema_ids *empty = ll_schema_ids_new();
    assert_non_null(empty);
    assert_null(ll_schema_ids_get(empty, 0));
    ll_schema_ids_free(empty);

    assert_null(ll_schema_ids_load(data_file("nope.json"), err, sizeof err));
    assert_null(ll_schema_ids_load(data_file("sample_v1.avsc"), err, sizeof err));
    assert_non_null(strstr(err, "bad schema id"));
    assert_null(ll_schema_ids_load(data_file("sample_v1.expected.json"), err, sizeof err));
}

static void test_schema_ids_bad_entries(void **state)
{
    (void)state;
    char err[256];
    char dir[] = "/tmp/ll_codec_ids_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512], avsc[512];
    snprintf(path, sizeof path, "%s/ids.json", dir);
    snprintf(avsc, sizeof avsc, "%s/bad.avsc", dir);
    const char *bodies[] = {
        "{\"1\": \"bad.avsc\"}",          /* schema refused */
        "{\"1\": \"missing.avsc\"}",      /* file missing */
        "{\"-1\": \"bad.avsc\"}",         /* negative id */
        "{\"2147483648\": \"bad.avsc\"}", /* beyond int32 */
        "{\"1\": 5}",                     /* not a path */
        "[1]",                            /* not an object */
    };
    FILE *f = fopen(avsc, "w");
    assert_non_null(f);
    fputs("{\"type\":\"fixed\",\"name\":\"F\",\"size\":-1}", f);
    fclose(f);
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        f = fopen(path, "w");
        assert_non_null(f);
        fputs(bodies[i], f);
        fclose(f);
        err[0] = '\0';
        ll_schema_ids *ids = ll_schema_ids_load(path, err, sizeof err);
        if (ids != NULL) {
            ll_schema_ids_free(ids);
            fail_msg("case %zu accepted", i);
        }
        assert_true(err[0] != '\0');
    }
    /* an absolute path in the table is used as is */
    f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"5\": \"%s\"}", data_file("node.avsc"));
    fclose(f);
    ll_schema_ids *ids = ll_schema_ids_load(path, err, sizeof err);
    if (ids == NULL)
        fail_msg("%s", err);
    assert_string_equal(ll_schema_fullname(ll_schema_ids_get(ids, 5)), "loadledger.test.Node");
    ll_schema_ids_free(ids);
    remove(path);
    remove(avsc);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framing_names),
        cmocka_unit_test(test_load_files),
        cmocka_unit_test(test_fullnames),
        cmocka_unit_test(test_hostile_schemas),
        cmocka_unit_test(test_schema_nesting_bounded),
        cmocka_unit_test(test_schema_ids),
        cmocka_unit_test(test_schema_ids_bad_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
