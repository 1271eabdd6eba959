/*
 * db.c - one libpq connection (ll/db.h; db_int.h maps the database files): opened, closed and
 * reconnected, with the session's limits (statement, lock and idle-in-transaction timeouts, set
 * per transaction behind a transaction pooler) and the db.* keys every service reads.
 */
#include "db_int.h"
#include "ll/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const ll_config_key LL_DB_TIMEOUT_KEYS[] = {
    {"db.statement_timeout", "PT5S", false, "longest SQL statement (statement_timeout); 0 = none",
     LL_CONFIG_DURATION, 0, LL_HOUR},
    {"db.lock_timeout", "PT2S", false,
     "longest wait for a row lock (lock_timeout); a timeout holds the message and retries",
     LL_CONFIG_DURATION, 1, 10 * LL_MIN},
    {"db.idle_in_transaction_timeout", "PT60S", false,
     "a transaction left idle longer is ended by the server (idle_in_transaction_session_timeout)",
     LL_CONFIG_DURATION, LL_SEC, LL_HOUR},
    {"db.response_timeout", "PT15S", false,
     "longest wait for an answer of PostgreSQL on an open connection, measured by the service "
     "(a black-holed or half-open connection is dropped and reconnected after it); above "
     "db.statement_timeout",
     LL_CONFIG_DURATION, LL_SEC, 2 * LL_HOUR},
    {"db.pooler", "auto", false,
     "auto | none | transaction: a transaction pooler (PgBouncer pool_mode=transaction) in front "
     "means unnamed statements and limits per transaction; auto detects it per connection",
     LL_CONFIG_NO_RANGE},
    {NULL, NULL, false, NULL, LL_CONFIG_NO_RANGE}};

/* The session limits, as a visible constant with bound parameters (values in ms), and JIT off: every
 * statement of the services and loadctl reads a bounded set of rows through an index, but the
 * planner's cost estimate of some grows with the history, and past jit_above_cost (100,000) each
 * execution paid 10-20 ms of compilation (past jit_optimize_above_cost hundreds): `loadctl verify`
 * on a generated history of 60,000 runs took 22 s with JIT, 8.5 s without (issue 42). */
static const char SQL_SET_TIMEOUTS[] =
    "SELECT set_config('statement_timeout', $1, false), set_config('lock_timeout', $2, false),"
    " set_config('idle_in_transaction_session_timeout', $3, false), set_config('jit', 'off', false)";
/* The same settings for the current transaction only (a pooled connection, after each BEGIN). */
static const char SQL_SET_TIMEOUTS_LOCAL[] =
    "SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true),"
    " set_config('idle_in_transaction_session_timeout', $3, true), set_config('jit', 'off', true)";

ll_db_rc ll_db_open(ll_db *db, const char *conninfo, const char *app, int tx_attempts)
{
    memset(db, 0, sizeof *db);
    db->tx_attempts = tx_attempts < 1 ? 1 : tx_attempts;
    db->conninfo = strdup(conninfo);
    db->app = strdup(app);
    if (!db->conninfo || !db->app)
        return LL_DB_UNAVAILABLE;
    return ll_db_ensure(db);
}

void ll_db_close(ll_db *db)
{
    if (db->conn)
        PQfinish(db->conn);
    db->conn = NULL;
    ll_db_forget_prepared(db);
    free(db->prepared);
    free(db->conninfo);
    free(db->app);
    db->prepared = NULL;
    db->conninfo = NULL;
    db->app = NULL;
}

int ll_db_apply_timeouts(ll_db *db, bool local)
{
    const char *sql = local ? SQL_SET_TIMEOUTS_LOCAL : SQL_SET_TIMEOUTS;
    char st[24], lk[24], idle[24];
    snprintf(st, sizeof st, "%lld", (long long)db->statement_timeout_ms);
    snprintf(lk, sizeof lk, "%lld", (long long)db->lock_timeout_ms);
    snprintf(idle, sizeof idle, "%lld", (long long)db->idle_tx_timeout_ms);
    const char *params[3] = {st, lk, idle};
    PGresult *res = ll_db_await_answer(db, PQsendQueryParams(db->conn, sql, 3, NULL, params, NULL, NULL, 0));
    if (!res)
        return -1;
    int ok = PQresultStatus(res) == PGRES_TUPLES_OK;
    if (!ok)
        ll_db_set_err_from_result(db, res);
    PQclear(res);
    return ok ? 0 : -1;
}

/*
 * The connection: the configured conninfo (key=value or a postgresql:// URI, expanded by libpq)
 * between defaults it may override (a bounded connect, TCP keepalives, so that a database host
 * that vanished is noticed in seconds rather than after the kernel's retransmission timeout,
 * while the consumer must keep polling) and the application name, which is always the service's.
 */
static PGconn *connect_db(const ll_db *db)
{
    static const char *const keys[] = {"connect_timeout",
                                       "keepalives",
                                       "keepalives_idle",
                                       "keepalives_interval",
                                       "keepalives_count",
                                       "tcp_user_timeout",
                                       "dbname",
                                       "application_name",
                                       NULL};
    const char *vals[] = {"10", "1", "30", "10", "3", "10000", db->conninfo, db->app, NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    /* every later send goes through PQflush and poll() (db_wait.c): never blocked in send() */
    if (c && PQstatus(c) == CONNECTION_OK)
        PQsetnonblocking(c, 1);
    return c;
}

/*
 * A fresh connection's session: pooled or not (db->pooler; AUTO asks the server), then on a direct
 * one the session limits (a pooled one gets them per transaction). 0, or -1 with db->err filled.
 */
static int setup_session(ll_db *db)
{
    bool was = db->pooled;
    if (db->pooler == LL_DB_POOLER_AUTO) {
        int p = ll_db_conn_pooled(db->conn, db->response_timeout_ms);
        if (p < 0) {
            ll_db_set_conn_err(db, "08006");
            return -1;
        }
        db->pooled = p == 1;
    } else {
        db->pooled = ll_db_pooler_decide(db->pooler, 0, 0);
    }
    if (db->pooled && !was && db->announce)
        ll_log(LL_INFO, NULL, "db_pooled",
               "a transaction pooler is in front of PostgreSQL (db.pooler=%s): unnamed statements, "
               "limits per transaction",
               db->pooler == LL_DB_POOLER_AUTO ? "auto" : "transaction");
    return db->pooled ? 0 : ll_db_apply_timeouts(db, false);
}

ll_db_rc ll_db_ensure(ll_db *db)
{
    if (db->conn && PQstatus(db->conn) == CONNECTION_OK && !db->read_only)
        return LL_DB_OK;
    if (db->conn && db->read_only)
        ll_log(LL_WARN, NULL, "db_read_only",
               "the server answers read-only (SQLSTATE 25006): leaving this session for a new connection");
    db->read_only = false;
    if (db->conn)
        PQfinish(db->conn);
    ll_db_forget_prepared(db);
    db->conn = connect_db(db);
    if (PQstatus(db->conn) != CONNECTION_OK) {
        ll_db_set_conn_err(db, "08006");
        PQfinish(db->conn);
        db->conn = NULL;
        return LL_DB_UNAVAILABLE;
    }
    if (setup_session(db) != 0) {
        PQfinish(db->conn);
        db->conn = NULL;
        return LL_DB_UNAVAILABLE;
    }
    db->connects++;
    return LL_DB_OK;
}

int ll_db_configure_timeouts(ll_db *db, const ll_config *cfg, char *err, size_t errlen)
{
    int64_t st = 0, lk = 0, idle = 0, resp = 0;
    if (ll_config_duration_ms(cfg, "db.statement_timeout", &st, err, errlen) ||
        ll_config_duration_ms(cfg, "db.lock_timeout", &lk, err, errlen) ||
        ll_config_duration_ms(cfg, "db.idle_in_transaction_timeout", &idle, err, errlen) ||
        ll_config_duration_ms(cfg, "db.response_timeout", &resp, err, errlen))
        return -1;
    if (ll_db_response_timeout_check(st, resp) != 0) {
        snprintf(err, errlen,
                 "db.response_timeout (%lld ms) must be above 0 and above db.statement_timeout (%lld ms)",
                 (long long)resp, (long long)st);
        return -1;
    }
    ll_db_pooler pooler = LL_DB_POOLER_AUTO;
    const char *pv = ll_config_get(cfg, "db.pooler");
    if (pv) {
        int i = ll_config_enum("db.pooler", pv, LL_DB_POOLER_NAMES, err, errlen);
        if (i < 0)
            return -1;
        pooler = (ll_db_pooler)i;
    }
    db->statement_timeout_ms = st;
    db->lock_timeout_ms = lk;
    db->idle_tx_timeout_ms = idle;
    db->response_timeout_ms = resp;
    db->pooler = pooler;
    db->announce = true; /* a service: its log says when a pooler is in front */
    db->pooled = false;
    if (db->conn && PQstatus(db->conn) == CONNECTION_OK && setup_session(db) != 0) {
        PQfinish(db->conn); /* reconnected (and limited) on the next ll_db_ensure */
        db->conn = NULL;
        ll_db_forget_prepared(db);
    }
    return 0;
}
