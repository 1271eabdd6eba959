/*
 * sink_http.c - delivers outbox commands by HTTP POST to a NiFi ListenHTTP / HandleHttpRequest
 * receiver, as the reference does (docs/contract.md §6), with libcurl; the alternative to the Kafka sink
 * (dispatch.sink = http).
 *
 * URL: nifi.receiver_url without its trailing '/' + /validate/<jobKey> (VALIDATE_RUN) or
 * /reissue/<jobKey> (REISSUE_PARTITION). Headers X-Run-Id and X-Dispatch-Id, a JSON body, one
 * timeout (nifi.timeout) for every phase. The rows of a lease are sent concurrently (curl multi);
 * each row's http_status is the answer's status, or 0 for a transport error or a timeout, and
 * ll_dispatch_classify turns it into SENT / retry / DEAD.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatcher.h"
#include "ll/log.h"

/* One transfer: its row, its request, and the first bytes of the answer. */
typedef struct transfer {
    leased *row;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    char url[1200];
    char answer[2001];
    size_t answer_len;
    char curl_error[CURL_ERROR_SIZE];
} transfer;

int http_sink_open(http_sink *h, const ll_config *cfg, char *err, size_t errlen)
{
    memset(h, 0, sizeof *h);
    const char *url = ll_config_get(cfg, "nifi.receiver_url");
    if (!url || (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)) {
        snprintf(err, errlen, "dispatch.sink = http needs nifi.receiver_url (http:// or https://)");
        return -1;
    }
    h->base_url = strdup(url);
    size_t n = strlen(h->base_url);
    while (n > 0 && h->base_url[n - 1] == '/')
        h->base_url[--n] = '\0';
    if (ll_config_duration_ms(cfg, "nifi.timeout", &h->timeout_ms, err, errlen) != 0)
        return -1;
    h->ca_bundle = ll_config_get(cfg, "nifi.ca_bundle");
    h->client_cert = ll_config_get(cfg, "nifi.client_cert");
    h->client_key = ll_config_get(cfg, "nifi.client_key");
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "curl_global_init failed");
        return -1;
    }
    h->multi = curl_multi_init();
    return h->multi ? 0 : -1;
}

static size_t on_answer(char *data, size_t size, size_t nmemb, void *arg)
{
    transfer *t = arg;
    size_t n = size * nmemb, room = sizeof t->answer - 1 - t->answer_len;
    size_t take = n < room ? n : room;
    memcpy(t->answer + t->answer_len, data, take);
    t->answer_len += take;
    t->answer[t->answer_len] = '\0';
    return n;
}

/* The docs/contract.md §6 payloads: VALIDATE_RUN {runId, dispatchId}; REISSUE_PARTITION the work order. */
static char *payload(const leased *l)
{
    static const char *const reissue_fields[] = {
        "runId",      "dispatchId", "partitionId",    "businessKey",     "snapshotScn",      "hdfsRunPath",
        "lowerBound", "upperBound", "upperInclusive", "isNullPartition", "expectedRowCount", NULL};
    static const char *const validate_fields[] = {"runId", "dispatchId", NULL};
    const char *const *fields = strcmp(l->type, "VALIDATE_RUN") == 0 ? validate_fields : reissue_fields;
    json_t *body = json_object();
    for (int i = 0; fields[i]; i++) {
        json_t *v = json_object_get(l->command, fields[i]);
        json_object_set(body, fields[i], v ? v : json_null());
    }
    char *s = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    return s;
}

static void prepare(http_sink *h, transfer *t)
{
    leased *l = t->row;
    char hdr[128];
    snprintf(t->url, sizeof t->url, "%s/%s/%s", h->base_url,
             strcmp(l->type, "VALIDATE_RUN") == 0 ? "validate" : "reissue", l->job_key);
    t->body = payload(l);
    t->headers = curl_slist_append(NULL, "Content-Type: application/json");
    snprintf(hdr, sizeof hdr, "X-Run-Id: %s", l->run_id);
    t->headers = curl_slist_append(t->headers, hdr);
    snprintf(hdr, sizeof hdr, "X-Dispatch-Id: %s", l->dispatch_id);
    t->headers = curl_slist_append(t->headers, hdr);
    t->easy = curl_easy_init();
    curl_easy_setopt(t->easy, CURLOPT_URL, t->url);
    curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, t->body);
    curl_easy_setopt(t->easy, CURLOPT_HTTPHEADER, t->headers);
    curl_easy_setopt(t->easy, CURLOPT_TIMEOUT_MS, (long)h->timeout_ms);
    curl_easy_setopt(t->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)h->timeout_ms);
    curl_easy_setopt(t->easy, CURLOPT_WRITEFUNCTION, on_answer);
    curl_easy_setopt(t->easy, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(t->easy, CURLOPT_ERRORBUFFER, t->curl_error);
    curl_easy_setopt(t->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(t->easy, CURLOPT_PRIVATE, t);
    if (h->ca_bundle)
        curl_easy_setopt(t->easy, CURLOPT_CAINFO, h->ca_bundle);
    if (h->client_cert && h->client_key) {
        curl_easy_setopt(t->easy, CURLOPT_SSLCERT, h->client_cert);
        curl_easy_setopt(t->easy, CURLOPT_SSLKEY, h->client_key);
    }
    curl_multi_add_handle(h->multi, t->easy);
}

static void finish(transfer *t, CURLcode rc)
{
    leased *l = t->row;
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    l->http_status = (int)status;
    l->recorded_http_status = (int)status;
    if (rc != CURLE_OK)
        snprintf(l->error, sizeof l->error, "%s: %s", curl_easy_strerror(rc),
                 t->curl_error[0] ? t->curl_error : "transport error");
    else if (status >= 200 && status < 300)
        l->error[0] = '\0';
    else
        snprintf(l->error, sizeof l->error, "HTTP %ld: %.480s", status, t->answer);
}

void http_sink_deliver(http_sink *h, leased *rows, size_t n)
{
    transfer *ts = calloc(n ? n : 1, sizeof *ts);
    for (size_t i = 0; i < n; i++) {
        ts[i].row = &rows[i];
        if (rows[i].command)
            prepare(h, &ts[i]);
    }
    int running = 1;
    while (running) {
        curl_multi_perform(h->multi, &running);
        if (running)
            curl_multi_poll(h->multi, NULL, 0, 200, NULL);
    }
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(h->multi, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        transfer *t = NULL;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&t);
        finish(t, msg->data.result);
    }
    for (size_t i = 0; i < n; i++) {
        if (!ts[i].easy)
            continue;
        curl_multi_remove_handle(h->multi, ts[i].easy);
        curl_easy_cleanup(ts[i].easy);
        curl_slist_free_all(ts[i].headers);
        free(ts[i].body);
    }
    free(ts);
}

void http_sink_close(http_sink *h)
{
    if (h->multi) {
        curl_multi_cleanup(h->multi);
        curl_global_cleanup();
    }
    free(h->base_url);
    memset(h, 0, sizeof *h);
}
