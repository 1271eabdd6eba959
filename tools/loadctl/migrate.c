/*
 * migrate.c - `loadctl migrate`: applies schemas/sql/NNNN_*.sql in name order, each file not yet
 * recorded in nifi_ops.schema_migrations in one transaction together with its version row.
 * An advisory lock keeps two migrators from racing. With --json the result is one object,
 * {"ok": true, "dir", "applied": [versions applied now], "appliedCount"}, or lc_fail's on failure
 * (DATABASE_ERROR naming the file, with the versions applied before it in details.applied).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loadctl.h"

static const char SQL_BOOTSTRAP[] =
    "CREATE SCHEMA IF NOT EXISTS nifi_ops;"
    "CREATE TABLE IF NOT EXISTS nifi_ops.schema_migrations ("
    " version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT clock_timestamp())";

static const char SQL_APPLIED[] = "SELECT 1 FROM nifi_ops.schema_migrations WHERE version = $1";
static const char SQL_RECORD[] = "INSERT INTO nifi_ops.schema_migrations (version) VALUES ($1)";

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *default_dir(void)
{
    const char *d = getenv("LL_MIGRATIONS_DIR");
    if (d)
        return d;
    if (access(LL_DEFAULT_DATADIR "/schemas/sql/0001_nifi_ops_baseline.sql", R_OK) == 0)
        return LL_DEFAULT_DATADIR "/schemas/sql";
    return LL_SOURCE_DIR "/schemas/sql";
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n)
        buf[n] = '\0';
    else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

/* The first failure of this process's migration, "<what>: <server message>" (one command per
 * process, single-threaded: lc_migrate reports it once at the end). */
static char failure[512];

static int exec_ok(PGconn *c, const char *sql, const char *what)
{
    PGresult *r = PQexec(c, sql);
    int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    if (!ok && !failure[0])
        snprintf(failure, sizeof failure, "%s: %s", what, PQresultErrorMessage(r));
    PQclear(r);
    return ok ? 0 : -1;
}

/* Applies one file unless recorded; *applied tells whether it ran. */
static int apply_one(PGconn *c, const char *dir, const char *file, int *applied)
{
    char path[2048], version[256];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    snprintf(version, sizeof version, "%.*s", (int)(strlen(file) - 4), file);
    *applied = 0;
    if (exec_ok(c, "BEGIN", "begin") ||
        exec_ok(c, "SELECT pg_advisory_xact_lock(hashtext('loadledger_migrate'))", "lock"))
        return -1;
    const char *p[1] = {version};
    PGresult *r = PQexecParams(c, SQL_APPLIED, 1, NULL, p, NULL, NULL, 0);
    int done = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0;
    PQclear(r);
    if (done)
        return exec_ok(c, "COMMIT", "commit");
    char *sql = read_file(path);
    if (!sql) {
        snprintf(failure, sizeof failure, "cannot read %.480s", path);
        exec_ok(c, "ROLLBACK", "rollback");
        return -1;
    }
    int rc = exec_ok(c, sql, file);
    free(sql);
    if (rc == 0) {
        r = PQexecParams(c, SQL_RECORD, 1, NULL, p, NULL, NULL, 0);
        rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -1;
        PQclear(r);
    }
    if (rc != 0) {
        exec_ok(c, "ROLLBACK", "rollback");
        return -1;
    }
    *applied = 1;
    return exec_ok(c, "COMMIT", "commit");
}

static const char USAGE[] =
    "usage: loadctl migrate [--dir DIR] [--json]\n\n"
    "Applies schemas/sql/NNNN_*.sql not yet recorded in nifi_ops.schema_migrations, each in one\n"
    "transaction (as the migration account, not ll_operator). DIR defaults to $LL_MIGRATIONS_DIR,\n"
    "else the installed schemas, else the source tree.\n";

int lc_migrate(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *dir = default_dir(), *pos[1];
    int npos;
    lc_optspec specs[] = {{"dir", &dir, NULL}, {NULL, NULL, NULL}};
    int rc0 = lc_args(o, USAGE, argc, argv, specs, pos, 0, 0, &npos);
    if (rc0 != LC_CONTINUE)
        return rc0;
    DIR *d = opendir(dir);
    if (!d)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "cannot open the migrations folder %s", dir);
    char *files[512];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && n < 512;) {
        size_t len = strlen(e->d_name);
        if (len > 4 && strcmp(e->d_name + len - 4, ".sql") == 0)
            files[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(files, n, sizeof *files, cmp);
    PGconn *c = lc_connect(o);
    int rc = c ? LC_OK : LC_DB;
    if (c && exec_ok(c, "SET client_min_messages = warning", "settings") == 0 &&
        exec_ok(c, SQL_BOOTSTRAP, "bootstrap") != 0)
        rc = LC_DB;
    json_t *done = json_array(); /* the versions applied now */
    for (size_t i = 0; i < n; i++) {
        int applied = 0;
        if (rc == LC_OK && apply_one(c, dir, files[i], &applied) != 0)
            rc = LC_DB;
        if (rc == LC_OK && applied) {
            if (!o->json)
                printf("applied %s\n", files[i]);
            json_array_append_new(done, json_stringn(files[i], strlen(files[i]) - 4));
        }
        free(files[i]);
    }
    size_t count = json_array_size(done);
    if (rc == LC_OK && o->json) {
        json_t *j = json_pack("{s:b,s:o,s:O,s:I}", "ok", 1, "dir", lc_json_str(dir), "applied", done,
                              "appliedCount", (json_int_t)count);
        lc_print_json(j);
    } else if (rc == LC_OK) {
        printf("migrations up to date (%zu applied now)\n", count);
    } else if (c) {
        /* not a connection failure: lc_connect has reported that one */
        rc = lc_fail(o, LC_DB, "DATABASE_ERROR", json_pack("{s:O}", "applied", done), "%s",
                     failure[0] ? failure : "migration failed");
    }
    json_decref(done);
    if (c)
        PQfinish(c);
    return rc;
}
