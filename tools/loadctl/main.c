/*
 * loadctl - the operator's tool over the ledger (kafka-edition.md §2). This file reads the
 * common options and hands the rest of the command line to one command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loadctl.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: loadctl [--db CONNINFO] [--json] COMMAND [ARGS]\n\n"
               "commands:\n"
               "  migrate [--dir DIR]          apply the SQL migrations not yet applied\n"
               "  runs [--job KEY] [--business-key KEY] [--status STATUS] [--limit N]\n"
               "                               list runs, newest first\n"
               "  show RUN                     one run: partitions, dispatches, events\n\n"
               "The database comes from --db, else LOADLEDGER_DB__CONNINFO, else LL_PG_CONNINFO.\n"
               "Exit codes: 0 ok, 1 usage, 2 not found or refused, 3 database error.\n");
}

PGconn *lc_connect(const lc_opts *o)
{
    const char *ci = o->conninfo;
    if (!ci)
        ci = getenv("LOADLEDGER_DB__CONNINFO");
    if (!ci)
        ci = getenv("LL_PG_CONNINFO");
    if (!ci) {
        fprintf(stderr, "loadctl: no database: give --db CONNINFO or set LOADLEDGER_DB__CONNINFO\n");
        return NULL;
    }
    PGconn *c = PQconnectdb(ci);
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "loadctl: cannot connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return NULL;
    }
    return c;
}

int main(int argc, char **argv)
{
    lc_opts o = {NULL, false};
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
            o.conninfo = argv[++i];
        else if (strcmp(argv[i], "--json") == 0)
            o.json = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage(stdout), LC_OK;
        else
            return usage(stderr), LC_USAGE;
    }
    if (i >= argc)
        return usage(stderr), LC_USAGE;
    const char *cmd = argv[i];
    int sub_argc = argc - i;
    char **sub_argv = argv + i;
    if (strcmp(cmd, "migrate") == 0)
        return lc_migrate(&o, sub_argc, sub_argv);
    if (strcmp(cmd, "runs") == 0 || strcmp(cmd, "status") == 0)
        return lc_runs(&o, sub_argc, sub_argv);
    if (strcmp(cmd, "show") == 0)
        return lc_show(&o, sub_argc, sub_argv);
    fprintf(stderr, "loadctl: unknown command '%s'\n", cmd);
    usage(stderr);
    return LC_USAGE;
}
