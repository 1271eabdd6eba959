/* test_core_obs_runs.c - the pure parts of the runs-ended and group-lag metrics (obs.h, issue 41
 * item 5): the load_job label's bound, the status label, the sweeper's watermark of the runs
 * ended, the lag of a group's committed offset. What a scrape shows: tests/integration/test_group_lag.py. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ll/obs.h"

#define UUID_MAX "ffffffff-ffff-ffff-ffff-ffffffffffff"

/* The first LL_OBS_MAX_JOBS distinct job keys keep their name, whatever comes after; a later one,
 * an empty one and one too long for the table are "_other"; a job seen again is not a new one. */
static void test_job_label_bound(void **state)
{
    (void)state;
    ll_obs_jobs *t = calloc(1, sizeof *t);
    assert_non_null(t);
    char name[32];
    for (int i = 0; i < LL_OBS_MAX_JOBS; i++) {
        snprintf(name, sizeof name, "job_%02d", i);
        assert_string_equal(ll_obs_job_label(t, name), name);
        assert_string_equal(ll_obs_job_label(t, name), name); /* again: no second slot */
    }
    assert_int_equal(t->n, LL_OBS_MAX_JOBS);
    assert_string_equal(ll_obs_job_label(t, "job_late"), "_other");
    assert_string_equal(ll_obs_job_label(t, "job_00"), "job_00");
    assert_string_equal(ll_obs_job_label(t, "job_31"), "job_31");
    assert_int_equal(t->n, LL_OBS_MAX_JOBS);
    ll_obs_jobs *u = calloc(1, sizeof *u);
    assert_non_null(u);
    char longname[100];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_string_equal(ll_obs_job_label(u, longname), "_other");
    assert_string_equal(ll_obs_job_label(u, ""), "_other");
    assert_string_equal(ll_obs_job_label(u, NULL), "_other");
    assert_int_equal(u->n, 0);
    free(t);
    free(u);
}

/* The eight terminal statuses are their own label; anything else is OTHER. */
static void test_end_status(void **state)
{
    (void)state;
    const char *terminal[] = {
        "SUCCESS",        "FAILED_MANIFEST",          "FAILED_EXTRACT",          "FAILED_STAGE_VALIDATION",
        "FAILED_PUBLISH", "FAILED_TARGET_VALIDATION", "FAILED_SNAPSHOT_EXPIRED", "TIMED_OUT"};
    for (size_t i = 0; i < sizeof terminal / sizeof terminal[0]; i++)
        assert_string_equal(ll_obs_end_status(terminal[i]), terminal[i]);
    assert_string_equal(ll_obs_end_status("PUBLISHING"), "OTHER");
    assert_string_equal(ll_obs_end_status("success"), "OTHER");
    assert_string_equal(ll_obs_end_status(""), "OTHER");
    assert_string_equal(ll_obs_end_status(NULL), "OTHER");
}

/* A full page moves the watermark to its last row (the next page reads on from it, the rows of
 * the same completed_at after it included); a page not full moves it to everything up to hi. */
static void test_ended_watermark(void **state)
{
    (void)state;
    char at[64], id[40];
    ll_obs_ended_next(500, 500, "2026-12-06 10:00:00.123456+00", "0000aaaa-0000-0000-0000-000000000001",
                      "2026-12-06 10:05:00+00", at, sizeof at, id, sizeof id);
    assert_string_equal(at, "2026-12-06 10:00:00.123456+00");
    assert_string_equal(id, "0000aaaa-0000-0000-0000-000000000001");
    ll_obs_ended_next(3, 500, "2026-12-06 10:00:00.123456+00", "0000aaaa-0000-0000-0000-000000000001",
                      "2026-12-06 10:05:00+00", at, sizeof at, id, sizeof id);
    assert_string_equal(at, "2026-12-06 10:05:00+00");
    assert_string_equal(id, UUID_MAX);
    ll_obs_ended_next(0, 500, NULL, NULL, "2026-12-06 10:06:00+00", at, sizeof at, id, sizeof id);
    assert_string_equal(at, "2026-12-06 10:06:00+00");
    assert_string_equal(id, UUID_MAX);
}

/* The broker's lag of a group: the end minus the committed offset, the log start when the commit
 * lies below it (deleted inputs are not lag), never negative. */
static void test_group_lag(void **state)
{
    (void)state;
    assert_int_equal(ll_obs_lag(120, 100, 0), 20);
    assert_int_equal(ll_obs_lag(120, 120, 0), 0);
    assert_int_equal(ll_obs_lag(120, 10, 50), 70);
    assert_int_equal(ll_obs_lag(120, 130, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_label_bound),
        cmocka_unit_test(test_end_status),
        cmocka_unit_test(test_ended_watermark),
        cmocka_unit_test(test_group_lag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
