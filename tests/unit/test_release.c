/* kv_release: the release table is ordered and contiguous, a version finds
 * its row, bad versions are refused with one line, card classes and the V2
 * runner rule follow arg_utils.py / config/vllm.py of each release, and
 * every template of every row fills without an unknown field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "kv_release.h"

static void test_rows_ordered(void **state)
{
    (void)state;
    int n = kv_release_count();
    assert_true(n >= 10);
    assert_string_equal(kv_release_at(0)->first, "0.6.4");
    for (int i = 0; i < n; i++) {
        const kv_release *r = kv_release_at(i);
        assert_non_null(r->mem);
        assert_non_null(r->text);
        assert_non_null(r->sched);
        assert_non_null(r->source);
        assert_true(kv_release_compare(r->first, r->last) <= 0);
        if (i + 1 < n)
            assert_true(kv_release_compare(r->last, kv_release_at(i + 1)->first) < 0);
    }
    assert_ptr_equal(kv_release_at(n), NULL);
    assert_ptr_equal(kv_release_newest(), kv_release_at(n - 1));
    assert_true(kv_release_textbook() != kv_release_newest());
}

static void test_find(void **state)
{
    (void)state;
    char err[256];
    const kv_release *r = kv_release_find("0.11.0", err, sizeof err);
    assert_non_null(r);
    assert_true(kv_release_compare(r->first, "0.11.0") <= 0 && kv_release_compare("0.11.0", r->last) <= 0);
    assert_ptr_equal(kv_release_find("0.11", err, sizeof err), r); /* X.Y = X.Y.0 */
    assert_ptr_equal(kv_release_find("v0.11.0", err, sizeof err), r);
    assert_ptr_equal(kv_release_find("0.6.4.post1", err, sizeof err), kv_release_at(0));
    assert_ptr_equal(kv_release_find("0.6.4.dev26+g92d86da2", err, sizeof err), kv_release_at(0));
    assert_ptr_equal(kv_release_find(NULL, err, sizeof err), kv_release_newest());
    assert_ptr_equal(kv_release_find("", err, sizeof err), kv_release_newest());
    assert_ptr_equal(kv_release_find("0.33.0", err, sizeof err), kv_release_newest());
    /* 0.10.1.1 is a 4-part release, in the same row as 0.10.1 */
    assert_ptr_equal(kv_release_find("0.10.1.1", err, sizeof err), kv_release_find("0.10.1", err, sizeof err));
    assert_true(kv_release_find("0.10.1.1", err, sizeof err) != kv_release_find("0.11.1", err, sizeof err));
    assert_int_equal(kv_release_find("0.6.5", err, sizeof err)->mem->budget, KV_BUDGET_PROFILED);
    assert_int_equal(kv_release_find("0.6.4", err, sizeof err)->mem->budget, KV_BUDGET_PEAK);
    assert_int_equal(kv_release_find("0.8.5", err, sizeof err)->mem->engine_v1, 1);
    assert_int_equal(kv_release_find("0.7.3", err, sizeof err)->mem->engine_v1, 0);

    const char *bad[] = {"0.6.3", "0.5", "0.34", "1.0.0", "abc", "0.x", "0.11.0.0.1", "0..1", "11", "0.11-1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_ptr_equal(kv_release_find(bad[i], err, sizeof err), NULL);
        assert_non_null(strstr(err, "--vllm-version"));
        assert_null(strchr(err, '\n'));
    }
    kv_release_find("0.34.0", err, sizeof err);
    assert_non_null(strstr(err, "0.33.0"));
}

static void test_compare(void **state)
{
    (void)state;
    assert_int_equal(kv_release_compare("0.6.4", "0.6.4.post1"), -1);
    assert_int_equal(kv_release_compare("0.10.1.1", "0.10.1"), 1);
    assert_int_equal(kv_release_compare("0.9.2", "0.10.0"), -1);
    assert_int_equal(kv_release_compare("0.11", "0.11.0"), 0);
    assert_int_equal(kv_release_compare("0.33.0", "0.29.0"), 1);
}

static void test_defaults(void **state)
{
    (void)state;
    char err[128];
    /* config/cache.py: 0.9 up to 0.19, 0.92 from 0.20 */
    assert_true(kv_release_find("0.19.0", err, sizeof err)->mem->default_gpu_memory_utilization == 0.90);
    assert_true(kv_release_find("0.20.0", err, sizeof err)->mem->default_gpu_memory_utilization == 0.92);
    assert_int_equal(kv_release_find("0.19.0", err, sizeof err)->mem->cudagraph_estimate, 0);
    assert_int_equal(kv_release_find("0.20.0", err, sizeof err)->mem->cudagraph_estimate, 1);
    assert_int_equal(kv_release_find("0.28.0", err, sizeof err)->mem->check_reserves_null_block, 0);
    assert_int_equal(kv_release_find("0.29.0", err, sizeof err)->mem->check_reserves_null_block, 1);

    int64_t s, t;
    const kv_release *r011 = kv_release_find("0.11.0", err, sizeof err);
    kv_release_card_defaults(r011, 79.2, "NVIDIA H100 80GB HBM3", &s, &t);
    assert_int_equal(s, 1024);
    assert_int_equal(t, 8192);
    kv_release_card_defaults(r011, 79.2, "NVIDIA A100-SXM4-80GB", &s, &t);
    assert_int_equal(s, 256);
    assert_int_equal(t, 2048);
    kv_release_card_defaults(kv_release_find("0.8.5", err, sizeof err), 79.2, "NVIDIA A100-SXM4-80GB", &s, &t);
    assert_int_equal(s, 1024);
    kv_release_card_defaults(kv_release_find("0.8.0", err, sizeof err), 44.4, "NVIDIA L40S", &s, &t);
    assert_int_equal(s, 1024);
    assert_int_equal(t, 2048);
    kv_release_card_defaults(kv_release_find("0.8.0", err, sizeof err), 139.8, "NVIDIA H200", &s, &t);
    assert_int_equal(t, 8192);
    kv_release_card_defaults(kv_release_find("0.8.4", err, sizeof err), 44.4, "NVIDIA L40S", &s, &t);
    assert_int_equal(s, 256);
    kv_release_card_defaults(kv_release_find("0.29.0", err, sizeof err), 178.0, "NVIDIA B200", &s, &t);
    assert_int_equal(t, 16384);
    kv_release_card_defaults(kv_release_find("0.11.0", err, sizeof err), 178.0, "NVIDIA B200", &s, &t);
    assert_int_equal(t, 8192);
    kv_release_card_defaults(kv_release_find("0.6.6", err, sizeof err), 79.2, "NVIDIA H100", &s, &t);
    assert_int_equal(s, 256);
    assert_int_equal(t, 0); /* V0's SchedulerConfig rule */
}

static void test_v2_runner(void **state)
{
    (void)state;
    char err[128];
    assert_false(kv_release_uses_v2_runner(kv_release_find("0.21.0", err, sizeof err), "Qwen3ForCausalLM", 0, 0));
    assert_true(kv_release_uses_v2_runner(kv_release_find("0.22.0", err, sizeof err), "Qwen3ForCausalLM", 0, 0));
    assert_false(kv_release_uses_v2_runner(kv_release_find("0.22.0", err, sizeof err), "LlamaForCausalLM", 0, 0));
    assert_false(kv_release_uses_v2_runner(kv_release_find("0.23.0", err, sizeof err), "LlamaForCausalLM", 0, 1));
    assert_true(kv_release_uses_v2_runner(kv_release_find("0.24.0", err, sizeof err), "LlamaForCausalLM", 0, 1));
    assert_true(kv_release_uses_v2_runner(kv_release_find("0.25.1", err, sizeof err), "Gemma3ForCausalLM", 0, 0));
    assert_false(kv_release_uses_v2_runner(kv_release_find("0.25.1", err, sizeof err), "MixtralForCausalLM", 1, 0));
    assert_true(kv_release_uses_v2_runner(kv_release_find("0.29.0", err, sizeof err), "MixtralForCausalLM", 1, 0));
    /* MoE architectures each release's DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES adds. */
    assert_false(kv_release_uses_v2_runner(kv_release_find("0.25.1", err, sizeof err), "InklingForCausalLM", 1, 0));
    assert_true(kv_release_uses_v2_runner(kv_release_find("0.26.0", err, sizeof err), "InklingForCausalLM", 1, 0));
    assert_false(kv_release_uses_v2_runner(kv_release_find("0.26.0", err, sizeof err),
                                           "KimiK3ForConditionalGeneration", 1, 0));
    assert_true(kv_release_uses_v2_runner(kv_release_find("0.27.0", err, sizeof err),
                                          "KimiK3ForConditionalGeneration", 1, 0));
    assert_false(kv_release_uses_v2_runner(kv_release_find("0.27.0", err, sizeof err), "DeepseekV4ForCausalLM", 1, 0));
    assert_true(kv_release_uses_v2_runner(kv_release_find("0.28.0", err, sizeof err), "DeepseekV4ForCausalLM", 1, 0));
    assert_true(kv_release_uses_v2_runner(kv_release_find("0.28.0", err, sizeof err), "LongcatFlashNgramForCausalLM", 1, 0));
}

/* The start-up lines that differ by runner and release, as each release's
 * source words them (tests/unit/test_plan.c test_release_log_lines checks
 * which a plan prints). */
static void test_runner_lines(void **state)
{
    (void)state;
    char err[256];
    for (int i = 0; i < kv_release_count(); i++) {
        const kv_release *r = kv_release_at(i);
        const kv_release_text *t = r->text;
        int v018 = kv_release_compare(r->first, "0.18.0") >= 0, v020 = kv_release_compare(r->first, "0.20.0") >= 0;
        /* Runner V2 never logs its estimate (v1/worker/gpu/cudagraph_utils.py);
         * runner V1 takes one from 0.18 (gpu_worker.py determine_available_memory)
         * and logs it (gpu_model_runner.py), 0.29 on included. */
        assert_null(t->cudagraph_estimate_v2);
        assert_int_equal(r->mem->cudagraph_profiled, v018);
        assert_int_equal(t->cudagraph_estimate != NULL, v018);
        if (v018)
            assert_string_equal(t->cudagraph_estimate, "Estimated CUDA graph memory: {cudagraph:.2f} GiB total");
        /* gpu_worker.py's utilization line: 0.18-0.19 with the estimate off by default, 0.20 on */
        assert_int_equal(t->cudagraph_util != NULL, v018);
        if (!v018)
            continue;
        if (!v020)
            assert_string_equal(t->cudagraph_util,
                                "In v0.19, CUDA graph memory profiling will be enabled by default "
                                "(VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1), which more accurately accounts for "
                                "CUDA graph memory during KV cache allocation. To try it now, set "
                                "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 and increase --gpu-memory-utilization "
                                "from {util:.4f} to {suggested_util:.4f} to maintain the same effective KV cache "
                                "size.");
        else
            assert_string_equal(t->cudagraph_util,
                                "CUDA graph memory profiling is enabled (default since v0.21.0). The current "
                                "--gpu-memory-utilization={util:.4f} is equivalent to "
                                "--gpu-memory-utilization={equiv_util:.4f} without CUDA graph memory profiling. To "
                                "maintain the same effective KV cache size as before, increase "
                                "--gpu-memory-utilization to {suggested_util:.4f}. To disable, set "
                                "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.");
    }
    /* Runner V2's weights line (v1/worker/gpu/model_runner.py): "GiB and" up to 0.27, "GiB memory and" from 0.28 */
    const char *no_memory[] = {"0.22.0", "0.23.0", "0.24.0", "0.25.0", "0.26.0", "0.27.0"};
    for (size_t i = 0; i < sizeof no_memory / sizeof no_memory[0]; i++) {
        const kv_release_text *t = kv_release_find(no_memory[i], err, sizeof err)->text;
        assert_string_equal(t->weights_v2, "Model loading took {weights:gib} GiB");
        assert_string_equal(t->weights, "Model loading took {weights:gib} GiB memory");
    }
    const char *memory[] = {"0.28.0", "0.29.0", "0.31.0", "0.33.0"};
    for (size_t i = 0; i < sizeof memory / sizeof memory[0]; i++)
        assert_string_equal(kv_release_find(memory[i], err, sizeof err)->text->weights_v2,
                            "Model loading took {weights:gib} GiB memory");
    /* The default-on FlashInfer sampler (0.21 on) runs on compute capability
     * 7.5-12.1, from 0.24 8.0-12.1 (flashinfer.py supports_compute_capability),
     * and says so when it falls back (topk_topp_sampler.py, reworded in 0.23). */
    for (int i = 0; i < kv_release_count(); i++) {
        const kv_release *r = kv_release_at(i);
        if (kv_release_compare(r->first, "0.21.0") < 0) {
            assert_int_equal(r->mem->sampler_flashinfer, 0);
            continue;
        }
        int v023 = kv_release_compare(r->first, "0.23.0") >= 0, v024 = kv_release_compare(r->first, "0.24.0") >= 0;
        assert_int_equal(r->mem->sampler_flashinfer, 1);
        assert_int_equal(r->mem->sampler_fi_cc[0], v024 ? 80 : 75);
        assert_int_equal(r->mem->sampler_fi_cc[1], 121);
        assert_non_null(r->text->warn_fi_sampler);
        assert_string_equal(r->text->warn_fi_sampler,
                            v023 ? "FlashInfer top-p/top-k sampling unavailable: unsupported compute capability {cc}; "
                                   "falling back. Set VLLM_USE_FLASHINFER_SAMPLER=0 to silence."
                                 : "FlashInfer top-p/top-k sampling not supported on compute capability {cc}; falling "
                                   "back to PyTorch-native sampler. Set VLLM_USE_FLASHINFER_SAMPLER=0 to silence.");
    }
    /* the course keeps its own lines: no utilization advice */
    assert_null(kv_release_textbook()->text->cudagraph_util);
    assert_null(kv_release_textbook()->text->weights_v2);
}

static void test_format(void **state)
{
    (void)state;
    char out[256];
    kv_release_arg a[] = {{"kv", 2.8325 * 1073741824.0 / 1073741824.0, NULL},
                          {"n", 23184, NULL},
                          {"u", 0.9, NULL},
                          {"w", 16.0, NULL},
                          {"s", 0, "text"}};
    kv_release_format(out, sizeof out, "{kv:.2f}|{kv:.4f}|{kv:gib}|{w:gib}|{n:,}|{n:d}|{u:g}|{s}|{zz}|{kv:q}", a, 5);
    assert_string_equal(out, "2.83|2.8325|2.83|16.0|23,184|23184|0.9|text|{zz?}|{kv:q?}");
    assert_int_equal(kv_release_format(out, 5, "abcdefgh", NULL, 0), 4);
    assert_string_equal(out, "abcd");
}

/* Every template of every row fills completely with the fields kv_plan
 * passes (a misspelt field would print "{name?}" on the learner's screen). */
static void test_templates_fill(void **state)
{
    (void)state;
    kv_release_arg a[] = {
        {"weights", 14.96, NULL}, {"total", 23.5, NULL}, {"util", 0.9, NULL}, {"budget", 21.15, NULL},
        {"initial", 15.3, NULL}, {"peak", 17.0, NULL}, {"post", 15.3, NULL}, {"non_torch", 0.35, NULL},
        {"activation", 2.16, NULL}, {"kv", 2.83, NULL}, {"tokens", 23184, NULL}, {"blocks", 1449, NULL},
        {"cpu_blocks", 2048, NULL}, {"max_model_len", 8192, NULL}, {"concurrency", 2.83, NULL}, {"needed", 16.0, NULL},
        {"estimated", 23184, NULL}, {"estimated_clause", 0, "(clause)"}, {"free", 20.0, NULL}, {"requested", 21.0, NULL},
        {"num_reqs", 1024, NULL}, {"cudagraph", 0.6, NULL}, {"equiv_util", 0.89, NULL}, {"suggested_util", 0.91, NULL},
        {"cc", 0, "7.0"},
    };
    int na = (int)(sizeof a / sizeof a[0]);
    for (int i = -1; i < kv_release_count(); i++) {
        const kv_release *r = i < 0 ? kv_release_textbook() : kv_release_at(i);
        const kv_release_text *t = r->text;
        const char *all[] = {t->weights,          t->weights_v2,       t->profile,
                             t->cudagraph_estimate, t->cudagraph_estimate_v2, t->available_kv,
                             t->cudagraph_util,     t->gpu_blocks,       t->kv_cache_size,
                             t->concurrency,        t->graphs,           t->err_free_memory,
                             t->err_no_kv_memory,   t->err_max_model_len, t->estimated_clause,
                             t->err_sampler_oom,    t->warn_fi_sampler};
        assert_non_null(t->weights);
        assert_non_null(t->err_no_kv_memory);
        assert_non_null(t->err_max_model_len);
        for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) {
            if (!all[k])
                continue;
            char out[1024];
            kv_release_format(out, sizeof out, all[k], a, na);
            if (strstr(out, "?}"))
                fail_msg("row %s template %zu: %s", r->first, k, out);
        }
        /* V1 rows say how many tokens fit; V0 rows count blocks */
        assert_true(r->mem->engine_v1 ? t->kv_cache_size != NULL : t->gpu_blocks != NULL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_ordered), cmocka_unit_test(test_find),      cmocka_unit_test(test_compare),
        cmocka_unit_test(test_defaults),     cmocka_unit_test(test_v2_runner), cmocka_unit_test(test_format),
        cmocka_unit_test(test_templates_fill), cmocka_unit_test(test_runner_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
