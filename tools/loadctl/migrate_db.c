/*
 * migrate_db.c - the migration history nifi_ops.schema_migrations (migrate.h): its bootstrap on a
 * database of any age, the baseline of rows an older migrator wrote, reading it, and applying one
 * migration with its row. Every transaction here takes the migrators' advisory lock first, so
 * two migrators never run at once; lock_timeout bounds the wait for it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loadctl.h"
#include "ll/clock.h"
#include "migrate.h"

/* The one lock every migrator transaction takes (transaction-scoped: released by COMMIT). */
static const char SQL_LOCK[] = "SELECT pg_advisory_xact_lock(hashtext('loadledger_migrate'))";
static const char SQL_LIMITS[] = "SELECT set_config('lock_timeout', $1, true),"
                                 " set_config('statement_timeout', $2, true)";

/* The table as 0001 and the first migrator made it, then the columns this migrator records. */
static const char SQL_BOOTSTRAP[] =
    "CREATE SCHEMA IF NOT EXISTS nifi_ops;"
    "CREATE TABLE IF NOT EXISTS nifi_ops.schema_migrations ("
    " version text PRIMARY KEY, applied_at timestamptz DEFAULT clock_timestamp());"
    "ALTER TABLE nifi_ops.schema_migrations"
    " ADD COLUMN IF NOT EXISTS seq integer,"
    " ADD COLUMN IF NOT EXISTS checksum text,"
    " ADD COLUMN IF NOT EXISTS applied_by text,"
    " ADD COLUMN IF NOT EXISTS duration_ms integer,"
    " ADD COLUMN IF NOT EXISTS baselined boolean NOT NULL DEFAULT false;"
    "ALTER TABLE nifi_ops.schema_migrations ALTER COLUMN applied_by SET DEFAULT current_user";

/* A row of an older migrator (no checksum): its file's checksum now, marked baselined. */
static const char SQL_BASELINE[] = "UPDATE nifi_ops.schema_migrations SET checksum = $2, seq = $3::int,"
                                   " baselined = true WHERE version = $1 AND checksum IS NULL";

static const char SQL_HISTORY[] = "SELECT version, coalesce(checksum, ''), baselined, " LC_ISO(
    "applied_at") ", coalesce(applied_by, ''), coalesce(duration_ms, -1) FROM nifi_ops.schema_migrations"
                  " ORDER BY version";

/* Which shape the history has: 0 none, 1 the older migrator's (version, applied_at), 2 this one's. */
static const char SQL_SHAPE[] =
    "SELECT CASE WHEN to_regclass('nifi_ops.schema_migrations') IS NULL THEN 0"
    " WHEN EXISTS (SELECT 1 FROM information_schema.columns WHERE table_schema ="
    " 'nifi_ops' AND table_name = 'schema_migrations' AND column_name = 'baselined')"
    " THEN 2 ELSE 1 END";
/* The older migrator's rows, in the columns of SQL_HISTORY (no checksum yet: not verified). */
static const char SQL_HISTORY_OLD[] = "SELECT version, '', false, " LC_ISO(
    "applied_at") ", '', -1 FROM nifi_ops.schema_migrations ORDER BY version";

static const char SQL_APPLIED[] = "SELECT coalesce(checksum, '') FROM nifi_ops.schema_migrations"
                                  " WHERE version = $1";
static const char SQL_RECORD[] =
    "INSERT INTO nifi_ops.schema_migrations (version, seq, checksum, duration_ms)"
    " VALUES ($1, $2::int, $3, $4::int)";

/* Runs sql (no parameters, or nparams of p); 0 when it succeeded, else -1 with err. */
static int run(PGconn *c, const char *sql, int nparams, const char *const *p, const char *what, char *err,
               size_t errlen)
{
    PGresult *r = nparams ? PQexecParams(c, sql, nparams, NULL, p, NULL, NULL, 0) : PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    int ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok)
        snprintf(err, errlen, "%s: %s", what, PQresultErrorMessage(r));
    PQclear(r);
    return ok ? 0 : -1;
}

/* BEGIN, the limits, the lock. 0, or -1 with err (rolled back). */
static int begin_locked(PGconn *c, const lc_mig_limits *lim, char *err, size_t errlen)
{
    char lock_ms[24], stmt_ms[24];
    snprintf(lock_ms, sizeof lock_ms, "%ld", lim->lock_timeout_ms);
    snprintf(stmt_ms, sizeof stmt_ms, "%ld", lim->statement_timeout_ms);
    const char *p[2] = {lock_ms, stmt_ms};
    if (run(c, "BEGIN", 0, NULL, "begin", err, errlen) == 0 &&
        run(c, SQL_LIMITS, 2, p, "settings", err, errlen) == 0 &&
        run(c, SQL_LOCK, 0, NULL, "the migration lock (another migrator running?)", err, errlen) == 0)
        return 0;
    PQclear(PQexec(c, "ROLLBACK"));
    return -1;
}

static int end_tx(PGconn *c, int rc, char *err, size_t errlen)
{
    if (rc != 0) {
        PQclear(PQexec(c, "ROLLBACK"));
        return -1;
    }
    return run(c, "COMMIT", 0, NULL, "commit", err, errlen);
}

int lc_mig_bootstrap(PGconn *c, const lc_mig_limits *lim, const lc_mig *m, size_t n, char *err, size_t errlen)
{
    if (begin_locked(c, lim, err, errlen) != 0)
        return -1;
    int rc = run(c, SQL_BOOTSTRAP, 0, NULL, "history table", err, errlen);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char seq[16];
        snprintf(seq, sizeof seq, "%d", m[i].seq);
        const char *p[3] = {m[i].version, m[i].file_sum, seq};
        rc = run(c, SQL_BASELINE, 3, p, "baseline", err, errlen);
    }
    return end_tx(c, rc, err, errlen);
}

int lc_mig_history(PGconn *c, lc_mig *m, size_t *n, char *err, size_t errlen)
{
    PGresult *r = PQexec(c, SQL_SHAPE);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        snprintf(err, errlen, "history: %s", PQresultErrorMessage(r));
        PQclear(r);
        return -1;
    }
    char shape = PQgetvalue(r, 0, 0)[0];
    PQclear(r);
    if (shape == '0')
        return 0; /* no history: every file pending */
    r = PQexec(c, shape == '2' ? SQL_HISTORY : SQL_HISTORY_OLD);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        snprintf(err, errlen, "history: %s", PQresultErrorMessage(r));
        PQclear(r);
        return -1;
    }
    size_t files = *n;
    for (int i = 0; i < PQntuples(r); i++) {
        const char *v = PQgetvalue(r, i, 0);
        lc_mig *x = NULL;
        for (size_t k = 0; k < files && !x; k++)
            if (strcmp(m[k].version, v) == 0)
                x = &m[k];
        if (!x && *n < LC_MIG_MAX) {
            x = &m[(*n)++];
            memset(x, 0, sizeof *x);
            snprintf(x->version, sizeof x->version, "%s", v);
            x->seq = (int)strtol(v, NULL, 10);
        }
        if (!x)
            continue;
        x->has_row = true;
        snprintf(x->row_sum, sizeof x->row_sum, "%s", PQgetvalue(r, i, 1));
        x->baselined = PQgetvalue(r, i, 2)[0] == 't';
        snprintf(x->applied_at, sizeof x->applied_at, "%s", PQgetvalue(r, i, 3));
        snprintf(x->applied_by, sizeof x->applied_by, "%s", PQgetvalue(r, i, 4));
        x->duration_ms = (int)strtol(PQgetvalue(r, i, 5), NULL, 10);
    }
    PQclear(r);
    /* rows without a file were appended: keep the whole in version order (stable for the files) */
    for (size_t i = 1; i < *n; i++)
        for (size_t k = i; k > 0 && strcmp(m[k - 1].version, m[k].version) > 0; k--) {
            lc_mig t = m[k];
            m[k] = m[k - 1];
            m[k - 1] = t;
        }
    return 0;
}

int lc_mig_apply(PGconn *c, const lc_mig_limits *lim, const char *dir, lc_mig *m, bool *ran, char *err,
                 size_t errlen)
{
    *ran = false;
    size_t len = 0;
    char *sql = lc_mig_read(dir, m->version, &len);
    if (!sql) {
        snprintf(err, errlen, "cannot read %s/%s.sql", dir, m->version);
        return -1;
    }
    if (begin_locked(c, lim, err, errlen) != 0) {
        free(sql);
        return -1;
    }
    const char *pv[1] = {m->version};
    PGresult *r = PQexecParams(c, SQL_APPLIED, 1, NULL, pv, NULL, NULL, 0);
    int rc = PQresultStatus(r) == PGRES_TUPLES_OK ? 0 : -1;
    if (rc != 0)
        snprintf(err, errlen, "history: %s", PQresultErrorMessage(r));
    bool present = rc == 0 && PQntuples(r) > 0;
    PQclear(r);
    if (rc == 0 && !present) {
        long t0 = ll_now_ms();
        char what[300];
        snprintf(what, sizeof what, "%s.sql", m->version);
        rc = run(c, sql, 0, NULL, what, err, errlen);
        char seq[16], ms[24];
        long took = ll_now_ms() - t0;
        snprintf(seq, sizeof seq, "%d", m->seq);
        snprintf(ms, sizeof ms, "%ld", took);
        const char *p[4] = {m->version, seq, m->file_sum, ms};
        if (rc == 0)
            rc = run(c, SQL_RECORD, 4, p, "history row", err, errlen);
        m->duration_ms = (int)took;
        *ran = rc == 0;
    }
    free(sql);
    return end_tx(c, rc, err, errlen);
}
