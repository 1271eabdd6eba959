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
    assert_int_equal(ll_offtrack_metadata(&t, md, sizeof md, NULL), 0);
    assert_string_equal(md, "");
    ll_offtrack_free(&t);
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
    assert_true(ll_offtrack_metadata(&t, md, sizeof md, NULL) > 0);
    assert_string_equal(md, "ll1:1-7");
    /* the held one is applied at last: everything is committable */
    ll_offtrack_done(&t, 2);
    assert_int_equal(t.base, 10);
    assert_int_equal(ll_offtrack_ranges(&t), 0);
    ll_offtrack_free(&t);
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
    ll_offtrack_metadata(&t, md, sizeof md, NULL);
    assert_string_equal(md, "ll1:1-4");
    ll_offtrack_done(&t, 1);
    assert_int_equal(t.base, 6);
    /* a marker right at the base moves it too */
    ll_offtrack_seen(&t, 8);
    assert_int_equal(t.base, 8);
    ll_offtrack_free(&t);
}

static void test_metadata_round_trip(void **state)
{
    (void)state;
    ll_offtrack t, u;
    ll_offtrack_init(&t, 1000);
    ll_offtrack_init(&u, 0);
    for (int64_t o = 1000; o < 1100; o++)
        ll_offtrack_seen(&t, o);
    for (int64_t o = 1000; o < 1100; o++)
        if (o != 1010 && o != 1050 && o != 1051 && o != 1099)
            ll_offtrack_done(&t, o);
    char md[LL_OFFTRACK_METADATA_MAX];
    ll_offtrack_metadata(&t, md, sizeof md, NULL);
    assert_string_equal(md, "ll1:1-39,42-88");
    assert_int_equal(ll_offtrack_load(&u, t.base, md), 0);
    for (int64_t o = 1000; o < 1110; o++)
        assert_int_equal(ll_offtrack_is_done(&u, o), ll_offtrack_is_done(&t, o));
    assert_int_equal(u.base, 1010);
    ll_offtrack_free(&t);
    ll_offtrack_free(&u);
}

static void test_bad_metadata_is_refused(void **state)
{
    (void)state;
    ll_offtrack t;
    ll_offtrack_init(&t, 0);
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
                         "ll3:1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ll_offtrack_load(&t, 7, bad[i]), -1);
        assert_int_equal(t.base, 7);
        assert_int_equal(ll_offtrack_ranges(&t), 0);
    }
    assert_int_equal(ll_offtrack_load(&t, 7, NULL), 0);
    assert_int_equal(ll_offtrack_load(&t, 7, ""), 0);
    ll_offtrack_free(&t);
}

/* Every other offset of a batch held (its runs wait) and the rest marked done in a random
 * order, as a batch sorted by run marks them: the tracker takes them all (issue 26 §5: a fixed 150
 * ranges refused the rest), and the metadata, a bitmap for the dense part, brings back exactly the
 * same done offsets. */
static void test_many_ranges_fit_as_a_bitmap(void **state)
{
    (void)state;
    ll_offtrack t, u;
    ll_offtrack_init(&t, 0);
    ll_offtrack_init(&u, 0);
    enum { N = 4000 };
    static int64_t order[N];
    size_t k = 0;
    for (int64_t o = 0; o < N; o++) {
        assert_int_equal(ll_offtrack_seen(&t, o), 0);
        if (o % 2 == 1)
            order[k++] = o;
    }
    unsigned seed = 7;
    for (size_t i = k; i > 1; i--) { /* a fixed shuffle */
        seed = seed * 1103515245u + 12345u;
        size_t j = (seed >> 8) % i;
        int64_t x = order[i - 1];
        order[i - 1] = order[j];
        order[j] = x;
    }
    for (size_t i = 0; i < k; i++)
        assert_int_equal(ll_offtrack_done(&t, order[i]), 0);
    assert_int_equal(ll_offtrack_ranges(&t), N / 2);
    char md[LL_OFFTRACK_METADATA_MAX];
    bool lossy = true;
    int n = ll_offtrack_metadata(&t, md, sizeof md, &lossy);
    assert_false(lossy);
    assert_true(n > 0 && n < 4000);
    assert_memory_equal(md, "ll2:;1:", 7);
    assert_int_equal(ll_offtrack_load(&u, t.base, md), 0);
    for (int64_t o = 0; o < N + 10; o++)
        assert_int_equal(ll_offtrack_is_done(&u, o), ll_offtrack_is_done(&t, o));
    ll_offtrack_free(&t);
    ll_offtrack_free(&u);
}

/* Old held messages far below a dense tail: their ranges as text, the tail as a bitmap. */
static void test_text_then_bitmap(void **state)
{
    (void)state;
    ll_offtrack t, u;
    ll_offtrack_init(&t, 100);
    ll_offtrack_init(&u, 0);
    for (int64_t o = 100; o < 100000; o++)
        ll_offtrack_seen(&t, o);
    for (int64_t o = 101; o < 100000; o++) {
        bool held = o == 5000 || o == 20000 || (o >= 90000 && o % 3 == 0);
        if (!held)
            assert_int_equal(ll_offtrack_done(&t, o), 0);
    }
    char md[LL_OFFTRACK_METADATA_MAX];
    bool lossy = true;
    int n = ll_offtrack_metadata(&t, md, sizeof md, &lossy);
    assert_false(lossy);
    assert_true(n > 0);
    assert_memory_equal(md, "ll2:1-4899,4901-19899,19901-89899;89901:", 40);
    assert_int_equal(ll_offtrack_load(&u, 100, md), 0);
    for (int64_t o = 90; o < 100010; o++)
        assert_int_equal(ll_offtrack_is_done(&u, o), ll_offtrack_is_done(&t, o));
    /* the held ones done at last: one range, then nothing */
    ll_offtrack_done(&t, 100);
    ll_offtrack_done(&t, 5000);
    ll_offtrack_done(&t, 20000);
    for (int64_t o = 90000; o < 100000; o += 3)
        ll_offtrack_done(&t, o);
    assert_int_equal(t.base, 100000);
    assert_int_equal(ll_offtrack_metadata(&t, md, sizeof md, NULL), 0);
    ll_offtrack_free(&t);
    ll_offtrack_free(&u);
}

/* Past every bound (not reachable with the loop's checked limits): the longest prefix that fits,
 * said to be lossy, and still well formed. */
static void test_lossy_metadata_is_a_prefix(void **state)
{
    (void)state;
    ll_offtrack t, u;
    ll_offtrack_init(&t, 0);
    ll_offtrack_init(&u, 0);
    for (int64_t i = 0; i < 2000; i++)
        assert_int_equal(ll_offtrack_done(&t, 1000000000LL + 100000LL * i), 0);
    char md[LL_OFFTRACK_METADATA_MAX];
    bool lossy = false;
    int n = ll_offtrack_metadata(&t, md, sizeof md, &lossy);
    assert_true(lossy);
    assert_true(n > 3900 && n < (int)sizeof md);
    assert_int_equal(ll_offtrack_load(&u, 0, md), 0);
    assert_true(ll_offtrack_ranges(&u) > 100 && ll_offtrack_ranges(&u) < 2000);
    for (size_t i = 0; i < ll_offtrack_ranges(&u); i++)
        assert_true(ll_offtrack_is_done(&t, u.lo[i]));
    ll_offtrack_free(&t);
    ll_offtrack_free(&u);
}

static void test_bad_bitmap_is_refused(void **state)
{
    (void)state;
    ll_offtrack t;
    ll_offtrack_init(&t, 0);
    const char *bad[] = {"ll2:",      "ll2:;",        "ll2:;0:AA",    "ll2:;1:",      "ll2:;1:A",
                         "ll2:;1:A*", "ll2:1-5;6:AA", "ll2:1-5;3:AA", "ll2:5,3;9:AA", "ll2:;1:AA,"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(ll_offtrack_load(&t, 7, bad[i]), -1);
        assert_int_equal(t.base, 7);
        assert_int_equal(ll_offtrack_ranges(&t), 0);
    }
    assert_int_equal(ll_offtrack_load(&t, 7, "ll2:1-5;8:AQ"), 0);
    assert_true(ll_offtrack_is_done(&t, 12));
    assert_false(ll_offtrack_is_done(&t, 13));
    assert_false(ll_offtrack_is_done(&t, 14));
    assert_true(ll_offtrack_is_done(&t, 15));
    assert_false(ll_offtrack_is_done(&t, 16));
    ll_offtrack_free(&t);
}

/* The ledger's position and Kafka's, intersected (issue 27 §1): the lower base, and above it
 * only what both mark done; the counts say how many offsets each alone had. */
static void test_intersect(void **state)
{
    (void)state;
    ll_offtrack k, g;
    ll_offtrack_init(&k, 0);
    ll_offtrack_init(&g, 0);
    /* Kafka: committed 100, 105-109 done above; the ledger lost its last commits: at 90, 95 done */
    assert_int_equal(ll_offtrack_load(&k, 100, "ll1:5-9"), 0);
    assert_int_equal(ll_offtrack_load(&g, 90, "ll1:5"), 0);
    int64_t k_only = -1, g_only = -1;
    assert_int_equal(ll_offtrack_intersect(&k, &g, &k_only, &g_only), 0);
    assert_int_equal(k.base, 90);
    assert_int_equal(k.next_seen, 90);
    assert_true(ll_offtrack_is_done(&k, 95));
    for (int64_t o = 90; o < 120; o++)
        if (o != 95)
            assert_false(ll_offtrack_is_done(&k, o));
    /* Kafka had 90..99 but 95, and 105..109: 14; the ledger had nothing Kafka had not */
    assert_int_equal(k_only, 14);
    assert_int_equal(g_only, 0);
    /* the reverse: Kafka behind (a lost Kafka commit), the ledger ahead */
    assert_int_equal(ll_offtrack_load(&k, 50, ""), 0);
    assert_int_equal(ll_offtrack_load(&g, 60, "ll1:2-3"), 0);
    assert_int_equal(ll_offtrack_intersect(&k, &g, &k_only, &g_only), 0);
    assert_int_equal(k.base, 50);
    assert_int_equal(ll_offtrack_ranges(&k), 0);
    assert_int_equal(k_only, 0);
    assert_int_equal(g_only, 12);
    /* equal: nothing changes */
    assert_int_equal(ll_offtrack_load(&k, 7, "ll1:2,4-6"), 0);
    assert_int_equal(ll_offtrack_load(&g, 7, "ll1:2,4-6"), 0);
    assert_int_equal(ll_offtrack_intersect(&k, &g, &k_only, &g_only), 0);
    char md[LL_OFFTRACK_METADATA_MAX];
    ll_offtrack_metadata(&k, md, sizeof md, NULL);
    assert_string_equal(md, "ll1:2,4-6");
    assert_int_equal(k_only + g_only, 0);
    ll_offtrack_free(&k);
    ll_offtrack_free(&g);
}

/* The Kafka commit's view (docs/design.md §5): the tracker with the answered offsets the ledger
 * lost marked done too. */
static void test_union(void **state)
{
    (void)state;
    ll_offtrack t, a;
    ll_offtrack_init(&t, 0);
    ll_offtrack_init(&a, 0);
    /* the failover drill's case: Kafka had everything below 547; the ledger is at 529 with 531-540
     * applied again, 529 and 530 held: the commit stays at 547 */
    assert_int_equal(ll_offtrack_load(&a, 547, ""), 0);
    assert_int_equal(ll_offtrack_load(&t, 529, "ll1:2-11"), 0);
    assert_int_equal(ll_offtrack_union(&t, &a), 0);
    assert_int_equal(t.base, 547);
    assert_int_equal(ll_offtrack_ranges(&t), 0);
    /* ranges on both sides, interleaved and touching */
    assert_int_equal(ll_offtrack_load(&t, 10, "ll1:5-6"), 0);    /* 15-16 */
    assert_int_equal(ll_offtrack_load(&a, 5, "ll1:7,15-17"), 0); /* 12, 20-22 */
    assert_int_equal(ll_offtrack_union(&t, &a), 0);
    assert_int_equal(t.base, 10);
    assert_int_equal(ll_offtrack_ranges(&t), 3); /* 12, 15-16, 20-22 */
    for (int64_t o = 0; o < 30; o++)
        assert_int_equal(ll_offtrack_is_done(&t, o),
                         o < 10 || o == 12 || o == 15 || o == 16 || (o >= 20 && o <= 22));
    /* the other's base above t's: it fills the gap below it, and the base moves over what follows */
    assert_int_equal(ll_offtrack_load(&t, 10, "ll1:1-3"), 0); /* 11-13 */
    assert_int_equal(ll_offtrack_load(&a, 11, ""), 0);
    assert_int_equal(ll_offtrack_union(&t, &a), 0);
    assert_int_equal(t.base, 14);
    assert_int_equal(ll_offtrack_ranges(&t), 0);
    /* the other behind: nothing changes */
    assert_int_equal(ll_offtrack_load(&t, 40, "ll1:3"), 0);
    assert_int_equal(ll_offtrack_load(&a, 20, "ll1:5"), 0); /* 25 */
    assert_int_equal(ll_offtrack_union(&t, &a), 0);
    assert_int_equal(t.base, 40);
    assert_int_equal(ll_offtrack_ranges(&t), 1);
    assert_true(ll_offtrack_is_done(&t, 43));
    assert_false(ll_offtrack_is_done(&t, 42));
    ll_offtrack_free(&t);
    ll_offtrack_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_order_advances_base),
        cmocka_unit_test(test_held_message_stops_the_base),
        cmocka_unit_test(test_gaps_are_markers),
        cmocka_unit_test(test_metadata_round_trip),
        cmocka_unit_test(test_bad_metadata_is_refused),
        cmocka_unit_test(test_many_ranges_fit_as_a_bitmap),
        cmocka_unit_test(test_text_then_bitmap),
        cmocka_unit_test(test_lossy_metadata_is_a_prefix),
        cmocka_unit_test(test_bad_bitmap_is_refused),
        cmocka_unit_test(test_intersect),
        cmocka_unit_test(test_union),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
