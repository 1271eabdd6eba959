/* test_rules_ownership.c - who may report on a partition (docs/contract.md §5.4 check 3, §5.5 check 2;
 * docs/contract.md K§6): the classification over every run and partition status, way the run was
 * found, token and token history, and the answer of every ownership on both sides of
 * loop.prerequisite_wait, as chunk reports and partition failure reports answered before the
 * ladder became a rule. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/rules.h"

#define TOKEN "0f8fad5b-d9cb-469f-a165-70867728950e"
#define OTHER "7c9e6679-7425-40de-944b-e07fc1f90ae7"

static void test_run_and_partition_first(void **state)
{
    (void)state;
    for (int s = 0; s < LL_RUN_STATUS_COUNT; s++)
        for (int known = 0; known <= 1; known++) {
            ll_ownership_in in = {.run = LL_RUN_FOUND_NONE,
                                  .run_status = (ll_run_status)s,
                                  .token = TOKEN,
                                  .stored_token = TOKEN,
                                  .partition_found = true,
                                  .token_known = known};
            assert_int_equal(ll_ownership_classify(&in), LL_OWN_NO_RUN);
            in.run = LL_RUN_FOUND_REFUSED;
            assert_int_equal(ll_ownership_classify(&in), LL_OWN_RUN_REFUSED);
            in.run = LL_RUN_FOUND_LOCKED;
            in.partition_found = false;
            assert_int_equal(ll_ownership_classify(&in),
                             s == LL_RUN_CREATED ? LL_OWN_NO_MANIFEST : LL_OWN_NO_PARTITION);
        }
}

/* The token over every run × partition status: the stored one is MATCH; a known other one
 * SUPERSEDED; an unknown one waits only while a claim could be granted (EXTRACTING, PENDING/RETRY). */
static void test_token_matrix(void **state)
{
    (void)state;
    const char *const stored[] = {TOKEN, "", NULL, OTHER};
    for (int s = 0; s < LL_RUN_STATUS_COUNT; s++)
        for (int p = 0; p < LL_PART_STATUS_COUNT; p++)
            for (size_t t = 0; t < sizeof stored / sizeof *stored; t++)
                for (int known = 0; known <= 1; known++) {
                    ll_ownership_in in = {LL_RUN_FOUND_LOCKED,
                                          (ll_run_status)s,
                                          true,
                                          (ll_part_status)p,
                                          stored[t],
                                          TOKEN,
                                          known};
                    bool claimable = s == LL_RUN_EXTRACTING && (p == LL_PART_PENDING || p == LL_PART_RETRY);
                    ll_ownership want = t == 0      ? LL_OWN_MATCH
                                        : known     ? LL_OWN_SUPERSEDED
                                        : claimable ? LL_OWN_NOT_YET
                                                    : LL_OWN_MISMATCH;
                    assert_int_equal(ll_ownership_classify(&in), want);
                }
}

/* Every ownership's answer, both sides of the wait, and the deferral reasons. */
static void test_answer_matrix(void **state)
{
    (void)state;
    static const struct {
        ll_ownership own;
        ll_own_answer waiting, expired;
    } rows[] = {
        {LL_OWN_MATCH, LL_OWN_PROCEED, LL_OWN_PROCEED},
        {LL_OWN_MISMATCH, LL_OWN_CLAIM_MISMATCH, LL_OWN_CLAIM_MISMATCH},
        {LL_OWN_SUPERSEDED, LL_OWN_CLAIM_MISMATCH, LL_OWN_CLAIM_MISMATCH},
        {LL_OWN_NOT_YET, LL_OWN_DEFER_TOKEN, LL_OWN_DEFER_TOKEN},
        {LL_OWN_NO_RUN, LL_OWN_DEFER_RUN, LL_OWN_DEFER_RUN},
        {LL_OWN_RUN_REFUSED, LL_OWN_RUN_NOT_FOUND, LL_OWN_RUN_NOT_FOUND},
        {LL_OWN_NO_PARTITION, LL_OWN_PARTITION_NOT_FOUND, LL_OWN_PARTITION_NOT_FOUND},
        {LL_OWN_NO_MANIFEST, LL_OWN_DEFER_MANIFEST, LL_OWN_PARTITION_NOT_FOUND},
    };
    assert_int_equal(sizeof rows / sizeof *rows, LL_OWN_NO_MANIFEST + 1);
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        assert_int_equal(ll_ownership_answer(rows[i].own, false), rows[i].waiting);
        assert_int_equal(ll_ownership_answer(rows[i].own, true), rows[i].expired);
    }
    assert_string_equal(ll_own_defer_reason(LL_OWN_DEFER_RUN), "run not in the ledger yet");
    assert_string_equal(ll_own_defer_reason(LL_OWN_DEFER_MANIFEST), "manifest not applied yet");
    assert_string_equal(ll_own_defer_reason(LL_OWN_DEFER_TOKEN), "claim token not granted yet");
    assert_string_equal(ll_own_defer_reason(LL_OWN_PROCEED), "");
    assert_string_equal(ll_own_defer_reason(LL_OWN_CLAIM_MISMATCH), "");
}

/* The run step of a partition claim over every status, way the run was found and wait. */
static void test_claim_lookup_matrix(void **state)
{
    (void)state;
    for (int s = 0; s < LL_RUN_STATUS_COUNT; s++)
        for (int expired = 0; expired <= 1; expired++) {
            assert_int_equal(ll_claim_lookup(LL_RUN_FOUND_NONE, (ll_run_status)s, expired), LL_OWN_DEFER_RUN);
            assert_int_equal(ll_claim_lookup(LL_RUN_FOUND_REFUSED, (ll_run_status)s, expired),
                             LL_OWN_RUN_NOT_FOUND);
            assert_int_equal(ll_claim_lookup(LL_RUN_FOUND_LOCKED, (ll_run_status)s, expired),
                             s == LL_RUN_CREATED && !expired ? LL_OWN_DEFER_MANIFEST : LL_OWN_PROCEED);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_and_partition_first),
        cmocka_unit_test(test_token_matrix),
        cmocka_unit_test(test_answer_matrix),
        cmocka_unit_test(test_claim_lookup_matrix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
