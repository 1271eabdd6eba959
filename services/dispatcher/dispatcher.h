/*
 * dispatcher.h - the outbox delivery of docs/contract.md §6 with a Kafka sink (or an HTTP sink): lease
 * due rows with FOR UPDATE SKIP LOCKED, publish or POST the command, then mark SENT, back off,
 * or DEAD.
 */
#ifndef DISPATCHER_H
#define DISPATCHER_H

#include <jansson.h>
#include <curl/curl.h>
#include <librdkafka/rdkafka.h>
#include <stdbool.h>
#include <stdint.h>

#include "ll/codec.h"
#include "ll/config.h"
#include "ll/db.h"

/* Settings of docs/contract.md §9 (dispatch.*), in ms where a duration. */
typedef struct dispatch_settings {
    int64_t batch, lease_ms, poll_ms, max_attempts, backoff_min_ms, backoff_max_ms, delivery_ms;
    /* fault.crash_after_publish: kill -9 self after this many batches the broker acknowledged,
     * before they are marked SENT (0 = never; crash drills only) */
    int64_t crash_after_publish;
    /* dispatch.log_summary: the shortest time between two dispatch_summary lines (0 = none) */
    int64_t summary_ms;
} dispatch_settings;

/* What was settled since the last dispatch_summary line (summary.c; docs/operations.md, "Versions
 * and logs"): rows sent, retried, made DEAD, counted from since_ms (monotonic ms). */
typedef struct dispatch_summary {
    int64_t since_ms;
    long sent, retried, dead;
} dispatch_summary;

/* Adds one settled lease's counts. */
void summary_add(dispatch_summary *t, long sent, long retried, long dead);
/* True when a summary line is due at now_ms: every_ms (> 0) passed since t->since_ms and
 * something was settled. Pure. */
bool summary_due(const dispatch_summary *t, int64_t now_ms, int64_t every_ms);
/* Writes the dispatch_summary line (info; fields sent, retried, dead, seconds) when anything was
 * settled, and starts counting again from now_ms. */
void summary_log(dispatch_summary *t, int64_t now_ms);

/* One leased outbox row with what its command needs. Strings owned by the struct. */
typedef struct leased {
    char dispatch_id[37], run_id[37];
    char type[32];
    char *partition_id, *job_key, *business_key, *created_at;
    int attempt;
    json_t *command; /* the built command, or NULL when it could not be built */
    char build_error[256];
    int http_status; /* delivery result: the HTTP status (Kafka sink: 200 delivered), 0 failed in transport */
    int recorded_http_status; /* stored in last_http_status (0 = NULL; the Kafka sink stores none) */
    char error[512];
} leased;

/* Leases up to settings->batch due rows (docs/contract.md §6 lease) with one statement that commits on
 * its own. *n rows into a malloc'd array (the caller frees it with outbox_free). */
ll_db_rc outbox_lease(ll_db *db, const dispatch_settings *s, leased **rows, size_t *n);
/* Frees the rows. */
void outbox_free(leased *rows, size_t n);
/* Builds the command record of each row (REISSUE reads the partition at send time). */
ll_db_rc outbox_build(ll_db *db, leased *rows, size_t n);
/* Records each row's delivery result: the delivered rows SENT by one statement; a lease with a
 * failure in one transaction with each backoff / DEAD (and its event). Counts into the three. */
ll_db_rc outbox_settle(ll_db *db, const dispatch_settings *s, leased *rows, size_t n, long *sent,
                       long *retried, long *dead);
/* The outbox backlog for /metrics: PENDING rows and the age of the oldest in seconds (0: none),
 * by one statement that commits on its own. */
ll_db_rc outbox_backlog(ll_db *db, double *pending, double *oldest_age_s);

/* The Kafka sink: one idempotent producer and the two command topics. */
typedef struct kafka_sink {
    rd_kafka_t *producer;
    char validate_topic[256], reissue_topic[256];
    ll_schema *validate_schema, *reissue_schema;
    ll_encode_opts validate_enc, reissue_enc;
} kafka_sink;

/* Creates the sink from the configuration. 0, or -1 with err. */
int sink_open(kafka_sink *k, const ll_config *cfg, char *err, size_t errlen);
/* Publishes every row with a command and waits up to delivery_ms for the broker's acks;
 * sets each row's http_status (200 delivered, 0 not) and error. */
void sink_deliver(kafka_sink *k, leased *rows, size_t n, int64_t delivery_ms);
/* Flushes and frees the sink. */
void sink_close(kafka_sink *k);

/* The HTTP sink (dispatch.sink = http, docs/contract.md §6): POST to a NiFi receiver with libcurl. */
typedef struct http_sink {
    CURLM *multi;
    char *base_url;                                   /* nifi.receiver_url without trailing '/' */
    int64_t timeout_ms;                               /* nifi.timeout, every phase */
    const char *ca_bundle, *client_cert, *client_key; /* borrowed from the configuration */
} http_sink;

/* Creates the HTTP sink. 0, or -1 with err (no receiver URL). */
int http_sink_open(http_sink *h, const ll_config *cfg, char *err, size_t errlen);
/* POSTs every row with a command concurrently; sets each row's http_status and error. */
void http_sink_deliver(http_sink *h, leased *rows, size_t n);
/* Frees the sink. */
void http_sink_close(http_sink *h);

/* The configured sink: Kafka (default) or HTTP. */
typedef struct dispatch_sink {
    bool http;
    kafka_sink kafka;
    http_sink web;
} dispatch_sink;

/* A LISTEN load_dispatch connection (docs/contract.md §6 wake-up); NULL conninfo = polling only. */
typedef struct listener {
    PGconn *conn;
    char *conninfo;
    int64_t retry_at_ms;
} listener;

/* Waits up to timeout_ms for a notification; true when woken (or just reconnected). */
bool listener_wait(listener *l, int64_t timeout_ms);
/* Closes the connection. */
void listener_close(listener *l);

#endif
