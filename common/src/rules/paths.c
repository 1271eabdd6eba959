/*
 * paths.c - the names a run derives and the path checks on HDFS locations.
 *
 * docs/contract.md §5.1 step 2 (no ".." segment in hdfsRoot), §5.1 step 4 (hdfsRunPath and stageTable)
 * and §5.4 check 4 (a chunk's hdfsPath must lie below the run path: HDFS_PATH_OUTSIDE_RUN).
 * Paths are compared byte for byte, as the reference's str.startswith and str.split("/") do.
 */
#include "ll/rules.h"

#include <stdio.h>
#include <string.h>

/* True when any '/'-separated segment of path is exactly ".." (§5.1 step 2, §5.4 check 4). */
bool ll_path_has_dotdot(const char *path)
{
    if (path == NULL)
        return false;
    const char *seg = path;
    for (;;) {
        const char *end = strchr(seg, '/');
        size_t len = end != NULL ? (size_t)(end - seg) : strlen(seg);
        if (len == 2 && seg[0] == '.' && seg[1] == '.')
            return true;
        if (end == NULL)
            return false;
        seg = end + 1;
    }
}

/*
 * §5.1 step 4: hdfs_root minus trailing '/' + "/" + job_key + "/run_id=" + canonical run_id.
 * hdfs_root "/" gives "/<job>/run_id=<id>". Writes a NUL-terminated string into out[outlen].
 * Returns 0; -1 if an argument is NULL, run_id is not a UUID, or the result does not fit.
 */
int ll_hdfs_run_path(const char *hdfs_root, const char *job_key, const char *run_id, char *out, size_t outlen)
{
    char id[37];
    if (hdfs_root == NULL || job_key == NULL || out == NULL || ll_uuid_canonical(run_id, id) != 0)
        return -1;
    size_t root_len = strlen(hdfs_root);
    while (root_len > 0 && hdfs_root[root_len - 1] == '/')
        root_len--;
    if (root_len > (size_t)0x7fffffff)
        return -1; /* %.*s takes an int */
    int n = snprintf(out, outlen, "%.*s/%s/run_id=%s", (int)root_len, hdfs_root, job_key, id);
    return n >= 0 && (size_t)n < outlen ? 0 : -1;
}

/*
 * §5.1 step 4: lower-case(prefix + run_id's 32 hex digits without hyphens), into out[outlen].
 * Returns 0; -1 if an argument is NULL, run_id is not a UUID, or the result does not fit.
 */
int ll_stage_table(const char *prefix, const char *run_id, char *out, size_t outlen)
{
    char id[37];
    if (prefix == NULL || out == NULL || ll_uuid_canonical(run_id, id) != 0)
        return -1;
    size_t plen = strlen(prefix);
    if (outlen == 0 || plen > outlen - 1 || 32 > outlen - 1 - plen)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < plen; i++) {
        char c = prefix[i];
        out[o++] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    for (size_t i = 0; i < 36; i++)
        if (id[i] != '-')
            out[o++] = id[i]; /* already lower-case */
    out[o] = '\0';
    return 0;
}

/*
 * §5.4 check 4: hdfs_path starts with run_path + "/" (any depth below it, byte comparison) and
 * has no ".." segment. NULL run_path or hdfs_path fails (HDFS_PATH_OUTSIDE_RUN).
 */
bool ll_chunk_path_inside_run(const char *run_path, const char *hdfs_path)
{
    if (run_path == NULL || hdfs_path == NULL)
        return false;
    size_t n = strlen(run_path);
    if (strncmp(hdfs_path, run_path, n) != 0 || hdfs_path[n] != '/')
        return false;
    return !ll_path_has_dotdot(hdfs_path);
}
