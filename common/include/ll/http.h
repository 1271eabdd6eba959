/*
 * http.h - a small HTTP/1.1 server on one IPv4 address and port (libmicrohttpd), for the
 * services' /metrics, /healthz and /readyz (obs.h). It answers GET and HEAD only, from one
 * internal thread (poll), with at most LL_HTTP_MAX_CONNECTIONS connections at once, an idle
 * connection timeout of LL_HTTP_TIMEOUT_S seconds, and LL_HTTP_MEMORY_LIMIT bytes per connection
 * (a request with a body or a large header is refused by libmicrohttpd itself).
 */
#ifndef LL_HTTP_H
#define LL_HTTP_H

#include <netinet/in.h>
#include <stddef.h>

#define LL_HTTP_MAX_CONNECTIONS 16
#define LL_HTTP_TIMEOUT_S       10
#define LL_HTTP_MEMORY_LIMIT    16384

/* A running server (opaque). */
typedef struct ll_http ll_http;

/*
 * Answers one GET for path (without the query string): returns the HTTP status and sets *body
 * (malloc'd, taken over by the server), *len and *ctype (a static string). Called from the
 * server's thread: it must be thread-safe.
 */
typedef int (*ll_http_handler)(void *arg, const char *path, char **body, size_t *len, const char **ctype);

/* Parses "host:port" (an IPv4 literal, or "localhost"; port 0..65535) into out. 0, or -1 with
 * err naming what is wrong. */
int ll_http_parse_listen(const char *text, struct sockaddr_in *out, char *err, size_t errlen);

/* Binds listen ("host:port") and serves handler from a thread of the server's own. NULL with
 * err on a bad address or a bind failure (e.g. the port is in use). */
ll_http *ll_http_start(const char *listen, ll_http_handler handler, void *arg, char *err, size_t errlen);
/* The bound port (the actual one for port 0). */
int ll_http_port(const ll_http *h);
/* Stops the server (waits for its thread) and frees it; NULL is a no-op. */
void ll_http_stop(ll_http *h);

#endif
