/*
 * registry_config.c - the schema registry client made from a service's schema.registry.*
 * settings, and an output topic's schema id from its subject, registered or looked up
 * (registry.h; docs/design.md §9).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ll/clock.h"
#include "ll/codec.h"
#include "ll/log.h"
#include "ll/registry.h"

int ll_registry_from_config(const ll_config *cfg, ll_registry **out, char *err, size_t errlen)
{
    *out = NULL;
    const char *url = ll_config_get(cfg, "schema.registry.url");
    if (!url || !*url)
        return 0;
    ll_registry_opts o = {.urls = url,
                          .user_info = ll_config_get(cfg, "schema.registry.basic.auth.user.info"),
                          .ca_location = ll_config_get(cfg, "schema.registry.ssl.ca.location")};
    int64_t entries = 0, bytes = 0;
    bool auto_register = true;
    if (ll_config_bool(cfg, "schema.registry.auto.register.schemas", &auto_register, err, errlen) ||
        ll_config_duration_ms(cfg, "schema.registry.connect_timeout", &o.connect_timeout_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "schema.registry.timeout", &o.timeout_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "schema.registry.backoff_max", &o.backoff_max_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "schema.registry.start_wait", &o.start_wait_ms, err, errlen) ||
        ll_config_int(cfg, "schema.registry.cache_entries", &entries, err, errlen) ||
        ll_config_int(cfg, "schema.registry.cache_bytes", &bytes, err, errlen))
        return -1;
    o.cache_entries = (size_t)entries;
    o.cache_bytes = (size_t)bytes;
    o.lookup_only = !auto_register;
    return (*out = ll_registry_new(&o, err, errlen)) ? 0 : -1;
}

/*
 * One start-up request under subject (a lookup when v is given, else a registration into *id),
 * retried while the registry does not answer (UNAVAILABLE) for schema.registry.start_wait
 * (ll_registry_start_pause_ms), each failure logged registry_unavailable. The last status; why
 * says why for any but OK, and after the wait err names the subject, the key and the time waited.
 */
static volatile sig_atomic_t *g_stop; /* ll_registry_stop_flag */
static int g_gave_up;                 /* ll_registry_start_gave_up */

void ll_registry_stop_flag(volatile sig_atomic_t *flag)
{
    g_stop = flag;
}

int ll_registry_start_gave_up(void)
{
    return g_gave_up;
}

/* Sleeps ms in steps of at most 100 ms; 1 when a stop signal came (the wait ends at once). */
static int pause_or_stop(int64_t ms)
{
    while (ms > 0) {
        if (g_stop && *g_stop)
            return 1;
        int64_t step = ms < 100 ? ms : 100;
        struct timespec ts = {step / 1000, (step % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        ms -= step;
    }
    return g_stop && *g_stop;
}

static ll_registry_status ask(ll_registry *r, const char *subject, const struct ll_schema *schema,
                              ll_registry_version *v, int *code, int32_t *id, char *why, size_t whylen,
                              char *err, size_t errlen)
{
    const ll_registry_opts *o = ll_registry_options(r);
    int64_t t0 = ll_now_ms();
    for (unsigned failures = 1;; failures++) {
        ll_registry_status st =
            v ? ll_registry_lookup(r, subject, ll_schema_text(schema), v, code, why, whylen)
              : ll_registry_register(r, subject, ll_schema_text(schema), id, why, whylen);
        g_gave_up = 0;
        if (st != LL_REGISTRY_UNAVAILABLE)
            return st;
        int64_t pause = ll_registry_start_pause_ms(ll_now_ms() - t0, failures, o->start_wait_ms,
                                                   o->backoff_min_ms, o->backoff_max_ms);
        ll_log(LL_WARN, NULL, "registry_unavailable", "subject %s: %s; %s", subject, why,
               pause < 0 ? "giving up" : "retrying");
        if (pause < 0) {
            snprintf(err, errlen,
                     "schema registry: subject %s: no answer within schema.registry.start_wait (%lld ms, %u "
                     "tries): %s",
                     subject, (long long)o->start_wait_ms, failures, why);
            g_gave_up = 1;
            return st;
        }
        if (pause_or_stop(pause)) {
            snprintf(err, errlen,
                     "schema registry: subject %s: stopped while waiting for an answer (%u tries)", subject,
                     failures);
            g_gave_up = 1;
            return st;
        }
    }
}

/*
 * The id of the schema looked up under subject (schema.registry.auto.register.schemas = false):
 * 0, or -1 with err; a 404 names the subject, the registry's error code and the two ways out (the
 * URL and the registry's own answer go to the log, event registry_lookup_failed).
 */
static int lookup_id(ll_registry *r, const char *topic, const char *subject, const struct ll_schema *schema,
                     int32_t *id, char *err, size_t errlen)
{
    char why[600];
    ll_registry_version v = {0};
    int code = 0;
    ll_registry_status st = ask(r, subject, schema, &v, &code, NULL, why, sizeof why, err, errlen);
    if (st == LL_REGISTRY_UNAVAILABLE)
        return -1; /* err says so */
    if (st == LL_REGISTRY_NOT_FOUND) {
        const char *full = ll_schema_fullname(schema), *dot = strrchr(full, '.');
        const char *name = dot ? dot + 1 : full; /* schemas/avro/<Name>.avsc holds record <Name> */
        char what[96];
        if (code)
            snprintf(what, sizeof what, "error code %d%s%s", code, *ll_registry_error_name(code) ? " " : "",
                     ll_registry_error_name(code));
        else
            snprintf(what, sizeof what, "no registry error code: is schema.registry.url the API's base?");
        ll_log(LL_ERROR, NULL, "registry_lookup_failed", "%s", why); /* the URL and the registry's answer */
        snprintf(err, errlen,
                 "schema registry: subject %s has no version with the schema of topic %s (HTTP 404, %s); "
                 "schema.registry.auto.register.schemas = false registers nothing: register "
                 "schemas/avro/%s.avsc under %s, or set schema.registry.auto.register.schemas = true",
                 subject, topic, what, name, subject);
        return -1;
    }
    if (st != LL_REGISTRY_OK) {
        snprintf(err, errlen, "schema registry: %s", why);
        return -1;
    }
    *id = v.id;
    ll_log(LL_INFO, NULL, "registry_subject", "schema of %s under %s: id %d (version %d, looked up)", topic,
           subject, (int)v.id, (int)v.version);
    return 0;
}

int ll_registry_topic_id(ll_registry *r, const char *topic, const struct ll_schema *schema, int32_t *id,
                         char *err, size_t errlen)
{
    char subject[300], why[600];
    snprintf(subject, sizeof subject, "%s-value", topic);
    if (!ll_registry_auto_register(r))
        return lookup_id(r, topic, subject, schema, id, err, errlen);
    ll_registry_status st = ask(r, subject, schema, NULL, NULL, id, why, sizeof why, err, errlen);
    if (st != LL_REGISTRY_OK) {
        if (st != LL_REGISTRY_UNAVAILABLE) /* else err says so */
            snprintf(err, errlen, "schema registry: %s", why);
        return -1;
    }
    ll_log(LL_INFO, NULL, "registry_subject", "schema of %s under %s: id %d", topic, subject, (int)*id);
    return 0;
}
