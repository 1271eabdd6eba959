/*
 * svc.c - start-up of a consuming service: arguments, configuration, logs, signals, loop.
 */
#include "ll/svc.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/instance.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/registry.h"
#include "ll/schema_gate.h"
#include "ll/topics.h"
#include "ll/version.h"

static ll_loop *volatile g_loop;
static volatile sig_atomic_t g_stopping; /* a stop signal came (also before the loop existed) */

static void on_signal(int sig)
{
    (void)sig;
    g_stopping = 1;
    ll_loop *l = g_loop;
    if (l)
        ll_loop_stop(l);
}

/* The instance lease was taken over by another process (the lease's renewal thread, instance.h):
 * the loop stops as on SIGTERM, and the process exits 2, as when its producer is fenced. */
static void on_lease_lost(void)
{
    on_signal(0);
}

/* The instance lease of this process's (group, service.instance_id), taken before the loop makes
 * its producer, whose transactional.id is made of the same pair (ll/instance.h): 0 with *lease
 * set (or NULL when a stop signal ended the wait), else the exit code, with the reason printed. */
static int take_lease(const ll_service *svc, const ll_config *cfg, ll_instance_lease **lease)
{
    char group[256], instance[256], err[1024];
    ll_loop_identity(cfg, svc->name, group, sizeof group, instance, sizeof instance);
    int rc = ll_instance_lease_take(svc->name, cfg, group, instance, &g_stopping, on_lease_lost, lease, err,
                                    sizeof err);
    if (rc != 0)
        fprintf(stderr, "ll-%s: %s\n", svc->name, err);
    return rc;
}

/* Number of keys of a {NULL}-terminated table (0 for NULL). */
static size_t keys_count(const ll_config_key *t)
{
    size_t n = 0;
    while (t && t[n].key)
        n++;
    return n;
}

ll_config_key *ll_config_keys_merge(const ll_config_key *a, const ll_config_key *b, const ll_config_key *c)
{
    const ll_config_key *tables[3] = {a, b, c};
    size_t total = keys_count(a) + keys_count(b) + keys_count(c), at = 0;
    ll_config_key *out = calloc(total + 1, sizeof *out);
    if (!out)
        return NULL;
    for (int i = 0; i < 3; i++) {
        size_t n = keys_count(tables[i]);
        if (n)
            memcpy(out + at, tables[i], n * sizeof *out);
        at += n;
    }
    return out;
}

void ll_service_write_example(FILE *out, const char *name, const ll_config_key *keys, const char *extra)
{
    fprintf(out,
            "# ll-%s configuration: every key, its default and its meaning (from ll-%s --config-keys).\n"
            "# Format: `key = value` per line, `#` starts a comment; a commented key keeps its default.\n"
            "# Environment LOADLEDGER_<KEY> (upper case, . written __) overrides the file.\n",
            name, name);
    ll_config_write_example(out, keys);
    if (extra)
        fprintf(out, "\n%s", extra);
}

void ll_service_schema_help(FILE *out)
{
    fprintf(out, "\nAvro schemas: key schema.dir, else $LL_SCHEMA_DIR, else %s if present, else %s.\n",
            LL_DEFAULT_DATADIR "/schemas/avro", LL_SOURCE_DIR "/schemas/avro");
}

/* The open-ended keys of a consuming service, as comment lines of its example file. */
static const char SVC_EXTRA_KEYS[] =
    "# librdkafka properties: kafka.<property> = value, passed as is (kafka.bootstrap.servers is\n"
    "# required)\n"
    "#kafka.bootstrap.servers =\n"
    "\n"
    "# per-topic overrides: topic.<logical>.name, topic.<logical>.framing (bare, confluent,\n"
    "# container, block), topic.<logical>.schema_id\n";

static void usage(const ll_service *svc, const ll_config_key *keys)
{
    printf("ll-%s - %s\n\nusage: ll-%s [--config FILE] [--config-keys] [--version]\n\n", svc->name,
           svc->summary, svc->name);
    printf("Configuration keys (file `key = value`, or environment LOADLEDGER_<KEY> with . as __):\n");
    ll_config_usage(stdout, keys);
    printf("  %-32s %s\n", "kafka.<property>", "passed to librdkafka (kafka.bootstrap.servers is required)");
    printf("  %-32s %s\n", "topic.<logical>.name|framing|schema_id", "per-topic overrides");
    printf("\n--config-keys prints every key as an example configuration file; --version the version.\n");
    ll_service_schema_help(stdout);
    printf("\nExit codes: 0 stopped, 1 configuration/start-up error, 2 fatal Kafka error, 3 schema registry\n"
           "unavailable at start, 4 the instance id is held by another process (service.instance_lease).\n");
}

void ll_malloc_settle(void)
{
#ifdef __GLIBC__
    if (!getenv("MALLOC_ARENA_MAX"))
        mallopt(M_ARENA_MAX, LL_MALLOC_ARENAS);
#endif
}

/* The start line (the conninfo without its password), logged before the schema check may wait. */
static void log_started(const char *name, const ll_config *cfg)
{
    char safe[512];
    ll_log_safe_conninfo(ll_config_get(cfg, "db.conninfo"), safe, sizeof safe);
    ll_log(LL_INFO, NULL, "service_started", "%s started (db %s)", name, safe);
}

/* SIGTERM and SIGINT stop the service: the schema gate's wait, then the loop. */
static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

int ll_service_main(int argc, char **argv, const ll_service *svc)
{
    ll_malloc_settle();
    const char *path = getenv("LOADLEDGER_CONFIG");
    ll_config_key *keys = ll_config_keys_merge(LL_LOOP_CONFIG_KEYS, LL_DB_TIMEOUT_KEYS, svc->keys);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(svc, keys);
            free(keys);
            return 0;
        } else if (strcmp(argv[i], "--config-keys") == 0) {
            ll_service_write_example(stdout, svc->name, keys, SVC_EXTRA_KEYS);
            free(keys);
            return 0;
        } else if (strcmp(argv[i], "--version") == 0) {
            char bin[80];
            snprintf(bin, sizeof bin, "ll-%s", svc->name);
            ll_version_print(stdout, bin);
            free(keys);
            return 0;
        } else {
            fprintf(stderr, "ll-%s: unknown argument '%s' (try --help)\n", svc->name, argv[i]);
            free(keys);
            return 1;
        }
    }
    /* LOADLEDGER_CONFIG is the file's path, not a key */
    unsetenv("LOADLEDGER_CONFIG");
    char err[1024];
    ll_config *cfg = ll_config_load(path, keys, LL_ALL_TOPICS, err, sizeof err);
    if (!cfg) {
        fprintf(stderr, "ll-%s: %s\n", svc->name, err);
        free(keys);
        return 1;
    }
    ll_level lvl = LL_INFO;
    int level =
        ll_config_enum("log.level", ll_config_get(cfg, "log.level"), LL_LOG_LEVEL_NAMES, err, sizeof err);
    if (level < 0) {
        fprintf(stderr, "ll-%s: %s\n", svc->name, err);
        ll_config_free(cfg);
        free(keys);
        return 1;
    }
    lvl = (ll_level)level;
    ll_log_init(svc->name, lvl);
    char bin[80];
    snprintf(bin, sizeof bin, "ll-%s", svc->name);
    ll_version_log(bin);
    int rc = 1;
    ll_instance_lease *lease = NULL;
    ll_loop *loop = NULL;
    if (!ll_config_get(cfg, "kafka.bootstrap.servers")) {
        fprintf(stderr, "ll-%s: missing required configuration key 'kafka.bootstrap.servers'\n", svc->name);
    } else if (svc->init && svc->init(svc->state, cfg, err, sizeof err) != 0) {
        fprintf(stderr, "ll-%s: %s\n", svc->name, err);
    } else if (ll_obs_start(svc->name, LL_OBS_CONSUMER, cfg, err, sizeof err) != 0) {
        fprintf(stderr, "ll-%s: %s\n", svc->name, err);
    } else if (log_started(svc->name, cfg), install_signals(),
               ll_schema_gate(svc->name, cfg, &g_stopping) != 0) {
        rc = 0; /* stopped while waiting for a schema it knows: nothing was applied */
    } else if ((rc = take_lease(svc, cfg, &lease)) != 0 || !lease) {
        /* held by another process (exit 4, named in instance_held), or stopped during the wait */
        rc = g_stopping && rc != LL_EXIT_INSTANCE_HELD ? 0 : rc;
    } else if (ll_registry_stop_flag(&g_stopping),
               !(loop =
                     ll_loop_new(svc->name, cfg, svc->inputs, svc->n_inputs, svc->state, err, sizeof err))) {
        fprintf(stderr, "ll-%s: %s\n", svc->name, err);
        /* stopped during a start-up wait: nothing was applied; a registry still down after its
         * wait: a code the unit restarts (not 1, a configuration error) */
        rc = g_stopping ? 0 : ll_registry_start_gave_up() ? LL_EXIT_REGISTRY_UNAVAILABLE : 1;
    } else {
        g_loop = loop;
        if (g_stopping)
            ll_loop_stop(loop);
        rc = ll_loop_run(loop);
        if (rc == 0 && ll_instance_lease_lost(lease))
            rc = 2; /* another process took the instance over: as a fenced producer (exit 2) */
        ll_log(LL_INFO, NULL, "service_stopped", "%s stopped (exit %d)", svc->name, rc);
        g_loop = NULL;
        ll_loop_free(loop);
    }
    /* after the producer is gone: a successor's init_transactions fences nothing of this process */
    ll_instance_lease_end(lease);
    ll_obs_stop();
    ll_config_free(cfg);
    free(keys);
    return rc;
}
