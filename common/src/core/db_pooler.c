/*
 * db_pooler.c - whether a transaction pooler stands between the service and PostgreSQL
 * (ll_db_pooler, db.pooler): the mode parsed, the pure decision, and the one query that asks.
 */
#include "db_int.h"

#include <string.h>

/* The server process that runs this statement (pooler detection). */
static const char SQL_BACKEND_PID[] = "SELECT pg_backend_pid()";

const char *const LL_DB_POOLER_NAMES[] = {"auto", "none", "transaction", NULL};

int ll_db_pooler_parse(const char *text, ll_db_pooler *out)
{
    int i = ll_config_enum("db.pooler", text, LL_DB_POOLER_NAMES, NULL, 0);
    if (i < 0)
        return -1;
    *out = (ll_db_pooler)i;
    return 0;
}

bool ll_db_pooler_decide(ll_db_pooler mode, int key_pid, long long server_pid)
{
    if (mode == LL_DB_POOLER_NONE)
        return false;
    if (mode == LL_DB_POOLER_TRANSACTION)
        return true;
    return (long long)key_pid != server_pid;
}

int ll_db_conn_pooled(PGconn *conn, int64_t timeout_ms)
{
    bool late = false;
    PGresult *res = NULL;
    if (PQsendQueryParams(conn, SQL_BACKEND_PID, 0, NULL, NULL, NULL, NULL, 0))
        res = ll_pq_await(conn, timeout_ms, &late);
    int rc = -1;
    long long server_pid;
    if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
        ll_db_parse_ll(PQgetvalue(res, 0, 0), &server_pid) == 0)
        rc = ll_db_pooler_decide(LL_DB_POOLER_AUTO, PQbackendPID(conn), server_pid);
    PQclear(res);
    return rc;
}
