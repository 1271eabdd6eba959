/* test_rules_uuid5.c - RFC 4122 version-5 ids (docs/contract.md K§4). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "ll/rules.h"

#define NAMESPACE_DNS "6ba7b810-9dad-11d1-80b4-00c04fd430c8"
#define NAMESPACE_URL "6ba7b811-9dad-11d1-80b4-00c04fd430c8"

static void test_known_vectors(void **state)
{
    (void)state;
    char out[37];
    /* Python: uuid.uuid5(uuid.NAMESPACE_DNS, "python.org") */
    assert_int_equal(ll_uuid_v5(NAMESPACE_DNS, "python.org", out), 0);
    assert_string_equal(out, "886313e1-3b8a-5372-9b90-0c9aee199e5d");
    /* Python: uuid.uuid5(uuid.NAMESPACE_URL, "http://python.org/") */
    assert_int_equal(ll_uuid_v5(NAMESPACE_URL, "http://python.org/", out), 0);
    assert_string_equal(out, "4c565f0d-3f5a-5890-b41b-20cf47701c5e");
    /* namespace in upper case names the same namespace */
    assert_int_equal(ll_uuid_v5("6BA7B810-9DAD-11D1-80B4-00C04FD430C8", "python.org", out), 0);
    assert_string_equal(out, "886313e1-3b8a-5372-9b90-0c9aee199e5d");
}

static void test_loadledger_namespace(void **state)
{
    (void)state;
    char out[37];
    assert_true(ll_is_uuid(LL_UUID_NAMESPACE));
    assert_int_equal(strlen(LL_UUID_NAMESPACE), 36);
    assert_string_equal(LL_UUID_NAMESPACE, "7eaec1d8-c2fc-466e-8a95-850016384688");
    /* pinned values (Python uuid.uuid5): a changed namespace would change every derived id */
    assert_int_equal(ll_uuid_v5(LL_UUID_NAMESPACE, "", out), 0);
    assert_string_equal(out, "50bdcca5-a923-5654-8e5c-b999882f8dfc");
    assert_int_equal(
        ll_uuid_v5(LL_UUID_NAMESPACE, "dispatch:VALIDATE_RUN:4f1c0f7e-8a8e-4c37-9d54-3b7f0a1c2d3e", out), 0);
    assert_string_equal(out, "1efdbb53-7bd2-5fd1-8d10-82511eb960e8");
    assert_int_equal(ll_uuid_v5(LL_UUID_NAMESPACE, "h\xc3\xa9llo", out), 0); /* UTF-8 bytes */
    assert_string_equal(out, "9a703789-952b-5e7b-bb44-ca1ebcf1268d");
    assert_int_equal(out[14], '5');               /* version */
    assert_true(strchr("89ab", out[19]) != NULL); /* variant */
}

static void test_bad_arguments(void **state)
{
    (void)state;
    char out[37] = "untouched";
    assert_int_equal(ll_uuid_v5("not-a-uuid", "x", out), -1);
    assert_int_equal(ll_uuid_v5(NULL, "x", out), -1);
    assert_int_equal(ll_uuid_v5(LL_UUID_NAMESPACE, NULL, out), -1);
    assert_int_equal(ll_uuid_v5(LL_UUID_NAMESPACE, "x", NULL), -1);
    assert_string_equal(out, "untouched");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_vectors),
        cmocka_unit_test(test_loadledger_namespace),
        cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
