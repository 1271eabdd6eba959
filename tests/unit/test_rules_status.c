/* test_rules_status.c - run and partition state names and classes (docs/contract.md §3.1, §3.2). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "ll/status.h"
#include "ll/status_sql.h"

static const char *const run_names[] = {
    "CREATED",
    "EXTRACTING",
    "EXTRACTED_VALIDATED",
    "STAGE_VALIDATING",
    "STAGING_VALIDATED",
    "PUBLISHING",
    "PUBLISHED",
    "SUCCESS",
    "FAILED_MANIFEST",
    "FAILED_EXTRACT",
    "FAILED_STAGE_VALIDATION",
    "FAILED_PUBLISH",
    "PUBLISH_UNKNOWN",
    "FAILED_TARGET_VALIDATION",
    "FAILED_SNAPSHOT_EXPIRED",
    "TIMED_OUT",
};
static const char *const part_names[] = {"PENDING", "RUNNING", "RETRY", "SUCCESS", "FAILED", "TIMED_OUT"};

static void test_run_names_round_trip(void **state)
{
    (void)state;
    assert_int_equal(sizeof run_names / sizeof *run_names, LL_RUN_STATUS_COUNT);
    for (int i = 0; i < LL_RUN_STATUS_COUNT; i++) {
        ll_run_status parsed = LL_RUN_STATUS_COUNT;
        assert_string_equal(ll_run_status_name((ll_run_status)i), run_names[i]);
        assert_int_equal(ll_run_status_parse(run_names[i], &parsed), 0);
        assert_int_equal(parsed, i);
    }
}

static void test_part_names_round_trip(void **state)
{
    (void)state;
    assert_int_equal(sizeof part_names / sizeof *part_names, LL_PART_STATUS_COUNT);
    for (int i = 0; i < LL_PART_STATUS_COUNT; i++) {
        ll_part_status parsed = LL_PART_STATUS_COUNT;
        assert_string_equal(ll_part_status_name((ll_part_status)i), part_names[i]);
        assert_int_equal(ll_part_status_parse(part_names[i], &parsed), 0);
        assert_int_equal(parsed, i);
    }
}

static void test_unknown_names_rejected(void **state)
{
    (void)state;
    ll_run_status r = LL_RUN_SUCCESS;
    ll_part_status p = LL_PART_SUCCESS;
    const char *bad[] = {"created", "", "CREATED ", " CREATED", "CREATE", "UNKNOWN"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(ll_run_status_parse(bad[i], &r), -1);
        assert_int_equal(ll_part_status_parse(bad[i], &p), -1);
    }
    assert_int_equal(ll_run_status_parse(NULL, &r), -1);
    assert_int_equal(ll_part_status_parse(NULL, &p), -1);
    assert_int_equal(ll_run_status_parse("CREATED", NULL), -1);
    assert_int_equal(ll_part_status_parse("RETRY", NULL), -1);
    assert_int_equal(ll_part_status_parse("EXTRACTING", &p), -1); /* a run name */
    assert_int_equal(r, LL_RUN_SUCCESS);                          /* untouched */
    assert_int_equal(p, LL_PART_SUCCESS);
}

static void test_out_of_range_name_is_null(void **state)
{
    (void)state;
    assert_null(ll_run_status_name(LL_RUN_STATUS_COUNT));
    assert_null(ll_run_status_name((ll_run_status)-1));
    assert_null(ll_part_status_name(LL_PART_STATUS_COUNT));
    assert_null(ll_part_status_name((ll_part_status)-1));
}

static void test_active_and_terminal_classes(void **state)
{
    (void)state;
    const bool active[LL_RUN_STATUS_COUNT] = {
        [LL_RUN_CREATED] = true,
        [LL_RUN_EXTRACTING] = true,
        [LL_RUN_EXTRACTED_VALIDATED] = true,
        [LL_RUN_STAGE_VALIDATING] = true,
        [LL_RUN_STAGING_VALIDATED] = true,
        [LL_RUN_PUBLISHING] = true,
        [LL_RUN_PUBLISHED] = true,
        [LL_RUN_PUBLISH_UNKNOWN] = true,
    };
    const bool terminal[LL_RUN_STATUS_COUNT] = {
        [LL_RUN_SUCCESS] = true,
        [LL_RUN_FAILED_MANIFEST] = true,
        [LL_RUN_FAILED_EXTRACT] = true,
        [LL_RUN_FAILED_STAGE_VALIDATION] = true,
        [LL_RUN_FAILED_PUBLISH] = true,
        [LL_RUN_FAILED_TARGET_VALIDATION] = true,
        [LL_RUN_FAILED_SNAPSHOT_EXPIRED] = true,
        [LL_RUN_TIMED_OUT] = true,
    };
    for (int i = 0; i < LL_RUN_STATUS_COUNT; i++) {
        assert_int_equal(ll_run_status_is_active((ll_run_status)i), active[i]);
        assert_int_equal(ll_run_status_is_terminal((ll_run_status)i), terminal[i]);
        /* every status is exactly one of active / terminal */
        assert_true(active[i] != terminal[i]);
    }
    /* PUBLISH_UNKNOWN blocks a new run but is not finished */
    assert_true(ll_run_status_is_active(LL_RUN_PUBLISH_UNKNOWN));
    assert_false(ll_run_status_is_terminal(LL_RUN_PUBLISH_UNKNOWN));
    assert_false(ll_run_status_is_active(LL_RUN_STATUS_COUNT));
    assert_false(ll_run_status_is_terminal(LL_RUN_STATUS_COUNT));
}

/* The forward path of docs/contract.md §3.1 (ll_run_status_rank, from LL_RUN_STATUSES): 0-6 in pipeline
 * order, -1 for everything off it and outside the enum. */
static void test_forward_rank(void **state)
{
    (void)state;
    const ll_run_status path[] = {
        LL_RUN_CREATED,          LL_RUN_EXTRACTING,        LL_RUN_EXTRACTED_VALIDATED,
        LL_RUN_STAGE_VALIDATING, LL_RUN_STAGING_VALIDATED, LL_RUN_PUBLISHING,
        LL_RUN_PUBLISHED};
    int on_path = 0;
    for (int i = 0; i < LL_RUN_STATUS_COUNT; i++) {
        int want = -1;
        for (int k = 0; k < 7; k++)
            if (path[k] == (ll_run_status)i)
                want = k;
        assert_int_equal(ll_run_status_rank((ll_run_status)i), want);
        on_path += want >= 0;
    }
    assert_int_equal(on_path, 7);
    assert_int_equal(ll_run_status_rank(LL_RUN_STATUS_COUNT), -1);
    assert_int_equal(ll_run_status_rank((ll_run_status)-1), -1);
}

/* The alert-only class (ALERT of LL_RUN_STATUSES; docs/contract.md §3.1 "never time out
 * automatically (only alerts)", §7.4, §13) is exactly EXTRACTED_VALIDATED, STAGE_VALIDATING,
 * STAGING_VALIDATED and PUBLISHED, and LL_SQL_RUN_ALERT_ONLY, the list the sweeper's RUN_STALE_ALERT
 * (rule_alerts.c) and loadctl monitor's RUN_STALE (monitor_data.c) both take (style.status checks
 * they do), is its rendering: the two cannot disagree on a status again (the monitor lacked
 * STAGING_VALIDATED). No alert-only status times out, is terminal, or is PUBLISHING. */
static void test_alert_only_class_is_the_sql_list(void **state)
{
    (void)state;
    const ll_run_status want[] = {LL_RUN_EXTRACTED_VALIDATED, LL_RUN_STAGE_VALIDATING,
                                  LL_RUN_STAGING_VALIDATED, LL_RUN_PUBLISHED};
    char sql[512] = "";
    size_t used = 0;
    int n = 0;
    for (int i = 0; i < LL_RUN_STATUS_COUNT; i++) {
        bool alert = ll_run_status_is_alert_only((ll_run_status)i);
        bool listed = false;
        for (size_t k = 0; k < sizeof want / sizeof want[0]; k++)
            listed |= want[k] == (ll_run_status)i;
        assert_int_equal(alert, listed);
        if (!alert)
            continue;
        assert_true(ll_run_status_is_active((ll_run_status)i));
        assert_false(ll_run_status_is_terminal((ll_run_status)i));
        used += (size_t)snprintf(sql + used, sizeof sql - used, "%s'%s'", n++ ? ", " : "",
                                 ll_run_status_name((ll_run_status)i));
    }
    assert_int_equal(n, 4);
    assert_string_equal(sql, LL_SQL_RUN_ALERT_ONLY);
    assert_false(ll_run_status_is_alert_only(LL_RUN_PUBLISHING));
    assert_false(ll_run_status_is_alert_only(LL_RUN_PUBLISH_UNKNOWN));
    assert_false(ll_run_status_is_alert_only(LL_RUN_STATUS_COUNT));
    assert_false(ll_run_status_is_alert_only((ll_run_status)-1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_names_round_trip),
        cmocka_unit_test(test_part_names_round_trip),
        cmocka_unit_test(test_unknown_names_rejected),
        cmocka_unit_test(test_out_of_range_name_is_null),
        cmocka_unit_test(test_active_and_terminal_classes),
        cmocka_unit_test(test_forward_rank),
        cmocka_unit_test(test_alert_only_class_is_the_sql_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
