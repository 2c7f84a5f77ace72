/* kv_gpu: the catalogue, aliases, near matches for unknown names, custom cards. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "kv_gpu.h"
#include "kv_util.h"
#include "test_helpers.h"

static kv_gpu_catalog cat;

static int setup(void **state)
{
    (void)state;
    char err[256];
    return kv_gpu_catalog_load(test_assets_dir(), &cat, err, sizeof err);
}

static int teardown(void **state)
{
    (void)state;
    kv_gpu_catalog_free(&cat);
    return 0;
}

static void test_catalogue(void **state)
{
    (void)state;
    assert_true(cat.count >= 20);
    const kv_gpu *g = kv_gpu_find(&cat, "h100-80gb-sxm", NULL, 0);
    assert_non_null(g);
    assert_true(g->reported_total_bytes == 85045477376.0);
    assert_true(fabs(g->reported_total_gib - 79.20) < 1e-9);
    /* entries with only a GiB figure get bytes from it */
    g = kv_gpu_find(&cat, "h200-141gb-sxm", NULL, 0);
    assert_non_null(g);
    assert_true(fabs(g->reported_total_bytes / KV_GIB - 139.8) < 1e-9);
}

static void test_aliases(void **state)
{
    (void)state;
    struct { const char *name, *id; } al[] = {
        {"rtx-4090", "rtx4090-24gb"}, {"RTX 4090", "rtx4090-24gb"}, {"4090", "rtx4090-24gb"},
        {"h100-80gb", "h100-80gb-sxm"}, {"H100", "h100-80gb-sxm"}, {"h100_80gb_sxm", "h100-80gb-sxm"},
        {"a100", "a100-80gb-sxm"}, {"l4", "l4-24gb"}, {"mi300x", "mi300x-192gb"},
    };
    for (size_t i = 0; i < sizeof al / sizeof al[0]; i++) {
        const kv_gpu *g = kv_gpu_find(&cat, al[i].name, NULL, 0);
        assert_non_null(g);
        assert_string_equal(g->id, al[i].id);
    }
    /* every alias points at a catalogue id */
    for (int i = 0; i < kv_gpu_alias_count(); i++) {
        const char *a, *id;
        kv_gpu_alias_at(i, &a, &id);
        const kv_gpu *g = kv_gpu_find(&cat, a, NULL, 0);
        assert_non_null(g);
        assert_string_equal(g->id, id);
    }
}

static void test_unknown(void **state)
{
    (void)state;
    char err[512];
    assert_null(kv_gpu_find(&cat, "h100-90gb", err, sizeof err));
    assert_non_null(strstr(err, "unknown GPU 'h100-90gb'"));
    assert_non_null(strstr(err, "did you mean"));
    assert_non_null(strstr(err, "h100-80gb-sxm"));
    assert_null(kv_gpu_find(&cat, "rtx-4080", err, sizeof err));
    assert_non_null(strstr(err, "rtx4090-24gb"));
    assert_null(kv_gpu_find(&cat, "zzzzzzzzzzzz", err, sizeof err));
    assert_non_null(strstr(err, "--gpu-memory-gib"));
    assert_null(kv_gpu_find(&cat, "", err, sizeof err));
}

static void test_custom_and_parse_errors(void **state)
{
    (void)state;
    kv_gpu g;
    kv_gpu_custom(23.5, &g);
    assert_true(g.is_custom);
    assert_true(g.reported_total_bytes == 23.5 * KV_GIB);
    kv_gpu_catalog c;
    char err[256];
    assert_int_equal(kv_gpu_catalog_parse("{", 1, &c, err, sizeof err), KV_GPU_EPARSE);
    assert_int_equal(kv_gpu_catalog_parse("{}", 2, &c, err, sizeof err), KV_GPU_EPARSE);
    const char *noid = "[{\"reported_total_gib\": 10}]";
    assert_int_equal(kv_gpu_catalog_parse(noid, strlen(noid), &c, err, sizeof err), KV_GPU_EPARSE);
    assert_non_null(strstr(err, "\"id\""));
    const char *nosize = "[{\"id\": \"x\"}]";
    assert_int_equal(kv_gpu_catalog_parse(nosize, strlen(nosize), &c, err, sizeof err), KV_GPU_EPARSE);
    assert_non_null(strstr(err, "reported_total_gib"));
    assert_int_equal(kv_gpu_catalog_load("/nonexistent", &c, err, sizeof err), KV_GPU_ENOTFOUND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalogue),
        cmocka_unit_test(test_aliases),
        cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_custom_and_parse_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
