/*
 * test_codec_decode.c - ll_decode on bytes written by an independent implementation
 * (python3-avro, tests/unit/gen_codec_fixtures.py) in the four framings, schema evolution,
 * NiFi's union order, negative block counts, and hostile input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

#include <cmocka.h>

#include "ll/codec.h"

static char data_path[1024];

/* The path of a fixture in buf (thread-safe). */
static const char *data_file_r(const char *name, char *buf, size_t len)
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
    snprintf(buf, len, "%s/%s", dir, name);
    return buf;
}

static const char *data_file(const char *name)
{
    return data_file_r(name, data_path, sizeof data_path);
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

typedef struct fx {
    ll_schema *v1, *node;
    ll_schema_ids *ids;
} fx;

static int setup(void **state)
{
    char err[256];
    fx *f = calloc(1, sizeof *f);
    f->v1 = ll_schema_from_file(data_file("sample_v1.avsc"), err, sizeof err);
    f->node = ll_schema_from_file(data_file("node.avsc"), err, sizeof err);
    f->ids = ll_schema_ids_load(data_file("ids.json"), err, sizeof err);
    if (f->v1 == NULL || f->node == NULL || f->ids == NULL) {
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
    ll_schema_free(f->node);
    ll_schema_ids_free(f->ids);
    free(f);
    return 0;
}

static int decode_mem(const ll_schema *reader, const ll_schema_ids *ids, ll_framing framing, const void *buf,
                      size_t len, json_t **out, char *err, size_t errlen)
{
    ll_decode_opts o = {.framing = framing, .reader = reader, .ids = ids};
    return ll_decode(&o, buf, len, out, err, errlen);
}

static json_t *decode_ok(const fx *f, const ll_schema *reader, ll_framing framing, const char *file)
{
    size_t len;
    unsigned char *buf = slurp(file, &len);
    char err[256] = "";
    json_t *out = NULL;
    int rc = decode_mem(reader, f->ids, framing, buf, len, &out, err, sizeof err);
    free(buf);
    if (rc != 0)
        fail_msg("%s: %s", file, err);
    assert_non_null(out);
    return out;
}

static void decode_fails(const fx *f, const ll_schema *reader, ll_framing framing, const void *buf,
                         size_t len, const char *reason)
{
    char err[256] = "";
    json_t *out = (json_t *)0x1;
    int rc = decode_mem(reader, f->ids, framing, buf, len, &out, err, sizeof err);
    if (rc == 0) {
        char *dump = json_dumps(out, JSON_COMPACT);
        fail_msg("accepted (%s): %s", reason, dump ? dump : "?");
    }
    assert_null(out);
    if (strstr(err, reason) == NULL)
        fail_msg("err \"%s\" lacks \"%s\"", err, reason);
}

static void decode_file_fails(const fx *f, const ll_schema *reader, ll_framing framing, const char *file,
                              const char *reason)
{
    size_t len;
    unsigned char *buf = slurp(file, &len);
    decode_fails(f, reader, framing, buf, len, reason);
    free(buf);
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

/* The values of sample A, field by field (not only via the expected file). */
static void assert_sample_a(json_t *j)
{
    assert_string_equal(json_string_value(json_object_get(j, "id")), "run-0001");
    assert_true(json_is_integer(json_object_get(j, "count")));
    assert_int_equal(json_integer_value(json_object_get(j, "count")), 1234567890123LL);
    assert_int_equal(json_integer_value(json_object_get(j, "small")), -42);
    assert_true(json_is_true(json_object_get(j, "flag")));
    assert_string_equal(json_string_value(json_object_get(j, "note")), "h\xc3\xa9llo w\xc3\xb6rld");
    assert_int_equal(json_integer_value(json_object_get(j, "size")), 9007199254740993LL);
    assert_true(json_is_real(json_object_get(j, "ratio")));
    assert_true(json_real_value(json_object_get(j, "ratio")) == 2.25);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "DONE");
    json_t *tags = json_object_get(j, "tags");
    assert_int_equal(json_object_size(tags), 2);
    assert_string_equal(json_string_value(json_object_get(tags, "env")), "prod");
    assert_string_equal(json_string_value(json_object_get(tags, "team")), "ingest");
    json_t *items = json_object_get(j, "items");
    assert_int_equal(json_array_size(items), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "name")), "a");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(items, 0), "qty")), 3);
    assert_true(json_is_null(json_object_get(json_array_get(items, 0), "label")));
    assert_int_equal(json_integer_value(json_object_get(json_array_get(items, 1), "qty")), -1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "label")), "x");
    json_t *blob = json_object_get(j, "blob");
    assert_int_equal(json_string_length(blob), 9);
    assert_memory_equal(json_string_value(blob),
                        "raw\x01"
                        "bytes",
                        9);
    assert_true(json_real_value(json_object_get(j, "weight")) == 0.25);
    assert_int_equal(json_object_size(j), 12);
}

static void test_four_framings(void **state)
{
    fx *f = *state;
    json_t *want = expected("sample_v1.expected.json");
    struct {
        ll_framing fr;
        const char *file;
    } cases[] = {
        {LL_FRAMING_BARE, "sample_v1_bare.bin"},           {LL_FRAMING_CONFLUENT, "sample_v1_confluent.bin"},
        {LL_FRAMING_CONTAINER, "sample_v1_container.bin"}, {LL_FRAMING_BLOCK, "sample_v1_block.bin"},
        {LL_FRAMING_BARE, "sample_v1_negblocks_bare.bin"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *got = decode_ok(f, f->v1, cases[i].fr, cases[i].file);
        assert_sample_a(got);
        assert_json_equal(got, want);
        json_decref(got);
    }
    json_decref(want);
}

static void test_older_writer(void **state)
{
    fx *f = *state;
    json_t *want = expected("sample_v0.expected.json");
    const char *files[] = {"sample_v0_container.bin", "sample_v0_confluent.bin"};
    ll_framing frs[] = {LL_FRAMING_CONTAINER, LL_FRAMING_CONFLUENT};
    for (size_t i = 0; i < 2; i++) {
        json_t *got = decode_ok(f, f->v1, frs[i], files[i]);
        assert_json_equal(got, want);
        /* defaults filled at the top and inside the array's records */
        assert_true(json_real_value(json_object_get(got, "ratio")) == 0.5);
        assert_true(json_real_value(json_object_get(got, "weight")) == 1.5);
        assert_string_equal(json_string_value(json_object_get(got, "status")), "NEW");
        assert_true(json_is_null(json_object_get(got, "size")));
        assert_int_equal(json_string_length(json_object_get(got, "blob")), 0);
        json_t *items = json_object_get(got, "items");
        assert_int_equal(json_array_size(items), 2);
        for (size_t k = 0; k < 2; k++) {
            assert_int_equal(json_integer_value(json_object_get(json_array_get(items, k), "qty")), 1);
            assert_true(json_is_null(json_object_get(json_array_get(items, k), "label")));
        }
        /* int -> long */
        assert_int_equal(json_integer_value(json_object_get(got, "count")), 77);
        json_decref(got);
    }
    json_decref(want);
}

static void test_newer_writer(void **state)
{
    fx *f = *state;
    json_t *want = expected("sample_v2.expected.json");
    const char *files[] = {"sample_v2_container.bin", "sample_v2_confluent.bin"};
    ll_framing frs[] = {LL_FRAMING_CONTAINER, LL_FRAMING_CONFLUENT};
    for (size_t i = 0; i < 2; i++) {
        json_t *got = decode_ok(f, f->v1, frs[i], files[i]);
        assert_json_equal(got, want);
        assert_null(json_object_get(got, "origin"));
        assert_null(json_object_get(got, "trailer"));
        assert_null(json_object_get(json_array_get(json_object_get(got, "items"), 0), "checksum"));
        /* ARCHIVED is not a reader symbol: the reader enum's default */
        assert_string_equal(json_string_value(json_object_get(got, "status")), "NEW");
        json_decref(got);
    }
    json_decref(want);
}

static void test_nifi_union_order(void **state)
{
    fx *f = *state;
    json_t *want = expected("sample_v1.expected.json");
    /* with the writer's schema known, ["string","null"] projects onto ["null","string"] */
    json_t *got = decode_ok(f, f->v1, LL_FRAMING_CONTAINER, "sample_nifi_container.bin");
    assert_json_equal(got, want);
    json_decref(got);
    got = decode_ok(f, f->v1, LL_FRAMING_CONFLUENT, "sample_nifi_confluent.bin");
    assert_json_equal(got, want);
    assert_sample_a(got);
    json_decref(got);
    json_decref(want);

    /* read bare with the other order, the datum does not fit: refused, never misread */
    size_t len;
    unsigned char *buf = slurp("sample_nifi_bare.bin", &len);
    char err[256] = "";
    json_t *out = NULL;
    assert_int_equal(decode_mem(f->v1, NULL, LL_FRAMING_BARE, buf, len, &out, err, sizeof err), -1);
    assert_null(out);
    assert_true(err[0] != '\0');
    free(buf);

    /* and the NiFi schema as reader reads its own bytes */
    const ll_schema *nifi = ll_schema_ids_get(f->ids, 11);
    got = decode_ok(f, nifi, LL_FRAMING_BARE, "sample_nifi_bare.bin");
    assert_string_equal(json_string_value(json_object_get(got, "note")), "h\xc3\xa9llo w\xc3\xb6rld");
    json_decref(got);
}

static void test_recursive_schema(void **state)
{
    fx *f = *state;
    json_t *got = decode_ok(f, f->node, LL_FRAMING_BARE, "node_3_bare.bin");
    json_t *want = json_pack("{s:i,s:{s:i,s:{s:i,s:n}}}", "v", 1, "next", "v", 2, "next", "v", 3, "next");
    assert_json_equal(got, want);
    json_decref(got);
    json_decref(want);
}

/* A chain of n Nodes: v=0, next=branch 1 ... last next=null. */
static unsigned char *node_chain(size_t n, size_t *len)
{
    unsigned char *b = malloc(2 * n + 2);
    size_t o = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        b[o++] = 0x00; /* v */
        b[o++] = 0x02; /* union branch 1: Node */
    }
    b[o++] = 0x00;
    b[o++] = 0x00; /* null */
    *len = o;
    return b;
}

static void test_nesting_bomb(void **state)
{
    fx *f = *state;
    size_t len;
    unsigned char *b = node_chain(32, &len);
    json_t *out = NULL;
    char err[256];
    assert_int_equal(decode_mem(f->node, NULL, LL_FRAMING_BARE, b, len, &out, err, sizeof err), 0);
    json_decref(out);
    free(b);
    b = node_chain(33, &len);
    decode_fails(f, f->node, LL_FRAMING_BARE, b, len, "nesting deeper than 32");
    free(b);
    b = node_chain(200000, &len); /* would exhaust avro-c's stack */
    decode_fails(f, f->node, LL_FRAMING_BARE, b, len, "nesting deeper than 32");
    free(b);
}

/* Every proper prefix of a valid message is refused (and nothing crashes or leaks). */
static void test_truncations(void **state)
{
    fx *f = *state;
    struct {
        ll_framing fr;
        const char *file;
    } cases[] = {
        {LL_FRAMING_BARE, "sample_v1_bare.bin"},           {LL_FRAMING_BARE, "sample_v1_negblocks_bare.bin"},
        {LL_FRAMING_CONFLUENT, "sample_v1_confluent.bin"}, {LL_FRAMING_CONTAINER, "sample_v1_container.bin"},
        {LL_FRAMING_BLOCK, "sample_v1_block.bin"},         {LL_FRAMING_CONTAINER, "sample_v0_container.bin"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        unsigned char *buf = slurp(cases[i].file, &len);
        for (size_t cut = 0; cut < len; cut++) {
            unsigned char *copy = malloc(cut ? cut : 1); /* exact size: ASan sees overreads */
            memcpy(copy, buf, cut);
            char err[256] = "";
            json_t *out = NULL;
            int rc = decode_mem(f->v1, f->ids, cases[i].fr, copy, cut, &out, err, sizeof err);
            free(copy);
            if (rc == 0)
                fail_msg("%s cut at %zu accepted", cases[i].file, cut);
            assert_null(out);
            assert_true(err[0] != '\0');
        }
        free(buf);
    }
    decode_fails(f, f->v1, LL_FRAMING_BARE, NULL, 0, "truncated");
    decode_fails(f, f->v1, LL_FRAMING_CONFLUENT, "\x00\x00\x00", 3, "truncated confluent header");
}

static void test_leftover_bytes(void **state)
{
    fx *f = *state;
    size_t len;
    unsigned char *buf = slurp("sample_v1_bare.bin", &len);
    buf[len] = 0;
    decode_fails(f, f->v1, LL_FRAMING_BARE, buf, len + 1, "leftover bytes (1) after datum");
    free(buf);
    buf = slurp("sample_v1_confluent.bin", &len);
    memcpy(buf + len, "ab", 2);
    decode_fails(f, f->v1, LL_FRAMING_CONFLUENT, buf, len + 2, "leftover bytes (2) after datum");
    free(buf);
    buf = slurp("sample_v1_block.bin", &len);
    buf[len] = 0;
    decode_fails(f, f->v1, LL_FRAMING_BLOCK, buf, len + 1, "leftover bytes (1) after block sync");
    free(buf);
    buf = slurp("sample_v1_container.bin", &len);
    buf[len] = 0;
    decode_fails(f, f->v1, LL_FRAMING_CONTAINER, buf, len + 1, "more than one block");
    free(buf);
    /* an older writer's bytes read as the current schema (bare): not what the schema says */
    buf = slurp("sample_v0_confluent.bin", &len);
    decode_fails(f, f->v1, LL_FRAMING_BARE, buf + 5, len - 5, "");
    free(buf);
}

static void test_bad_magic(void **state)
{
    fx *f = *state;
    size_t len;
    unsigned char *buf = slurp("sample_v1_container.bin", &len);
    buf[3] = 0x02;
    decode_fails(f, f->v1, LL_FRAMING_CONTAINER, buf, len, "bad container magic");
    free(buf);
    buf = slurp("sample_v1_confluent.bin", &len);
    buf[0] = 0x01;
    decode_fails(f, f->v1, LL_FRAMING_CONFLUENT, buf, len, "bad confluent magic byte 0x01");
    free(buf);
    /* a container file given to a bare topic is just a wrong datum */
    decode_file_fails(f, f->v1, LL_FRAMING_BARE, "sample_v1_container.bin", "");
}

static void test_confluent_ids(void **state)
{
    fx *f = *state;
    size_t len;
    unsigned char *buf = slurp("sample_v1_confluent.bin", &len);
    buf[4] = 8;
    decode_fails(f, f->v1, LL_FRAMING_CONFLUENT, buf, len, "unknown schema id 8");
    buf[1] = 0xff;
    decode_fails(f, f->v1, LL_FRAMING_CONFLUENT, buf, len, "unknown schema id -16777208");
    buf[1] = 0;
    buf[4] = 7;
    json_t *out = NULL;
    char err[256];
    assert_int_equal(decode_mem(f->v1, NULL, LL_FRAMING_CONFLUENT, buf, len, &out, err, sizeof err), -1);
    assert_non_null(strstr(err, "no schema id table"));
    free(buf);
}

static void test_hostile_lengths(void **state)
{
    fx *f = *state;
    /* id string of 2^40 bytes */
    const unsigned char huge[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 'x'};
    decode_fails(f, f->v1, LL_FRAMING_BARE, huge, sizeof huge, "string length 1099511627776 beyond");
    /* negative length (-1) */
    const unsigned char neg[] = {0x01, 'x'};
    decode_fails(f, f->v1, LL_FRAMING_BARE, neg, sizeof neg, "negative string length -1");
    /* varint of 11 bytes */
    const unsigned char longv[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    decode_fails(f, f->v1, LL_FRAMING_BARE, longv, sizeof longv, "malformed varint");
    /* 10th byte with bits beyond 64 */
    const unsigned char over[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    decode_fails(f, f->v1, LL_FRAMING_BARE, over, sizeof over, "malformed varint");

    /* a minimal valid record by hand, then hostile variants of it */
    unsigned char m[64];
    size_t o = 0;
    m[o++] = 0x02;
    m[o++] = 'r';  /* id "r" */
    m[o++] = 0x02; /* count 1 */
    m[o++] = 0x02; /* small 1 */
    m[o++] = 0x01; /* flag true */
    m[o++] = 0x00; /* note null */
    m[o++] = 0x00; /* size null */
    memset(m + o, 0, 8);
    o += 8;        /* ratio 0.0 */
    m[o++] = 0x00; /* status NEW */
    m[o++] = 0x00; /* tags {} */
    size_t at_items = o;
    m[o++] = 0x00; /* items [] */
    m[o++] = 0x00; /* blob "" */
    memset(m + o, 0, 4);
    o += 4; /* weight 0.0 */
    json_t *out = NULL;
    char err[256];
    assert_int_equal(decode_mem(f->v1, NULL, LL_FRAMING_BARE, m, o, &out, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(out, "id")), "r");
    assert_true(json_is_true(json_object_get(out, "flag")));
    assert_int_equal(json_array_size(json_object_get(out, "items")), 0);
    json_decref(out);

    /* items block count 2^62 (records of >= 1 byte each) */
    unsigned char h[80];
    memcpy(h, m, at_items);
    size_t k = at_items;
    const unsigned char big[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    memcpy(h + k, big, sizeof big);
    k += sizeof big;
    h[k++] = 0x00;
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, k, "exceeds the item limit");

    /* tags map block count -2^62 with a byte size beyond the buffer */
    size_t at_tags = at_items - 1;
    memcpy(h, m, at_tags);
    k = at_tags;
    const unsigned char negbig[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
    memcpy(h + k, negbig, sizeof negbig);
    k += sizeof negbig;
    h[k++] = 0x7e; /* byte size 63 */
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, k, "block length 63 beyond buffer");

    /* negative count whose byte size does not match its items */
    memcpy(h, m, at_tags);
    k = at_tags;
    h[k++] = 0x01; /* count -1 */
    h[k++] = 0x02; /* size 1, but the entry takes 4 */
    h[k++] = 0x02;
    h[k++] = 'k';
    h[k++] = 0x02;
    h[k++] = 'v';
    h[k++] = 0x00;
    memcpy(h + k, m + at_items, o - at_items);
    k += o - at_items;
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, k, "map block size does not match");

    /* same with the right size: accepted */
    h[at_tags + 1] = 0x08;
    assert_int_equal(decode_mem(f->v1, NULL, LL_FRAMING_BARE, h, k, &out, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "tags"), "k")), "v");
    json_decref(out);

    /* a NUL inside a map key */
    h[at_tags + 3] = 0;
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, k, "NUL in map key");

    /* union index out of range / negative, enum index out of range, boolean 2 */
    memcpy(h, m, o);
    h[6] = 0x04;
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, o, "union index 2 out of range (2 branches)");
    h[6] = 0x01;
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, o, "union index -1 out of range");
    memcpy(h, m, o);
    h[15] = 0x06;
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, o, "enum index 3 out of range");
    memcpy(h, m, o);
    h[4] = 0x02;
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, o, "boolean byte 0x02");

    /* int beyond 32 bits */
    memcpy(h, m, 3);
    const unsigned char bigint[] = {0x80, 0x80, 0x80, 0x80, 0x20};
    memcpy(h + 3, bigint, sizeof bigint);
    memcpy(h + 3 + sizeof bigint, m + 4, o - 4);
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, o - 1 + sizeof bigint, "int out of range");

    /* invalid UTF-8 in a string */
    memcpy(h, m, o);
    h[1] = 0xff;
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, o, "id: string is not valid UTF-8");

    /* NaN double */
    memcpy(h, m, o);
    const unsigned char nan[] = {0, 0, 0, 0, 0, 0, 0xf8, 0x7f};
    memcpy(h + 7, nan, 8);
    decode_fails(f, f->v1, LL_FRAMING_BARE, h, o, "ratio: non-finite float");
}

static void test_max_message_bytes(void **state)
{
    fx *f = *state;
    size_t len;
    unsigned char *buf = slurp("sample_v1_bare.bin", &len);
    ll_decode_opts o = {.framing = LL_FRAMING_BARE, .reader = f->v1, .max_message_bytes = len - 1};
    json_t *out = NULL;
    char err[256];
    assert_int_equal(ll_decode(&o, buf, len, &out, err, sizeof err), -1);
    assert_non_null(strstr(err, "exceeds the maximum"));
    o.max_message_bytes = len;
    assert_int_equal(ll_decode(&o, buf, len, &out, err, sizeof err), 0);
    json_decref(out);
    free(buf);

    /* zero-size items: 2^20 nulls pass the default limit only up to 1 MiB of items in total */
    ll_schema *nulls = ll_schema_from_json("{\"type\":\"array\",\"items\":\"null\"}", err, sizeof err);
    assert_non_null(nulls);
    const unsigned char many[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0x00};
    decode_fails(f, nulls, LL_FRAMING_BARE, many, sizeof many, "exceeds the item limit");
    const unsigned char some[] = {0x80, 0x01, 0x00}; /* 64 nulls */
    assert_int_equal(decode_mem(nulls, NULL, LL_FRAMING_BARE, some, sizeof some, &out, err, sizeof err), 0);
    assert_int_equal(json_array_size(out), 64);
    assert_true(json_is_null(json_array_get(out, 63)));
    json_decref(out);
    ll_schema_free(nulls);
}

static void test_containers_refused(void **state)
{
    fx *f = *state;
    decode_file_fails(f, f->v1, LL_FRAMING_CONTAINER, "container_deflate.bin",
                      "compressed container (codec deflate) not supported");
    decode_file_fails(f, f->v1, LL_FRAMING_CONTAINER, "container_two_records.bin",
                      "container block with 2 records (exactly 1 expected)");
    decode_file_fails(f, f->v1, LL_FRAMING_CONTAINER, "container_two_blocks.bin",
                      "container with more than one block");
    decode_file_fails(f, f->v1, LL_FRAMING_CONTAINER, "container_negative_fixed.bin",
                      "embedded schema: fixed size -1 outside");

    /* sync marker after the block differs */
    size_t len;
    unsigned char *buf = slurp("sample_v1_container.bin", &len);
    buf[len - 1] ^= 0xff;
    decode_fails(f, f->v1, LL_FRAMING_CONTAINER, buf, len, "container sync marker mismatch");
    free(buf);

    /* header only: no records */
    buf = slurp("sample_v1_container.bin", &len);
    size_t blen;
    unsigned char *block = slurp("sample_v1_block.bin", &blen);
    decode_fails(f, f->v1, LL_FRAMING_CONTAINER, buf, len - blen, "container with no records");
    free(block);
    free(buf);
}

static void test_block_framing_refused(void **state)
{
    fx *f = *state;
    size_t len;
    unsigned char *buf = slurp("sample_v1_block.bin", &len);
    buf[0] = 0x04; /* count 2 */
    decode_fails(f, f->v1, LL_FRAMING_BLOCK, buf, len, "block with 2 records");
    buf[0] = 0x01; /* count -1 */
    decode_fails(f, f->v1, LL_FRAMING_BLOCK, buf, len, "block with -1 records");
    buf[0] = 0x02;
    decode_fails(f, f->v1, LL_FRAMING_BLOCK, buf, len - 1, "truncated block (sync marker)");
    /* a bare datum given to a block topic */
    free(buf);
    decode_file_fails(f, f->v1, LL_FRAMING_BLOCK, "sample_v1_bare.bin", "block with 8 records");
}

static void test_bad_arguments(void **state)
{
    fx *f = *state;
    char err[256];
    json_t *out = NULL;
    assert_int_equal(ll_decode(NULL, "x", 1, &out, err, sizeof err), -1);
    ll_decode_opts o = {.framing = LL_FRAMING_BARE, .reader = NULL};
    assert_int_equal(ll_decode(&o, "x", 1, &out, err, sizeof err), -1);
    o.reader = f->v1;
    assert_int_equal(ll_decode(&o, NULL, 1, &out, err, sizeof err), -1);
    assert_int_equal(ll_decode(&o, "x", 1, NULL, err, sizeof err), -1);
    o.framing = (ll_framing)99;
    assert_int_equal(ll_decode(&o, "x", 1, &out, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown framing"));
    o.framing = LL_FRAMING_BARE;
    assert_int_equal(ll_decode(&o, "x", 1, &out, NULL, 0), -1); /* no err buffer: still fine */
}

/* Random corruption of every fixture in every framing: refused or decoded, never a crash. */
static void test_mutations(void **state)
{
    fx *f = *state;
    const char *files[] = {"sample_v1_bare.bin",           "sample_v1_confluent.bin",
                           "sample_v1_container.bin",      "sample_v1_block.bin",
                           "sample_v0_container.bin",      "sample_v2_confluent.bin",
                           "sample_v1_negblocks_bare.bin", "node_3_bare.bin"};
    ll_framing frs[] = {LL_FRAMING_BARE, LL_FRAMING_CONFLUENT, LL_FRAMING_CONTAINER, LL_FRAMING_BLOCK};
    unsigned long seed = 12345;
    int accepted = 0, refused = 0;
    for (size_t fi = 0; fi < sizeof files / sizeof files[0]; fi++) {
        size_t len;
        unsigned char *orig = slurp(files[fi], &len);
        for (int round = 0; round < 150; round++) {
            unsigned char *b = malloc(len);
            memcpy(b, orig, len);
            int flips = 1 + round % 4;
            for (int k = 0; k < flips; k++) {
                seed = seed * 6364136223846793005UL + 1442695040888963407UL;
                size_t pos = (size_t)(seed >> 33) % len;
                b[pos] = (unsigned char)(seed >> 17);
            }
            for (size_t r = 0; r < 4; r++) {
                json_t *out = NULL;
                char err[256];
                const ll_schema *reader = fi == 7 ? f->node : f->v1;
                if (decode_mem(reader, f->ids, frs[r], b, len, &out, err, sizeof err) == 0) {
                    accepted++;
                    json_decref(out);
                } else {
                    refused++;
                }
            }
            free(b);
        }
        free(orig);
    }
    assert_true(refused > 0);
    (void)accepted;
}

/* Defaults inside maps and unions, aliases, and the errors of projection. */
static void test_projection_nested(void **state)
{
    fx *f = *state;
    char err[256];
    ll_schema *w = ll_schema_from_json(
        "{\"type\":\"record\",\"name\":\"R\",\"fields\":["
        "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":{\"type\":\"record\","
        "\"name\":\"X\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"}]}}},"
        "{\"name\":\"u\",\"type\":[\"null\",{\"type\":\"record\",\"name\":\"Y\","
        "\"fields\":[{\"name\":\"b\",\"type\":\"int\"}]}]},"
        "{\"name\":\"old_name\",\"type\":\"float\"},"
        "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"Z\"]}}]}",
        err, sizeof err);
    if (w == NULL)
        fail_msg("%s", err);
    ll_schema *r = ll_schema_from_json(
        "{\"type\":\"record\",\"name\":\"R\",\"fields\":["
        "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":{\"type\":\"record\","
        "\"name\":\"X\",\"fields\":[{\"name\":\"a\",\"type\":\"long\"},"
        "{\"name\":\"c\",\"type\":\"int\",\"default\":5}]}}},"
        "{\"name\":\"u\",\"type\":[\"null\",{\"type\":\"record\",\"name\":\"Y\","
        "\"fields\":[{\"name\":\"b\",\"type\":\"double\"},"
        "{\"name\":\"d\",\"type\":[\"string\",\"null\"],\"default\":\"z\"}]}]},"
        "{\"name\":\"new_name\",\"aliases\":[\"old_name\"],\"type\":\"double\"},"
        "{\"name\":\"e\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"A\",\"B\"]}}]}",
        err, sizeof err);
    if (r == NULL)
        fail_msg("%s", err);
    json_t *v = json_pack("{s:{s:{s:i},s:{s:i}},s:{s:i},s:f,s:s}", "m", "k1", "a", 1, "k2", "a", 2, "u", "b",
                          7, "old_name", 0.5, "e", "A");
    ll_encode_opts eo = {.framing = LL_FRAMING_CONTAINER, .schema = w};
    unsigned char *buf;
    size_t len;
    assert_int_equal(ll_encode(&eo, v, &buf, &len, err, sizeof err), 0);
    json_t *out = NULL;
    assert_int_equal(decode_mem(r, NULL, LL_FRAMING_CONTAINER, buf, len, &out, err, sizeof err), 0);
    json_t *want = json_pack("{s:{s:{s:i,s:i},s:{s:i,s:i}},s:{s:f,s:s},s:f,s:s}", "m", "k1", "a", 1, "c", 5,
                             "k2", "a", 2, "c", 5, "u", "b", 7.0, "d", "z", "new_name", 0.5, "e", "A");
    assert_json_equal(out, want);
    json_decref(out);
    json_decref(want);
    free(buf);

    /* a writer symbol the reader lacks, without a reader enum default */
    json_object_set_new(v, "e", json_string("Z"));
    assert_int_equal(ll_encode(&eo, v, &buf, &len, err, sizeof err), 0);
    decode_fails(f, r, LL_FRAMING_CONTAINER, buf, len, "e: symbol Z not in reader enum E");
    free(buf);
    json_decref(v);
    ll_schema_free(r);

    /* a reader field the writer lacks, without a default: named in the error */
    r = ll_schema_from_json(
        "{\"type\":\"record\",\"name\":\"R\",\"fields\":["
        "{\"name\":\"u\",\"type\":[\"null\",{\"type\":\"record\",\"name\":\"Y\","
        "\"fields\":[{\"name\":\"b\",\"type\":\"int\"},{\"name\":\"must\",\"type\":\"int\"}]}]}]}",
        err, sizeof err);
    if (r == NULL)
        fail_msg("%s", err);
    v = json_pack("{s:{},s:{s:i},s:f,s:s}", "m", "u", "b", 7, "old_name", 0.5, "e", "A");
    assert_int_equal(ll_encode(&eo, v, &buf, &len, err, sizeof err), 0);
    decode_fails(f, r, LL_FRAMING_CONTAINER, buf, len, "u.must: missing field without default");
    free(buf);
    /* a writer type the reader cannot read */
    json_decref(v);
    ll_schema_free(r);
    r = ll_schema_from_json(
        "{\"type\":\"record\",\"name\":\"R\",\"fields\":[{\"name\":\"old_name\",\"type\":\"int\"}]}", err,
        sizeof err);
    v = json_pack("{s:{},s:n,s:f,s:s}", "m", "u", "old_name", 0.5, "e", "A");
    assert_int_equal(ll_encode(&eo, v, &buf, &len, err, sizeof err), 0);
    decode_fails(f, r, LL_FRAMING_CONTAINER, buf, len, "old_name: writer float cannot be read as int");
    free(buf);
    json_decref(v);
    ll_schema_free(r);
    ll_schema_free(w);
}

/* Several threads share one reader (and its cache of embedded writer schemas). */
typedef struct thread_arg {
    const fx *f;
    int id;
    int failures;
} thread_arg;

static void *decode_thread(void *p)
{
    thread_arg *a = p;
    const char *files[] = {"sample_v0_container.bin", "sample_v2_container.bin", "sample_nifi_container.bin",
                           "sample_v1_container.bin", "sample_v2_confluent.bin"};
    const char *want_files[] = {"sample_v0.expected.json", "sample_v2.expected.json",
                                "sample_v1.expected.json", "sample_v1.expected.json",
                                "sample_v2.expected.json"};
    unsigned char *bufs[5];
    size_t lens[5];
    json_t *wants[5];
    char path[1024];
    for (int i = 0; i < 5; i++) {
        FILE *fp = fopen(data_file_r(files[i], path, sizeof path), "rb");
        bufs[i] = malloc(1 << 16);
        lens[i] = fp && bufs[i] ? fread(bufs[i], 1, 1 << 16, fp) : 0;
        if (fp)
            fclose(fp);
        wants[i] = json_load_file(data_file_r(want_files[i], path, sizeof path), 0, NULL);
    }
    for (int k = 0; k < 300; k++) {
        int i = (k + a->id) % 5;
        ll_decode_opts o = {.framing = i == 4 ? LL_FRAMING_CONFLUENT : LL_FRAMING_CONTAINER,
                            .reader = a->f->v1,
                            .ids = a->f->ids};
        json_t *out = NULL;
        char err[256];
        err[0] = '\0';
        if (ll_decode(&o, bufs[i], lens[i], &out, err, sizeof err) != 0 || !json_equal(out, wants[i])) {
            if (a->failures++ == 0)
                fprintf(stderr, "thread %d, %s (%zu bytes): %s\n", a->id, files[i], lens[i],
                        err[0] ? err : "wrong value");
        }
        json_decref(out);
    }
    for (int i = 0; i < 5; i++) {
        free(bufs[i]);
        json_decref(wants[i]);
    }
    return NULL;
}

/* The datum is read without avro-c: a projected record's reader fields take writer fields out of
 * order and one twice (a name and an alias); the writer fields between them, of every kind and
 * with negative block counts, are skipped; read as the writer itself, they come in order. */
static void test_fields_out_of_order(void **state)
{
    (void)state;
    char err[256];
    ll_schema *w = ll_schema_from_json(
        "{\"type\":\"record\",\"name\":\"R\",\"fields\":["
        "{\"name\":\"arr\",\"type\":{\"type\":\"array\",\"items\":\"string\"}},"
        "{\"name\":\"b\",\"type\":\"long\"},"
        "{\"name\":\"map\",\"type\":{\"type\":\"map\",\"values\":[\"null\",\"double\"]}},"
        "{\"name\":\"a\",\"type\":\"string\"},"
        "{\"name\":\"fix\",\"type\":{\"type\":\"fixed\",\"name\":\"F2\",\"size\":2}},"
        "{\"name\":\"rec\",\"type\":{\"type\":\"record\",\"name\":\"S\",\"fields\":["
        "{\"name\":\"x\",\"type\":\"int\"},{\"name\":\"y\",\"type\":[\"null\",\"string\"]}]}},"
        "{\"name\":\"flt\",\"type\":\"float\"},"
        "{\"name\":\"en\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\",\"Y\"]}}]}",
        err, sizeof err);
    if (w == NULL)
        fail_msg("%s", err);
    ll_schema *r = ll_schema_from_json("{\"type\":\"record\",\"name\":\"R\",\"fields\":["
                                       "{\"name\":\"a\",\"type\":\"string\"},"
                                       "{\"name\":\"b_again\",\"aliases\":[\"b\"],\"type\":\"long\"},"
                                       "{\"name\":\"b\",\"type\":\"double\"},"
                                       "{\"name\":\"c\",\"type\":\"string\",\"default\":\"dflt\"}]}",
                                       err, sizeof err);
    if (r == NULL)
        fail_msg("%s", err);
    const unsigned char datum[] = {
        0x00, 0x00, 0x00, 0x00, 0x07,                         /* Confluent framing, schema id 7 */
        0x03, 0x08, 0x02, 'p',  0x02, 'q',  0x00,             /* arr: a block of -2 items, 4 bytes; end */
        0x0e,                                                 /* b: 7 */
        0x01, 0x16, 0x02, 'k',  0x02, 0x00, 0x00, 0x00, 0x00, /* map: -1 entry, 11 bytes: k, branch 1, */
        0x00, 0x00, 0xf8, 0x3f, 0x00,                         /* ... 1.5; end */
        0x04, 'h',  'i',                                      /* a: "hi" */
        'z',  'z',                                            /* fix */
        0x02, 0x02, 0x02, 's',                                /* rec: x 1, y branch 1 "s" */
        0x00, 0x00, 0x00, 0x40,                               /* flt: 2.0 */
        0x02};                                                /* en: Y */
    ll_schema_ids *ids = ll_schema_ids_new();
    assert_int_equal(ll_schema_ids_put(ids, 7, w), 0); /* the table owns w */
    ll_decode_opts o = {.framing = LL_FRAMING_CONFLUENT, .reader = r, .ids = ids};
    json_t *out = NULL;
    if (ll_decode(&o, datum, sizeof datum, &out, err, sizeof err) != 0)
        fail_msg("projected: %s", err);
    json_t *want = json_pack("{s:s,s:i,s:f,s:s}", "a", "hi", "b_again", 7, "b", 7.0, "c", "dflt");
    assert_json_equal(out, want);
    char *text = json_dumps(out, JSON_COMPACT); /* the reader's field order */
    assert_string_equal(text, "{\"a\":\"hi\",\"b_again\":7,\"b\":7.0,\"c\":\"dflt\"}");
    free(text);
    json_decref(out);
    json_decref(want);

    o.reader = w;
    if (ll_decode(&o, datum, sizeof datum, &out, err, sizeof err) != 0)
        fail_msg("as written: %s", err);
    want = json_pack("{s:[s,s],s:i,s:{s:f},s:s,s:s,s:{s:i,s:s},s:f,s:s}", "arr", "p", "q", "b", 7, "map", "k",
                     1.5, "a", "hi", "fix", "zz", "rec", "x", 1, "y", "s", "flt", 2.0, "en", "Y");
    assert_json_equal(out, want);
    json_decref(out);
    json_decref(want);

    /* the block's byte size is checked against its items before anything is read */
    unsigned char bad[sizeof datum];
    memcpy(bad, datum, sizeof datum);
    bad[6] = 0x0a; /* arr's block: 5 bytes */
    o.reader = r;
    assert_int_equal(ll_decode(&o, bad, sizeof bad, &out, err, sizeof err), -1);
    assert_null(out);
    assert_non_null(strstr(err, "array block size does not match its items"));
    ll_schema_ids_free(ids);
    ll_schema_free(r);
}

static void test_threads(void **state)
{
    fx *f = *state;
    pthread_t t[6];
    thread_arg args[6];
    for (int i = 0; i < 6; i++) {
        args[i] = (thread_arg){.f = f, .id = i, .failures = 0};
        assert_int_equal(pthread_create(&t[i], NULL, decode_thread, &args[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_four_framings),       cmocka_unit_test(test_older_writer),
        cmocka_unit_test(test_newer_writer),        cmocka_unit_test(test_nifi_union_order),
        cmocka_unit_test(test_recursive_schema),    cmocka_unit_test(test_nesting_bomb),
        cmocka_unit_test(test_truncations),         cmocka_unit_test(test_leftover_bytes),
        cmocka_unit_test(test_bad_magic),           cmocka_unit_test(test_confluent_ids),
        cmocka_unit_test(test_hostile_lengths),     cmocka_unit_test(test_max_message_bytes),
        cmocka_unit_test(test_containers_refused),  cmocka_unit_test(test_block_framing_refused),
        cmocka_unit_test(test_bad_arguments),       cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_projection_nested),   cmocka_unit_test(test_threads),
        cmocka_unit_test(test_fields_out_of_order),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
