/*
 * verify.c - `loadctl verify [--topics] [--config FILE] [--max-records N] [--timeout DURATION]`:
 * checks the invariants of the ledger (and with --topics of the topics) and prints each with its
 * count of violations, 0 when it holds (verify.h lists them). Read-only: no lock, no commit.
 *
 * Exit codes (loadctl's common table, loadctl.h): LC_OK every invariant holds, LC_VIOLATED at
 * least one is violated or could not be checked to the end (a bound stopped it), LC_USAGE,
 * LC_DB or LC_KAFKA when it could not check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/kloop.h"
#include "ll/svc.h"
#include "ll/topics.h"
#include "loadctl.h"
#include "verify.h"

static const char USAGE[] =
    "usage: loadctl verify [--topics] [--config FILE] [--max-records N] [--timeout DURATION]\n"
    "                      [--restored-from OFFSETS_FILE] [--json]\n\n"
    "Checks the invariants of the ledger and prints each with its count of violations (0 = holds).\n"
    "--topics also reads the topics (read_committed): every input offset below its group's\n"
    "committed offset has one answer, a reply or a dead letter (later REPLAY replies agreeing\n"
    "with it allowed), and no chunk report is lost.\n"
    "--restored-from (with --topics) names the offsets file of `loadctl offsets save` a restore\n"
    "used: an input at or above its recorded offset was answered by the lost and by the restored\n"
    "ledger, and may have a second answer agreeing with the first.\n"
    "--config is a file of key = value lines like a service's (kafka.*, topic.prefix,\n"
    "topic.<logical>.name|framing, schema.dir, schema.ids_file; LOADLEDGER_<KEY> overrides).\n"
    "--max-records (default 1000000) and --timeout (default PT60S) bound the reading; a check they\n"
    "stopped is reported as incomplete. --timeout also bounds each wait for the broker (10 s at most).\n"
    "Exit codes: 0 all hold, 5 a violation (or an incomplete check), 1 usage or configuration,\n"
    "3 database, 4 broker error.\n";

static const struct {
    const char *name, *what;
} CHECKS[VF_COUNT] = {
    {"run_status", "every run's status is the one its events imply"},
    {"validate_dispatch", "one VALIDATE_RUN dispatch per run past extraction, none before"},
    {"stage_validating", "at most one validation start (STAGE_VALIDATING entry) per run"},
    {"partition_rows", "every SUCCESS partition's WRITTEN files sum to its rows"},
    {"partition_counters", "every partition's counters (migration 0007) equal its WRITTEN files"},
    {"one_reply", "every committed input offset has one reply or dead letter (and agreeing REPLAYs)"},
    {"offset_ahead", "no committed offset ahead of its database effect"},
    {"chunk_lost", "no chunk lost: a file row, a REJECTED/REPLAY reply or a dead letter"},
};

/* The keys a verify configuration may hold: the services' own (so a service's file serves). */
static ll_config_key *config_keys(void)
{
    ll_config_key *k = ll_config_keys_merge(LL_LOOP_CONFIG_KEYS, LL_DB_TIMEOUT_KEYS, NULL);
    for (size_t i = 0; k && k[i].key; i++)
        k[i].required = false; /* the database comes from --db as for every command */
    return k;
}

static void print_text(const vf_check *c, int n, bool topics)
{
    for (int i = 0; i < n; i++) {
        if (!c[i].ran) {
            printf("%-20s %8s  %s\n", c[i].name, "-", topics ? c[i].what : "not checked (give --topics)");
            continue;
        }
        printf("%-20s %8ld  %s%s\n", c[i].name, c[i].violations, c[i].what,
               c[i].bounded ? " [incomplete: stopped by --max-records or --timeout]" : "");
        for (size_t k = 0; k < json_array_size(c[i].samples); k++)
            printf("%-20s %8s    %s\n", "", "", json_string_value(json_array_get(c[i].samples, k)));
    }
}

static json_t *as_json(const vf_check *c, int n, bool ok)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_pack("{s:s,s:s,s:b,s:b}", "name", c[i].name, "invariant", c[i].what, "checked",
                              c[i].ran, "incomplete", c[i].bounded);
        json_object_set_new(o, "violations", c[i].ran ? json_integer(c[i].violations) : json_null());
        json_object_set(o, "samples", c[i].samples);
        json_array_append_new(arr, o);
    }
    return json_pack("{s:b,s:o}", "ok", ok, "checks", arr);
}

int lc_verify(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *config = NULL, *max_records = "1000000", *timeout = "PT60S", *restored_from = NULL, *pos[1];
    bool topics = false;
    int npos;
    lc_optspec specs[] = {{"topics", NULL, &topics},
                          {"config", &config, NULL},
                          {"max-records", &max_records, NULL},
                          {"timeout", &timeout, NULL},
                          {"restored-from", &restored_from, NULL},
                          {NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 0, 0, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    vf_bounds b;
    long maxr;
    if (lc_parse_int(max_records, 1, 100000000, &maxr) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--max-records must be 1..100000000");
    if (lc_parse_duration(timeout, &b.timeout_ms) != 0 || b.timeout_ms <= 0 || b.timeout_ms > 86400000)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--timeout must be a duration up to one day");
    b.max_records = maxr;
    if (restored_from && !topics)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--restored-from needs --topics");
    json_t *restored = NULL; /* the offsets file of `loadctl offsets save` (offsets.c, version 1) */
    if (restored_from) {
        json_error_t je;
        restored = json_load_file(restored_from, JSON_REJECT_DUPLICATES, &je);
        if (!restored || json_integer_value(json_object_get(restored, "version")) != 1 ||
            !json_is_array(json_object_get(restored, "groups"))) {
            json_decref(restored);
            return lc_fail(o, LC_USAGE, "USAGE", NULL, "%s: not a loadctl offsets file (version 1)",
                           restored_from);
        }
    }
    ll_config *cfg = NULL;
    ll_config_key *keys = NULL; /* the configuration borrows the table: freed after it */
    if (topics) {
        char err[512];
        keys = config_keys();
        cfg = keys ? ll_config_load(config, keys, LL_ALL_TOPICS, err, sizeof err) : NULL;
        if (!cfg) {
            lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL, "%s", keys ? err : "out of memory");
            free(keys);
            json_decref(restored);
            return LC_USAGE;
        }
    }
    ll_db db;
    if (lc_db_open(o, &db) != LC_OK) {
        ll_config_free(cfg);
        free(keys);
        json_decref(restored);
        return LC_DB;
    }
    vf_check c[VF_COUNT];
    memset(c, 0, sizeof c);
    for (int i = 0; i < VF_COUNT; i++) {
        c[i].name = CHECKS[i].name;
        c[i].what = CHECKS[i].what;
        c[i].samples = json_array();
    }
    const char *what = NULL;
    char err[512] = "";
    rc = LC_OK;
    if (vf_check_ledger(&db, c, &what) != 0) {
        rc = lc_fail_db(o, &db, what);
    } else if (topics && vf_check_topics(cfg, &db, &b, restored, c, err, sizeof err) != 0) {
        rc = lc_fail(o, LC_KAFKA, "TOPICS_UNAVAILABLE", NULL, "%s", err);
    } else {
        for (int i = 0; i < VF_COUNT; i++)
            if (c[i].ran && (c[i].violations > 0 || c[i].bounded))
                rc = LC_VIOLATED;
        if (o->json)
            lc_print_json(as_json(c, VF_COUNT, rc == LC_OK));
        else {
            print_text(c, VF_COUNT, topics);
            printf("%s\n", rc == LC_OK ? "verify: every invariant holds" : "verify: VIOLATED");
        }
    }
    for (int i = 0; i < VF_COUNT; i++)
        json_decref(c[i].samples);
    ll_db_close(&db);
    ll_config_free(cfg);
    free(keys);
    json_decref(restored);
    return rc;
}
