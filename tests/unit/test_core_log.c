/*
 * test_core_log.c - a log message made valid UTF-8 before it becomes a JSON string
 * (ll_log_utf8_clean, ll/log.h): well-formed text is kept byte for byte, a stray or malformed
 * byte becomes '?', a sequence cut by a bounded snprintf at the end is dropped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ll/log.h"

/* ll_log_utf8_clean of in: the result must be want, and the returned length its length. */
static void clean_is(const char *in, const char *want)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s", in);
    size_t n = ll_log_utf8_clean(buf);
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
}

static void test_valid_text_kept(void **state)
{
    (void)state;
    clean_is("", "");
    clean_is("Connect to ipv4#127.0.0.1:1 failed", "Connect to ipv4#127.0.0.1:1 failed");
    clean_is("tab\there\nnewline", "tab\there\nnewline"); /* control bytes: JSON escapes them */
    clean_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
    clean_is("\xed\x9f\xbf \xf4\x8f\xbf\xbf", "\xed\x9f\xbf \xf4\x8f\xbf\xbf"); /* U+D7FF, U+10FFFF */
}

static void test_malformed_bytes_marked(void **state)
{
    (void)state;
    clean_is("a\xff"
             "b",
             "a?b"); /* never in UTF-8 */
    clean_is("a\x80"
             "b",
             "a?b");            /* a continuation byte alone */
    clean_is("\xc0\xaf", "??"); /* overlong '/' */
    clean_is("\xe0\x80\xaf"
             "x",
             "???x"); /* overlong, three bytes */
    clean_is("\xed\xa0\x80"
             "x",
             "???x"); /* a surrogate (U+D800) */
    clean_is("\xf4\x90\x80\x80"
             "x",
             "????x"); /* above U+10FFFF */
    clean_is("\xc3"
             "x",
             "?x");                               /* a lead byte without its continuation */
    clean_is("latin1 \xe9t\xe9!", "latin1 ?t?!"); /* ISO-8859-1 text */
}

static void test_sequence_cut_at_the_end_dropped(void **state)
{
    (void)state;
    clean_is("caf\xc3", "caf");
    clean_is("euro \xe2\x82", "euro ");
    clean_is("smile \xf0\x9f\x98", "smile ");
    /* a bounded copy cut after the euro sign's first two bytes */
    const char *src = "abcde\xe2\x82\xac";
    char buf[8];
    memcpy(buf, src, 7);
    buf[7] = '\0';
    assert_int_equal(ll_log_utf8_clean(buf), 5);
    assert_string_equal(buf, "abcde");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_text_kept),
        cmocka_unit_test(test_malformed_bytes_marked),
        cmocka_unit_test(test_sequence_cut_at_the_end_dropped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
