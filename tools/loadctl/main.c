/*
 * loadctl - the operator's tool over the ledger (docs/contract.md K§2). This file reads the
 * options given before the command, finds the command in the table below and hands it the rest
 * of the command line; it also opens the database for every command.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/log.h"
#include "ll/redact.h"
#include "ll/version.h"
#include "loadctl.h"

/* The commands, in the order `loadctl --help` lists them. */
static const struct {
    const char *name;
    int (*run)(const lc_opts *o, int argc, char **argv);
    const char *summary;
} COMMANDS[] = {
    {"status", lc_runs, "runs newest first with their progress (same as runs)"},
    {"runs", lc_runs, "runs newest first: --job, --business-key, --status, --limit"},
    {"show", lc_show, "one run: partitions, validations, dispatches, events"},
    {"monitor", lc_monitor, "terminal dashboard (--once: one plain-text frame)"},
    {"resolve-publish-unknown", lc_resolve, "resolve a PUBLISH_UNKNOWN run (reason required)"},
    {"end-run", lc_end_run, "end a stuck run with the contract's failure for its status (reason required)"},
    {"resend", lc_resend, "put a DEAD or SENT dispatch back to PENDING"},
    {"cleanup-candidates", lc_cleanup_candidates, "runs whose retention has passed"},
    {"cleanup", lc_cleanup, "record that a run's table and files were removed"},
    {"purge", lc_purge, "retention: remove runs ended longer ago than --older-than (P400D) from the ledger"},
    {"dead-letters", lc_dead_letters, "list the dead letters; `show COORD`: one, decoded"},
    {"redrive", lc_redrive, "republish dead letters to their source topic (once)"},
    {"verify", lc_verify, "check the ledger's (and --topics: the topics') invariants"},
    {"offsets", lc_offsets, "save / restore the input groups' committed offsets (backup, restore)"},
    {"accept-gap", lc_accept_gap,
     "accept a range of input offsets deleted before they were read (reason required)"},
    {"topics", lc_topics, "create the topics of config/topics.conf (one request, existing kept)"},
    {"migrate", lc_migrate, "apply the SQL migrations not yet applied"},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: loadctl [--db CONNINFO] [--json] COMMAND [ARGS]\n"
               "       loadctl COMMAND --help\n"
               "       loadctl --version\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-25s %s\n", COMMANDS[i].name, COMMANDS[i].summary);
    fprintf(f,
            "\n--db and --json may also follow the command. The database comes from --db, else\n"
            "LOADLEDGER_DB__CONNINFO, else LL_PG_CONNINFO; connect as the ll_operator role.\n"
            "Exit codes (every command): 0 ok, 1 usage (or a file it names), 2 not found or refused,\n"
            "3 database unavailable or error, 4 Kafka unavailable or error, 5 a check found a violation.\n");
}

const char *lc_conninfo(const lc_opts *o)
{
    const char *ci = o->conninfo;
    if (!ci || !*ci)
        ci = getenv("LOADLEDGER_DB__CONNINFO");
    if (!ci || !*ci)
        ci = getenv("LL_PG_CONNINFO");
    return ci && *ci ? ci : NULL;
}

PGconn *lc_connect(const lc_opts *o)
{
    const char *ci = lc_conninfo(o);
    if (!ci) {
        lc_fail(o, LC_DB, "DATABASE_UNAVAILABLE", NULL,
                "no database: give --db CONNINFO or set LOADLEDGER_DB__CONNINFO");
        return NULL;
    }
    PGconn *c = PQconnectdb(ci);
    if (PQstatus(c) != CONNECTION_OK) {
        char msg[512];
        ll_redact_secrets(PQerrorMessage(c), ci, msg, sizeof msg);
        msg[strcspn(msg, "\n")] = '\0';
        lc_fail(o, LC_DB, "DATABASE_UNAVAILABLE", NULL, "cannot connect: %s", msg);
        PQfinish(c);
        return NULL;
    }
    return c;
}

int lc_db_open(const lc_opts *o, ll_db *db)
{
    memset(db, 0, sizeof *db);
    const char *ci = lc_conninfo(o);
    if (!ci)
        return lc_fail(o, LC_DB, "DATABASE_UNAVAILABLE", NULL,
                       "no database: give --db CONNINFO or set LOADLEDGER_DB__CONNINFO");
    if (ll_db_open(db, ci, "loadctl", 3) != LL_DB_OK) {
        int rc = lc_fail_db(o, db, "cannot connect");
        ll_db_close(db);
        return rc;
    }
    return LC_OK;
}

PGresult *lc_query(const lc_opts *o, ll_db *db, const ll_stmt *st, const char *const *params)
{
    PGresult *r = ll_db_exec(db, st, params);
    if (!r)
        lc_fail_db(o, db, st->name);
    return r;
}

int main(int argc, char **argv)
{
    lc_opts o = {NULL, false};
    /* Libpq defaults for every connection: who we are in pg_stat_activity, and a bounded wait
     * for an unreachable server (exit 3 instead of hanging a script). */
    setenv("PGAPPNAME", "loadctl", 0);
    setenv("PGCONNECT_TIMEOUT", "10", 0);
    /* the shared code's log lines (librdkafka's too: ll_kafka_log_to_json) as JSON on stderr:
     * stdout is the command's output */
    ll_log_init("loadctl", LL_INFO);
    ll_log_output(stderr);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--db") == 0 && i + 1 < argc)
            o.conninfo = argv[++i];
        else if (strncmp(argv[i], "--db=", 5) == 0)
            o.conninfo = argv[i] + 5;
        else if (strcmp(argv[i], "--json") == 0)
            o.json = true;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return usage(stdout), LC_OK;
        else if (strcmp(argv[i], "--version") == 0)
            return ll_version_print(stdout, "loadctl"), LC_OK;
        else {
            fprintf(stderr, "loadctl: usage: unknown option '%s'\n", argv[i]);
            return usage(stderr), LC_USAGE;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "loadctl: usage: no command\n");
        return usage(stderr), LC_USAGE;
    }
    const char *cmd = argv[i];
    if (strcmp(cmd, "help") == 0 && i + 1 < argc) {
        /* `loadctl help CMD` = `loadctl CMD --help` */
        static char help_flag[] = "--help";
        char *help_argv[] = {argv[i + 1], help_flag, NULL};
        for (size_t k = 0; k < N_COMMANDS; k++)
            if (strcmp(argv[i + 1], COMMANDS[k].name) == 0)
                return COMMANDS[k].run(&o, 2, help_argv);
    } else if (strcmp(cmd, "help") == 0) {
        return usage(stdout), LC_OK;
    }
    for (size_t k = 0; k < N_COMMANDS; k++)
        if (strcmp(cmd, COMMANDS[k].name) == 0)
            return COMMANDS[k].run(&o, argc - i, argv + i);
    fprintf(stderr, "loadctl: usage: unknown command '%s'\n", cmd);
    usage(stderr);
    return LC_USAGE;
}
