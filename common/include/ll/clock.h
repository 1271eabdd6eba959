/*
 * clock.h - the one monotonic clock of the services and tools (CLOCK_MONOTONIC): waits, deadlines,
 * backoffs and latencies are measured with it, never with the wall clock, which an operator or NTP
 * may step.
 */
#ifndef LL_CLOCK_H
#define LL_CLOCK_H

#include <stdint.h>

/* Monotonic time (ms) since an unspecified start; only differences mean anything. */
int64_t ll_now_ms(void);
/* The same in microseconds (latency metrics, per-statement timings). */
int64_t ll_now_us(void);

#endif
