/*
 * log.c - JSON log lines on stdout, one object per line, flushed at once so a supervisor sees
 * them in order with other processes' lines.
 */
#include "ll/log.h"
#include "ll/redact.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static char g_service[64] = "loadledger";
static ll_level g_min = LL_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void ll_log_init(const char *service, ll_level min_level)
{
    snprintf(g_service, sizeof g_service, "%s", service);
    g_min = min_level;
}

int ll_log_level_parse(const char *name, ll_level *out)
{
    for (int i = 0; i < 4; i++)
        if (name && strcmp(name, level_names[i]) == 0)
            return (*out = (ll_level)i), 0;
    return -1;
}

void ll_log_json(ll_level level, const ll_log_ctx *ctx, const char *event, json_t *fields, const char *fmt,
                 ...)
{
    if (level < g_min) {
        json_decref(fields);
        return;
    }
    char msg[2048], ts[40];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03dZ", (int)(tv.tv_usec / 1000));

    json_t *o = json_object();
    json_object_set_new(o, "ts", json_string(ts));
    json_object_set_new(o, "level", json_string(level_names[level]));
    json_object_set_new(o, "service", json_string(g_service));
    json_object_set_new(o, "event", json_string(event));
    json_object_set_new(o, "msg", json_string(msg));
    if (ctx) {
        if (ctx->run_id)
            json_object_set_new(o, "runId", json_string(ctx->run_id));
        if (ctx->partition_id)
            json_object_set_new(o, "partitionId", json_string(ctx->partition_id));
        if (ctx->topic)
            json_object_set_new(o, "topic", json_string(ctx->topic));
        if (ctx->kafka_partition >= 0)
            json_object_set_new(o, "kafkaPartition", json_integer(ctx->kafka_partition));
        if (ctx->offset >= 0)
            json_object_set_new(o, "offset", json_integer(ctx->offset));
    }
    if (json_is_object(fields))
        json_object_update(o, fields);
    json_decref(fields);
    char *line = json_dumps(o, JSON_COMPACT);
    if (line) {
        fputs(line, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(line);
    }
    json_decref(o);
}

void ll_log_safe_conninfo(const char *conninfo, char *out, size_t outlen)
{
    ll_redact_conninfo(conninfo, out, outlen);
}
