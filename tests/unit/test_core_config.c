/*
 * test_core_config.c - the configuration file, environment overrides, unknown keys, durations.
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

#include "ll/config.h"

static const ll_config_key KEYS[] = {{"db.conninfo", NULL, true, "conninfo"},
                                     {"loop.batch_max", "200", false, "batch"},
                                     {"loop.poll", "PT0.1S", false, "poll"},
                                     {"flag", "false", false, "a flag"},
                                     {NULL, NULL, false, NULL}};

static const char *const TOPICS[] = {"chunks", "run-requests", NULL};

static char *write_tmp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/ll-config-test-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_file_values_and_defaults(void **state)
{
    char err[256];
    char *path = write_tmp("# comment\n\ndb.conninfo = host=127.0.0.1 port=5 dbname=x\n"
                           "kafka.bootstrap.servers=127.0.0.1:9092\ntopic.chunks.framing = block\n");
    ll_config *c = ll_config_load(path, KEYS, TOPICS, err, sizeof err);
    assert_non_null(c);
    assert_string_equal(ll_config_get(c, "db.conninfo"), "host=127.0.0.1 port=5 dbname=x");
    assert_string_equal(ll_config_get(c, "kafka.bootstrap.servers"), "127.0.0.1:9092");
    assert_string_equal(ll_config_get(c, "topic.chunks.framing"), "block");
    int64_t batch = 0;
    assert_int_equal(ll_config_int(c, "loop.batch_max", &batch, err, sizeof err), 0);
    assert_int_equal(batch, 200);
    ll_config_free(c);
    unlink(path);
}

static void test_unknown_key_is_refused_with_its_name(void **state)
{
    char err[256];
    char *path = write_tmp("db.conninfo = x\nloop.batchmax = 3\n");
    assert_null(ll_config_load(path, KEYS, TOPICS, err, sizeof err));
    assert_non_null(strstr(err, "'loop.batchmax'"));
    assert_non_null(strstr(err, ":2:"));
    unlink(path);
    path = write_tmp("db.conninfo = x\ntopic.nosuchtopic.framing = bare\n");
    assert_null(ll_config_load(path, KEYS, TOPICS, err, sizeof err));
    assert_non_null(strstr(err, "topic.nosuchtopic.framing"));
    unlink(path);
}

static void test_missing_required_key(void **state)
{
    char err[256];
    char *path = write_tmp("loop.batch_max = 3\n");
    assert_null(ll_config_load(path, KEYS, TOPICS, err, sizeof err));
    assert_non_null(strstr(err, "db.conninfo"));
    unlink(path);
}

static void test_environment_overrides_file(void **state)
{
    char err[256];
    char *path = write_tmp("db.conninfo = from-file\nloop.batch_max = 3\n");
    setenv("LOADLEDGER_LOOP__BATCH_MAX", "7", 1);
    setenv("LOADLEDGER_KAFKA__BOOTSTRAP__SERVERS", "h:1", 1);
    ll_config *c = ll_config_load(path, KEYS, TOPICS, err, sizeof err);
    assert_non_null(c);
    assert_string_equal(ll_config_get(c, "loop.batch_max"), "7");
    assert_string_equal(ll_config_get(c, "kafka.bootstrap.servers"), "h:1");
    assert_string_equal(ll_config_get(c, "db.conninfo"), "from-file");
    ll_config_free(c);
    setenv("LOADLEDGER_NOT__A__KEY", "1", 1);
    assert_null(ll_config_load(path, KEYS, TOPICS, err, sizeof err));
    assert_non_null(strstr(err, "'not.a.key'"));
    unsetenv("LOADLEDGER_NOT__A__KEY");
    unsetenv("LOADLEDGER_LOOP__BATCH_MAX");
    unsetenv("LOADLEDGER_KAFKA__BOOTSTRAP__SERVERS");
    unlink(path);
}

static void test_durations(void **state)
{
    int64_t ms = 0;
    assert_int_equal(ll_parse_duration_ms("PT90M", &ms), 0);
    assert_int_equal(ms, 90 * 60 * 1000);
    assert_int_equal(ll_parse_duration_ms("P3D", &ms), 0);
    assert_int_equal(ms, 3LL * 86400 * 1000);
    assert_int_equal(ll_parse_duration_ms("PT0.2S", &ms), 0);
    assert_int_equal(ms, 200);
    assert_int_equal(ll_parse_duration_ms("P1DT1H1M1S", &ms), 0);
    assert_int_equal(ms, 90061000);
    assert_int_equal(ll_parse_duration_ms("45", &ms), 0);
    assert_int_equal(ms, 45000);
    assert_int_equal(ll_parse_duration_ms("PT", &ms), -1);
    assert_int_equal(ll_parse_duration_ms("P5M", &ms), -1); /* months are not a fixed length */
    assert_int_equal(ll_parse_duration_ms("-5", &ms), -1);
    assert_int_equal(ll_parse_duration_ms("ten", &ms), -1);
    assert_int_equal(ll_parse_duration_ms("inf", &ms), -1);
    assert_int_equal(ll_parse_duration_ms("1e30", &ms), -1);
    assert_int_equal(ll_parse_duration_ms("PT1e30S", &ms), -1);
    assert_int_equal(ll_parse_duration_ms("nan", &ms), -1);
}

static void test_booleans(void **state)
{
    char err[256];
    char *path = write_tmp("db.conninfo = x\nflag = yes\n");
    ll_config *c = ll_config_load(path, KEYS, TOPICS, err, sizeof err);
    bool b = false;
    assert_int_equal(ll_config_bool(c, "flag", &b, err, sizeof err), 0);
    assert_true(b);
    ll_config_set(c, "flag", "maybe");
    assert_int_equal(ll_config_bool(c, "flag", &b, err, sizeof err), -1);
    assert_non_null(strstr(err, "flag"));
    ll_config_free(c);
    unlink(path);
}

/* The example file (--config-keys) as open_memstream text; the caller frees it. */
static char *example_text(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ll_config_write_example(f, KEYS);
    fclose(f);
    return buf;
}

static void test_example_lists_every_key_with_default_and_help(void **state)
{
    char *text = example_text();
    assert_string_equal(text, "\n# conninfo\n# required\n#db.conninfo =\n"
                              "\n# batch\n#loop.batch_max = 200\n"
                              "\n# poll\n#loop.poll = PT0.1S\n"
                              "\n# a flag\n#flag = false\n");
    free(text);
}

/* Uncommenting every `#key = default` line of the example (plus the required key) gives a file
 * the loader accepts, with each key at its default. */
static void test_example_uncommented_loads_with_the_defaults(void **state)
{
    char *text = example_text();
    char file[1024] = "db.conninfo = x\n";
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
        if (line[0] == '#' && line[1] != ' ' && !strstr(line, "db.conninfo")) {
            strncat(file, line + 1, sizeof file - strlen(file) - 2);
            strcat(file, "\n");
        }
    free(text);
    assert_non_null(strstr(file, "loop.poll = PT0.1S\n"));
    char err[256];
    char *path = write_tmp(file);
    ll_config *c = ll_config_load(path, KEYS, TOPICS, err, sizeof err);
    assert_non_null(c);
    for (const ll_config_key *k = KEYS; k->key; k++)
        if (k->default_value)
            assert_string_equal(ll_config_get(c, k->key), k->default_value);
    ll_config_free(c);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_values_and_defaults),
        cmocka_unit_test(test_unknown_key_is_refused_with_its_name),
        cmocka_unit_test(test_missing_required_key),
        cmocka_unit_test(test_environment_overrides_file),
        cmocka_unit_test(test_durations),
        cmocka_unit_test(test_booleans),
        cmocka_unit_test(test_example_lists_every_key_with_default_and_help),
        cmocka_unit_test(test_example_uncommented_loads_with_the_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
