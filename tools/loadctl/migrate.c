/*
 * migrate.c - `loadctl migrate` and `loadctl migrate status` (schemas/sql/README.md has the rules,
 * docs/operations.md "Schema versions" what an operator sees).
 *
 * migrate: applies schemas/sql/NNNN_*.sql in name order, each file not yet recorded in
 * nifi_ops.schema_migrations in one transaction together with its history row (its sha256, who,
 * how long); refuses everything (exit 2, MIGRATION_CHANGED) when an applied file's bytes no longer
 * match the checksum recorded. status: every migration applied, pending, changed or missing-file
 * (exit 0 all applied, 5 some pending or changed). The history and its locking are
 * migrate_db.c's, the folder migrate_files.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loadctl.h"
#include "migrate.h"

static const char *default_dir(void)
{
    const char *d = getenv("LL_MIGRATIONS_DIR");
    if (d)
        return d;
    if (access(LL_DEFAULT_DATADIR "/schemas/sql/0001_nifi_ops_baseline.sql", R_OK) == 0)
        return LL_DEFAULT_DATADIR "/schemas/sql";
    return LL_SOURCE_DIR "/schemas/sql";
}

static const char USAGE[] =
    "usage: loadctl migrate [status] [--dir DIR] [--lock-timeout D] [--statement-timeout D] [--json]\n\n"
    "migrate: applies the files of DIR (NNNN_name.sql) not yet recorded in nifi_ops.schema_migrations,\n"
    "in name order, each in one transaction with its history row (sha256 of the file, applied_at,\n"
    "applied_by, duration_ms), as the migration account (not ll_operator). Refuses (exit 2,\n"
    "MIGRATION_CHANGED) when an applied file was changed: never edit an applied file, add the next\n"
    "number. Rows of an older loadctl (no checksum) are baselined with the file's checksum first.\n"
    "status: each migration applied, pending, changed or missing-file; exit 0 when all are applied,\n"
    "5 when some are pending or an applied file changed.\n\n"
    "DIR defaults to $LL_MIGRATIONS_DIR, else the installed schemas, else the source tree.\n"
    "--lock-timeout (default PT10S) bounds the wait for another migrator or a busy table,\n"
    "--statement-timeout (default PT15M, 0 none) each migration's statements.\n";

/* A migration as JSON. */
static json_t *mig_json(const lc_mig *m)
{
    json_t *j = json_pack("{s:s,s:i,s:s}", "version", m->version, "seq", m->seq, "state", lc_mig_state(m));
    json_object_set_new(j, "checksum", m->has_row && m->row_sum[0] ? json_string(m->row_sum) : json_null());
    json_object_set_new(j, "fileChecksum", m->has_file ? json_string(m->file_sum) : json_null());
    json_object_set_new(j, "appliedAt", m->applied_at[0] ? json_string(m->applied_at) : json_null());
    json_object_set_new(j, "appliedBy", m->applied_by[0] ? lc_json_str(m->applied_by) : json_null());
    json_object_set_new(j, "durationMs", m->duration_ms >= 0 ? json_integer(m->duration_ms) : json_null());
    json_object_set_new(j, "baselined", json_boolean(m->baselined));
    return j;
}

/* The ledger's schema version: the highest seq recorded. */
static int schema_version(const lc_mig *m, size_t n)
{
    int v = 0;
    for (size_t i = 0; i < n; i++)
        if (m[i].has_row && m[i].seq > v)
            v = m[i].seq;
    return v;
}

/* The first applied file whose bytes changed, or NULL. */
static const lc_mig *first_changed(const lc_mig *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(lc_mig_state(&m[i]), "changed") == 0)
            return &m[i];
    return NULL;
}

static int refuse_changed(const lc_opts *o, const char *dir, const lc_mig *x)
{
    json_t *d = json_pack("{s:s,s:s,s:s,s:s}", "version", x->version, "dir", dir, "recordedChecksum",
                          x->row_sum, "fileChecksum", x->file_sum);
    return lc_fail(o, LC_MIG_CHANGED, "MIGRATION_CHANGED", d,
                   "applied migration %s/%s.sql was changed: recorded sha256 %s, file sha256 %s; restore the "
                   "applied file and put the change in a new migration",
                   dir, x->version, x->row_sum, x->file_sum);
}

static int status(const lc_opts *o, const char *dir, const lc_mig *m, size_t n)
{
    int pending = 0, changed = 0, missing = 0;
    for (size_t i = 0; i < n; i++) {
        const char *st = lc_mig_state(&m[i]);
        pending += strcmp(st, "pending") == 0;
        changed += strcmp(st, "changed") == 0;
        missing += strcmp(st, "missing-file") == 0;
    }
    int rc = changed || pending ? LC_MIG_FOUND : LC_OK;
    if (o->json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(arr, mig_json(&m[i]));
        json_t *j = json_pack("{s:b,s:i,s:s,s:i,s:i,s:i,s:i}", "ok", rc == LC_OK, "exitCode", rc, "dir", dir,
                              "schemaVersion", schema_version(m, n), "pending", pending, "changed", changed,
                              "missingFile", missing);
        json_object_set_new(j, "migrations", arr);
        lc_print_json(j);
        return rc;
    }
    printf("%-36s %-13s %-24s %-16s %s\n", "VERSION", "STATE", "APPLIED_AT", "APPLIED_BY", "SHA256");
    for (size_t i = 0; i < n; i++) {
        const lc_mig *x = &m[i];
        const char *st = lc_mig_state(x);
        printf("%-36s %-13s %-24s %-16s %.12s%s\n", x->version, st, x->applied_at[0] ? x->applied_at : "-",
               x->applied_by[0] ? x->applied_by : "-", x->has_row && x->row_sum[0] ? x->row_sum : x->file_sum,
               x->baselined                   ? " (baselined)"
               : x->has_row && !x->row_sum[0] ? " (not verified: no checksum recorded yet)"
                                              : "");
        if (strcmp(st, "changed") == 0)
            printf("  recorded %s\n  file     %s\n", x->row_sum, x->file_sum);
    }
    printf("schema version %04d: %d pending, %d changed, %d missing-file\n", schema_version(m, n), pending,
           changed, missing);
    return rc;
}

static int apply_pending(const lc_opts *o, PGconn *c, const lc_mig_limits *lim, const char *dir, lc_mig *m,
                         size_t n)
{
    json_t *applied = json_array(); /* the versions applied now */
    char err[1024];
    for (size_t i = 0; i < n; i++) {
        if (m[i].has_row || !m[i].has_file)
            continue;
        bool ran = false;
        if (lc_mig_apply(c, lim, dir, &m[i], &ran, err, sizeof err) != 0)
            return lc_fail(o, LC_DB, "DATABASE_ERROR",
                           json_pack("{s:s,s:o}", "version", m[i].version, "applied", applied), "%s", err);
        if (!ran)
            continue; /* another migrator applied it meanwhile */
        m[i].has_row = true;
        snprintf(m[i].row_sum, sizeof m[i].row_sum, "%s", m[i].file_sum);
        json_array_append_new(applied, json_string(m[i].version));
        if (!o->json)
            printf("applied %s (%d ms, sha256 %.12s)\n", m[i].version, m[i].duration_ms, m[i].file_sum);
    }
    size_t count = json_array_size(applied);
    if (o->json) {
        json_t *j = json_pack("{s:b,s:i,s:o,s:o,s:I,s:i}", "ok", 1, "exitCode", LC_OK, "dir",
                              lc_json_str(dir), "applied", applied, "appliedCount", (json_int_t)count,
                              "schemaVersion", schema_version(m, n));
        lc_print_json(j);
    } else {
        json_decref(applied);
        printf("migrations up to date (%zu applied now, schema version %04d)\n", count, schema_version(m, n));
    }
    return LC_OK;
}

/* A duration option into ms (0 allowed); 0, or -1. */
static int duration_opt(const char *s, long *ms)
{
    int64_t v = 0;
    if (strcmp(s, "0") == 0) {
        *ms = 0;
        return 0;
    }
    if (lc_parse_duration(s, &v) != 0 || v > 86400000L * 7)
        return -1;
    *ms = (long)v;
    return 0;
}

int lc_migrate(const lc_opts *go, int argc, char **argv)
{
    lc_opts opts = *go, *o = &opts;
    const char *dir = default_dir(), *pos[1] = {NULL}, *lock_s = "PT10S", *stmt_s = "PT15M";
    int npos = 0;
    lc_optspec specs[] = {{"dir", &dir, NULL},
                          {"lock-timeout", &lock_s, NULL},
                          {"statement-timeout", &stmt_s, NULL},
                          {NULL, NULL, NULL}};
    int rc0 = lc_args(o, USAGE, argc, argv, specs, pos, 0, 1, &npos);
    if (rc0 != LC_CONTINUE)
        return rc0;
    bool show = npos == 1;
    if (show && strcmp(pos[0], "status") != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "unknown migrate command '%s' (status)", pos[0]);
    lc_mig_limits lim;
    if (duration_opt(lock_s, &lim.lock_timeout_ms) != 0 ||
        duration_opt(stmt_s, &lim.statement_timeout_ms) != 0)
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "--lock-timeout and --statement-timeout take a duration");
    lc_mig *m = calloc(LC_MIG_MAX, sizeof *m);
    size_t n = 0;
    char err[1024];
    if (!m)
        return lc_fail(o, LC_DB, "DATABASE_ERROR", NULL, "out of memory");
    if (lc_mig_scan(dir, m, &n, err, sizeof err) != 0) {
        free(m);
        return lc_fail(o, LC_USAGE, "USAGE", NULL, "%s", err);
    }
    PGconn *c = lc_connect(o);
    int rc = LC_DB;
    if (!c) {
        free(m);
        return rc;
    }
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    /* status only reads (as ll_operator too); migrate brings the history up to date first */
    if ((!show && lc_mig_bootstrap(c, &lim, m, n, err, sizeof err) != 0) ||
        lc_mig_history(c, m, &n, err, sizeof err) != 0) {
        rc = lc_fail(o, LC_DB, "DATABASE_ERROR", NULL, "%s", err);
    } else if (show) {
        rc = status(o, dir, m, n);
    } else {
        const lc_mig *x = first_changed(m, n);
        rc = x ? refuse_changed(o, dir, x) : apply_pending(o, c, &lim, dir, m, n);
    }
    PQfinish(c);
    free(m);
    return rc;
}
