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
#include "ll/daemon.h"
#include "ll/db.h"
#include "ll/dispatch_config.h"
#include "ll/kloop.h"
#include "ll/log.h"

static const ll_config_key KEYS[] = {{"db.conninfo", NULL, true, "conninfo", LL_CONFIG_NO_RANGE},
                                     {"loop.batch_max", "200", false, "batch", LL_CONFIG_NO_RANGE},
                                     {"loop.poll", "PT0.1S", false, "poll", LL_CONFIG_NO_RANGE},
                                     {"flag", "false", false, "a flag", LL_CONFIG_NO_RANGE},
                                     {NULL, NULL, false, NULL, LL_CONFIG_NO_RANGE}};

static const char *const TOPICS[] = {"chunks", "run-requests", NULL};

/* Keys with ranges: an integer with both bounds, one with a lower bound only, a duration. */
static const ll_config_key RANGED[] = {
    {"n.both", "5", false, "both bounds", LL_CONFIG_INT, 1, 10},
    {"n.low", "1", false, "at least one", LL_CONFIG_INT, 1, LL_CONFIG_NO_MAX},
    {"d.wait", "PT1S", false, "a wait", LL_CONFIG_DURATION, 100, 60000},
    {"n.plain", "-7", false, "no range", LL_CONFIG_NO_RANGE},
    {NULL, NULL, false, NULL, LL_CONFIG_NO_RANGE}};

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

/* A configuration of RANGED with no file (every key at its default). */
static ll_config *ranged_config(void)
{
    char err[256];
    ll_config *c = ll_config_load(NULL, RANGED, NULL, err, sizeof err);
    assert_non_null(c);
    return c;
}

/* ll_config_int takes a value inside the table's range, bounds included, and refuses one outside,
 * naming the key, the range, the value and the key's help; *out is left alone then. */
static void test_int_range_is_the_tables(void **state)
{
    ll_config *c = ranged_config();
    char err[256];
    int64_t v = 0;
    assert_int_equal(ll_config_int(c, "n.both", &v, err, sizeof err), 0);
    assert_int_equal(v, 5);
    static const char *const good[] = {"1", "10"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ll_config_set(c, "n.both", good[i]), 0);
        assert_int_equal(ll_config_int(c, "n.both", &v, err, sizeof err), 0);
        assert_int_equal(v, i == 0 ? 1 : 10);
    }
    static const char *const bad[] = {"0", "11", "-1", "9223372036854775807"};
    for (int i = 0; i < 4; i++) {
        v = 42;
        assert_int_equal(ll_config_set(c, "n.both", bad[i]), 0);
        assert_int_equal(ll_config_int(c, "n.both", &v, err, sizeof err), -1);
        assert_int_equal(v, 42);
        char want[128];
        snprintf(want, sizeof want, "configuration key 'n.both' must be 1..10, not %s (both bounds)", bad[i]);
        assert_string_equal(err, want);
    }
    assert_int_equal(ll_config_set(c, "n.low", "0"), 0);
    assert_int_equal(ll_config_int(c, "n.low", &v, err, sizeof err), -1);
    assert_string_equal(err, "configuration key 'n.low' must be at least 1, not 0 (at least one)");
    assert_int_equal(ll_config_set(c, "n.low", "9223372036854775807"), 0);
    assert_int_equal(ll_config_int(c, "n.low", &v, err, sizeof err), 0);
    assert_int_equal(v, INT64_MAX);
    /* no range: any integer; not an integer: refused as before */
    assert_int_equal(ll_config_int(c, "n.plain", &v, err, sizeof err), 0);
    assert_int_equal(v, -7);
    assert_int_equal(ll_config_set(c, "n.both", "5x"), 0);
    assert_int_equal(ll_config_int(c, "n.both", &v, err, sizeof err), -1);
    assert_non_null(strstr(err, "is not an integer"));
    ll_config_free(c);
}

/* A duration's range is in milliseconds, whatever form the value takes. */
static void test_duration_range_in_ms(void **state)
{
    ll_config *c = ranged_config();
    char err[256];
    int64_t ms = 0;
    assert_int_equal(ll_config_duration_ms(c, "d.wait", &ms, err, sizeof err), 0);
    assert_int_equal(ms, 1000);
    assert_int_equal(ll_config_set(c, "d.wait", "PT0.1S"), 0);
    assert_int_equal(ll_config_duration_ms(c, "d.wait", &ms, err, sizeof err), 0);
    assert_int_equal(ms, 100);
    assert_int_equal(ll_config_set(c, "d.wait", "PT1M"), 0);
    assert_int_equal(ll_config_duration_ms(c, "d.wait", &ms, err, sizeof err), 0);
    assert_int_equal(ms, 60000);
    ms = 7;
    assert_int_equal(ll_config_set(c, "d.wait", "0.05"), 0);
    assert_int_equal(ll_config_duration_ms(c, "d.wait", &ms, err, sizeof err), -1);
    assert_string_equal(err, "configuration key 'd.wait' must be 100..60000 ms, not 50 ms (a wait)");
    assert_int_equal(ms, 7);
    assert_int_equal(ll_config_set(c, "d.wait", "PT61S"), 0);
    assert_int_equal(ll_config_duration_ms(c, "d.wait", &ms, err, sizeof err), -1);
    assert_non_null(strstr(err, "not 61000 ms"));
    ll_config_free(c);
}

/* Reading a key with the other kind's reader is refused, naming both kinds. */
static void test_kind_mismatch_is_refused(void **state)
{
    ll_config *c = ranged_config();
    char err[256];
    int64_t v = 0;
    assert_int_equal(ll_config_duration_ms(c, "n.both", &v, err, sizeof err), -1);
    assert_string_equal(err, "configuration key 'n.both' is read as a duration but listed as an integer");
    assert_int_equal(ll_config_int(c, "d.wait", &v, err, sizeof err), -1); /* "PT1S" is no integer anyway */
    assert_int_equal(ll_config_set(c, "d.wait", "5"), 0);
    assert_int_equal(ll_config_int(c, "d.wait", &v, err, sizeof err), -1);
    assert_string_equal(err, "configuration key 'd.wait' is read as an integer but listed as a duration");
    ll_config_free(c);
}

/* --help and --config-keys print the range after the help, and nothing for a key without one. */
static void test_usage_and_example_print_the_range(void **state)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    ll_config_write_example(f, RANGED);
    fclose(f);
    assert_string_equal(buf, "\n# both bounds (1..10)\n#n.both = 5\n"
                             "\n# at least one (at least 1)\n#n.low = 1\n"
                             "\n# a wait (100..60000 ms)\n#d.wait = PT1S\n"
                             "\n# no range\n#n.plain = -7\n");
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    ll_config_usage(f, RANGED);
    fclose(f);
    assert_non_null(strstr(buf, "both bounds [1..10] [default 5]\n"));
    assert_non_null(strstr(buf, "a wait [100..60000 ms] [default PT1S]\n"));
    assert_non_null(strstr(buf, "no range [default -7]\n"));
    free(buf);
}

/* Every ranged key of the shared tables has a default inside its range (read with its reader). */
static void check_defaults_in_range(const ll_config_key *keys)
{
    char err[256];
    ll_config *c = ll_config_load(NULL, keys, NULL, err, sizeof err);
    if (!c) { /* a required key (db.conninfo): give it a value */
        setenv("LOADLEDGER_DB__CONNINFO", "x", 1);
        c = ll_config_load(NULL, keys, NULL, err, sizeof err);
        unsetenv("LOADLEDGER_DB__CONNINFO");
    }
    assert_non_null(c);
    for (const ll_config_key *k = keys; k->key; k++) {
        int64_t v = 0;
        if (k->kind == LL_CONFIG_INT)
            assert_int_equal(ll_config_int(c, k->key, &v, err, sizeof err), 0);
        else if (k->kind == LL_CONFIG_DURATION)
            assert_int_equal(ll_config_duration_ms(c, k->key, &v, err, sizeof err), 0);
        if (k->kind != LL_CONFIG_UNCHECKED)
            assert_true(k->min <= k->max);
    }
    ll_config_free(c);
}

static void test_shared_tables_defaults_are_in_range(void **state)
{
    check_defaults_in_range(LL_LOOP_CONFIG_KEYS);
    check_defaults_in_range(LL_DB_TIMEOUT_KEYS);
    check_defaults_in_range(LL_DAEMON_CONFIG_KEYS);
}

/* dispatch.max_attempts is declared once (ll/dispatch_config.h) for the dispatcher and the sweeper:
 * its default 20 is in its range 1..2^31-1, and 0 or a value past an int is refused at start. */
static void test_dispatch_max_attempts_declared_once(void **state)
{
    static const ll_config_key keys[] = {LL_DISPATCH_MAX_ATTEMPTS_KEY,
                                         {NULL, NULL, false, NULL, LL_CONFIG_NO_RANGE}};
    check_defaults_in_range(keys);
    char err[256];
    int64_t v = 0;
    ll_config *c = ll_config_load(NULL, keys, NULL, err, sizeof err);
    assert_non_null(c);
    assert_int_equal(ll_config_int(c, "dispatch.max_attempts", &v, err, sizeof err), 0);
    assert_int_equal(v, 20);
    assert_int_equal(ll_config_set(c, "dispatch.max_attempts", "0"), 0);
    assert_int_equal(ll_config_int(c, "dispatch.max_attempts", &v, err, sizeof err), -1);
    assert_non_null(strstr(err, "'dispatch.max_attempts' must be 1..2147483647, not 0"));
    assert_int_equal(ll_config_set(c, "dispatch.max_attempts", "2147483648"), 0);
    assert_int_equal(ll_config_int(c, "dispatch.max_attempts", &v, err, sizeof err), -1);
    ll_config_free(c);
}

/* ll_config_enum: the index of the allowed word, exact match only; else -1 with an error naming the
 * key, every allowed word and the value; err may be NULL. The shared word lists are in their enums'
 * order. */
static void test_enum_key_is_one_of_its_words(void **state)
{
    static const char *const words[] = {"kafka", "http", NULL};
    char err[256];
    assert_int_equal(ll_config_enum("dispatch.sink", "kafka", words, err, sizeof err), 0);
    assert_int_equal(ll_config_enum("dispatch.sink", "http", words, err, sizeof err), 1);
    assert_int_equal(ll_config_enum("dispatch.sink", "HTTP", words, err, sizeof err), -1);
    assert_string_equal(err, "configuration key dispatch.sink must be kafka or http, not 'HTTP'");
    assert_int_equal(ll_config_enum("db.pooler", "x", LL_DB_POOLER_NAMES, err, sizeof err), -1);
    assert_string_equal(err, "configuration key db.pooler must be auto, none or transaction, not 'x'");
    assert_int_equal(ll_config_enum("log.level", NULL, LL_LOG_LEVEL_NAMES, err, sizeof err), -1);
    assert_string_equal(err,
                        "configuration key log.level has no value: it must be debug, info, warn or error");
    assert_int_equal(ll_config_enum("log.level", "", LL_LOG_LEVEL_NAMES, NULL, 0), -1);
    static const char *const one[] = {"only", NULL};
    assert_int_equal(ll_config_enum("k", "other", one, err, sizeof err), -1);
    assert_string_equal(err, "configuration key k must be only, not 'other'");
    char small[24];
    assert_int_equal(ll_config_enum("db.pooler", "x", LL_DB_POOLER_NAMES, small, sizeof small), -1);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_int_equal(ll_config_enum("db.pooler", "transaction", LL_DB_POOLER_NAMES, NULL, 0),
                     LL_DB_POOLER_TRANSACTION);
    assert_int_equal(ll_config_enum("log.level", "warn", LL_LOG_LEVEL_NAMES, NULL, 0), LL_WARN);
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
        cmocka_unit_test(test_int_range_is_the_tables),
        cmocka_unit_test(test_duration_range_in_ms),
        cmocka_unit_test(test_kind_mismatch_is_refused),
        cmocka_unit_test(test_usage_and_example_print_the_range),
        cmocka_unit_test(test_shared_tables_defaults_are_in_range),
        cmocka_unit_test(test_dispatch_max_attempts_declared_once),
        cmocka_unit_test(test_enum_key_is_one_of_its_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
