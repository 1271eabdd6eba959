/*
 * version.c - the build's version and commit (version.h), from the header cmake/version.cmake
 * generates on every build (only this file includes it, so a new commit recompiles only this file).
 */
#include "ll/version.h"

#include "ll/log.h"
#include "ll_build_version.h"

const char *ll_version(void)
{
    return LL_BUILD_VERSION;
}

const char *ll_version_commit(void)
{
    return LL_BUILD_COMMIT;
}

void ll_version_print(FILE *out, const char *binary)
{
    fprintf(out, "%s %s (%s)\n", binary, LL_BUILD_VERSION, LL_BUILD_COMMIT);
}

void ll_version_log(const char *binary)
{
    ll_log_json(LL_INFO, NULL, "service_starting",
                json_pack("{s:s,s:s}", "version", LL_BUILD_VERSION, "commit", LL_BUILD_COMMIT),
                "%s %s (%s) starting", binary, LL_BUILD_VERSION, LL_BUILD_COMMIT);
}
