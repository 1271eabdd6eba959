/*
 * ll_db_session.c - prints the settings a session of the shared database layer (common/src/core/db.c)
 * runs with: opens a connection to argv[1] as every service and loadctl do (ll_db_open), then one
 * line "jit=<current_setting('jit')>". tests/integration/test_history_plans.py checks that JIT is off
 * (issue 42: a plan whose cost estimate grows with the history must not pay a compilation a call).
 * Exit 0, or 1 with the database's message. A test tool, not installed.
 */
#include <stdio.h>

#include "ll/db.h"

/* The settings asked of the session. */
static const ll_stmt ST_SETTINGS = {"session_settings", "SELECT current_setting('jit')", 0};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: ll-db-session CONNINFO\n");
        return 2;
    }
    ll_db db;
    if (ll_db_open(&db, argv[1], "ll-db-session", 1) != LL_DB_OK) {
        fprintf(stderr, "ll-db-session: no connection: %s\n", db.err.message);
        ll_db_close(&db);
        return 1;
    }
    PGresult *r = ll_db_exec(&db, &ST_SETTINGS, NULL);
    if (!r) {
        fprintf(stderr, "ll-db-session: %s\n", db.err.message);
        ll_db_close(&db);
        return 1;
    }
    printf("jit=%s\n", PQgetvalue(r, 0, 0));
    PQclear(r);
    ll_db_close(&db);
    return 0;
}
