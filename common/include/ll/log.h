/*
 * log.h - structured logs: one JSON object per line on stdout.
 *
 * Every line has ts (UTC, ms), level, service, event (a stable code such as chunk_recorded) and
 * msg; lines about a message carry runId, partitionId, topic, kafkaPartition and offset
 * (docs/contract.md §10.2, kafka-edition.md). Raw secrets are never logged: callers log conninfo only
 * through ll_log_safe_conninfo.
 *
 * Thread-safe: librdkafka's threads write its own lines through ll_kafka_log_to_json (kclient.h)
 * while the service's thread writes; each line is written whole under the stream's lock.
 */
#ifndef LL_LOG_H
#define LL_LOG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum ll_level { LL_DEBUG = 0, LL_INFO, LL_WARN, LL_ERROR } ll_level;

/* Where a line comes from: any field may be NULL / negative to leave it out. Borrowed. */
typedef struct ll_log_ctx {
    const char *run_id;
    const char *partition_id;
    const char *topic;
    int32_t kafka_partition; /* -1 = none */
    int64_t offset;          /* -1 = none */
} ll_log_ctx;

/* Sets the service name written on every line and the lowest level written. */
void ll_log_init(const char *service, ll_level min_level);
/* Where the lines go: stdout (the default, the services) or another stream (loadctl: stderr,
 * its stdout being its output). Borrowed; call before any line is written. */
void ll_log_output(FILE *out);
/* The words of log.level in ll_level's order ("debug", "info", "warn", "error"), NULL-terminated:
 * the index ll_config_enum returns is the level. Static. */
extern const char *const LL_LOG_LEVEL_NAMES[];
/* Parses debug/info/warn/error. Returns 0, or -1 for an unknown name. */
int ll_log_level_parse(const char *name, ll_level *out);

/* Writes one line: ctx may be NULL; fields (may be NULL) is a JSON object whose members are
 * added to the line, and is released (stolen). */
void ll_log_json(ll_level level, const ll_log_ctx *ctx, const char *event, json_t *fields, const char *fmt,
                 ...) __attribute__((format(printf, 5, 6)));

/* ll_log_json without extra fields. */
#define ll_log(level, ctx, event, ...) ll_log_json((level), (ctx), (event), NULL, __VA_ARGS__)

/* Makes s (NUL-terminated) valid UTF-8 in place, as a JSON string needs: every byte that does not
 * belong to a well-formed sequence becomes '?', a sequence cut by the end of s (a bounded
 * snprintf) is dropped. Returns the length of s. Pure. */
size_t ll_log_utf8_clean(char *s);

/* Copies a libpq conninfo into out (outlen bytes, NUL-terminated) with every password replaced
 * by "***" (ll_redact_conninfo in redact.h: keyword and URI forms, a URI given as dbname). */
void ll_log_safe_conninfo(const char *conninfo, char *out, size_t outlen);

/* The log.level entry of a key table (ll/config.h), one definition for the loop's table and the
 * daemons'. */
#define LL_LOG_LEVEL_KEY                                                                                     \
    {                                                                                                        \
        "log.level", "info", false, "debug, info, warn or error", LL_CONFIG_NO_RANGE                         \
    }

#endif
