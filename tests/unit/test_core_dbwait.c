/*
 * test_core_dbwait.c - the pure parts of the bounded database wait (db_wait.c): which
 * db.response_timeout is accepted next to db.statement_timeout, and the poll() slice left before
 * a deadline.
 */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ll/db.h"

static void response_timeout_must_exceed_statement_timeout(void **state)
{
    (void)state;
    assert_int_equal(ll_db_response_timeout_check(5000, 15000), 0);
    assert_int_equal(ll_db_response_timeout_check(0, 15000), 0); /* no statement timeout */
    assert_int_equal(ll_db_response_timeout_check(5000, 5000), -1);
    assert_int_equal(ll_db_response_timeout_check(5000, 4999), -1);
    assert_int_equal(ll_db_response_timeout_check(5000, 0), -1); /* unbounded is refused */
    assert_int_equal(ll_db_response_timeout_check(0, 0), -1);
}

static void slice_is_time_left_or_none(void **state)
{
    (void)state;
    assert_int_equal(ll_db_wait_slice_ms(1000, 0), -1); /* no deadline */
    assert_int_equal(ll_db_wait_slice_ms(1000, 1500), 500);
    assert_int_equal(ll_db_wait_slice_ms(1500, 1500), 0);
    assert_int_equal(ll_db_wait_slice_ms(2000, 1500), 0);
    assert_int_equal(ll_db_wait_slice_ms(1, (int64_t)INT_MAX + 100), INT_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(response_timeout_must_exceed_statement_timeout),
        cmocka_unit_test(slice_is_time_left_or_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
