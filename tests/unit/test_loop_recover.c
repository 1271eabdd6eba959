/*
 * test_loop_recover.c - the loop's undo and rewind paths driven through its io table (issue
 * 28 §3, "Loop unit tests"; loop_fake.h): a database failure in the middle of a batch (rolled
 * back, nothing staged or produced, the assignment paused, then a seek to the committed offsets
 * and a resume; the same for the positions statement before the COMMIT, and a new connection
 * whose positions are read before anything is applied); each Kafka failure class (abortable commit,
 * send_offsets, produce, begin: abort and rewind; a fatal producer error: a new producer, then the rewind;
 * fenced: the loop ends) and, after each, the replay answering every input once in what committed
 * transactions made visible; and the bound on the records staged behind a Kafka commit in flight (overlap
 * on).
 */
#include "loop_fake.h"

/* internal: records staged for the next Kafka transaction. */
static size_t staged(void)
{
    return ll_loop_staged_count(F.l);
}

/* internal: whether the commit of the overlap tests' gate has returned. */
static int commits_returned(void)
{
    pthread_mutex_lock(&F.mu);
    int n = F.commits_returned;
    pthread_mutex_unlock(&F.mu);
    return n;
}

/* ---- undo ------------------------------------------------------------------------------------- */

/* seq 3 finds the database gone (SQLSTATE 08006) until F.prereq. */
static ll_apply decide_db_lost_at_3(const ll_msg *m)
{
    return seq_of(m) == 3 && !F.prereq ? LL_APPLY_DB : LL_APPLY_COMMIT;
}

/* After a batch was undone: nothing of the failed transaction staged (kept: the replies of the
 * batch's transactions committed before it, never produced), nothing produced, a rewind owed,
 * every partition paused; the rewind waits for its backoff, then seeks to the committed offsets
 * and resumes, and the replay answers every input once. */
static void assert_undone_then_rewound(int parts, const long long *ends, size_t kept)
{
    assert_int_equal(staged(), kept);
    assert_int_equal(F.n_begin, 0);
    assert_int_equal(F.n_vis, 0);
    assert_true(fk_rewind_owed());
    for (int p = 0; p < parts; p++)
        assert_true(F.paused[p]);
    F.prereq = 1;
    fk_step(50); /* the backoff has not passed: nothing polled, nothing sought */
    assert_int_equal(F.n_seek, 0);
    F.l->rec.at_ms = 0;
    fk_step(50);
    assert_int_equal(F.n_seek, 1);
    for (int p = 0; p < parts; p++) {
        assert_int_equal(fk_find(F.sought, p)->offset, RD_KAFKA_OFFSET_BEGINNING); /* nothing committed */
        assert_false(F.paused[p]);
    }
    assert_false(fk_recovery_owed());
    fk_run(50, 10);
    for (int p = 0; p < parts; p++) {
        fk_assert_answered_once(p, 0, ends[p]);
        assert_int_equal(fk_kafka_committed(p), ends[p]);
    }
}

static void test_undo_db_lost_mid_batch(void **state)
{
    (void)state;
    fk_open(0, NULL);
    F.decide = decide_db_lost_at_3;
    fk_assign_parts(2);
    for (int i = 1; i <= 5; i++)
        fk_put(0, i, i);
    fk_put(1, 11, 11);
    fk_put(1, 12, 12);
    fk_step(50);
    assert_int_equal(F.n_calls, 3); /* runs 1, 2, then 3 failed: nothing after it */
    assert_int_equal(F.n_rollback, 1);
    assert_int_equal(F.n_db_commit, 0);
    static const long long ends[] = {5, 2};
    assert_undone_then_rewound(2, ends, 0);
}

/* The second COMMIT of a batch fails: the first transaction's replies were staged, and are
 * dropped by the rewind (never visible), answered again by the replay. */
static void test_undo_db_commit_lost_after_an_earlier_commit(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.db_batch_max", "2", NULL};
    fk_open(0, kv);
    F.fail_db_commit = 2;
    fk_assign_parts(1);
    for (int i = 1; i <= 5; i++)
        fk_put(0, i, i);
    fk_step(50);
    assert_int_equal(F.n_db_commit, 2);
    assert_int_equal(F.n_tx, 1);
    static const long long ends[] = {5};
    assert_undone_then_rewound(1, ends, 2); /* dropped by the rewind */
}

/* The statement before the COMMIT (positions, heartbeats) fails: the batch is undone as above. */
static void test_undo_precommit_failure(void **state)
{
    (void)state;
    fk_open(0, NULL);
    F.fail_precommit = 1;
    fk_assign_parts(1);
    for (int i = 1; i <= 3; i++)
        fk_put(0, i, i);
    fk_step(10);
    assert_int_equal(F.n_rollback, 1);
    assert_int_equal(F.n_db_commit, 0);
    static const long long ends[] = {3};
    assert_undone_then_rewound(1, ends, 0);
}

/* A new database connection to the same ledger is no loss: the position write's compare-and-set
 * holds, nothing is read again (issue 39: whether the ledger is the one last seen is the write's
 * question, not the connection's). */
static void test_new_connection_to_the_same_ledger_goes_on(void **state)
{
    (void)state;
    fk_open(0, NULL);
    fk_assign_parts(1);
    fk_put(0, 1, 1);
    fk_put(0, 2, 2);
    fk_run(10, 10);
    int reads = F.n_positions_read;
    F.reconnect = 1;
    fk_put(0, 3, 3);
    fk_step(10);
    assert_false(fk_rewind_owed());
    assert_int_equal(F.n_positions_read, reads);
    assert_int_equal(F.n_position_refused, 0);
    fk_run(10, 10);
    assert_int_equal(F.n_calls, 3);
    fk_assert_answered_once(0, 0, 3);
}

/* Offsets 0 and 1 answered and committed; then the ledger goes back to before them behind the same
 * connection (a pooler after a failover: no new connection, no error), and offset 2 comes. */
static void ledger_gone_back(const char *const *kv)
{
    fk_open(0, kv);
    fk_assign_parts(1);
    fk_put(0, 1, 1);
    fk_put(0, 2, 2);
    fk_run(10, 10);
    assert_int_equal(fk_kafka_committed(0), 2);
    fk_ledger_position(0, 0, ""); /* the ledger lost both */
    F.ledger_moved = 1;
}

/* Found at the next write: its position's compare-and-set is refused, the batch undone (nothing
 * of it commits), the positions merged again, and what the ledger lost applied again without a
 * second answer. */
static void test_ledger_gone_back_behind_the_same_connection_is_found_at_the_next_write(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.position_check_interval", "0", NULL};
    ledger_gone_back(kv);
    int commits = F.n_db_commit;
    fk_put(0, 3, 3);
    fk_step(10);
    assert_int_equal(F.n_position_refused, 1);
    assert_int_equal(F.n_db_commit, commits); /* the refused write's transaction never commits */
    assert_int_equal(F.n_rollback, 1);
    assert_true(fk_rewind_owed());
    F.l->rec.at_ms = 0;
    fk_run(10, 10);
    assert_int_equal(F.n_rewind_rows, 1);    /* nifi_ops.position_rewind: the loss recorded */
    assert_int_equal(fk_decisions(0, 0), 2); /* applied again */
    assert_int_equal(fk_decisions(0, 1), 2);
    fk_assert_answered_once(0, 0, 3);
    assert_int_equal(fk_kafka_committed(0), 3);
}

/* Found with no input at all: the idle check (loop.position_check_interval) sees the position
 * moved and the loop rewinds; the lost inputs are applied again, unanswered. Off, nothing finds it
 * while no input comes. */
static void test_ledger_gone_back_on_an_idle_partition_is_found_by_the_check(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.position_check_interval", "PT1S", NULL};
    ledger_gone_back(kv);
    F.l->position_check_at = 0; /* due now */
    int checks = F.n_position_checks;
    fk_step(10);
    assert_int_equal(F.n_position_checks, checks + 1);
    assert_true(fk_rewind_owed());
    F.l->rec.at_ms = 0;
    fk_run(10, 10);
    assert_int_equal(F.n_rewind_rows, 1);
    assert_int_equal(fk_decisions(0, 0), 2);
    assert_int_equal(fk_decisions(0, 1), 2);
    fk_assert_answered_once(0, 0, 2);
    assert_int_equal(F.n_position_refused, 0);
}

static void test_idle_check_off_finds_nothing_without_input(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.position_check_interval", "0", NULL};
    ledger_gone_back(kv);
    fk_run(10, 10);
    assert_false(fk_rewind_owed());
    assert_int_equal(F.n_position_checks, 0);
    assert_int_equal(fk_decisions(0, 0), 1);
}

/* ---- the Kafka failure classes ---------------------------------------------------------------- */

/* Four inputs of distinct runs on partition 0, polled once with the failure set up. */
static void first_batch(void)
{
    fk_assign_parts(1);
    for (int i = 1; i <= 4; i++)
        fk_put(0, i, i);
    fk_step(10);
}

/* The replay after the failure: every input answered once, ACCEPTED, the commit at the end. */
static void assert_replayed_once(void)
{
    fk_run(10, 10);
    fk_assert_answered_once(0, 0, 4);
    for (size_t i = 0; i < F.n_vis; i++)
        assert_string_equal(F.vis[i].outcome, "ACCEPTED");
    assert_int_equal(fk_kafka_committed(0), 4);
    assert_false(fk_recovery_owed());
}

/* An abortable failure: aborted, the staged records dropped, rewound to the committed offsets at
 * once (nothing paused afterwards). */
static void assert_aborted_and_rewound(void)
{
    assert_int_equal(F.n_abort, 1);
    assert_int_equal(F.n_vis, 0);
    assert_int_equal(staged(), 0);
    assert_int_equal(F.n_seek, 1);
    assert_int_equal(fk_find(F.sought, 0)->offset, RD_KAFKA_OFFSET_BEGINNING);
    assert_false(fk_recovery_owed());
    assert_false(F.paused[0]);
    assert_int_equal(F.n_remake, 0);
    assert_replayed_once();
    assert_int_equal(F.n_calls, 8); /* applied twice in the database (the replay), answered once */
}

static void test_rewind_after_abortable_commit_error(void **state)
{
    (void)state;
    fk_open(0, NULL);
    F.fail_commit = 1;
    first_batch();
    assert_int_equal(F.n_commit_fail, 1);
    assert_aborted_and_rewound();
}

static void test_rewind_after_send_offsets_error(void **state)
{
    (void)state;
    fk_open(0, NULL);
    F.fail_send = 1;
    first_batch();
    assert_int_equal(F.n_commit_ok + F.n_commit_fail, 0);
    assert_aborted_and_rewound();
}

static void test_rewind_after_produce_error(void **state)
{
    (void)state;
    fk_open(0, NULL);
    F.fail_produce = 1;
    first_batch();
    assert_int_equal(F.n_produce_fail, 1);
    assert_int_equal(F.n_send, 0);
    assert_aborted_and_rewound();
}

static void test_rewind_after_begin_error(void **state)
{
    (void)state;
    fk_open(0, NULL);
    F.fail_begin = 1;
    first_batch();
    assert_int_equal(F.n_send, 0);
    assert_aborted_and_rewound();
}

/* A fatal producer error that is not a fence: no abort, the assignment paused, the producer made
 * again by the next recovery step, then the rewind. */
static void test_new_producer_after_fatal_error(void **state)
{
    (void)state;
    fk_open(0, NULL);
    F.fail_commit = 1;
    F.fatal_code = RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
    first_batch();
    assert_true(fk_producer_owed());
    assert_false(fk_exit_owed());
    assert_int_equal(F.n_abort, 0);
    assert_int_equal(F.n_remake, 0);
    assert_int_equal(staged(), 0);
    assert_true(F.paused[0]);
    assert_int_equal(F.n_vis, 0);
    fk_step(10);
    assert_int_equal(F.n_remake, 1);
    assert_int_equal(F.n_seek, 1);
    assert_false(F.paused[0]);
    assert_replayed_once();
}

/* Fenced: the loop is to end (ll_loop_run returns 2); nothing more is produced or committed. */
static void test_fenced_ends_the_loop(void **state)
{
    (void)state;
    fk_open(0, NULL);
    F.fail_commit = 1;
    F.fatal_code = RD_KAFKA_RESP_ERR__FENCED;
    first_batch();
    assert_true(fk_exit_owed());
    assert_int_equal(F.n_abort, 0);
    assert_int_equal(F.n_remake, 0);
    int begun = F.n_begin;
    fk_put(0, 5, 5);
    fk_step(10);
    assert_int_equal(F.n_begin, begun);
    assert_int_equal(F.n_vis, 0);
    assert_int_equal(fk_kafka_committed(0), -1);
}

/* ---- the staged records behind a commit in flight --------------------------------------------- */

/* Opens the commit gate after 50 ms, while the loop's thread is (to be) waiting for the commit. */
static void *open_gate_later(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    fk_gate_set(1, 1);
    return NULL;
}

static void test_staged_records_bounded_behind_commit(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.overlap_commit", "true", "loop.batch_max", "2", NULL};
    fk_open(0, kv);
    fk_assign_parts(1);
    for (int i = 1; i <= 12; i++)
        fk_put(0, i, i);
    fk_gate_set(1, 0);
    fk_step(2); /* the first Kafka commit begins, held at the gate */
    assert_true(ll_loop_commit_in_flight(F.l));
    size_t bound = LL_LOOP_STAGED_BATCHES * 2;
    for (size_t k = 1; 2 * k < bound; k++) {
        fk_step(2); /* staged behind it: the loop goes on */
        assert_int_equal(staged(), 2 * k);
        assert_int_equal(commits_returned(), 0);
    }
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, open_gate_later, NULL), 0);
    fk_step(2); /* the bound reached: the loop waits for the commit, then begins the next */
    assert_true(commits_returned() >= 1);
    assert_int_equal(staged(), 0);
    pthread_join(t, NULL);
    assert_int_equal(ll_loop_commit_wait(F.l), 0);
    assert_int_equal(F.n_commit_ok, 2);
    assert_int_equal(F.txn_recs[0], 2);
    assert_int_equal(F.txn_recs[1], bound);
    fk_run(2, 20);
    ll_loop_commit_drain(F.l);
    for (int i = 0; i < F.n_commit_ok; i++)
        assert_true(F.txn_recs[i] <= bound);
    fk_assert_answered_once(0, 0, 12);
    assert_int_equal(fk_kafka_committed(0), 12);
}

/* Overlap on: the commit in flight fails while a later batch's records are staged behind it:
 * aborted, the staged records dropped with it, rewound; the replay answers every input once. */
static void test_rewind_after_commit_in_flight_fails(void **state)
{
    (void)state;
    static const char *const kv[] = {"loop.overlap_commit", "true", "loop.batch_max", "2", NULL};
    fk_open(0, kv);
    fk_assign_parts(1);
    for (int i = 1; i <= 6; i++)
        fk_put(0, i, i);
    fk_gate_set(1, 0);
    F.fail_commit = 1;
    fk_step(2);
    fk_step(2);
    assert_int_equal(staged(), 2);
    fk_gate_set(0, 1);
    assert_int_equal(ll_loop_commit_wait(F.l), -1); /* the outcome taken: failed, and reported */
    assert_non_null(ll_loop_commit_error(F.l));
    assert_int_equal(F.n_abort, 0); /* the commit job recovers nothing itself: the loop does */
    assert_int_equal(ll_loop_commit_failed(F.l), -1);
    assert_null(ll_loop_commit_error(F.l));
    assert_int_equal(F.n_abort, 1);
    assert_int_equal(staged(), 0);
    assert_int_equal(F.n_seek, 1);
    assert_int_equal(F.n_vis, 0);
    fk_run(2, 20);
    ll_loop_commit_drain(F.l);
    fk_assert_answered_once(0, 0, 6);
    assert_int_equal(fk_kafka_committed(0), 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_undo_db_lost_mid_batch, fk_teardown),
        cmocka_unit_test_teardown(test_undo_db_commit_lost_after_an_earlier_commit, fk_teardown),
        cmocka_unit_test_teardown(test_undo_precommit_failure, fk_teardown),
        cmocka_unit_test_teardown(test_new_connection_to_the_same_ledger_goes_on, fk_teardown),
        cmocka_unit_test_teardown(test_ledger_gone_back_behind_the_same_connection_is_found_at_the_next_write,
                                  fk_teardown),
        cmocka_unit_test_teardown(test_ledger_gone_back_on_an_idle_partition_is_found_by_the_check,
                                  fk_teardown),
        cmocka_unit_test_teardown(test_idle_check_off_finds_nothing_without_input, fk_teardown),
        cmocka_unit_test_teardown(test_rewind_after_abortable_commit_error, fk_teardown),
        cmocka_unit_test_teardown(test_rewind_after_send_offsets_error, fk_teardown),
        cmocka_unit_test_teardown(test_rewind_after_produce_error, fk_teardown),
        cmocka_unit_test_teardown(test_rewind_after_begin_error, fk_teardown),
        cmocka_unit_test_teardown(test_new_producer_after_fatal_error, fk_teardown),
        cmocka_unit_test_teardown(test_fenced_ends_the_loop, fk_teardown),
        cmocka_unit_test_teardown(test_staged_records_bounded_behind_commit, fk_teardown),
        cmocka_unit_test_teardown(test_rewind_after_commit_in_flight_fails, fk_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
