/*
 * kloop_clock.c - the loop's clocks (kloop_int.h: monotonic ms and µs), and the prerequisite
 * clocks of the runs waiting on a Kafka partition (kloop_batch.h, docs/design.md §3): a run's
 * wait runs for all its messages at once, held or not.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "kloop_batch.h"

int64_t ll_loop_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ll_loop_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The slot of run on ps, or NULL. */
static run_clock *find(part_state *ps, const char *run)
{
    if (!run[0] || strlen(run) >= sizeof ps->clocks[0].run)
        return NULL;
    for (size_t i = 0; i < LL_RUN_CLOCKS; i++)
        if (ps->clocks[i].run[0] && strcmp(ps->clocks[i].run, run) == 0)
            return &ps->clocks[i];
    return NULL;
}

int64_t ll_loop_clock_of(part_state *ps, const char *run, int64_t wait_ms, int64_t now)
{
    run_clock *c = find(ps, run);
    if (!c)
        return 0;
    if (now - c->since_ms >= 2 * wait_ms) {
        c->run[0] = '\0';
        return 0;
    }
    return c->since_ms;
}

int64_t ll_loop_clock_start(part_state *ps, const char *run, int64_t since)
{
    if (!run[0] || strlen(run) >= sizeof ps->clocks[0].run)
        return since;
    run_clock *c = find(ps, run);
    if (c)
        return c->since_ms;
    c = &ps->clocks[0]; /* a free slot, else the oldest clock */
    for (size_t i = 0; i < LL_RUN_CLOCKS && c->run[0]; i++)
        if (!ps->clocks[i].run[0] || ps->clocks[i].since_ms < c->since_ms)
            c = &ps->clocks[i];
    snprintf(c->run, sizeof c->run, "%s", run);
    c->since_ms = since;
    return since;
}

void ll_loop_clock_stop(part_state *ps, const char *run)
{
    run_clock *c = find(ps, run);
    if (c)
        c->run[0] = '\0';
}
