/* test_rules_paths.c - run path, stage table, ".." segments, chunk path check (§5.1, §5.4 check 4). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ll/rules.h"

#define RUN_ID    "3F2504E0-4F89-41D3-9A0C-0305E82C3301"
#define RUN_ID_LC "3f2504e0-4f89-41d3-9a0c-0305e82c3301"
#define RUN_PATH  "/data/raw/ORA_JOB/run_id=" RUN_ID_LC

static void test_dotdot_segments(void **state)
{
    (void)state;
    assert_true(ll_path_has_dotdot(".."));
    assert_true(ll_path_has_dotdot("/.."));
    assert_true(ll_path_has_dotdot("../a"));
    assert_true(ll_path_has_dotdot("/a/.."));
    assert_true(ll_path_has_dotdot("/a/../b"));
    assert_true(ll_path_has_dotdot("/a/b/../"));
    assert_true(ll_path_has_dotdot("a//..//b"));
    assert_false(ll_path_has_dotdot("/a/.../b"));
    assert_false(ll_path_has_dotdot("/a/..b"));
    assert_false(ll_path_has_dotdot("/a/b.."));
    assert_false(ll_path_has_dotdot("/a/./b"));
    assert_false(ll_path_has_dotdot("/a/b"));
    assert_false(ll_path_has_dotdot("."));
    assert_false(ll_path_has_dotdot("/"));
    assert_false(ll_path_has_dotdot(""));
    assert_false(ll_path_has_dotdot(NULL));
}

static void test_hdfs_run_path(void **state)
{
    (void)state;
    char out[256];
    assert_int_equal(ll_hdfs_run_path("/data/raw", "ORA_JOB", RUN_ID, out, sizeof out), 0);
    assert_string_equal(out, RUN_PATH);
    assert_int_equal(ll_hdfs_run_path("/data/raw///", "ORA_JOB", RUN_ID_LC, out, sizeof out), 0);
    assert_string_equal(out, RUN_PATH);
    assert_int_equal(ll_hdfs_run_path("/", "J", RUN_ID, out, sizeof out), 0);
    assert_string_equal(out, "/J/run_id=" RUN_ID_LC);
    assert_int_equal(ll_hdfs_run_path("///", "J", RUN_ID, out, sizeof out), 0);
    assert_string_equal(out, "/J/run_id=" RUN_ID_LC);
}

static void test_hdfs_run_path_limits(void **state)
{
    (void)state;
    char out[sizeof RUN_PATH];
    assert_int_equal(ll_hdfs_run_path("/data/raw/", "ORA_JOB", RUN_ID, out, sizeof out), 0);
    assert_string_equal(out, RUN_PATH); /* exact fit */
    assert_int_equal(ll_hdfs_run_path("/data/raw", "ORA_JOB", RUN_ID, out, sizeof out - 1), -1);
    assert_int_equal(ll_hdfs_run_path("/data/raw", "ORA_JOB", "not-a-uuid", out, sizeof out), -1);
    assert_int_equal(ll_hdfs_run_path(NULL, "J", RUN_ID, out, sizeof out), -1);
    assert_int_equal(ll_hdfs_run_path("/d", NULL, RUN_ID, out, sizeof out), -1);
    assert_int_equal(ll_hdfs_run_path("/d", "J", NULL, out, sizeof out), -1);
    assert_int_equal(ll_hdfs_run_path("/d", "J", RUN_ID, NULL, 0), -1);
}

static void test_stage_table(void **state)
{
    (void)state;
    char out[128];
    assert_int_equal(ll_stage_table("STG_Insp_", RUN_ID, out, sizeof out), 0);
    assert_string_equal(out, "stg_insp_3f2504e04f8941d39a0c0305e82c3301");
    assert_int_equal(ll_stage_table("", RUN_ID_LC, out, sizeof out), 0);
    assert_string_equal(out, "3f2504e04f8941d39a0c0305e82c3301");

    char fit[4 + 32 + 1];
    assert_int_equal(ll_stage_table("ABC_", RUN_ID, fit, sizeof fit), 0);
    assert_string_equal(fit, "abc_3f2504e04f8941d39a0c0305e82c3301");
    assert_int_equal(ll_stage_table("ABC_", RUN_ID, fit, sizeof fit - 1), -1);
    assert_int_equal(ll_stage_table("ABC_", RUN_ID, fit, 0), -1);
    assert_int_equal(ll_stage_table("ABC_", "3f2504e0", out, sizeof out), -1);
    assert_int_equal(ll_stage_table(NULL, RUN_ID, out, sizeof out), -1);
    assert_int_equal(ll_stage_table("a", NULL, out, sizeof out), -1);
}

static void test_chunk_path_inside_run(void **state)
{
    (void)state;
    assert_true(ll_chunk_path_inside_run(RUN_PATH, RUN_PATH "/part-0.parquet"));
    assert_true(ll_chunk_path_inside_run(RUN_PATH, RUN_PATH "/p=0001/sub/part-0.parquet"));
    assert_true(ll_chunk_path_inside_run(RUN_PATH, RUN_PATH "/"));    /* as the reference */
    assert_true(ll_chunk_path_inside_run(RUN_PATH, RUN_PATH "/..a")); /* not a ".." segment */
    assert_true(ll_chunk_path_inside_run(RUN_PATH, RUN_PATH "/.../x"));
    assert_false(ll_chunk_path_inside_run(RUN_PATH, RUN_PATH));                    /* the directory itself */
    assert_false(ll_chunk_path_inside_run(RUN_PATH, RUN_PATH "x/part-0.parquet")); /* sibling */
    assert_false(ll_chunk_path_inside_run(RUN_PATH, RUN_PATH "/../other/part-0.parquet"));
    assert_false(ll_chunk_path_inside_run(RUN_PATH, RUN_PATH "/a/../../x"));
    assert_false(ll_chunk_path_inside_run(RUN_PATH, RUN_PATH "/.."));
    assert_false(ll_chunk_path_inside_run(RUN_PATH, "/data/raw/other/part-0.parquet"));
    assert_false(ll_chunk_path_inside_run(RUN_PATH, "/DATA/raw/ORA_JOB/run_id=" RUN_ID_LC "/p"));
    assert_false(ll_chunk_path_inside_run("/r/run_id=x", "/r/run_id=X/p")); /* byte comparison */
    assert_false(ll_chunk_path_inside_run(NULL, RUN_PATH "/part-0.parquet"));
    assert_false(ll_chunk_path_inside_run(RUN_PATH, NULL));
    assert_false(ll_chunk_path_inside_run(RUN_PATH, ""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dotdot_segments),       cmocka_unit_test(test_hdfs_run_path),
        cmocka_unit_test(test_hdfs_run_path_limits),  cmocka_unit_test(test_stage_table),
        cmocka_unit_test(test_chunk_path_inside_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
