/*
 * loadctl.h - the operator's tool: one function per command, each returning the process exit
 * code (0 ok, 1 usage, 2 not found / refused, 3 database unavailable or failed).
 */
#ifndef LOADCTL_H
#define LOADCTL_H

#include <libpq-fe.h>
#include <stdbool.h>

/* Exit codes a script can rely on. */
enum { LC_OK = 0, LC_USAGE = 1, LC_REFUSED = 2, LC_DB = 3 };

/* Options every command shares. */
typedef struct lc_opts {
    const char *conninfo; /* --db, else $LOADLEDGER_DB__CONNINFO, else $LL_PG_CONNINFO */
    bool json;            /* --json: machine-readable output */
} lc_opts;

/* Connects or prints why not; NULL on failure. */
PGconn *lc_connect(const lc_opts *o);

/* `loadctl migrate [--dir DIR]`: applies the SQL migrations not yet applied (migrate.c). */
int lc_migrate(const lc_opts *o, int argc, char **argv);
/* `loadctl runs [--job K] [--business-key B] [--status S] [--limit N]` (runs.c). */
int lc_runs(const lc_opts *o, int argc, char **argv);
/* `loadctl show RUN`: the run, its partitions, dispatches and events (show.c). */
int lc_show(const lc_opts *o, int argc, char **argv);

#endif
