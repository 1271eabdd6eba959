/*
 * lag.c - the consumer-group lag from the broker's view (docs/operations.md, "Consumer lag from the
 * broker"): loadledger_group_lag_messages{group,topic,partition}, what a service's own
 * loadledger_consumer_lag_messages says only while it runs. The sweeper runs always, so the lag
 * of a group whose every member is down stays visible (and grows).
 *
 * Each reading, after a tick: the groups (lag.groups, else every group the broker lists,
 * ListConsumerGroups, the first LL_OBS_MAX_GROUPS by name), each group's committed offsets
 * (ListConsumerGroupOffsets; the services commit through their producer's transaction, which
 * lands there too), and for each committed partition its end: the last stable offset, as a
 * read_committed consumer sees it (query_watermark_offsets of this read_committed handle; a
 * transaction's commit marker takes an offset, so a group done with a transactional topic shows
 * 0, not 1), and the log start: lag = end - max(committed, log start) (ll_obs_lag).
 *
 * Every wait is bounded: each broker request by lag.timeout, the whole reading by four times it
 * (what is not read then is read at the next tick). A reading that did not answer for every group
 * keeps the previous values and sets loadledger_group_lag_read_ok to 0. The handle never joins a
 * group and never commits.
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/clock.h"
#include "ll/kclient.h"
#include "ll/log.h"
#include "ll/obs.h"
#include "sweeper.h"

/* The group id of the sweeper's own handle (it never joins it; excluded from the readings). */
#define LAG_OWN_GROUP "loadledger-sweeper-lag"

typedef struct lag_row {
    char group[256], topic[256];
    int32_t partition;
    int64_t lag;
} lag_row;

struct sweep_lag {
    rd_kafka_t *rk;
    rd_kafka_queue_t *q;
    int timeout_ms;
    char *groups;  /* lag.groups (copied), NULL: every group the broker lists */
    lag_row *rows; /* LL_OBS_GROUP_LAG_SERIES, reused by each reading */
    int last_ok;   /* the last reading's result, for logging changes only */
};

sweep_lag *sweep_lag_new(const ll_config *cfg, int64_t timeout_ms, char *err, size_t errlen)
{
    err[0] = '\0';
    if (!ll_config_get(cfg, "kafka.bootstrap.servers"))
        return NULL; /* no broker configured: no lag (err stays "") */
    sweep_lag *s = calloc(1, sizeof *s);
    if (!s || !(s->rows = calloc(LL_OBS_GROUP_LAG_SERIES, sizeof *s->rows))) {
        snprintf(err, errlen, "out of memory");
        free(s);
        return NULL;
    }
    s->timeout_ms = (int)timeout_ms;
    s->last_ok = 1;
    const char *groups = ll_config_get(cfg, "lag.groups");
    if (groups && *groups)
        s->groups = strdup(groups);
    if (!(s->rk = ll_kafka_reader_new(cfg, LAG_OWN_GROUP, NULL, 0, err, errlen))) {
        sweep_lag_free(s);
        return NULL;
    }
    s->q = rd_kafka_queue_new(s->rk);
    return s;
}

void sweep_lag_free(sweep_lag *s)
{
    if (!s)
        return;
    if (s->q)
        rd_kafka_queue_destroy(s->q);
    if (s->rk)
        rd_kafka_destroy(s->rk);
    free(s->groups);
    free(s->rows);
    free(s);
}

/* The result event of the admin request just sent on s->q, of type `type`, waiting up to the
 * request timeout plus a second; NULL with why when none came or it failed. */
static rd_kafka_event_t *admin_result(sweep_lag *s, rd_kafka_event_type_t type, char *why, size_t n)
{
    rd_kafka_event_t *ev = rd_kafka_queue_poll(s->q, s->timeout_ms + 1000);
    if (!ev) {
        snprintf(why, n, "no answer within %d ms", s->timeout_ms + 1000);
        return NULL;
    }
    if (rd_kafka_event_type(ev) != type || rd_kafka_event_error(ev)) {
        snprintf(why, n, "%s",
                 rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev) : "unexpected event");
        rd_kafka_event_destroy(ev);
        return NULL;
    }
    return ev;
}

static rd_kafka_AdminOptions_t *options(sweep_lag *s, rd_kafka_admin_op_t op)
{
    rd_kafka_AdminOptions_t *o = rd_kafka_AdminOptions_new(s->rk, op);
    char e[256];
    if (o)
        rd_kafka_AdminOptions_set_request_timeout(o, s->timeout_ms, e, sizeof e);
    return o;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The groups to read into names (at most LL_OBS_MAX_GROUPS, malloc'd, sorted), their count, or -1
 * with why (the broker did not answer). */
static int list_groups(sweep_lag *s, char **names, char *why, size_t n)
{
    int k = 0;
    if (s->groups) {
        char *copy = strdup(s->groups), *save = NULL;
        for (char *t = copy ? strtok_r(copy, ", ", &save) : NULL; t && k < LL_OBS_MAX_GROUPS;
             t = strtok_r(NULL, ", ", &save))
            names[k++] = strdup(t);
        free(copy);
    } else {
        rd_kafka_AdminOptions_t *o = options(s, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPS);
        rd_kafka_ListConsumerGroups(s->rk, o, s->q);
        rd_kafka_AdminOptions_destroy(o);
        rd_kafka_event_t *ev = admin_result(s, RD_KAFKA_EVENT_LISTCONSUMERGROUPS_RESULT, why, n);
        if (!ev)
            return -1;
        size_t cnt = 0;
        const rd_kafka_ConsumerGroupListing_t **l =
            rd_kafka_ListConsumerGroups_result_valid(rd_kafka_event_ListConsumerGroups_result(ev), &cnt);
        char **all = calloc(cnt ? cnt : 1, sizeof *all);
        size_t m = 0;
        for (size_t i = 0; all && i < cnt; i++) {
            const char *g = rd_kafka_ConsumerGroupListing_group_id(l[i]);
            if (g && strcmp(g, LAG_OWN_GROUP) != 0)
                all[m++] = strdup(g);
        }
        rd_kafka_event_destroy(ev);
        if (all)
            qsort(all, m, sizeof *all, cmp_str);
        for (size_t i = 0; all && i < m; i++) {
            if (k < LL_OBS_MAX_GROUPS)
                names[k++] = all[i];
            else
                free(all[i]);
        }
        if (m > LL_OBS_MAX_GROUPS)
            ll_log(LL_WARN, NULL, "group_lag_groups_capped",
                   "the broker lists %zu groups: lag of the first %d", m, LL_OBS_MAX_GROUPS);
        free(all);
    }
    return k;
}

/* The committed offsets of group into s->rows from *nrows on; 0, or -1 with why. */
static int group_rows(sweep_lag *s, const char *group, size_t *nrows, int64_t deadline, char *why, size_t n)
{
    rd_kafka_ListConsumerGroupOffsets_t *req = rd_kafka_ListConsumerGroupOffsets_new(group, NULL);
    rd_kafka_AdminOptions_t *o = options(s, RD_KAFKA_ADMIN_OP_LISTCONSUMERGROUPOFFSETS);
    rd_kafka_ListConsumerGroupOffsets(s->rk, &req, 1, o, s->q);
    rd_kafka_AdminOptions_destroy(o);
    rd_kafka_ListConsumerGroupOffsets_destroy(req);
    rd_kafka_event_t *ev = admin_result(s, RD_KAFKA_EVENT_LISTCONSUMERGROUPOFFSETS_RESULT, why, n);
    if (!ev)
        return -1;
    size_t cnt = 0;
    const rd_kafka_group_result_t **gr = rd_kafka_ListConsumerGroupOffsets_result_groups(
        rd_kafka_event_ListConsumerGroupOffsets_result(ev), &cnt);
    int rc = 0;
    for (size_t i = 0; i < cnt && rc == 0; i++) {
        const rd_kafka_error_t *e = rd_kafka_group_result_error(gr[i]);
        const rd_kafka_topic_partition_list_t *parts = rd_kafka_group_result_partitions(gr[i]);
        if (e) {
            snprintf(why, n, "group %s: %s", group, rd_kafka_error_string(e));
            rc = -1;
            break;
        }
        for (int j = 0; parts && j < parts->cnt && rc == 0; j++) {
            const rd_kafka_topic_partition_t *p = &parts->elems[j];
            if (p->err || p->offset < 0 || *nrows >= LL_OBS_GROUP_LAG_SERIES)
                continue; /* nothing committed there (or the bound reached) */
            if (ll_now_ms() > deadline) {
                snprintf(why, n, "reading took longer than %d ms", 4 * s->timeout_ms);
                rc = -1;
                break;
            }
            int64_t lo = -1, hi = -1;
            rd_kafka_resp_err_t we =
                rd_kafka_query_watermark_offsets(s->rk, p->topic, p->partition, &lo, &hi, s->timeout_ms);
            if (we) {
                snprintf(why, n, "end of %s[%d]: %s", p->topic, (int)p->partition, rd_kafka_err2str(we));
                rc = -1;
                break;
            }
            lag_row *r = &s->rows[(*nrows)++];
            snprintf(r->group, sizeof r->group, "%s", group);
            snprintf(r->topic, sizeof r->topic, "%s", p->topic);
            r->partition = p->partition;
            r->lag = ll_obs_lag(hi, p->offset, lo);
        }
    }
    rd_kafka_event_destroy(ev);
    return rc;
}

void sweep_lag_read(sweep_lag *s)
{
    if (!s)
        return;
    char why[512] = "", *names[LL_OBS_MAX_GROUPS];
    int64_t deadline = ll_now_ms() + 4 * (int64_t)s->timeout_ms;
    int ng = list_groups(s, names, why, sizeof why), ok = ng >= 0;
    size_t nrows = 0;
    for (int i = 0; i < ng; i++) {
        if (ok && group_rows(s, names[i], &nrows, deadline, why, sizeof why) != 0)
            ok = 0;
        free(names[i]);
    }
    if (ok) { /* a complete reading replaces the previous one */
        ll_obs_group_lag_begin();
        for (size_t i = 0; i < nrows; i++)
            ll_obs_group_lag_set(s->rows[i].group, s->rows[i].topic, s->rows[i].partition, s->rows[i].lag);
    }
    ll_obs_group_lag_read(ok);
    if (ok && !s->last_ok)
        ll_log(LL_INFO, NULL, "group_lag_read", "consumer-group lag read from the broker again");
    else if (!ok && s->last_ok)
        ll_log(LL_WARN, NULL, "group_lag_unread",
               "consumer-group lag not read from the broker: %s (the previous values stay)", why);
    s->last_ok = ok;
}
