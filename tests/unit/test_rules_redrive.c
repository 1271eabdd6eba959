/* test_rules_redrive.c - the decisions of `loadctl redrive` (ll/redrive.h): the coordinates an
 * operator names, the link header, the headers kept, and the refusal of a second redrive. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include "ll/redrive.h"

static void test_coordinates(void **state)
{
    (void)state;
    char topic[64];
    int32_t p = -1;
    int64_t o = -1;
    assert_int_equal(ll_coord_parse("loadledger.dead-letters:2:41", topic, sizeof topic, &p, &o), 0);
    assert_string_equal(topic, "loadledger.dead-letters");
    assert_int_equal(p, 2);
    assert_int_equal(o, 41);
    /* split at the last two colons: a topic may hold one */
    assert_int_equal(ll_coord_parse("a:b:0:9223372036854775807", topic, sizeof topic, &p, &o), 0);
    assert_string_equal(topic, "a:b");
    assert_int_equal(p, 0);
    assert_true(o == INT64_MAX);
    assert_int_equal(ll_coord_parse("t:2147483647:0", topic, sizeof topic, &p, &o), 0);
    assert_int_equal(p, INT32_MAX);
}

static void test_bad_coordinates(void **state)
{
    (void)state;
    const char *bad[] = {"",
                         "t",
                         "t:1",
                         ":1:2",
                         "t::2",
                         "t:1:",
                         "t:-1:2",
                         "t:1:-2",
                         "t:+1:2",
                         "t: 1:2",
                         "t:1:2x",
                         "t:2147483648:0",
                         "t:0:9223372036854775808",
                         "t:0:99999999999999999999",
                         "t:0x1:2",
                         NULL};
    char topic[64];
    for (int i = 0; bad[i]; i++) {
        int32_t p = -7;
        int64_t o = -7;
        assert_int_equal(ll_coord_parse(bad[i], topic, sizeof topic, &p, &o), -1);
        assert_int_equal(p, -7);
        assert_true(o == -7);
    }
    assert_int_equal(ll_coord_parse(NULL, topic, sizeof topic, &(int32_t){0}, &(int64_t){0}), -1);
    /* a topic that does not fit */
    char small[4];
    assert_int_equal(ll_coord_parse("abcd:1:2", small, sizeof small, &(int32_t){0}, &(int64_t){0}), -1);
    assert_int_equal(ll_coord_parse("abc:1:2", small, sizeof small, &(int32_t){0}, &(int64_t){0}), 0);
}

static void test_link_and_headers(void **state)
{
    (void)state;
    char link[64];
    assert_int_equal(ll_redrive_link("x.dead-letters", 3, 1234567890123, link, sizeof link), 30);
    assert_string_equal(link, "x.dead-letters/3/1234567890123");
    assert_true(ll_redrive_keeps_header("nifi.flowfile.uuid"));
    assert_true(ll_redrive_keeps_header("llama"));
    assert_false(ll_redrive_keeps_header("ll.error.code"));
    assert_false(ll_redrive_keeps_header("ll.source.offset"));
    assert_false(ll_redrive_keeps_header(LL_REDRIVE_HEADER));
    assert_false(ll_redrive_keeps_header(NULL));
}

static void test_judge(void **state)
{
    (void)state;
    assert_int_equal(ll_redrive_judge(false, true, false), LL_REDRIVE_GO);
    assert_int_equal(ll_redrive_judge(true, true, false), LL_REDRIVE_ALREADY);
    assert_int_equal(ll_redrive_judge(true, false, false), LL_REDRIVE_ALREADY);
    assert_int_equal(ll_redrive_judge(false, false, false), LL_REDRIVE_UNCHECKED);
    assert_int_equal(ll_redrive_judge(true, true, true), LL_REDRIVE_GO);
    assert_int_equal(ll_redrive_judge(false, false, true), LL_REDRIVE_GO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_coordinates),
        cmocka_unit_test(test_bad_coordinates),
        cmocka_unit_test(test_link_and_headers),
        cmocka_unit_test(test_judge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
