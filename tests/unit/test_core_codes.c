/* test_core_codes.c - the catalogue of codes (codes.h) expands into a well-formed C table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

#include "ll/codes.h"

typedef struct code_row {
    const char *name, *section, *meaning;
    unsigned where;
} code_row;

#define ROW(name, where, section, meaning) {#name, section, meaning, where},
static const code_row ROWS[] = {LL_CODES(ROW)};
#undef ROW
#define N_ROWS (sizeof ROWS / sizeof ROWS[0])

/* Every name is all upper case (a code) or all lower case (a verify invariant), and unique. */
static void test_names_unique_and_one_case(void **state)
{
    (void)state;
    assert_true(N_ROWS >= 50);
    for (size_t i = 0; i < N_ROWS; i++) {
        const char *n = ROWS[i].name;
        bool up = isupper((unsigned char)n[0]);
        for (const char *p = n; *p; p++)
            assert_true(*p == '_' || isdigit((unsigned char)*p) ||
                        (up ? isupper((unsigned char)*p) : islower((unsigned char)*p)));
        for (size_t j = i + 1; j < N_ROWS; j++)
            assert_string_not_equal(n, ROWS[j].name);
    }
}

/* Every entry says where it comes from (known bits only), its section and its meaning. */
static void test_where_section_meaning(void **state)
{
    (void)state;
    const unsigned all = LL_CW_OUTCOME | LL_CW_REPLY | LL_CW_DEAD | LL_CW_EVENT | LL_CW_ERROR | LL_CW_LOADCTL;
    for (size_t i = 0; i < N_ROWS; i++) {
        assert_true(ROWS[i].where != 0);
        assert_int_equal(ROWS[i].where & ~all, 0);
        assert_true(strchr("CKDL", ROWS[i].section[0]) != NULL);
        assert_true(strlen(ROWS[i].meaning) > 5);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_unique_and_one_case),
        cmocka_unit_test(test_where_section_meaning),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
