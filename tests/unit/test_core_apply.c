/* test_core_apply.c - a helper's database result as the entry point's apply decision (issue 12 §1). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/apply.h"

static void test_every_result(void **state)
{
    (void)state;
    assert_int_equal(ll_apply_of_db(LL_DB_OK), LL_APPLY_COMMIT);
    assert_int_equal(ll_apply_of_db(LL_DB_ROLLBACK), LL_APPLY_ROLLBACK);
    assert_int_equal(ll_apply_of_db(LL_DB_ERROR), LL_APPLY_DB);
    assert_int_equal(ll_apply_of_db(LL_DB_UNAVAILABLE), LL_APPLY_DB);
    /* a value outside the enum is a failed statement, never a commit */
    assert_int_equal(ll_apply_of_db((ll_db_rc)7), LL_APPLY_DB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_result),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
