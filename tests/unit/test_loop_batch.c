/*
 * test_loop_batch.c - the loop's batch path driven through its io table (issue 28 §3, "Loop
 * unit tests"; loop_fake.h scripts the database, the producer and the consumer): hold and release
 * order with the committed offset below the first held message and the done offsets above it as
 * metadata; savepoints per database transaction (loop.db_batch_max, LL_BATCH_SAVEPOINTS); the
 * set-based apply's fallback to the per-message apply; a failed set-based retry that keeps the
 * earlier call's decisions; a set-based apply that decides without replies (a defect in the loop:
 * skipped, see the test); a dead letter recorded and answered once; a batch of many distinct
 * runs committed to its end (and with held messages among them).
 */
#include "loop_fake.h"

/* ---- hold and release order ------------------------------------------------------------------- */

static void test_hold_and_release_order(void **state)
{
    (void)state;
    char md[LL_OFFTRACK_METADATA_MAX];
    fk_open(0, NULL);
    F.decide = decide_prereq;
    fk_assign_parts(1);
    fk_put(0, 1, 1); /* 0: run 1 defers */
    fk_put(0, 2, 2); /* 1: run 2 */
    fk_put(0, 1, 3); /* 2: run 1, behind its held message */
    fk_step(10);
    assert_int_equal(F.n_calls, 2); /* offset 2 is held unapplied behind offset 0 */
    assert_int_equal(F.calls[0].off, 0);
    assert_int_equal(F.calls[0].answer, LL_APPLY_DEFER);
    assert_int_equal(F.calls[1].off, 1);
    assert_int_equal(fk_held(0), 2);
    assert_int_equal(fk_answers(0, 1), 1);
    assert_int_equal(fk_answers(0, 0) + fk_answers(0, 2), 0);
    assert_int_equal(fk_sent(0, md, sizeof md), 0); /* below the first held message */
    assert_string_equal(md, "ll1:1");               /* offset 1 done above it */

    /* later messages: run 1's joins its queue, run 2's flows past */
    fk_put(0, 1, 4); /* 3 */
    fk_put(0, 2, 5); /* 4 */
    fk_step(10);
    assert_int_equal(F.n_calls, 3);
    assert_int_equal(F.calls[2].off, 4);
    assert_int_equal(fk_held(0), 3);
    assert_int_equal(fk_sent(0, md, sizeof md), 0);
    assert_string_equal(md, "ll1:1,4");

    /* the prerequisite arrives; the held run waits for its backoff, then goes in offset order */
    F.prereq = 1;
    fk_step(10);
    assert_int_equal(F.n_calls, 3);
    fk_make_due();
    fk_step(10);
    assert_int_equal(F.n_calls, 6);
    assert_int_equal(F.calls[3].off, 0);
    assert_int_equal(F.calls[4].off, 2);
    assert_int_equal(F.calls[5].off, 3);
    assert_int_equal(fk_held(0), 0);
    assert_int_equal(fk_sent(0, md, sizeof md), 5);
    assert_string_equal(md, "");
    assert_int_equal(fk_kafka_committed(0), 5);
    fk_assert_answered_once(0, 0, 5);
}

/* ---- savepoints ------------------------------------------------------------------------------- */

/* m messages of distinct runs in one poll; the transactions' savepoint counts checked against want
 * (n_want transactions). */
static void savepoints_case(int m, const int *want, int n_want)
{
    fk_assign_parts(1);
    for (int i = 0; i < m; i++)
        fk_put(0, i + 1, i);
    fk_step((size_t)m);
    assert_int_equal(F.n_tx, n_want);
    for (int t = 0; t < n_want; t++)
        assert_int_equal(F.tx_sp[t], want[t]);
    assert_true(F.max_sp <= LL_BATCH_SAVEPOINTS);
    assert_int_equal(F.n_rollback, 0);
    assert_int_equal(F.n_begin, 1); /* one Kafka transaction for the batch */
    assert_int_equal(fk_sent(0, NULL, 0), m);
    fk_assert_answered_once(0, 0, m);
}

static void test_savepoints_db_batch_max_10(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.db_batch_max", "10", "loop.batch_max", "100", NULL};
    fk_open(0, kv);
    static const int want[] = {10, 10, 5};
    savepoints_case(25, want, 3);
    assert_int_equal(F.max_sp, 10);
}

static void test_savepoints_default_at_most_60(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.batch_max", "200", NULL};
    fk_open(0, kv);
    static const int want[] = {60, 60, 10};
    savepoints_case(130, want, 3);
}

static void test_savepoints_none_with_db_batch_max_1(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.db_batch_max", "1", NULL};
    fk_open(0, kv);
    static const int want[] = {0, 0, 0, 0, 0};
    savepoints_case(5, want, 5);
    assert_int_equal(F.max_sp, 0);
}

/* ---- the set-based apply ---------------------------------------------------------------------- */

/* Runs 1..runs, two messages each (seq run*10+1, run*10+2), interleaved on partition 0. */
static void put_runs_twice(int runs)
{
    for (int s = 1; s <= 2; s++)
        for (int r = 1; r <= runs; r++)
            fk_put(0, r, r * 10 + s);
}

/* Even runs are decided set-based; odd runs are left to the per-message apply. */
static int bulk_even_runs(const ll_msg *m, int call)
{
    return (seq_of(m) / 10) % 2 == 0 ? FK_DECIDE : FK_LEAVE;
}

/* The seqs of the per-message applies, in call order, into out (n at most); their count. */
static size_t per_message_seqs(int *out, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < F.n_calls && k < n; i++)
        if (F.calls[i].bulk == 0)
            out[k++] = F.calls[i].seq;
    return k;
}

static void test_set_based_fallback_in_run_order(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.db_batch_max", "10", NULL};
    fk_open(1, kv);
    F.bulk_decide = bulk_even_runs;
    fk_assign_parts(1);
    put_runs_twice(6);
    fk_step(50);
    int seqs[16];
    size_t n = per_message_seqs(seqs, 16);
    static const int want[] = {11, 12, 31, 32, 51, 52}; /* the left ones, in run order */
    assert_int_equal(n, 6);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(seqs[i], want[i]);
    for (long long o = 0; o < 12; o++)
        assert_int_equal(fk_decisions(0, o), 1); /* nothing applied twice */
    assert_true(F.bulk_calls >= 1);
    assert_int_equal(F.n_rollback + F.n_rollback_to, 0);
    /* a savepoint per message applied one by one, and one for the second set-based call (the first
     * call's effects are kept under it); none per decided message */
    assert_int_equal(F.max_sp, 6 + 1);
    fk_assert_answered_once(0, 0, 12);
    assert_int_equal(fk_sent(0, NULL, 0), 12);
}

/* The first call decides runs 1 and 2; the second decides run 3 and then fails (40001). */
static int bulk_second_call_fails(const ll_msg *m, int call)
{
    int run = seq_of(m) / 10;
    return (call == 1 && run <= 2) || (call == 2 && run == 3) ? FK_DECIDE : FK_LEAVE;
}

static void test_failed_set_based_retry_keeps_decisions(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.db_batch_max", "10", NULL};
    fk_open(1, kv);
    F.bulk_decide = bulk_second_call_fails;
    F.bulk_fail_call = 2;
    fk_assign_parts(1);
    put_runs_twice(4);
    fk_step(50);
    assert_int_equal(F.bulk_calls, 2);
    assert_int_equal(F.n_rollback_to, 1); /* the failed call's part alone */
    assert_int_equal(F.n_rollback, 0);
    int seqs[16];
    size_t n = per_message_seqs(seqs, 16);
    static const int want[] = {31, 32, 41, 42};
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(seqs[i], want[i]);
    for (size_t i = 0; i < F.n_calls; i++)
        if (F.calls[i].bulk)
            assert_true(F.calls[i].bulk == 1 && F.calls[i].seq / 10 <= 2);
    for (long long o = 0; o < 8; o++)
        assert_int_equal(fk_decisions(0, o), 1);
    fk_assert_answered_once(0, 0, 8);
    assert_int_equal(F.n_vis, 8); /* the failed call's replies dropped */
    assert_int_equal(fk_sent(0, NULL, 0), 8);
}

/* A set-based apply that decides without handing the replies over (a defect of the function):
 * the loop undoes the call and applies its messages one by one (ll_bulk_fn, ll/kloop.h), in the
 * same batch, without a rewind. */
static int bulk_all(const ll_msg *m, int call)
{
    return FK_DECIDE;
}

static void test_set_based_without_replies_goes_one_by_one(void **state)
{
    (void)state;
    /* a defect until this test came: batch.c turned the missing reply into LL_APPLY_DB
     * classed by db->err, which no call set ("" reads as unavailable): the whole batch was undone
     * and rewound, and the replay met the same function for ever */
    static const char *const kv[] = {"loop.db_batch_max", "10", NULL};
    fk_open(1, kv);
    F.bulk_decide = bulk_all;
    F.bulk_no_reply = 1;
    fk_assign_parts(1);
    for (int i = 1; i <= 4; i++)
        fk_put(0, i, i);
    fk_step(10);
    assert_false(fk_recovery_owed());
    for (long long o = 0; o < 4; o++)
        assert_int_equal(fk_decisions(0, o), 1); /* one by one */
    fk_assert_answered_once(0, 0, 4);
}

/* ---- dead letters ----------------------------------------------------------------------------- */

/* seq 2 cannot be applied at all. */
static ll_apply decide_dead_at_2(const ll_msg *m)
{
    return seq_of(m) == 2 ? LL_APPLY_DEAD : LL_APPLY_COMMIT;
}

/* A dead letter: its event in the batch's transaction, its record on the dead-letter topic with
 * its offset, once, and the partition moves on (per message, and one transaction per message). */
static void dead_letter_case(const char *db_batch_max, int want_tx)
{
    static const char *kv[] = {"loop.db_batch_max", NULL, NULL};
    kv[1] = db_batch_max;
    fk_open(0, kv);
    F.decide = decide_dead_at_2;
    fk_assign_parts(1);
    for (int i = 1; i <= 3; i++)
        fk_put(0, i, i);
    fk_step(10);
    assert_int_equal(F.n_dead_events, 1);
    assert_int_equal(F.n_tx, want_tx);
    fk_assert_answered_once(0, 0, 3);
    for (size_t i = 0; i < F.n_vis; i++)
        assert_string_equal(F.vis[i].topic, F.vis[i].off == 1 ? FK_DLQ : FK_REPLY);
    assert_int_equal(fk_sent(0, NULL, 0), 3);
}

static void test_dead_letter_once(void **state)
{
    (void)state;
    dead_letter_case("60", 1);
}

static void test_dead_letter_once_db_batch_max_1(void **state)
{
    (void)state;
    dead_letter_case("1", 3);
}

/* ---- many distinct runs ----------------------------------------------------------------------- */

static void put_distinct_runs(int n)
{
    for (int i = 0; i < n; i++)
        fk_put(0, (i * 7919) % n + 1, i); /* run order is not offset order */
}

static void test_many_distinct_runs_commit_to_the_end(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.batch_max", "2000", NULL};
    fk_open(0, kv);
    fk_assign_parts(1);
    put_distinct_runs(1000);
    assert_int_equal(fk_step(2000), 1000);
    char md[LL_OFFTRACK_METADATA_MAX];
    assert_int_equal(fk_sent(0, md, sizeof md), 1000);
    assert_string_equal(md, "");
    assert_int_equal(fk_kafka_committed(0), 1000);
    assert_int_equal(F.n_tx, 17); /* ceil(1000 / 60) */
    fk_assert_answered_once(0, 0, 1000);
}

/* Every 100th message (seq % 100 == 50) waits for its prerequisite until F.prereq. */
static ll_apply decide_every_100th(const ll_msg *m)
{
    return seq_of(m) % 100 == 50 && !F.prereq ? LL_APPLY_DEFER : LL_APPLY_COMMIT;
}

static void test_many_distinct_runs_with_held_ones(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.batch_max", "2000", NULL};
    fk_open(0, kv);
    F.decide = decide_every_100th;
    fk_assign_parts(1);
    put_distinct_runs(1000);
    fk_step(2000);
    char md[LL_OFFTRACK_METADATA_MAX];
    assert_int_equal(fk_held(0), 10);
    assert_int_equal(fk_sent(0, md, sizeof md), 50); /* the first held one */
    assert_true(strncmp(md, "ll", 2) == 0);          /* the 980 done above it, as metadata */
    assert_int_equal(fk_answers(0, 50), 0);
    F.prereq = 1;
    fk_make_due();
    fk_step(2000);
    assert_int_equal(fk_held(0), 0);
    assert_int_equal(fk_sent(0, md, sizeof md), 1000);
    assert_string_equal(md, "");
    fk_assert_answered_once(0, 0, 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_hold_and_release_order, fk_teardown),
        cmocka_unit_test_teardown(test_savepoints_db_batch_max_10, fk_teardown),
        cmocka_unit_test_teardown(test_savepoints_default_at_most_60, fk_teardown),
        cmocka_unit_test_teardown(test_savepoints_none_with_db_batch_max_1, fk_teardown),
        cmocka_unit_test_teardown(test_set_based_fallback_in_run_order, fk_teardown),
        cmocka_unit_test_teardown(test_failed_set_based_retry_keeps_decisions, fk_teardown),
        cmocka_unit_test_teardown(test_set_based_without_replies_goes_one_by_one, fk_teardown),
        cmocka_unit_test_teardown(test_dead_letter_once, fk_teardown),
        cmocka_unit_test_teardown(test_dead_letter_once_db_batch_max_1, fk_teardown),
        cmocka_unit_test_teardown(test_many_distinct_runs_commit_to_the_end, fk_teardown),
        cmocka_unit_test_teardown(test_many_distinct_runs_with_held_ones, fk_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
