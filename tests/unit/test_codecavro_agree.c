/*
 * test_codecavro_agree.c - avro-c reads every schema our parser accepts as the same structure
 * (ll/codecavro.h): the shipped schemas, the codec fixtures, the fuzz_schema corpus and the name
 * rules by hand; and the oracle itself finds a difference where there is one.
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

#include "ll/codec.h"
#include "ll/codecavro.h"

#ifndef LL_AGREE_DIRS
#error "LL_AGREE_DIRS: the schema folders, colon-separated (tests/CMakeLists.txt)"
#endif

#define MAX_TEXT (1u << 20) /* the corpus's inputs are far smaller */

/* The file's text (NUL-terminated, caller frees), or NULL. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = malloc(MAX_TEXT + 1);
    size_t n = buf ? fread(buf, 1, MAX_TEXT, f) : 0;
    fclose(f);
    if (buf != NULL)
        buf[n] = '\0';
    return buf;
}

/* Loads text; when our parser accepts it, avro-c must agree. Returns 1 if accepted. */
static int check_text(const char *what, const char *text)
{
    char err[512];
    ll_schema *s = ll_schema_from_json(text, err, sizeof err);
    if (s == NULL)
        return 0;
    int r = ll_schema_avro_agrees(s, err, sizeof err);
    ll_schema_free(s);
    if (r != 1)
        fail_msg("%s: %s", what, err);
    return 1;
}

/* Every file of every folder: the number our parser accepted, and of .avsc files among them. */
static void test_folders(void **state)
{
    (void)state;
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s", LL_AGREE_DIRS);
    size_t accepted = 0, avsc = 0, files = 0;
    for (char *save = NULL, *d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        DIR *dir = opendir(d);
        if (dir == NULL)
            fail_msg("cannot open %s", d);
        for (struct dirent *e; (e = readdir(dir)) != NULL;) {
            if (e->d_name[0] == '.')
                continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", d, e->d_name);
            char *text = slurp(path);
            if (text == NULL)
                continue; /* a folder */
            files++;
            int ok = check_text(path, text);
            accepted += (size_t)ok;
            size_t len = strlen(e->d_name);
            if (len > 5 && strcmp(e->d_name + len - 5, ".avsc") == 0) {
                if (!ok)
                    fail_msg("%s: a shipped schema does not load", path);
                avsc++;
            }
            free(text);
        }
        closedir(dir);
    }
    print_message("%zu files, %zu schemas accepted (%zu .avsc), all read alike by avro-c\n", files, accepted,
                  avsc);
    assert_true(avsc >= 10);           /* the topics' schemas and the fixtures */
    assert_true(accepted > avsc + 20); /* the corpus contributes schemas of its own */
}

/* Name rules and shapes beyond the files: namespaces inherited and overridden, references by
 * short and full name, recursion through a union and an array, logical types, every primitive. */
static void test_name_rules(void **state)
{
    (void)state;
    static const char *const cases[] = {
        "{\"type\":\"record\",\"name\":\"R\",\"namespace\":\"a\",\"fields\":["
        "{\"name\":\"x\",\"type\":{\"type\":\"record\",\"name\":\"b.S\",\"fields\":["
        "{\"name\":\"y\",\"type\":{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"P\",\"Q\"]}}]}},"
        "{\"name\":\"z\",\"type\":\"b.E\"},{\"name\":\"w\",\"type\":[\"null\",\"a.R\"]}]}",
        "{\"type\":\"record\",\"name\":\"Node\",\"fields\":[{\"name\":\"v\",\"type\":\"long\"},"
        "{\"name\":\"next\",\"type\":[\"null\",\"Node\"]},"
        "{\"name\":\"kids\",\"type\":{\"type\":\"array\",\"items\":\"Node\"}}]}",
        "{\"type\":\"record\",\"name\":\"L\",\"fields\":["
        "{\"name\":\"d\",\"type\":{\"type\":\"bytes\",\"logicalType\":\"decimal\",\"precision\":10,\"scale\":"
        "2}},"
        "{\"name\":\"t\",\"type\":{\"type\":\"long\",\"logicalType\":\"timestamp-micros\"}},"
        "{\"name\":\"u\",\"type\":{\"type\":\"string\",\"logicalType\":\"uuid\"}},"
        "{\"name\":\"f\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":4}},"
        "{\"name\":\"m\",\"type\":{\"type\":\"map\",\"values\":[\"string\",\"null\"]},\"default\":{}}]}",
        "{\"type\":\"record\",\"name\":\"P\",\"fields\":[{\"name\":\"a\",\"type\":\"null\"},"
        "{\"name\":\"b\",\"type\":\"boolean\"},{\"name\":\"c\",\"type\":\"int\"},{\"name\":\"d\",\"type\":"
        "\"float\"},"
        "{\"name\":\"e\",\"type\":\"double\"},{\"name\":\"g\",\"type\":\"bytes\"},{\"name\":\"h\",\"type\":"
        "\"string\"}]}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "case %zu", i);
        if (!check_text(what, cases[i]))
            fail_msg("%s: our parser refuses it", what);
    }
}

/* The oracle finds each kind of difference, and names where. */
static void test_oracle_finds_differences(void **state)
{
    (void)state;
    char err[512];
    ll_schema *s = ll_schema_from_json(
        "{\"type\":\"record\",\"name\":\"n.R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},"
        "{\"name\":\"b\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":8}},"
        "{\"name\":\"c\",\"type\":[\"null\",{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\",\"Y\"]}]}]}",
        err, sizeof err);
    assert_non_null(s);
    assert_int_equal(ll_schema_avro_agrees(s, err, sizeof err), 1);
    static const struct {
        const char *text, *why;
    } cases[] = {
        {"{\"type\":\"record\",\"name\":\"n.R\",\"fields\":[{\"name\":\"a\",\"type\":\"long\"},"
         "{\"name\":\"b\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":8}},"
         "{\"name\":\"c\",\"type\":[\"null\",{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\",\"Y\"]}]}]"
         "}",
         "root.a: avro-c reads long, ours int"},
        {"{\"type\":\"record\",\"name\":\"n.R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},"
         "{\"name\":\"b\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":16}},"
         "{\"name\":\"c\",\"type\":[\"null\",{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\",\"Y\"]}]}]"
         "}",
         "root.b: avro-c has size 16, ours 8"},
        {"{\"type\":\"record\",\"name\":\"n.R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},"
         "{\"name\":\"b\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":8}},"
         "{\"name\":\"c\",\"type\":[\"null\",{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\",\"Z\"]}]}]"
         "}",
         "root.c|1: symbol 1 is Z in avro-c, Y in ours"},
        {"{\"type\":\"record\",\"name\":\"n.R\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"},"
         "{\"name\":\"b\",\"type\":{\"type\":\"fixed\",\"name\":\"F\",\"size\":8}},"
         "{\"name\":\"c\",\"type\":[\"null\",\"string\",{\"type\":\"enum\",\"name\":\"E\",\"symbols\":[\"X\"]"
         "}]}]}",
         "root.c: avro-c has 3 branches, ours 2"},
        {"{\"type\":\"record\",\"name\":\"m.R\",\"fields\":[]}", "root: avro-c names it m.R, ours n.R"},
        {"{\"type\":\"record\",\"name\":\"n.R\",\"fields\":[{\"name\":\"z\",\"type\":\"int\"},"
         "{\"name\":\"b\",\"type\":\"int\"},{\"name\":\"c\",\"type\":\"int\"}]}",
         "root: field 0 is z in avro-c, a in ours"},
        {"{\"type\":\"map\",\"values\":\"int\"}", "root: avro-c reads map, ours record"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        assert_int_equal(ll_schema_avro_agrees_with(s, cases[i].text, err, sizeof err), 0);
        assert_string_equal(err, cases[i].why);
    }
    assert_int_equal(ll_schema_avro_agrees_with(s, "{\"type\":\"nope\"}", err, sizeof err), -1);
    assert_non_null(strstr(err, "avro-c refuses the schema"));
    ll_schema_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_folders),
        cmocka_unit_test(test_name_rules),
        cmocka_unit_test(test_oracle_finds_differences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
