/* test_rules_claim.c - the claim decision over every run and partition status, token and token
 * history (docs/contract.md §5.3; docs/contract.md K§6 for a superseded token), and its refusal codes. */
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
            for (int known = 0; known <= 1; known++) {
                /* even the owner's replay is refused: the run no longer extracts */
                assert_int_equal(ll_claim_decide((ll_run_status)r, (ll_part_status)p, TOKEN, TOKEN, known),
                                 LL_CLAIM_REFUSE_RUN);
                assert_int_equal(ll_claim_decide((ll_run_status)r, (ll_part_status)p, NULL, OTHER, known),
                                 LL_CLAIM_REFUSE_RUN);
            }
        }
    }
}

/*
 * Expected decision while EXTRACTING for a partition status, whether the request token is the
 * stored one, and whether the history holds it (granted here before): what the claimer does.
 */
static ll_claim_decision expected(ll_part_status p, bool same, bool granted_before)
{
    switch (p) {
    case LL_PART_PENDING:
    case LL_PART_RETRY:
        /* a token granted before and superseded never owns the partition again */
        return granted_before ? LL_CLAIM_REFUSE_SUPERSEDED : LL_CLAIM_GRANT;
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
        ll_part_status ps = (ll_part_status)p;
        for (int known = 0; known <= 1; known++) {
            for (size_t i = 0; i < sizeof same_tokens / sizeof *same_tokens; i++)
                assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, ps, TOKEN, same_tokens[i], known),
                                 expected(ps, true, known));
            for (size_t i = 0; i < sizeof other_tokens / sizeof *other_tokens; i++)
                assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, ps, TOKEN, other_tokens[i], known),
                                 expected(ps, false, known));
            /* no stored token (fresh, or cleared by a reissue) */
            assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, ps, NULL, TOKEN, known),
                             expected(ps, false, known));
        }
    }
}

static void test_named_cases(void **state)
{
    (void)state;
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_PENDING, NULL, TOKEN, false), LL_CLAIM_GRANT);
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_RETRY, NULL, TOKEN, false), LL_CLAIM_GRANT);
    /* a RETRY partition keeping an old token is still claimable by a new one */
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_RETRY, OTHER, TOKEN, false), LL_CLAIM_GRANT);
    /* ... but not by the old token again (a replayed or zombie claim after the reissue): the
     * claimer answers CLAIM_MISMATCH, where the reference would grant it */
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_RETRY, TOKEN, TOKEN, true),
                     LL_CLAIM_REFUSE_SUPERSEDED);
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_RETRY, OTHER, TOKEN, true),
                     LL_CLAIM_REFUSE_SUPERSEDED);
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_RUNNING, TOKEN_UC, TOKEN, true),
                     LL_CLAIM_REPLAY);
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_RUNNING, OTHER, TOKEN, false),
                     LL_CLAIM_REFUSE_PARTITION);
    assert_int_equal(ll_claim_decide(LL_RUN_EXTRACTING, LL_PART_SUCCESS, TOKEN, TOKEN, true),
                     LL_CLAIM_REFUSE_PARTITION);
    assert_int_equal(ll_claim_decide(LL_RUN_CREATED, LL_PART_PENDING, NULL, TOKEN, false),
                     LL_CLAIM_REFUSE_RUN);
    assert_int_equal(ll_claim_decide(LL_RUN_FAILED_EXTRACT, LL_PART_RUNNING, TOKEN, TOKEN, true),
                     LL_CLAIM_REFUSE_RUN);
}

/* The code of each refusal over every partition status (what the claimer answers). */
static void test_refusal_codes(void **state)
{
    (void)state;
    for (int p = 0; p < LL_PART_STATUS_COUNT; p++) {
        ll_part_status ps = (ll_part_status)p;
        assert_null(ll_claim_refusal_code(LL_CLAIM_GRANT, ps));
        assert_null(ll_claim_refusal_code(LL_CLAIM_REPLAY, ps));
        assert_string_equal(ll_claim_refusal_code(LL_CLAIM_REFUSE_RUN, ps), "RUN_STATUS_MISMATCH");
        assert_string_equal(ll_claim_refusal_code(LL_CLAIM_REFUSE_SUPERSEDED, ps), "CLAIM_MISMATCH");
        assert_string_equal(ll_claim_refusal_code(LL_CLAIM_REFUSE_PARTITION, ps),
                            ps == LL_PART_RUNNING ? "CLAIM_MISMATCH" : "PARTITION_STATUS_MISMATCH");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_not_extracting_refused_first),
        cmocka_unit_test(test_extracting_matrix),
        cmocka_unit_test(test_named_cases),
        cmocka_unit_test(test_refusal_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
