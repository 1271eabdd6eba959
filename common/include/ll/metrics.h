/*
 * metrics.h - a small registry of Prometheus metrics (counters, gauges, histograms) with bounded
 * label sets, and its text exposition (format 0.0.4). Thread-safe: every call takes the
 * registry's mutex (the HTTP server renders from its own thread while the loop counts).
 *
 * Bounds: a family has at most 3 label names and at most max_series label-value sets; a new set
 * beyond that is counted in one overflow series whose every label value is "_other" (so a count
 * is never lost, and memory never grows past max_series + 1 series per family). A label value is
 * cut at LL_METRIC_VALUE_MAX - 1 bytes. A histogram has at most LL_METRIC_MAX_BUCKETS bounds.
 *
 * The functions are metrics.c's (the registry) and metrics_text.c's (the text exposition).
 */
#ifndef LL_METRICS_H
#define LL_METRICS_H

#include <stddef.h>

#define LL_METRIC_MAX_LABELS    3
#define LL_METRIC_MAX_BUCKETS   16
#define LL_METRIC_VALUE_MAX     80
#define LL_METRICS_MAX_FAMILIES 48

/* The kind of a family (Prometheus TYPE). */
typedef enum ll_metric_type { LL_METRIC_COUNTER, LL_METRIC_GAUGE, LL_METRIC_HISTOGRAM } ll_metric_type;

/* A registry (opaque). */
typedef struct ll_metrics ll_metrics;
/* A metric family of a registry (opaque; owned by the registry). */
typedef struct ll_metric ll_metric;

/* A new empty registry, or NULL when out of memory. Free with ll_metrics_free. */
ll_metrics *ll_metrics_new(void);
/* Frees the registry and its families (NULL is a no-op). */
void ll_metrics_free(ll_metrics *r);

/*
 * Registers a family. name and help are copied; labels is a comma-separated list of label names
 * ("" or NULL: none, at most LL_METRIC_MAX_LABELS); max_series bounds the label-value sets (at
 * least 1); bounds (histograms only, strictly increasing upper bounds, the +Inf bucket is
 * implicit) of n_bounds <= LL_METRIC_MAX_BUCKETS. Returns NULL on an invalid argument, a name
 * registered twice, or a full registry (LL_METRICS_MAX_FAMILIES).
 */
ll_metric *ll_metrics_add(ll_metrics *r, ll_metric_type type, const char *name, const char *help,
                          const char *labels, size_t max_series, const double *bounds, size_t n_bounds);

/* Adds v to a counter (v >= 0; a negative v is ignored) or a gauge of the series of `values`
 * (one value per label name; NULL for a family without labels). m NULL is a no-op. */
void ll_metric_add(ll_metric *m, const char *const *values, double v);
/* Sets a gauge (or a counter, to mirror a count kept elsewhere) to v. m NULL is a no-op. */
void ll_metric_set(ll_metric *m, const char *const *values, double v);
/* Observes v in a histogram: the first bucket whose bound is >= v, its sum and count. */
void ll_metric_observe(ll_metric *m, const char *const *values, double v);
/* Drops every series of m (a gauge rebuilt from a fresh sample, e.g. the lag per partition). */
void ll_metric_reset(ll_metric *m);
/* The value of a counter or gauge series, or the count of a histogram series; 0 when absent. */
double ll_metric_value(ll_metric *m, const char *const *values);
/* The number of series of m (the overflow series included). */
size_t ll_metric_series(ll_metric *m);

/* Renders every family in the text exposition format into a malloc'd NUL-terminated string the
 * caller frees (length in *len if not NULL); NULL when out of memory. */
char *ll_metrics_render(ll_metrics *r, size_t *len);

/*
 * Reads an exposition text (as a scraper does, e.g. `loadctl monitor --services`): the samples
 * named exactly `name` whose label `label` equals `value` (label NULL: every sample of name).
 * Adds their values into *sum and keeps the largest in *max (both set to 0 first). Returns the
 * number of samples matched, or -1 when a line of that name does not parse.
 */
int ll_metrics_text_sum(const char *text, const char *name, const char *label, const char *value, double *sum,
                        double *max);

#endif
