/*
 * test_loop_hold.c - what the loop does with one message's answer, driven through its io
 * table (issue 28 §3, "Loop unit tests"; loop_fake.h): an SQL error of each class (retryable
 * and busy: its run held and retried, nothing else undone; an input error: a LEDGER_REJECTED dead
 * letter); a reply that does not fit its schema (a REPLY_ENCODE_FAILED dead letter); the
 * prerequisite wait running out (the apply called once more with wait_expired, then a
 * PREREQUISITE_TIMEOUT dead letter); a full held queue (loop.max_held) pausing its partition at the
 * first message not held, and resuming it once the queue drained.
 */
#include "loop_fake.h"

/* seq 1 answers LL_APPLY_DB (F.apply_state) this many more times. */
static int db_errors_left;

static ll_apply decide_db_error_at_1(const ll_msg *m)
{
    if (seq_of(m) == 1 && db_errors_left > 0) {
        db_errors_left--;
        return LL_APPLY_DB;
    }
    return LL_APPLY_COMMIT;
}

/* Run 1 (seq 1, 2) and run 2 (seq 3) on partition 0, seq 1 failing once with sqlstate. */
static void sql_error_case(const char *sqlstate)
{
    fk_open(0, NULL);
    F.decide = decide_db_error_at_1;
    db_errors_left = 1;
    snprintf(F.apply_state, sizeof F.apply_state, "%s", sqlstate);
    fk_assign_parts(1);
    fk_put(0, 1, 1);
    fk_put(0, 1, 2);
    fk_put(0, 2, 3);
    fk_step(10);
}

/* A retryable or busy SQL error: that message undone alone (its savepoint), its run held (the
 * later message behind it), the other run answered, no rewind; retried after its backoff. */
static void assert_held_and_retried(void)
{
    assert_int_equal(F.n_rollback_to, 1);
    assert_int_equal(F.n_rollback, 0);
    assert_false(fk_recovery_owed());
    assert_int_equal(fk_held(0), 2);
    assert_int_equal(fk_answers(0, 2), 1);
    assert_int_equal(fk_sent(0, NULL, 0), 0);
    fk_run(10, 10);
    fk_assert_answered_once(0, 0, 3);
    assert_int_equal(F.n_dead_events, 0);
    for (size_t i = 0; i < F.n_vis; i++)
        assert_string_equal(F.vis[i].topic, FK_REPLY);
    assert_int_equal(fk_sent(0, NULL, 0), 3);
}

static void test_serialization_failure_holds_the_run(void **state)
{
    (void)state;
    sql_error_case("40001");
    assert_held_and_retried();
}

static void test_lock_timeout_holds_the_run(void **state)
{
    (void)state;
    sql_error_case("55P03");
    assert_held_and_retried();
}

/* An input error (a unique violation): a dead letter (LEDGER_REJECTED), the run moves on. */
static void test_input_error_dead_letters(void **state)
{
    (void)state;
    sql_error_case("23505");
    assert_int_equal(F.n_dead_events, 1);
    assert_false(fk_recovery_owed());
    assert_int_equal(fk_held(0), 0);
    fk_assert_answered_once(0, 0, 3);
    for (size_t i = 0; i < F.n_vis; i++)
        assert_string_equal(F.vis[i].topic, F.vis[i].off == 0 ? FK_DLQ : FK_REPLY);
    assert_int_equal(fk_sent(0, NULL, 0), 3);
}

/* A reply that does not fit its schema: a REPLY_ENCODE_FAILED dead letter in a transaction of its
 * own after the batch's, rather than the same message for ever; the other replies go out. */
static void test_reply_not_fitting_its_schema_dead_letters(void **state)
{
    (void)state;
    fk_open(0, NULL);
    F.bad_reply_seq = 2;
    fk_assign_parts(1);
    for (int i = 1; i <= 3; i++)
        fk_put(0, i, i);
    fk_step(10);
    assert_int_equal(F.n_dead_events, 1);
    assert_int_equal(F.n_tx, 2); /* the batch's, then the dead letter's */
    fk_assert_answered_once(0, 0, 3);
    for (size_t i = 0; i < F.n_vis; i++)
        assert_string_equal(F.vis[i].topic, F.vis[i].off == 1 ? FK_DLQ : FK_REPLY);
    assert_int_equal(fk_sent(0, NULL, 0), 3);
}

/* ---- the prerequisite wait -------------------------------------------------------------------- */

static int expired_seen[8];
static size_t n_expired_seen;

/* seq 1's prerequisite never comes; wait_expired recorded per call of seq 1. */
static ll_apply decide_never_there(const ll_msg *m)
{
    if (seq_of(m) != 1)
        return LL_APPLY_COMMIT;
    if (n_expired_seen < 8)
        expired_seen[n_expired_seen++] = m->wait_expired;
    return LL_APPLY_DEFER;
}

static void test_prerequisite_timeout_dead_letters(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.prerequisite_wait", "PT0S", NULL};
    fk_open(0, kv);
    n_expired_seen = 0;
    F.decide = decide_never_there;
    fk_assign_parts(1);
    fk_put(0, 1, 1);
    fk_put(0, 1, 2);
    fk_step(10);
    assert_int_equal(fk_held(0), 2);
    fk_run(10, 10);
    assert_int_equal(n_expired_seen, 2);
    assert_int_equal(expired_seen[0], 0);
    assert_int_equal(expired_seen[1], 1); /* once more, for the business answer */
    assert_int_equal(F.n_dead_events, 1);
    fk_assert_answered_once(0, 0, 2);
    for (size_t i = 0; i < F.n_vis; i++)
        assert_string_equal(F.vis[i].topic, F.vis[i].off == 0 ? FK_DLQ : FK_REPLY);
    assert_int_equal(fk_sent(0, NULL, 0), 2);
}

/* ---- a full held queue ------------------------------------------------------------------------ */

static void test_full_held_queue_pauses_the_partition(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.max_held", "2", NULL};
    fk_open(0, kv);
    F.decide = decide_prereq;
    fk_assign_parts(1);
    for (int s = 1; s <= 5; s++)
        fk_put(0, 1, s); /* 0..4: run 1, behind its first */
    fk_put(0, 2, 6);     /* 5: run 2 */
    fk_step(10);
    assert_int_equal(fk_held(0), 2);
    assert_true(F.paused[0]);
    assert_int_equal(F.n_seek, 1);
    assert_int_equal(fk_find(F.sought, 0)->offset, 2); /* the first message neither done nor held */
    assert_int_equal(fk_answers(0, 5), 1);             /* run 2 flows past */
    assert_int_equal(fk_sent(0, NULL, 0), 0);
    fk_step(10); /* still full: nothing fetched */
    assert_int_equal(F.n_calls, 2);
    F.prereq = 1;
    fk_run(10, 10);
    assert_false(F.paused[0]);
    assert_true(F.n_resume >= 1);
    for (long long o = 0; o < 6; o++)
        assert_int_equal(fk_decisions(0, o), 1);
    fk_assert_answered_once(0, 0, 6);
    assert_int_equal(fk_sent(0, NULL, 0), 6);
}

/* A held offset fetched again (a seek below the held messages, or librdkafka 2.0.2 refetching a
 * stale position when a partition is resumed): the fresh copy is skipped, the held copy is the one
 * applied, and the run's held copies keep their offset order (the batch-path scenario 2, with
 * test_batch_review.py's integration test). */
static void test_refetched_held_offset_is_applied_once(void **state)
{
    (void)state;
    fk_open(0, NULL);
    F.decide = decide_prereq;
    fk_assign_parts(1);
    fk_put(0, 1, 1); /* 0: run 1 defers */
    fk_put(0, 1, 2); /* 1: behind it */
    fk_put(0, 2, 3); /* 2: run 2 */
    fk_step(10);
    assert_int_equal(fk_held(0), 2);
    assert_int_equal(fk_answers(0, 2), 1);
    F.fetch_pos[0] = 0; /* the consumer delivers offsets 0..2 again */
    fk_step(10);
    assert_int_equal(fk_held(0), 2);         /* the copies were not queued twice */
    assert_int_equal(fk_decisions(0, 2), 1); /* done above the committed offset: skipped */
    F.prereq = 1;
    fk_run(10, 10);
    assert_int_equal(fk_held(0), 0);
    for (long long o = 0; o < 3; o++)
        assert_int_equal(fk_decisions(0, o), 1);
    fk_assert_answered_once(0, 0, 3);
    assert_int_equal(fk_sent(0, NULL, 0), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_serialization_failure_holds_the_run, fk_teardown),
        cmocka_unit_test_teardown(test_lock_timeout_holds_the_run, fk_teardown),
        cmocka_unit_test_teardown(test_input_error_dead_letters, fk_teardown),
        cmocka_unit_test_teardown(test_reply_not_fitting_its_schema_dead_letters, fk_teardown),
        cmocka_unit_test_teardown(test_prerequisite_timeout_dead_letters, fk_teardown),
        cmocka_unit_test_teardown(test_full_held_queue_pauses_the_partition, fk_teardown),
        cmocka_unit_test_teardown(test_refetched_held_offset_is_applied_once, fk_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
