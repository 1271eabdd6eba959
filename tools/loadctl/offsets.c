/*
 * offsets.c - `loadctl offsets save|restore`: the input consumer groups' committed offsets
 * recorded with a base backup, and set back after the database was restored from it
 * (docs/operations.md "Restore from a backup").
 *
 * Why the recorded offsets are safe: a service commits an input offset only in the Kafka
 * transaction after the database transaction that applied it (docs/contract.md K§3), so offsets
 * read before the backup's snapshot starts are never ahead of what the backup holds; what lies
 * above them is consumed again after the restore, and the ledger's compare-and-set transitions
 * make a replay of what the backup already holds change nothing. The commit metadata (the done
 * offsets above the committed one, docs/design.md §3) is recorded and set back with each offset.
 *
 * A group is <topic.prefix><service> (the services' default, setup.c) for each consuming
 * service of routes.h; its partitions are those of the service's input topics. restore commits
 * as no member of the group: the broker refuses it while a member is active, so the services
 * must be stopped first (the refusal is reported with the group).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreader.h"
#include "ll/kloop.h"
#include "ll/svc.h"
#include "ll/topics.h"
#include "loadctl.h"
#include "routes.h"

/* Waits for the broker (ms). */
#define OFF_WAIT_MS 10000
/* Largest offsets file restore reads (bytes): groups × partitions × ~4 KiB of metadata at most. */
#define OFF_FILE_MAX (16L * 1024 * 1024)
/* Partitions of one input topic at most. */
#define OFF_MAX_PARTITIONS 10000

static const char USAGE[] =
    "usage: loadctl offsets save --out FILE [--config FILE] [--json]\n"
    "       loadctl offsets restore --from FILE [--config FILE] [--json]\n\n"
    "save records the committed offsets (with their metadata) of every input consumer group\n"
    "(<topic.prefix><service>) into FILE (JSON); take it just before the base backup.\n"
    "restore commits them again for each group after the database was restored from that\n"
    "backup; a partition without a recorded offset goes to its earliest offset. The services must\n"
    "be stopped (the broker refuses a commit to a group with active members).\n"
    "--config is a file of key = value lines like a service's (kafka.*, topic.prefix,\n"
    "topic.<logical>.name; LOADLEDGER_<KEY> overrides).\n"
    "Exit codes: 0 done, 1 usage or configuration, 2 refused (a group has members, a file that is\n"
    "not an offsets file), 1 also a file that cannot be read or written, 4 broker unavailable.\n";

/* The keys an offsets configuration may hold: the services' own (so a service's file serves). */
static ll_config_key *config_keys(void)
{
    ll_config_key *k = ll_config_keys_merge(LL_LOOP_CONFIG_KEYS, LL_DB_TIMEOUT_KEYS, NULL);
    for (size_t i = 0; k && k[i].key; i++)
        k[i].required = false;
    return k;
}

/* Whether routes[0..i) already named service s (each group once). */
static bool seen_service(int i)
{
    for (int j = 0; j < i; j++)
        if (strcmp(LC_ROUTES[j].service, LC_ROUTES[i].service) == 0)
            return true;
    return false;
}

/* Adds every partition of topic to l (offset INVALID), at most OFF_MAX_PARTITIONS. 0, or -1 with
 * err. */
static int add_partitions(rd_kafka_t *rk, const char *topic, rd_kafka_topic_partition_list_t *l, char *err,
                          size_t errlen)
{
    int n = lc_topic_partitions(rk, topic, OFF_WAIT_MS, err, errlen);
    if (n > OFF_MAX_PARTITIONS)
        snprintf(err, errlen, "topic %s has %d partitions, more than %d", topic, n, OFF_MAX_PARTITIONS);
    if (n < 0 || n > OFF_MAX_PARTITIONS)
        return -1;
    for (int p = 0; p < n; p++)
        rd_kafka_topic_partition_list_add(l, topic, p);
    return 0;
}

/* The partitions of service i's input topics (each partition once), offsets INVALID. */
static rd_kafka_topic_partition_list_t *group_partitions(const ll_config *cfg, rd_kafka_t *rk, int i,
                                                         char *err, size_t errlen)
{
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(16);
    for (int j = i; j < LC_N_ROUTES; j++) {
        if (strcmp(LC_ROUTES[j].service, LC_ROUTES[i].service) != 0)
            continue;
        char topic[256];
        ll_topic_name(cfg, LC_ROUTES[j].input, topic, sizeof topic);
        if (add_partitions(rk, topic, l, err, errlen) != 0) {
            rd_kafka_topic_partition_list_destroy(l);
            return NULL;
        }
    }
    return l;
}

static void group_name(const ll_config *cfg, int i, char *out, size_t n)
{
    const char *prefix = ll_config_get(cfg, "topic.prefix");
    snprintf(out, n, "%s%s", prefix ? prefix : "loadledger.", LC_ROUTES[i].service);
}

/* The metadata of a committed offset as a JSON string (it is text: "ll1:..."), or null. */
static json_t *metadata_json(const rd_kafka_topic_partition_t *tp)
{
    if (!tp->metadata || tp->metadata_size == 0)
        return json_null();
    for (size_t k = 0; k < tp->metadata_size; k++) {
        unsigned char c = ((const unsigned char *)tp->metadata)[k];
        if (c < 0x20 || c > 0x7e)
            return json_null(); /* not the loop's text: left out, the offset alone is set back */
    }
    return json_stringn(tp->metadata, tp->metadata_size);
}

/* Every group's committed offsets as {"group", "offsets": [...]} into arr. 0, or -1 with err. */
static int save_groups(const ll_config *cfg, rd_kafka_t *meta, json_t *arr, char *err, size_t errlen)
{
    for (int i = 0; i < LC_N_ROUTES; i++) {
        if (seen_service(i))
            continue;
        char group[300];
        group_name(cfg, i, group, sizeof group);
        rd_kafka_topic_partition_list_t *l = group_partitions(cfg, meta, i, err, errlen);
        if (!l)
            return -1;
        rd_kafka_t *g = lc_reader_new(cfg, group, err, errlen);
        rd_kafka_resp_err_t e = g ? rd_kafka_committed(g, l, OFF_WAIT_MS) : RD_KAFKA_RESP_ERR__FAIL;
        lc_reader_close(g);
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
            if (g)
                snprintf(err, errlen, "committed offsets of group %s: %s", group, rd_kafka_err2str(e));
            rd_kafka_topic_partition_list_destroy(l);
            return -1;
        }
        json_t *offs = json_array();
        for (int p = 0; p < l->cnt; p++) {
            const rd_kafka_topic_partition_t *tp = &l->elems[p];
            if (tp->offset < 0)
                continue; /* nothing committed: restore starts it at the earliest offset */
            json_array_append_new(offs, json_pack("{s:s,s:i,s:I,s:o}", "topic", tp->topic, "partition",
                                                  (int)tp->partition, "offset", (json_int_t)tp->offset,
                                                  "metadata", metadata_json(tp)));
        }
        json_array_append_new(arr, json_pack("{s:s,s:o}", "group", group, "offsets", offs));
        rd_kafka_topic_partition_list_destroy(l);
    }
    return 0;
}

/* The recorded entry of (topic, partition) in a group's "offsets" array, or NULL. */
static json_t *recorded(json_t *offs, const char *topic, int32_t partition)
{
    size_t k;
    json_t *e;
    json_array_foreach(offs, k, e)
    {
        if (json_is_string(json_object_get(e, "topic")) &&
            strcmp(json_string_value(json_object_get(e, "topic")), topic) == 0 &&
            json_integer_value(json_object_get(e, "partition")) == partition)
            return e;
    }
    return NULL;
}

/* The recorded offsets of group in doc (its "offsets" array), or NULL when the file has none. */
static json_t *group_offsets(json_t *doc, const char *group)
{
    size_t k;
    json_t *g;
    json_array_foreach(json_object_get(doc, "groups"), k, g)
    {
        const char *name = json_string_value(json_object_get(g, "group"));
        if (name && strcmp(name, group) == 0 && json_is_array(json_object_get(g, "offsets")))
            return json_object_get(g, "offsets");
    }
    return NULL;
}

/* Fills l's offsets (and metadata) from offs, the earliest offset where none was recorded;
 * *n_rec / *n_earliest count them. 0, or -1 with err. */
static int plan_restore(rd_kafka_t *meta, rd_kafka_topic_partition_list_t *l, json_t *offs, int *n_rec,
                        int *n_earliest, char *err, size_t errlen)
{
    for (int p = 0; p < l->cnt; p++) {
        rd_kafka_topic_partition_t *tp = &l->elems[p];
        json_t *e = offs ? recorded(offs, tp->topic, tp->partition) : NULL;
        json_int_t off = e ? json_integer_value(json_object_get(e, "offset")) : -1;
        int64_t lo, hi;
        rd_kafka_resp_err_t we =
            rd_kafka_query_watermark_offsets(meta, tp->topic, tp->partition, &lo, &hi, OFF_WAIT_MS);
        if (we != RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(err, errlen, "watermarks of %s [%" PRId32 "]: %s", tp->topic, tp->partition,
                     rd_kafka_err2str(we));
            return -1;
        }
        if (e && (off < 0 || off > hi)) {
            snprintf(err, errlen,
                     "%s [%" PRId32 "]: recorded offset %" JSON_INTEGER_FORMAT
                     " is outside the partition (0..%" PRId64 "): not this broker's offsets file",
                     tp->topic, tp->partition, off, hi);
            return -2;
        }
        if (!e) {
            tp->offset = lo;
            (*n_earliest)++;
            continue;
        }
        tp->offset = (int64_t)off;
        (*n_rec)++;
        const char *md = json_string_value(json_object_get(e, "metadata"));
        if (md && strlen(md) <= 4096) {
            tp->metadata_size = strlen(md);
            tp->metadata = malloc(tp->metadata_size);
            memcpy(tp->metadata, md, tp->metadata_size);
        }
    }
    return 0;
}

/* Commits l as group (no member of it) and reads it back. 0, -2 (the group has members), or -1. */
static int commit_group(const ll_config *cfg, const char *group, rd_kafka_topic_partition_list_t *l,
                        char *err, size_t errlen)
{
    rd_kafka_t *g = lc_reader_new(cfg, group, err, errlen);
    if (!g)
        return -1;
    rd_kafka_resp_err_t e = rd_kafka_commit(g, l, 0);
    for (int p = 0; e == RD_KAFKA_RESP_ERR_NO_ERROR && p < l->cnt; p++)
        e = l->elems[p].err;
    int rc = 0;
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
        bool members = e == RD_KAFKA_RESP_ERR_UNKNOWN_MEMBER_ID ||
                       e == RD_KAFKA_RESP_ERR_ILLEGAL_GENERATION ||
                       e == RD_KAFKA_RESP_ERR_REBALANCE_IN_PROGRESS;
        snprintf(err, errlen, "commit to group %s: %s%s", group, rd_kafka_err2str(e),
                 members ? " (the group has active members: stop its services first)" : "");
        rc = members ? -2 : -1;
    } else {
        rd_kafka_topic_partition_list_t *c = rd_kafka_topic_partition_list_copy(l);
        e = rd_kafka_committed(g, c, OFF_WAIT_MS);
        for (int p = 0; e == RD_KAFKA_RESP_ERR_NO_ERROR && p < c->cnt; p++)
            if (c->elems[p].offset != l->elems[p].offset) {
                snprintf(err, errlen, "group %s: %s [%" PRId32 "] reads back %" PRId64 ", not %" PRId64,
                         group, c->elems[p].topic, c->elems[p].partition, c->elems[p].offset,
                         l->elems[p].offset);
                rc = -1;
            }
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
            snprintf(err, errlen, "reading back group %s: %s", group, rd_kafka_err2str(e));
            rc = -1;
        }
        rd_kafka_topic_partition_list_destroy(c);
    }
    lc_reader_close(g);
    return rc;
}

/* restore: every group's offsets from doc. LC_OK, or the exit code after reporting. */
static int restore_groups(const lc_opts *o, const ll_config *cfg, rd_kafka_t *meta, json_t *doc, json_t *out)
{
    char err[768];
    for (int i = 0; i < LC_N_ROUTES; i++) {
        if (seen_service(i))
            continue;
        char group[300];
        group_name(cfg, i, group, sizeof group);
        rd_kafka_topic_partition_list_t *l = group_partitions(cfg, meta, i, err, sizeof err);
        if (!l)
            return lc_fail(o, LC_KAFKA, "BROKER_UNAVAILABLE", NULL, "%s", err);
        int n_rec = 0, n_earliest = 0;
        int rc = plan_restore(meta, l, group_offsets(doc, group), &n_rec, &n_earliest, err, sizeof err);
        if (rc == 0)
            rc = commit_group(cfg, group, l, err, sizeof err);
        rd_kafka_topic_partition_list_destroy(l);
        if (rc == -2)
            return lc_fail(o, LC_REFUSED, "OFFSETS_REFUSED", NULL, "%s", err);
        if (rc != 0)
            return lc_fail(o, LC_KAFKA, "BROKER_UNAVAILABLE", NULL, "%s", err);
        json_array_append_new(
            out, json_pack("{s:s,s:i,s:i}", "group", group, "recorded", n_rec, "earliest", n_earliest));
        if (!o->json)
            printf("%-40s %6d recorded %6d earliest\n", group, n_rec, n_earliest);
    }
    return LC_OK;
}

/* Reads and checks the offsets file: NULL after reporting (rc set). */
static json_t *load_file(const lc_opts *o, const char *path, int *rc)
{
    FILE *f = fopen(path, "rb");
    long size = -1;
    if (f && fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    if (f)
        fclose(f);
    if (size < 0) {
        *rc = lc_fail(o, LC_USAGE, "FILE_UNREADABLE", NULL, "%s: cannot be read", path);
        return NULL;
    }
    if (size > OFF_FILE_MAX) {
        *rc = lc_fail(o, LC_REFUSED, "OFFSETS_REFUSED", NULL,
                      "%s: %ld bytes, more than an offsets file (%ld)", path, size, OFF_FILE_MAX);
        return NULL;
    }
    json_error_t je;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!doc || json_integer_value(json_object_get(doc, "version")) != 1 ||
        !json_is_array(json_object_get(doc, "groups"))) {
        *rc =
            lc_fail(o, LC_REFUSED, "OFFSETS_REFUSED", NULL, "%s: not a loadctl offsets file (version 1)%s%s",
                    path, doc ? "" : ": ", doc ? "" : je.text);
        json_decref(doc);
        return NULL;
    }
    return doc;
}

int lc_offsets(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *config = NULL, *out_path = NULL, *from = NULL, *pos[1];
    int npos;
    lc_optspec specs[] = {
        {"config", &config, NULL}, {"out", &out_path, NULL}, {"from", &from, NULL}, {NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 1, 1, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    bool save = strcmp(pos[0], "save") == 0;
    if ((!save && strcmp(pos[0], "restore") != 0) || (save && (!out_path || from)) ||
        (!save && (!from || out_path)))
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "save --out FILE, or restore --from FILE (--help)");
    char err[768];
    ll_config_key *keys = config_keys();
    ll_config *cfg = keys ? ll_config_load(config, keys, LL_ALL_TOPICS, err, sizeof err) : NULL;
    if (!cfg) {
        rc = lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL, "%s", keys ? err : "out of memory");
        free(keys);
        return rc;
    }
    rd_kafka_t *meta = lc_reader_new(cfg, "loadctl.offsets", err, sizeof err);
    json_t *groups = json_array();
    if (!meta) {
        rc = lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL, "%s", err);
    } else if (save) {
        if (save_groups(cfg, meta, groups, err, sizeof err) != 0) {
            rc = lc_fail(o, LC_KAFKA, "BROKER_UNAVAILABLE", NULL, "%s", err);
        } else {
            json_t *doc = json_pack("{s:i,s:O}", "version", 1, "groups", groups);
            rc = json_dump_file(doc, out_path, JSON_INDENT(1)) == 0
                     ? LC_OK
                     : lc_fail(o, LC_USAGE, "FILE_UNWRITABLE", NULL, "%s: cannot be written", out_path);
            json_decref(doc);
        }
        if (rc == LC_OK && o->json)
            lc_print_json(json_pack("{s:b,s:s,s:O}", "ok", 1, "file", out_path, "groups", groups));
        else if (rc == LC_OK)
            printf("offsets of %zu groups recorded in %s\n", json_array_size(groups), out_path);
    } else {
        json_t *doc = load_file(o, from, &rc);
        if (doc) {
            rc = restore_groups(o, cfg, meta, doc, groups);
            if (rc == LC_OK && o->json)
                lc_print_json(json_pack("{s:b,s:s,s:O}", "ok", 1, "file", from, "groups", groups));
            json_decref(doc);
        }
    }
    json_decref(groups);
    lc_reader_close(meta);
    ll_config_free(cfg);
    free(keys);
    return rc;
}
