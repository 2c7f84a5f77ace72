/* The lesson answer checker (lessons/host/lsn_answer.c): reading numbers and
 * units, tolerance, and the near-miss messages for the classic mistakes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lsn_answer.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void test_parse_forms(void **state)
{
    (void)state;
    lsn_quantity q;
    char msg[256];
    assert_int_equal(lsn_answer_parse("23184", &q, msg, sizeof msg), 0);
    assert_true(q.number == 23184 && q.unit == NULL);
    assert_int_equal(lsn_answer_parse("  23,184 tokens ", &q, msg, sizeof msg), 0);
    assert_true(q.number == 23184);
    assert_string_equal(q.unit->name, "tokens");
    assert_int_equal(lsn_answer_parse("23.2k", &q, msg, sizeof msg), 0);
    assert_true(fabs(q.number - 23200) < 1e-9);
    assert_int_equal(lsn_answer_parse("407k tokens", &q, msg, sizeof msg), 0);
    assert_true(q.number == 407000);
    assert_string_equal(q.unit->name, "tokens");
    assert_int_equal(lsn_answer_parse("2.3e4 tok", &q, msg, sizeof msg), 0);
    assert_true(q.number == 23000);
    assert_int_equal(lsn_answer_parse("~2.83 GiB", &q, msg, sizeof msg), 0);
    assert_true(fabs(q.base - 2.83 * GIB) < 1);
    assert_int_equal(lsn_answer_parse("128 KiB/token", &q, msg, sizeof msg), 0);
    assert_true(q.base == 131072);
    assert_int_equal(lsn_answer_parse("131072 bytes per token", &q, msg, sizeof msg), 0);
    assert_true(q.base == 131072);
    assert_int_equal(lsn_answer_parse("40%", &q, msg, sizeof msg), 0);
    assert_true(fabs(q.base - 0.40) < 1e-12);
    assert_int_equal(lsn_answer_parse("1.3x", &q, msg, sizeof msg), 0);
    assert_true(q.base == 1.3);
    assert_int_equal(lsn_answer_parse("1.2 million", &q, msg, sizeof msg), 0);
    assert_true(q.number == 1.2e6);
    assert_int_equal(lsn_answer_parse("10.7 GB.", &q, msg, sizeof msg), 0);
    assert_true(q.base == 10.7e9);
}

static void test_parse_errors(void **state)
{
    (void)state;
    lsn_quantity q;
    char msg[256];
    assert_int_equal(lsn_answer_parse("lots", &q, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "could not read a number"));
    assert_int_equal(lsn_answer_parse("12 furlongs", &q, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "unknown unit 'furlongs'") ? msg : strstr(msg, "'furlongs'"));
    assert_int_equal(lsn_answer_parse("12 tokens and more", &q, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "not the rest"));
    assert_int_equal(lsn_answer_parse("", &q, msg, sizeof msg), -1);
}

static void test_tolerance(void **state)
{
    (void)state;
    char msg[512];
    double v;
    lsn_numq q = {.answer = 433888, .unit = "tokens", .rel_tol = 0.01};
    assert_int_equal(lsn_answer_check_number(&q, "433,888", &v, msg, sizeof msg), LSN_CHECK_CORRECT);
    assert_true(v == 433888);
    assert_int_equal(lsn_answer_check_number(&q, "434k tokens", &v, msg, sizeof msg), LSN_CHECK_CORRECT);
    assert_int_equal(lsn_answer_check_number(&q, "430000", &v, msg, sizeof msg), LSN_CHECK_CORRECT);  /* -0.9% */
    assert_int_equal(lsn_answer_check_number(&q, "420000", &v, msg, sizeof msg), LSN_CHECK_WRONG);    /* -3.2% */
    assert_non_null(strstr(msg, "too low"));
    assert_int_equal(lsn_answer_check_number(&q, "500000", &v, msg, sizeof msg), LSN_CHECK_WRONG);
    assert_non_null(strstr(msg, "too high"));
    assert_int_equal(lsn_answer_check_number(&q, "5e6", &v, msg, sizeof msg), LSN_CHECK_WRONG);
    assert_non_null(strstr(msg, "factor of ten"));
    /* an absolute tolerance wins when it is larger */
    lsn_numq a = {.answer = 2.83, .unit = "GiB", .rel_tol = 0.001, .abs_tol = 0.05};
    assert_int_equal(lsn_answer_check_number(&a, "2.8", &v, msg, sizeof msg), LSN_CHECK_CORRECT);
    assert_int_equal(lsn_answer_check_number(&a, "2.7 GiB", &v, msg, sizeof msg), LSN_CHECK_WRONG);
}

static void test_units_convert(void **state)
{
    (void)state;
    char msg[512];
    double v;
    /* 128 KiB per token asked in bytes: any byte unit that is the same amount is right */
    lsn_numq q = {.answer = 131072, .unit = "bytes"};
    assert_int_equal(lsn_answer_check_number(&q, "128 KiB", &v, msg, sizeof msg), LSN_CHECK_CORRECT);
    assert_true(v == 131072);
    assert_int_equal(lsn_answer_check_number(&q, "0.125 MiB", &v, msg, sizeof msg), LSN_CHECK_CORRECT);
    /* another dimension is never right, and the message says what was asked */
    assert_int_equal(lsn_answer_check_number(&q, "131072 tokens", &v, msg, sizeof msg), LSN_CHECK_WRONG);
    assert_non_null(strstr(msg, "amount of memory"));
    /* percent questions */
    lsn_numq p = {.answer = 90, .unit = "%"};
    assert_int_equal(lsn_answer_check_number(&p, "90%", &v, msg, sizeof msg), LSN_CHECK_CORRECT);
    assert_int_equal(lsn_answer_check_number(&p, "90", &v, msg, sizeof msg), LSN_CHECK_CORRECT);
    assert_int_equal(lsn_answer_check_number(&p, "0.9", &v, msg, sizeof msg), LSN_CHECK_NEAR_MISS);
    assert_non_null(strstr(msg, "percentage"));
}

static void test_gb_vs_gib(void **state)
{
    (void)state;
    char msg[512];
    double v;
    /* The pool is 2.83 GiB. "2.83 GB" is the right digits in the wrong unit. */
    lsn_numq q = {.answer = 2.83, .unit = "GiB"};
    assert_int_equal(lsn_answer_check_number(&q, "2.83 GB", &v, msg, sizeof msg), LSN_CHECK_NEAR_MISS);
    assert_non_null(strstr(msg, "right in GiB"));
    assert_non_null(strstr(msg, "10^9"));
    assert_non_null(strstr(msg, "2^30"));
    /* the same amount written in GB is right: 2.83 GiB = 3.04 GB */
    assert_int_equal(lsn_answer_check_number(&q, "3.04 GB", &v, msg, sizeof msg), LSN_CHECK_CORRECT);
    /* a 32K conversation on 70B is 10.7 GB (decimal): asked in GB, "10.7 GiB" is the mix-up */
    lsn_numq g = {.answer = 10.7, .unit = "GB", .rel_tol = 0.01};
    assert_int_equal(lsn_answer_check_number(&g, "10.7 GiB", &v, msg, sizeof msg), LSN_CHECK_NEAR_MISS);
    assert_non_null(strstr(msg, "right in GB"));
    /* off by a whole unit step (MiB for KiB) */
    lsn_numq k = {.answer = 128, .unit = "KiB"};
    assert_int_equal(lsn_answer_check_number(&k, "128 MiB", &v, msg, sizeof msg), LSN_CHECK_NEAR_MISS);
    assert_non_null(strstr(msg, "unit is off"));
}

static void test_lesson_near_misses(void **state)
{
    (void)state;
    char msg[512];
    double v;
    /* bytes per token of an 8B-shaped model: 2 x 32 x 8 x 128 x 2 = 131072 */
    const lsn_near near[] = {
        {65536, "That counts only the keys, or only the values."},
        {524288, "You used the 32 attention (query) heads."},
    };
    lsn_numq q = {.answer = 131072, .unit = "bytes", .nnear = 2, .near = near};
    assert_int_equal(lsn_answer_check_number(&q, "65536", &v, msg, sizeof msg), LSN_CHECK_NEAR_MISS);
    assert_string_equal(msg, "That counts only the keys, or only the values.");
    assert_int_equal(lsn_answer_check_number(&q, "512 KiB", &v, msg, sizeof msg), LSN_CHECK_NEAR_MISS);
    assert_non_null(strstr(msg, "attention (query) heads"));
    assert_int_equal(lsn_answer_check_number(&q, "300000", &v, msg, sizeof msg), LSN_CHECK_WRONG);
}

static void test_choice(void **state)
{
    (void)state;
    const char *choices[] = {"MHA (32 KV heads)", "GQA (8 KV heads)", "MQA (1 KV head)"};
    const char *why[] = {"Four times the bytes per token.", NULL, NULL};
    char msg[256];
    int picked;
    assert_int_equal(lsn_answer_check_choice(3, choices, 2, why, "b", &picked, msg, sizeof msg), LSN_CHECK_CORRECT);
    assert_int_equal(picked, 2);
    assert_int_equal(lsn_answer_check_choice(3, choices, 2, why, "B)", &picked, msg, sizeof msg), LSN_CHECK_CORRECT);
    assert_int_equal(lsn_answer_check_choice(3, choices, 2, why, "2", &picked, msg, sizeof msg), LSN_CHECK_CORRECT);
    assert_int_equal(lsn_answer_check_choice(3, choices, 2, why, "gqa (8 kv heads)", &picked, msg, sizeof msg),
                     LSN_CHECK_CORRECT);
    assert_int_equal(lsn_answer_check_choice(3, choices, 2, why, "GQA", &picked, msg, sizeof msg), LSN_CHECK_CORRECT);
    assert_int_equal(lsn_answer_check_choice(3, choices, 2, why, "a", &picked, msg, sizeof msg), LSN_CHECK_NEAR_MISS);
    assert_string_equal(msg, "Four times the bytes per token.");
    assert_int_equal(lsn_answer_check_choice(3, choices, 2, why, "3", &picked, msg, sizeof msg), LSN_CHECK_WRONG);
    assert_int_equal(lsn_answer_check_choice(3, choices, 2, why, "d", &picked, msg, sizeof msg),
                     LSN_CHECK_UNREADABLE);
    assert_int_equal(picked, 0);
    assert_int_equal(lsn_answer_check_choice(3, choices, 2, why, "", &picked, msg, sizeof msg), LSN_CHECK_UNREADABLE);
}

static void test_format(void **state)
{
    (void)state;
    char buf[64];
    assert_string_equal(lsn_answer_format(433888, "tokens", buf, sizeof buf), "433,888 tokens");
    assert_string_equal(lsn_answer_format(2.8299, "GiB", buf, sizeof buf), "2.83 GiB");
    assert_string_equal(lsn_answer_format(90, "%", buf, sizeof buf), "90%");
    assert_string_equal(lsn_answer_format(3.31, "x", buf, sizeof buf), "3.31x");
    assert_string_equal(lsn_answer_format(131072, "bytes", buf, sizeof buf), "131,072 bytes");
    assert_string_equal(lsn_answer_format(-1500, "", buf, sizeof buf), "-1,500");
    /* what format writes, parse reads back to the same value */
    lsn_quantity q;
    char msg[128];
    assert_int_equal(lsn_answer_parse(lsn_answer_format(216848, "tokens", buf, sizeof buf), &q, msg, sizeof msg), 0);
    assert_true(q.number == 216848);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_forms),  cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_tolerance),    cmocka_unit_test(test_units_convert),
        cmocka_unit_test(test_gb_vs_gib),    cmocka_unit_test(test_lesson_near_misses),
        cmocka_unit_test(test_choice),       cmocka_unit_test(test_format),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
