/* test_rules_partition_start.c - the status a manifest's partition starts in (docs/contract.md §3.2,
 * §5.2 step 6): an empty partition is SUCCESS at once, any other PENDING. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

static void test_initial_status(void **state)
{
    (void)state;
    assert_int_equal(ll_partition_initial_status(0), LL_PART_SUCCESS);
    const int64_t rows[] = {1, 2, 15000, INT64_MAX};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        assert_int_equal(ll_partition_initial_status(rows[i]), LL_PART_PENDING);
    /* the names the registrar passes to SQL */
    assert_string_equal(ll_part_status_name(ll_partition_initial_status(0)), "SUCCESS");
    assert_string_equal(ll_part_status_name(ll_partition_initial_status(7)), "PENDING");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_initial_status),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
