/*
 * log.c - JSON log lines on stdout, one object per line, flushed at once so a supervisor sees
 * them in order with other processes' lines. A line is written whole under the stream's lock
 * (librdkafka's threads log too: ll_kafka_log_to_json).
 */
#include "ll/log.h"
#include "ll/config.h"
#include "ll/redact.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static char g_service[64] = "loadledger";
static ll_level g_min = LL_INFO;
static FILE *g_out;

const char *const LL_LOG_LEVEL_NAMES[] = {"debug", "info", "warn", "error", NULL};

void ll_log_init(const char *service, ll_level min_level)
{
    snprintf(g_service, sizeof g_service, "%s", service);
    g_min = min_level;
}

void ll_log_output(FILE *out)
{
    g_out = out;
}

/* The length a UTF-8 sequence with lead byte c has (2-4), 0 for a byte that cannot lead one. */
static size_t lead_len(unsigned char c)
{
    return c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
}

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, no surrogates,
 * at most U+10FFFF), 0 when there is none. Reads no byte past a NUL. */
static size_t utf8_seq(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    size_t n = lead_len(p[0]);
    unsigned char lo = p[0] == 0xE0 ? 0xA0 : p[0] == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = p[0] == 0xED ? 0x9F : p[0] == 0xF4 ? 0x8F : 0xBF;
    if (!n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

size_t ll_log_utf8_clean(char *s)
{
    unsigned char *p = (unsigned char *)s;
    size_t i = 0;
    while (p[i]) {
        size_t n = utf8_seq(p + i);
        if (n) {
            i += n;
            continue;
        }
        size_t want = lead_len(p[i]), k = 1;
        while (k < want && p[i + k] >= 0x80 && p[i + k] <= 0xBF)
            k++;
        if (want && k < want && p[i + k] == '\0') { /* cut by the end of the string */
            p[i] = '\0';
            break;
        }
        p[i++] = '?';
    }
    return i;
}

int ll_log_level_parse(const char *name, ll_level *out)
{
    int i = ll_config_enum("log.level", name, LL_LOG_LEVEL_NAMES, NULL, 0);
    if (i < 0)
        return -1;
    *out = (ll_level)i;
    return 0;
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
    ll_log_utf8_clean(msg); /* else json_string refuses it and the line has no msg */

    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof ts - n, ".%03dZ", (int)(tv.tv_usec / 1000));

    json_t *o = json_object();
    json_object_set_new(o, "ts", json_string(ts));
    json_object_set_new(o, "level", json_string(LL_LOG_LEVEL_NAMES[level]));
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
        FILE *out = g_out ? g_out : stdout;
        flockfile(out); /* one line whole, whichever thread writes */
        fputs(line, out);
        fputc('\n', out);
        fflush(out);
        funlockfile(out);
        free(line);
    }
    json_decref(o);
}

void ll_log_safe_conninfo(const char *conninfo, char *out, size_t outlen)
{
    ll_redact_conninfo(conninfo, out, outlen);
}
