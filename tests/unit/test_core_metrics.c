/* test_core_metrics.c - the metrics registry and its text exposition (metrics.h), the pure parts
 * of obs.h (lag from a librdkafka statistics sample, label bounds, health and readiness) and the
 * http.listen parser (http.h). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/http.h"
#include "ll/metrics.h"
#include "ll/obs.h"

/* The whole exposition of r (freed by the caller). */
static char *render(ll_metrics *r)
{
    size_t len = 0;
    char *t = ll_metrics_render(r, &len);
    assert_non_null(t);
    assert_int_equal(strlen(t), len);
    return t;
}

static void test_counter_exposition(void **state)
{
    (void)state;
    ll_metrics *r = ll_metrics_new();
    ll_metric *c = ll_metrics_add(r, LL_METRIC_COUNTER, "loadledger_inputs_total", "Inputs\nby \\ topic",
                                  "topic,outcome", 8, NULL, 0);
    ll_metric *u = ll_metrics_add(r, LL_METRIC_GAUGE, "loadledger_held_runs", "Held runs", "", 1, NULL, 0);
    assert_non_null(c);
    assert_non_null(u);
    const char *a[2] = {"chunks", "ACCEPTED"}, *q[2] = {"say \"hi\"\\", "x\ny"};
    ll_metric_add(c, a, 1);
    ll_metric_add(c, a, 2);
    ll_metric_add(c, a, -5); /* a counter never goes down */
    ll_metric_add(c, q, 1);
    char *t = render(r);
    assert_string_equal(t, "# HELP loadledger_inputs_total Inputs\\nby \\\\ topic\n"
                           "# TYPE loadledger_inputs_total counter\n"
                           "loadledger_inputs_total{topic=\"chunks\",outcome=\"ACCEPTED\"} 3\n"
                           "loadledger_inputs_total{topic=\"say \\\"hi\\\"\\\\\",outcome=\"x\\ny\"} 1\n"
                           "# HELP loadledger_held_runs Held runs\n"
                           "# TYPE loadledger_held_runs gauge\n"
                           "loadledger_held_runs 0\n");
    free(t);
    assert_true(ll_metric_value(c, a) == 3);
    ll_metric_set(u, NULL, 2.5);
    t = render(r);
    assert_non_null(strstr(t, "\nloadledger_held_runs 2.5\n"));
    free(t);
    ll_metrics_free(r);
}

static void test_histogram_buckets(void **state)
{
    (void)state;
    ll_metrics *r = ll_metrics_new();
    const double b[3] = {0.01, 0.1, 1};
    ll_metric *h = ll_metrics_add(r, LL_METRIC_HISTOGRAM, "x_seconds", "X", "", 1, b, 3);
    assert_non_null(h);
    ll_metric_observe(h, NULL, 0.01); /* on the bound: in that bucket (le = less or equal) */
    ll_metric_observe(h, NULL, 0.05);
    ll_metric_observe(h, NULL, 0.5);
    ll_metric_observe(h, NULL, 7); /* above every bound: only +Inf */
    ll_metric_observe(h, NULL, 0.0);
    char *t = render(r);
    assert_string_equal(t, "# HELP x_seconds X\n# TYPE x_seconds histogram\n"
                           "x_seconds_bucket{le=\"0.01\"} 2\n"
                           "x_seconds_bucket{le=\"0.1\"} 3\n"
                           "x_seconds_bucket{le=\"1\"} 4\n"
                           "x_seconds_bucket{le=\"+Inf\"} 5\n"
                           "x_seconds_sum 7.56\n"
                           "x_seconds_count 5\n");
    free(t);
    assert_true(ll_metric_value(h, NULL) == 5);
    ll_metrics_free(r);
}

static void test_labelled_histogram_and_reset(void **state)
{
    (void)state;
    ll_metrics *r = ll_metrics_new();
    const double b[1] = {5};
    ll_metric *h = ll_metrics_add(r, LL_METRIC_HISTOGRAM, "b", "B", "svc", 2, b, 1);
    const char *v[1] = {"claimer"};
    ll_metric_observe(h, v, 6);
    char *t = render(r);
    assert_non_null(
        strstr(t, "b_bucket{svc=\"claimer\",le=\"5\"} 0\nb_bucket{svc=\"claimer\",le=\"+Inf\"} 1\n"));
    assert_non_null(strstr(t, "b_sum{svc=\"claimer\"} 6\nb_count{svc=\"claimer\"} 1\n"));
    free(t);
    ll_metric_reset(h);
    assert_int_equal(ll_metric_series(h), 0);
    t = render(r);
    assert_string_equal(t, "# HELP b B\n# TYPE b histogram\n"); /* no series, no sample */
    free(t);
    ll_metrics_free(r);
}

static void test_label_sets_are_bounded(void **state)
{
    (void)state;
    ll_metrics *r = ll_metrics_new();
    ll_metric *g = ll_metrics_add(r, LL_METRIC_GAUGE, "lag", "Lag", "topic,partition", 3, NULL, 0);
    for (int p = 0; p < 100; p++) {
        char ps[8];
        snprintf(ps, sizeof ps, "%d", p);
        const char *v[2] = {"chunks", ps};
        ll_metric_add(g, v, 1);
    }
    /* three real series and one overflow series that took the other 97 */
    assert_int_equal(ll_metric_series(g), 4);
    const char *other[2] = {"_other", "_other"}, *p1[2] = {"chunks", "1"};
    assert_true(ll_metric_value(g, other) == 97);
    assert_true(ll_metric_value(g, p1) == 1);
    char *t = render(r);
    assert_non_null(strstr(t, "lag{topic=\"_other\",partition=\"_other\"} 97\n"));
    free(t);
    /* a long label value is cut, not a buffer overrun */
    char longv[300];
    memset(longv, 'a', sizeof longv - 1);
    longv[sizeof longv - 1] = '\0';
    ll_metric *c = ll_metrics_add(r, LL_METRIC_COUNTER, "c_total", "C", "k", 2, NULL, 0);
    const char *lv[1] = {longv};
    ll_metric_add(c, lv, 1);
    ll_metric_add(c, lv, 1);
    assert_int_equal(ll_metric_series(c), 1);
    assert_true(ll_metric_value(c, lv) == 2);
    ll_metrics_free(r);
}

static void test_registration_refusals(void **state)
{
    (void)state;
    ll_metrics *r = ll_metrics_new();
    const double up[2] = {1, 2}, down[2] = {2, 1};
    assert_null(ll_metrics_add(r, LL_METRIC_COUNTER, "bad-name", "", "", 1, NULL, 0));
    assert_null(ll_metrics_add(r, LL_METRIC_COUNTER, "9x", "", "", 1, NULL, 0));
    assert_null(ll_metrics_add(r, LL_METRIC_COUNTER, "x", "", "a,b,c,d", 1, NULL, 0)); /* > 3 labels */
    assert_null(ll_metrics_add(r, LL_METRIC_COUNTER, "x", "", "le", 1, NULL, 0));      /* reserved */
    assert_null(ll_metrics_add(r, LL_METRIC_COUNTER, "x", "", "a,,b", 1, NULL, 0));
    assert_null(ll_metrics_add(r, LL_METRIC_COUNTER, "x", "", "", 0, NULL, 0)); /* no series */
    assert_null(ll_metrics_add(r, LL_METRIC_HISTOGRAM, "h", "", "", 1, down, 2));
    assert_null(ll_metrics_add(r, LL_METRIC_HISTOGRAM, "h", "", "", 1, NULL, 0));
    assert_non_null(ll_metrics_add(r, LL_METRIC_HISTOGRAM, "h", "", "", 1, up, 2));
    assert_null(ll_metrics_add(r, LL_METRIC_GAUGE, "h", "", "", 1, NULL, 0)); /* twice */
    /* updates of the wrong kind, or on NULL, do nothing */
    ll_metric_observe(NULL, NULL, 1);
    ll_metric_add(NULL, NULL, 1);
    ll_metrics_free(r);
    /* the registry holds LL_METRICS_MAX_FAMILIES families at most */
    r = ll_metrics_new();
    for (int i = 0; i < LL_METRICS_MAX_FAMILIES; i++) {
        char n[16];
        snprintf(n, sizeof n, "m%d", i);
        assert_non_null(ll_metrics_add(r, LL_METRIC_GAUGE, n, "", "", 1, NULL, 0));
    }
    assert_null(ll_metrics_add(r, LL_METRIC_GAUGE, "one_more", "", "", 1, NULL, 0));
    ll_metrics_free(r);
}

static void test_reading_an_exposition(void **state)
{
    (void)state;
    /* what a service renders, read back */
    ll_metrics *r = ll_metrics_new();
    ll_metric *c = ll_metrics_add(r, LL_METRIC_COUNTER, "in_total", "In", "topic,code", 8, NULL, 0);
    const char *a[2] = {"chunks", ""}, *b[2] = {"claims", "CLAIM_MISMATCH"}, *q[2] = {"x\"}", "y"};
    ll_metric_add(c, a, 5);
    ll_metric_add(c, b, 2);
    ll_metric_add(c, q, 1);
    char *t = render(r);
    double sum, max;
    assert_int_equal(ll_metrics_text_sum(t, "in_total", NULL, NULL, &sum, &max), 3);
    assert_true(sum == 8 && max == 5);
    assert_int_equal(ll_metrics_text_sum(t, "in_total", "code", "CLAIM_MISMATCH", &sum, &max), 1);
    assert_true(sum == 2);
    assert_int_equal(ll_metrics_text_sum(t, "in_total", "topic", "x\"}", &sum, &max), 1); /* escaped */
    assert_int_equal(ll_metrics_text_sum(t, "in", NULL, NULL, &sum, &max), 0); /* a prefix is not a name */
    free(t);
    ll_metrics_free(r);
    assert_int_equal(ll_metrics_text_sum("# HELP g G\ng 3.5\ng_other 9\n", "g", NULL, NULL, &sum, &max), 1);
    assert_true(sum == 3.5);
    assert_int_equal(ll_metrics_text_sum("g{a=\"1\"} +Inf\n", "g", "a", "1", &sum, &max), 1);
    assert_int_equal(ll_metrics_text_sum("g{a=1} 3\n", "g", NULL, NULL, &sum, &max), -1);
    assert_int_equal(ll_metrics_text_sum("g{a=\"1\" 3\n", "g", NULL, NULL, &sum, &max), -1);
    assert_int_equal(ll_metrics_text_sum("g three\n", "g", NULL, NULL, &sum, &max), -1);
    assert_int_equal(ll_metrics_text_sum("", "g", NULL, NULL, &sum, &max), 0);
}

/* ---- obs.h ----------------------------------------------------------------------------------- */

typedef struct lag_seen {
    char topic[64];
    int32_t partition;
    int64_t end, lo;
} lag_seen;
typedef struct lag_list {
    lag_seen s[8];
    int n;
} lag_list;

static void collect_lag(void *arg, const ll_obs_part_stats *p)
{
    lag_list *l = arg;
    assert_true(l->n < 8);
    snprintf(l->s[l->n].topic, sizeof l->s[l->n].topic, "%s", p->topic);
    l->s[l->n].partition = p->partition;
    l->s[l->n].end = p->end;
    l->s[l->n++].lo = p->lo;
}

/* An excerpt of librdkafka 2.0.2's statistics of a consumer: the internal partition -1, an
 * assigned partition (stable offset 52 below a high watermark of 55: an open transaction), a
 * partition of the topic this consumer does not fetch (desired false), an assigned one whose
 * offsets are not known yet (-1001), and one with a high watermark only. */
static const char STATS[] =
    "{\"name\":\"rdkafka#consumer-1\",\"type\":\"consumer\",\"ts\":1,\"brokers\":{},"
    "\"topics\":{\"loadledger.chunks\":{\"topic\":\"loadledger.chunks\",\"partitions\":{"
    "\"0\":{\"partition\":0,\"desired\":true,\"fetch_state\":\"active\",\"committed_offset\":-1001,"
    "\"lo_offset\":3,\"hi_offset\":55,\"ls_offset\":52,\"consumer_lag\":-1},"
    "\"1\":{\"partition\":1,\"desired\":false,\"fetch_state\":\"none\",\"ls_offset\":9},"
    "\"2\":{\"partition\":2,\"desired\":true,\"fetch_state\":\"offset-query\",\"hi_offset\":-1001,"
    "\"ls_offset\":-1001},"
    "\"-1\":{\"partition\":-1,\"desired\":false,\"ls_offset\":-1001}}},"
    "\"loadledger.partition-failures\":{\"partitions\":{"
    "\"3\":{\"partition\":3,\"desired\":true,\"fetch_state\":\"active\",\"hi_offset\":8}}}}}";

static void test_lag_from_statistics(void **state)
{
    (void)state;
    lag_list l = {0};
    assert_int_equal(ll_obs_lag_parse(STATS, strlen(STATS), collect_lag, &l), 2);
    assert_int_equal(l.n, 2);
    int chunks = strcmp(l.s[0].topic, "loadledger.chunks") == 0 ? 0 : 1;
    assert_string_equal(l.s[chunks].topic, "loadledger.chunks");
    assert_int_equal(l.s[chunks].partition, 0);
    assert_int_equal(l.s[chunks].end, 52); /* read_committed: the stable offset */
    assert_int_equal(l.s[chunks].lo, 3);
    assert_string_equal(l.s[1 - chunks].topic, "loadledger.partition-failures");
    assert_int_equal(l.s[1 - chunks].partition, 3);
    assert_int_equal(l.s[1 - chunks].end, 8);
    assert_int_equal(l.s[1 - chunks].lo, -1);
    /* the lag counts from the loop's own committed offset, or the log start above it */
    assert_int_equal(ll_obs_lag(52, 40, 3), 12);
    assert_int_equal(ll_obs_lag(52, 0, 3), 49); /* never committed: from the earliest offset */
    assert_int_equal(ll_obs_lag(52, 52, 3), 0);
    assert_int_equal(ll_obs_lag(52, 60, -1), 0); /* never negative */
    assert_int_equal(ll_obs_lag(8, 0, -1), 8);
    lag_list none = {0};
    assert_int_equal(ll_obs_lag_parse("{\"topics\":", 10, collect_lag, &none), -1);
    assert_int_equal(ll_obs_lag_parse("{}", 2, collect_lag, &none), 0);
    assert_int_equal(none.n, 0);
}

static void test_label_values_of_replies(void **state)
{
    (void)state;
    char o[16], c[48];
    json_t *r = json_pack("{s:s,s:s}", "outcome", "REJECTED", "code", "CLAIM_MISMATCH");
    ll_obs_reply_labels(r, o, sizeof o, c, sizeof c);
    assert_string_equal(o, "REJECTED");
    assert_string_equal(c, "CLAIM_MISMATCH");
    json_decref(r);
    r = json_pack("{s:s,s:n}", "outcome", "ACCEPTED", "code");
    ll_obs_reply_labels(r, o, sizeof o, c, sizeof c);
    assert_string_equal(o, "ACCEPTED");
    assert_string_equal(c, "");
    json_decref(r);
    /* outside the fixed sets: OTHER, never the text itself */
    r = json_pack("{s:s,s:s}", "outcome", "accepted; drop table", "code", "lower case");
    ll_obs_reply_labels(r, o, sizeof o, c, sizeof c);
    assert_string_equal(o, "OTHER");
    assert_string_equal(c, "OTHER");
    json_decref(r);
    r = json_object();
    ll_obs_reply_labels(r, o, sizeof o, c, sizeof c);
    assert_string_equal(o, "OTHER");
    json_decref(r);
    assert_true(ll_obs_code_ok("PREREQUISITE_TIMEOUT"));
    assert_true(ll_obs_code_ok("E42"));
    assert_false(ll_obs_code_ok(""));
    assert_false(ll_obs_code_ok(NULL));
    assert_false(ll_obs_code_ok("A-B"));
    assert_true(ll_obs_code_ok("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"));   /* 40 */
    assert_false(ll_obs_code_ok("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")); /* 41 */
}

/* The label ids a staged record keeps (commit.c): every name comes back as itself, what
 * is not a code of codes.h as OTHER. */
static void test_label_ids(void **state)
{
    (void)state;
    const char *outcomes[] = {"ACCEPTED", "REPLAY", "REJECTED"};
    for (int i = 0; i < 3; i++)
        assert_string_equal(ll_obs_outcome_name(ll_obs_outcome_id(outcomes[i])), outcomes[i]);
    assert_string_equal(ll_obs_outcome_name(ll_obs_outcome_id("ACCEPTEDX")), "OTHER");
    assert_string_equal(ll_obs_outcome_name(ll_obs_outcome_id(NULL)), "OTHER");
    assert_string_equal(ll_obs_outcome_name(200), "OTHER");
    assert_int_equal(ll_obs_code_id(""), 0);
    assert_int_equal(ll_obs_code_id(NULL), 0);
    assert_string_equal(ll_obs_code_name(0), "");
    const char *codes[] = {"ACCEPTED", "RUN_STATUS_MISMATCH", "PREREQUISITE_TIMEOUT", "CLAIM_MISMATCH"};
    for (int i = 0; i < 4; i++) {
        assert_true(ll_obs_code_id(codes[i]) > 0);
        assert_string_equal(ll_obs_code_name(ll_obs_code_id(codes[i])), codes[i]);
    }
    assert_int_not_equal(ll_obs_code_id("RUN_STATUS_MISMATCH"), ll_obs_code_id("CLAIM_MISMATCH"));
    assert_string_equal(ll_obs_code_name(ll_obs_code_id("NOT_A_CODE_OF_OURS")), "OTHER");
    assert_string_equal(ll_obs_code_name(ll_obs_code_id("OTHER")), "OTHER");
    assert_string_equal(ll_obs_code_name(60000), "OTHER");
}

static void test_health_and_readiness(void **state)
{
    (void)state;
    assert_int_equal(ll_obs_health_status(1000, 31000, 30000), 200);
    assert_int_equal(ll_obs_health_status(1000, 31001, 30000), 503);
    assert_int_equal(ll_obs_health_status(0, 10, 30000), 503); /* never turned */
    assert_int_equal(ll_obs_ready_status(LL_OBS_CONSUMER, 1, 4, 0), 200);
    assert_int_equal(ll_obs_ready_status(LL_OBS_CONSUMER, 0, 4, 0), 503);
    assert_int_equal(ll_obs_ready_status(LL_OBS_CONSUMER, 1, 0, 0), 503);
    assert_int_equal(ll_obs_ready_status(LL_OBS_CONSUMER, 1, 4, 1), 503);
    assert_int_equal(ll_obs_ready_status(LL_OBS_PRODUCER, 1, 0, 0), 200);
    assert_int_equal(ll_obs_ready_status(LL_OBS_PRODUCER, 1, 0, 1), 503);
    assert_int_equal(ll_obs_ready_status(LL_OBS_PLAIN, 1, 0, 1), 200);
    assert_int_equal(ll_obs_ready_status(LL_OBS_PLAIN, 0, 0, 0), 503);
}

static void test_listen_address(void **state)
{
    (void)state;
    struct sockaddr_in sa;
    char err[200];
    assert_int_equal(ll_http_parse_listen("127.0.0.1:9464", &sa, err, sizeof err), 0);
    assert_int_equal(ntohs(sa.sin_port), 9464);
    assert_int_equal(ntohl(sa.sin_addr.s_addr), 0x7f000001);
    assert_int_equal(ll_http_parse_listen("localhost:0", &sa, err, sizeof err), 0);
    assert_int_equal(ntohs(sa.sin_port), 0);
    assert_int_equal(ntohl(sa.sin_addr.s_addr), 0x7f000001);
    const char *bad[] = {"9464",
                         ":9464",
                         "127.0.0.1:",
                         "127.0.0.1:65536",
                         "127.0.0.1:-1",
                         "127.0.0.1:80x",
                         "host.example:80",
                         "[::1]:80",
                         NULL};
    for (int i = 0; bad[i]; i++) {
        err[0] = '\0';
        assert_int_equal(ll_http_parse_listen(bad[i], &sa, err, sizeof err), -1);
        assert_non_null(strstr(err, "http.listen"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_exposition),           cmocka_unit_test(test_histogram_buckets),
        cmocka_unit_test(test_labelled_histogram_and_reset), cmocka_unit_test(test_label_sets_are_bounded),
        cmocka_unit_test(test_registration_refusals),        cmocka_unit_test(test_lag_from_statistics),
        cmocka_unit_test(test_label_values_of_replies),      cmocka_unit_test(test_label_ids),
        cmocka_unit_test(test_health_and_readiness),         cmocka_unit_test(test_listen_address),
        cmocka_unit_test(test_reading_an_exposition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
