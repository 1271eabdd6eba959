/* test_rules_extract_fail.c - when a failed partition fails its run, and with what, over every run
 * status (docs/contract.md §5.4 step 10, §5.5 step 5). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

/* The gate's mismatch fails an EXTRACTING run, and no other; a kept run's *out is untouched. */
static void test_gate_matrix(void **state)
{
    (void)state;
    for (int r = 0; r < LL_RUN_STATUS_COUNT; r++) {
        ll_run_fail f = {.status = LL_RUN_SUCCESS, .stage = "untouched", .code = "untouched"};
        bool fails = ll_gate_run_failure((ll_run_status)r, &f);
        if (r == LL_RUN_EXTRACTING) {
            assert_true(fails);
            assert_int_equal(f.status, LL_RUN_FAILED_EXTRACT);
            assert_string_equal(f.stage, "PARTITION_GATE");
            assert_string_equal(f.code, "ROW_COUNT_MISMATCH");
        } else {
            assert_false(fails);
            assert_int_equal(f.status, LL_RUN_SUCCESS);
            assert_string_equal(f.stage, "untouched");
        }
    }
}

/* One worker report: its code and class, and the failure status an EXTRACTING run gets. */
typedef struct report {
    const char *code, *error_class;
    ll_run_status want;
} report;

static const report reports[] = {
    {"ORA-01555", "JDBC", LL_RUN_FAILED_SNAPSHOT_EXPIRED},
    {"ora-08180", "JDBC", LL_RUN_FAILED_SNAPSHOT_EXPIRED},
    {"ORA-00942", "snapshot", LL_RUN_FAILED_SNAPSHOT_EXPIRED},
    {"ORA-00942", "JDBC", LL_RUN_FAILED_EXTRACT},
    {"HDFS_WRITE", "IO", LL_RUN_FAILED_EXTRACT},
};

static void test_pfail_matrix(void **state)
{
    (void)state;
    for (int r = 0; r < LL_RUN_STATUS_COUNT; r++) {
        for (size_t i = 0; i < sizeof reports / sizeof *reports; i++) {
            const report *rp = &reports[i];
            ll_run_fail f = {.status = LL_RUN_SUCCESS, .stage = NULL, .code = NULL};
            bool fails =
                ll_pfail_run_failure((ll_run_status)r, "EXTRACT_QUERY", rp->code, rp->error_class, &f);
            if (r == LL_RUN_EXTRACTING) {
                assert_true(fails);
                assert_int_equal(f.status, rp->want);
                /* the report's stage and code, borrowed */
                assert_string_equal(f.stage, "EXTRACT_QUERY");
                assert_ptr_equal(f.code, rp->code);
            } else {
                assert_false(fails);
                assert_int_equal(f.status, LL_RUN_SUCCESS);
                assert_null(f.code);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gate_matrix),
        cmocka_unit_test(test_pfail_matrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
