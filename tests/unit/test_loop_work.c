/*
 * test_loop_work.c - the order of a batch's work (ll_work_cmp, batch.h): a total
 * order by run, then Kafka partition, then offset, whatever mix of held copies and fresh
 * messages, partitions and addresses it is given (docs/design.md §3: one lock order for every
 * transaction, a run's order kept within its partition); and the held queue (partition.c): in
 * offset order whatever order its copies come in, bounded by count and bytes, and one
 * prerequisite clock per run (partition.c) that outlives the held copies; and when the
 * set-based part tries a run again (batch.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../common/src/loop/batch.h"
#include "../../common/src/loop/partition.h"
#include "../../common/src/loop/txn.h"

static part_state PA = {.topic = "t.chunks", .partition = 0};
static part_state PB = {.topic = "t.chunks", .partition = 1};
static part_state PC = {.topic = "t.failures", .partition = 0};

static void set(lmsg *m, const char *run, part_state *ps, int64_t offset, int held)
{
    memset(m, 0, sizeof *m);
    strcpy(m->run, run);
    m->ps = ps;
    m->offset = offset;
    m->held = held;
}

static int cmp(const lmsg *a, const lmsg *b)
{
    int c = ll_work_cmp(&a, &b);
    return c < 0 ? -1 : c > 0;
}

/* Held copies of one run on two partitions, laid out so that address order and offset order
 * disagree: the triple x (A, offset 5), y (B), z (A, offset 3) made a cycle x < y < z < x when
 * messages on different partitions compared by address. Every triple is transitive now, and
 * every pair antisymmetric. */
static void test_total_order(void **state)
{
    (void)state;
    lmsg m[9];
    set(&m[0], "r1", &PA, 5, 1);
    set(&m[1], "r1", &PB, 9, 1);
    set(&m[2], "r1", &PA, 3, 1);
    set(&m[3], "r1", &PB, 2, 0);
    set(&m[4], "r1", &PA, 4, 0);
    set(&m[5], "r1", &PC, 1, 0);
    set(&m[6], "r0", &PB, 7, 0);
    set(&m[7], "r2", &PA, 1, 1);
    set(&m[8], "r1", &PA, 7, 0);
    for (size_t i = 0; i < 9; i++) {
        assert_int_equal(cmp(&m[i], &m[i]), 0);
        for (size_t j = 0; j < 9; j++) {
            assert_int_equal(cmp(&m[i], &m[j]), -cmp(&m[j], &m[i]));
            for (size_t k = 0; k < 9; k++)
                if (cmp(&m[i], &m[j]) < 0 && cmp(&m[j], &m[k]) < 0)
                    assert_int_equal(cmp(&m[i], &m[k]), -1);
        }
    }
}

/* Sorted, a run's messages stand together, each partition's in offset order: a held copy above
 * a fresh message refetched below it (a seek under a full held queue) comes after it. */
static void test_sorted_work(void **state)
{
    (void)state;
    lmsg m[7];
    set(&m[0], "r1", &PA, 10, 1); /* held, above the seek */
    set(&m[1], "r2", &PA, 11, 0);
    set(&m[2], "r1", &PA, 8, 0); /* fresh, refetched below the held copy */
    set(&m[3], "r1", &PB, 4, 1);
    set(&m[4], "r0", &PA, 9, 0);
    set(&m[5], "r1", &PB, 3, 0);
    set(&m[6], "r1", &PA, 12, 0);
    lmsg *w[7];
    for (size_t i = 0; i < 7; i++)
        w[i] = &m[i];
    qsort(w, 7, sizeof *w, ll_work_cmp);
    const char *runs[7] = {"r0", "r1", "r1", "r1", "r1", "r1", "r2"};
    const part_state *parts[7] = {&PA, &PA, &PA, &PA, &PB, &PB, &PA};
    const int64_t offs[7] = {9, 8, 10, 12, 3, 4, 11};
    for (size_t i = 0; i < 7; i++) {
        assert_string_equal(w[i]->run, runs[i]);
        assert_ptr_equal(w[i]->ps, parts[i]);
        assert_int_equal(w[i]->offset, offs[i]);
    }
}

/* A fresh message (no librdkafka message behind it: no headers to copy). */
static lmsg fresh(const char *run, part_state *ps, int64_t offset)
{
    lmsg m;
    set(&m, run, ps, offset, 0);
    m.key = run; /* the caller's string: m.run is a copy inside this frame */
    m.key_len = strlen(run);
    m.value = "v";
    m.len = 1;
    return m;
}

/* Copies held out of offset order (a seek below held ones refetches an older message) stand in
 * offset order; a refetched offset is known as held; a full queue takes no more. */
static void test_held_queue_in_offset_order(void **state)
{
    (void)state;
    ll_loop l;
    memset(&l, 0, sizeof l);
    l.max_held = 4;
    l.max_held_bytes = 1 << 20;
    part_state ps = {.topic = "t.chunks", .partition = 0};
    const int64_t offs[4] = {10, 12, 8, 11};
    for (size_t i = 0; i < 4; i++) {
        lmsg m = fresh("r1", &ps, offs[i]);
        assert_non_null(ll_loop_hold_copy(&l, &m));
    }
    const int64_t want[4] = {8, 10, 11, 12};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(ps.held[i]->offset, want[i]);
    assert_true(ll_loop_offset_held(&ps, 11));
    assert_false(ll_loop_offset_held(&ps, 9));
    lmsg m = fresh("r1", &ps, 13);
    assert_null(ll_loop_hold_copy(&l, &m));
    ll_loop_drop_held(&ps);
    free(ps.held);
}

/* The prerequisite clock is the run's on its partition: a copy held behind a deferred message
 * of its run starts where that one started; another run's does not. */
static void test_held_copy_takes_its_runs_clock(void **state)
{
    (void)state;
    ll_loop l;
    memset(&l, 0, sizeof l);
    l.max_held = 8;
    l.max_held_bytes = 1 << 20;
    part_state ps = {.topic = "t.chunks", .partition = 0};
    lmsg a = fresh("r1", &ps, 1), b = fresh("r1", &ps, 2), c = fresh("r2", &ps, 3);
    lmsg *ha = ll_loop_hold_copy(&l, &a);
    assert_non_null(ha);
    ha->defer_since_ms = 1234;
    lmsg *hb = ll_loop_hold_copy(&l, &b), *hc = ll_loop_hold_copy(&l, &c);
    assert_int_equal(hb->defer_since_ms, 1234);
    assert_int_equal(hc->defer_since_ms, 0);
    ll_loop_drop_held(&ps);
    free(ps.held);
}

/* loop.max_held_bytes: a copy that would take the held keys and values past it is refused (the
 * partition pauses, as for a full count); one message always fits an empty queue; a done copy
 * gives its bytes back. */
static void test_held_bytes_are_bounded(void **state)
{
    (void)state;
    ll_loop l;
    memset(&l, 0, sizeof l);
    l.max_held = 64;
    l.max_held_bytes = 1000;
    part_state ps = {.topic = "t.chunks", .partition = 0};
    lmsg big = fresh("r1", &ps, 1);
    big.len = 5000; /* larger than the budget alone: an empty queue still takes it */
    static char value[5000];
    big.value = value;
    assert_non_null(ll_loop_hold_copy(&l, &big));
    lmsg small = fresh("r1", &ps, 2);
    assert_null(ll_loop_hold_copy(&l, &small));
    assert_int_equal(ps.held_bytes, 5000 + big.key_len);
    ll_loop_drop_held(&ps);
    assert_int_equal(ps.held_bytes, 0);
    lmsg m = fresh("r1", &ps, 3);
    m.len = 400;
    m.value = value;
    assert_non_null(ll_loop_hold_copy(&l, &m));
    m.offset = 4;
    assert_non_null(ll_loop_hold_copy(&l, &m));
    m.offset = 5; /* 3 × (400 + key) > 1000 */
    assert_null(ll_loop_hold_copy(&l, &m));
    lmsg *first = ps.held[0];
    ll_loop_unhold(first);
    assert_int_equal(ps.n_held, 1);
    assert_int_equal(ps.held_bytes, 400 + m.key_len);
    assert_non_null(ll_loop_hold_copy(&l, &m));
    ll_loop_free_copy(first);
    ll_loop_drop_held(&ps);
    free(ps.held);
}

/* The prerequisite clock of a run on its partition (issue 26 §4): the first start counts, a later
 * one keeps it; another run or partition has none; an answer forgets it; it is forgotten two
 * periods after its start; with every slot taken the oldest clock gives way. */
static void test_run_clock(void **state)
{
    (void)state;
    part_state ps = {.topic = "t.chunks", .partition = 0}, other = {.topic = "t.chunks", .partition = 1};
    const char *r1 = "11111111-1111-1111-1111-111111111111", *r2 = "22222222-2222-2222-2222-222222222222";
    assert_int_equal(ll_loop_clock_of(&ps, r1, 5000, 100), 0);
    assert_int_equal(ll_loop_clock_start(&ps, r1, 100), 100);
    assert_int_equal(ll_loop_clock_start(&ps, r1, 900), 100);
    assert_int_equal(ll_loop_clock_of(&ps, r1, 5000, 6000), 100); /* expired, still known */
    assert_int_equal(ll_loop_clock_of(&ps, r2, 5000, 6000), 0);
    assert_int_equal(ll_loop_clock_of(&other, r1, 5000, 6000), 0);
    ll_loop_clock_stop(&ps, r1);
    assert_int_equal(ll_loop_clock_of(&ps, r1, 5000, 6000), 0);
    /* a rewind (the held queue dropped) restarts every wait */
    ll_loop_clock_start(&ps, r1, 100);
    ll_loop_drop_held(&ps);
    assert_int_equal(ll_loop_clock_of(&ps, r1, 5000, 200), 0);
    ll_loop_clock_start(&ps, r2, 1000);
    assert_int_equal(ll_loop_clock_of(&ps, r2, 5000, 10999), 1000);
    assert_int_equal(ll_loop_clock_of(&ps, r2, 5000, 11000), 0); /* two periods: a new wait */
    assert_int_equal(ll_loop_clock_of(&ps, r2, 5000, 1000), 0);
    /* a key that is no run id has no clock */
    assert_int_equal(ll_loop_clock_start(&ps, "", 5), 5);
    assert_int_equal(ll_loop_clock_of(&ps, "", 5000, 6), 0);
    /* full: the oldest gives way */
    char runs[LL_RUN_CLOCKS + 1][40];
    for (int i = 0; i <= LL_RUN_CLOCKS; i++) {
        snprintf(runs[i], sizeof runs[i], "%08d-0000-0000-0000-000000000000", i);
        ll_loop_clock_start(&ps, runs[i], 2000 + i);
    }
    assert_int_equal(ll_loop_clock_of(&ps, runs[0], 5000, 3000), 0);
    for (int i = 1; i <= LL_RUN_CLOCKS; i++)
        assert_int_equal(ll_loop_clock_of(&ps, runs[i], 5000, 3000), 2000 + i);
}

/* The set-based part's second try for a run (ll_batch_run_waits_after, issue 26): once work[i] is
 * applied, it is worth one only when the run's next undecided message was left for the order
 * alone (retry), on whatever partition: one left for another reason goes one by one first, and
 * the next run's messages never count. */
static void test_run_waits_after(void **state)
{
    (void)state;
    lmsg m[6];
    set(&m[0], "r1", &PC, 1, 0); /* a partition failure, applied one by one */
    set(&m[1], "r1", &PA, 1, 0); /* a chunk decided set-based */
    set(&m[2], "r1", &PA, 2, 0); /* a chunk behind m[0] (another partition) */
    set(&m[3], "r1", &PA, 3, 0);
    set(&m[4], "r2", &PB, 1, 0);
    set(&m[5], "r2", &PB, 2, 0);
    m[1].decided = 1;
    m[2].retry = m[3].retry = 1;
    lmsg *work[6] = {&m[0], &m[1], &m[2], &m[3], &m[4], &m[5]};
    batch b = {.work = work, .n_work = 6};
    assert_int_equal(ll_batch_run_waits_after(&b, 0), 1);
    m[2].retry = 0; /* left by the bulk function for itself: one by one first */
    assert_int_equal(ll_batch_run_waits_after(&b, 0), 0);
    assert_int_equal(ll_batch_run_waits_after(&b, 2), 1);
    assert_int_equal(ll_batch_run_waits_after(&b, 3), 0); /* the run's last: r2 is not its */
    m[2].retry = 1;
    m[1].decided = 0;
    m[0].ps = &PA; /* m[0] held on the chunks' partition: m[1..3] are held behind it */
    m[0].state = 2;
    assert_int_equal(ll_batch_run_waits_after(&b, 0), 0);
    m[3].ps = &PB; /* ... but not a message on another partition */
    assert_int_equal(ll_batch_run_waits_after(&b, 0), 1);
    m[5].retry = 1;
    assert_int_equal(ll_batch_run_waits_after(&b, 4), 1);
    m[5].decided = 2;
    assert_int_equal(ll_batch_run_waits_after(&b, 4), 0);
}

/* With loop.db_batch_max = 1 a dead letter's event is a transaction of its own (issue 26: a
 * rejection after it rolled the event back); with more, savepoints count, not messages. */
static void test_tx_full(void **state)
{
    (void)state;
    /* ll_txn_full_decide(open, loop.db_batch_max, messages applied, results queued, savepoints) */
    assert_int_equal(ll_txn_full_decide(false, 1, 0, 0, 0), 0); /* no transaction */
    assert_int_equal(ll_txn_full_decide(true, 1, 0, 0, 0), 0);
    assert_int_equal(ll_txn_full_decide(true, 1, 0, 1, 0), 1); /* a dead letter's event, no message applied */
    assert_int_equal(ll_txn_full_decide(true, 1, 1, 0, 0), 1);
    assert_int_equal(ll_txn_full_decide(true, 60, 1, 5, 59), 0);
    assert_int_equal(ll_txn_full_decide(true, 60, 1, 5, 60), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_total_order),
        cmocka_unit_test(test_sorted_work),
        cmocka_unit_test(test_held_queue_in_offset_order),
        cmocka_unit_test(test_held_copy_takes_its_runs_clock),
        cmocka_unit_test(test_held_bytes_are_bounded),
        cmocka_unit_test(test_run_clock),
        cmocka_unit_test(test_run_waits_after),
        cmocka_unit_test(test_tx_full),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
