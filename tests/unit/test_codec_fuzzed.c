/*
 * test_codec_fuzzed.c - inputs the fuzzers of fuzz/ found (docs/fuzzing.md), each with the
 * codec's answer today:
 *   - a record whose field is the record itself (found by fuzz_schema, minimized): it loaded,
 *     and avro-c recursed until the stack overflowed when ll_encode built a value of it
 *     (ll_decode was saved only by the pre-validator's nesting bound, "nesting deeper than 32");
 *     now refused at load, as a writer schema embedded in a container message too;
 *   - the files of fuzz/regress/fuzz_container: the hostile messages of issue 7 (fan-out,
 *     default bomb, a million nulls) that every fuzz run replays; each is refused with its
 *     budget named.
 */
#include <dirent.h>
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

static const char self_record[] = "{\"type\":\"record\",\"name\":\"Sample\",\"fields\":[{\"type\":\"Sample\","
                                  "\"name\":\"w\"}]}";

/* path of a file below the checkout ("schemas/avro/ChunkWritten.avsc"), from this file's path */
static const char *tree_path(char *path, size_t len, const char *rel)
{
    snprintf(path, len, "%s", __FILE__);
    char *t = strstr(path, "tests/unit/");
    if (t != NULL)
        snprintf(t, len - (size_t)(t - path), "%s", rel);
    return path;
}

static ll_schema *chunk_schema(void)
{
    char path[4096], err[256];
    const char *dir = getenv("LL_SCHEMA_DIR");
    if (dir != NULL && *dir != '\0')
        snprintf(path, sizeof path, "%s/ChunkWritten.avsc", dir);
    else
        tree_path(path, sizeof path, "schemas/avro/ChunkWritten.avsc");
    ll_schema *s = ll_schema_from_file(path, err, sizeof err);
    if (s == NULL)
        fail_msg("%s", err);
    return s;
}

static void test_self_record_schema(void **state)
{
    (void)state;
    char err[256] = "";
    ll_schema *s = ll_schema_from_json(self_record, err, sizeof err);
    assert_null(s);
    assert_non_null(strstr(err, "Sample contains itself"));
}

/* The consumer's path: the schema embedded in a container message, an empty datum. */
static void test_self_record_container(void **state)
{
    (void)state;
    ll_schema *reader = chunk_schema();
    size_t len = 0;
    unsigned char *msg = tf_container(self_record, strlen(self_record), NULL, 0, &len);
    assert_non_null(msg);
    ll_decode_opts o = {.framing = LL_FRAMING_CONTAINER, .reader = reader};
    json_t *out = json_null();
    char err[256] = "";
    assert_int_equal(ll_decode(&o, msg, len, &out, err, sizeof err), -1);
    assert_null(out);
    assert_non_null(strstr(err, "embedded schema"));
    assert_non_null(strstr(err, "Sample contains itself"));
    free(msg);
    ll_schema_free(reader);
}

/* Every committed regression input of fuzz_container (selector byte, then the message). */
static void test_regress_container(void **state)
{
    (void)state;
    char dir[4096];
    tree_path(dir, sizeof dir, "fuzz/regress/fuzz_container");
    DIR *d = opendir(dir);
    assert_non_null(d);
    ll_schema *reader = chunk_schema();
    ll_decode_opts o = {.framing = LL_FRAMING_CONTAINER, .reader = reader};
    int seen = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        static unsigned char buf[65536];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        assert_true(n > 1);
        json_t *out = NULL;
        char err[256] = "";
        if (ll_decode(&o, buf + 1, n - 1, &out, err, sizeof err) != -1)
            fail_msg("%s: decoded", e->d_name);
        if (strstr(err, "(budget codec.") == NULL)
            fail_msg("%s: %s", e->d_name, err);
        seen++;
    }
    closedir(d);
    assert_true(seen >= 3);
    ll_schema_free(reader);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_self_record_schema),
        cmocka_unit_test(test_self_record_container),
        cmocka_unit_test(test_regress_container),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
