/* kv_safetensors: checkpoint bytes from shard headers, and the plan's
 * weights term taken from them (engine/kv_plan_terms.c disk_weights_bytes).
 * Every checkpoint here is written by the test: small synthetic shards whose
 * headers declare tensors (the data region is as long as the offsets say,
 * zeros). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv_args.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_plan.h"
#include "kv_safetensors.h"
#include "kv_util.h"
#include "test_helpers.h"

static char dir[256];

/* A shard named name declaring n tensors "t<i>" of dtype and bytes each. */
static void write_shard(const char *name, const char *prefix, int n, const char *dtype, long long bytes)
{
    char path[512], hdr[8192] = "{";
    long long off = 0;
    for (int i = 0; i < n; i++) {
        char e[160];
        snprintf(e, sizeof e, "%s\"%s%d\":{\"dtype\":\"%s\",\"shape\":[1],\"data_offsets\":[%lld,%lld]}", i ? "," : "",
                 prefix, i, dtype, off, off + bytes);
        strcat(hdr, e);
        off += bytes;
    }
    strcat(hdr, ",\"__metadata__\":{\"format\":\"pt\"}}");
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t len = strlen(hdr);
    unsigned char l8[8];
    for (int i = 0; i < 8; i++)
        l8[i] = (unsigned char)(len >> (8 * i));
    fwrite(l8, 1, 8, f);
    fwrite(hdr, 1, len, f);
    if (off > 0) { /* a sparse data region as long as the offsets say */
        fseek(f, off - 1, SEEK_CUR);
        fputc(0, f);
    }
    fclose(f);
}

static void write_text(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void rm_dir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/kvlab-st-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rm_dir();
    return 0;
}

/* The index names two shards; their headers add up per dtype. */
static void test_index_and_dtypes(void **state)
{
    (void)state;
    write_shard("model-00001-of-00002.safetensors", "a", 3, "BF16", 1000);
    write_shard("model-00002-of-00002.safetensors", "b", 2, "F32", 400);
    write_text("model.safetensors.index.json",
               "{\"metadata\":{\"total_size\":3800},\"weight_map\":{\"a0\":\"model-00001-of-00002.safetensors\","
               "\"a1\":\"model-00001-of-00002.safetensors\",\"b0\":\"model-00002-of-00002.safetensors\"}}");
    write_shard("stray.safetensors", "s", 1, "BF16", 777); /* not in the index: not read */
    kv_st_summary s;
    char err[256];
    assert_int_equal(kv_st_scan_dir(dir, &s, err, sizeof err), KV_ST_OK);
    assert_int_equal(s.shards, 2);
    assert_int_equal(s.tensors, 5);
    assert_int_equal(s.bytes, 3 * 1000 + 2 * 400);
    assert_int_equal(s.num_dtypes, 2);
    assert_string_equal(s.dtypes[0].name, "BF16");
    assert_int_equal(s.dtypes[0].elements, 1500);
    assert_string_equal(s.dtypes[1].name, "F32");
    assert_int_equal(s.dtypes[1].elements, 200);
    rm_dir();
    assert_non_null(mkdtemp(strcpy(dir, "/tmp/kvlab-st-XXXXXX")));
}

/* Without an index every *.safetensors counts; a folder without any is
 * not an error; a bad header is, with the shard's name. */
static void test_no_index_and_bad_headers(void **state)
{
    (void)state;
    kv_st_summary s;
    char err[256];
    assert_int_equal(kv_st_scan_dir(dir, &s, err, sizeof err), KV_ST_NONE);
    write_shard("model.safetensors", "w", 4, "F8_E4M3", 64);
    assert_int_equal(kv_st_scan_dir(dir, &s, err, sizeof err), KV_ST_OK);
    assert_int_equal(s.bytes, 256);
    /* a header length past the end of the file */
    char path[512];
    snprintf(path, sizeof path, "%s/bad.safetensors", dir);
    FILE *f = fopen(path, "wb");
    unsigned char l8[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0};
    fwrite(l8, 1, 8, f);
    fputs("{}", f);
    fclose(f);
    assert_int_equal(kv_st_scan_dir(dir, &s, err, sizeof err), KV_ST_EBAD);
    assert_non_null(strstr(err, "bad.safetensors: header length"));
    assert_int_equal(s.shards, 0);
    unlink(path);
    /* offsets past the data */
    write_text("short.safetensors", "");
    snprintf(path, sizeof path, "%s/short.safetensors", dir);
    f = fopen(path, "wb");
    const char *h = "{\"x\":{\"dtype\":\"BF16\",\"shape\":[9],\"data_offsets\":[0,999999]}}";
    uint64_t len = strlen(h);
    for (int i = 0; i < 8; i++)
        l8[i] = (unsigned char)(len >> (8 * i));
    fwrite(l8, 1, 8, f);
    fputs(h, f);
    fclose(f);
    assert_int_equal(kv_st_scan_dir(dir, &s, err, sizeof err), KV_ST_EBAD);
    assert_non_null(strstr(err, "short.safetensors: tensor 'x'"));
    unlink(path);
    /* an index naming a file outside the folder */
    write_text("model.safetensors.index.json", "{\"weight_map\":{\"w0\":\"../model.safetensors\"}}");
    assert_int_equal(kv_st_scan_dir(dir, &s, err, sizeof err), KV_ST_EBAD);
    assert_non_null(strstr(err, "names no plain file"));
    rm_dir();
    assert_non_null(mkdtemp(strcpy(dir, "/tmp/kvlab-st-XXXXXX")));
}

/* A folder with config.json and shards: serve sizes the weights from the
 * headers (floats as the model dtype: an F32 checkpoint in bfloat16 is
 * half), divided by tp, plus the RoPE cache. */
static void test_plan_uses_disk(void **state)
{
    (void)state;
    size_t n = 0;
    char *cfg = test_read_file("assets/models/Qwen/Qwen3-0.6B/config.json", &n);
    assert_non_null(cfg);
    write_text("config.json", cfg);
    free(cfg);
    write_shard("model.safetensors", "t", 10, "F32", 100000000); /* 1e9 bytes of F32 */
    kv_model m;
    char err[512];
    assert_int_equal(kv_model_load(dir, test_assets_dir(), &m, err, sizeof err), KV_MODEL_OK);
    assert_int_equal(m.disk.bytes, 1000000000);
    kv_gpu_catalog cat;
    assert_int_equal(kv_gpu_catalog_load(test_assets_dir(), &cat, err, sizeof err), KV_GPU_OK);
    const kv_gpu *g = kv_gpu_find(&cat, "h100-80gb", err, sizeof err);
    static kv_plan p, q;
    kv_args a;
    kv_args_init(&a);
    assert_int_equal(kv_args_set(&a, "max-model-len", "4096", err, sizeof err), 0);
    assert_int_equal(kv_plan_compute(&m, g, &a, &p, err, sizeof err), 0);
    double rope = (double)m.max_position_embeddings * m.head_dim * 2;
    assert_true(fabs(p.weights_bytes - (5e8 + rope)) < 1.0); /* 2.5e8 floats x 2 bytes */
    assert_non_null(strstr(p.terms[KV_PLAN_TERM_WEIGHTS].how, "1 safetensors shard"));
    assert_int_equal(kv_args_set(&a, "tensor-parallel-size", "2", err, sizeof err), 0);
    assert_int_equal(kv_plan_compute(&m, g, &a, &q, err, sizeof err), 0);
    assert_true(fabs(q.weights_bytes - (2.5e8 + rope)) < 1.0);
    /* --quantization fp8 changes the format: the tally, not the file */
    kv_args b;
    kv_args_init(&b);
    assert_int_equal(kv_args_set(&b, "quantization", "fp8", err, sizeof err), 0);
    assert_int_equal(kv_plan_compute(&m, g, &b, &q, err, sizeof err), 0);
    assert_null(strstr(q.terms[KV_PLAN_TERM_WEIGHTS].how, "safetensors"));
    /* the textbook keeps its tally */
    assert_int_equal(kv_args_set(&b, "accounting", "textbook", err, sizeof err), 0);
    assert_int_equal(kv_args_set(&b, "quantization", "none", err, sizeof err), 0);
    assert_int_equal(kv_plan_compute(&m, g, &b, &q, err, sizeof err), 0);
    assert_null(strstr(q.terms[KV_PLAN_TERM_WEIGHTS].how, "safetensors"));
    kv_gpu_catalog_free(&cat);
    rm_dir();
    assert_non_null(mkdtemp(strcpy(dir, "/tmp/kvlab-st-XXXXXX")));
}

/* Quantized formats read from the checkpoint folder: ModelOpt's
 * hf_quant_config.json beside config.json (FP8, NVFP4), fbgemm_fp8 with
 * modules_to_not_convert; and vLLM's minimum compute capability for them. */
static void test_quant_formats(void **state)
{
    (void)state;
    size_t n = 0;
    char *cfg = test_read_file("assets/models/meta-llama/Llama-3.1-8B-Instruct/config.json", &n);
    assert_non_null(cfg);
    write_text("config.json", cfg);
    kv_model m16, m;
    char err[512];
    assert_int_equal(kv_model_load(dir, test_assets_dir(), &m16, err, sizeof err), KV_MODEL_OK);
    assert_int_equal(m16.quant, KV_QUANT_NONE);
    kv_gpu_catalog cat;
    assert_int_equal(kv_gpu_catalog_load(test_assets_dir(), &cat, err, sizeof err), KV_GPU_OK);
    const kv_gpu *h100 = kv_gpu_find(&cat, "h100-80gb", err, sizeof err);
    const kv_gpu *a100 = kv_gpu_find(&cat, "a100-80gb", err, sizeof err);
    static kv_plan p16, p;
    kv_args a;
    kv_args_init(&a);
    assert_int_equal(kv_args_set(&a, "max-model-len", "4096", err, sizeof err), 0);
    assert_int_equal(kv_plan_compute(&m16, h100, &a, &p16, err, sizeof err), 0);
    double lin = (double)m16.params_linear;

    /* ModelOpt FP8: one byte per linear weight */
    write_text("hf_quant_config.json", "{\"producer\":{\"name\":\"modelopt\"},\"quantization\":{\"quant_algo\":"
                                       "\"FP8\",\"kv_cache_quant_algo\":\"FP8\",\"exclude_modules\":[\"lm_head\"]}}");
    assert_int_equal(kv_model_load(dir, test_assets_dir(), &m, err, sizeof err), KV_MODEL_OK);
    assert_int_equal(m.quant, KV_QUANT_FP8);
    assert_string_equal(m.quant_method, "modelopt");
    assert_int_equal(m.quant_unconverted_params, 0); /* lm_head is 16-bit anyway */
    assert_int_equal(kv_plan_compute(&m, h100, &a, &p, err, sizeof err), 0);
    assert_true(fabs((p16.weights_bytes - p.weights_bytes) - lin) < 1.0);
    /* vLLM 0.19's ModelOpt FP8 needs compute capability 8.9; 0.27's 8.0 */
    kv_args old = a;
    assert_int_equal(kv_args_set(&old, "vllm-version", "0.19.0", err, sizeof err), 0);
    assert_int_equal(kv_plan_compute(&m, a100, &old, &p, err, sizeof err), 0);
    assert_int_equal(p.error_kind, KV_PLAN_ERR_QUANT_CAPABILITY);
    assert_string_equal(p.error, "The quantization method modelopt is not supported for the current GPU. Minimum "
                                 "capability: 89. Current capability: 80.");
    assert_int_equal(kv_args_set(&old, "vllm-version", "0.27.0", err, sizeof err), 0);
    assert_int_equal(kv_plan_compute(&m, a100, &old, &p, err, sizeof err), 0);
    assert_int_not_equal(p.error_kind, KV_PLAN_ERR_QUANT_CAPABILITY);

    /* ModelOpt NVFP4: 4.5 bits per linear weight */
    write_text("hf_quant_config.json", "{\"quantization\":{\"quant_algo\":\"NVFP4\",\"group_size\":16}}");
    assert_int_equal(kv_model_load(dir, test_assets_dir(), &m, err, sizeof err), KV_MODEL_OK);
    assert_int_equal(m.quant, KV_QUANT_NVFP4);
    assert_string_equal(m.quant_method, "modelopt_fp4");
    assert_int_equal(kv_plan_compute(&m, h100, &a, &p, err, sizeof err), 0);
    assert_true(fabs((p16.weights_bytes - p.weights_bytes) - lin * (2.0 - 0.5625)) < 1.0);
    char path[512];
    snprintf(path, sizeof path, "%s/hf_quant_config.json", dir);
    unlink(path);

    /* fbgemm_fp8: fp8, but the modules it names stay 16-bit (here layer 0's MLP) */
    char *q = malloc(n + 400);
    assert_non_null(q);
    char *brace = strrchr(cfg, '}');
    assert_non_null(brace);
    *brace = '\0';
    snprintf(q, n + 400, "%s,\"quantization_config\":{\"quant_method\":\"fbgemm_fp8\",\"activation_scale_ub\":1200.0,"
                         "\"modules_to_not_convert\":[\"model.layers.0.mlp.gate_proj\",\"model.layers.0.mlp.up_proj\","
                         "\"model.layers.0.mlp.down_proj\",\"lm_head\"]}}", cfg);
    write_text("config.json", q);
    free(q);
    assert_int_equal(kv_model_load(dir, test_assets_dir(), &m, err, sizeof err), KV_MODEL_OK);
    assert_int_equal(m.quant, KV_QUANT_FP8);
    double mlp0 = 3.0 * m.hidden_size * (double)m.intermediate_size;
    assert_int_equal(m.quant_unconverted_params, (int64_t)mlp0);
    assert_int_equal(kv_plan_compute(&m, h100, &a, &p, err, sizeof err), 0);
    assert_true(fabs((p16.weights_bytes - p.weights_bytes) - (lin - mlp0)) < 1.0);
    free(cfg);
    kv_gpu_catalog_free(&cat);
    rm_dir();
    assert_non_null(mkdtemp(strcpy(dir, "/tmp/kvlab-st-XXXXXX")));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_and_dtypes),
        cmocka_unit_test(test_no_index_and_bad_headers),
        cmocka_unit_test(test_plan_uses_disk),
        cmocka_unit_test(test_quant_formats),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
