/*
 * db.h - PostgreSQL access for the services: one connection, prepared statements, and a
 * transaction helper that re-runs the whole transaction on deadlock (40P01) and serialization
 * failure (40001), sleeping 50 ms × 2^i between tries (docs/contract.md §2.8).
 *
 * The helper decides nothing about the ledger: the function it runs holds the rules and follows
 * the lock order run -> partition -> file -> dispatch. SQL text lives in visible string constants
 * (ll_stmt) next to the code that runs it; parameters are always bound, never spliced.
 *
 * The functions here are those of the database files of common/src/core (db_int.h maps them):
 * db.c (the connection), db_pooler.c, db_wait.c, db_exec.c (statements, commands, the
 * transaction), db_err.c (error classes), db_cells.c (result cells).
 */
#ifndef LL_DB_H
#define LL_DB_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ll/config.h"

/* A named SQL statement, prepared once per connection on first use (sent unnamed, parsed on every
 * call, behind a transaction-pooling connection pooler: see ll_db_pooler). Static storage. */
typedef struct ll_stmt {
    const char *name; /* unique per program, e.g. "chunk_lock_run" */
    const char *sql;
    int nparams;
} ll_stmt;

/* What the last failed call said. */
typedef struct ll_db_error {
    char sqlstate[6];     /* "" when not from the server */
    char constraint[128]; /* constraint name of an integrity error, or "" */
    char message[512];
} ll_db_error;

/*
 * What stands between the service and PostgreSQL (db.pooler). Behind a pooler in transaction mode
 * (PgBouncer pool_mode=transaction; Debian 12's PgBouncer 1.18 keeps no prepared statements) each
 * transaction may run on another server connection, so nothing may live in the session: db.c then
 * sends every ll_stmt unnamed (PQexecParams: parsed per call), sets the limits per transaction
 * (set_config(..., true) right after each BEGIN; a statement outside a transaction is wrapped in
 * one), and the dispatcher does not LISTEN through it. AUTO decides on each (re)connection: the
 * server's pg_backend_pid() differs from the process id of the connection's cancel key exactly when
 * a pooler answered the startup (PgBouncer gives each client a random key).
 */
typedef enum ll_db_pooler {
    LL_DB_POOLER_AUTO = 0,    /* "auto" (default): detected on each connection */
    LL_DB_POOLER_NONE,        /* "none": a direct connection, named statements, session limits */
    LL_DB_POOLER_TRANSACTION, /* "transaction": always as behind a transaction pooler */
} ll_db_pooler;

/* The words of db.pooler in ll_db_pooler's order ("auto", "none", "transaction"), NULL-terminated:
 * the index ll_config_enum returns is the mode. Static. */
extern const char *const LL_DB_POOLER_NAMES[];
/* Parses a db.pooler value ("auto", "none", "transaction"). 0, or -1 for anything else. Pure. */
int ll_db_pooler_parse(const char *text, ll_db_pooler *out);
/* Whether a connection is pooled: the mode, and for AUTO the cancel key's process id against the
 * server's pg_backend_pid() (both as the server reports them). Pure. */
bool ll_db_pooler_decide(ll_db_pooler mode, int key_pid, long long server_pid);
/*
 * Asks an open connection whether a pooler answered it (ll_db_pooler_decide with mode AUTO and one
 * unnamed SELECT pg_backend_pid()), waiting at most timeout_ms for the answer (0 = no limit).
 * 1 = pooled, 0 = direct, -1 = the query failed or no answer came in time.
 */
int ll_db_conn_pooled(PGconn *conn, int64_t timeout_ms);

/*
 * Bounded waits on a connection (db_wait.c, db.response_timeout). libpq's blocking calls wait for
 * the server without a limit; these wait with poll() up to a deadline.
 *
 * ll_pq_await: the result of the statement just sent with a PQsend* call on conn, as PQexec would
 * return it (the last result, an error kept over what follows; caller PQclear()s it), or NULL when
 * the connection failed before any result. After timeout_ms (0 = no limit) it returns NULL with
 * *timed_out set: the connection is then mid-statement and must be PQfinish()ed.
 * ll_pq_exec_bounded: PQsendQuery(sql) then ll_pq_await (NULL also when it could not be sent).
 */
PGresult *ll_pq_await(PGconn *conn, int64_t timeout_ms, bool *timed_out);
PGresult *ll_pq_exec_bounded(PGconn *conn, const char *sql, int64_t timeout_ms, bool *timed_out);
/* Whether db.response_timeout (ms) is acceptable next to db.statement_timeout (ms, 0 = none): above
 * 0, and above the statement timeout so that the server's own limit answers first. 0 or -1. Pure. */
int ll_db_response_timeout_check(int64_t statement_timeout_ms, int64_t response_timeout_ms);
/* The next poll() wait in ms before deadline_ms (both monotonic ms): -1 = no deadline
 * (deadline_ms <= 0), 0 = the deadline has passed, else the time left (capped at INT_MAX). Pure. */
int ll_db_wait_slice_ms(int64_t now_ms, int64_t deadline_ms);

/* A connection and its prepared-statement cache. */
typedef struct ll_db {
    PGconn *conn;
    char *conninfo;  /* as configured */
    char *app;       /* application_name: the service */
    int tx_attempts; /* tries per transaction, ≥1 (contract: database.tx_attempts) */
    char **prepared; /* names prepared on this connection */
    size_t n_prepared, cap_prepared;
    ll_db_error err;
    /* Session limits set on every (re)connection, in ms (0 = the server's default, i.e. none):
     * statement_timeout, lock_timeout, idle_in_transaction_session_timeout. Every wait on the
     * database is bounded (docs/design.md §3); a timeout is SQLSTATE 57014 or 55P03 (ll_db_err_is_busy). */
    int64_t statement_timeout_ms, lock_timeout_ms, idle_tx_timeout_ms;
    /* db.response_timeout in ms: the longest wait for any answer on the connection, measured here
     * (0 = none, the default until ll_db_configure_timeouts); past it the connection is dropped
     * and the call fails as unavailable (SQLSTATE 08006). */
    int64_t response_timeout_ms;
    ll_db_pooler pooler; /* db.pooler; AUTO until ll_db_configure_timeouts reads it */
    bool pooled;         /* this connection goes through a transaction pooler (decided per connection) */
    bool announce;       /* log (db_pooled) when a connection turns out pooled: set for services */
    /* µs this handle has waited for answers (the server's work, the round trips, a commit's WAL
     * flush) since it was made: a caller takes differences, e.g. a batch's share of its time
     * (the loop's batch_done log line). Never reset; wraps after 292,000 years. */
    int64_t wait_us;
    /* Connections made (each ll_db_ensure that connected). A new connection may reach another
     * server than the last one (a failover behind a multi-host conninfo): the consumer loop reads
     * its positions again before it applies anything on it (docs/design.md §5). */
    uint64_t connects;
    /* The server answered read-only (SQLSTATE 25006: a standby, a node a pooler still holds, or
     * default_transaction_read_only): every write of this session would fail the same way, so the
     * next ll_db_ensure leaves it and connects again (libpq goes through the conninfo's hosts,
     * target_session_attrs=read-write picks the primary). */
    bool read_only;
} ll_db;

/* The database keys every service reads (db.statement_timeout, db.lock_timeout,
 * db.idle_in_transaction_timeout, db.response_timeout, db.pooler), for a service's key table;
 * {NULL}-terminated. */
extern const ll_config_key LL_DB_TIMEOUT_KEYS[];

/* The db.tx_attempts entry of a key table (tries of a transaction; ll_db_open takes at least 1),
 * one definition for the loop's table and the daemons'. */
#define LL_DB_TX_ATTEMPTS_KEY                                                                                \
    {                                                                                                        \
        "db.tx_attempts", "3", false, "tries per transaction on deadlock/serialization failure",             \
            LL_CONFIG_NO_RANGE                                                                               \
    }

/* Outcome of a database call. */
typedef enum ll_db_rc {
    LL_DB_OK = 0,
    LL_DB_ROLLBACK = 1,    /* the transaction function asked for a rollback (business rejection) */
    LL_DB_ERROR = -1,      /* an SQL error that retrying will not fix; see db->err */
    LL_DB_UNAVAILABLE = -2 /* no connection, or the server went away; retry later */
} ll_db_rc;

/* Opens the connection (application_name = app). Returns LL_DB_OK or LL_DB_UNAVAILABLE. */
ll_db_rc ll_db_open(ll_db *db, const char *conninfo, const char *app, int tx_attempts);
/* Closes the connection and frees the cache (the struct itself is the caller's). */
void ll_db_close(ll_db *db);
/* Reconnects when the connection is bad, or when its server answered read-only (db->read_only:
 * SQLSTATE 25006, logged as db_read_only). Returns LL_DB_OK or LL_DB_UNAVAILABLE. */
ll_db_rc ll_db_ensure(ll_db *db);
/*
 * Reads db.statement_timeout, db.lock_timeout, db.idle_in_transaction_timeout, db.response_timeout
 * (durations) and
 * db.pooler into db and applies them to an open connection at once (and to every later
 * reconnection). Call it right after ll_db_open. Returns 0, or -1 with err naming the key (bad
 * duration, a lock timeout not below the statement timeout, an unknown db.pooler).
 */
int ll_db_configure_timeouts(ll_db *db, const ll_config *cfg, char *err, size_t errlen);

/*
 * The one way a statement runs (db_exec.c): st with st->nparams text parameters (NULL = SQL NULL;
 * bound, never spliced), prepared by name once per connection, or sent unnamed behind a
 * transaction pooler (outside a transaction it then gets one of its own, so the limits bound it).
 * Waits at most db.response_timeout (ms) for the answer, and the server's statement and lock
 * timeouts bound it there.
 * Returns the result for PGRES_COMMAND_OK / PGRES_TUPLES_OK (owned by the caller: PQclear() it).
 * NULL on any failure, with db->err filled: the SQLSTATE (08003 no connection, 08006 connection
 * lost or no answer in time: the connection is then dropped), the constraint, the message; the
 * ll_db_err_is_* functions classify it. Never an apply decision (docs/design.md §3, the decision table).
 */
PGresult *ll_db_exec(ll_db *db, const ll_stmt *st, const char *const *params);
/* Work for the client's CPU while the server executes a statement (ll_db_exec_meanwhile). */
typedef void (*ll_db_meanwhile_fn)(void *arg);
/*
 * ll_db_exec, with meanwhile(arg) run on this thread after the statement is sent and before its
 * answer is awaited: the client's own work (e.g. encoding the replies of a batch whose rows the
 * statement writes) overlaps the server's instead of following it (docs/design.md §3: the loop's CPU ran in
 * series with the database's). meanwhile runs exactly once, also when nothing could be sent (on a
 * pooled connection outside a transaction, before the statement); it must not use db. Returns and
 * fails as ll_db_exec.
 */
PGresult *ll_db_exec_meanwhile(ll_db *db, const ll_stmt *st, const char *const *params,
                               ll_db_meanwhile_fn meanwhile, void *arg);
/* ll_db_exec for a statement whose rows are not needed (the result is freed here): LL_DB_OK, or
 * LL_DB_ERROR whatever the failure (db->err says which; ll_db_err_is_unavailable tells an outage). */
ll_db_rc ll_db_exec_discard(ll_db *db, const ll_stmt *st, const char *const *params);
/* Executes a plain command without parameters (BEGIN, SAVEPOINT ...). LL_DB_OK or an error. On a
 * pooled connection a command starting with "BEGIN" is followed by the transaction's limits. */
ll_db_rc ll_db_command(ll_db *db, const char *sql);
/* Number of rows the command changed. */
long ll_db_affected(const PGresult *res);

/* The class of db->err: retryable (40P01, 40001), unavailable (08xxx, 57P0x, bad connection). */
bool ll_db_err_is_retryable(const ll_db *db);
bool ll_db_err_is_unavailable(const ll_db *db);
/* The SQLSTATE part of ll_db_err_is_unavailable, for a caller that knows the connection's state:
 * 08xxx, 57P0x, 25006 (read-only), or none recorded. */
bool ll_db_err_state_is_unavailable(const ll_db *db);
/* An error caused by the input (SQLSTATE class 22 data exception or 23 integrity violation). */
bool ll_db_err_is_input(const ll_db *db);
/* True for a bounded wait that ran out: statement timeout (57014) or lock timeout (55P03). The
 * message is held and retried with backoff, never dead-lettered (docs/design.md §3). */
bool ll_db_err_is_busy(const ll_db *db);

/*
 * A transaction body: runs inside BEGIN ... COMMIT. Returns LL_DB_OK to commit, LL_DB_ROLLBACK
 * to roll back on purpose, or LL_DB_ERROR / LL_DB_UNAVAILABLE after a failed call (db->err set).
 * It must be safe to run again from the start (it will be, on deadlock).
 */
typedef ll_db_rc (*ll_tx_fn)(ll_db *db, void *arg);

/*
 * Runs fn in a READ COMMITTED transaction, re-running it on 40P01/40001 up to db->tx_attempts
 * tries. Returns LL_DB_OK (committed), LL_DB_ROLLBACK (rolled back as asked), LL_DB_ERROR or
 * LL_DB_UNAVAILABLE (rolled back; db->err says why).
 */
ll_db_rc ll_db_transaction(ll_db *db, ll_tx_fn fn, void *arg);

/* Cell helpers: the text of (row, col) or NULL for SQL NULL; ll_db_ll: the cell as an integer,
 * dflt for SQL NULL or a text that is not one whole decimal integer (ll_db_parse_ll). */
const char *ll_db_text(const PGresult *res, int row, int col);
long long ll_db_ll(const PGresult *res, int row, int col, long long dflt);
/* Parses text as one whole base-10 integer (optional sign, no spaces, no trailing characters, in
 * the range of long long) into *out: 0, or -1 with *out untouched. NULL text is -1. */
int ll_db_parse_ll(const char *text, long long *out);
bool ll_db_bool(const PGresult *res, int row, int col);

#endif
