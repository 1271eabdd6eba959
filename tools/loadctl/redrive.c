/*
 * redrive.c - `loadctl redrive COORD... [--value-file FILE] [--force]` (docs/contract.md K§4):
 * republishes chosen dead letters to their source topic and partition, in one Kafka transaction,
 * each with the header ll.redrive.of = "<dead-letter topic>/<partition>/<offset>" that links the
 * new input to its dead letter. The service then treats it as a new input offset: applied once by
 * the ledger's compare-and-set (a replay of it is a REPLAY), answered once.
 *
 *   COORD not TOPIC:PARTITION:OFFSET, --value-file with more than one COORD     -> exit 1 USAGE
 *   no such dead letter                                     -> exit 2 DEAD_LETTER_NOT_FOUND
 *   value omitted from the dead letter and no --value-file  -> exit 2 VALUE_OMITTED
 *   the corrected JSON does not fit the source topic's schema -> exit 2 VALUE_INVALID
 *   a record of the source topic already carries the link   -> exit 2 ALREADY_REDRIVEN (--force)
 *   that search stopped by --max-records / --timeout        -> exit 2 REDRIVE_CHECK_INCOMPLETE (--force)
 *   the transaction fails                                   -> exit 4 BROKER_UNAVAILABLE (nothing visible)
 *
 * The key and the non-ll.* headers are the original's (as the dead letter kept them); the value is
 * the dead letter's unchanged, or the corrected file's JSON encoded with the source topic's schema
 * and framing as the services' codec does (common/include/ll/codec.h). ll.redrive.at and
 * ll.redrive.by (who, docs/contract.md K§7) record when and by whom. The publishing is
 * redrive_publish.c's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ll/redrive.h"
#include "redrive_publish.h"

static const char USAGE[] =
    "usage: loadctl redrive COORD... [--value-file FILE] [--force] [--reason TEXT] [--config FILE]\n"
    "                       [--max-records N] [--timeout DURATION] [--json]\n\n"
    "Republishes dead letters to their source topic and partition in one Kafka transaction, each\n"
    "with the header ll.redrive.of = <dead-letter topic>/<partition>/<offset>. COORD is as for\n"
    "`loadctl dead-letters show`: the dead letter's own TOPIC:PARTITION:OFFSET, or its source\n"
    "message's. The value is the dead letter's unchanged, or with --value-file (one COORD only) the\n"
    "corrected value as a JSON object, encoded with the source topic's schema and framing.\n"
    "A dead letter already redriven (a record of the source topic carries its link; the search is\n"
    "bounded by --max-records, default 1000000, and --timeout, default PT60S) is refused unless\n"
    "--force. --reason goes into the header ll.redrive.reason. Watch the service's reply to the new offset; "
    "`loadctl verify --topics` still holds.\n"
    "Exit codes: 0 redriven, 1 usage or configuration, 2 DEAD_LETTER_NOT_FOUND, VALUE_OMITTED,\n"
    "VALUE_INVALID, ALREADY_REDRIVEN or REDRIVE_CHECK_INCOMPLETE, 4 broker unavailable.\n";

/* At most this many dead letters per command, and this large a corrected value file (bytes). */
#define MAX_COORDS     100
#define MAX_VALUE_FILE (1024 * 1024)

/* Collects the ll.redrive.of links present on a source topic. */
static int collect_links(const dl_record *d, void *arg)
{
    const void *val;
    size_t vlen;
    if (d->headers &&
        rd_kafka_header_get_last(d->headers, LL_REDRIVE_HEADER, &val, &vlen) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        val) {
        char *k = strndup(val, vlen);
        char at[300];
        snprintf(at, sizeof at, "%s:%" PRId32 ":%" PRId64, d->topic, d->partition, d->offset);
        if (k)
            json_object_set_new((json_t *)arg, k, json_string(at));
        free(k);
    }
    return 0;
}

/* Reads FILE (at most MAX_VALUE_FILE bytes) as one JSON value; NULL + err. */
static json_t *read_value_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %s", path);
        return NULL;
    }
    char *buf = malloc(MAX_VALUE_FILE + 1);
    size_t n = buf ? fread(buf, 1, MAX_VALUE_FILE + 1, f) : 0;
    fclose(f);
    if (!buf || n > MAX_VALUE_FILE) {
        free(buf);
        snprintf(err, errlen, "%s is over %d bytes", path, MAX_VALUE_FILE);
        return NULL;
    }
    json_error_t je;
    json_t *v = json_loadb(buf, n, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!v)
        snprintf(err, errlen, "%s: line %d: %s", path, je.line, je.text);
    else if (!json_is_object(v)) {
        snprintf(err, errlen, "%s: not a JSON object", path);
        json_decref(v);
        v = NULL;
    }
    return v;
}

/* The value of it: the dead letter's, or the file's encoded. LC_OK or the reported exit code. */
static int prepare(const lc_opts *o, dl_ctx *c, item *it, const char *value_file)
{
    char err[512] = "";
    if (!it->d.src_topic[0] || it->d.src_partition < 0)
        return lc_fail(o, LC_REFUSED, "DEAD_LETTER_NOT_FOUND", NULL, "%s has no ll.source.* headers",
                       it->coord);
    ll_redrive_link(it->d.topic, it->d.partition, it->d.offset, it->link, sizeof it->link);
    if (!value_file) {
        if (it->d.value_omitted)
            return lc_fail(o, LC_REFUSED, "VALUE_OMITTED", json_pack("{s:s}", "deadLetter", it->link),
                           "the dead letter %s kept no value: give the corrected value with --value-file",
                           it->link);
        if (it->d.value) { /* else the original value was null: so is the redriven one */
            it->value = malloc(it->d.value_len ? it->d.value_len : 1);
            if (!it->value)
                abort();
            memcpy(it->value, it->d.value, it->d.value_len);
            it->value_len = it->d.value_len;
        }
        return LC_OK;
    }
    const dl_source *s = dl_source_get(c, it->d.src_topic, err, sizeof err);
    if (!s)
        return lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL, "%s", err);
    if (!s->schema)
        return lc_fail(o, LC_REFUSED, "VALUE_INVALID", NULL, "%s is none of the services' inputs: no schema",
                       it->d.src_topic);
    json_t *v = read_value_file(value_file, err, sizeof err);
    if (!v)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--value-file: %s", err);
    if (s->framing == LL_FRAMING_BLOCK) {
        json_decref(v);
        return lc_fail(
            o, LC_REFUSED, "VALUE_INVALID", NULL,
            "%s has the block framing, which only NiFi writes: send the corrected value from the flow",
            it->d.src_topic);
    }
    ll_encode_opts e = {.framing = s->framing, .schema = s->schema, .schema_id = s->schema_id};
    if (e.framing == LL_FRAMING_CONFLUENT && s->schema_id < 0) {
        json_decref(v);
        return lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL,
                       "topic.%s.schema_id is needed for the confluent framing", s->logical);
    }
    int rc = ll_encode(&e, v, &it->value, &it->value_len, err, sizeof err);
    json_decref(v);
    if (rc != 0)
        return lc_fail(o, LC_REFUSED, "VALUE_INVALID", json_pack("{s:s}", "topic", it->d.src_topic),
                       "the corrected value does not fit %s: %s", ll_schema_fullname(s->schema), err);
    it->from_file = true;
    return LC_OK;
}

/* Refuses items named twice, already redriven (their link on the source topic) or whose search
 * a bound stopped (ll_redrive_judge; not called with --force). */
static int check_links(const lc_opts *o, dl_ctx *c, const dl_bounds *b, item *items, int n)
{
    char err[512] = "";
    for (int i = 0; i < n; i++)
        for (int k = 0; k < i; k++)
            if (strcmp(items[i].link, items[k].link) == 0)
                return lc_fail(o, LC_USAGE, "USAGE", NULL, "%s named twice", items[i].link);
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int k = 0; k < i; k++)
            seen |= strcmp(items[i].d.src_topic, items[k].d.src_topic) == 0;
        if (seen)
            continue;
        json_t *links = json_object();
        bool bounded = false;
        if (dl_scan_topic(c, items[i].d.src_topic, b, collect_links, links, &bounded, err, sizeof err) != 0) {
            json_decref(links);
            return lc_fail(o, LC_KAFKA, "BROKER_UNAVAILABLE", NULL, "%s", err);
        }
        int rc = LC_OK;
        for (int k = i; k < n && rc == LC_OK; k++) {
            if (strcmp(items[k].d.src_topic, items[i].d.src_topic) != 0)
                continue;
            const char *at = json_string_value(json_object_get(links, items[k].link));
            ll_redrive_verdict v = ll_redrive_judge(at != NULL, !bounded, false);
            if (v == LL_REDRIVE_ALREADY)
                rc = lc_fail(
                    o, LC_REFUSED, "ALREADY_REDRIVEN",
                    json_pack("{s:s,s:s}", "deadLetter", items[k].link, "redriven", at),
                    "the dead letter %s was already redriven as %s (give --force to redrive it again)",
                    items[k].link, at);
            else if (v == LL_REDRIVE_UNCHECKED)
                rc =
                    lc_fail(o, LC_REFUSED, "REDRIVE_CHECK_INCOMPLETE",
                            json_pack("{s:s}", "topic", items[i].d.src_topic),
                            "the search of %s for earlier redrives was stopped by --max-records or --timeout:"
                            " raise them, or give --force",
                            items[i].d.src_topic);
        }
        json_decref(links);
        if (rc != LC_OK)
            return rc;
    }
    return LC_OK;
}

static json_t *item_json(const item *it)
{
    char src[300], redriven[300];
    snprintf(src, sizeof src, "%s:%" PRId32 ":%" PRId64, it->d.src_topic, it->d.src_partition,
             it->d.src_offset);
    snprintf(redriven, sizeof redriven, "%s:%" PRId32 ":%" PRId64, it->d.src_topic, it->d.src_partition,
             it->new_offset);
    json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:i,s:s}", "deadLetter", it->link, "source", src, "topic",
                          it->d.src_topic, "valueFrom", it->from_file ? "file" : "dead letter", "partition",
                          (int)it->d.src_partition, "code", it->d.code);
    json_object_set_new(j, "offset", it->new_offset >= 0 ? json_integer(it->new_offset) : json_null());
    json_object_set_new(j, "redriven", it->new_offset >= 0 ? json_string(redriven) : json_null());
    return j;
}

int lc_redrive(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *config = NULL, *max_records = "1000000", *timeout = "PT60S", *value_file = NULL,
               *reason = NULL, *pos[MAX_COORDS];
    bool force = false;
    int npos;
    lc_optspec specs[] = {{"config", &config, NULL},   {"max-records", &max_records, NULL},
                          {"timeout", &timeout, NULL}, {"value-file", &value_file, NULL},
                          {"force", NULL, &force},     {"reason", &reason, NULL},
                          {NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 1, MAX_COORDS, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    if (reason && (strlen(reason) > 1000 || !*reason))
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--reason must be 1..1000 bytes");
    if (value_file && npos != 1)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--value-file takes exactly one COORD");
    dl_bounds b;
    dl_ctx c;
    if ((rc = dl_parse_bounds(o, max_records, timeout, &b)) != LC_OK ||
        (rc = dl_open(o, config, &c)) != LC_OK)
        return rc;
    item *items = calloc((size_t)npos, sizeof *items);
    if (!items)
        abort();
    int n = 0;
    for (; n < npos && rc == LC_OK; n++) {
        items[n].coord = pos[n];
        bool own;
        long count;
        rc = dl_find(o, &c, &b, pos[n], &items[n].d, &own, &count);
        if (rc == LC_OK)
            rc = prepare(o, &c, &items[n], value_file);
    }
    if (rc == LC_OK && !force)
        rc = check_links(o, &c, &b, items, n);
    char err[512] = "";
    if (rc == LC_OK && lc_redrive_publish(&c, items, n, reason, err, sizeof err) != 0)
        rc = lc_fail(o, LC_KAFKA, "BROKER_UNAVAILABLE", NULL, "%s", err);
    if (rc == LC_OK) {
        json_t *arr = json_array();
        for (int i = 0; i < n; i++)
            json_array_append_new(arr, item_json(&items[i]));
        if (o->json)
            lc_print_json(json_pack("{s:b,s:b,s:o}", "ok", 1, "forced", force, "redriven", arr));
        else {
            size_t i;
            json_t *r;
            json_array_foreach(arr, i, r)
            {
                printf("%s -> %s (value: %s)\n", json_string_value(json_object_get(r, "deadLetter")),
                       json_string_value(json_object_get(r, "redriven"))
                           ? json_string_value(json_object_get(r, "redriven"))
                           : "?",
                       json_string_value(json_object_get(r, "valueFrom")));
            }
            json_decref(arr);
        }
    }
    for (int i = 0; i < n; i++) {
        dl_record_clear(&items[i].d);
        free(items[i].value);
    }
    free(items);
    dl_close(&c);
    return rc;
}
