/*
 * version.h - what a binary was built from (docs/operations.md, "Versions and logs"): the
 * project's version, set in one place (project(VERSION) in CMakeLists.txt), and the commit
 * (`git describe --always --dirty` at build time, cmake/version.cmake; "unknown" when built from
 * a tree that is no git checkout, e.g. a source tarball). `--version` of every service and of
 * loadctl prints them, the metric loadledger_build_info carries them, and a service's first log
 * line (service_starting) names them.
 */
#ifndef LL_VERSION_H
#define LL_VERSION_H

#include <stdio.h>

/* The project's version, e.g. "0.1.0" (a static string). */
const char *ll_version(void);
/* The commit the binary was built from, e.g. "84352e8" or "84352e8-dirty", else "unknown" (a
 * static string of [A-Za-z0-9._+-] only). */
const char *ll_version_commit(void);
/* Writes the line `--version` prints, "<binary> <version> (<commit>)\n", to out. */
void ll_version_print(FILE *out, const char *binary);
/* Writes a service's first log line (event service_starting, level info, with the fields version
 * and commit): "<binary> <version> (<commit>) starting". Call right after ll_log_init. */
void ll_version_log(const char *binary);

#endif
