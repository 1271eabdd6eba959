/*
 * db_int.h - what the database files share (not a public header; ll/db.h is the public one):
 *
 *   db.c         the connection: open, close, reconnect, the session's limits and pooler mode
 *   db_pooler.c  whether a transaction pooler answered (pure decision and its one query)
 *   db_wait.c    bounded waits for an answer (db.response_timeout)
 *   db_exec.c    statements, plain commands, the retrying transaction; the prepared cache
 *   db_err.c     the last error, recorded and classified
 *   db_cells.c   reading result cells
 */
#ifndef LL_DB_INT_H
#define LL_DB_INT_H

#include <stdbool.h>

#include "ll/db.h"

/* db_err.c: records db->err (NULL strings become ""; trailing newlines and spaces dropped). */
void ll_db_set_err(ll_db *db, const char *state, const char *constraint, const char *msg);
/* A connection-level failure with SQLSTATE state: libpq's message, passwords replaced. */
void ll_db_set_conn_err(ll_db *db, const char *state);
/* The error of a failed result (NULL: the connection's). */
void ll_db_set_err_from_result(ll_db *db, const PGresult *res);

/* db_exec.c */
/* Forgets the statements prepared on the connection (a new connection prepares them again). */
void ll_db_forget_prepared(ll_db *db);
/* The answer to the statement just sent (sent: what PQsend* returned), awaited at most
 * db.response_timeout; caller PQclear()s it. NULL with db->err filled when nothing could be sent
 * or no answer came in time (the connection is then dropped). */
PGresult *ll_db_await_answer(ll_db *db, int sent);

/* db.c: sets db's limits (and jit off) for the session, or (local) for the open transaction only. 0, or -1
 * with db->err filled. */
int ll_db_apply_timeouts(ll_db *db, bool local);

#endif
