/*
 * test_core_offtrack.c - done offsets above the committed offset (issue 8 §4): the committed
 * offset never passes a message that is not done, gaps (transaction markers) count as done, and
 * the metadata round-trips so that a restarted consumer skips exactly what was done.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "ll/offtrack.h"

static void test_in_order_advances_base(void **state)
{
    (void)state;
    ll_offtrack t;
    ll_offtrack_init(&t, 100);
    for (int64_t o = 100; o < 110; o++) {
        assert_int_equal(ll_offtrack_seen(&t, o), 0);
        assert_int_equal(ll_offtrack_done(&t, o), 0);
    }
    assert_int_equal(t.base, 110);
    assert_int_equal(ll_offtrack_ranges(&t), 0);
    char md[LL_OFFTRACK_METADATA_MAX];
    assert_int_equal(ll_offtrack_metadata(&t, md, sizeof md), 0);
    assert_string_equal(md, "");
}

static void test_held_message_stops_the_base(void **state)
{
    (void)state;
    ll_offtrack t;
    ll_offtrack_init(&t, 0);
    for (int64_t o = 0; o < 10; o++)
        ll_offtrack_seen(&t, o);
    ll_offtrack_done(&t, 0);
    ll_offtrack_done(&t, 1);
    /* 2 is held (its run waits for a claim); 3..9 of other runs are applied */
    for (int64_t o = 3; o < 10; o++)
        ll_offtrack_done(&t, o);
    assert_int_equal(t.base, 2);
    assert_false(ll_offtrack_is_done(&t, 2));
    assert_true(ll_offtrack_is_done(&t, 5));
    assert_true(ll_offtrack_is_done(&t, 1));
    char md[LL_OFFTRACK_METADATA_MAX];
    assert_true(ll_offtrack_metadata(&t, md, sizeof md) > 0);
    assert_string_equal(md, "ll1:1-7");
    /* the held one is applied at last: everything is committable */
    ll_offtrack_done(&t, 2);
    assert_int_equal(t.base, 10);
    assert_int_equal(ll_offtrack_ranges(&t), 0);
}

static void test_gaps_are_markers(void **state)
{
    (void)state;
    ll_offtrack t;
    ll_offtrack_init(&t, 0);
    /* a transactional producer: 0 1 (marker 2) 3 (marker 4) 5 */
    ll_offtrack_seen(&t, 0);
    ll_offtrack_done(&t, 0);
    ll_offtrack_seen(&t, 1);
    ll_offtrack_seen(&t, 3);
    ll_offtrack_seen(&t, 5);
    ll_offtrack_done(&t, 3);
    ll_offtrack_done(&t, 5);
    /* 1 held: 2..5 done (markers and applied), base stays at 1 */
    assert_int_equal(t.base, 1);
    char md[LL_OFFTRACK_METADATA_MAX];
    ll_offtrack_metadata(&t, md, sizeof md);
    assert_string_equal(md, "ll1:1-4");
    ll_offtrack_done(&t, 1);
    assert_int_equal(t.base, 6);
    /* a marker right at the base moves it too */
    ll_offtrack_seen(&t, 8);
    assert_int_equal(t.base, 8);
}

static void test_metadata_round_trip(void **state)
{
    (void)state;
    ll_offtrack t, u;
    ll_offtrack_init(&t, 1000);
    for (int64_t o = 1000; o < 1100; o++)
        ll_offtrack_seen(&t, o);
    for (int64_t o = 1000; o < 1100; o++)
        if (o != 1010 && o != 1050 && o != 1051 && o != 1099)
            ll_offtrack_done(&t, o);
    char md[LL_OFFTRACK_METADATA_MAX];
    ll_offtrack_metadata(&t, md, sizeof md);
    assert_string_equal(md, "ll1:1-39,42-88");
    assert_int_equal(ll_offtrack_load(&u, t.base, md), 0);
    for (int64_t o = 1000; o < 1110; o++)
        assert_int_equal(ll_offtrack_is_done(&u, o), ll_offtrack_is_done(&t, o));
    assert_int_equal(u.base, 1010);
}

static void test_bad_metadata_is_refused(void **state)
{
    (void)state;
    ll_offtrack t;
    const char *bad[] = {"x",
                         "ll1:",
                         "ll1:0",
                         "ll1:3-2",
                         "ll1:1,1",
                         "ll1:1-3,4",
                         "ll1:5,3",
                         "ll1:1,",
                         "ll1:-1",
                         "ll1:1-",
                         "ll1:99999999999999999999",
                         "ll2:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ll_offtrack_load(&t, 7, bad[i]), -1);
        assert_int_equal(t.base, 7);
        assert_int_equal(ll_offtrack_ranges(&t), 0);
    }
    assert_int_equal(ll_offtrack_load(&t, 7, NULL), 0);
    assert_int_equal(ll_offtrack_load(&t, 7, ""), 0);
}

static void test_ranges_are_bounded(void **state)
{
    (void)state;
    ll_offtrack t;
    ll_offtrack_init(&t, 0);
    /* every other offset done: one range each, up to the bound */
    int64_t o = 0;
    for (size_t i = 0; i < LL_OFFTRACK_MAX_RANGES; i++) {
        o += 2;
        assert_int_equal(ll_offtrack_done(&t, o), 0);
    }
    assert_int_equal(ll_offtrack_ranges(&t), LL_OFFTRACK_MAX_RANGES);
    assert_int_equal(ll_offtrack_done(&t, o + 2), -1);
    /* joining two ranges needs no new one */
    assert_int_equal(ll_offtrack_done(&t, 3), 0);
    assert_int_equal(ll_offtrack_ranges(&t), LL_OFFTRACK_MAX_RANGES - 1);
    /* the metadata of the fullest tracker with the largest offsets fits the bound */
    ll_offtrack_init(&t, 0);
    for (int64_t i = 0; i < LL_OFFTRACK_MAX_RANGES; i++) {
        assert_int_equal(ll_offtrack_done(&t, 9000000000LL + 3 * i), 0);
        assert_int_equal(ll_offtrack_done(&t, 9000000000LL + 3 * i + 1), 0);
    }
    char md[LL_OFFTRACK_METADATA_MAX];
    assert_true(ll_offtrack_metadata(&t, md, sizeof md) > 0);
    assert_true(strlen(md) < 4096);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order_advances_base),  cmocka_unit_test(test_held_message_stops_the_base),
        cmocka_unit_test(test_gaps_are_markers),        cmocka_unit_test(test_metadata_round_trip),
        cmocka_unit_test(test_bad_metadata_is_refused), cmocka_unit_test(test_ranges_are_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
