/*
 * http.c - the services' HTTP endpoint on libmicrohttpd (http.h): one internal polling thread,
 * bounded connections, timeouts and per-connection memory; GET/HEAD only.
 */
#include "ll/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ll_http {
    struct MHD_Daemon *d;
    ll_http_handler handler;
    void *arg;
    int port;
};

int ll_http_parse_listen(const char *text, struct sockaddr_in *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    const char *colon = text ? strrchr(text, ':') : NULL;
    if (!colon || colon == text || colon[1] == '\0') {
        snprintf(err, errlen, "http.listen must be host:port (e.g. 127.0.0.1:9464), got '%s'",
                 text ? text : "");
        return -1;
    }
    char host[64];
    size_t hl = (size_t)(colon - text);
    if (hl >= sizeof host) {
        snprintf(err, errlen, "http.listen: host too long");
        return -1;
    }
    memcpy(host, text, hl);
    host[hl] = '\0';
    char *end = NULL;
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno || *end || port < 0 || port > 65535 || end == colon + 1) {
        snprintf(err, errlen, "http.listen: port must be 0..65535, got '%s'", colon + 1);
        return -1;
    }
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof host, "127.0.0.1");
    if (inet_pton(AF_INET, host, &out->sin_addr) != 1) {
        snprintf(err, errlen, "http.listen: '%s' is not an IPv4 address (e.g. 127.0.0.1)", host);
        return -1;
    }
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    return 0;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state)
{
    (void)version;
    (void)upload;
    ll_http *h = cls;
    if (!*state) { /* first call of the request: headers only; answer on the second */
        *state = h;
        return MHD_YES;
    }
    if (*upload_size) /* a body on a GET: refuse it without reading it */
        return MHD_NO;
    char *body = NULL;
    size_t len = 0;
    const char *ctype = "text/plain; charset=utf-8";
    int status;
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
        body = strdup("only GET and HEAD\n");
        len = body ? strlen(body) : 0;
    } else {
        status = h->handler(h->arg, url, &body, &len, &ctype);
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, body ? body : (void *)"", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

ll_http *ll_http_start(const char *listen, ll_http_handler handler, void *arg, char *err, size_t errlen)
{
    struct sockaddr_in sa;
    if (ll_http_parse_listen(listen, &sa, err, errlen) != 0)
        return NULL;
    ll_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->handler = handler;
    h->arg = arg;
    h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL, NULL, answer, h,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)LL_HTTP_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
                            (unsigned)LL_HTTP_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                            (size_t)LL_HTTP_MEMORY_LIMIT, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                            (unsigned)LL_HTTP_MAX_CONNECTIONS, MHD_OPTION_END);
    if (!h->d) {
        snprintf(err, errlen, "http.listen %s: cannot listen there (address in use or not local?)", listen);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info ? info->port : ntohs(sa.sin_port);
    return h;
}

int ll_http_port(const ll_http *h)
{
    return h ? h->port : 0;
}

void ll_http_stop(ll_http *h)
{
    if (!h)
        return;
    MHD_stop_daemon(h->d);
    free(h);
}
