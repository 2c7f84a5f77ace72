/* kv_args: vLLM's names, defaults, number and boolean forms, argv parsing,
 * and every bad-input message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "kv_args.h"
#include "kv_vllm_flags.h"

static void test_defaults(void **state)
{
    (void)state;
    kv_args a;
    kv_args_init(&a);
    assert_true(a.gpu_memory_utilization == 0.92);
    assert_int_equal(a.block_size, 16);
    assert_int_equal(a.tensor_parallel_size, 1);
    assert_int_equal(a.enable_prefix_caching, 1);
    assert_int_equal(a.enforce_eager, 0);
    assert_int_equal(a.kv_cache_dtype, KV_ARGS_KV_AUTO);
    assert_int_equal(a.max_model_len, 0);
    assert_true(a.weights_gib < 0 && a.activation_gib < 0 && a.gpu_memory_gib < 0);
    assert_false(kv_args_is_set(&a, "max-model-len"));
}

static void test_human_readable_ints(void **state)
{
    (void)state;
    int64_t v;
    char err[160];
    struct { const char *s; int64_t v; } ok[] = {
        {"8192", 8192}, {"32k", 32000}, {"128K", 131072}, {"1m", 1000000}, {"1M", 1048576},
        {"25.6k", 25600}, {"2g", 2000000000LL}, {"4G", 4LL << 30}, {" 16 ", 16}, {"-1", -1},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        assert_int_equal(kv_args_parse_int(ok[i].s, &v, err, sizeof err), 0);
        assert_int_equal(v, ok[i].v);
    }
    const char *bad[] = {"", "k", "1.5K", "12x", "1..5k", "abc", "1e3", ".5k", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(kv_args_parse_int(bad[i], &v, err, sizeof err), KV_ARGS_EVALUE);
    assert_int_equal(kv_args_parse_int("1.5K", &v, err, sizeof err), KV_ARGS_EVALUE);
    assert_non_null(strstr(err, "did you mean 1.5k"));
}

static void test_set_by_name(void **state)
{
    (void)state;
    kv_args a;
    kv_args_init(&a);
    char err[256], buf[64];
    /* dashes, underscores, leading dashes all name the same flag */
    assert_int_equal(kv_args_set(&a, "max-model-len", "8192", err, sizeof err), 0);
    assert_int_equal(a.max_model_len, 8192);
    assert_int_equal(kv_args_set(&a, "--max_model_len", "32k", err, sizeof err), 0);
    assert_int_equal(a.max_model_len, 32000);
    assert_true(kv_args_is_set(&a, "max_model_len"));
    assert_int_equal(kv_args_get(&a, "max-model-len", buf, sizeof buf), 0);
    assert_string_equal(buf, "32000");
    assert_int_equal(kv_args_set(&a, "max-model-len", "auto", err, sizeof err), 0);
    assert_int_equal(a.max_model_len, KV_MAX_MODEL_LEN_AUTO);
    kv_args_get(&a, "max-model-len", buf, sizeof buf);
    assert_string_equal(buf, "auto");
    assert_int_equal(kv_args_set(&a, "max-model-len", "-1", err, sizeof err), 0);
    assert_int_equal(a.max_model_len, KV_MAX_MODEL_LEN_AUTO);
    assert_int_equal(kv_args_set(&a, "gpu-memory-utilization", "0.9", err, sizeof err), 0);
    assert_true(a.gpu_memory_utilization == 0.9);
    assert_int_equal(kv_args_set(&a, "gpu-memory-utilization", "1", err, sizeof err), 0);
    assert_int_equal(kv_args_set(&a, "tp", "4", err, sizeof err), 0);
    assert_int_equal(a.tensor_parallel_size, 4);
    assert_int_equal(kv_args_set(&a, "q", "fp8", err, sizeof err), 0);
    assert_int_equal(a.quantization, KV_ARGS_QUANT_FP8);
    assert_int_equal(kv_args_set(&a, "quantization", "awq_marlin", err, sizeof err), 0);
    assert_int_equal(a.quantization, KV_ARGS_QUANT_AWQ);
    assert_int_equal(kv_args_set(&a, "kv-cache-dtype", "fp8_e5m2", err, sizeof err), 0);
    assert_int_equal(a.kv_cache_dtype, KV_ARGS_KV_FP8);
    assert_int_equal(kv_args_set(&a, "dtype", "half", err, sizeof err), 0);
    assert_int_equal(a.dtype, KV_ARGS_DTYPE_FP16);
    assert_int_equal(kv_args_set(&a, "block-size", "32", err, sizeof err), 0);
    assert_int_equal(kv_args_set(&a, "kv-cache-memory", "8G", err, sizeof err), 0);
    assert_int_equal(a.kv_cache_memory_bytes, 8LL << 30);
    assert_int_equal(kv_args_set(&a, "gpu", "rtx-4090", err, sizeof err), 0);
    assert_string_equal(a.gpu, "rtx-4090");
    assert_int_equal(kv_args_set(&a, "gpu-used-gib", "3.5", err, sizeof err), 0);
    assert_true(a.gpu_used_gib == 3.5);
    assert_int_equal(kv_args_set(&a, "weights-gib", "0", err, sizeof err), 0);
    assert_true(a.weights_gib == 0);
}

static void test_booleans(void **state)
{
    (void)state;
    kv_args a;
    kv_args_init(&a);
    char err[256], buf[16];
    assert_int_equal(kv_args_set(&a, "enforce-eager", NULL, err, sizeof err), 0);
    assert_int_equal(a.enforce_eager, 1);
    assert_int_equal(kv_args_set(&a, "no-enforce-eager", NULL, err, sizeof err), 0);
    assert_int_equal(a.enforce_eager, 0);
    assert_int_equal(kv_args_set(&a, "no-enable-prefix-caching", NULL, err, sizeof err), 0);
    assert_int_equal(a.enable_prefix_caching, 0);
    kv_args_get(&a, "enable-prefix-caching", buf, sizeof buf);
    assert_string_equal(buf, "false");
    assert_int_equal(kv_args_set(&a, "enable-prefix-caching", "true", err, sizeof err), 0);
    assert_int_equal(a.enable_prefix_caching, 1);
    assert_int_equal(kv_args_set(&a, "enable-prefix-caching", "maybe", err, sizeof err), KV_ARGS_EVALUE);
    /* only booleans take no- */
    assert_int_equal(kv_args_set(&a, "no-max-model-len", NULL, err, sizeof err), KV_ARGS_EUNKNOWN);
}

static void test_bad_values(void **state)
{
    (void)state;
    kv_args a;
    kv_args_init(&a);
    char err[256];
    struct { const char *flag, *value; int rc; const char *needle; } bad[] = {
        {"gpu-memory-utilization", "0", KV_ARGS_EVALUE, "(0, 1]"},
        {"gpu-memory-utilization", "1.2", KV_ARGS_EVALUE, "(0, 1]"},
        {"gpu-memory-utilization", "-0.5", KV_ARGS_EVALUE, "(0, 1]"},
        {"gpu-memory-utilization", "most", KV_ARGS_EVALUE, "not a number"},
        {"gpu-memory-utilization", "nan", KV_ARGS_EVALUE, "not a number"},
        {"max-model-len", "0", KV_ARGS_EVALUE, "positive"},
        {"max-model-len", "-5", KV_ARGS_EVALUE, "positive"},
        {"max-model-len", "lots", KV_ARGS_EVALUE, "not a"},
        {"max-num-seqs", "-1", KV_ARGS_EVALUE, "positive"},
        {"max-num-batched-tokens", "8k tokens", KV_ARGS_EVALUE, "--max-num-batched-tokens"},
        {"tensor-parallel-size", "0", KV_ARGS_EVALUE, "positive"},
        {"tensor-parallel-size", "2.5", KV_ARGS_EVALUE, "whole number"},
        {"pipeline-parallel-size", "2", KV_ARGS_EVALUE, "one pipeline stage"},
        {"block-size", "24", KV_ARGS_EVALUE, "one of 1, 8, 16"},
        {"kv-cache-dtype", "int4", KV_ARGS_EVALUE, "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'int4'"},
        /* the newest release checks methods in config/model.py, not argparse */
        {"quantization", "magic", KV_ARGS_EVALUE, "ValueError: Unknown quantization method: magic. Must be one of ['awq'"},
        {"dtype", "float8", KV_ARGS_EVALUE, "--dtype must be one of"},
        {"gpu-memory-gib", "0", KV_ARGS_EVALUE, "positive"},
        {"activation-gib", "-1", KV_ARGS_EVALUE, "non-negative"},
        {"nccl-gib", "x", KV_ARGS_EVALUE, "not a number"},
        {"max-model-len", NULL, KV_ARGS_EMISSING, "needs a value"},
        {"frobnicate", "1", KV_ARGS_EUNKNOWN, "vllm serve: error: unrecognized arguments: --frobnicate"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        int rc = kv_args_set(&a, bad[i].flag, bad[i].value, err, sizeof err);
        if (rc != bad[i].rc || !strstr(err, bad[i].needle))
            print_error("%s=%s: rc %d '%s'\n", bad[i].flag, bad[i].value ? bad[i].value : "(null)", rc, err);
        assert_int_equal(rc, bad[i].rc);
        assert_non_null(strstr(err, bad[i].needle));
        assert_null(strchr(err, '\n'));
    }
    /* nothing changed */
    assert_true(a.gpu_memory_utilization == 0.92);
    assert_int_equal(a.max_model_len, 0);
}

static void test_ignored_flags(void **state)
{
    (void)state;
    kv_args a;
    kv_args_init(&a);
    char err[256];
    assert_int_equal(kv_args_set(&a, "port", "8000", err, sizeof err), KV_ARGS_IGNORED);
    assert_non_null(strstr(err, "--port does not change the memory plan"));
    assert_int_equal(kv_args_set(&a, "trust-remote-code", NULL, err, sizeof err), KV_ARGS_IGNORED);
    const kv_args_flag *f = kv_args_flag_find("--swap_space");
    assert_non_null(f);
    assert_int_equal(f->kind, KV_ARG_NOTE);
    assert_null(kv_args_flag_find("nope"));
    /* every flag has a name, a field, help and a default */
    for (int i = 0; i < kv_args_flag_count(); i++) {
        f = kv_args_flag_at(i);
        assert_true(f->name[0] && f->field[0] && f->help[0] && f->deflt);
        assert_ptr_equal(kv_args_flag_find(f->name), f);
    }
    assert_null(kv_args_flag_at(-1));
    assert_null(kv_args_flag_at(kv_args_flag_count()));
}

static void test_parse_argv(void **state)
{
    (void)state;
    kv_args a;
    kv_args_init(&a);
    char err[256], notes[512];
    char *argv[] = {"vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--gpu-memory-utilization=0.9",
                    "--max-num-batched-tokens", "8192", "\\", "--port", "8000", "--served-model-name", "a", "b",
                    "--trust-remote-code", "-tp", "2", "--max-model-len", "-1", "--no-enable-prefix-caching",
                    "--gpu", "h100"};
    int argc = (int)(sizeof argv / sizeof argv[0]);
    assert_int_equal(kv_args_parse(&a, argc, argv, notes, sizeof notes, err, sizeof err), 0);
    assert_string_equal(a.model, "meta-llama/Llama-3.1-8B-Instruct");
    assert_true(a.gpu_memory_utilization == 0.9);
    assert_int_equal(a.max_num_batched_tokens, 8192);
    assert_int_equal(a.tensor_parallel_size, 2);
    assert_int_equal(a.max_model_len, KV_MAX_MODEL_LEN_AUTO);
    assert_int_equal(a.enable_prefix_caching, 0);
    assert_string_equal(a.gpu, "h100");
    assert_non_null(strstr(notes, "--port"));
    assert_non_null(strstr(notes, "--served-model-name"));
    assert_non_null(strstr(notes, "--trust-remote-code"));

    char *bad1[] = {"m", "--max-model-len"};
    assert_int_equal(kv_args_parse(&a, 2, bad1, NULL, 0, err, sizeof err), KV_ARGS_EMISSING);
    assert_string_equal(err, "--max-model-len needs a value");
    char *bad2[] = {"m", "--max-model-len", "--enforce-eager"};
    assert_int_equal(kv_args_parse(&a, 3, bad2, NULL, 0, err, sizeof err), KV_ARGS_EMISSING);
    char *bad3[] = {"m", "--gpu-mem-util", "0.5"};
    assert_int_equal(kv_args_parse(&a, 3, bad3, NULL, 0, err, sizeof err), KV_ARGS_EUNKNOWN);
    assert_string_equal(err, "vllm serve: error: unrecognized arguments: --gpu-mem-util (unknown flag; did you mean "
                             "--gpu-memory-utilization?)");
    char *bad4[] = {"m1", "m2"};
    assert_int_equal(kv_args_parse(&a, 2, bad4, NULL, 0, err, sizeof err), KV_ARGS_EUNKNOWN);
    assert_non_null(strstr(err, "vllm serve: error: unrecognized arguments: m2 (MODEL is already"));
    char *model_flag[] = {"--model", "x/y"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 2, model_flag, NULL, 0, err, sizeof err), 0);
    assert_string_equal(a.model, "x/y");
}

/* The flags of issue #22 that used to exit 2: each accepted by the releases
 * whose parser has it (engine/kv_vllm_flags_data.c, generated from vLLM's own
 * arg_utils.py / cli_args.py) and refused, in argparse's words, by one that
 * lacks it; short forms included. */
static void test_generated_release_flags(void **state)
{
    (void)state;
    static const struct {
        const char *argv[6];
        const char *ok_in, *refused_in; /* NULL: every release has it */
    } cases[] = {
        {{"--lora-modules", "a=/x", "b=/y"}, "0.33.0", NULL},
        {{"--enable-lora", "--max-loras", "4", "--max-lora-rank", "64"}, "0.11.0", NULL},
        {{"--kv-transfer-config", "{\"kv_connector\":\"OffloadingConnector\",\"kv_role\":\"kv_both\"}"}, "0.33.0",
         "0.6.4"},
        {{"--enable-sleep-mode"}, "0.8.5", "0.6.4"},
        {{"--api-server-count", "2"}, "0.10.0", "0.8.0"},
        {{"-asc", "2"}, "0.33.0", NULL},
        {{"-dp", "2"}, "0.9.0", "0.7.3"},
        {{"--disable-sliding-window"}, "0.6.4", NULL},
        {{"--enable-eplb"}, "0.10.0", "0.9.1"},
        {{"--guided-decoding-backend", "xgrammar"}, "0.8.5", "0.11.0"},
        {{"--num-scheduler-steps", "8"}, "0.6.4", "0.11.0"},
        {{"--preemption-mode", "swap"}, "0.6.4", "0.33.0"},
        {{"--quantization", "modelopt"}, "0.33.0", NULL},
        {{"-q", "fbgemm_fp8"}, "0.9.2", NULL},
    };
    kv_args a;
    char err[4096], notes[2048];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int pass = 0; pass < 2; pass++) {
            const char *ver = pass ? cases[i].refused_in : cases[i].ok_in;
            if (!ver)
                continue;
            char *argv[12] = {"m"};
            int argc = 1;
            for (int k = 0; k < 6 && cases[i].argv[k]; k++)
                argv[argc++] = (char *)cases[i].argv[k];
            argv[argc++] = "--vllm-version";
            argv[argc++] = (char *)ver;
            kv_args_init(&a);
            int rc = kv_args_parse(&a, argc, argv, notes, sizeof notes, err, sizeof err);
            if (pass == 0 && rc != 0)
                fail_msg("%s with vLLM %s: rc %d: %s", cases[i].argv[0], ver, rc, err);
            if (pass == 1 && (rc != KV_ARGS_EVALUE || !strstr(err, "vllm serve: error: unrecognized arguments: ")))
                fail_msg("%s with vLLM %s: rc %d '%s', wanted argparse's refusal", cases[i].argv[0], ver, rc, err);
            if (pass == 0)
                assert_string_equal(a.model, "m"); /* values were taken as argparse takes them */
        }
    }
    /* memory flags kvlab does not model say so */
    char *sleep[] = {"m", "--enable-sleep-mode", "--kv-transfer-config",
                     "{\"kv_connector\":\"OffloadingConnector\",\"kv_role\":\"kv_both\"}"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 4, sleep, notes, sizeof notes, err, sizeof err), 0);
    assert_non_null(strstr(notes, "--enable-sleep-mode is accepted but not modelled"));
    assert_string_equal(a.kv_connector, "OffloadingConnector");
    /* -dp is --data-parallel-size, kvlab's own row */
    assert_non_null(kv_args_flag_find("-dp"));
    assert_string_equal(kv_args_flag_find("-dp")->name, "data-parallel-size");
    /* methods and KV dtypes by release, in vLLM's words */
    char *exl2[] = {"m", "--quantization", "exl2", "--vllm-version", "0.9.2"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 5, exl2, notes, sizeof notes, err, sizeof err), KV_ARGS_EVALUE);
    assert_non_null(strstr(err, "argument --quantization/-q: invalid choice: 'exl2' (choose from 'aqlm', 'awq',"));
    char *hqq[] = {"m", "--quantization", "hqq"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 3, hqq, notes, sizeof notes, err, sizeof err), KV_ARGS_EVALUE);
    assert_non_null(strstr(err, "ValueError: Unknown quantization method: hqq. Must be one of ['awq', "));
    char *hqq_old[] = {"m", "--quantization", "hqq", "--vllm-version", "0.6.5"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 5, hqq_old, notes, sizeof notes, err, sizeof err), 0);
    char *kvd[] = {"m", "--kv-cache-dtype", "fp8_per_token_head", "--vllm-version", "0.6.4"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 5, kvd, notes, sizeof notes, err, sizeof err), KV_ARGS_EVALUE);
    assert_string_equal(err, "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp8_per_token_head' "
                             "(choose from 'auto', 'fp8', 'fp8_e5m2', 'fp8_e4m3') (vLLM 0.6.4)");
    kvd[4] = "0.33.0";
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 5, kvd, notes, sizeof notes, err, sizeof err), 0);
}

/* Real vLLM flags from pasted lines: -O in its three spellings, the
 * CUDA-graph sizes (several values), notes that say what is not modelled,
 * and the release check (a flag the chosen release lacks, --config). */
/* The help of --max-model-len names the first release that takes a k/K
 * suffix (the flags view and `serve --help` show it under every release):
 * that release parses 32k, the one before refuses it. */
static void test_max_model_len_help_release(void **state)
{
    (void)state;
    const kv_args_flag *f = kv_args_flag_find("max-model-len");
    assert_non_null(f);
    const char *at = strstr(f->help, "from vLLM ");
    assert_non_null(at);
    char first[16] = "";
    assert_int_equal(sscanf(at, "from vLLM %15[0-9.]", first), 1);
    if (first[strlen(first) - 1] == '.') first[strlen(first) - 1] = '\0';
    int ri = kv_vllm_release_index(first);
    assert_true(ri > 0);
    char notes[512], err[512];
    kv_args a;
    char *ok[] = {"m", "--max-model-len", "32k", "--vllm-version", first};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 5, ok, notes, sizeof notes, err, sizeof err), 0);
    char *old[] = {"m", "--max-model-len", "32k", "--vllm-version", (char *)kv_vllm_releases[ri - 1]};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 5, old, notes, sizeof notes, err, sizeof err), KV_ARGS_EVALUE);
}

static void test_real_vllm_flags(void **state)
{
    (void)state;
    kv_args a;
    char err[256], notes[1024];
    static const char *const forms[][3] = {{"-O3", NULL, NULL}, {"-O", "3", NULL}, {"-O=3", NULL, NULL},
                                           {"--optimization-level", "3", NULL}};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *argv[4] = {"m", (char *)forms[i][0], (char *)forms[i][1], NULL};
        kv_args_init(&a);
        assert_int_equal(kv_args_parse(&a, forms[i][1] ? 3 : 2, argv, notes, sizeof notes, err, sizeof err), 0);
        assert_int_equal(a.optimization_level, 3);
        assert_string_equal(a.model, "m");
    }
    /* a level out of 0-3 in any -O spelling is rejected as the long flag
     * is, not taken as a --compilation-config and noted */
    static const char *const bad_levels[][2] = {{"-O9", NULL}, {"-O", "9"}, {"-O=12", NULL}, {"-O", "-1"}};
    for (size_t i = 0; i < sizeof bad_levels / sizeof bad_levels[0]; i++) {
        char *argv[4] = {"m", (char *)bad_levels[i][0], (char *)bad_levels[i][1], NULL};
        kv_args_init(&a);
        assert_int_equal(kv_args_parse(&a, bad_levels[i][1] ? 3 : 2, argv, notes, sizeof notes, err, sizeof err),
                         KV_ARGS_EVALUE);
        assert_non_null(strstr(err, "must be 0, 1, 2 or 3"));
    }
    /* k/K suffixes only where vLLM's parser reads human_readable_int */
    static const char *const suffixed[][5] = {
        {"--max-num-seqs", "1k", NULL, NULL, "argument --max-num-seqs: invalid int value: '1k'"},
        {"-tp", "2K", NULL, NULL, "argument --tensor-parallel-size: invalid int value: '2K'"},
        {"--block-size", "16k", "--vllm-version", "0.10.0", "argument --block-size: invalid int value: '16k'"},
        {"--max-model-len", "32k", "--vllm-version", "0.8.4", NULL},
        {"--max-num-batched-tokens", "16K", "--vllm-version", "0.9.1", NULL},
        /* the releases before human_readable_int reached the option read argparse's int */
        {"--max-model-len", "32k", "--vllm-version", "0.8.3",
         "argument --max-model-len: invalid int value: '32k' (vLLM 0.8.3 reads a plain integer there; k/K suffixes "
         "from 0.8.4)"},
        {"--max-model-len", "32K", "--vllm-version", "0.6.4", "argument --max-model-len: invalid int value: '32K'"},
        {"--max-num-batched-tokens", "8k", "--vllm-version", "0.9.0",
         "argument --max-num-batched-tokens: invalid int value: '8k' (vLLM 0.9.0"},
        {"--max-num-batched-tokens", "8192", "--vllm-version", "0.6.4", NULL},
        {"--max-model-len", "32k", "--accounting", "textbook", NULL},
    };
    for (size_t i = 0; i < sizeof suffixed / sizeof suffixed[0]; i++) {
        char *argv[6] = {"m", (char *)suffixed[i][0], (char *)suffixed[i][1], (char *)suffixed[i][2],
                         (char *)suffixed[i][3], NULL};
        kv_args_init(&a);
        int rc = kv_args_parse(&a, suffixed[i][2] ? 5 : 3, argv, notes, sizeof notes, err, sizeof err);
        if (suffixed[i][4]) {
            assert_int_equal(rc, KV_ARGS_EVALUE);
            assert_non_null(strstr(err, suffixed[i][4]));
        } else {
            assert_int_equal(rc, 0);
        }
    }
    /* each release's own shape of an option: 0.6.4's --enable-chunked-prefill
     * takes an optional true/false (StoreBoolean, nargs "?"), later ones are
     * switches; --no- forms only where the parser is BooleanOptionalAction
     * (store_true before: --no-enable-prefix-caching in 0.6.4,
     * --no-enforce-eager before 0.9.0 are unrecognized) */
    char *cp_old[] = {"m", "--enable-chunked-prefill", "false", "--vllm-version", "0.6.4"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 5, cp_old, notes, sizeof notes, err, sizeof err), 0);
    assert_int_equal(a.enable_chunked_prefill, 0);
    char *cp_new[] = {"m", "--enable-chunked-prefill", "false", "--vllm-version", "0.33.0"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 5, cp_new, notes, sizeof notes, err, sizeof err), KV_ARGS_EUNKNOWN);
    assert_non_null(strstr(err, "vllm serve: error: unrecognized arguments: false"));
    static const char *const negs[][3] = {
        {"--no-enable-prefix-caching", "0.6.4", "unrecognized arguments: --no-enable-prefix-caching (vLLM 0.6.4 has "
                                                "--enable-prefix-caching without a --no- form; 0.6.5 and later have it)"},
        {"--no-enforce-eager", "0.8.5", "unrecognized arguments: --no-enforce-eager (vLLM 0.8.5"},
        {"--no-enable-prefix-caching", "0.6.5", NULL},
        {"--no-enforce-eager", "0.9.0", NULL},
        {"--no-enable-chunked-prefill", "0.10.0", NULL},
        /* a switch takes no value after '=' (argparse: "ignored explicit
         * argument"); 0.6.4's optional true/false does, and kvlab's own
         * model-less switches (--trust-remote-code) are vLLM's too */
        {"--enforce-eager=true", "0.33.0",
         "argument --enforce-eager/--no-enforce-eager: ignored explicit argument 'true'"},
        {"--enforce-eager=false", "0.8.5", "argument --enforce-eager: ignored explicit argument 'false'"},
        {"--no-enable-prefix-caching=1", "0.33.0", "ignored explicit argument '1'"},
        {"--trust-remote-code=yes", "0.33.0", "ignored explicit argument 'yes'"},
        {"--enable-chunked-prefill=true", "0.33.0", "ignored explicit argument 'true'"},
        {"--enable-chunked-prefill=false", "0.6.4", NULL},
    };
    for (size_t i = 0; i < sizeof negs / sizeof negs[0]; i++) {
        char *argv[4] = {"m", (char *)negs[i][0], "--vllm-version", (char *)negs[i][1]};
        kv_args_init(&a);
        int rc = kv_args_parse(&a, 4, argv, notes, sizeof notes, err, sizeof err);
        if (negs[i][2]) {
            assert_int_equal(rc, KV_ARGS_EVALUE);
            assert_non_null(strstr(err, negs[i][2]));
        } else {
            assert_int_equal(rc, 0);
        }
    }
    /* --max-lora-rank as each release allows it: LoRAConfig's ValueError
     * (only with LoRA on) up to 0.11.0, argparse choices from 0.11.1 */
    static const char *const ranks[][4] = {
        {"7", "0.6.4", "1", "ValueError: max_lora_rank (7) must be one of (8, 16, 32, 64, 128, 256)."},
        {"320", "0.7.3", "1", "ValueError: max_lora_rank (320) must be one of (8, 16, 32, 64, 128, 256)."},
        {"320", "0.8.0", "1", NULL},
        {"7", "0.9.2", "0", NULL},
        {"7", "0.33.0", "0", "argument --max-lora-rank: invalid choice: 7 (choose from 1, 8, 16, 32, 64, 128, 256, 320, 512)"},
        {"1", "0.33.0", "1", NULL},
    };
    for (size_t i = 0; i < sizeof ranks / sizeof ranks[0]; i++) {
        char *argv[6] = {"m", "--max-lora-rank", (char *)ranks[i][0], "--vllm-version", (char *)ranks[i][1],
                         "--enable-lora"};
        kv_args_init(&a);
        int rc = kv_args_parse(&a, ranks[i][2][0] == '1' ? 6 : 5, argv, notes, sizeof notes, err, sizeof err);
        if (ranks[i][3]) {
            assert_int_equal(rc, KV_ARGS_EVALUE);
            assert_non_null(strstr(err, ranks[i][3]));
        } else {
            assert_int_equal(rc, 0);
        }
    }
    /* an option-looking token argparse does not know is an unknown option,
     * not a second MODEL */
    char *dashx[] = {"m", "-x"};
    kv_args_init(&a);
    assert_true(kv_args_parse(&a, 2, dashx, notes, sizeof notes, err, sizeof err) < 0);
    assert_non_null(strstr(err, "unrecognized arguments: -x"));
    assert_null(strstr(err, "MODEL is already"));
    /* the value given last decides: a plain number after a suffixed one */
    char *again[] = {"m", "--max-model-len", "32k", "--max-model-len", "32768", "--vllm-version", "0.6.4"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 7, again, notes, sizeof notes, err, sizeof err), 0);
    assert_int_equal(a.max_model_len, 32768);
    char *dotted[] = {"m", "-O.mode=3"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 2, dotted, notes, sizeof notes, err, sizeof err), 0);
    assert_non_null(strstr(notes, "--compilation-config is accepted but not modelled"));
    char *sizes[] = {"m", "--vllm-version", "0.10.0", "--cuda-graph-sizes", "1", "2", "4", "8", "--enforce-eager"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 9, sizes, notes, sizeof notes, err, sizeof err), 0);
    assert_int_equal(a.cuda_graph_sizes_n, 4);
    assert_int_equal(a.cuda_graph_sizes[3], 8);
    assert_int_equal(a.enforce_eager, 1);
    char *noted[] = {"m", "--speculative-config", "{}", "--enable-lora", "--async-scheduling"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 5, noted, notes, sizeof notes, err, sizeof err), 0);
    assert_non_null(strstr(notes, "--speculative-config is accepted but not modelled: it changes a draft model"));
    assert_null(strstr(notes, "--enable-lora")); /* modelled now: kv_plan_lora_bytes */
    assert_int_equal(a.enable_lora, 1);
    assert_non_null(strstr(notes, "--async-scheduling does not change the memory plan"));
    /* the release decides, whatever the order of the flags */
    char *old[] = {"m", "--async-scheduling", "--vllm-version", "0.9.2"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 4, old, notes, sizeof notes, err, sizeof err), KV_ARGS_EVALUE);
    assert_string_equal(err, "vllm serve: error: unrecognized arguments: --async-scheduling (vLLM 0.9.2 has no such "
                             "flag; 0.10.0-0.33.0 have it)");
    char *gone[] = {"m", "--rope-scaling", "{}"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 3, gone, notes, sizeof notes, err, sizeof err), KV_ARGS_EVALUE);
    assert_non_null(strstr(err, "unrecognized arguments: --rope-scaling (vLLM 0.33.0 has no such flag; 0.6.4-0.11.0 have it)"));
    char *tb[] = {"m", "--rope-scaling", "{}", "--accounting", "textbook"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 5, tb, notes, sizeof notes, err, sizeof err), 0);
    assert_true(kv_args_flag_in_release(kv_args_flag_find("rope-scaling"), "0.11.0"));
    assert_false(kv_args_flag_in_release(kv_args_flag_find("rope-scaling"), "0.11.1"));
    assert_true(kv_args_flag_in_release(kv_args_flag_find("max-cudagraph-capture-size"), ""));
    char *cfg[] = {"m", "--config", "serve.yaml"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 3, cfg, notes, sizeof notes, err, sizeof err), KV_ARGS_EVALUE);
    assert_non_null(strstr(err, "kvlab serve, simulate and fit read vLLM's YAML config files"));
}

/* Unknown flags name the near ones: typos, British spellings, a longer or
 * shorter form; nothing when nothing is close. */
static void test_flag_suggestions(void **state)
{
    (void)state;
    kv_args a;
    char err[256];
    kv_args_init(&a);
    static const struct { const char *typed, *want; } cases[] = {
#define U "vllm serve: error: unrecognized arguments: "
        {"--max-model-length", U "--max-model-length (unknown flag; did you mean --max-model-len?)"},
        {"--gpu-memory-utilisation", U "--gpu-memory-utilisation (unknown flag; did you mean --gpu-memory-utilization?)"},
        {"--kv-cache-type", U "--kv-cache-type (unknown flag; did you mean --kv-cache-dtype?)"},
        {"--gpu-mem-util", U "--gpu-mem-util (unknown flag; did you mean --gpu-memory-utilization?)"},
#undef U
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[] = {"m", (char *)cases[i].typed, "1"};
        assert_int_equal(kv_args_parse(&a, 3, argv, NULL, 0, err, sizeof err), KV_ARGS_EUNKNOWN);
        assert_string_equal(err, cases[i].want);
        /* the setter (TUI, Lua) says the same */
        assert_int_equal(kv_args_set(&a, cases[i].typed, "1", err, sizeof err), KV_ARGS_EUNKNOWN);
        assert_string_equal(err, cases[i].want);
    }
    assert_int_equal(kv_args_set(&a, "frobnicate", "1", err, sizeof err), KV_ARGS_EUNKNOWN);
    assert_null(strstr(err, "did you mean"));
    assert_non_null(strstr(err, "no vLLM release from 0.6.4 to"));
    /* argparse takes the start of one flag's name as that flag (vLLM keeps
     * allow_abbrev on): --tensor-parallel 2 is -tp 2, with a note */
    char notes[512];
    char *abbrev[] = {"m", "--tensor-parallel", "2", "--max_num_seq", "8", "--gpu-memory", "0.5"};
    kv_args_init(&a);
    assert_int_equal(kv_args_parse(&a, 7, abbrev, notes, sizeof notes, err, sizeof err), 0);
    assert_int_equal(a.tensor_parallel_size, 2);
    assert_int_equal(a.max_num_seqs, 8);
    assert_true(a.gpu_memory_utilization == 0.5);
    assert_non_null(strstr(notes, "--tensor-parallel is taken as --tensor-parallel-size"));
    /* ... and refuses a start several flags share */
    char *amb[] = {"m", "--max-num", "8"};
    assert_int_equal(kv_args_parse(&a, 3, amb, notes, sizeof notes, err, sizeof err), KV_ARGS_EUNKNOWN);
    assert_non_null(strstr(err, "vllm serve: error: ambiguous option: --max-num could match"));
    assert_non_null(strstr(err, "--max-num-seqs"));
}

/* --kv-cache-dtype takes what vLLM's CacheDType takes (vllm/config/cache.py,
 * older and 2026 lists), names each in the error, and refuses float32 (vLLM
 * has none) and the formats kvlab cannot size with a reason. */
static void test_kv_cache_dtypes(void **state)
{
    (void)state;
    kv_args a;
    char err[512], buf[32];
    static const struct { const char *v; kv_args_kv_dtype d; } ok[] = {
        {"auto", KV_ARGS_KV_AUTO}, {"bfloat16", KV_ARGS_KV_BF16}, {"float16", KV_ARGS_KV_FP16},
        {"fp8", KV_ARGS_KV_FP8}, {"fp8_e4m3", KV_ARGS_KV_FP8}, {"fp8_e5m2", KV_ARGS_KV_FP8},
        {"fp8_inc", KV_ARGS_KV_FP8}, {"fp8_ds_mla", KV_ARGS_KV_FP8_DS_MLA},
        {"fp8_per_token_head", KV_ARGS_KV_FP8_PER_TOKEN_HEAD}, {"int8_per_token_head", KV_ARGS_KV_INT8_PER_TOKEN_HEAD},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        kv_args_init(&a);
        assert_int_equal(kv_args_set(&a, "kv-cache-dtype", ok[i].v, err, sizeof err), KV_ARGS_OK);
        assert_int_equal(a.kv_cache_dtype, ok[i].d);
        assert_int_equal(kv_args_get(&a, "kv-cache-dtype", buf, sizeof buf), 0);
        /* every alias reads back as given, so Left/Right in the flags view
         * steps through the list instead of sticking on "fp8" */
        assert_string_equal(buf, ok[i].v);
        /* the flag table lists each value the TUI can step through */
        assert_non_null(strstr(kv_args_flag_find("kv-cache-dtype")->choices, ok[i].v));
    }
    assert_int_equal(kv_args_set(&a, "kv-cache-dtype", "int2", err, sizeof err), KV_ARGS_EVALUE);
    /* argparse's words and the newest release's CacheDType (config/cache.py) */
    assert_non_null(strstr(err, "vllm serve: error: argument --kv-cache-dtype: invalid choice: 'int2' (choose from "
                                "'auto', 'float16', 'bfloat16', 'fp8', 'fp8_e4m3', 'fp8_e5m2', 'fp8_inc', 'fp8_ds_mla',"));
    assert_int_equal(kv_args_set(&a, "kv-cache-dtype", "float32", err, sizeof err), KV_ARGS_EVALUE);
    assert_non_null(strstr(err, "vLLM has no float32 KV cache"));
    assert_int_equal(kv_args_set(&a, "kv-cache-dtype", "nvfp4", err, sizeof err), KV_ARGS_EVALUE);
    assert_non_null(strstr(err, "kvlab cannot size"));
    assert_int_equal(kv_args_set(&a, "kv-cache-dtype", "turboquant_4bit_nc", err, sizeof err), KV_ARGS_EVALUE);
    assert_non_null(strstr(err, "kvlab cannot size"));
    /* a name no release's CacheDType has is argparse's invalid choice */
    assert_int_equal(kv_args_set(&a, "kv-cache-dtype", "turboquant_4bit", err, sizeof err), KV_ARGS_EVALUE);
    assert_non_null(strstr(err, "invalid choice: 'turboquant_4bit'"));
}

/* The `vllm serve` command of a set of flags (kv_args_command, the flags
 * view's copyable line): vLLM's flags given, in vLLM's spelling, a value a
 * shell would split quoted, booleans as --x / --no-x, kvlab's own flags
 * left out; parsed back it gives the same command. */
static void test_command_line(void **state)
{
    (void)state;
    kv_args a;
    kv_args_init(&a);
    char err[256], cmd[1024], again[1024];
    const char *set[][2] = {
        {"model", "meta-llama/Llama-3.1-8B-Instruct"}, {"max-model-len", "8192"}, {"gpu", "h100-80gb"},
        {"gpu-memory-utilization", "0.85"}, {"enable-prefix-caching", "false"}, {"enforce-eager", "true"},
        {"kv-cache-dtype", "fp8"}, {"vllm-version", "0.11.0"}, {"accounting", "textbook"},
    };
    for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
        if (kv_args_set(&a, set[i][0], set[i][1], err, sizeof err) < 0) fail_msg("%s: %s", set[i][0], err);
    size_t need = kv_args_command(&a, cmd, sizeof cmd);
    assert_int_equal(need, strlen(cmd));
    assert_string_equal(cmd, "vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.85 "
                             "--max-model-len 8192 --kv-cache-dtype fp8 --no-enable-prefix-caching --enforce-eager");
    /* false where false is the default: nothing to type */
    assert_true(kv_args_set(&a, "enforce-eager", "false", err, sizeof err) >= 0);
    kv_args_command(&a, cmd, sizeof cmd);
    assert_null(strstr(cmd, "eager"));
    /* a model path with a space is quoted; parsed back, the same line */
    assert_true(kv_args_set(&a, "model", "/models/my model", err, sizeof err) >= 0);
    kv_args_command(&a, cmd, sizeof cmd);
    assert_non_null(strstr(cmd, "vllm serve '/models/my model' --"));
    char *argv[] = {"vllm", "serve", "/models/my model", "--gpu-memory-utilization", "0.85", "--max-model-len", "8192",
                    "--kv-cache-dtype", "fp8", "--no-enable-prefix-caching"};
    kv_args b;
    kv_args_init(&b);
    assert_int_equal(kv_args_parse(&b, 10, argv, NULL, 0, err, sizeof err), KV_ARGS_OK);
    kv_args_command(&b, again, sizeof again);
    assert_string_equal(again, cmd);
    /* a short buffer: cut, the length needed returned */
    char small[16];
    assert_int_equal(kv_args_command(&b, small, sizeof small), strlen(cmd));
    assert_int_equal(strlen(small), 15);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_human_readable_ints),
        cmocka_unit_test(test_set_by_name),
        cmocka_unit_test(test_booleans),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_ignored_flags),
        cmocka_unit_test(test_parse_argv),
        cmocka_unit_test(test_real_vllm_flags),
        cmocka_unit_test(test_max_model_len_help_release),
        cmocka_unit_test(test_generated_release_flags),
        cmocka_unit_test(test_flag_suggestions),
        cmocka_unit_test(test_kv_cache_dtypes),
        cmocka_unit_test(test_command_line),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
