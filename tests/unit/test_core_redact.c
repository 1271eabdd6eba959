/*
 * test_core_redact.c - passwords out of conninfo strings and connection errors (ll/redact.h):
 * keyword form, URI form, a URI as the dbname value, quoted and escaped values, encoded keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ll/redact.h"

static void expect_conninfo(const char *in, const char *want)
{
    char out[512];
    assert_ptr_equal(ll_redact_conninfo(in, out, sizeof out), out);
    assert_string_equal(out, want);
}

static void test_keyword_form(void **state)
{
    (void)state;
    expect_conninfo("host=h port=5432 dbname=d user=u password=s3cr3t",
                    "host=h port=5432 dbname=d user=u password=***");
    expect_conninfo("password=s3cr3t host=h", "password=*** host=h");
    expect_conninfo("host=h password = s3cr3t  user=u", "host=h password = ***  user=u");
    expect_conninfo("PASSWORD=a sslpassword=b passfile=/p", "PASSWORD=*** sslpassword=*** passfile=/p");
    /* libpq skips white space after '=': the next word is the value */
    expect_conninfo("password= s3cr3t", "password= ***");
    expect_conninfo("host=h password=", "host=h password=");
    expect_conninfo("host=h dbname=d user=u", "host=h dbname=d user=u");
}

static void test_quoted_and_escaped_values(void **state)
{
    (void)state;
    expect_conninfo("password='s3 cr3t' user=u", "password='***' user=u");
    expect_conninfo("password='it\\'s a secret' user=u", "password='***' user=u");
    expect_conninfo("password=no\\ space user=u", "password=*** user=u");
    /* an unterminated quote: everything after it */
    expect_conninfo("user=u password='open to the end", "user=u password='***");
}

static void test_uri_form(void **state)
{
    (void)state;
    expect_conninfo("postgresql://u:s3cr3t@h:5432/db?sslmode=require",
                    "postgresql://u:***@h:5432/db?sslmode=require");
    expect_conninfo("postgres://u:s3cr3t@h/db", "postgres://u:***@h/db");
    expect_conninfo("POSTGRESQL://u:s3cr3t@h", "POSTGRESQL://u:***@h");
    expect_conninfo("postgresql://h/db?sslmode=disable&password=s3cr3t",
                    "postgresql://h/db?sslmode=disable&password=***");
    /* libpq percent-decodes URI keys: pass%77ord is password */
    expect_conninfo("postgresql://h/db?pass%77ord=s3cr3t", "postgresql://h/db?pass%77ord=***");
    /* an unencoded '@' in the password: up to the last '@' */
    expect_conninfo("postgresql://u:p@ss@h/db", "postgresql://u:***@h/db");
    /* no password in these */
    expect_conninfo("postgresql://u@h:5432/db", "postgresql://u@h:5432/db");
    expect_conninfo("postgresql://[::1]:5432/db", "postgresql://[::1]:5432/db");
    expect_conninfo("postgresql:///db?host=/run/pg", "postgresql:///db?host=/run/pg");
}

static void test_dbname_as_uri(void **state)
{
    (void)state;
    /* libpq expands a dbname that is itself a URI or a conninfo */
    expect_conninfo("dbname=postgresql://u:s3cr3t@host/db connect_timeout=3",
                    "dbname=postgresql://u:***@host/db connect_timeout=3");
    expect_conninfo("host=x dbname='postgresql://u:s3 cr3t@host/db' user=y",
                    "host=x dbname='postgresql://u:***@host/db' user=y");
    /* a quote inside an unquoted value is the value's own (libpq): the closing quote goes too */
    expect_conninfo("dbname='host=h password=s3cr3t' user=u", "dbname='host=h password=*** user=u");
    expect_conninfo("password=ab'cd user=u", "password=*** user=u");
    expect_conninfo("dbname=postgresql://h/db?password=s3cr3t port=5",
                    "dbname=postgresql://h/db?password=*** port=5");
}

static void test_cut_to_fit_never_shows_a_secret(void **state)
{
    (void)state;
    char out[24];
    ll_redact_conninfo("user=u password=s3cr3t-and-long host=h", out, sizeof out);
    assert_string_equal(out, "user=u password=*** hos");
    char tiny[3];
    ll_redact_conninfo("password=s3cr3t", tiny, sizeof tiny);
    assert_string_equal(tiny, "pa");
    ll_redact_conninfo(NULL, out, sizeof out);
    assert_string_equal(out, "");
}

static void test_messages_quoting_a_piece_of_the_conninfo(void **state)
{
    (void)state;
    char out[256];
    /* libpq quotes only the bad token of a malformed URI: found as the conninfo's password */
    ll_redact_secrets("invalid percent-encoded token: \"s3c%zzr3t\"", "postgresql://u:s3c%zzr3t@h/db", out,
                      sizeof out);
    assert_string_equal(out, "invalid percent-encoded token: \"***\"");
    /* the decoded and the unescaped forms too */
    ll_redact_secrets("user p@ss x", "postgresql://u:p%40ss@h/db", out, sizeof out);
    assert_string_equal(out, "user *** x");
    ll_redact_secrets("got it's a secret", "password='it\\'s a secret'", out, sizeof out);
    assert_string_equal(out, "got ***");
    /* a message quoting the whole URI, of a conninfo given as dbname */
    ll_redact_secrets("unexpected spaces found in \"postgresql://u:s3 cr3t@h/db\", use %20",
                      "dbname=postgresql://u:s3 cr3t@h/db", out, sizeof out);
    assert_string_equal(out, "unexpected spaces found in \"postgresql://u:***@h/db\", use %20");
    /* a plain message stays as it is; no conninfo at all is fine */
    ll_redact_secrets("connection refused", "host=h password=zz", out, sizeof out);
    assert_string_equal(out, "connection refused");
    ll_redact_secrets("password=x", NULL, out, sizeof out);
    assert_string_equal(out, "password=***");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keyword_form),
        cmocka_unit_test(test_quoted_and_escaped_values),
        cmocka_unit_test(test_uri_form),
        cmocka_unit_test(test_dbname_as_uri),
        cmocka_unit_test(test_cut_to_fit_never_shows_a_secret),
        cmocka_unit_test(test_messages_quoting_a_piece_of_the_conninfo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
