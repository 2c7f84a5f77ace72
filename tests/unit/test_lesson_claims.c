/* The claims lessons 12 to 19 make, checked on the engine directly with the
 * lessons' own configurations (vLLM plans from the catalogue) and traffic
 * shapes: contiguous slabs collapse concurrency at 32K (12), paged waste stays
 * under one block per sequence (13), the flags move the terms lesson 14 says
 * (14), prefix caching stores a shared prefix once (15), preemptions appear
 * with a bigger max-num-seqs and go away with a bigger pool (16), the two
 * metric scenarios separate (17), an fp8 cache doubles the pool (18), and
 * recomputing a prompt inside busy decode steps is free when short and
 * slower than a PCIe move when long (19). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kv_engine.h"
#include "kv_plan.h"
#include "kv_timemodel.h"
#include "test_helpers.h"

typedef struct fixture {
    kv_gpu_catalog cat;
    kv_model m8b;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    char err[1024];
    if (kv_gpu_catalog_load(test_assets_dir(), &f->cat, err, sizeof err) != 0)
        fail_msg("catalogue: %s", err);
    if (kv_model_load("meta-llama/Llama-3.1-8B-Instruct", test_assets_dir(), &f->m8b, err, sizeof err) != 0)
        fail_msg("model: %s", err);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    kv_gpu_catalog_free(&f->cat);
    free(f);
    return 0;
}

/* "flag", "value" pairs ending with NULL. */
static kv_engine *serve(fixture *f, const char *gpu, kv_plan *plan, ...)
{
    char err[1024];
    kv_args a;
    kv_args_init(&a);
    a.accounting = KV_ACCOUNTING_TEXTBOOK; /* the lessons' accounting */
    va_list ap;
    va_start(ap, plan);
    for (const char *n; (n = va_arg(ap, const char *));) {
        const char *v = va_arg(ap, const char *);
        if (kv_args_set(&a, n, v, err, sizeof err) < 0)
            fail_msg("--%s %s: %s", n, v, err);
    }
    va_end(ap);
    const kv_gpu *g = kv_gpu_find(&f->cat, gpu, err, sizeof err);
    assert_non_null(g);
    kv_engine *e = kv_engine_create_vllm(&f->m8b, g, &a, NULL, plan, err, sizeof err);
    if (!e)
        fail_msg("serve: %s", err);
    kv_engine_set_verify(e, 0);
    return e;
}

/* Deterministic lengths in [lo, hi] (a small LCG: the test needs spread, not quality). */
static uint32_t lcg = 12345;
static int32_t draw(int32_t lo, int32_t hi)
{
    lcg = lcg * 1103515245u + 12345u;
    return lo + (int32_t)((lcg >> 8) % (uint32_t)(hi - lo + 1));
}

static void submit(kv_engine *e, int32_t prompt, int32_t out, const char *prefix, int32_t prefix_len)
{
    kv_request_spec s = {0};
    s.prompt_tokens = prompt;
    s.output_tokens = out;
    s.prefix_id = prefix;
    s.prefix_tokens = prefix_len;
    s.arrival_s = -1;
    char err[512];
    if (kv_engine_submit(e, &s, err, sizeof err) < 0)
        fail_msg("submit: %s", err);
}

/* Lessons 12 and 13: 160 chats, prompts 400..2400, answers 100..500. */
static void submit_chats(kv_engine *e)
{
    lcg = 12345;
    for (int i = 0; i < 160; i++)
        submit(e, draw(400, 2400), draw(100, 500), NULL, 0);
}

static void step(kv_engine *e, int n)
{
    char err[512];
    for (int i = 0; i < n; i++)
        if (kv_engine_step(e, NULL, err, sizeof err) < 0)
            fail_msg("step: %s", err);
}

static void drain(kv_engine *e)
{
    for (int i = 0; i < 50000; i++) {
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        if (!info.num_running && !info.num_waiting)
            return;
        step(e, 1);
    }
    fail_msg("engine did not drain");
}

/* Step until requests wait and no free slab is left (contiguous mode). */
static void fill_slabs(kv_engine *e, int32_t slab_blocks)
{
    for (int i = 0; i < 400; i++) {
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        if (info.num_waiting > 0 && info.num_running > 0 && info.num_free_blocks < slab_blocks)
            return;
        step(e, 1);
    }
    fail_msg("slabs never filled");
}

static void test_contiguous_slabs_collapse(void **state)
{
    fixture *f = *state;
    static kv_plan p8, p32;
    char err[512];
    int32_t running[2];
    double empty[2];
    kv_plan *plans[2] = {&p8, &p32};
    const char *lens[2] = {"8192", "32768"};
    for (int k = 0; k < 2; k++) {
        kv_engine *e = serve(f, "h100-80gb", plans[k], "gpu-memory-utilization", "0.9", "max-model-len", lens[k],
                             NULL);
        assert_int_equal(kv_engine_set_mode(e, KV_MODE_CONTIGUOUS, err, sizeof err), 0);
        int32_t slab = (int32_t)((plans[k]->max_model_len + plans[k]->block_size - 1) / plans[k]->block_size);
        submit_chats(e);
        fill_slabs(e, slab);
        kv_engine_metrics m;
        kv_engine_get_metrics(e, &m);
        running[k] = m.num_requests_running;
        empty[k] = m.internal_fragmentation;
        assert_int_equal(running[k], (plans[k]->num_blocks - 1) / slab);
        kv_engine_destroy(e);
    }
    print_message("slabs: %d running at 8K (%.0f%% empty), %d at 32K (%.0f%% empty)\n", running[0],
                  empty[0] * 100, running[1], empty[1] * 100);
    /* Four times the slab, about a quarter of the requests. */
    assert_true(running[0] >= 3 * running[1]);
    assert_true(empty[0] > 0.6 && empty[1] > empty[0]);
}

static void test_paged_waste_under_one_block(void **state)
{
    fixture *f = *state;
    static kv_plan p;
    kv_engine *e = serve(f, "h100-80gb", &p, "gpu-memory-utilization", "0.9", "max-model-len", "32768", NULL);
    submit_chats(e);
    for (int i = 0; i < 400; i++) {
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        if (!info.num_waiting)
            break;
        step(e, 1);
    }
    step(e, 8);
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    print_message("paged: %d running, %.2f empty slots per request\n", m.num_requests_running,
                  (double)(m.reserved_tokens - m.used_tokens) / m.num_requests_running);
    assert_true(m.num_requests_running > (int32_t)((p.num_blocks - 1) / 2048));
    assert_true(m.reserved_tokens >= m.used_tokens);
    /* under one block of empty slots per running sequence */
    assert_true(m.reserved_tokens - m.used_tokens < (int64_t)m.num_requests_running * p.block_size);
    kv_engine_destroy(e);
}

static void test_flags_move_their_terms(void **state)
{
    fixture *f = *state;
    char err[1024];
    const kv_gpu *g = kv_gpu_find(&f->cat, "rtx-4090", err, sizeof err);
    static kv_plan base, p;
    kv_args a;
    kv_args_init(&a);
    a.accounting = KV_ACCOUNTING_TEXTBOOK; /* the lessons' accounting */
    kv_args_set(&a, "gpu-memory-utilization", "0.9", err, sizeof err);
    kv_args_set(&a, "max-model-len", "8192", err, sizeof err);
    kv_args_set(&a, "max-num-batched-tokens", "8192", err, sizeof err);
    assert_int_equal(kv_plan_compute(&f->m8b, g, &a, &base, err, sizeof err), 0);
    assert_true(base.starts);
    struct { const char *flag, *value; } cases[] = {
        {"quantization", "fp8"}, {"max-num-batched-tokens", "16384"}, {"enforce-eager", "true"},
        {"kv-cache-dtype", "fp8"}, {"max-num-seqs", "64"}, {"max-model-len", "32768"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kv_args b = a;
        assert_true(kv_args_set(&b, cases[i].flag, cases[i].value, err, sizeof err) >= 0);
        assert_int_equal(kv_plan_compute(&f->m8b, g, &b, &p, err, sizeof err), 0);
        if (!strcmp(cases[i].flag, "quantization"))
            assert_true(p.weights_bytes < 0.7 * base.weights_bytes);
        else if (!strcmp(cases[i].flag, "max-num-batched-tokens"))
            assert_true(p.activation_bytes > base.activation_bytes);
        else if (!strcmp(cases[i].flag, "enforce-eager"))
            assert_true(p.cudagraph_bytes == 0 && base.cudagraph_bytes > 0);
        else if (!strcmp(cases[i].flag, "kv-cache-dtype"))
            assert_true(p.kv_bytes_per_token * 2 == base.kv_bytes_per_token);
        else if (!strcmp(cases[i].flag, "max-num-seqs"))
            /* barely touches memory: the pool moves by under 1% */
            assert_true(p.available_kv_bytes > 0.99 * base.available_kv_bytes &&
                        p.available_kv_bytes < 1.01 * base.available_kv_bytes);
        else if (!strcmp(cases[i].flag, "max-model-len"))
            /* decides whether it starts, sets nothing aside */
            assert_true(!p.starts && p.available_kv_bytes == base.available_kv_bytes);
    }
}

/* Lesson 15: 16 questions behind a 12,000-token repository. Returns blocks
 * used once every question is running past its prompt; *rate = hit rate. */
static int32_t repository_questions(kv_engine *e, double *rate)
{
    lcg = 777;
    submit(e, draw(80, 300), draw(150, 300), "repository", 12000);
    for (int i = 0; i < 200; i++) {
        kv_request_view v;
        if (kv_engine_request(e, 0, &v) == 0 && v.num_computed_tokens >= 12000)
            break;
        step(e, 1);
    }
    for (int i = 1; i < 16; i++)
        submit(e, draw(80, 300), draw(150, 300), "repository", 12000);
    for (int i = 0; i < 400; i++) {
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        int done = info.num_waiting == 0 && info.num_running == 16;
        for (int64_t id = 0; done && id < 16; id++) {
            kv_request_view v;
            if (kv_engine_request(e, id, &v) != 0 || v.num_computed_tokens < v.prompt_tokens)
                done = 0;
        }
        if (done)
            break;
        step(e, 1);
    }
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_running, 16);
    *rate = m.prefix_cache_queries ? (double)m.prefix_cache_hits / (double)m.prefix_cache_queries : 0.0;
    return info.num_blocks - 1 - info.num_free_blocks;
}

static void test_prefix_stored_once(void **state)
{
    fixture *f = *state;
    static kv_plan p;
    double on_rate, off_rate;
    kv_engine *e = serve(f, "h100-80gb", &p, "gpu-memory-utilization", "0.9", "max-model-len", "32768", NULL);
    int32_t on = repository_questions(e, &on_rate);
    /* the repository's first block is held by all 16 */
    int32_t tbl[8];
    assert_true(kv_engine_block_table(e, 0, tbl, 8) > 0);
    kv_block_view b;
    assert_int_equal(kv_engine_block(e, tbl[0], &b), 0);
    assert_int_equal(b.ref_cnt, 16);
    kv_engine_destroy(e);
    e = serve(f, "h100-80gb", &p, "gpu-memory-utilization", "0.9", "max-model-len", "32768",
              "enable-prefix-caching", "false", NULL);
    int32_t off = repository_questions(e, &off_rate);
    kv_engine_destroy(e);
    print_message("prefix: on %d blocks, %.3f hit rate; off %d blocks, %.3f\n", on, on_rate, off, off_rate);
    assert_true(on_rate > 0.8);
    assert_true(off_rate < on_rate);
    assert_true(off > 8 * on);
}

/* Lesson 16: 24 code reviews of 1,200 + 400 tokens on example B. */
static int64_t reviews_preemptions(fixture *f, const char *seqs, const char *kv_dtype)
{
    static kv_plan p;
    kv_engine *e = serve(f, "rtx-4090", &p, "gpu-memory-utilization", "0.9", "max-model-len", "8192",
                         "max-num-batched-tokens", "8192", "max-num-seqs", seqs, "kv-cache-dtype", kv_dtype, NULL);
    for (int i = 0; i < 24; i++)
        submit(e, 1200, 400, NULL, 0);
    drain(e);
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    assert_int_equal(m.request_success_total, 24);
    if (m.num_preemptions_total > 0)
        assert_true(m.recomputed_tokens > 0);
    kv_engine_destroy(e);
    return m.num_preemptions_total;
}

static void test_preemption_and_sizing(void **state)
{
    fixture *f = *state;
    int64_t at4 = reviews_preemptions(f, "4", "auto");
    int64_t at16 = reviews_preemptions(f, "16", "auto");
    int64_t at24 = reviews_preemptions(f, "24", "auto");
    int64_t sized = reviews_preemptions(f, "16", "fp8");
    print_message("preemptions: %lld at 4 seqs, %lld at 16, %lld at 24, %lld at 16 with fp8 KV\n", (long long)at4,
                  (long long)at16, (long long)at24, (long long)sized);
    assert_int_equal(at4, 0);
    assert_true(at16 > 0);
    assert_true(at24 > at16);
    assert_int_equal(sized, 0);
}

static void test_usage_and_queue_separate(void **state)
{
    fixture *f = *state;
    static kv_plan p;
    kv_engine_metrics m;
    /* server 1: long documents on the 4090 */
    kv_engine *e = serve(f, "rtx-4090", &p, "gpu-memory-utilization", "0.9", "max-model-len", "8192",
                         "max-num-batched-tokens", "8192", NULL);
    lcg = 99;
    for (int i = 0; i < 40; i++)
        submit(e, draw(2500, 4000), draw(300, 600), NULL, 0);
    step(e, 60);
    kv_engine_get_metrics(e, &m);
    assert_true(m.kv_cache_usage_perc >= 0.9 && m.num_requests_waiting > 0);
    kv_engine_destroy(e);
    /* server 2: short chats on the H100 with max-num-seqs 8 */
    e = serve(f, "h100-80gb", &p, "gpu-memory-utilization", "0.9", "max-model-len", "8192", "max-num-seqs", "8", NULL);
    for (int i = 0; i < 80; i++)
        submit(e, draw(200, 800), draw(100, 300), NULL, 0);
    step(e, 60);
    kv_engine_get_metrics(e, &m);
    assert_true(m.kv_cache_usage_perc < 0.5 && m.num_requests_waiting > 0);
    assert_int_equal(m.num_requests_running, 8);
    kv_engine_destroy(e);
}

static void test_fp8_cache_doubles_pool(void **state)
{
    fixture *f = *state;
    static kv_plan bf, f8;
    kv_engine *e = serve(f, "rtx-4090", &bf, "gpu-memory-utilization", "0.9", "max-model-len", "8192",
                         "max-num-batched-tokens", "8192", NULL);
    kv_engine_destroy(e);
    e = serve(f, "rtx-4090", &f8, "gpu-memory-utilization", "0.9", "max-model-len", "8192",
              "max-num-batched-tokens", "8192", "kv-cache-dtype", "fp8", NULL);
    kv_engine_destroy(e);
    assert_true(f8.kv_bytes_per_token * 2 == bf.kv_bytes_per_token);
    double ratio = (double)f8.kv_cache_tokens / (double)bf.kv_cache_tokens;
    assert_true(ratio > 1.98 && ratio < 2.02);
}

/* Lesson 19: the time model on a busy H100 decode batch. */
static void test_move_vs_recompute(void **state)
{
    fixture *f = *state;
    static kv_plan p;
    kv_engine *e = serve(f, "h100-80gb", &p, "gpu-memory-utilization", "0.9", "max-model-len", "32768", NULL);
    const kv_engine_config *c = kv_engine_get_config(e);
    kv_time_params tp = {
        .active_params = c->active_params, .weight_bytes = c->weight_bytes,
        .kv_bytes_per_token = (double)p.kv_bytes_per_token, .peak_flops = c->peak_flops,
        .hbm_bytes_per_s = c->hbm_bytes_per_s, .link_bytes_per_s = c->link_bytes_per_s,
        .tp = 1, .num_layers = c->num_layers, .hidden_size = c->hidden_size,
    };
    assert_true(tp.peak_flops > 0 && tp.hbm_bytes_per_s > 0);
    kv_step_work decode = {0};
    for (int i = 0; i < 32; i++)
        kv_timemodel_add_chunk(&decode, 2500, 1);
    double base = kv_timemodel_step(&tp, &decode, NULL);
    /* recompute cost of a prompt inside decode steps (8,192-token budget) */
    char err[256];
    const kv_gpu *g = kv_gpu_find(&f->cat, "h100-80gb", err, sizeof err);
    assert_non_null(g);
    assert_true(g->pcie_gbps > 0 && g->nvlink_gbps > 0);
    double pcie = g->pcie_gbps * 1e9 / 2; /* one direction: the catalogue adds both */
    int32_t lens[2] = {256, 32768};
    double rec[2];
    for (int k = 0; k < 2; k++) {
        rec[k] = 0;
        for (int32_t s = 0; s < lens[k]; s += 8192 - 32) {
            kv_step_work w = decode;
            int32_t n = lens[k] - s < 8192 - 32 ? lens[k] - s : 8192 - 32;
            kv_timemodel_add_chunk(&w, s, n);
            rec[k] += kv_timemodel_step(&tp, &w, NULL) - base;
        }
    }
    print_message("recompute: %.3f ms for 256 tokens, %.1f ms for 32768\n", rec[0] * 1e3, rec[1] * 1e3);
    assert_true(rec[0] < 256 * p.kv_bytes_per_token / pcie);     /* short: recompute wins */
    assert_true(rec[1] > 32768.0 * p.kv_bytes_per_token / pcie); /* long: moving wins */
    kv_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_contiguous_slabs_collapse),
        cmocka_unit_test(test_paged_waste_under_one_block),
        cmocka_unit_test(test_flags_move_their_terms),
        cmocka_unit_test(test_prefix_stored_once),
        cmocka_unit_test(test_preemption_and_sizing),
        cmocka_unit_test(test_usage_and_queue_separate),
        cmocka_unit_test(test_fp8_cache_doubles_pool),
        cmocka_unit_test(test_move_vs_recompute),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
