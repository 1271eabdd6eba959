/*
 * test_core_pooler.c - the db.pooler setting (ll/db.h): its values, and the decision whether a
 * connection goes through a transaction pooler (the cancel key's process id against the server's
 * pg_backend_pid()), without a database.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ll/db.h"

static void test_parse_values(void **state)
{
    (void)state;
    ll_db_pooler p = LL_DB_POOLER_NONE;
    assert_int_equal(ll_db_pooler_parse("auto", &p), 0);
    assert_int_equal(p, LL_DB_POOLER_AUTO);
    assert_int_equal(ll_db_pooler_parse("none", &p), 0);
    assert_int_equal(p, LL_DB_POOLER_NONE);
    assert_int_equal(ll_db_pooler_parse("transaction", &p), 0);
    assert_int_equal(p, LL_DB_POOLER_TRANSACTION);
}

static void test_parse_refuses_other_words(void **state)
{
    (void)state;
    ll_db_pooler p = LL_DB_POOLER_NONE;
    assert_int_equal(ll_db_pooler_parse("session", &p), -1);
    assert_int_equal(ll_db_pooler_parse("Transaction", &p), -1);
    assert_int_equal(ll_db_pooler_parse("", &p), -1);
    assert_int_equal(ll_db_pooler_parse(NULL, &p), -1);
    assert_int_equal(p, LL_DB_POOLER_NONE); /* untouched on error */
}

static void test_auto_compares_process_ids(void **state)
{
    (void)state;
    /* PostgreSQL itself: the cancel key carries the backend's pid */
    assert_false(ll_db_pooler_decide(LL_DB_POOLER_AUTO, 4242, 4242));
    /* PgBouncer: a random key of its own, often negative as an int */
    assert_true(ll_db_pooler_decide(LL_DB_POOLER_AUTO, -236846344, 12284));
    assert_true(ll_db_pooler_decide(LL_DB_POOLER_AUTO, 12285, 12284));
}

static void test_fixed_modes_ignore_the_ids(void **state)
{
    (void)state;
    assert_false(ll_db_pooler_decide(LL_DB_POOLER_NONE, 1, 2));
    assert_true(ll_db_pooler_decide(LL_DB_POOLER_TRANSACTION, 7, 7));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_values),
        cmocka_unit_test(test_parse_refuses_other_words),
        cmocka_unit_test(test_auto_compares_process_ids),
        cmocka_unit_test(test_fixed_modes_ignore_the_ids),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
