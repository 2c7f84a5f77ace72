/* kv_model: every catalogue config loads; parameter counts match
 * assets/models/SOURCES.md (published totals within 2%, derived counts
 * exactly); KV bytes per token for MHA, GQA, MQA, MLA and sliding-window
 * models; name resolution (catalogue, file, folder, HF cache); every
 * config error names the file and the field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv_args.h"
#include "kv_model.h"
#include "kv_plan.h"
#include "kv_util.h"
#include "test_helpers.h"

static kv_model M;

static kv_model *load(const char *id)
{
    char err[512];
    int rc = kv_model_load(id, test_assets_dir(), &M, err, sizeof err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, KV_MODEL_OK);
    return &M;
}

static void test_catalogue_loads(void **state)
{
    (void)state;
    char **ids;
    char err[512];
    int n = kv_model_catalog_list(test_assets_dir(), &ids, err, sizeof err);
    assert_true(n >= 26);
    for (int i = 0; i < n; i++) {
        kv_model *m = load(ids[i]);
        assert_string_equal(m->id, ids[i]);
        assert_true(m->params_total > 400000000LL); /* Qwen2.5-0.5B (0.49e9) is the smallest */
        assert_true(m->max_position_embeddings >= 4096);
        assert_true(m->head_dim > 0 && m->num_key_value_heads > 0);
    }
    kv_model_catalog_free(ids, n);
}

/* Parse a number starting at s: "32,763,876,352" or "30.5B" / "70B".
 * Returns 0 if s does not start one. */
static double parse_count(const char *s, const char **end)
{
    char buf[64];
    size_t j = 0;
    const char *p = s;
    while ((isdigit((unsigned char)*p) || *p == ',' || *p == '.') && j + 1 < sizeof buf) {
        if (*p != ',')
            buf[j++] = *p;
        p++;
    }
    buf[j] = '\0';
    *end = p;
    if (!j)
        return 0;
    double v = atof(buf);
    if (*p == 'B' && !isalnum((unsigned char)p[1]))
        return v * 1e9;
    return strchr(s, ',') && strchr(s, ',') < p && v >= 1e6 ? v : 0;
}

/* First count in text after `key`, ignoring digits glued to letters (R1, V3). */
static double count_after(const char *text, const char *key, const char *limit)
{
    const char *k = strstr(text, key);
    if (!k || (limit && k >= limit))
        return 0;
    const char *eol = strchr(k, '\n');
    for (const char *p = k + strlen(key); *p && (!eol || p < eol); p++) {
        if (!isdigit((unsigned char)*p) || isalnum((unsigned char)p[-1]) || p[-1] == '.' || p[-1] == '-')
            continue;
        const char *end;
        double v = parse_count(p, &end);
        if (v > 0)
            return v;
        p = end;
    }
    return 0;
}

static void test_param_counts_vs_sources(void **state)
{
    (void)state;
    char *md = test_read_file("assets/models/SOURCES.md", NULL);
    assert_non_null(md);
    int published = 0, derived = 0;
    for (char *sec = strstr(md, "\n### "); sec; sec = strstr(sec + 1, "\n### ")) {
        char id[160];
        if (sscanf(sec + 5, "%159s", id) != 1)
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/models/%s/config.json", test_assets_dir(), id);
        if (access(path, R_OK))
            continue; /* "NOT WRITTEN" entries */
        const char *next = strstr(sec + 1, "\n### ");
        const kv_model *m = load(id);
        double pub = count_after(sec, "Published params", next);
        if (pub > 0) {
            double rel = fabs((double)m->params_checkpoint - pub) / pub;
            if (rel > 0.02)
                print_error("%s: derived %lld vs published %.0f (%.1f%%)\n", id, (long long)m->params_checkpoint, pub,
                            rel * 100);
            assert_true(rel <= 0.02);
            published++;
        }
        double der = count_after(sec, "Derived", next);
        if (der > 1e6) {
            if ((double)m->params_total != der)
                print_error("%s: %lld vs SOURCES.md derived %.0f\n", id, (long long)m->params_total, der);
            assert_true((double)m->params_total == der);
            derived++;
        }
    }
    free(md);
    assert_true(published >= 10);
    assert_true(derived >= 8);
}

static void test_params_split(void **state)
{
    (void)state;
    /* Llama-3.1-70B: 68.45e9 in linear layers, 2.10e9 embeddings + head (the seed's FP8 split). */
    kv_model *m = load("meta-llama/Llama-3.1-70B-Instruct");
    assert_true(fabs((double)m->params_linear / 1e9 - 68.45) < 0.01);
    assert_true(fabs((double)m->params_embedding / 1e9 - 2.10) < 0.01);
    /* Tied embeddings count once (HF default when the key is absent: Gemma). */
    m = load("meta-llama/Llama-3.2-1B-Instruct");
    assert_true(m->tie_word_embeddings);
    assert_int_equal(m->params_embedding, 128256LL * 2048);
    m = load("google/gemma-2-9b-it");
    assert_true(m->tie_word_embeddings);
    /* MoE: every expert counted in the total, only the active ones in params_active. */
    m = load("Qwen/Qwen3-30B-A3B");
    assert_int_equal(m->num_experts, 128);
    assert_int_equal(m->num_experts_per_tok, 8);
    assert_true(fabs((double)m->params_active / 1e9 - 3.3) / 3.3 < 0.02);
    m = load("deepseek-ai/DeepSeek-V3");
    assert_int_equal(m->num_moe_layers, 58);
    assert_int_equal(m->num_shared_experts, 1);
    assert_true(m->params_checkpoint > m->params_total); /* MTP layer in the checkpoint only */
}

/* KV bytes per token per GPU through the plan. */
static int64_t kv_bpt(const kv_model *m, int tp, const char *kv_dtype)
{
    kv_args a;
    kv_args_init(&a);
    char err[256];
    a.gpu_memory_gib = 1000;
    a.tensor_parallel_size = tp;
    if (kv_dtype)
        assert_int_equal(kv_args_set(&a, "kv-cache-dtype", kv_dtype, err, sizeof err), 0);
    kv_plan p;
    int rc = kv_plan_compute_nofix(m, NULL, &a, &p, err, sizeof err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    return p.kv_bytes_per_token;
}

static void test_bytes_per_token(void **state)
{
    (void)state;
    /* MHA: Phi-3-mini, 32 layers x 32 KV heads x 96 x 2 x 2 */
    kv_model *m = load("microsoft/Phi-3-mini-4k-instruct");
    assert_string_equal(kv_model_attention_kind(m), "MHA");
    assert_int_equal(kv_bpt(m, 1, NULL), 2LL * 32 * 32 * 96 * 2);
    assert_int_equal(kv_bpt(m, 4, NULL), 2LL * 32 * 8 * 96 * 2);
    /* GQA: Llama-3.1-8B 128 KiB; Qwen2.5-7B 4 KV heads */
    m = load("meta-llama/Llama-3.1-8B-Instruct");
    assert_string_equal(kv_model_attention_kind(m), "GQA");
    assert_int_equal(kv_bpt(m, 1, NULL), 131072);
    assert_int_equal(kv_bpt(m, 1, "fp8"), 65536);
    m = load("Qwen/Qwen2.5-7B-Instruct");
    assert_int_equal(kv_bpt(m, 1, NULL), 2LL * 28 * 4 * 128 * 2);
    assert_int_equal(kv_bpt(m, 4, NULL), 2LL * 28 * 1 * 128 * 2);
    /* MQA (no catalogue model has one KV head): replicated on every rank */
    static const char mqa[] = "{\"model_type\":\"llama\",\"num_hidden_layers\":4,\"hidden_size\":512,"
                              "\"num_attention_heads\":8,\"num_key_value_heads\":1,\"intermediate_size\":1024,"
                              "\"vocab_size\":1000,\"max_position_embeddings\":2048}";
    kv_model q;
    char err[256];
    assert_int_equal(kv_model_parse(mqa, sizeof mqa - 1, "mqa.json", &q, err, sizeof err), 0);
    assert_string_equal(kv_model_attention_kind(&q), "MQA");
    assert_int_equal(kv_bpt(&q, 1, NULL), 2LL * 4 * 1 * 64 * 2);
    assert_int_equal(kv_bpt(&q, 8, NULL), 2LL * 4 * 1 * 64 * 2);
    /* MLA: one 512+64 latent per layer, K and V share it, tp does not split it */
    m = load("deepseek-ai/DeepSeek-V3");
    assert_string_equal(kv_model_attention_kind(m), "MLA");
    assert_int_equal(kv_bpt(m, 1, NULL), 61LL * 576 * 2);
    assert_int_equal(kv_bpt(m, 8, NULL), 61LL * 576 * 2);
    assert_int_equal(kv_bpt(m, 8, "fp8_ds_mla"), 61LL * 656);
    m = load("deepseek-ai/DeepSeek-V2-Lite-Chat");
    assert_int_equal(kv_bpt(m, 1, NULL), 27LL * 576 * 2);
}

static void test_sliding_window(void **state)
{
    (void)state;
    char err[256];
    /* Gemma 2: even layers slide over 4096 */
    kv_model *m = load("google/gemma-2-9b-it");
    assert_int_equal(m->sliding_window, 4096);
    assert_int_equal(m->num_sliding_layers, 21);
    assert_true(m->layer_is_sliding[0] && !m->layer_is_sliding[1]);
    kv_args a;
    kv_args_init(&a);
    a.gpu_memory_gib = 1000;
    assert_int_equal(kv_args_set(&a, "max-num-batched-tokens", "2048", err, sizeof err), 0);
    kv_plan p;
    assert_int_equal(kv_plan_compute_nofix(m, NULL, &a, &p, err, sizeof err), 0);
    assert_int_equal(p.kv_bytes_per_token, 2LL * 42 * 8 * 256 * 2);
    int64_t page = 2LL * 16 * 8 * 256 * 2;
    /* full layers need the whole length; window layers cdiv(min(4095 + 2048, L), 16) + 1 blocks */
    assert_int_equal(kv_plan_request_bytes(&p, 8192), 21 * 512 * page + 21 * (384 + 1) * page);
    assert_int_equal(kv_plan_request_bytes(&p, 1000), 21 * 63 * page + 21 * (63 + 1) * page);
    assert_int_equal(p.num_kv_groups, 2);
    /* Gemma 3: 5 local then 1 global; 52 + 10 layers -> groups of 10 */
    m = load("google/gemma-3-27b-it");
    assert_int_equal(m->num_sliding_layers, 52);
    assert_true(!m->layer_is_sliding[5] && m->layer_is_sliding[4]);
    assert_int_equal(m->max_position_embeddings, 131072);
    assert_int_equal(m->hidden_size, 5376); /* from text_config */
    assert_int_equal(kv_plan_compute_nofix(m, NULL, &a, &p, err, sizeof err), 0);
    assert_int_equal(p.group_size, 10);
    assert_int_equal(p.num_kv_groups, 7);
    /* gpt-oss: layer_types, window 128 */
    m = load("openai/gpt-oss-20b");
    assert_int_equal(m->num_sliding_layers, 12);
    assert_int_equal(m->sliding_window, 128);
    assert_int_equal(m->quant, KV_QUANT_MXFP4);
    /* Qwen2.5 declares a window but use_sliding_window is false; Mistral has none */
    m = load("Qwen/Qwen2.5-7B-Instruct");
    assert_int_equal(m->num_sliding_layers, 0);
}

static void test_max_len_and_rope(void **state)
{
    (void)state;
    assert_int_equal(load("meta-llama/Llama-3.1-8B-Instruct")->max_position_embeddings, 131072); /* llama3: no factor */
    assert_int_equal(load("openai/gpt-oss-20b")->max_position_embeddings, 4096 * 32);           /* yarn */
    assert_int_equal(load("deepseek-ai/DeepSeek-V2-Lite-Chat")->max_position_embeddings, 163840);
    assert_int_equal(load("microsoft/Phi-3-mini-4k-instruct")->max_position_embeddings, 4096);
}

static void test_quantization_configs(void **state)
{
    (void)state;
    char err[256];
    kv_model m;
    kv_args a;
    kv_args_init(&a);
    const kv_model *v3 = load("deepseek-ai/DeepSeek-V3");
    assert_int_equal(v3->quant, KV_QUANT_FP8);
    assert_int_equal(v3->quant_block[0], 128);
    /* A 70B-shaped checkpoint in each format; weights sized without a flag. */
    static const char *const tmpl =
        "{\"model_type\":\"llama\",\"num_hidden_layers\":80,\"hidden_size\":8192,\"num_attention_heads\":64,"
        "\"num_key_value_heads\":8,\"intermediate_size\":28672,\"vocab_size\":128256,"
        "\"max_position_embeddings\":131072,\"tie_word_embeddings\":false,\"quantization_config\":%s}";
    struct {
        const char *qc;
        kv_quant q;
        double lo, hi; /* GiB */
    } cases[] = {
        {"{\"quant_method\":\"awq\",\"bits\":4,\"group_size\":128,\"zero_point\":true}", KV_QUANT_AWQ, 36.5, 37.5},
        {"{\"quant_method\":\"gptq\",\"bits\":4,\"group_size\":128,\"desc_act\":false}", KV_QUANT_GPTQ, 36.5, 37.6},
        {"{\"quant_method\":\"gptq\",\"bits\":8,\"group_size\":128}", KV_QUANT_GPTQ, 68.0, 70.0},
        {"{\"quant_method\":\"fp8\",\"activation_scheme\":\"dynamic\"}", KV_QUANT_FP8, 67.6, 67.7},
        {"{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"group_0\":{\"weights\":{\"num_bits\":8,"
         "\"type\":\"float\",\"strategy\":\"channel\"}}}}",
         KV_QUANT_COMPRESSED_TENSORS, 67.6, 67.7},
        {"{\"quant_method\":\"compressed-tensors\",\"config_groups\":{\"group_0\":{\"weights\":{\"num_bits\":4,"
         "\"group_size\":128}}}}",
         KV_QUANT_COMPRESSED_TENSORS, 35.5, 37.0},
        {"{\"quant_method\":\"bitsandbytes\",\"load_in_4bit\":true}", KV_QUANT_BITSANDBYTES, 38.0, 40.0},
    };
    char json[2048];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(json, sizeof json, tmpl, cases[i].qc);
        assert_int_equal(kv_model_parse(json, strlen(json), "q.json", &m, err, sizeof err), 0);
        assert_int_equal(m.quant, cases[i].q);
        double gib = kv_plan_weights_bytes(&m, &a, NULL, 0) / KV_GIB;
        if (gib < cases[i].lo || gib > cases[i].hi)
            print_error("case %zu: %.2f GiB\n", i, gib);
        assert_true(gib >= cases[i].lo && gib <= cases[i].hi);
    }
    /* A method kvlab cannot size is said, not guessed silently. */
    snprintf(json, sizeof json, tmpl, "{\"quant_method\":\"hqq\"}");
    assert_int_equal(kv_model_parse(json, strlen(json), "q.json", &m, err, sizeof err), 0);
    assert_int_equal(m.quant, KV_QUANT_UNKNOWN);
    char how[160];
    assert_true(kv_plan_weights_bytes(&m, &a, how, sizeof how) < 0);
    assert_non_null(strstr(how, "hqq"));
    kv_plan p;
    a.gpu_memory_gib = 200;
    assert_int_equal(kv_plan_compute_nofix(&m, NULL, &a, &p, err, sizeof err), 0);
    assert_true(p.num_notes >= 1);
    assert_non_null(strstr(p.notes[0], "--weights-gib"));
}

static void expect_error(const char *json, int code, const char *needle)
{
    kv_model m;
    char err[512] = "";
    int rc = kv_model_parse(json, strlen(json), "bad/config.json", &m, err, sizeof err);
    if (rc != code || !strstr(err, needle) || !strstr(err, "bad/config.json"))
        print_error("rc %d err '%s' (wanted %d, '%s')\n", rc, err, code, needle);
    assert_int_equal(rc, code);
    assert_non_null(strstr(err, needle));
    assert_non_null(strstr(err, "bad/config.json"));
}

#define BASE "\"num_hidden_layers\":2,\"hidden_size\":64,\"num_attention_heads\":4,\"intermediate_size\":128,"
static void test_config_errors(void **state)
{
    (void)state;
    expect_error("{not json", KV_MODEL_EPARSE, "not valid JSON");
    expect_error("[1,2]", KV_MODEL_EPARSE, "not a JSON object");
    expect_error("{\"hidden_size\":64}", KV_MODEL_EFIELD, "\"num_hidden_layers\"");
    expect_error("{" BASE "\"max_position_embeddings\":128}", KV_MODEL_EFIELD, "\"vocab_size\"");
    expect_error("{" BASE "\"vocab_size\":10}", KV_MODEL_EFIELD, "\"max_position_embeddings\"");
    expect_error("{\"num_hidden_layers\":\"32\"}", KV_MODEL_EFIELD, "whole number");
    expect_error("{\"num_hidden_layers\":-3}", KV_MODEL_EFIELD, "out of range");
    expect_error("{\"num_hidden_layers\":1e9}", KV_MODEL_EFIELD, "out of range");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"num_key_value_heads\":8}", KV_MODEL_EFIELD,
                 "exceeds num_attention_heads");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"torch_dtype\":\"int3\"}",
                 KV_MODEL_EFIELD, "\"torch_dtype\"");
    expect_error("{\"num_hidden_layers\":2,\"hidden_size\":65,\"num_attention_heads\":4,\"intermediate_size\":1,"
                 "\"vocab_size\":10,\"max_position_embeddings\":128}",
                 KV_MODEL_EFIELD, "\"hidden_size\"");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"sliding_window\":8,"
                 "\"layer_types\":[\"sliding_attention\"]}",
                 KV_MODEL_EFIELD, "\"layer_types\"");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"num_local_experts\":8}",
                 KV_MODEL_EFIELD, "\"num_experts_per_tok\"");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"kv_lora_rank\":512}", KV_MODEL_EFIELD,
                 "\"qk_rope_head_dim\"");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"tie_word_embeddings\":3}",
                 KV_MODEL_EFIELD, "\"tie_word_embeddings\"");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"quantization_config\":7}",
                 KV_MODEL_EFIELD, "\"quantization_config\"");
    /* What transformers and vLLM refuse. */
    expect_error("{\"num_hidden_layers\":2,\"hidden_size\":4096,\"num_attention_heads\":32,\"num_key_value_heads\":7,"
                 "\"intermediate_size\":1,\"vocab_size\":10,\"max_position_embeddings\":128}",
                 KV_MODEL_EFIELD, "not a multiple of num_key_value_heads (7)");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128} {\"x\":1}", KV_MODEL_EPARSE,
                 "text after the JSON object");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"model_type\":7}", KV_MODEL_EFIELD,
                 "\"model_type\" must be a string");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"torch_dtype\":16}", KV_MODEL_EFIELD,
                 "\"torch_dtype\" must be a string");
    expect_error("{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"text_config\":[1]}", KV_MODEL_EFIELD,
                 "\"text_config\" must be an object");
    expect_error("{" BASE "\"vocab_size\":\"10\",\"max_position_embeddings\":128}", KV_MODEL_EFIELD,
                 "\"vocab_size\" must be a whole number");
    /* A sparse text_config whose model_type has no class defaults. */
    expect_error("{\"model_type\":\"llava\",\"text_config\":{\"model_type\":\"nosuch\",\"vocab_size\":10}}",
                 KV_MODEL_EFIELD, "model_type 'nosuch' has no class defaults");
}

/* Keys as Python's json.load reads them: the last of a duplicate wins. */
/* Anything not a regular file gets kv_read_file's message, without blocking. */
static void test_not_regular_files(void **state)
{
    (void)state;
    kv_model m;
    char err[512];
    assert_int_equal(kv_model_load("/dev/zero", test_assets_dir(), &m, err, sizeof err), KV_MODEL_ENOTFOUND);
    assert_non_null(strstr(err, "/dev/zero: is a device, not a regular file"));
    char fifo[64];
    snprintf(fifo, sizeof fifo, "/tmp/kvlab-test-fifo-%d.json", (int)getpid());
    unlink(fifo);
    if (mkfifo(fifo, 0600) != 0)
        skip();
    assert_int_equal(kv_model_load(fifo, test_assets_dir(), &m, err, sizeof err), KV_MODEL_ENOTFOUND);
    assert_non_null(strstr(err, "is a pipe (FIFO), not a regular file"));
    unlink(fifo);
}

static void test_duplicate_keys_last_wins(void **state)
{
    (void)state;
    const char *txt = "{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128,\"vocab_size\":20}";
    kv_model m;
    char err[256];
    assert_int_equal(kv_model_parse(txt, strlen(txt), "dup.json", &m, err, sizeof err), KV_MODEL_OK);
    assert_int_equal(m.vocab_size, 20);
}

/* Multimodal checkpoints: llava's text_config names only what differs from
 * LlamaConfig; the rest comes from the class defaults; the vision tower up
 * to vision_feature_layer (-2: 23 of 24 CLIP layers) and the projector are
 * counted apart. Mistral Small 3.2 (Pixtral) and Gemma 3 load too. */
static void test_multimodal_configs(void **state)
{
    (void)state;
    kv_model *m = load("llava-hf/llava-1.5-7b-hf");
    assert_int_equal(m->num_hidden_layers, 32);   /* LlamaConfig default */
    assert_int_equal(m->hidden_size, 4096);
    assert_int_equal(m->intermediate_size, 11008);
    assert_int_equal(m->num_key_value_heads, 32); /* = heads */
    assert_int_equal(m->vocab_size, 32064);       /* given */
    assert_int_equal(m->max_position_embeddings, 4096);
    assert_int_equal(m->tie_word_embeddings, 0);
    assert_string_equal(m->torch_dtype, "float16");
    /* CLIP ViT-L/14-336, 23 layers of 12.6M, 0.6M embeddings, projector 21M */
    assert_true(m->params_vision > 290000000LL && m->params_vision < 320000000LL);
    m = load("mistralai/Mistral-Small-3.2-24B-Instruct-2506");
    assert_int_equal(m->num_hidden_layers, 40);
    assert_int_equal(m->sliding_window, 0); /* null in text_config, not MistralConfig's 4096 */
    assert_true(m->params_vision > 400000000LL && m->params_vision < 460000000LL);
    m = load("google/gemma-3-27b-it");
    assert_int_equal(m->vocab_size, 262208); /* Gemma3TextConfig default */
    assert_int_equal(m->tie_word_embeddings, 1);
    assert_true(m->params_vision > 400000000LL && m->params_vision < 440000000LL);
    m = load("meta-llama/Llama-3.1-8B-Instruct");
    assert_int_equal(m->params_vision, 0);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_resolution(void **state)
{
    (void)state;
    char err[1024], dir[] = "/tmp/kvlab-test-model-XXXXXX", p[2048];
    assert_non_null(mkdtemp(dir));
    static const char cfg[] = "{" BASE "\"vocab_size\":10,\"max_position_embeddings\":128}";
    /* a folder holding a config.json, and the file itself */
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_file(p, cfg);
    kv_model m;
    assert_int_equal(kv_model_load(dir, test_assets_dir(), &m, err, sizeof err), 0);
    assert_int_equal(m.num_hidden_layers, 2);
    assert_int_equal(kv_model_load(p, test_assets_dir(), &m, err, sizeof err), 0);
    assert_string_equal(m.path, p);
    /* the HF cache: $HF_HUB_CACHE/models--org--name/snapshots/<rev>/config.json */
    char hub[1100];
    snprintf(hub, sizeof hub, "%s/hub", dir);
    mkdir(hub, 0700);
    snprintf(p, sizeof p, "%s/models--acme--tiny", hub);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/models--acme--tiny/snapshots", hub);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/models--acme--tiny/snapshots/abc123", hub);
    mkdir(p, 0700);
    snprintf(p, sizeof p, "%s/models--acme--tiny/snapshots/abc123/config.json", hub);
    write_file(p, cfg);
    setenv("HF_HUB_CACHE", hub, 1);
    assert_int_equal(kv_model_load("acme/tiny", test_assets_dir(), &m, err, sizeof err), 0);
    assert_string_equal(m.id, "acme/tiny");
    unsetenv("HF_HUB_CACHE");
    setenv("HF_HOME", dir, 1); /* $HF_HOME/hub */
    assert_int_equal(kv_model_load("acme/tiny", test_assets_dir(), &m, err, sizeof err), 0);
    /* not anywhere: one line naming where it looked */
    assert_int_equal(kv_model_load("acme/missing", test_assets_dir(), &m, err, sizeof err), KV_MODEL_ENOTFOUND);
    assert_non_null(strstr(err, "unknown model 'acme/missing'"));
    assert_non_null(strstr(err, "kvlab models"));
    unsetenv("HF_HOME");
    /* a near catalogue id is named: the base model for its Instruct variant, a typo */
    assert_int_equal(kv_model_load("meta-llama/Llama-3.1-8B", test_assets_dir(), &m, err, sizeof err),
                     KV_MODEL_ENOTFOUND);
    assert_string_equal(err, "unknown model 'meta-llama/Llama-3.1-8B' (did you mean meta-llama/Llama-3.1-8B-Instruct?); "
                             "see kvlab models");
    assert_int_equal(kv_model_load("Qwen/Qwen2.5-7B-Instrukt", test_assets_dir(), &m, err, sizeof err),
                     KV_MODEL_ENOTFOUND);
    assert_non_null(strstr(err, "did you mean Qwen/Qwen2.5-7B-Instruct"));
    /* a path that is not there says so, not "unknown model" */
    snprintf(p, sizeof p, "%s/nowhere/config.json", dir);
    assert_int_equal(kv_model_load(p, test_assets_dir(), &m, err, sizeof err), KV_MODEL_ENOTFOUND);
    char want[2100];
    snprintf(want, sizeof want, "no such file or folder: %s", p);
    assert_string_equal(err, want);
    /* a folder without config.json */
    assert_int_equal(kv_model_load(hub, test_assets_dir(), &m, err, sizeof err), KV_MODEL_ENOTFOUND);
    assert_non_null(strstr(err, "no config.json"));
    /* a config.json that is not JSON: the file is named */
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_file(p, "{oops");
    assert_int_equal(kv_model_load(dir, test_assets_dir(), &m, err, sizeof err), KV_MODEL_EPARSE);
    assert_non_null(strstr(err, p));
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_catalogue_loads),
        cmocka_unit_test(test_param_counts_vs_sources),
        cmocka_unit_test(test_params_split),
        cmocka_unit_test(test_bytes_per_token),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_max_len_and_rope),
        cmocka_unit_test(test_quantization_configs),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_duplicate_keys_last_wins),
        cmocka_unit_test(test_not_regular_files),
        cmocka_unit_test(test_multimodal_configs),
        cmocka_unit_test(test_resolution),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
