#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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

static void test_read_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/kvlab-util-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], err[256];
    snprintf(path, sizeof path, "%s/f.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"a\": 1}", f);
    fclose(f);
    char *buf;
    size_t len;
    assert_int_equal(kv_read_file(path, 1024, &buf, &len, err, sizeof err), 0);
    assert_int_equal(len, 8);
    assert_string_equal(buf, "{\"a\": 1}");
    free(buf);
    /* over the cap */
    assert_int_equal(kv_read_file(path, 7, &buf, &len, err, sizeof err), -1);
    assert_null(buf);
    assert_non_null(strstr(err, "7-byte limit"));
    /* exactly the cap is fine */
    assert_int_equal(kv_read_file(path, 8, &buf, &len, err, sizeof err), 0);
    free(buf);
    /* a folder, a FIFO (must not block), a device, a missing file */
    assert_int_equal(kv_read_file(dir, 1024, &buf, &len, err, sizeof err), -1);
    assert_non_null(strstr(err, "is a folder"));
    char fifo[256];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(kv_read_file(fifo, 1024, &buf, &len, err, sizeof err), -1);
    assert_non_null(strstr(err, "FIFO"));
    assert_int_equal(kv_read_file("/dev/zero", 1024, &buf, &len, err, sizeof err), -1);
    assert_non_null(strstr(err, "a device"));
    snprintf(path, sizeof path, "%s/missing", dir);
    assert_int_equal(kv_read_file(path, 1024, &buf, &len, err, sizeof err), -1);
    assert_non_null(strstr(err, "no such file"));
    unlink(fifo);
    snprintf(path, sizeof path, "%s/f.json", dir);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cdiv),
        cmocka_unit_test(test_errf),
        cmocka_unit_test(test_fmt_thousands),
        cmocka_unit_test(test_read_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
