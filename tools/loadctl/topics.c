/*
 * topics.c - `loadctl topics create`: every topic of config/topics.conf in one CreateTopics
 * request (one process, one round trip), the existing ones left as they are. docker-compose's
 * one-shot `kafka-topics` runs it on every `up` (docs/environment.md).
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreader.h"
#include "ll/kloop.h"
#include "ll/svc.h"
#include "ll/topics.h"
#include "loadctl.h"

#define USAGE                                                                                                \
    "usage: loadctl topics create --file TOPICS_CONF [--config FILE] [--replication-factor N]\n"             \
    "                             [--timeout DURATION]\n"                                                    \
    "Creates every topic of TOPICS_CONF (config/topics.conf: <logical name> <partitions>\n"                  \
    "[<config>=<value> ...]) under its broker name (topic.prefix + name, or topic.<name>.name) in\n"         \
    "one request; a topic that exists is left unchanged. The broker comes from --config FILE or\n"           \
    "LOADLEDGER_KAFKA__BOOTSTRAP__SERVERS, the prefix from topic.prefix / LOADLEDGER_TOPIC__PREFIX.\n"       \
    "--replication-factor (1) is every topic's; --timeout (PT60S) bounds the wait for the broker.\n"         \
    "Exit codes: 0 every topic exists now, 1 usage or a bad line, 4 the broker refused or did not\n"         \
    "answer in time.\n"

/* Bounds on what a topics file may ask for (all checked before any request). */
#define MAX_TOPICS  64
#define MAX_CONFIGS 16
#define MAX_LINE    1024

/* One line of the topics file: its broker name, partition count and topic configs. */
typedef struct {
    char name[256];
    long partitions;
    int n_configs;
    char configs[MAX_CONFIGS][2][128];
} topic_line;

static bool known_topic(const char *logical)
{
    for (size_t i = 0; LL_ALL_TOPICS[i]; i++)
        if (strcmp(LL_ALL_TOPICS[i], logical) == 0)
            return true;
    return false;
}

/* Parses one non-empty line (comment removed) into t. 0, or -1 with err. */
static int parse_line(const ll_config *cfg, char *line, topic_line *t, char *err, size_t errlen)
{
    char *save = NULL, *logical = strtok_r(line, " \t\r\n", &save), *parts = strtok_r(NULL, " \t\r\n", &save);
    if (!logical)
        return 1; /* blank */
    if (!known_topic(logical))
        return snprintf(err, errlen, "unknown topic '%s'", logical), -1;
    if (!parts || lc_parse_int(parts, 1, 1000, &t->partitions) != 0)
        return snprintf(err, errlen, "%s: the partition count must be 1..1000", logical), -1;
    ll_topic_name(cfg, logical, t->name, sizeof t->name);
    t->n_configs = 0;
    for (char *kv; (kv = strtok_r(NULL, " \t\r\n", &save));) {
        char *eq = strchr(kv, '=');
        if (!eq || eq == kv || !eq[1])
            return snprintf(err, errlen, "%s: '%s' is not <config>=<value>", logical, kv), -1;
        if (t->n_configs == MAX_CONFIGS)
            return snprintf(err, errlen, "%s: more than %d topic configs", logical, MAX_CONFIGS), -1;
        *eq = '\0';
        if (strlen(kv) >= sizeof t->configs[0][0] || strlen(eq + 1) >= sizeof t->configs[0][1])
            return snprintf(err, errlen, "%s: topic config '%s' too long", logical, kv), -1;
        strcpy(t->configs[t->n_configs][0], kv);
        strcpy(t->configs[t->n_configs][1], eq + 1);
        t->n_configs++;
    }
    return 0;
}

/* Reads the topics file into t[] (at most MAX_TOPICS). Count, or -1 with err naming the line. */
static int read_file(const ll_config *cfg, const char *path, topic_line *t, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return snprintf(err, errlen, "%s: cannot open", path), -1;
    char line[MAX_LINE + 2], e[256];
    int n = 0, lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(err, errlen, "%s:%d: line longer than %d bytes", path, lineno, MAX_LINE);
            rc = -1;
            break;
        }
        line[strcspn(line, "#")] = '\0';
        if (n == MAX_TOPICS) {
            char *p = line + strspn(line, " \t\r\n");
            if (*p) {
                snprintf(err, errlen, "%s:%d: more than %d topics", path, lineno, MAX_TOPICS);
                rc = -1;
            }
            continue;
        }
        int r = parse_line(cfg, line, &t[n], e, sizeof e);
        if (r < 0) {
            snprintf(err, errlen, "%s:%d: %s", path, lineno, e);
            rc = -1;
        } else if (r == 0)
            n++;
    }
    fclose(f);
    return rc < 0 ? -1 : n;
}

/* Builds the request's topics; NULL with err on a setting librdkafka refuses. */
static rd_kafka_NewTopic_t **new_topics(const topic_line *t, int n, int replication, char *err, size_t errlen)
{
    rd_kafka_NewTopic_t **nt = calloc((size_t)n, sizeof *nt);
    if (!nt)
        return snprintf(err, errlen, "out of memory"), NULL;
    for (int i = 0; i < n; i++) {
        char e[256] = "";
        nt[i] = rd_kafka_NewTopic_new(t[i].name, (int)t[i].partitions, replication, e, sizeof e);
        for (int k = 0; nt[i] && k < t[i].n_configs; k++)
            if (rd_kafka_NewTopic_set_config(nt[i], t[i].configs[k][0], t[i].configs[k][1])) {
                snprintf(e, sizeof e, "config %s refused", t[i].configs[k][0]);
                rd_kafka_NewTopic_destroy(nt[i]);
                nt[i] = NULL;
            }
        if (!nt[i]) {
            snprintf(err, errlen, "%s: %s", t[i].name, e);
            rd_kafka_NewTopic_destroy_array(nt, (size_t)i);
            free(nt);
            return NULL;
        }
    }
    return nt;
}

/* Sends one CreateTopics request and reports each topic. LC_OK, or LC_KAFKA after reporting. */
static int create(const lc_opts *o, rd_kafka_t *rk, rd_kafka_NewTopic_t **nt, int n, int64_t timeout_ms)
{
    char e[256];
    rd_kafka_AdminOptions_t *opt = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(opt, (int)timeout_ms, e, sizeof e);
    rd_kafka_AdminOptions_set_operation_timeout(opt, (int)timeout_ms, e, sizeof e);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, nt, (size_t)n, opt, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, (int)timeout_ms + 5000);
    int rc = LC_OK;
    json_t *created = json_array(), *existing = json_array();
    if (!ev)
        rc = lc_fail(o, LC_KAFKA, "BROKER_UNAVAILABLE", NULL, "no answer from the broker in time");
    else if (rd_kafka_event_error(ev))
        rc = lc_fail(o, LC_KAFKA, "BROKER_UNAVAILABLE", NULL, "%s", rd_kafka_event_error_string(ev));
    else {
        size_t cnt = 0;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);
        for (size_t i = 0; i < cnt && rc == LC_OK; i++) {
            rd_kafka_resp_err_t te = rd_kafka_topic_result_error(res[i]);
            const char *name = rd_kafka_topic_result_name(res[i]);
            if (te == RD_KAFKA_RESP_ERR_NO_ERROR || te == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
                json_array_append_new(te ? existing : created, lc_json_str(name));
                if (!o->json)
                    printf("%-8s %s\n", te ? "exists" : "created", name);
            } else {
                const char *msg = rd_kafka_topic_result_error_string(res[i]);
                rc = lc_fail(o, LC_KAFKA, "TOPIC_CREATE_FAILED", NULL, "%s: %s", name,
                             msg ? msg : rd_kafka_err2str(te));
            }
        }
    }
    if (rc == LC_OK && o->json)
        lc_print_json(json_pack("{s:b, s:o, s:o}", "ok", 1, "created", created, "existing", existing));
    else {
        json_decref(created);
        json_decref(existing);
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_queue_destroy(q);
    rd_kafka_AdminOptions_destroy(opt);
    return rc;
}

int lc_topics(const lc_opts *o_in, int argc, char **argv)
{
    lc_opts ob = *o_in, *o = &ob;
    const char *config = NULL, *file = NULL, *repl = "1", *timeout = "PT60S", *pos[1];
    lc_optspec specs[] = {{"config", &config, NULL},
                          {"file", &file, NULL},
                          {"replication-factor", &repl, NULL},
                          {"timeout", &timeout, NULL},
                          {NULL, NULL, NULL}};
    int npos = 0, rc = lc_args(o, USAGE, argc, argv, specs, pos, 1, 1, &npos);
    if (rc != LC_CONTINUE)
        return rc;
    long replication;
    int64_t timeout_ms;
    if (strcmp(pos[0], "create") != 0 || !file)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "give: topics create --file TOPICS_CONF");
    if (lc_parse_int(repl, 1, 16, &replication) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--replication-factor must be 1..16");
    if (lc_parse_duration(timeout, &timeout_ms) != 0 || timeout_ms <= 0 || timeout_ms > 600000)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--timeout must be above 0 and at most PT10M");
    char err[512];
    ll_config_key *keys = ll_config_keys_merge(LL_LOOP_CONFIG_KEYS, NULL, NULL);
    for (size_t i = 0; keys && keys[i].key; i++)
        keys[i].required = false;
    ll_config *cfg = keys ? ll_config_load(config, keys, LL_ALL_TOPICS, err, sizeof err) : NULL;
    topic_line *t = calloc(MAX_TOPICS, sizeof *t);
    rd_kafka_NewTopic_t **nt = NULL;
    rd_kafka_t *rk = NULL;
    int n = 0;
    if (!cfg || !t)
        rc = lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL, "%s", cfg ? "out of memory" : err);
    else if (!ll_config_get(cfg, "kafka.bootstrap.servers"))
        rc = lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL,
                     "no broker: give --config FILE or set LOADLEDGER_KAFKA__BOOTSTRAP__SERVERS");
    else if ((n = read_file(cfg, file, t, err, sizeof err)) < 0)
        rc = lc_fail(o, LC_USAGE, "TOPICS_FILE_INVALID", NULL, "%s", err);
    else if (n == 0)
        rc = lc_fail(o, LC_USAGE, "TOPICS_FILE_INVALID", NULL, "%s: no topic", file);
    else if (!(nt = new_topics(t, n, (int)replication, err, sizeof err)))
        rc = lc_fail(o, LC_USAGE, "TOPICS_FILE_INVALID", NULL, "%s", err);
    else if (!(rk = lc_reader_new(cfg, "loadctl-topics", err, sizeof err)))
        rc = lc_fail(o, LC_USAGE, "CONFIG_INVALID", NULL, "%s", err);
    else
        rc = create(o, rk, nt, n, timeout_ms);
    lc_reader_close(rk);
    if (nt) {
        rd_kafka_NewTopic_destroy_array(nt, (size_t)n);
        free(nt);
    }
    free(t);
    ll_config_free(cfg);
    free(keys);
    return rc;
}
