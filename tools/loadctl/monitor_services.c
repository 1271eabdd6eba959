/*
 * monitor_services.c - `loadctl monitor --once --services HOST:PORT,...`: each service's
 * /metrics and /readyz (docs/operations.md "Metrics and health") read over HTTP, summed into one
 * line per service next to the ledger's frame. Each request is bounded: 1 s to connect, 2 s in
 * all, 4 MiB of body; a service that does not answer is shown as down, never waited for.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/metrics.h"
#include "monitor.h"

#define BODY_MAX (4u << 20)

typedef struct body {
    char *p;
    size_t len;
} body;

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
    body *b = arg;
    size_t add = size * n;
    if (b->len + add > BODY_MAX)
        return 0; /* too large: the transfer fails */
    char *p = realloc(b->p, b->len + add + 1);
    if (!p)
        return 0;
    memcpy(p + b->len, data, add);
    b->p = p;
    b->len += add;
    b->p[b->len] = '\0';
    return add;
}

/* GET http://target/path: the HTTP status (0 when no answer, err set) and the body (malloc'd,
 * NUL-terminated, or NULL) in *out. */
static long get(const char *target, const char *path, char **out, char *err, size_t errlen)
{
    char url[200];
    snprintf(url, sizeof url, "http://%s%s", target, path);
    body b = {NULL, 0};
    long status = 0;
    CURL *c = curl_easy_init();
    if (!c) {
        snprintf(err, errlen, "curl: out of memory");
        return 0;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    else
        snprintf(err, errlen, "%s", curl_easy_strerror(rc));
    curl_easy_cleanup(c);
    *out = b.p;
    return status;
}

int lc_services_parse(const char *list, lc_service_probe **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    lc_service_probe *p = calloc(LC_SERVICES_MAX, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (const char *s = list; s && *s;) {
        const char *comma = strchr(s, ',');
        size_t len = comma ? (size_t)(comma - s) : strlen(s);
        if (len == 0 || len >= sizeof p[0].target || *n == LC_SERVICES_MAX || !memchr(s, ':', len) ||
            strcspn(s, " /?#@") < len) {
            snprintf(err, errlen, "--services: a comma-separated list of at most %d host:port, got '%s'",
                     LC_SERVICES_MAX, list);
            free(p);
            return -1;
        }
        memcpy(p[*n].target, s, len);
        p[(*n)++].target[len] = '\0';
        s = comma ? comma + 1 : s + len;
    }
    if (*n == 0) {
        snprintf(err, errlen, "--services: no host:port given");
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

/* Sum of the samples of name (label = value unless NULL) in text; 0 when absent. */
static double sum_of(const char *text, const char *name, const char *label, const char *value, double *max)
{
    double sum = 0, mx = 0;
    if (ll_metrics_text_sum(text, name, label, value, &sum, &mx) < 0)
        sum = mx = 0;
    if (max)
        *max = mx;
    return sum;
}

void lc_services_probe(lc_service_probe *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char *text = NULL, *ready = NULL;
        long st = get(p[i].target, "/metrics", &text, p[i].error, sizeof p[i].error);
        p[i].up = st == 200 && text;
        if (st != 200 && st != 0)
            snprintf(p[i].error, sizeof p[i].error, "/metrics answered HTTP %ld", st);
        if (p[i].up) {
            p[i].inputs = sum_of(text, "loadledger_inputs_total", NULL, NULL, NULL);
            p[i].rejected = sum_of(text, "loadledger_inputs_total", "outcome", "REJECTED", NULL);
            p[i].dead = sum_of(text, "loadledger_dead_letters_total", NULL, NULL, NULL);
            p[i].held_runs = sum_of(text, "loadledger_held_runs", NULL, NULL, NULL);
            sum_of(text, "loadledger_consumer_lag_messages", NULL, NULL, &p[i].max_lag);
            p[i].outbox = sum_of(text, "loadledger_outbox_pending_dispatches", NULL, NULL, NULL);
            p[i].rss = sum_of(text, "process_resident_memory_bytes", NULL, NULL, NULL);
            char e[160];
            p[i].ready_status = (int)get(p[i].target, "/readyz", &ready, e, sizeof e);
        }
        free(text);
        free(ready);
    }
}

void lc_services_print_text(const lc_service_probe *p, size_t n)
{
    printf("\nSERVICES (%zu)\n%-22s %-9s %10s %9s %6s %6s %9s %7s %8s\n", n, "TARGET", "STATE", "INPUTS",
           "REJECTED", "DEAD", "HELD", "MAX LAG", "OUTBOX", "RSS MiB");
    for (size_t i = 0; i < n; i++) {
        if (!p[i].up) {
            printf("%-22s %-9s %s\n", p[i].target, "down", p[i].error);
            continue;
        }
        printf("%-22s %-9s %10.0f %9.0f %6.0f %6.0f %9.0f %7.0f %8.1f\n", p[i].target,
               p[i].ready_status == 200 ? "ready" : "not-ready", p[i].inputs, p[i].rejected, p[i].dead,
               p[i].held_runs, p[i].max_lag, p[i].outbox, p[i].rss / 1048576.0);
    }
}

json_t *lc_services_json(const lc_service_probe *p, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_pack("{s:s,s:b}", "target", p[i].target, "up", p[i].up);
        if (!p[i].up) {
            json_object_set_new(o, "error", json_string(p[i].error));
        } else {
            json_object_set_new(o, "ready", json_boolean(p[i].ready_status == 200));
            json_object_set_new(o, "inputs", json_real(p[i].inputs));
            json_object_set_new(o, "rejected", json_real(p[i].rejected));
            json_object_set_new(o, "deadLetters", json_real(p[i].dead));
            json_object_set_new(o, "heldRuns", json_real(p[i].held_runs));
            json_object_set_new(o, "maxLag", json_real(p[i].max_lag));
            json_object_set_new(o, "outboxPending", json_real(p[i].outbox));
            json_object_set_new(o, "rssBytes", json_real(p[i].rss));
        }
        json_array_append_new(a, o);
    }
    return a;
}
