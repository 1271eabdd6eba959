/* test_rules_claim.c - the claim decision over every run and partition status (contract §5.3). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

#define TOKEN    "0f8fad5b-d9cb-469f-a165-70867728950e"
#define TOKEN_UC "0F8FAD5B-D9CB-469F-A165-70867728950E"
#define OTHER    "7c9e6679-7425-40de-944b-e07fc1f90ae7"

/* The request tokens tried against a partition that stores TOKEN. */
static const char *const same_tokens[] = {TOKEN, TOKEN_UC};
static const char *const other_tokens[] = {OTHER, "not-a-uuid", "", NULL};

static void test_run_not_extracting_refused_first(void **state)
{
    (void)state;
    for (int r = 0; r < LL_RUN_STATUS_COUNT; r++) {
        if (r == LL_RUN_EXTRACTING)
            continue;
        for (int p = 0; p < LL_PART_STATUS_COUNT; p++) {
            /* even the owner's replay is refused: the run no longer extracts */
            assert_int_equal(ll_claim_decide((ll_run_status)r, (ll_part_status)p, TOKEN, TOKEN),
                             LL_CLAIM_REFUSE_RUN);
            assert_int_equal(ll_claim_decide((ll_run_status)r, (ll_part_status)p, NULL, OTHER),
                             LL_CLAIM_REFUSE_RUN);
        }
    }
}

/* Expected decision while EXTRACTING for a partition status and whether the token matches. */
static ll_claim_decision expected(ll_part_status p, bool same)
{
    switch (p) {
    case LL_PART_PENDING:
    case LL_PART_RETRY:
        return LL_CLAIM_GRANT;
    case LL_PART_RUNNING:
        return same ? LL_CLAIM_REPLAY : LL_CLAIM_REFUSE_PARTITION;
    default: /* SUCCESS, FAILED, TIMED_OUT */
        return LL_CLAIM_REFUSE_PARTITION;
    }
}

static void test_extracting_matrix(void **state)
{
    (void)state;
    for (int p = 0; p < LL_PART_STATUS_COUNT; p++) {
        for (size_t i = 0; i < sizeof same_tokens / sizeof *same_tokens; i++)
            assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, (ll_part_status)p, TOKEN, same_tokens[i]),
                             expected((ll_part_status)p, true));
        for (size_t i = 0; i < sizeof other_tokens / sizeof *other_tokens; i++)
            assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, (ll_part_status)p, TOKEN, other_tokens[i]),
                             expected((ll_part_status)p, false));
        /* no stored token (fresh, or cleared by a reissue) */
        assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, (ll_part_status)p, NULL, TOKEN),
                         expected((ll_part_status)p, false));
    }
}

static void test_named_cases(void **state)
{
    (void)state;
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_PENDING, NULL, TOKEN), LL_CLAIM_GRANT);
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_RETRY, NULL, TOKEN), LL_CLAIM_GRANT);
    /* a RETRY partition keeping an old token is still claimable by a new one */
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_RETRY, OTHER, TOKEN), LL_CLAIM_GRANT);
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_RUNNING, TOKEN_UC, TOKEN), LL_CLAIM_REPLAY);
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_RUNNING, OTHER, TOKEN),
                     LL_CLAIM_REFUSE_PARTITION);
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_SUCCESS, TOKEN, TOKEN),
                     LL_CLAIM_REFUSE_PARTITION);
    assert_int_equal(ll_claim_decide(LL_RUN_CREATED, LL_PART_PENDING, NULL, TOKEN), LL_CLAIM_REFUSE_RUN);
    assert_int_equal(ll_claim_decide(LL_RUN_FAILED_EXTRACT, LL_PART_RUNNING, TOKEN, TOKEN),
                     LL_CLAIM_REFUSE_RUN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_not_extracting_refused_first),
        cmocka_unit_test(test_extracting_matrix),
        cmocka_unit_test(test_named_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
