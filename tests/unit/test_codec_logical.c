/*
 * test_codec_logical.c - logical types honoured or refused (issue 7, item 3): the writer's
 * logical type decides how a value is read. Decimals (bytes and fixed) become exact decimal
 * text with the writer's scale, timestamps and dates ISO-8601 text, uuids text; a writer type
 * the reader cannot take is a decode error naming the field and both types; strings and bytes
 * with a NUL are refused. Writer schemas travel in container files, as NiFi writes them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codec_frames.h"
#include "ll/codec.h"

/* A one-field record schema {"v": type}. */
static char *record_of(const char *type)
{
    char *s = malloc(strlen(type) + 128);
    assert_non_null(s);
    sprintf(
        s,
        "{\"type\":\"record\",\"name\":\"T\",\"namespace\":\"t\",\"fields\":[{\"name\":\"v\",\"type\":%s}]}",
        type);
    return s;
}

/*
 * Decodes datum (the field v's encoding) written with writer type wtype, read as rtype (the
 * container framing; rtype NULL: the bare framing with the writer as the reader). Returns a new
 * reference to v, or NULL with err.
 */
static json_t *read_v(const char *wtype, const char *rtype, const unsigned char *datum, size_t dlen,
                      char *err, size_t errlen)
{
    char *wtext = record_of(wtype), *rtext = record_of(rtype ? rtype : wtype);
    char serr[256];
    ll_schema *reader = ll_schema_from_json(rtext, serr, sizeof serr);
    if (reader == NULL)
        fail_msg("reader schema %s: %s", rtext, serr);
    ll_decode_opts o = {.framing = rtype ? LL_FRAMING_CONTAINER : LL_FRAMING_BARE, .reader = reader};
    size_t len = dlen;
    unsigned char *buf = rtype ? tf_container(wtext, strlen(wtext), datum, dlen, &len) : NULL;
    json_t *out = NULL, *v = NULL;
    err[0] = '\0';
    if (ll_decode(&o, rtype ? buf : datum, len, &out, err, errlen) == 0) {
        v = json_incref(json_object_get(out, "v"));
        json_decref(out);
    }
    free(buf);
    free(wtext);
    free(rtext);
    ll_schema_free(reader);
    return v;
}

static void expect_text(const char *wtype, const char *rtype, const unsigned char *datum, size_t dlen,
                        const char *want)
{
    char err[256];
    json_t *v = read_v(wtype, rtype, datum, dlen, err, sizeof err);
    if (v == NULL)
        fail_msg("%s as %s: %s", wtype, rtype ? rtype : "itself", err);
    if (!json_is_string(v) || strcmp(json_string_value(v), want) != 0) {
        char *d = json_dumps(v, JSON_ENCODE_ANY);
        fprintf(stderr, "%s as %s: got %s, want \"%s\"\n", wtype, rtype ? rtype : "itself", d, want);
        free(d);
        json_decref(v);
        fail();
    }
    json_decref(v);
}

static void expect_error(const char *wtype, const char *rtype, const unsigned char *datum, size_t dlen,
                         const char *want)
{
    char err[256];
    json_t *v = read_v(wtype, rtype, datum, dlen, err, sizeof err);
    if (v != NULL) {
        json_decref(v);
        fail_msg("%s as %s accepted; want error \"%s\"", wtype, rtype ? rtype : "itself", want);
    }
    if (strstr(err, want) == NULL)
        fail_msg("error \"%s\" lacks \"%s\"", err, want);
}

/* A bytes datum: length, then the bytes. */
static size_t bytes_datum(unsigned char *out, const unsigned char *b, size_t n)
{
    size_t k = tf_zz(out, (int64_t)n);
    memcpy(out + k, b, n);
    return k + n;
}

#define DEC_BYTES(p, s)                                                                                      \
    "{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":" #p ",\"scale\":" #s "}"

static void test_decimal_bytes(void **state)
{
    (void)state;
    unsigned char d[64];
    struct {
        const unsigned char *b;
        size_t n;
        const char *type, *want;
    } cases[] = {
        {(const unsigned char *)"\x31\x32", 2, DEC_BYTES(38, 2), "125.94"}, /* the AMOUNT_SUM */
        {(const unsigned char *)"\x04\xd2", 2, DEC_BYTES(38, 2), "12.34"},
        {(const unsigned char *)"\xff", 1, DEC_BYTES(38, 2), "-0.01"},
        {(const unsigned char *)"\x80", 1, DEC_BYTES(38, 2), "-1.28"},
        {(const unsigned char *)"\x00", 1, DEC_BYTES(38, 2), "0.00"},
        {(const unsigned char *)"\x00\x00\x00\x05", 4, DEC_BYTES(38, 3), "0.005"},
        {(const unsigned char *)"\xff\xff\xfe\x0c", 4, DEC_BYTES(10, 0), "-500"},
        {(const unsigned char *)"\x04\xd2", 2, DEC_BYTES(4, 0), "1234"},
        {(const unsigned char *)"\x4b\x3b\x4c\xa8\x5a\x86\xc4\x7a\x09\x8a\x22\x3f\xff\xff\xff\xff", 16,
         DEC_BYTES(38, 0), "99999999999999999999999999999999999999"},
        {(const unsigned char *)"\xb4\xc4\xb3\x57\xa5\x79\x3b\x85\xf6\x75\xdd\xc0\x00\x00\x00\x01", 16,
         DEC_BYTES(38, 10), "-9999999999999999999999999999.9999999999"},
        /* a sign-extended 17-byte form of the same 38 digits */
        {(const unsigned char *)"\x00\x4b\x3b\x4c\xa8\x5a\x86\xc4\x7a\x09\x8a\x22\x3f\xff\xff\xff\xff", 17,
         DEC_BYTES(38, 38), "0.99999999999999999999999999999999999999"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = bytes_datum(d, cases[i].b, cases[i].n);
        expect_text(cases[i].type, "\"string\"", d, n, cases[i].want); /* read as a string */
        expect_text(cases[i].type, NULL, d, n, cases[i].want);         /* the writer's own schema */
        expect_text(cases[i].type, "\"bytes\"", d, n, cases[i].want);  /* read as plain bytes */
    }
    /* a reader decimal of the same scale, and a reader union with a string branch */
    size_t n = bytes_datum(d, (const unsigned char *)"\x31\x32", 2);
    expect_text(DEC_BYTES(20, 2), DEC_BYTES(38, 2), d, n, "125.94");
    expect_text(DEC_BYTES(38, 2), "[\"null\",\"string\"]", d, n, "125.94");
}

static void test_decimal_refused(void **state)
{
    (void)state;
    unsigned char d[64];
    /* 10^38 has 39 digits: over precision 38; 3 digits over precision 2 */
    size_t n = bytes_datum(
        d, (const unsigned char *)"\x4b\x3b\x4c\xa8\x5a\x86\xc4\x7a\x09\x8a\x22\x40\x00\x00\x00\x00", 16);
    expect_error(DEC_BYTES(38, 0), "\"string\"", d, n, "v: decimal of 39 digits over its precision 38");
    n = bytes_datum(d, (const unsigned char *)"\x04\xd2", 2);
    expect_error(DEC_BYTES(2, 0), "\"string\"", d, n, "over its precision 2");
    n = bytes_datum(d, (const unsigned char *)"", 0);
    expect_error(DEC_BYTES(38, 2), "\"string\"", d, n, "v: decimal of 0 bytes");
    /* more bytes than any 38 digits need */
    n = bytes_datum(
        d, (const unsigned char *)"\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00",
        18);
    expect_error(DEC_BYTES(38, 0), "\"string\"", d, n, "more than 38 digits");
    /* types that cannot take a decimal, and a decimal of another scale: both types named */
    n = bytes_datum(d, (const unsigned char *)"\x31\x32", 2);
    expect_error(DEC_BYTES(38, 2), "\"double\"", d, n,
                 "v: writer bytes(decimal(38,2)) cannot be read as double");
    expect_error(DEC_BYTES(38, 2), DEC_BYTES(38, 3), d, n,
                 "v: writer bytes(decimal(38,2)) cannot be read as bytes(decimal(38,3))");
    expect_error(DEC_BYTES(38, 2), "[\"null\",\"int\"]", d, n,
                 "v: writer bytes(decimal(38,2)) fits no branch of the reader union [null, int]");
    /* plain bytes are not a decimal */
    expect_error("\"bytes\"", DEC_BYTES(38, 2), d, n,
                 "v: writer bytes cannot be read as bytes(decimal(38,2))");
}

static void test_decimal_fixed(void **state)
{
    (void)state;
    const char *f8 =
        "{\"type\":\"fixed\",\"name\":\"D8\",\"size\":8,\"logicalType\":\"decimal\",\"precision\":18,"
        "\"scale\":4}";
    expect_text(f8, "\"string\"", (const unsigned char *)"\x01\xb6\x9b\x4b\xa6\x30\xf3\x4e", 8,
                "12345678901234.5678");
    expect_text(f8, NULL, (const unsigned char *)"\xff\xff\xff\xff\xff\xff\xff\xfb", 8, "-0.0005");
    expect_text(f8, "\"bytes\"", (const unsigned char *)"\x00\x00\x00\x00\x00\x00\x00\x00", 8, "0.0000");
}

static void test_decimal_schemas_refused(void **state)
{
    (void)state;
    const char *bad[][2] = {
        {"{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":0}", "decimal precision"},
        {"{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":39}", "decimal precision"},
        {"{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":4,\"scale\":5}", "decimal scale"},
        {"{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":4,\"scale\":-1}", "decimal scale"},
        {"{\"type\":\"fixed\",\"name\":\"F\",\"size\":2,\"logicalType\":\"decimal\",\"precision\":5}",
         "does not fit fixed"},
        {"{\"type\":\"bytes\",\"logicalType\":\"big-decimal\"}", "logical type \"big-decimal\" on bytes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *text = record_of(bad[i][0]), err[256] = "";
        ll_schema *s = ll_schema_from_json(text, err, sizeof err);
        free(text);
        if (s != NULL) {
            ll_schema_free(s);
            fail_msg("accepted %s", bad[i][0]);
        }
        if (strstr(err, bad[i][1]) == NULL)
            fail_msg("error \"%s\" lacks \"%s\"", err, bad[i][1]);
    }
}

static void test_timestamps_and_dates(void **state)
{
    (void)state;
    unsigned char d[16];
    struct {
        const char *type;
        int64_t v;
        const char *want;
    } cases[] = {
        {"{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}", 0, "1970-01-01T00:00:00.000Z"},
        {"{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}", -1, "1969-12-31T23:59:59.999Z"},
        {"{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}", -14182940000LL,
         "1969-07-20T20:17:40.000Z"},
        {"{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}", 1790598896789LL,
         "2026-09-28T12:34:56.789Z"},
        {"{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}", 1234567, "1970-01-01T00:00:01.234567Z"},
        {"{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}", -1, "1969-12-31T23:59:59.999999Z"},
        {"{\"type\":\"long\",\"logicalType\":\"local-timestamp-millis\"}", 951782400000LL,
         "2000-02-29T00:00:00.000"},
        {"{\"type\":\"long\",\"logicalType\":\"local-timestamp-micros\"}", -62135596800000000LL,
         "0001-01-01T00:00:00.000000"},
        {"{\"type\":\"int\",\"logicalType\":\"date\"}", 0, "1970-01-01"},
        {"{\"type\":\"int\",\"logicalType\":\"date\"}", -1, "1969-12-31"},
        {"{\"type\":\"int\",\"logicalType\":\"date\"}", 20724, "2026-09-28"},
        {"{\"type\":\"int\",\"logicalType\":\"date\"}", -719162, "0001-01-01"},
        {"{\"type\":\"int\",\"logicalType\":\"date\"}", 2932896, "9999-12-31"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t n = tf_zz(d, cases[i].v);
        expect_text(cases[i].type, "\"string\"", d, n, cases[i].want);
        expect_text(cases[i].type, "[\"null\",\"string\"]", d, n, cases[i].want);
    }
    /* into the same type: the number */
    size_t n = tf_zz(d, -1);
    char err[256];
    json_t *v =
        read_v("{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}", "\"long\"", d, n, err, sizeof err);
    assert_non_null(v);
    assert_int_equal(json_integer_value(v), -1);
    json_decref(v);
    v = read_v("{\"type\":\"int\",\"logicalType\":\"date\"}", NULL, d, n, err, sizeof err);
    assert_non_null(v);
    assert_int_equal(json_integer_value(v), -1);
    json_decref(v);
    /* refused: another unit, a type that loses the meaning, a date past year 9999 */
    expect_error("{\"type\":\"long\",\"logicalType\":\"timestamp-millis\"}",
                 "{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}", d, n,
                 "v: writer long(timestamp-millis) cannot be read as long(timestamp-micros)");
    expect_error("{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}", "\"double\"", d, n,
                 "v: writer long(timestamp-micros) cannot be read as double");
    expect_error("{\"type\":\"int\",\"logicalType\":\"date\"}", "\"long\"", d, n,
                 "v: writer int(date) cannot be read as long");
    n = tf_zz(d, 2932897);
    expect_error("{\"type\":\"int\",\"logicalType\":\"date\"}", "\"string\"", d, n,
                 "v: date 2932897 outside years");
    n = tf_zz(d, INT64_MIN);
    expect_error("{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}", "\"string\"", d, n,
                 "outside years");
}

static void test_uuid(void **state)
{
    (void)state;
    unsigned char d[64];
    const char *u = "6f1d1c2e-0b7a-4f0e-9a43-3b2a6c1d9e10";
    size_t n = bytes_datum(d, (const unsigned char *)u, strlen(u));
    expect_text("{\"type\":\"string\",\"logicalType\":\"uuid\"}", "\"string\"", d, n, u);
    expect_text("{\"type\":\"string\",\"logicalType\":\"uuid\"}", NULL, d, n, u);
    const unsigned char raw[16] = {0x6f, 0x1d, 0x1c, 0x2e, 0x0b, 0x7a, 0x4f, 0x0e,
                                   0x9a, 0x43, 0x3b, 0x2a, 0x6c, 0x1d, 0x9e, 0x10};
    expect_text("{\"type\":\"fixed\",\"name\":\"U\",\"size\":16,\"logicalType\":\"uuid\"}", "\"string\"", raw,
                16, u);
}

static void test_nul_refused(void **state)
{
    (void)state;
    unsigned char d[64];
    size_t n = bytes_datum(d, (const unsigned char *)"ab\0cd", 5);
    expect_error("\"string\"", NULL, d, n, "v: string contains a NUL byte");
    expect_error("\"string\"", "\"string\"", d, n, "v: string contains a NUL byte");
    expect_error("\"bytes\"", "\"string\"", d, n, "v: bytes contains a NUL byte");
    expect_error("\"bytes\"", NULL, d, n, "v: bytes contains a NUL byte");
    expect_error("{\"type\":\"fixed\",\"name\":\"F\",\"size\":5}", NULL, d + 1, 5,
                 "v: fixed contains a NUL byte");
    /* a map key with a NUL */
    unsigned char m[32];
    size_t k = tf_zz(m, 1);
    k += bytes_datum(m + k, (const unsigned char *)"k\0", 2);
    k += bytes_datum(m + k, (const unsigned char *)"x", 1);
    k += tf_zz(m + k, 0);
    expect_error("{\"type\":\"map\",\"values\":\"string\"}", NULL, m, k, "NUL in map key");
    /* a string default with a NUL cannot even be loaded */
    char err[256] = "";
    ll_schema *s =
        ll_schema_from_json("{\"type\":\"record\",\"name\":\"T\",\"fields\":[{\"name\":\"v\",\"type\":"
                            "\"string\",\"default\":\"a\\u0000b\"}]}",
                            err, sizeof err);
    assert_null(s);
    assert_non_null(strstr(err, "NUL"));
    /* a clean string still passes */
    n = bytes_datum(d, (const unsigned char *)"abcd", 4);
    expect_text("\"string\"", NULL, d, n, "abcd");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decimal_bytes),        cmocka_unit_test(test_decimal_refused),
        cmocka_unit_test(test_decimal_fixed),        cmocka_unit_test(test_decimal_schemas_refused),
        cmocka_unit_test(test_timestamps_and_dates), cmocka_unit_test(test_uuid),
        cmocka_unit_test(test_nul_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
