/*
 * db.c - one libpq connection with lazily prepared statements and the retrying transaction
 * helper of contract §2.8 (deadlock and serialization failures re-run the whole transaction).
 * Behind a transaction pooler (ll_db_pooler) statements go unnamed and limits per transaction.
 */
#include "ll/db.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "ll/redact.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

const ll_config_key LL_DB_TIMEOUT_KEYS[] = {
    {"db.statement_timeout", "PT5S", false, "longest SQL statement (statement_timeout); 0 = none"},
    {"db.lock_timeout", "PT2S", false,
     "longest wait for a row lock (lock_timeout); a timeout holds the message and retries"},
    {"db.idle_in_transaction_timeout", "PT60S", false,
     "a transaction left idle longer is ended by the server (idle_in_transaction_session_timeout)"},
    {"db.response_timeout", "PT15S", false,
     "longest wait for an answer of PostgreSQL on an open connection, measured by the service "
     "(a black-holed or half-open connection is dropped and reconnected after it); above "
     "db.statement_timeout"},
    {"db.pooler", "auto", false,
     "auto | none | transaction: a transaction pooler (PgBouncer pool_mode=transaction) in front "
     "means unnamed statements and limits per transaction; auto detects it per connection"},
    {NULL, NULL, false, NULL}};

/* The session limits, as a visible constant with bound parameters (values in ms). */
static const char SQL_SET_TIMEOUTS[] =
    "SELECT set_config('statement_timeout', $1, false), set_config('lock_timeout', $2, false),"
    " set_config('idle_in_transaction_session_timeout', $3, false)";
/* The same limits for the current transaction only (a pooled connection, after each BEGIN). */
static const char SQL_SET_TIMEOUTS_LOCAL[] =
    "SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true),"
    " set_config('idle_in_transaction_session_timeout', $3, true)";
/* The server process that runs this statement (pooler detection). */
static const char SQL_BACKEND_PID[] = "SELECT pg_backend_pid()";

int ll_db_pooler_parse(const char *text, ll_db_pooler *out)
{
    if (!text)
        return -1;
    if (strcmp(text, "auto") == 0)
        *out = LL_DB_POOLER_AUTO;
    else if (strcmp(text, "none") == 0)
        *out = LL_DB_POOLER_NONE;
    else if (strcmp(text, "transaction") == 0)
        *out = LL_DB_POOLER_TRANSACTION;
    else
        return -1;
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

static void set_err(ll_db *db, const char *state, const char *constraint, const char *msg)
{
    snprintf(db->err.sqlstate, sizeof db->err.sqlstate, "%s", state ? state : "");
    snprintf(db->err.constraint, sizeof db->err.constraint, "%s", constraint ? constraint : "");
    snprintf(db->err.message, sizeof db->err.message, "%s", msg ? msg : "");
    size_t n = strlen(db->err.message);
    while (n > 0 && (db->err.message[n - 1] == '\n' || db->err.message[n - 1] == ' '))
        db->err.message[--n] = '\0';
}

/* A connection-level failure: libpq's message may quote the conninfo or a piece of it (a
 * malformed URI), so its passwords are replaced before it is kept (and logged by callers). */
static void set_conn_err(ll_db *db, const char *state)
{
    char msg[sizeof db->err.message];
    ll_redact_secrets(PQerrorMessage(db->conn), db->conninfo, msg, sizeof msg);
    set_err(db, state, "", msg);
}

static void set_err_from_result(ll_db *db, const PGresult *res)
{
    if (res)
        set_err(db, PQresultErrorField(res, PG_DIAG_SQLSTATE),
                PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME), PQresultErrorMessage(res));
    else
        set_conn_err(db, "");
}

static void forget_prepared(ll_db *db)
{
    for (size_t i = 0; i < db->n_prepared; i++)
        free(db->prepared[i]);
    db->n_prepared = 0;
}

/*
 * The answer to the statement just sent (sent: what PQsend* returned), awaited at most
 * db.response_timeout. NULL with db->err filled when nothing could be sent or no answer came in
 * time; in the latter case the connection is dropped (the next ll_db_ensure reconnects), since
 * whatever it carries next would wait behind the lost answer.
 */
static PGresult *await_answer(ll_db *db, int sent)
{
    if (!sent) {
        set_conn_err(db, "08006");
        return NULL;
    }
    bool late = false;
    PGresult *res = ll_pq_await(db->conn, db->response_timeout_ms, &late);
    if (late) {
        char msg[160];
        snprintf(msg, sizeof msg,
                 "no answer from PostgreSQL within db.response_timeout (%lld ms): connection dropped",
                 (long long)db->response_timeout_ms);
        set_err(db, "08006", "", msg);
        PQfinish(db->conn);
        db->conn = NULL;
        forget_prepared(db);
        return NULL;
    }
    if (!res)
        set_conn_err(db, "08006");
    return res;
}

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
    forget_prepared(db);
    free(db->prepared);
    free(db->conninfo);
    free(db->app);
    db->prepared = NULL;
    db->conninfo = NULL;
    db->app = NULL;
}

/* Sets db's limits: for the session (sql = SQL_SET_TIMEOUTS) or the open transaction
 * (SQL_SET_TIMEOUTS_LOCAL). 0, or -1 with db->err filled. */
static int apply_timeouts(ll_db *db, const char *sql)
{
    char st[24], lk[24], idle[24];
    snprintf(st, sizeof st, "%lld", (long long)db->statement_timeout_ms);
    snprintf(lk, sizeof lk, "%lld", (long long)db->lock_timeout_ms);
    snprintf(idle, sizeof idle, "%lld", (long long)db->idle_tx_timeout_ms);
    const char *params[3] = {st, lk, idle};
    PGresult *res = await_answer(db, PQsendQueryParams(db->conn, sql, 3, NULL, params, NULL, NULL, 0));
    if (!res)
        return -1;
    int ok = PQresultStatus(res) == PGRES_TUPLES_OK;
    if (!ok)
        set_err_from_result(db, res);
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
            set_conn_err(db, "08006");
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
    return db->pooled ? 0 : apply_timeouts(db, SQL_SET_TIMEOUTS);
}

ll_db_rc ll_db_ensure(ll_db *db)
{
    if (db->conn && PQstatus(db->conn) == CONNECTION_OK)
        return LL_DB_OK;
    if (db->conn)
        PQfinish(db->conn);
    forget_prepared(db);
    db->conn = connect_db(db);
    if (PQstatus(db->conn) != CONNECTION_OK) {
        set_conn_err(db, "08006");
        PQfinish(db->conn);
        db->conn = NULL;
        return LL_DB_UNAVAILABLE;
    }
    if (setup_session(db) != 0) {
        PQfinish(db->conn);
        db->conn = NULL;
        return LL_DB_UNAVAILABLE;
    }
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
    if (pv && ll_db_pooler_parse(pv, &pooler) != 0) {
        snprintf(err, errlen, "db.pooler must be auto, none or transaction (not '%s')", pv);
        return -1;
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
        forget_prepared(db);
    }
    return 0;
}

static bool is_prepared(const ll_db *db, const char *name)
{
    for (size_t i = 0; i < db->n_prepared; i++)
        if (strcmp(db->prepared[i], name) == 0)
            return true;
    return false;
}

static int prepare(ll_db *db, const ll_stmt *st)
{
    if (is_prepared(db, st->name))
        return 0;
    PGresult *res = await_answer(db, PQsendPrepare(db->conn, st->name, st->sql, st->nparams, NULL));
    if (!res)
        return -1;
    if (PQresultStatus(res) != PGRES_COMMAND_OK) {
        set_err_from_result(db, res);
        PQclear(res);
        return -1;
    }
    PQclear(res);
    if (db->n_prepared == db->cap_prepared) {
        size_t cap = db->cap_prepared ? db->cap_prepared * 2 : 32;
        char **p = realloc(db->prepared, cap * sizeof *p);
        if (!p)
            return -1;
        db->prepared = p;
        db->cap_prepared = cap;
    }
    db->prepared[db->n_prepared++] = strdup(st->name);
    return 0;
}

/* One statement: prepared by name on a direct connection, unnamed on a pooled one. */
static PGresult *exec_one(ll_db *db, const ll_stmt *st, const char *const *params)
{
    PGresult *res;
    if (db->pooled) {
        res =
            await_answer(db, PQsendQueryParams(db->conn, st->sql, st->nparams, NULL, params, NULL, NULL, 0));
    } else {
        if (prepare(db, st) != 0)
            return NULL;
        res = await_answer(db, PQsendQueryPrepared(db->conn, st->name, st->nparams, params, NULL, NULL, 0));
    }
    if (!res)
        return NULL;
    ExecStatusType s = PQresultStatus(res);
    if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
        return res;
    set_err_from_result(db, res);
    PQclear(res);
    return NULL;
}

PGresult *ll_db_exec(ll_db *db, const ll_stmt *st, const char *const *params)
{
    if (!db->conn) {
        set_err(db, "08003", "", "no connection");
        return NULL;
    }
    if (!db->pooled || PQtransactionStatus(db->conn) != PQTRANS_IDLE)
        return exec_one(db, st, params);
    /* Pooled and outside a transaction: a transaction of its own, so the limits bound it too. */
    if (ll_db_command(db, "BEGIN ISOLATION LEVEL READ COMMITTED") != LL_DB_OK)
        return NULL;
    PGresult *res = exec_one(db, st, params);
    if (res && ll_db_command(db, "COMMIT") == LL_DB_OK)
        return res;
    ll_db_error saved = db->err;
    if (PQstatus(db->conn) == CONNECTION_OK && PQtransactionStatus(db->conn) != PQTRANS_IDLE)
        ll_db_command(db, "ROLLBACK");
    db->err = saved;
    PQclear(res);
    return NULL;
}

ll_db_rc ll_db_command(ll_db *db, const char *sql)
{
    if (!db->conn) {
        set_err(db, "08003", "", "no connection");
        return LL_DB_UNAVAILABLE;
    }
    int commit = strcmp(sql, "COMMIT") == 0;
    struct timespec t0, t1;
    if (commit)
        clock_gettime(CLOCK_MONOTONIC, &t0);
    PGresult *res = await_answer(db, PQsendQuery(db->conn, sql));
    if (!res)
        return LL_DB_UNAVAILABLE;
    if (PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK) {
        PQclear(res);
        if (commit && clock_gettime(CLOCK_MONOTONIC, &t1) == 0)
            ll_obs_db_commit((double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
        if (db->pooled && strncmp(sql, "BEGIN", 5) == 0 && apply_timeouts(db, SQL_SET_TIMEOUTS_LOCAL) != 0) {
            ll_db_error saved = db->err; /* the transaction is aborted: end it, keep the cause */
            if (db->conn)
                PQclear(await_answer(db, PQsendQuery(db->conn, "ROLLBACK")));
            db->err = saved;
            return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
        }
        return LL_DB_OK;
    }
    set_err_from_result(db, res);
    PQclear(res);
    return ll_db_err_is_unavailable(db) ? LL_DB_UNAVAILABLE : LL_DB_ERROR;
}

long ll_db_affected(const PGresult *res)
{
    long long n = 0;
    return ll_db_parse_ll(PQcmdTuples((PGresult *)res), &n) == 0 ? (long)n : 0;
}

bool ll_db_err_is_retryable(const ll_db *db)
{
    return strcmp(db->err.sqlstate, "40P01") == 0 || strcmp(db->err.sqlstate, "40001") == 0;
}

bool ll_db_err_is_unavailable(const ll_db *db)
{
    if (!db->conn || PQstatus(db->conn) != CONNECTION_OK)
        return true;
    return strncmp(db->err.sqlstate, "08", 2) == 0 || strncmp(db->err.sqlstate, "57P", 3) == 0 ||
           db->err.sqlstate[0] == '\0';
}

bool ll_db_err_is_busy(const ll_db *db)
{
    return strcmp(db->err.sqlstate, "57014") == 0 || strcmp(db->err.sqlstate, "55P03") == 0;
}

bool ll_db_err_is_input(const ll_db *db)
{
    return strncmp(db->err.sqlstate, "22", 2) == 0 || strncmp(db->err.sqlstate, "23", 2) == 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

ll_db_rc ll_db_transaction(ll_db *db, ll_tx_fn fn, void *arg)
{
    for (int attempt = 0; attempt < db->tx_attempts; attempt++) {
        if (ll_db_ensure(db) != LL_DB_OK)
            return LL_DB_UNAVAILABLE;
        ll_db_rc rc = ll_db_command(db, "BEGIN ISOLATION LEVEL READ COMMITTED");
        if (rc == LL_DB_OK) {
            rc = fn(db, arg);
            if (rc == LL_DB_OK) {
                rc = ll_db_command(db, "COMMIT");
                if (rc == LL_DB_OK)
                    return LL_DB_OK;
            } else {
                ll_db_error saved = db->err;
                if (db->conn && PQstatus(db->conn) == CONNECTION_OK)
                    ll_db_command(db, "ROLLBACK");
                db->err = saved;
                if (rc == LL_DB_ROLLBACK)
                    return LL_DB_ROLLBACK;
            }
        }
        if (ll_db_err_is_unavailable(db))
            return LL_DB_UNAVAILABLE;
        if (!ll_db_err_is_retryable(db))
            return LL_DB_ERROR;
        sleep_ms(50L << attempt);
    }
    return LL_DB_ERROR;
}

const char *ll_db_text(const PGresult *res, int row, int col)
{
    if (PQgetisnull(res, row, col))
        return NULL;
    return PQgetvalue(res, row, col);
}

long long ll_db_ll(const PGresult *res, int row, int col, long long dflt)
{
    long long v = dflt;
    return ll_db_parse_ll(ll_db_text(res, row, col), &v) == 0 ? v : dflt;
}

int ll_db_parse_ll(const char *text, long long *out)
{
    if (text == NULL || !(isdigit((unsigned char)text[0]) || text[0] == '-' || text[0] == '+'))
        return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

bool ll_db_bool(const PGresult *res, int row, int col)
{
    const char *v = ll_db_text(res, row, col);
    return v && v[0] == 't';
}
