/*
 * daemon.c - start-up and shutdown of the services that do not consume Kafka (daemon.h).
 */
#include "ll/daemon.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/log.h"
#include "ll/obs.h"
#include "ll/svc.h"
#include "ll/topics.h"
#include "ll/version.h"

const ll_config_key LL_DAEMON_CONFIG_KEYS[] = {
    {"service.instance_id", NULL, false, "id of this instance (informational)", LL_CONFIG_NO_RANGE},
    {"db.conninfo", NULL, true, "libpq conninfo of the service's own PostgreSQL role (ll_<service>)",
     LL_CONFIG_NO_RANGE},
    LL_DB_TX_ATTEMPTS_KEY,
    LL_LOG_LEVEL_KEY,
    LL_OBS_KEYS,
    {NULL, NULL, false, NULL, LL_CONFIG_NO_RANGE}};

/* The extra help lines (open-ended keys, e.g. kafka.<property>) as "# line" comments into a
 * malloc'd string the caller frees; NULL for none or out of memory. */
static char *extra_as_comments(const char *extra)
{
    if (!extra)
        return NULL;
    size_t n = strlen(extra), lines = 1;
    for (size_t i = 0; i < n; i++)
        lines += extra[i] == '\n';
    char *out = malloc(n + 2 * lines + 2), *o = out;
    if (!out)
        return NULL;
    for (const char *p = extra; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        while (len && *p == ' ')
            p++, len--;
        o += sprintf(o, "# %.*s\n", (int)len, p);
        p += len + (nl ? 1 : 0);
    }
    *o = '\0';
    return out;
}

volatile sig_atomic_t ll_daemon_stopping;

static void on_signal(int sig)
{
    (void)sig;
    ll_daemon_stopping = 1;
}

int ll_daemon_start(ll_daemon *d, int argc, char **argv, const char *name, const char *summary,
                    const ll_config_key *own_keys, const char *extra_help)
{
    ll_malloc_settle();
    memset(d, 0, sizeof *d);
    d->name = name;
    d->keys = ll_config_keys_merge(LL_DAEMON_CONFIG_KEYS, LL_DB_TIMEOUT_KEYS, own_keys);
    const char *path = getenv("LOADLEDGER_CONFIG");
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            path = argv[++i];
            continue;
        }
        if (strcmp(argv[i], "--version") == 0) {
            char bin[80];
            snprintf(bin, sizeof bin, "ll-%s", name);
            ll_version_print(stdout, bin);
            ll_daemon_end(d);
            return 0;
        }
        if (strcmp(argv[i], "--config-keys") == 0) {
            char *extra = extra_as_comments(extra_help);
            ll_service_write_example(stdout, name, d->keys, extra);
            free(extra);
            ll_daemon_end(d);
            return 0;
        }
        bool help = strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
        FILE *out = help ? stdout : stderr;
        if (!help)
            fprintf(stderr, "ll-%s: unknown argument '%s'\n", name, argv[i]);
        fprintf(out,
                "ll-%s - %s\nusage: ll-%s [--config FILE] [--config-keys] [--version]\nkeys (environment "
                "LOADLEDGER_<KEY>, . as __):\n",
                name, summary, name);
        ll_config_usage(out, d->keys);
        if (extra_help)
            fputs(extra_help, out);
        fprintf(out, "--config-keys prints every key as an example configuration file.\n");
        ll_service_schema_help(out);
        ll_daemon_end(d);
        return help ? 0 : 1;
    }
    /* LOADLEDGER_CONFIG is the file's path, not a key */
    unsetenv("LOADLEDGER_CONFIG");
    char err[1024];
    ll_level lvl = LL_INFO;
    if (!(d->cfg = ll_config_load(path, d->keys, LL_ALL_TOPICS, err, sizeof err)))
        return ll_daemon_fail(d, err);
    int level =
        ll_config_enum("log.level", ll_config_get(d->cfg, "log.level"), LL_LOG_LEVEL_NAMES, err, sizeof err);
    if (level < 0)
        return ll_daemon_fail(d, err);
    lvl = (ll_level)level;
    ll_log_init(name, lvl);
    char bin[80];
    snprintf(bin, sizeof bin, "ll-%s", name);
    ll_version_log(bin);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    return -1;
}

int ll_daemon_fail(ll_daemon *d, const char *msg)
{
    fprintf(stderr, "ll-%s: %s\n", d->name, msg);
    ll_daemon_end(d);
    return 1;
}

int ll_daemon_open_db(ll_daemon *d, char *err, size_t errlen)
{
    int64_t attempts = 0; /* its default: LL_DAEMON_CONFIG_KEYS */
    if (ll_config_int(d->cfg, "db.tx_attempts", &attempts, err, errlen))
        return -1;
    d->db_opened = true;
    if (ll_db_open(&d->db, ll_config_get(d->cfg, "db.conninfo"), d->name, (int)attempts) != LL_DB_OK)
        ll_log(LL_WARN, NULL, "db_unavailable", "database not reachable at start; will retry");
    return ll_db_configure_timeouts(&d->db, d->cfg, err, errlen);
}

void ll_daemon_end(ll_daemon *d)
{
    ll_obs_stop();
    if (d->db_opened)
        ll_db_close(&d->db);
    d->db_opened = false;
    ll_config_free(d->cfg);
    d->cfg = NULL;
    free(d->keys);
    d->keys = NULL;
}
