/*
 * registry_config.c - the schema registry client made from a service's schema.registry.*
 * settings, and an output topic's schema id from its subject (registry.h; docs/design.md §9).
 */
#include <stdio.h>

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
    if (ll_config_duration_ms(cfg, "schema.registry.connect_timeout", &o.connect_timeout_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "schema.registry.timeout", &o.timeout_ms, err, errlen) ||
        ll_config_duration_ms(cfg, "schema.registry.backoff_max", &o.backoff_max_ms, err, errlen) ||
        ll_config_int(cfg, "schema.registry.cache_entries", &entries, err, errlen) ||
        ll_config_int(cfg, "schema.registry.cache_bytes", &bytes, err, errlen))
        return -1;
    o.cache_entries = (size_t)entries;
    o.cache_bytes = (size_t)bytes;
    return (*out = ll_registry_new(&o, err, errlen)) ? 0 : -1;
}

int ll_registry_topic_id(ll_registry *r, const char *topic, const struct ll_schema *schema, int32_t *id,
                         char *err, size_t errlen)
{
    char subject[300], why[600];
    snprintf(subject, sizeof subject, "%s-value", topic);
    if (ll_registry_register(r, subject, ll_schema_text(schema), id, why, sizeof why) != LL_REGISTRY_OK) {
        snprintf(err, errlen, "schema registry: %s", why);
        return -1;
    }
    ll_log(LL_INFO, NULL, "registry_subject", "schema of %s under %s: id %d", topic, subject, (int)*id);
    return 0;
}
