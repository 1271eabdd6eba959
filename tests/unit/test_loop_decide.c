/*
 * test_loop_decide.c - the consumer loop's decision tables (ll/kloop_decide.h): every row,
 * for one message and for the set-based part; and when staged records go into a Kafka commit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/kloop_decide.h"

static const ll_loop_fault FAULTS[] = {LL_FAULT_UNAVAILABLE, LL_FAULT_INPUT, LL_FAULT_OTHER};

/* COMMIT, ROLLBACK and DEAD ignore the database's error class and the prerequisite clock. */
static void test_answers_without_error(void **state)
{
    (void)state;
    for (size_t f = 0; f < 3; f++)
        for (int w = 0; w < 2; w++) {
            assert_int_equal(ll_loop_decide(LL_APPLY_COMMIT, false, w, FAULTS[f]), LL_STEP_KEEP_REPLY);
            assert_int_equal(ll_loop_decide(LL_APPLY_ROLLBACK, false, w, FAULTS[f]), LL_STEP_UNDO_REPLY);
            assert_int_equal(ll_loop_decide(LL_APPLY_DEAD, false, w, FAULTS[f]), LL_STEP_UNDO_DEAD);
        }
}

/* DEFER holds the run until loop.prerequisite_wait has passed, then dead-letters. */
static void test_defer(void **state)
{
    (void)state;
    for (size_t f = 0; f < 3; f++) {
        assert_int_equal(ll_loop_decide(LL_APPLY_DEFER, false, false, FAULTS[f]), LL_STEP_UNDO_HOLD);
        assert_int_equal(ll_loop_decide(LL_APPLY_DEFER, false, true, FAULTS[f]), LL_STEP_UNDO_DEAD_PREREQ);
    }
}

/* DB: the batch goes when the database is gone; a refused value is a dead letter; anything else
 * holds the run. A value outside ll_apply is read as DB. */
static void test_db(void **state)
{
    (void)state;
    const ll_apply answers[] = {LL_APPLY_DB, (ll_apply)42};
    for (size_t a = 0; a < 2; a++)
        for (int w = 0; w < 2; w++) {
            assert_int_equal(ll_loop_decide(answers[a], false, w, LL_FAULT_UNAVAILABLE), LL_STEP_UNDO_BATCH);
            assert_int_equal(ll_loop_decide(answers[a], false, w, LL_FAULT_INPUT), LL_STEP_UNDO_DEAD_LEDGER);
            assert_int_equal(ll_loop_decide(answers[a], false, w, LL_FAULT_OTHER), LL_STEP_UNDO_RETRY);
        }
}

/* The set-based part: COMMIT keeps what it decided; any other answer undoes its part (every
 * message then goes one by one), or the batch when the database is gone. */
static void test_bulk(void **state)
{
    (void)state;
    for (size_t f = 0; f < 3; f++)
        assert_int_equal(ll_loop_decide(LL_APPLY_COMMIT, true, false, FAULTS[f]), LL_STEP_BULK_KEEP);
    const ll_apply others[] = {LL_APPLY_ROLLBACK, LL_APPLY_DEFER, LL_APPLY_DEAD, LL_APPLY_DB, (ll_apply)42};
    for (size_t a = 0; a < 5; a++) {
        assert_int_equal(ll_loop_decide(others[a], true, false, LL_FAULT_UNAVAILABLE), LL_STEP_UNDO_BATCH);
        assert_int_equal(ll_loop_decide(others[a], true, false, LL_FAULT_INPUT), LL_STEP_BULK_UNDO);
        assert_int_equal(ll_loop_decide(others[a], true, true, LL_FAULT_OTHER), LL_STEP_BULK_UNDO);
    }
}

/* A commit state: 10 records of 2,000 bytes staged behind the commit in flight (bounds 500 records,
 * 512 KiB), nothing blocked. */
static ll_commit_state staged_behind(void)
{
    ll_commit_state s = {.in_flight = true,
                         .ended = false,
                         .owed = true,
                         .blocked = false,
                         .staged = 10,
                         .staged_bytes = 2000,
                         .max_staged = 500,
                         .max_staged_bytes = 524288};
    return s;
}

/* No commit in flight: one starts when anything is owed, whether the loop may wait or not. */
static void test_commit_none_in_flight(void **state)
{
    (void)state;
    ll_commit_state s = staged_behind();
    s.in_flight = false;
    for (int w = 0; w < 2; w++) {
        s.owed = true;
        assert_int_equal(ll_loop_commit_decide(&s, w), LL_COMMIT_START);
        s.owed = false;
        assert_int_equal(ll_loop_commit_decide(&s, w), LL_COMMIT_LEAVE);
    }
}

/* One in flight: the staged records wait behind it; an ended one is taken at once; the loop waits
 * only when the staged records reach a bound (either) and it may wait. */
static void test_commit_in_flight(void **state)
{
    (void)state;
    ll_commit_state s = staged_behind();
    assert_int_equal(ll_loop_commit_decide(&s, true), LL_COMMIT_LEAVE);
    assert_int_equal(ll_loop_commit_decide(&s, false), LL_COMMIT_LEAVE);
    s.staged = 499;
    assert_int_equal(ll_loop_commit_decide(&s, true), LL_COMMIT_LEAVE);
    s.staged = 500;
    assert_int_equal(ll_loop_commit_decide(&s, true), LL_COMMIT_WAIT_START);
    assert_int_equal(ll_loop_commit_decide(&s, false), LL_COMMIT_LEAVE);
    s = staged_behind();
    s.staged_bytes = 524287;
    assert_int_equal(ll_loop_commit_decide(&s, true), LL_COMMIT_LEAVE);
    s.staged_bytes = 524288;
    assert_int_equal(ll_loop_commit_decide(&s, true), LL_COMMIT_WAIT_START);
    s.ended = true;
    assert_int_equal(ll_loop_commit_decide(&s, true), LL_COMMIT_TAKE_START);
    assert_int_equal(ll_loop_commit_decide(&s, false), LL_COMMIT_TAKE_START);
}

/* A rewind or a new producer owed: nothing begins, but an ended commit's outcome is still taken. */
static void test_commit_blocked(void **state)
{
    (void)state;
    ll_commit_state s = staged_behind();
    s.blocked = true;
    s.staged = 1000;
    assert_int_equal(ll_loop_commit_decide(&s, true), LL_COMMIT_LEAVE);
    s.in_flight = false;
    assert_int_equal(ll_loop_commit_decide(&s, true), LL_COMMIT_LEAVE);
    s.in_flight = s.ended = true;
    assert_int_equal(ll_loop_commit_decide(&s, false), LL_COMMIT_TAKE_START);
}

/* A replayed input: the recorded refusal restated, else applied again and never refused anew. */
static void test_replay_decide(void **state)
{
    (void)state;
    assert_int_equal(ll_replay_decide(false, false, false), LL_REPLAY_APPLY);
    assert_int_equal(ll_replay_decide(false, true, true), LL_REPLAY_APPLY);
    assert_int_equal(ll_replay_decide(true, true, true), LL_REPLAY_RESTATE);
    assert_int_equal(ll_replay_decide(true, true, false), LL_REPLAY_APPLY);
    assert_int_equal(ll_replay_decide(true, false, false), LL_REPLAY_AS_REPLAY);
}

static void test_replay_outcome(void **state)
{
    (void)state;
    assert_string_equal(ll_replay_outcome(LL_REPLAY_AS_REPLAY, "REJECTED"), "REPLAY");
    assert_string_equal(ll_replay_outcome(LL_REPLAY_AS_REPLAY, "REPLAY"), "REPLAY");
    assert_string_equal(ll_replay_outcome(LL_REPLAY_AS_REPLAY, "ACCEPTED"), "ACCEPTED");
    assert_string_equal(ll_replay_outcome(LL_REPLAY_APPLY, "REJECTED"), "REJECTED");
    assert_string_equal(ll_replay_outcome(LL_REPLAY_RESTATE, "REJECTED"), "REJECTED");
    assert_null(ll_replay_outcome(LL_REPLAY_AS_REPLAY, NULL));
}

/* A refused fetch: a range the broker deleted, a position past the log's end, or none. */
static void test_gap_decide(void **state)
{
    (void)state;
    assert_int_equal(ll_gap_decide(10, 40, 90), LL_GAP_BELOW);
    assert_int_equal(ll_gap_decide(39, 40, 90), LL_GAP_BELOW);
    assert_int_equal(ll_gap_decide(40, 40, 90), LL_GAP_NONE);
    assert_int_equal(ll_gap_decide(90, 40, 90), LL_GAP_NONE);
    assert_int_equal(ll_gap_decide(91, 40, 90), LL_GAP_ABOVE);
    assert_true(ll_gap_accepted(10, 10, 40));
    assert_true(ll_gap_accepted(39, 10, 40));
    assert_false(ll_gap_accepted(40, 10, 40));
    assert_false(ll_gap_accepted(9, 10, 40));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_answers_without_error),
        cmocka_unit_test(test_defer),
        cmocka_unit_test(test_db),
        cmocka_unit_test(test_bulk),
        cmocka_unit_test(test_commit_none_in_flight),
        cmocka_unit_test(test_commit_in_flight),
        cmocka_unit_test(test_commit_blocked),
        cmocka_unit_test(test_replay_decide),
        cmocka_unit_test(test_replay_outcome),
        cmocka_unit_test(test_gap_decide),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
