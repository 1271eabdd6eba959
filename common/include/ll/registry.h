/*
 * registry.h - a Confluent-compatible schema registry client (docs/design.md
 * "Schema registry"): writer schemas of the Confluent framing fetched by id
 * (GET /schemas/ids/{id}) and cached, reply and command schemas registered under their subject
 * (POST /subjects/{subject}/versions, TopicNameStrategy "<topic>-value") or, with
 * schema.registry.auto.register.schemas = false, only looked up there (POST /subjects/{subject}).
 *
 * Off unless schema.registry.url is set. Two parts: a pure one (URL list, request paths and
 * bodies, response parsing, the bounded id cache; unit-tested without I/O) and the HTTP calls on
 * libcurl (bounded connect and total timeouts, the URLs tried in order, TLS CA and basic auth as
 * the Confluent clients' schema.registry.* settings).
 */
#ifndef LL_REGISTRY_H
#define LL_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>

#include "ll/config.h"

struct ll_schema;

/* At most this many URLs in schema.registry.url (comma-separated). */
#define LL_REGISTRY_MAX_URLS 8
/* The longest URL accepted (bytes, without the NUL). */
#define LL_REGISTRY_URL_MAX 255
/* The longest request path built (bytes, with the NUL): a subject of 255 bytes percent-encoded in full. */
#define LL_REGISTRY_PATH_MAX 1024

/* The Confluent REST API's error codes of a 404 answer's body ({"error_code": N, "message": "..."}). */
#define LL_REGISTRY_SUBJECT_NOT_FOUND 40401
#define LL_REGISTRY_VERSION_NOT_FOUND 40402
#define LL_REGISTRY_SCHEMA_NOT_FOUND  40403

/* What a fetch found. */
typedef enum ll_registry_status {
    LL_REGISTRY_OK = 0,      /* the schema text */
    LL_REGISTRY_NOT_FOUND,   /* the registry answered 404 for the id (or the subject) */
    LL_REGISTRY_UNAVAILABLE, /* unreachable, timed out, 5xx, 429, or backing off after one: a wait */
    LL_REGISTRY_INVALID      /* an answer that is no schema (4xx other than 404, bad JSON, not Avro) */
} ll_registry_status;

/* The status's name for logs and reasons ("not found"); static string. */
const char *ll_registry_status_name(ll_registry_status st);

/* ---- pure part ---------------------------------------------------------------------------- */

/*
 * Splits schema.registry.url ("http://a:8081,https://b:8081/path") into at most max URLs of at
 * most LL_REGISTRY_URL_MAX bytes each, copied into urls (blanks around commas dropped, a trailing
 * '/' removed). Each must start with http:// or https://. Returns the count (>= 1), or -1 with
 * err naming the bad entry.
 */
int ll_registry_parse_urls(const char *text, char urls[][LL_REGISTRY_URL_MAX + 1], int max, char *err,
                           size_t errlen);

/*
 * The schema text of a GET /schemas/ids/{id} answer body ({"schema": "<json text>"}, with
 * "schemaType" absent or "AVRO"). Returns a malloc'd NUL-terminated copy (its length in *len), or
 * NULL with err. The body is at most max_body bytes (else refused unparsed).
 */
char *ll_registry_parse_schema(const char *body, size_t len, size_t max_body, size_t *text_len, char *err,
                               size_t errlen);

/* The "id" of a POST /subjects/{subject}/versions answer ({"id": N}, 0..2^31-1): 0, or -1 with err. */
int ll_registry_parse_id(const char *body, size_t len, int32_t *id, char *err, size_t errlen);

/*
 * The request body registering an Avro schema text: {"schema": "<text>"} (schemaType left to
 * its default, AVRO). malloc'd, or NULL when out of memory. The body of a lookup
 * (POST /subjects/{subject}) is the same (Confluent REST API reference).
 */
char *ll_registry_register_body(const char *schema_text);

/*
 * The request path of a subject: "/subjects/{subject}" (the lookup) or, with versions,
 * "/subjects/{subject}/versions" (the registration), the subject percent-encoded (every byte but
 * RFC 3986's unreserved A-Z a-z 0-9 - . _ ~, as curl_easy_escape). Written into out (outlen bytes,
 * LL_REGISTRY_PATH_MAX is enough for any subject of 255 bytes). 0, or -1 when the subject is
 * empty or the path does not fit (out then "").
 */
int ll_registry_subject_path(const char *subject, bool versions, char *out, size_t outlen);

/* A version of a subject: what a lookup found. */
typedef struct ll_registry_version {
    int32_t id;      /* the schema's global id, 0..2^31-1: the one the records carry */
    int32_t version; /* its version under the subject, 1..2^31-1 */
} ll_registry_version;

/*
 * The answer of a lookup, POST /subjects/{subject} ({"subject": "<s>", "id": N, "version": V,
 * "schema": "<text>"}; other members ignored, as a newer registry may add some): "id" must be in
 * 0..2^31-1 and "version" in 1..2^31-1; "subject", when present, must be the subject asked
 * (subject; NULL: not checked). 0 with *out, or -1 with err.
 */
int ll_registry_parse_lookup(const char *body, size_t len, const char *subject, ll_registry_version *out,
                             char *err, size_t errlen);

/*
 * The error code of a Confluent error answer's body ({"error_code": N, "message": "..."}): N
 * (> 0), with the message copied into msg (msglen bytes, cut; "" when absent; msg may be NULL), or
 * 0 when the body is no such answer (not JSON, no integer "error_code": a proxy's page, say).
 */
int ll_registry_error_code(const char *body, size_t len, char *msg, size_t msglen);

/* A 404 error code's meaning: "subject not found" (40401), "version not found" (40402), "schema not
 * found" (40403); "" for another code. Static string. */
const char *ll_registry_error_name(int code);

/*
 * A bounded cache of schema texts by id: at most max_entries texts and max_bytes of text in
 * total, the least recently used evicted; a text larger than max_bytes is not cached. Not
 * thread-safe by itself (the client locks around it).
 */
typedef struct ll_registry_cache ll_registry_cache;

/* A new cache (NULL when out of memory or a bound is 0). Free with ll_registry_cache_free. */
ll_registry_cache *ll_registry_cache_new(size_t max_entries, size_t max_bytes);
/* Frees the cache and its texts (NULL allowed). */
void ll_registry_cache_free(ll_registry_cache *c);
/* The cached text of id (borrowed, valid until the next put), its length in *len; NULL if absent. */
const char *ll_registry_cache_get(ll_registry_cache *c, int32_t id, size_t *len);
/* Caches a copy of text (len bytes) under id, evicting as needed. 0, or -1 (not cached). */
int ll_registry_cache_put(ll_registry_cache *c, int32_t id, const char *text, size_t len);
/* Entries and bytes held now. */
size_t ll_registry_cache_count(const ll_registry_cache *c);
size_t ll_registry_cache_bytes(const ll_registry_cache *c);

/*
 * The backoff after a failed fetch of one id: the next try is not before
 * last_failure_ms + min(backoff_min_ms << (failures - 1), backoff_max_ms). 1 when a try is due
 * at now_ms (always for failures == 0).
 */
int ll_registry_retry_due(int64_t now_ms, int64_t last_failure_ms, unsigned failures, int64_t backoff_min_ms,
                          int64_t backoff_max_ms);

/*
 * The pause (ms) before the next try of a start-up registration or lookup the registry did not
 * answer (unreachable, 5xx, 429), after `failures` such answers (>= 1) and elapsed_ms since the
 * first try: backoff_min_ms doubling to backoff_max_ms, cut to what is left of wait_ms
 * (schema.registry.start_wait); -1 when the wait is over (the service stops, exit 1).
 */
int64_t ll_registry_start_pause_ms(int64_t elapsed_ms, unsigned failures, int64_t wait_ms,
                                   int64_t backoff_min_ms, int64_t backoff_max_ms);

/* ---- the client ---------------------------------------------------------------------------- */

/* The client's settings; strings are copied by ll_registry_new. */
typedef struct ll_registry_opts {
    const char *urls;           /* schema.registry.url (required) */
    const char *user_info;      /* schema.registry.basic.auth.user.info "user:password", or NULL */
    const char *ca_location;    /* schema.registry.ssl.ca.location (a PEM file), or NULL */
    int64_t connect_timeout_ms; /* per URL; 0 = 1000 */
    int64_t timeout_ms;         /* a whole request per URL; 0 = 2000 */
    int64_t backoff_min_ms;     /* after a failed fetch of an id, 0 = 500 */
    int64_t backoff_max_ms;     /* 0 = 10000 */
    size_t cache_entries;       /* 0 = 1000 */
    size_t cache_bytes;         /* 0 = 8 MiB */
    size_t max_body_bytes;      /* an answer's body; 0 = 1 MiB */
    int64_t start_wait_ms;      /* schema.registry.start_wait: how long a start-up registration or
                                   lookup waits for a registry that does not answer; 0 = no wait */
    bool lookup_only;           /* schema.registry.auto.register.schemas = false: output schemas
                                   looked up (ll_registry_lookup), never registered */
} ll_registry_opts;

typedef struct ll_registry ll_registry;

/* A client (no request made yet). NULL with err (a bad URL list, out of memory). Thread-safe. */
ll_registry *ll_registry_new(const ll_registry_opts *opts, char *err, size_t errlen);
/* Frees the client (NULL allowed). */
void ll_registry_free(ll_registry *r);

/*
 * The writer schema text of id: from the cache, else fetched (each URL in order until one
 * answers other than unreachable/5xx) and cached. On OK *text is a malloc'd copy (*len bytes)
 * the caller frees. While an id's fetch failed recently (backoff) the answer is UNAVAILABLE
 * without a request. err says why for any other status (the id and the URL named).
 */
ll_registry_status ll_registry_schema(ll_registry *r, int32_t id, char **text, size_t *len, char *err,
                                      size_t errlen);

/*
 * Registers (or finds: the registry returns the existing id for an equal schema) schema_text
 * under subject (POST /subjects/{subject}/versions) and returns its id in *id. Each URL in order
 * until one answers other than unreachable/5xx/429 (then UNAVAILABLE); 404 NOT_FOUND, another
 * non-2xx or a bad answer INVALID; err names the subject, the URL and the answer.
 */
ll_registry_status ll_registry_register(ll_registry *r, const char *subject, const char *schema_text,
                                        int32_t *id, char *err, size_t errlen);

/*
 * Looks schema_text up under subject without registering anything (POST /subjects/{subject},
 * Confluent REST API; the clients' auto.register.schemas=false): OK with *found (the version
 * holding that schema, its id); NOT_FOUND when the registry answers 404, *error_code then the
 * body's error code (40401 subject not found, 40403 schema not found; 0 when the body has none);
 * UNAVAILABLE and INVALID as ll_registry_register. error_code may be NULL. err names the subject,
 * the URL and the answer for any status but OK.
 */
ll_registry_status ll_registry_lookup(ll_registry *r, const char *subject, const char *schema_text,
                                      ll_registry_version *found, int *error_code, char *err, size_t errlen);

/* Whether output schemas are registered (schema.registry.auto.register.schemas, default true) or
 * only looked up (false: ll_registry_opts.lookup_only). */
bool ll_registry_auto_register(const ll_registry *r);

/* The client's settings, defaults filled in (URL and credential strings NULL); owned by r. */
const ll_registry_opts *ll_registry_options(const ll_registry *r);

/*
 * ll_schema_source_fn over a client (ctx: the ll_registry): OK -> 0, NOT_FOUND ->
 * LL_DECODE_UNKNOWN_ID, UNAVAILABLE -> LL_DECODE_UNAVAILABLE, INVALID -> -1 (codec.h).
 */
int ll_registry_source(void *ctx, int32_t id, char **text, size_t *len, char *err, size_t errlen);

/*
 * The schema.registry.* keys of a service's key table (the consumer loop's and the
 * dispatcher's): all optional, nothing happens without schema.registry.url.
 */
#define LL_REGISTRY_CONFIG_KEYS                                                                              \
    {"schema.registry.url", NULL, false,                                                                     \
     "Confluent-compatible schema registry URL(s), comma-separated: writer schemas of the Confluent framing" \
     " fetched by id, Confluent-framed output schemas registered (or looked up) under <topic>-value;"        \
     " unset: no registry",                                                                                  \
     LL_CONFIG_NO_RANGE},                                                                                    \
        {"schema.registry.auto.register.schemas", "true", false,                                             \
         "true: each Confluent-framed output topic's schema registered under <topic>-value at start; false:" \
         " only looked up there (nothing registered), and a subject without that schema stops the service"   \
         " at start (exit 1)",                                                                               \
         LL_CONFIG_NO_RANGE},                                                                                \
        {"schema.registry.basic.auth.user.info", NULL, false, "user:password for the registry's basic auth", \
         LL_CONFIG_NO_RANGE},                                                                                \
        {"schema.registry.ssl.ca.location", NULL, false,                                                     \
         "PEM file of the CAs that sign the registry's certificate", LL_CONFIG_NO_RANGE},                    \
        {"schema.registry.connect_timeout",                                                                  \
         "PT1S",                                                                                             \
         false,                                                                                              \
         "connect timeout per registry URL",                                                                 \
         LL_CONFIG_DURATION,                                                                                 \
         1,                                                                                                  \
         60000},                                                                                             \
        {"schema.registry.timeout",                                                                          \
         "PT2S",                                                                                             \
         false,                                                                                              \
         "a whole registry request per URL (the loop's thread waits at most this per URL)",                  \
         LL_CONFIG_DURATION,                                                                                 \
         1,                                                                                                  \
         60000},                                                                                             \
        {"schema.registry.backoff_max",                                                                      \
         "PT10S",                                                                                            \
         false,                                                                                              \
         "longest pause before an id whose fetch failed is asked for again (from 0.5 s, doubling)",          \
         LL_CONFIG_DURATION,                                                                                 \
         500,                                                                                                \
         3600000},                                                                                           \
        {"schema.registry.start_wait",                                                                       \
         "PT1M",                                                                                             \
         false,                                                                                              \
         "how long a start-up registration (or lookup) retries a registry that does not answer "             \
         "(unreachable,"                                                                                     \
         " 5xx, 429; backoff 0.5 s doubling to backoff_max) before the service stops (exit 1)",              \
         LL_CONFIG_DURATION,                                                                                 \
         0,                                                                                                  \
         3600000},                                                                                           \
        {"schema.registry.cache_entries",                                                                    \
         "1000",                                                                                             \
         false,                                                                                              \
         "schema texts cached by id",                                                                        \
         LL_CONFIG_INT,                                                                                      \
         1,                                                                                                  \
         100000},                                                                                            \
    {                                                                                                        \
        "schema.registry.cache_bytes", "8388608", false, "schema text cached by id in total (bytes)",        \
            LL_CONFIG_INT, 1, 1LL << 30                                                                      \
    }

/*
 * The client of the schema.registry.* settings of cfg: 0 with *out NULL when schema.registry.url
 * is unset (no registry: nothing else is read), 0 with *out a client, or -1 with err.
 */
int ll_registry_from_config(const ll_config *cfg, ll_registry **out, char *err, size_t errlen);

/*
 * The id of an output topic's schema under "<topic>-value" (TopicNameStrategy), logged: registered
 * (or found) there, or, with schema.registry.auto.register.schemas = false, looked up there
 * (ll_registry_lookup: nothing registered). A registry that does not answer (unreachable, 5xx, 429)
 * is retried for schema.registry.start_wait, each failure logged registry_unavailable (the
 * thread sleeps in between). 0 with *id, or -1 with err (the registry must answer within the wait;
 * a lookup's 404 names the subject, the registry's error code and what to do: register
 * schemas/avro/<Name>.avsc under the subject, or set the key to true). docs/design.md §9.
 */
int ll_registry_topic_id(ll_registry *r, const char *topic, const struct ll_schema *schema, int32_t *id,
                         char *err, size_t errlen);

/* The exit status of a service whose schema registry still did not answer at the end of
 * schema.registry.start_wait (issue 39, item 6): not 1 (a configuration error, which the systemd
 * unit does not restart: RestartPreventExitStatus=1) but 3, a start-up dependency that was down,
 * which Restart=on-failure retries. */
#define LL_EXIT_REGISTRY_UNAVAILABLE 3

/* Makes the start-up waits of ll_registry_topic_id end early when *flag becomes non-zero (a stop
 * signal; borrowed for the process's life; NULL: never). Called once before the clients start. */
void ll_registry_stop_flag(volatile sig_atomic_t *flag);

/* 1 when the last ll_registry_topic_id of this process failed because the registry did not answer
 * within schema.registry.start_wait (or a stop signal ended the wait), else 0. */
int ll_registry_start_gave_up(void);

#endif
