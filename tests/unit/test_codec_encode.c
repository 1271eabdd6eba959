/*
 * test_codec_encode.c - ll_encode: byte-for-byte agreement with python3-avro's output, round
 * trips in the three output framings, union branch choice by JSON type, defaults, and the
 * errors of values that do not fit the schema.
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

static unsigned char *slurp(const char *name, size_t *len)
{
    FILE *f = fopen(data_file(name), "rb");
    if (f == NULL)
        fail_msg("cannot open %s", data_file(name));
    unsigned char *buf = malloc(1 << 16);
    assert_non_null(buf);
    *len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    return buf;
}

static json_t *expected(const char *name)
{
    json_error_t je;
    json_t *j = json_load_file(data_file(name), 0, &je);
    if (j == NULL)
        fail_msg("%s: %s", name, je.text);
    return j;
}

static void assert_json_equal(json_t *got, json_t *want)
{
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS);
        char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
        fprintf(stderr, "got:  %s\nwant: %s\n", g, w);
        free(g);
        free(w);
        fail_msg("JSON differs");
    }
}

static const void *find_bytes(const void *hay, size_t hlen, const void *needle, size_t nlen)
{
    const unsigned char *h = hay;
    for (size_t i = 0; nlen <= hlen && i <= hlen - nlen; i++)
        if (memcmp(h + i, needle, nlen) == 0)
            return h + i;
    return NULL;
}

typedef struct fx {
    ll_schema *v1, *v0, *node, *u;
} fx;

static const char *union_schema =
    "{\"type\":\"record\",\"name\":\"U\",\"namespace\":\"t\",\"fields\":["
    "{\"name\":\"a\",\"type\":[\"null\",\"string\",\"long\",\"double\",\"boolean\","
    "{\"type\":\"record\",\"name\":\"P\",\"fields\":[{\"name\":\"x\",\"type\":\"int\"}]},"
    "{\"type\":\"map\",\"values\":\"long\"},{\"type\":\"array\",\"items\":\"string\"}]},"
    "{\"name\":\"b\",\"type\":[\"int\",\"long\"],\"default\":0},"
    "{\"name\":\"c\",\"type\":[\"double\",\"long\"],\"default\":0},"
    "{\"name\":\"d\",\"type\":[\"null\",\"float\"],\"default\":null},"
    "{\"name\":\"e\",\"type\":[\"null\",{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\"]}],"
    "\"default\":null},"
    "{\"name\":\"f\",\"type\":[\"null\",\"bytes\"],\"default\":null},"
    "{\"name\":\"g\",\"type\":[\"null\",{\"type\":\"fixed\",\"name\":\"F4\",\"size\":4}],"
    "\"default\":null},"
    "{\"name\":\"h\",\"type\":[\"null\",\"string\"],\"default\":null}]}";

static int setup(void **state)
{
    char err[256];
    fx *f = calloc(1, sizeof *f);
    f->v1 = ll_schema_from_file(data_file("sample_v1.avsc"), err, sizeof err);
    f->v0 = ll_schema_from_file(data_file("sample_v0.avsc"), err, sizeof err);
    f->node = ll_schema_from_file(data_file("node.avsc"), err, sizeof err);
    f->u = ll_schema_from_json(union_schema, err, sizeof err);
    if (f->v1 == NULL || f->v0 == NULL || f->node == NULL || f->u == NULL) {
        fprintf(stderr, "setup: %s\n", err);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    ll_schema_free(f->v1);
    ll_schema_free(f->v0);
    ll_schema_free(f->node);
    ll_schema_free(f->u);
    free(f);
    return 0;
}

static unsigned char *encode_ok(const ll_schema *s, ll_framing fr, int32_t id, const json_t *v, size_t *len)
{
    ll_encode_opts o = {.framing = fr, .schema = s, .schema_id = id};
    unsigned char *buf = NULL;
    char err[256] = "";
    if (ll_encode(&o, v, &buf, len, err, sizeof err) != 0)
        fail_msg("encode: %s", err);
    assert_non_null(buf);
    return buf;
}

static void encode_fails(const ll_schema *s, const json_t *v, const char *reason)
{
    ll_encode_opts o = {.framing = LL_FRAMING_BARE, .schema = s};
    unsigned char *buf = (unsigned char *)0x1;
    size_t len = 99;
    char err[256] = "";
    if (ll_encode(&o, v, &buf, &len, err, sizeof err) == 0) {
        free(buf);
        fail_msg("accepted (%s)", reason);
    }
    assert_null(buf);
    assert_int_equal(len, 0);
    if (strstr(err, reason) == NULL)
        fail_msg("err \"%s\" lacks \"%s\"", err, reason);
}

static json_t *decode_ok(const ll_schema *reader, const ll_schema_ids *ids, ll_framing fr,
                         const unsigned char *buf, size_t len)
{
    ll_decode_opts o = {.framing = fr, .reader = reader, .ids = ids};
    json_t *out = NULL;
    char err[256] = "";
    if (ll_decode(&o, buf, len, &out, err, sizeof err) != 0)
        fail_msg("decode: %s", err);
    return out;
}

/* Our bytes are python3-avro's bytes. */
static void test_same_bytes_as_python(void **state)
{
    fx *f = *state;
    json_t *v = expected("sample_v1.expected.json");
    size_t len, plen;
    unsigned char *buf = encode_ok(f->v1, LL_FRAMING_BARE, 0, v, &len);
    unsigned char *py = slurp("sample_v1_bare.bin", &plen);
    assert_int_equal(len, plen);
    assert_memory_equal(buf, py, len);
    free(buf);
    free(py);

    buf = encode_ok(f->v1, LL_FRAMING_CONFLUENT, 7, v, &len);
    py = slurp("sample_v1_confluent.bin", &plen);
    assert_int_equal(len, plen);
    assert_memory_equal(buf, py, len);
    free(buf);
    free(py);
    json_decref(v);
}

static void test_round_trips(void **state)
{
    fx *f = *state;
    json_t *v = expected("sample_v1.expected.json");
    /* a string with a NUL is refused (ll_decode would refuse it); an empty map / array on top */
    json_object_set_new(v, "id", json_stringn("a\0b", 3));
    encode_fails(f->v1, v, "id: string contains a NUL byte");
    json_object_set_new(v, "id", json_stringn("a\tb", 3));
    ll_framing frs[] = {LL_FRAMING_BARE, LL_FRAMING_CONFLUENT, LL_FRAMING_CONTAINER};
    ll_schema_ids *ids = ll_schema_ids_new();
    char err[256];
    ll_schema *v1copy = ll_schema_from_file(data_file("sample_v1.avsc"), err, sizeof err);
    assert_int_equal(ll_schema_ids_put(ids, 70000, v1copy), 0);
    for (size_t i = 0; i < 3; i++) {
        size_t len;
        unsigned char *buf = encode_ok(f->v1, frs[i], 70000, v, &len);
        json_t *back = decode_ok(f->v1, ids, frs[i], buf, len);
        assert_json_equal(back, v);
        assert_int_equal(json_string_length(json_object_get(back, "id")), 3);
        json_decref(back);
        if (frs[i] == LL_FRAMING_CONFLUENT) {
            const unsigned char hdr[] = {0x00, 0x00, 0x01, 0x11, 0x70};
            assert_memory_equal(buf, hdr, 5);
        }
        if (frs[i] == LL_FRAMING_CONTAINER) {
            assert_memory_equal(buf, "Obj\x01", 4);
            /* metadata: 2 entries, avro.schema first (its value: our compact schema JSON) */
            assert_int_equal(buf[4], 0x04);
            assert_int_equal(buf[5], 22);
            assert_memory_equal(buf + 6, "avro.schema", 11);
            assert_non_null(find_bytes(buf, len,
                                       "\x14"
                                       "avro.codec"
                                       "\x08"
                                       "null",
                                       16));
            /* the sync marker closes the header and the block */
            size_t dlen;
            unsigned char *bare = encode_ok(f->v1, LL_FRAMING_BARE, 0, v, &dlen);
            assert_memory_equal(buf + len - 16 - dlen, bare, dlen);
            const unsigned char *sync_end = buf + len - 16;
            assert_non_null(find_bytes(buf, len - 16 - dlen, sync_end, 16));
            /* a second file has another random marker */
            size_t len2;
            unsigned char *buf2 = encode_ok(f->v1, LL_FRAMING_CONTAINER, 0, v, &len2);
            assert_int_equal(len2, len);
            assert_memory_not_equal(buf2 + len2 - 16, sync_end, 16);
            free(buf2);
            free(bare);
        }
        free(buf);
    }
    ll_schema_ids_free(ids);
    json_decref(v);
}

static void test_defaults_on_encode(void **state)
{
    fx *f = *state;
    json_t *v = json_pack("{s:s,s:i,s:i,s:b,s:[{s:s},{s:s,s:i}]}", "id", "x", "count", 1, "small", 2, "flag",
                          0, "items", "name", "n1", "name", "n2", "qty", 9);
    size_t len;
    unsigned char *buf = encode_ok(f->v1, LL_FRAMING_BARE, 0, v, &len);
    json_t *back = decode_ok(f->v1, NULL, LL_FRAMING_BARE, buf, len);
    json_t *want = json_pack("{s:s,s:i,s:i,s:b,s:n,s:n,s:f,s:s,s:{},s:[{s:s,s:i,s:n},{s:s,s:i,s:n}],s:s,s:f}",
                             "id", "x", "count", 1, "small", 2, "flag", 0, "note", "size", "ratio", 0.5,
                             "status", "NEW", "tags", "items", "name", "n1", "qty", 1, "label", "name", "n2",
                             "qty", 9, "label", "blob", "", "weight", 1.5);
    assert_json_equal(back, want);
    json_decref(want);
    json_decref(back);
    free(buf);
    json_decref(v);
}

static void test_older_schema_encoded_read_newer(void **state)
{
    fx *f = *state;
    /* write with the old schema (Confluent id 3), read with the current one */
    json_t *v = json_pack("{s:s,s:i,s:i,s:b,s:s,s:{s:s},s:[{s:s}]}", "id", "old", "count", 5, "small", 6,
                          "flag", 1, "note", "n", "tags", "a", "b", "items", "name", "i1");
    size_t len;
    unsigned char *buf = encode_ok(f->v0, LL_FRAMING_CONFLUENT, 3, v, &len);
    char err[256];
    ll_schema_ids *ids = ll_schema_ids_load(data_file("ids.json"), err, sizeof err);
    assert_non_null(ids);
    json_t *back = decode_ok(f->v1, ids, LL_FRAMING_CONFLUENT, buf, len);
    assert_int_equal(json_integer_value(json_object_get(back, "count")), 5);
    assert_string_equal(json_string_value(json_object_get(back, "note")), "n");
    assert_true(json_real_value(json_object_get(back, "ratio")) == 0.5);
    json_t *item = json_array_get(json_object_get(back, "items"), 0);
    assert_string_equal(json_string_value(json_object_get(item, "name")), "i1");
    assert_int_equal(json_integer_value(json_object_get(item, "qty")), 1);
    json_decref(back);
    free(buf);

    /* the same through a container file: the embedded schema is the writer */
    buf = encode_ok(f->v0, LL_FRAMING_CONTAINER, 0, v, &len);
    back = decode_ok(f->v1, NULL, LL_FRAMING_CONTAINER, buf, len);
    assert_string_equal(json_string_value(json_object_get(back, "status")), "NEW");
    assert_int_equal(json_integer_value(json_object_get(back, "small")), 6);
    json_decref(back);
    free(buf);
    ll_schema_ids_free(ids);
    json_decref(v);
}

/* The union branch index is the first byte of U's datum. */
static void check_branch(const fx *f, json_t *a, int branch)
{
    json_t *v = json_pack("{s:O}", "a", a);
    size_t len;
    unsigned char *buf = encode_ok(f->u, LL_FRAMING_BARE, 0, v, &len);
    assert_int_equal(buf[0], (unsigned)branch * 2);
    json_t *back = decode_ok(f->u, NULL, LL_FRAMING_BARE, buf, len);
    assert_json_equal(json_object_get(back, "a"), a);
    json_decref(back);
    free(buf);
    json_decref(v);
    json_decref(a);
}

static void test_union_branch_by_json_type(void **state)
{
    fx *f = *state;
    check_branch(f, json_null(), 0);
    check_branch(f, json_string("s"), 1);
    check_branch(f, json_integer(-5), 2);
    check_branch(f, json_real(2.5), 3);
    check_branch(f, json_true(), 4);
    check_branch(f, json_pack("{s:i}", "x", 1), 5); /* fits record P */
    check_branch(f, json_pack("{s:i}", "k", 7), 6); /* not P: the map */
    check_branch(f, json_pack("[s,s]", "p", "q"), 7);
    check_branch(f, json_array(), 7);

    json_t *bad = json_pack("{s:{s:s}}", "a", "k", "v"); /* neither P nor map<long> */
    encode_fails(f->u, bad, "a: no branch of the union fits a JSON object");
    json_decref(bad);
    bad = json_pack("{s:[i]}", "a", 1);
    encode_fails(f->u, bad, "a: no branch of the union fits a JSON array");
    json_decref(bad);

    /* int or long by size; long before double for integers; float from an integer */
    json_t *v = json_pack("{s:n,s:i,s:I,s:i,s:s,s:s,s:s,s:s}", "a", "b", 5, "c", (json_int_t)7, "d", 3, "e",
                          "B", "f", "raw", "g", "abcd", "h", "");
    size_t len;
    unsigned char *buf = encode_ok(f->u, LL_FRAMING_BARE, 0, v, &len);
    const unsigned char want[] = {0x00,                         /* a: null */
                                  0x00, 0x0a,                   /* b: int 5 */
                                  0x02, 0x0e,                   /* c: long 7 (branch 1) */
                                  0x02, 0x00, 0x00, 0x40, 0x40, /* d: float 3.0 */
                                  0x02, 0x02,                   /* e: enum B */
                                  0x02, 0x06, 'r',  'a',  'w',  /* f: bytes */
                                  0x02, 'a',  'b',  'c',  'd',  /* g: fixed */
                                  0x02, 0x00};                  /* h: "" */
    assert_int_equal(len, sizeof want);
    assert_memory_equal(buf, want, sizeof want);
    json_t *back = decode_ok(f->u, NULL, LL_FRAMING_BARE, buf, len);
    assert_true(json_is_real(json_object_get(back, "d")));
    assert_true(json_real_value(json_object_get(back, "d")) == 3.0);
    assert_string_equal(json_string_value(json_object_get(back, "e")), "B");
    assert_string_equal(json_string_value(json_object_get(back, "g")), "abcd");
    json_decref(back);
    free(buf);
    json_decref(v);

    v = json_pack("{s:n,s:I}", "a", "b", (json_int_t)1 << 40);
    buf = encode_ok(f->u, LL_FRAMING_BARE, 0, v, &len);
    assert_int_equal(buf[1], 0x02); /* b: long */
    back = decode_ok(f->u, NULL, LL_FRAMING_BARE, buf, len);
    assert_int_equal(json_integer_value(json_object_get(back, "b")), (json_int_t)1 << 40);
    json_decref(back);
    free(buf);
    json_decref(v);

    v = json_pack("{s:n,s:s}", "a", "e", "C"); /* not a symbol */
    encode_fails(f->u, v, "e: no branch of the union fits a JSON string");
    json_decref(v);
    v = json_pack("{s:n,s:s}", "a", "g", "abc"); /* wrong fixed length, and no string branch */
    encode_fails(f->u, v, "g: no branch of the union fits a JSON string");
    json_decref(v);
}

static void test_values_that_do_not_fit(void **state)
{
    fx *f = *state;
    json_t *base = json_pack("{s:s,s:i,s:i,s:b}", "id", "x", "count", 1, "small", 2, "flag", 1);
    struct {
        const char *key;
        json_t *val;
        const char *reason;
    } cases[] = {
        {"small", json_string("2"), "small: expected int, got string"},
        {"small", json_integer((json_int_t)1 << 40), "small: expected int, got integer"},
        {"count", json_real(1.5), "count: expected long, got real"},
        {"flag", json_integer(1), "flag: expected boolean, got integer"},
        {"status", json_string("GONE"), "status: expected loadledger.test.Status, got string"},
        {"zzz", json_integer(1), "unknown field zzz in loadledger.test.Sample"},
        {"tags", json_pack("{s:i}", "k", 1), "tags.k: expected string, got integer"},
        {"tags", json_array(), "tags: expected map (object), got array"},
        {"items", json_pack("[{s:i}]", "qty", 1), "items.name: missing field without default"},
        {"items", json_pack("[{s:s,s:i}]", "name", "n", "bogus", 1), "unknown field bogus"},
        {"items", json_pack("{}"), "items: expected array, got object"},
        {"note", json_integer(3), "note: no branch of the union fits a JSON integer"},
        {"ratio", json_string("0.5"), "ratio: expected double, got string"},
        {"weight", json_real(1e300), "weight: expected float, got real"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *v = json_deep_copy(base);
        json_object_set_new(v, cases[i].key, cases[i].val);
        encode_fails(f->v1, v, cases[i].reason);
        json_decref(v);
    }
    json_t *v = json_deep_copy(base);
    json_object_del(v, "count");
    encode_fails(f->v1, v, "count: missing field without default");
    json_decref(v);
    json_t *s = json_string("not a record");
    encode_fails(f->v1, s, "expected loadledger.test.Sample (object), got string");
    json_decref(s);

    /* framing and argument errors */
    ll_encode_opts o = {.framing = LL_FRAMING_BLOCK, .schema = f->v1};
    unsigned char *buf = NULL;
    size_t len = 0;
    char err[256];
    assert_int_equal(ll_encode(&o, base, &buf, &len, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot write framing block"));
    assert_null(buf);
    o.framing = LL_FRAMING_BARE;
    assert_int_equal(ll_encode(NULL, base, &buf, &len, err, sizeof err), -1);
    assert_int_equal(ll_encode(&o, NULL, &buf, &len, err, sizeof err), -1);
    assert_int_equal(ll_encode(&o, base, NULL, &len, err, sizeof err), -1);
    o.schema = NULL;
    assert_int_equal(ll_encode(&o, base, &buf, &len, err, sizeof err), -1);
    json_decref(base);
}

static json_t *chain(int n)
{
    json_t *v = json_null();
    for (int i = n; i >= 1; i--)
        v = json_pack("{s:i,s:o}", "v", i, "next", v);
    return v;
}

static void test_recursive_values(void **state)
{
    fx *f = *state;
    json_t *v = chain(5);
    size_t len;
    unsigned char *buf = encode_ok(f->node, LL_FRAMING_BARE, 0, v, &len);
    json_t *back = decode_ok(f->node, NULL, LL_FRAMING_BARE, buf, len);
    assert_json_equal(back, v);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(json_object_get(back, "next"), "next"), "v")), 3);
    json_decref(back);
    free(buf);
    json_decref(v);

    /* 32 levels are fine, 33 are what our own decoder refuses: not written */
    v = chain(32);
    buf = encode_ok(f->node, LL_FRAMING_BARE, 0, v, &len);
    back = decode_ok(f->node, NULL, LL_FRAMING_BARE, buf, len);
    assert_json_equal(back, v);
    json_decref(back);
    free(buf);
    json_decref(v);
    v = chain(33);
    encode_fails(f->node, v, "value nested deeper than 32");
    json_decref(v);
    v = chain(100000);
    encode_fails(f->node, v, "value nested deeper than 32");
    json_decref(v);
}

static void test_primitive_schemas(void **state)
{
    (void)state;
    char err[256];
    ll_schema *s = ll_schema_from_json("\"string\"", err, sizeof err);
    assert_non_null(s);
    json_t *v = json_string("h\xc3\xa9");
    size_t len;
    unsigned char *buf = encode_ok(s, LL_FRAMING_BARE, 0, v, &len);
    assert_int_equal(len, 4);
    assert_memory_equal(buf, "\x06h\xc3\xa9", 4);
    json_t *back = decode_ok(s, NULL, LL_FRAMING_BARE, buf, len);
    assert_json_equal(back, v);
    json_decref(back);
    free(buf);
    json_decref(v);

    /* a value larger than the writer's first 256 bytes: the buffer grows, nothing is cut */
    char big[1001];
    memset(big, 'z', 1000);
    big[1000] = '\0';
    v = json_string(big);
    buf = encode_ok(s, LL_FRAMING_CONFLUENT, 3, v, &len);
    assert_int_equal(len, 5 + 2 + 1000);
    assert_memory_equal(buf, "\x00\x00\x00\x00\x03\xd0\x0f", 7); /* zig-zag 1000 = 2000 */
    assert_memory_equal(buf + 7, big, 1000);
    free(buf);
    json_decref(v);
    ll_schema_free(s);

    /* empty and filled arrays and maps: one block of a positive count, then 0 (as avro-c) */
    s = ll_schema_from_json("{\"type\":\"record\",\"name\":\"AM\",\"fields\":["
                            "{\"name\":\"a\",\"type\":{\"type\":\"array\",\"items\":\"int\"}},"
                            "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":\"boolean\"}},"
                            "{\"name\":\"e\",\"type\":{\"type\":\"array\",\"items\":\"int\"},\"default\":[]},"
                            "{\"name\":\"d\",\"type\":\"double\"}]}",
                            err, sizeof err);
    assert_non_null(s);
    v = json_pack("{s:[i,i],s:{s:b},s:f}", "a", -1, 64, "m", "k", 1, "d", 1.0);
    buf = encode_ok(s, LL_FRAMING_BARE, 0, v, &len);
    const unsigned char am[] = {0x04, 0x01, 0x80, 0x01, 0x00,                    /* a: 2 items, -1, 64, end */
                                0x02, 0x02, 'k',  0x01, 0x00,                    /* m: 1 entry k: true, end */
                                0x00,                                            /* e: default [], end only */
                                0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f}; /* d: 1.0 */
    assert_int_equal(len, sizeof am);
    assert_memory_equal(buf, am, sizeof am);
    free(buf);
    json_decref(v);
    ll_schema_free(s);

    /* a record without fields is zero bytes */
    s = ll_schema_from_json("{\"type\":\"record\",\"name\":\"Empty\",\"fields\":[]}", err, sizeof err);
    assert_non_null(s);
    v = json_object();
    buf = encode_ok(s, LL_FRAMING_BARE, 0, v, &len);
    assert_int_equal(len, 0);
    back = decode_ok(s, NULL, LL_FRAMING_BARE, buf, len);
    assert_json_equal(back, v);
    json_decref(back);
    free(buf);
    json_decref(v);
    ll_schema_free(s);

    s = ll_schema_from_json("{\"type\":\"map\",\"values\":[\"null\",\"double\"]}", err, sizeof err);
    assert_non_null(s);
    v = json_pack("{s:n,s:f,s:i}", "a", "b", -0.125, "c", 4);
    buf = encode_ok(s, LL_FRAMING_CONTAINER, 0, v, &len);
    back = decode_ok(s, NULL, LL_FRAMING_CONTAINER, buf, len);
    assert_true(json_is_null(json_object_get(back, "a")));
    assert_true(json_real_value(json_object_get(back, "b")) == -0.125);
    assert_true(json_is_real(json_object_get(back, "c"))); /* 4 went as a double */
    assert_true(json_real_value(json_object_get(back, "c")) == 4.0);
    json_decref(back);
    free(buf);
    json_decref(v);
    ll_schema_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bytes_as_python),
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_defaults_on_encode),
        cmocka_unit_test(test_older_schema_encoded_read_newer),
        cmocka_unit_test(test_union_branch_by_json_type),
        cmocka_unit_test(test_values_that_do_not_fit),
        cmocka_unit_test(test_recursive_values),
        cmocka_unit_test(test_primitive_schemas),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
