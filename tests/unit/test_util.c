#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "kv_util.h"

static void test_cdiv(void **state)
{
    (void)state;
    assert_int_equal(kv_cdiv(17, 16), 2);
    assert_int_equal(kv_cdiv(16, 16), 1);
    assert_int_equal(kv_cdiv(131072, 16), 8192);
}

static void test_errf(void **state)
{
    (void)state;
    char buf[32];
    assert_int_equal(kv_errf(buf, sizeof buf, -7, "bad %s %d", "x", 3), -7);
    assert_string_equal(buf, "bad x 3");
    assert_int_equal(kv_errf(NULL, 0, -1, "ignored"), -1);
}

static void test_fmt_thousands(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(kv_fmt_thousands(b, sizeof b, 0), "0");
    assert_string_equal(kv_fmt_thousands(b, sizeof b, 999), "999");
    assert_string_equal(kv_fmt_thousands(b, sizeof b, 23184), "23,184");
    assert_string_equal(kv_fmt_thousands(b, sizeof b, -1234567), "-1,234,567");
    assert_string_equal(kv_fmt_thousands(b, sizeof b, INT64_MIN), "-9,223,372,036,854,775,808");
    char small[5];
    assert_string_equal(kv_fmt_thousands(small, sizeof small, 123456), "123,"); /* cut, still terminated */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cdiv),
        cmocka_unit_test(test_errf),
        cmocka_unit_test(test_fmt_thousands),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
