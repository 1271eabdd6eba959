/*
 * deadletters.c - `loadctl dead-letters [list]` and `loadctl dead-letters show COORD`
 * (docs/contract.md K§4): the records of the dead-letter topic read read_committed, with the ll.*
 * headers the services write (common/src/loop/txn.c). Read-only: nothing is committed.
 *
 * The list is bounded before it starts (--max-records records read, --timeout wall time); a list
 * a bound stopped says so ("incomplete"). COORD is TOPIC:PARTITION:OFFSET: on the dead-letter
 * topic the dead letter's own coordinates (one fetch), on any other topic the source message's
 * coordinates (a bounded scan for the dead letters naming it; the newest is shown).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deadletters.h"
#include "ll/redrive.h"
#include "ll/rules.h"

static const char USAGE[] =
    "usage: loadctl dead-letters [list] [--config FILE] [--code CODE] [--run RUN] [--service S]\n"
    "                            [--source-topic T] [--max-records N] [--timeout DURATION] [--json]\n"
    "       loadctl dead-letters show TOPIC:PARTITION:OFFSET [--config FILE] [--max-records N]\n"
    "                            [--timeout DURATION] [--json]\n\n"
    "Lists the dead letters (read_committed, oldest first per partition): their own coordinates,\n"
    "the source topic/partition/offset, the service, the code, the reason and the time. --code,\n"
    "--run (the value's runId, else the key), --service and --source-topic filter the list.\n"
    "`show` prints one with its key, headers and its value decoded with the source topic's schema\n"
    "and framing (or why it does not decode). Its coordinates are the dead letter's own when TOPIC\n"
    "is the dead-letter topic, else the source message's (the newest dead letter of it is shown).\n"
    "--config is a file of key = value lines like a service's (kafka.*, topic.prefix,\n"
    "topic.<logical>.name|framing|schema_id, schema.dir, schema.ids_file; LOADLEDGER_<KEY> overrides).\n"
    "--max-records (default 100000) and --timeout (default PT30S) bound the reading; a list they\n"
    "stopped is marked incomplete.\n"
    "Exit codes: 0 ok, 1 usage or configuration, 2 DEAD_LETTER_NOT_FOUND, 3 database, 4 broker "
    "unavailable.\n";

/* What the list keeps and how it filters. */
typedef struct list_state {
    dl_ctx *c;
    const char *code, *run, *service, *src_topic;
    json_t *rows; /* array of dl_record_json objects with "runId" */
} list_state;

static int list_one(const dl_record *d, void *arg)
{
    list_state *s = arg;
    if ((s->code && strcmp(s->code, d->code) != 0) || (s->service && strcmp(s->service, d->service) != 0) ||
        (s->src_topic && strcmp(s->src_topic, d->src_topic) != 0))
        return 0;
    char run[37];
    dl_run_of(s->c, d, run);
    if (s->run && strcmp(s->run, run) != 0)
        return 0;
    json_t *j = dl_record_json(d);
    json_object_set_new(j, "runId", run[0] ? json_string(run) : json_null());
    json_array_append_new(s->rows, j);
    return 0;
}

static const char *jstr(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? v : "-";
}

static void print_list(const json_t *rows, bool bounded)
{
    printf("%-40s %-44s %-11s %-22s %-20s %s\n", "DEAD LETTER", "SOURCE", "SERVICE", "CODE", "DEAD AT",
           "REASON");
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        char own[300], src[300];
        snprintf(own, sizeof own, "%s:%" JSON_INTEGER_FORMAT ":%" JSON_INTEGER_FORMAT, jstr(r, "topic"),
                 json_integer_value(json_object_get(r, "partition")),
                 json_integer_value(json_object_get(r, "offset")));
        snprintf(src, sizeof src, "%s:%" JSON_INTEGER_FORMAT ":%" JSON_INTEGER_FORMAT, jstr(r, "sourceTopic"),
                 json_integer_value(json_object_get(r, "sourcePartition")),
                 json_integer_value(json_object_get(r, "sourceOffset")));
        printf("%-40s %-44s %-11s %-22s %-20s %.120s\n", own, src, jstr(r, "service"), jstr(r, "code"),
               jstr(r, "deadAt"), jstr(r, "reason"));
    }
    printf("%zu dead letter(s)%s\n", json_array_size(rows),
           bounded ? " [incomplete: stopped by --max-records or --timeout]" : "");
}

static int do_list(const lc_opts *o, dl_ctx *c, const dl_bounds *b, list_state *s)
{
    char err[512] = "";
    bool bounded = false;
    s->c = c;
    s->rows = json_array();
    if (dl_scan(c, b, list_one, s, &bounded, err, sizeof err) != 0) {
        json_decref(s->rows);
        return lc_fail(o, LC_KAFKA, "BROKER_UNAVAILABLE", NULL, "%s", err);
    }
    if (o->json)
        lc_print_json(json_pack("{s:b,s:s,s:I,s:b,s:o}", "ok", 1, "topic", c->dlq, "count",
                                (json_int_t)json_array_size(s->rows), "incomplete", bounded, "deadLetters",
                                s->rows));
    else {
        print_list(s->rows, bounded);
        json_decref(s->rows);
    }
    return LC_OK;
}

/* The newest dead letter of a source message, found by a bounded scan. */
typedef struct by_source {
    const char *topic;
    int32_t partition;
    int64_t offset;
    dl_record found; /* the newest so far (dead_at, then own offset) */
    bool have;
    long count;
} by_source;

static int match_source(const dl_record *d, void *arg)
{
    by_source *s = arg;
    if (strcmp(d->src_topic, s->topic) != 0 || d->src_partition != s->partition || d->src_offset != s->offset)
        return 0;
    s->count++;
    if (s->have && strcmp(d->dead_at, s->found.dead_at) < 0)
        return 0;
    dl_record_clear(&s->found);
    dl_record_copy(&s->found, d); /* d is released after the callback */
    s->have = true;
    return 0;
}

int dl_find(const lc_opts *o, dl_ctx *c, const dl_bounds *b, const char *coord, dl_record *d, bool *own,
            long *count)
{
    char topic[256], err[512] = "";
    int32_t partition;
    int64_t offset;
    *own = false;
    *count = 0;
    if (ll_coord_parse(coord, topic, sizeof topic, &partition, &offset) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "'%s' is not TOPIC:PARTITION:OFFSET", coord);
    *own = strcmp(topic, c->dlq) == 0;
    *count = 1;
    if (*own) {
        int f = dl_fetch(c, partition, offset, d, err, sizeof err);
        if (f < 0)
            return lc_fail(o, LC_KAFKA, "BROKER_UNAVAILABLE", NULL, "%s", err);
        if (f == 0)
            return lc_fail(o, LC_REFUSED, "DEAD_LETTER_NOT_FOUND", json_pack("{s:s}", "coordinates", coord),
                           "no committed record at %s", coord);
        return LC_OK;
    }
    by_source s = {.topic = topic, .partition = partition, .offset = offset};
    bool bounded = false;
    if (dl_scan(c, b, match_source, &s, &bounded, err, sizeof err) != 0) {
        dl_record_clear(&s.found);
        return lc_fail(o, LC_KAFKA, "BROKER_UNAVAILABLE", NULL, "%s", err);
    }
    if (!s.have)
        return lc_fail(o, LC_REFUSED, "DEAD_LETTER_NOT_FOUND",
                       json_pack("{s:s,s:b}", "coordinates", coord, "incomplete", bounded),
                       "no dead letter of the source message %s in %s%s", coord, c->dlq,
                       bounded ? " (the search was stopped by --max-records or --timeout)" : "");
    *d = s.found;
    *count = s.count;
    return LC_OK;
}

/* A string of bytes as JSON: the text when it is UTF-8, else null. */
static json_t *bytes_json(const void *p, size_t n)
{
    if (!p)
        return json_null();
    json_t *j = json_stringn((const char *)p, n);
    return j ? j : json_null();
}

static json_t *headers_json(const rd_kafka_headers_t *h)
{
    json_t *j = json_object();
    const char *name;
    const void *val;
    size_t vlen;
    for (size_t i = 0; h && rd_kafka_header_get_all(h, i, &name, &val, &vlen) == RD_KAFKA_RESP_ERR_NO_ERROR;
         i++) {
        json_t *v = bytes_json(val, vlen);
        json_object_set_new(j, name, v);
    }
    return j;
}

static int do_show(const lc_opts *o, dl_ctx *c, const dl_bounds *b, const char *coord)
{
    dl_record d;
    bool own;
    long count;
    memset(&d, 0, sizeof d);
    int rc = dl_find(o, c, b, coord, &d, &own, &count);
    if (rc != LC_OK)
        return rc;
    json_t *j = dl_record_json(&d);
    char run[37], err[512] = "";
    dl_run_of(c, &d, run);
    json_object_set_new(j, "runId", run[0] ? json_string(run) : json_null());
    json_object_set_new(j, "coordinates", json_string(own ? "dead-letter" : "source"));
    json_object_set_new(j, "deadLettersOfSource", json_integer(count));
    json_object_set_new(j, "key", bytes_json(d.key, d.key_len));
    json_object_set_new(j, "headers", headers_json(d.headers));
    json_object_set_new(j, "valueBytes", json_integer((json_int_t)d.value_len));
    const dl_source *s = d.src_topic[0] ? dl_source_get(c, d.src_topic, err, sizeof err) : NULL;
    json_t *v = NULL;
    if (!d.value)
        snprintf(err, sizeof err, "%s", d.value_omitted ? "the value was omitted (too large)" : "no value");
    else if (s)
        v = dl_source_decode(c, s, d.value, d.value_len, err, sizeof err);
    else if (!err[0])
        snprintf(err, sizeof err, "no ll.source.topic header");
    json_object_set_new(j, "decoded", json_boolean(v != NULL));
    json_object_set_new(j, "value", v ? v : json_null());
    json_object_set_new(j, "decodeError", v ? json_null() : lc_json_str(err));
    dl_record_clear(&d);
    if (o->json) {
        json_object_set_new(j, "ok", json_true());
        lc_print_json(j);
        return LC_OK;
    }
    printf("dead letter  %s:%" JSON_INTEGER_FORMAT ":%" JSON_INTEGER_FORMAT
           " (found by its %s coordinates)\n",
           jstr(j, "topic"), json_integer_value(json_object_get(j, "partition")),
           json_integer_value(json_object_get(j, "offset")), own ? "own" : "source message's");
    printf("source       %s:%" JSON_INTEGER_FORMAT ":%" JSON_INTEGER_FORMAT " (%ld dead letter(s) of it)\n",
           jstr(j, "sourceTopic"), json_integer_value(json_object_get(j, "sourcePartition")),
           json_integer_value(json_object_get(j, "sourceOffset")), count);
    printf("service      %s\ncode         %s\nreason       %s\ndead at      %s\nrun          %s\nkey         "
           " %s\n",
           jstr(j, "service"), jstr(j, "code"), jstr(j, "reason"), jstr(j, "deadAt"), jstr(j, "runId"),
           jstr(j, "key"));
    printf("headers\n");
    const char *k;
    json_t *hv;
    json_object_foreach(json_object_get(j, "headers"), k, hv)
        printf("  %-22s %s\n", k, json_string_value(hv) ? json_string_value(hv) : "(binary)");
    if (v) {
        char *txt = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS);
        printf("value (%" JSON_INTEGER_FORMAT " bytes, decoded)\n%s\n",
               json_integer_value(json_object_get(j, "valueBytes")), txt ? txt : "");
        free(txt);
    } else {
        printf("value (%" JSON_INTEGER_FORMAT " bytes) does not decode: %s\n",
               json_integer_value(json_object_get(j, "valueBytes")), jstr(j, "decodeError"));
    }
    json_decref(j);
    return LC_OK;
}

int lc_dead_letters(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *config = NULL, *max_records = "100000", *timeout = "PT30S", *pos[2];
    list_state s = {0};
    int npos;
    lc_optspec specs[] = {{"config", &config, NULL},
                          {"max-records", &max_records, NULL},
                          {"timeout", &timeout, NULL},
                          {"code", &s.code, NULL},
                          {"run", &s.run, NULL},
                          {"service", &s.service, NULL},
                          {"source-topic", &s.src_topic, NULL},
                          {NULL, NULL, NULL}};
    int rc = lc_args(o, USAGE, argc, argv, specs, pos, 0, 2, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    bool show = npos >= 1 && strcmp(pos[0], "show") == 0;
    if (npos >= 1 && !show && strcmp(pos[0], "list") != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "unknown subcommand '%s' (list or show)", pos[0]);
    if (show != (npos == 2))
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "%s",
                       show ? "show needs TOPIC:PARTITION:OFFSET" : "list takes no argument");
    char run[37];
    if (s.run) {
        if (ll_uuid_canonical(s.run, run) != 0)
            return lc_fail(o, LC_USAGE, "USAGE", NULL, "--run must be a run id (UUID)");
        s.run = run;
    }
    dl_bounds b;
    dl_ctx c;
    if ((rc = dl_parse_bounds(o, max_records, timeout, &b)) != LC_OK ||
        (rc = dl_open(o, config, &c)) != LC_OK)
        return rc;
    rc = show ? do_show(o, &c, &b, pos[1]) : do_list(o, &c, &b, &s);
    dl_close(&c);
    return rc;
}
