/*
 * metrics_int.h - the metrics registry's types, shared by its two files (not a public header;
 * ll/metrics.h is the public one):
 *
 *   metrics.c       the registry: families, label sets, updates under one mutex
 *   metrics_text.c  the Prometheus text exposition: rendered from a registry, and read back
 */
#ifndef LL_METRICS_INT_H
#define LL_METRICS_INT_H

#include <pthread.h>
#include <stdint.h>

#include "ll/metrics.h"

/* One label-value set of a family and what it counts. */
typedef struct series {
    char values[LL_METRIC_MAX_LABELS][LL_METRIC_VALUE_MAX];
    double value;                                /* counter, gauge; histogram: the sum */
    uint64_t buckets[LL_METRIC_MAX_BUCKETS + 1]; /* histogram: per bucket (not cumulative), +Inf last */
    uint64_t count;                              /* histogram: observations */
} series;

/* A metric family: its labels, bounds and series (allocated up front). */
struct ll_metric {
    ll_metrics *reg;
    ll_metric_type type;
    char *name, *help;
    size_t n_labels;
    char label_names[LL_METRIC_MAX_LABELS][64];
    double bounds[LL_METRIC_MAX_BUCKETS];
    size_t n_bounds;
    size_t max_series, n_series;
    int has_overflow;
    series *s; /* max_series regular slots, then the overflow slot */
};

/* The registry: one mutex guards every family. */
struct ll_metrics {
    pthread_mutex_t mu;
    ll_metric *fam[LL_METRICS_MAX_FAMILIES];
    size_t n;
};

#endif
