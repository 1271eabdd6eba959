/*
 * test_core_dberr.c - the database error's record and classes (db_err.c), without a database: an
 * answer with SQLSTATE 25006 (the server is read-only: a standby) marks the session to be left at
 * the next ll_db_ensure (docs/design.md §3, the database errors), and the classes the loop's
 * decision table reads (retryable, busy, input) keep their SQLSTATEs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../common/src/core/db_int.h"

static void test_read_only_answer_marks_the_session(void **state)
{
    (void)state;
    ll_db db;
    memset(&db, 0, sizeof db);
    ll_db_set_err(&db, "40001", "", "could not serialize access");
    assert_false(db.read_only);
    ll_db_set_err(&db, "25006", "", "cannot execute INSERT in a read-only transaction");
    assert_true(db.read_only);
    assert_string_equal(db.err.sqlstate, "25006");
    assert_true(ll_db_err_is_unavailable(&db)); /* as if down: the batch is undone, not held */
    assert_false(ll_db_err_is_input(&db));
    /* a later error does not clear it: only a new connection does (ll_db_ensure) */
    ll_db_set_err(&db, "57014", "", "canceling statement due to statement timeout");
    assert_true(db.read_only);
}

static void test_classes(void **state)
{
    (void)state;
    ll_db db;
    memset(&db, 0, sizeof db);
    ll_db_set_err(&db, "40P01", "", "deadlock detected");
    assert_true(ll_db_err_is_retryable(&db));
    assert_false(ll_db_err_is_busy(&db));
    ll_db_set_err(&db, "55P03", "", "lock not available");
    assert_true(ll_db_err_is_busy(&db));
    assert_false(ll_db_err_is_retryable(&db));
    ll_db_set_err(&db, "23505", "uq", "duplicate key value");
    assert_true(ll_db_err_is_input(&db));
    assert_string_equal(db.err.constraint, "uq");
    ll_db_set_err(&db, "22P02", "", "invalid input syntax\n");
    assert_true(ll_db_err_is_input(&db));
    assert_string_equal(db.err.message, "invalid input syntax"); /* the trailing newline dropped */
    assert_false(db.read_only);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_read_only_answer_marks_the_session),
        cmocka_unit_test(test_classes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
