/*
 * db_err.c - the last database error (ll_db_error in db->err): recorded from a result or the
 * connection (passwords of the conninfo replaced), and classified for the callers (retryable,
 * unavailable, busy, input).
 */
#include "db_int.h"
#include "ll/redact.h"

#include <stdio.h>
#include <string.h>

void ll_db_set_err(ll_db *db, const char *state, const char *constraint, const char *msg)
{
    snprintf(db->err.sqlstate, sizeof db->err.sqlstate, "%s", state ? state : "");
    if (strcmp(db->err.sqlstate, "25006") == 0)
        db->read_only = true; /* this session cannot write: ll_db_ensure leaves it */
    snprintf(db->err.constraint, sizeof db->err.constraint, "%s", constraint ? constraint : "");
    snprintf(db->err.message, sizeof db->err.message, "%s", msg ? msg : "");
    size_t n = strlen(db->err.message);
    while (n > 0 && (db->err.message[n - 1] == '\n' || db->err.message[n - 1] == ' '))
        db->err.message[--n] = '\0';
}

/* A connection-level failure: libpq's message may quote the conninfo or a piece of it (a
 * malformed URI), so its passwords are replaced before it is kept (and logged by callers). */
void ll_db_set_conn_err(ll_db *db, const char *state)
{
    char msg[sizeof db->err.message];
    ll_redact_secrets(PQerrorMessage(db->conn), db->conninfo, msg, sizeof msg);
    ll_db_set_err(db, state, "", msg);
}

void ll_db_set_err_from_result(ll_db *db, const PGresult *res)
{
    if (res)
        ll_db_set_err(db, PQresultErrorField(res, PG_DIAG_SQLSTATE),
                      PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME), PQresultErrorMessage(res));
    else
        ll_db_set_conn_err(db, "");
}

bool ll_db_err_is_retryable(const ll_db *db)
{
    return strcmp(db->err.sqlstate, "40P01") == 0 || strcmp(db->err.sqlstate, "40001") == 0;
}

bool ll_db_err_is_unavailable(const ll_db *db)
{
    if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
        return true;
    return ll_db_err_state_is_unavailable(db);
}

bool ll_db_err_state_is_unavailable(const ll_db *db)
{
    /* 25006: the server answers read-only (a standby): not a server to write to, as if down */
    return strncmp(db->err.sqlstate, "08", 2) == 0 || strncmp(db->err.sqlstate, "57P", 3) == 0 ||
           strcmp(db->err.sqlstate, "25006") == 0 || db->err.sqlstate[0] == '\0';
}

bool ll_db_err_is_busy(const ll_db *db)
{
    return strcmp(db->err.sqlstate, "57014") == 0 || strcmp(db->err.sqlstate, "55P03") == 0;
}

bool ll_db_err_is_input(const ll_db *db)
{
    return strncmp(db->err.sqlstate, "22", 2) == 0 || strncmp(db->err.sqlstate, "23", 2) == 0;
}
