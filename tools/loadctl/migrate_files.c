/*
 * migrate_files.c - the migrations folder: its *.sql files in name order with their sha256
 * (migrate.h).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/dlq.h"
#include "migrate.h"

const char *lc_mig_state(const lc_mig *m)
{
    if (!m->has_row)
        return "pending";
    if (!m->has_file)
        return "missing-file";
    return !m->row_sum[0] || strcmp(m->row_sum, m->file_sum) == 0 ? "applied" : "changed";
}

char *lc_mig_read(const char *dir, const char *version, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.sql", dir, version);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = '\0';
        *len = (size_t)n;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

static int by_version(const void *a, const void *b)
{
    return strcmp(((const lc_mig *)a)->version, ((const lc_mig *)b)->version);
}

int lc_mig_scan(const char *dir, lc_mig *m, size_t *n, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    *n = 0;
    if (!d) {
        snprintf(err, errlen, "cannot open the migrations folder %s", dir);
        return -1;
    }
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".sql") != 0)
            continue;
        if (*n >= LC_MIG_MAX || len - 4 >= sizeof m->version) {
            snprintf(err, errlen, "%s: more than %d files or a name too long", dir, LC_MIG_MAX);
            rc = -1;
            break;
        }
        lc_mig *x = &m[(*n)++];
        memset(x, 0, sizeof *x);
        snprintf(x->version, sizeof x->version, "%.*s", (int)(len - 4), e->d_name);
        x->seq = (int)strtol(x->version, NULL, 10);
        x->has_file = true;
        x->duration_ms = -1;
    }
    closedir(d);
    qsort(m, *n, sizeof *m, by_version);
    for (size_t i = 0; rc == 0 && i < *n; i++) {
        size_t len = 0;
        char *bytes = lc_mig_read(dir, m[i].version, &len);
        if (!bytes) {
            snprintf(err, errlen, "cannot read %s/%s.sql", dir, m[i].version);
            rc = -1;
            break;
        }
        ll_sha256_hex(bytes, len, m[i].file_sum);
        free(bytes);
    }
    return rc;
}
