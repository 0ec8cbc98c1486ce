/* test_status.c -- status names and the thread-local error message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "core/internal.h"

static void test_names_are_distinct(void **state) {
    (void)state;
    for (int a = LA_OK; a <= LA_ENUMERIC; a++)
        for (int b = a + 1; b <= LA_ENUMERIC; b++)
            assert_string_not_equal(la_status_name((la_status)a), la_status_name((la_status)b));
    assert_string_equal(la_status_name(LA_ESHAPE), "LA_ESHAPE");
}

static void test_fail_sets_message(void **state) {
    (void)state;
    la_clear_error();
    assert_string_equal(la_errmsg(), "");
    assert_int_equal(la_fail(LA_ESHAPE, "q has %d heads, k has %d", 6, 4), LA_ESHAPE);
    assert_string_equal(la_errmsg(), "q has 6 heads, k has 4");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_are_distinct),
        cmocka_unit_test(test_fail_sets_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
