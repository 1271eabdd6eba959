/*
 * migrate.h - the migrations folder and the history table shared by `loadctl migrate` and
 * `loadctl migrate status` (migrate.c: the commands and their output; migrate_db.c: the history
 * in the database; migrate_files.c: the files). schemas/sql/README.md has the rules.
 */
#ifndef LOADCTL_MIGRATE_H
#define LOADCTL_MIGRATE_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stddef.h>

/* The exit codes of the two commands besides 0, 1 (usage, an unreadable folder or file) and 3
 * (database): migrate refuses to run while an applied file was changed (2, the "refused by a
 * rule" code, MIGRATION_CHANGED); status found pending or changed migrations (5, loadctl's "a
 * check ran and found a problem", as verify's violations). */
enum { LC_MIG_CHANGED = 2, LC_MIG_FOUND = 5 };

/* The most migration files a folder may hold. */
#define LC_MIG_MAX 512

/* One migration: a file of the folder, a history row, or both. */
typedef struct lc_mig {
    char version[256];      /* the file name without ".sql": the history's key */
    int seq;                /* its leading number (0001 -> 1) */
    bool has_file, has_row; /* in the folder / in the history */
    char file_sum[65];      /* sha256 of the file's bytes, hex ("" without a file) */
    char row_sum[65];       /* the checksum recorded ("" without a row or when none recorded) */
    bool baselined;         /* the row was recorded by an older migrator, its checksum taken later */
    char applied_at[40];    /* ISO-8601 UTC ("" when pending) */
    char applied_by[128];   /* the role that applied it ("" when not recorded) */
    int duration_ms;        /* how long it took to apply, -1 when not recorded */
} lc_mig;

/* The state of a migration for status: "applied", "changed", "pending", "missing-file" (a row
 * without a checksum yet, of the older migrator before its baseline: "applied"). */
const char *lc_mig_state(const lc_mig *m);

/*
 * Reads the *.sql files of dir in name order into m[] (at most LC_MIG_MAX; their checksums
 * computed), *n their count. 0, or -1 with err (the folder cannot be read, a file cannot be read,
 * too many files).
 */
int lc_mig_scan(const char *dir, lc_mig *m, size_t *n, char *err, size_t errlen);
/* The bytes of dir/<version>.sql, malloc'd and NUL-terminated (caller frees); NULL when unreadable. */
char *lc_mig_read(const char *dir, const char *version, size_t *len);

/* Session settings of a migrator transaction: lock_timeout and statement_timeout (ms, 0 = none). */
typedef struct lc_mig_limits {
    long lock_timeout_ms, statement_timeout_ms;
} lc_mig_limits;

/*
 * Creates the history table if absent and adds its columns to one made by an older migrator
 * (checksum, seq, applied_by, duration_ms, baselined), then baselines every row without a
 * checksum whose file is among m[0..n): its checksum is the file's now, baselined true. One
 * transaction under the migrators' advisory lock. 0, or -1 with err.
 */
int lc_mig_bootstrap(PGconn *c, const lc_mig_limits *lim, const lc_mig *m, size_t n, char *err,
                     size_t errlen);
/*
 * Merges the history into m[] (n files on entry; rows without a file are appended, up to
 * LC_MIG_MAX, and the whole is kept in version order). Reads only: a missing table is an empty
 * history, the older migrator's table gives rows without checksums. 0, or -1 with err.
 */
int lc_mig_history(PGconn *c, lc_mig *m, size_t *n, char *err, size_t errlen);
/*
 * Applies the pending migration m (its file read from dir) in one transaction with its history
 * row, under the advisory lock and lim; a row that appeared meanwhile (another migrator) is left
 * alone (*ran = false). 0, or -1 with err.
 */
int lc_mig_apply(PGconn *c, const lc_mig_limits *lim, const char *dir, lc_mig *m, bool *ran, char *err,
                 size_t errlen);

#endif
