/*
 * obs_pure.c - the pure parts of what a service shows an operator (obs.h, unit-tested): the code
 * label set, the /healthz and /readyz answers, the consumer lag from librdkafka's statistics, the
 * labels of a reply.
 */
#include "ll/obs.h"

#include <stdio.h>
#include <string.h>

#include "ll/codes.h"

/* The names of codes.h, in its order; id = index + 1, and the one after the last is OTHER. */
#define CODE_NAME(name, where, section, meaning) #name,
static const char *const CODE_NAMES[] = {LL_CODES(CODE_NAME) "OTHER"};
#undef CODE_NAME
#define N_CODE_NAMES (sizeof CODE_NAMES / sizeof CODE_NAMES[0])
static const char *const OUTCOMES[] = {"ACCEPTED", "REPLAY", "REJECTED", "OTHER"};

uint8_t ll_obs_outcome_id(const char *outcome)
{
    for (uint8_t i = 0; outcome && i < 3; i++)
        if (strcmp(outcome, OUTCOMES[i]) == 0)
            return i;
    return 3;
}

const char *ll_obs_outcome_name(uint8_t id)
{
    return OUTCOMES[id < 3 ? id : 3];
}

uint16_t ll_obs_code_id(const char *code)
{
    if (!code || !*code)
        return 0;
    for (size_t i = 0; i + 1 < N_CODE_NAMES; i++)
        if (strcmp(code, CODE_NAMES[i]) == 0)
            return (uint16_t)(i + 1);
    return (uint16_t)N_CODE_NAMES; /* OTHER */
}

const char *ll_obs_code_name(uint16_t id)
{
    if (id == 0)
        return "";
    size_t i = (size_t)id - 1;
    return CODE_NAMES[i < N_CODE_NAMES ? i : N_CODE_NAMES - 1];
}

int ll_obs_code_ok(const char *s)
{
    size_t n = 0;
    for (; s && s[n]; n++)
        if (!((s[n] >= 'A' && s[n] <= 'Z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_') || n >= 40)
            return 0;
    return n > 0;
}

int ll_obs_health_status(int64_t last_turn_ms_, int64_t now_ms, int64_t stall_ms)
{
    return last_turn_ms_ > 0 && now_ms - last_turn_ms_ <= stall_ms ? 200 : 503;
}

int ll_obs_ready_status(ll_obs_kind kind, int db_ok, int assigned, int fenced_)
{
    if (!db_ok || (kind != LL_OBS_PLAIN && fenced_) || (kind == LL_OBS_CONSUMER && assigned <= 0))
        return 503;
    return 200;
}

int ll_obs_lag_parse(const char *json, size_t len, ll_obs_lag_fn fn, void *arg)
{
    json_error_t e;
    json_t *doc = json_loadb(json, len, 0, &e);
    if (!doc)
        return -1;
    int n = 0;
    const char *tname, *pname;
    json_t *t, *p;
    json_object_foreach(json_object_get(doc, "topics"), tname, t)
    {
        json_object_foreach(json_object_get(t, "partitions"), pname, p)
        {
            json_t *part = json_object_get(p, "partition"), *ls = json_object_get(p, "ls_offset"),
                   *hi = json_object_get(p, "hi_offset"), *lo = json_object_get(p, "lo_offset");
            ll_obs_part_stats s = {tname, 0, -1, json_is_integer(lo) ? (int64_t)json_integer_value(lo) : -1};
            if (json_is_integer(ls) && json_integer_value(ls) >= 0)
                s.end = (int64_t)json_integer_value(ls);
            else if (json_is_integer(hi) && json_integer_value(hi) >= 0)
                s.end = (int64_t)json_integer_value(hi);
            if (!json_is_integer(part) || json_integer_value(part) < 0 || s.end < 0 ||
                !json_is_true(json_object_get(p, "desired")))
                continue;
            s.partition = (int32_t)json_integer_value(part);
            fn(arg, &s);
            n++;
        }
    }
    json_decref(doc);
    return n;
}

int64_t ll_obs_lag(int64_t end, int64_t committed, int64_t lo)
{
    int64_t from = committed > lo ? committed : lo;
    return end > from ? end - from : 0;
}

void ll_obs_reply_labels(const json_t *reply, char *outcome, size_t olen, char *code, size_t clen)
{
    const char *o = json_string_value(json_object_get(reply, "outcome"));
    const char *c = json_string_value(json_object_get(reply, "code"));
    if (o && (strcmp(o, "ACCEPTED") == 0 || strcmp(o, "REPLAY") == 0 || strcmp(o, "REJECTED") == 0))
        snprintf(outcome, olen, "%s", o);
    else
        snprintf(outcome, olen, "OTHER");
    if (!c || !*c)
        snprintf(code, clen, "%s", "");
    else
        snprintf(code, clen, "%s", ll_obs_code_ok(c) ? c : "OTHER");
}

/* The terminal run statuses (LL_SQL_RUN_TERMINAL, docs/contract.md §3.1 "terminal"). */
static const char *const END_STATUSES[] = {
    "SUCCESS",        "FAILED_MANIFEST",          "FAILED_EXTRACT",          "FAILED_STAGE_VALIDATION",
    "FAILED_PUBLISH", "FAILED_TARGET_VALIDATION", "FAILED_SNAPSHOT_EXPIRED", "TIMED_OUT"};

const char *ll_obs_end_status(const char *status)
{
    for (size_t i = 0; status && i < sizeof END_STATUSES / sizeof END_STATUSES[0]; i++)
        if (strcmp(status, END_STATUSES[i]) == 0)
            return END_STATUSES[i];
    return "OTHER";
}

const char *ll_obs_job_label(ll_obs_jobs *t, const char *job)
{
    if (!job || !*job || strlen(job) >= sizeof t->name[0])
        return "_other";
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->name[i], job) == 0)
            return t->name[i];
    if (t->n >= LL_OBS_MAX_JOBS)
        return "_other";
    snprintf(t->name[t->n], sizeof t->name[0], "%s", job);
    return t->name[t->n++];
}

void ll_obs_ended_next(int n, int limit, const char *last_at, const char *last_id, const char *hi,
                       char *at_out, size_t at_len, char *id_out, size_t id_len)
{
    if (n >= limit && last_at && last_id) {
        snprintf(at_out, at_len, "%s", last_at);
        snprintf(id_out, id_len, "%s", last_id);
    } else {
        snprintf(at_out, at_len, "%s", hi);
        snprintf(id_out, id_len, "%s", "ffffffff-ffff-ffff-ffff-ffffffffffff");
    }
}
