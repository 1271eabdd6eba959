/* test_rules_verify.c - the decisions of `loadctl verify`: event → run status (docs/contract.md §3.1,
 * §8), the status a run's events imply, and the accounting of input offsets and chunks. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "ll/verify.h"

static ll_run_status target(const ll_status_event *e)
{
    ll_run_status s = LL_RUN_STATUS_COUNT;
    assert_int_equal(ll_event_run_status(e, &s), LL_EV_SETS);
    return s;
}

static void test_fixed_events(void **state)
{
    (void)state;
    const struct {
        const char *name;
        ll_run_status to;
    } cases[] = {
        {"RUN_STARTED", LL_RUN_CREATED},
        {"MANIFEST_CREATED", LL_RUN_EXTRACTING},
        {"MANIFEST_INVALID", LL_RUN_FAILED_MANIFEST},
        {"EXTRACT_VALIDATED", LL_RUN_EXTRACTED_VALIDATED},
        {"STAGE_VALIDATION_STARTED", LL_RUN_STAGE_VALIDATING},
        {"STAGE_VALIDATED", LL_RUN_STAGING_VALIDATED},
        {"PUBLISH_STARTED", LL_RUN_PUBLISHING},
        {"PUBLISH_FINISHED", LL_RUN_PUBLISHED},
        {"PUBLISH_UNKNOWN", LL_RUN_PUBLISH_UNKNOWN},
        {"RUN_SUCCESS", LL_RUN_SUCCESS},
        {"RUN_TIMED_OUT", LL_RUN_TIMED_OUT},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ll_status_event e = {.name = cases[i].name};
        assert_int_equal(target(&e), cases[i].to);
    }
    /* every name in the table is a status event, and the table lists each once */
    size_t n = 0;
    for (; LL_STATUS_EVENT_NAMES[n]; n++) {
        ll_status_event e = {
            .name = LL_STATUS_EVENT_NAMES[n], .to = "FAILED_EXTRACT", .resolution = "PUBLISHED"};
        ll_run_status s;
        assert_int_equal(ll_event_run_status(&e, &s), LL_EV_SETS);
    }
    assert_int_equal(n, 13);
    /* the SQL list (the partial index's predicate, 0019) names the same events in the same order */
    char list[1024] = "";
    for (size_t i = 0; LL_STATUS_EVENT_NAMES[i]; i++) {
        size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s'%s'", i ? ", " : "", LL_STATUS_EVENT_NAMES[i]);
    }
    assert_string_equal(list, LL_STATUS_EVENT_NAMES_SQL);
}

static void test_events_without_status(void **state)
{
    (void)state;
    const char *names[] = {"PARTITION_STARTED", "PARTITION_SUCCESS",     "PARTITION_FAILED",
                           "DEAD_LETTER",       "DISPATCH_DEAD",         "DISPATCH_REQUEUED",
                           "DISPATCH_RESENT",   "RUN_STALE_ALERT",       "RECOVERY_REISSUED",
                           "RUN_CLEANED",       "STAGING_METRIC_FAILED", "RUN_REJECTED"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        ll_status_event e = {.name = names[i]};
        ll_run_status s;
        assert_int_equal(ll_event_run_status(&e, &s), LL_EV_NONE);
    }
    ll_run_status s;
    assert_int_equal(ll_event_run_status(NULL, &s), LL_EV_NONE);
    ll_status_event noname = {0};
    assert_int_equal(ll_event_run_status(&noname, &s), LL_EV_NONE);
}

static void test_run_failed(void **state)
{
    (void)state;
    /* §5.6: the run failure report names its target */
    ll_status_event rf = {.name = "RUN_FAILED", .to = "FAILED_STAGE_VALIDATION"};
    assert_int_equal(target(&rf), LL_RUN_FAILED_STAGE_VALIDATION);
    /* §5.14: a publish result FAILED_PUBLISH carries the publish token */
    ll_status_event pub = {.name = "RUN_FAILED", .has_publish_token = true, .error_code = "HIVE_ERROR"};
    assert_int_equal(target(&pub), LL_RUN_FAILED_PUBLISH);
    /* §5.4 gate mismatch and §5.5 partition failure name their partition */
    ll_status_event gate = {.name = "RUN_FAILED", .partition_id = "0001", .error_code = "ROW_COUNT_MISMATCH"};
    assert_int_equal(target(&gate), LL_RUN_FAILED_EXTRACT);
    ll_status_event snap = {.name = "RUN_FAILED", .partition_id = "0002", .error_code = "ora-01555"};
    assert_int_equal(target(&snap), LL_RUN_FAILED_SNAPSHOT_EXPIRED);
    ll_status_event cls = {.name = "RUN_FAILED", .partition_id = "0002", .error_class = "Snapshot"};
    assert_int_equal(target(&cls), LL_RUN_FAILED_SNAPSHOT_EXPIRED);
    /* without any of these facts, or with a target that is no status, it cannot be told */
    ll_run_status s;
    ll_status_event bare = {.name = "RUN_FAILED"};
    assert_int_equal(ll_event_run_status(&bare, &s), LL_EV_UNKNOWN);
    ll_status_event bad = {.name = "RUN_FAILED", .to = "BROKEN"};
    assert_int_equal(ll_event_run_status(&bad, &s), LL_EV_UNKNOWN);
}

static void test_resolution(void **state)
{
    (void)state;
    ll_status_event a = {.name = "PUBLISH_UNKNOWN_RESOLVED", .resolution = "PUBLISHED"};
    assert_int_equal(target(&a), LL_RUN_PUBLISHED);
    ll_status_event b = {.name = "PUBLISH_UNKNOWN_RESOLVED", .resolution = "FAILED_PUBLISH"};
    assert_int_equal(target(&b), LL_RUN_FAILED_PUBLISH);
    ll_run_status s;
    ll_status_event c = {.name = "PUBLISH_UNKNOWN_RESOLVED", .resolution = "SUCCESS"};
    assert_int_equal(ll_event_run_status(&c, &s), LL_EV_UNKNOWN);
    ll_status_event d = {.name = "PUBLISH_UNKNOWN_RESOLVED"};
    assert_int_equal(ll_event_run_status(&d, &s), LL_EV_UNKNOWN);
}

static void test_implied(void **state)
{
    (void)state;
    /* the reference journey (docs/contract.md §8 "typical event order") ends in SUCCESS */
    const ll_status_event ok[] = {
        {.name = "RUN_STARTED"},       {.name = "MANIFEST_CREATED"},  {.name = "PARTITION_STARTED"},
        {.name = "PARTITION_SUCCESS"}, {.name = "EXTRACT_VALIDATED"}, {.name = "STAGE_VALIDATION_STARTED"},
        {.name = "STAGE_VALIDATED"},   {.name = "PUBLISH_STARTED"},   {.name = "PUBLISH_FINISHED"},
        {.name = "RUN_SUCCESS"},       {.name = "DISPATCH_REQUEUED"},
    };
    ll_run_status s = LL_RUN_STATUS_COUNT;
    assert_int_equal(ll_run_status_implied(ok, sizeof ok / sizeof ok[0], &s), 0);
    assert_int_equal(s, LL_RUN_SUCCESS);
    /* a stuck publish resolved by the operator */
    const ll_status_event pu[] = {{.name = "PUBLISH_STARTED"},
                                  {.name = "PUBLISH_UNKNOWN"},
                                  {.name = "PUBLISH_UNKNOWN_RESOLVED", .resolution = "FAILED_PUBLISH"}};
    assert_int_equal(ll_run_status_implied(pu, 3, &s), 0);
    assert_int_equal(s, LL_RUN_FAILED_PUBLISH);
    /* the run's last status event decides, later non-status events do not */
    const ll_status_event two[] = {{.name = "RUN_STARTED"}, {.name = "DEAD_LETTER"}};
    assert_int_equal(ll_run_status_implied(two, 2, &s), 0);
    assert_int_equal(s, LL_RUN_CREATED);
    /* no status event at all, and an undecidable last one */
    const ll_status_event none[] = {{.name = "PARTITION_STARTED"}};
    assert_int_equal(ll_run_status_implied(none, 1, &s), 1);
    assert_int_equal(ll_run_status_implied(NULL, 0, &s), 1);
    const ll_status_event unknown[] = {{.name = "RUN_STARTED"}, {.name = "RUN_FAILED"}};
    assert_int_equal(ll_run_status_implied(unknown, 2, &s), -1);
}

static void test_input_judge(void **state)
{
    (void)state;
    assert_int_equal(ll_input_judge(1, 0), LL_INPUT_OK);
    assert_int_equal(ll_input_judge(0, 1), LL_INPUT_OK);
    assert_int_equal(ll_input_judge(0, 0), LL_INPUT_MISSING);
    assert_int_equal(ll_input_judge(-3, 0), LL_INPUT_MISSING);
    assert_int_equal(ll_input_judge(2, 0), LL_INPUT_DUPLICATE);
    assert_int_equal(ll_input_judge(1, 1), LL_INPUT_DUPLICATE);
    assert_int_equal(ll_input_judge(0, 2), LL_INPUT_DUPLICATE);
}

static void test_chunk_accounted(void **state)
{
    (void)state;
    assert_true(ll_chunk_accounted(true, "ACCEPTED", false));
    assert_true(ll_chunk_accounted(true, NULL, false));
    assert_true(ll_chunk_accounted(false, "REJECTED", false));
    assert_true(ll_chunk_accounted(false, "REPLAY", false));
    assert_true(ll_chunk_accounted(false, NULL, true));
    /* accepted but its file row is gone, or no trace at all: lost */
    assert_false(ll_chunk_accounted(false, "ACCEPTED", false));
    assert_false(ll_chunk_accounted(false, NULL, false));
    assert_false(ll_chunk_accounted(false, "rejected", false));
}

/* One input's answers, judged (docs/contract.md K§3, K§1; docs/operations.md "Restore from a
 * backup"): a later REPLAY agreeing with the original answer is no violation. */
static void test_input_answers(void **state)
{
    (void)state;
    const ll_answer acc = {.outcome = "ACCEPTED"}, rep = {.outcome = "REPLAY"};
    const ll_answer claim = {.outcome = "ACCEPTED", .granted = LL_GRANT_YES};
    const ll_answer rej = {.outcome = "REJECTED", .code = "DUPLICATE_ACTIVE_RUN"};
    const ll_answer dead = {.dead_letter = true};
    /* one answer, none */
    assert_int_equal(ll_input_judge_answers(&acc, 1, false), LL_INPUT_OK);
    assert_int_equal(ll_input_judge_answers(&dead, 1, false), LL_INPUT_OK);
    assert_int_equal(ll_input_judge_answers(NULL, 0, false), LL_INPUT_MISSING);
    /* the replay of an applied input after a restore: the first answer, then REPLAY */
    const ll_answer a1[] = {acc, rep};
    assert_int_equal(ll_input_judge_answers(a1, 2, false), LL_INPUT_OK);
    const ll_answer a1b[] = {rep, acc, rep}; /* the original need not come first on the topic */
    assert_int_equal(ll_input_judge_answers(a1b, 3, false), LL_INPUT_OK);
    /* a notable replay's code (a publish claim past PUBLISHING: REPLAY RUN_STATUS_MISMATCH,
     * claimed=false) restates a grant without making a second one */
    const ll_answer a2[] = {claim,
                            {.outcome = "REPLAY", .code = "RUN_STATUS_MISMATCH", .granted = LL_GRANT_NO}};
    assert_int_equal(ll_input_judge_answers(a2, 2, false), LL_INPUT_OK);
    /* a refusal replayed names the same refusal (a rejected run request, an invalid manifest) */
    const ll_answer a3[] = {rej, {.outcome = "REPLAY", .code = "DUPLICATE_ACTIVE_RUN"}};
    assert_int_equal(ll_input_judge_answers(a3, 2, false), LL_INPUT_OK);

    /* a second non-REPLAY answer: the input was applied (or refused, or dead-lettered) twice */
    const ll_answer d1[] = {acc, acc};
    assert_int_equal(ll_input_judge_answers(d1, 2, false), LL_INPUT_DUPLICATE);
    const ll_answer d2[] = {acc, dead};
    assert_int_equal(ll_input_judge_answers(d2, 2, false), LL_INPUT_DUPLICATE);
    const ll_answer d3[] = {rej, {.outcome = "REJECTED", .code = "RUN_STATUS_MISMATCH"}};
    assert_int_equal(ll_input_judge_answers(d3, 2, false), LL_INPUT_DUPLICATE);
    const ll_answer d5[] = {rej, acc};
    assert_int_equal(ll_input_judge_answers(d5, 2, false), LL_INPUT_DUPLICATE);
    /* a refusal or dead letter given again as it was: a replay's restatement (docs/design.md §5,
     * "A replay restates"), not a second answer */
    const ll_answer s1[] = {rej, rej, rej};
    assert_int_equal(ll_input_judge_answers(s1, 3, false), LL_INPUT_OK);
    const ll_answer s2[] = {dead, dead};
    assert_int_equal(ll_input_judge_answers(s2, 2, false), LL_INPUT_OK);
    const ll_answer s3[] = {rej, {.outcome = "REPLAY", .code = "DUPLICATE_ACTIVE_RUN"}, rej};
    assert_int_equal(ll_input_judge_answers(s3, 3, false), LL_INPUT_OK);
    const ll_answer d4[] = {acc, rep, {.outcome = "REJECTED", .code = "CLAIM_MISMATCH"}};
    assert_int_equal(ll_input_judge_answers(d4, 3, false), LL_INPUT_DUPLICATE);

    /* a REPLAY contradicting the original: */
    /* ... it says applied where the input was refused, or refused for another reason */
    const ll_answer c1[] = {rej, rep};
    assert_int_equal(ll_input_judge_answers(c1, 2, false), LL_INPUT_CONTRADICTED);
    const ll_answer c2[] = {rej, {.outcome = "REPLAY", .code = "RUN_ID_CONFLICT"}};
    assert_int_equal(ll_input_judge_answers(c2, 2, false), LL_INPUT_CONTRADICTED);
    /* ... it grants what the original refused (two owners of one partition) */
    const ll_answer c3[] = {{.outcome = "ACCEPTED", .granted = LL_GRANT_NO},
                            {.outcome = "REPLAY", .granted = LL_GRANT_YES}};
    assert_int_equal(ll_input_judge_answers(c3, 2, false), LL_INPUT_CONTRADICTED);
    /* ... it says applied where the input was dead-lettered */
    const ll_answer c4[] = {dead, rep};
    assert_int_equal(ll_input_judge_answers(c4, 2, false), LL_INPUT_CONTRADICTED);
    /* ... an unknown outcome answers nothing the sender can trust */
    const ll_answer c5[] = {acc, {.outcome = "replay"}};
    assert_int_equal(ll_input_judge_answers(c5, 2, false), LL_INPUT_DUPLICATE);

    /* replayed after a restore (restored): the restored ledger applies again what the backup
     * missed, so a second non-REPLAY answer agreeing in outcome, code and grant is no violation;
     * a third, or one that disagrees, still is */
    assert_int_equal(ll_input_judge_answers(d1, 2, true), LL_INPUT_OK);
    assert_int_equal(ll_input_judge_answers(s1, 3, true), LL_INPUT_OK);
    const ll_answer r1[] = {acc, acc, acc};
    assert_int_equal(ll_input_judge_answers(r1, 3, true), LL_INPUT_DUPLICATE);
    const ll_answer r2[] = {acc, {.outcome = "REJECTED", .code = "CLAIM_MISMATCH"}};
    assert_int_equal(ll_input_judge_answers(r2, 2, true), LL_INPUT_CONTRADICTED);
    const ll_answer r3[] = {{.outcome = "ACCEPTED", .granted = LL_GRANT_NO}, claim};
    assert_int_equal(ll_input_judge_answers(r3, 2, true), LL_INPUT_CONTRADICTED);
    assert_int_equal(ll_input_judge_answers(c1, 2, true), LL_INPUT_CONTRADICTED);
    assert_int_equal(ll_input_judge_answers(d2, 2, true), LL_INPUT_CONTRADICTED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_events),    cmocka_unit_test(test_events_without_status),
        cmocka_unit_test(test_run_failed),      cmocka_unit_test(test_resolution),
        cmocka_unit_test(test_implied),         cmocka_unit_test(test_input_judge),
        cmocka_unit_test(test_chunk_accounted), cmocka_unit_test(test_input_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
