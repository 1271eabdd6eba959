/*
 * daemon.h - the start-up the services that do not consume Kafka share (dispatcher, sweeper):
 * command line, configuration with the common keys, logs, SIGTERM/SIGINT, the database
 * connection, and the matching shutdown. The consuming services use ll_service_main (svc.h).
 */
#ifndef LL_DAEMON_H
#define LL_DAEMON_H

#include <signal.h>

#include "ll/config.h"
#include "ll/db.h"

/* The keys every such service reads: service.instance_id, db.conninfo, db.tx_attempts, log.level
 * (plus LL_DB_TIMEOUT_KEYS, merged in by ll_daemon_start). */
extern const ll_config_key LL_DAEMON_CONFIG_KEYS[];

/* Set to 1 by SIGTERM or SIGINT once ll_daemon_start has run; the service's loop ends on it. */
extern volatile sig_atomic_t ll_daemon_stopping;

/* A started service: its configuration (which refers to the merged key table) and database. */
typedef struct ll_daemon {
    const char *name; /* "sweeper": log service name and application_name */
    ll_config *cfg;
    ll_config_key *keys; /* LL_DAEMON_CONFIG_KEYS + the service's own, owned */
    ll_db db;
    bool db_opened;
} ll_daemon;

/*
 * Reads `--config FILE` (else $LOADLEDGER_CONFIG) and `--help`, loads the configuration with the
 * common keys plus own_keys ({NULL}-terminated), sets up logs and the stop signals. Returns -1
 * when the service should run, else the exit code to return at once: 0 after --help (usage
 * printed, with extra_help lines if not NULL) or --config-keys (ll_service_write_example), 1 after a
 * configuration error (printed).
 */
int ll_daemon_start(ll_daemon *d, int argc, char **argv, const char *name, const char *summary,
                    const ll_config_key *own_keys, const char *extra_help);
/* Prints "ll-<name>: <msg>" on stderr, ends the daemon, and returns 1 (the exit code). */
int ll_daemon_fail(ll_daemon *d, const char *msg);
/* Opens the database (db.conninfo, db.tx_attempts, the db.* timeouts); an unreachable one is
 * logged and retried later. Returns 0, or -1 with err naming a bad key (start-up refused). */
int ll_daemon_open_db(ll_daemon *d, char *err, size_t errlen);
/* Closes the database and frees the configuration. */
void ll_daemon_end(ll_daemon *d);

#endif
