/*
 * svc.h - the start-up every consuming service shares: command line, configuration, logs,
 * signals, the loop. A service's main.c fills an ll_service and calls ll_service_main.
 */
#ifndef LL_SVC_H
#define LL_SVC_H

#include "ll/kloop.h"

/* A consuming service: its name, its inputs, its own configuration keys and state. */
typedef struct ll_service {
    const char *name;    /* "completion" */
    const char *summary; /* one line for --help */
    const ll_input *inputs;
    size_t n_inputs;
    const ll_config_key *keys; /* the service's own keys, {NULL}-terminated, may be NULL */
    /* Reads the service's settings; 0, or -1 with err (start-up refused). May be NULL. */
    int (*init)(void *state, const ll_config *cfg, char *err, size_t errlen);
    void *state;
} ll_service;

/* Merges three key tables (each {NULL}-terminated, any may be NULL) into a malloc'd table the
 * caller frees; NULL when out of memory. */
ll_config_key *ll_config_keys_merge(const ll_config_key *a, const ll_config_key *b, const ll_config_key *c);

/*
 * Writes the example configuration of ll-<name> to out (`--config-keys`): a header naming the
 * file format, every key of keys with its help and default (ll_config_write_example), then
 * extra (comment lines about open-ended keys such as kafka.<property>; NULL for none).
 */
void ll_service_write_example(FILE *out, const char *name, const ll_config_key *keys, const char *extra);

/* Prints the `--help` lines on where the Avro schemas are read from: schema.dir, else
 * $LL_SCHEMA_DIR, else the installed <datadir>/loadledger/schemas/avro, else the source tree. */
void ll_service_schema_help(FILE *out);

/* glibc malloc arenas of a service process (memory, docs/design.md §3): one. glibc gives each thread that
 * allocates an arena of its own, up to 8 per core, and librdkafka runs some ten threads (broker,
 * coordinator and main threads of the consumer and the producer): the fetch buffers, freed by the
 * loop's thread into their broker thread's arena, and every arena's own padding added to
 * ll-completion's high-water RSS under a backlog, at no measurable cost with one arena (the
 * figures: docs/performance-history.md, "2026-12-01, night"). */
#define LL_MALLOC_ARENAS 1

/* Caps glibc's malloc arenas at LL_MALLOC_ARENAS (mallopt M_ARENA_MAX) unless the environment
 * sets MALLOC_ARENA_MAX (the operator's word wins). Called first in main, before any thread. */
void ll_malloc_settle(void);

/*
 * Runs a service: `--config FILE` (else $LOADLEDGER_CONFIG, else no file), `--help` lists the
 * keys, `--config-keys` prints them as an example configuration file (ll_service_write_example). Exit codes:
 * 0 clean stop (SIGTERM/SIGINT), 1 configuration or start-up error, 2 fatal Kafka error (the supervisor
 * restarts the process), 3 schema registry unavailable at start, 4 (LL_EXIT_INSTANCE_HELD) the instance
 * lease of (group, service.instance_id) is held by another process (a lease taken over while
 * running: exit 2, as a fenced producer; ll/instance.h: taken after the schema check and before the loop
 * makes its producer, released after the loop is freed).
 */
int ll_service_main(int argc, char **argv, const ll_service *svc);

#endif
