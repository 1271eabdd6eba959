/*
 * registry_http.c - the schema registry client's HTTP calls on libcurl (registry.h): each URL of
 * schema.registry.url tried in order with bounded connect and total timeouts, basic auth and a
 * CA file as the Confluent clients' schema.registry.* settings, the id cache and the per-id
 * backoff after a failed fetch (so a registry that is down costs a message no timeout while an
 * id backs off), and a subject's schema registered or looked up.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ll/clock.h"
#include "ll/codec.h"
#include "ll/obs.h"
#include "ll/registry.h"

/* Ids whose last fetch failed, remembered for their backoff (the oldest one forgotten). */
#define FAILED_IDS 64

typedef struct failed_id {
    int32_t id;
    unsigned failures;
    int64_t last_ms;
    ll_registry_status status; /* what the last try found (NOT_FOUND or UNAVAILABLE) */
    char reason[200];
} failed_id;

struct ll_registry {
    char urls[LL_REGISTRY_MAX_URLS][LL_REGISTRY_URL_MAX + 1];
    int n_urls;
    char *user_info, *ca_location;
    ll_registry_opts o;
    pthread_mutex_t lock; /* the cache and the failed ids */
    ll_registry_cache *cache;
    failed_id failed[FAILED_IDS];
    size_t n_failed;
    int locked; /* lock initialised */
};

static int curl_ok;

/* curl_global_init once per process (pthread_once). */
static void global_init(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

ll_registry *ll_registry_new(const ll_registry_opts *opts, char *err, size_t errlen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    ll_registry *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    r->o = *opts;
    r->o.urls = NULL;
    r->o.user_info = NULL;
    r->o.ca_location = NULL;
    if (!r->o.connect_timeout_ms)
        r->o.connect_timeout_ms = 1000;
    if (!r->o.timeout_ms)
        r->o.timeout_ms = 2000;
    if (!r->o.backoff_min_ms)
        r->o.backoff_min_ms = 500;
    if (!r->o.backoff_max_ms)
        r->o.backoff_max_ms = 10000;
    if (!r->o.cache_entries)
        r->o.cache_entries = 1000;
    if (!r->o.cache_bytes)
        r->o.cache_bytes = 8u << 20;
    if (!r->o.max_body_bytes)
        r->o.max_body_bytes = 1u << 20;
    r->n_urls = ll_registry_parse_urls(opts->urls, r->urls, LL_REGISTRY_MAX_URLS, err, errlen);
    if (r->n_urls < 0) {
        free(r);
        return NULL;
    }
    if ((opts->user_info && *opts->user_info && !(r->user_info = strdup(opts->user_info))) ||
        (opts->ca_location && *opts->ca_location && !(r->ca_location = strdup(opts->ca_location))) ||
        !(r->cache = ll_registry_cache_new(r->o.cache_entries, r->o.cache_bytes))) {
        snprintf(err, errlen, "out of memory");
        ll_registry_free(r);
        return NULL;
    }
    pthread_mutex_init(&r->lock, NULL);
    r->locked = 1;
    pthread_once(&once, global_init);
    if (!curl_ok) {
        snprintf(err, errlen, "curl_global_init failed");
        ll_registry_free(r);
        return NULL;
    }
    return r;
}

void ll_registry_free(ll_registry *r)
{
    if (!r)
        return;
    ll_registry_cache_free(r->cache);
    free(r->user_info);
    free(r->ca_location);
    if (r->locked)
        pthread_mutex_destroy(&r->lock);
    free(r);
}

/* An answer's body, bounded by max (a longer one fails the transfer). */
typedef struct body {
    char *p;
    size_t n, max;
    int over;
} body;

static size_t on_data(char *data, size_t size, size_t nmemb, void *arg)
{
    body *b = arg;
    size_t add = size * nmemb;
    if (b->n + add > b->max) {
        b->over = 1;
        return 0;
    }
    char *p = realloc(b->p, b->n + add + 1);
    if (!p)
        return 0;
    memcpy(p + b->n, data, add);
    b->p = p;
    b->n += add;
    b->p[b->n] = '\0';
    return add;
}

/*
 * One request to each URL in turn (path appended; post_body NULL: GET) until one answers with
 * other than a transport error, 5xx or 429. *code is the HTTP status of the last answer (0: none
 * answered); the body of a 2xx answer is left in *out (malloc'd). err names the last failure.
 */
static void request(ll_registry *r, const char *path, const char *post_body, long *code, body *out, char *err,
                    size_t errlen)
{
    *code = 0;
    for (int i = 0; i < r->n_urls; i++) {
        char url[LL_REGISTRY_URL_MAX + LL_REGISTRY_PATH_MAX];
        snprintf(url, sizeof url, "%s%s", r->urls[i], path);
        CURL *c = curl_easy_init();
        if (!c) {
            snprintf(err, errlen, "curl_easy_init failed");
            return;
        }
        char cerr[CURL_ERROR_SIZE] = "";
        struct curl_slist *h =
            curl_slist_append(NULL, "Accept: application/vnd.schemaregistry.v1+json, application/json");
        if (post_body)
            h = curl_slist_append(h, "Content-Type: application/vnd.schemaregistry.v1+json");
        body b = {.max = r->o.max_body_bytes};
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)r->o.connect_timeout_ms);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)r->o.timeout_ms);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        if (r->user_info) {
            curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
            curl_easy_setopt(c, CURLOPT_USERPWD, r->user_info);
        }
        if (r->ca_location)
            curl_easy_setopt(c, CURLOPT_CAINFO, r->ca_location);
        if (post_body)
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, post_body);
        CURLcode rc = curl_easy_perform(c);
        long st = 0;
        if (rc == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &st);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        if (rc != CURLE_OK) {
            snprintf(err, errlen, "%.300s: %s", url,
                     b.over ? "answer over the body limit" : (cerr[0] ? cerr : curl_easy_strerror(rc)));
            free(b.p);
            if (b.over) {
                *code = 200; /* it answered: too large is the answer's fault, not a wait */
                out->over = 1;
                return;
            }
            continue;
        }
        *code = st;
        if (st >= 500 || st == 429) {
            snprintf(err, errlen, "%.300s: HTTP %ld", url, st);
            free(b.p);
            *code = 0; /* the next URL; none left: unavailable */
            continue;
        }
        if (st < 200 || st > 299)
            snprintf(err, errlen, "%.300s: HTTP %ld %.120s", url, st, b.p ? b.p : "");
        *out = b;
        return;
    }
}

/* The failure entry of id (r->lock held), or NULL. */
static failed_id *failed_of(ll_registry *r, int32_t id)
{
    for (size_t i = 0; i < r->n_failed; i++)
        if (r->failed[i].id == id)
            return &r->failed[i];
    return NULL;
}

/* Notes a failed fetch of id (r->lock held). */
static void note_failure(ll_registry *r, int32_t id, ll_registry_status st, const char *why)
{
    failed_id *f = failed_of(r, id);
    if (!f) {
        if (r->n_failed == FAILED_IDS) {
            size_t old = 0;
            for (size_t i = 1; i < r->n_failed; i++)
                if (r->failed[i].last_ms < r->failed[old].last_ms)
                    old = i;
            r->failed[old] = r->failed[--r->n_failed];
        }
        f = &r->failed[r->n_failed++];
        memset(f, 0, sizeof *f);
        f->id = id;
    }
    f->failures++;
    f->last_ms = ll_now_ms();
    f->status = st;
    snprintf(f->reason, sizeof f->reason, "%s", why);
}

/* Forgets id's failures (r->lock held). */
static void note_success(ll_registry *r, int32_t id)
{
    failed_id *f = failed_of(r, id);
    if (f)
        *f = r->failed[--r->n_failed];
}

ll_registry_status ll_registry_schema(ll_registry *r, int32_t id, char **text, size_t *len, char *err,
                                      size_t errlen)
{
    *text = NULL;
    pthread_mutex_lock(&r->lock);
    const char *hit = ll_registry_cache_get(r->cache, id, len);
    if (hit) {
        *text = malloc(*len + 1);
        if (*text)
            memcpy(*text, hit, *len + 1);
        pthread_mutex_unlock(&r->lock);
        if (!*text) {
            snprintf(err, errlen, "out of memory");
            return LL_REGISTRY_UNAVAILABLE;
        }
        return LL_REGISTRY_OK;
    }
    failed_id *f = failed_of(r, id);
    if (f && !ll_registry_retry_due(ll_now_ms(), f->last_ms, f->failures, r->o.backoff_min_ms,
                                    r->o.backoff_max_ms)) {
        ll_registry_status st = f->status;
        snprintf(err, errlen, "schema id %d: %s: %s (backing off after %u failed fetches)", id,
                 ll_registry_status_name(st), f->reason, f->failures);
        pthread_mutex_unlock(&r->lock);
        return st;
    }
    pthread_mutex_unlock(&r->lock);

    char path[64], why[512] = "";
    snprintf(path, sizeof path, "/schemas/ids/%d", id);
    long code = 0;
    body b = {0};
    request(r, path, NULL, &code, &b, why, sizeof why);
    ll_registry_status st;
    if (code == 0) {
        st = LL_REGISTRY_UNAVAILABLE;
    } else if (code == 404) {
        st = LL_REGISTRY_NOT_FOUND;
    } else if (b.over || code < 200 || code > 299) {
        st = LL_REGISTRY_INVALID;
    } else {
        char perr[200];
        *text = ll_registry_parse_schema(b.p ? b.p : "", b.n, r->o.max_body_bytes, len, perr, sizeof perr);
        st = *text ? LL_REGISTRY_OK : LL_REGISTRY_INVALID;
        if (!*text)
            snprintf(why, sizeof why, "%s", perr);
    }
    free(b.p);
    static const char *const results[] = {"ok", "not_found", "unavailable", "invalid"};
    ll_obs_registry(results[st]);
    pthread_mutex_lock(&r->lock);
    if (st == LL_REGISTRY_OK) {
        note_success(r, id);
        ll_registry_cache_put(r->cache, id, *text, *len);
    } else if (st == LL_REGISTRY_UNAVAILABLE || st == LL_REGISTRY_NOT_FOUND) {
        note_failure(r, id, st, why);
    }
    pthread_mutex_unlock(&r->lock);
    if (st != LL_REGISTRY_OK)
        snprintf(err, errlen, "schema id %d: %s: %s", id, ll_registry_status_name(st), why);
    return st;
}

/*
 * One request with a schema body to the subject's path (versions: the registration), its answer's
 * HTTP status classified: UNAVAILABLE (no URL answered), NOT_FOUND (404), INVALID (another
 * non-2xx, or over the body limit), OK (2xx: the body in *b, malloc'd, the caller frees it). why
 * names the URL and the answer for any status but OK.
 */
static ll_registry_status subject_request(ll_registry *r, const char *subject, bool versions,
                                          const char *schema_text, body *b, char *why, size_t whylen)
{
    char path[LL_REGISTRY_PATH_MAX];
    if (ll_registry_subject_path(subject, versions, path, sizeof path) != 0) {
        snprintf(why, whylen, "subject empty or over %d bytes encoded", LL_REGISTRY_PATH_MAX);
        return LL_REGISTRY_INVALID;
    }
    char *req = ll_registry_register_body(schema_text);
    if (!req) {
        snprintf(why, whylen, "out of memory");
        return LL_REGISTRY_UNAVAILABLE;
    }
    long code = 0;
    request(r, path, req, &code, b, why, whylen);
    free(req);
    if (code == 0)
        return LL_REGISTRY_UNAVAILABLE;
    if (code == 404)
        return LL_REGISTRY_NOT_FOUND;
    if (b->over || code < 200 || code > 299)
        return LL_REGISTRY_INVALID;
    return LL_REGISTRY_OK;
}

ll_registry_status ll_registry_register(ll_registry *r, const char *subject, const char *schema_text,
                                        int32_t *id, char *err, size_t errlen)
{
    char why[512] = "";
    body b = {0};
    ll_registry_status st = subject_request(r, subject, true, schema_text, &b, why, sizeof why);
    if (st == LL_REGISTRY_OK && ll_registry_parse_id(b.p ? b.p : "", b.n, id, why, sizeof why) != 0)
        st = LL_REGISTRY_INVALID;
    free(b.p);
    if (st != LL_REGISTRY_OK)
        snprintf(err, errlen, "subject %s: %s: %s", subject, ll_registry_status_name(st), why);
    return st;
}

ll_registry_status ll_registry_lookup(ll_registry *r, const char *subject, const char *schema_text,
                                      ll_registry_version *found, int *error_code, char *err, size_t errlen)
{
    char why[512] = "";
    body b = {0};
    if (error_code)
        *error_code = 0;
    ll_registry_status st = subject_request(r, subject, false, schema_text, &b, why, sizeof why);
    if (st == LL_REGISTRY_OK &&
        ll_registry_parse_lookup(b.p ? b.p : "", b.n, subject, found, why, sizeof why) != 0)
        st = LL_REGISTRY_INVALID;
    else if (st == LL_REGISTRY_NOT_FOUND && error_code)
        *error_code = ll_registry_error_code(b.p, b.n, NULL, 0);
    free(b.p);
    if (st != LL_REGISTRY_OK)
        snprintf(err, errlen, "subject %s: %s: %s", subject, ll_registry_status_name(st), why);
    return st;
}

bool ll_registry_auto_register(const ll_registry *r)
{
    return !r->o.lookup_only;
}

const ll_registry_opts *ll_registry_options(const ll_registry *r)
{
    return &r->o;
}

int ll_registry_source(void *ctx, int32_t id, char **text, size_t *len, char *err, size_t errlen)
{
    switch (ll_registry_schema(ctx, id, text, len, err, errlen)) {
    case LL_REGISTRY_OK:
        return 0;
    case LL_REGISTRY_NOT_FOUND:
        return LL_DECODE_UNKNOWN_ID;
    case LL_REGISTRY_UNAVAILABLE:
        return LL_DECODE_UNAVAILABLE;
    case LL_REGISTRY_INVALID:
        break;
    }
    return -1;
}
