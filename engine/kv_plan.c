/* kv_plan: vLLM's start-up memory plan, per GPU. */
#include "kv_plan.h"
#include "kv_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fixed terms (GiB) where vLLM measures and kvlab estimates: the seed's
 * figures for vLLM ~0.30 (2026). */
#define CUDAGRAPH_GIB 0.60    /* "Estimated CUDA graph memory: 0.60 GiB total" */
#define CUDA_CONTEXT_GIB 0.60 /* the context exists before load_model */
#define NCCL_GIB 1.00         /* per GPU when tp > 1 (graphs + context + NCCL = 2.20) */

/* Activation peak of the profile run (determine_available_memory ->
 * profile_run: one dummy forward pass of max_num_batched_tokens tokens):
 *
 *   activation = T x (2 bytes x k x (hidden + I) / tp + c)
 *
 * T = max_num_batched_tokens, I = the widest MLP a token passes through
 * (dense: intermediate_size; MoE: num_experts_per_tok x moe_intermediate_size
 * + shared experts), k = 6.2578 live 16-bit values per unit of width, and
 * c = 52,428.8 bytes per token of workspace that does not shard (0.40 GiB at
 * 8192 tokens). k and c are fit to the seed's three figures (vLLM 0.30-era
 * profile, 000_e8043f3d78857a1c.txt): Llama-3.1-8B at 8192 tokens 2.16 GiB,
 * 70B 3.92 GiB, 70B at tp=2 2.16 GiB (same hidden/tp + I/tp as 8B at tp=1).
 *
 * Other vLLM versions measure differently (shared/vectors/
 * real-logs-calibration.json): v0 engines (0.6.x, Dec 2024) logged
 * 0.2-1.2 GiB for the 8B because chunked prefill kept the profile batch
 * small; v1 0.11 on H100 logged 4.76 GiB for the 8B and 4.84 GiB for a
 * 70B FP8 at tp=2, about twice this formula, because it also warms up the
 * sampler over many dummy requests (the vocabulary-wide logits dominate for
 * small models: 5.56 GiB for Qwen3-0.6B). The formula follows the seed;
 * --activation-gib takes a measured figure. */
#define ACT_K 6.2578
#define ACT_C 52428.8

double kv_plan_activation_bytes(const kv_model *m, int32_t tp, int64_t mnbt)
{
    if (tp < 1)
        tp = 1;
    double width = m->intermediate_size;
    if (m->num_experts > 0) {
        double moe = (double)m->num_experts_per_tok * m->moe_intermediate_size +
                     (double)m->num_shared_experts * m->moe_intermediate_size + m->shared_expert_intermediate_size;
        width = m->first_k_dense_replace > 0 && m->intermediate_size > moe ? m->intermediate_size : moe;
    }
    return (double)mnbt * (2.0 * ACT_K * (m->hidden_size + width) / tp + ACT_C);
}

static void appendf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void appendf(char *buf, size_t n, const char *fmt, ...)
{
    size_t l = strlen(buf);
    if (l + 1 >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + l, n - l, fmt, ap);
    va_end(ap);
}

/* Weights as vLLM loads them (every expert resident; embeddings and lm_head
 * 16-bit; everything sharded by tp):
 *   16-bit      2 bytes per parameter (4 with --dtype float32)
 *   fp8         1 byte per linear weight (+ fp32 scale per weight block
 *               when the checkpoint gives weight_block_size)
 *   awq         4-bit weight + fp16 scale and 4-bit zero per group of 128
 *               (AWQLinearMethod: qweight, scales, qzeros)
 *   gptq        bits-bit weight + fp16 scale and packed zero per group +
 *               int32 g_idx per input row (GPTQLinearMethod keeps all four);
 *               approximated as 4 bytes per group of input rows
 *   compressed-tensors  num_bits per weight + 16-bit scale per group
 *   mxfp4       4-bit experts + one 8-bit scale per 32 (gpt-oss), the rest 16-bit
 *   bitsandbytes  nf4: 4-bit + fp32 absmax per 64; int8: 1 byte per weight */
double kv_plan_weights_bytes(const kv_model *m, const kv_args *a, char *how, size_t howlen)
{
    char dummy[8];
    if (!how) {
        how = dummy;
        howlen = sizeof dummy;
    }
    how[0] = '\0';
    int tp = a->tensor_parallel_size > 0 ? a->tensor_parallel_size : 1;
    double wide = a->dtype == KV_ARGS_DTYPE_FP32 ? 4 : 2;
    double lin = (double)m->params_linear, emb = (double)m->params_embedding, oth = (double)m->params_other;
    double rest = (emb + oth) * wide; /* embeddings, lm_head, norms, biases */
    kv_quant q = m->quant;
    int bits = m->quant_bits, group = m->quant_group_size;
    switch (a->quantization) {
    case KV_ARGS_QUANT_FP8: q = KV_QUANT_FP8; bits = 8; break;
    case KV_ARGS_QUANT_AWQ: q = KV_QUANT_AWQ; if (m->quant != KV_QUANT_AWQ) { bits = 4; group = 128; } break;
    case KV_ARGS_QUANT_GPTQ: q = KV_QUANT_GPTQ; if (m->quant != KV_QUANT_GPTQ) { bits = 4; group = 128; } break;
    case KV_ARGS_QUANT_BITSANDBYTES:
        q = KV_QUANT_BITSANDBYTES;
        if (m->quant != KV_QUANT_BITSANDBYTES) { bits = 4; group = 64; }
        break;
    case KV_ARGS_QUANT_MXFP4: q = KV_QUANT_MXFP4; bits = 4; group = 32; break;
    case KV_ARGS_QUANT_COMPRESSED_TENSORS:
        q = m->quant == KV_QUANT_COMPRESSED_TENSORS ? q : KV_QUANT_UNKNOWN;
        break;
    default: break;
    }
    double bytes = 0;
    const char *name = "";
    switch (q) {
    case KV_QUANT_NONE:
        bytes = lin * wide + rest;
        snprintf(how, howlen, "%.2fe9 params x %.0f bytes", (lin + emb + oth) / 1e9, wide);
        break;
    case KV_QUANT_FP8: {
        double scales = 0;
        if (m->quant_block[0] > 0 && m->quant_block[1] > 0)
            scales = lin / ((double)m->quant_block[0] * m->quant_block[1]) * 4;
        bytes = lin + scales + rest;
        snprintf(how, howlen, "%.2fe9 linear x 1 byte (fp8) + %.2fe9 x %.0f bytes", lin / 1e9, (emb + oth) / 1e9, wide);
        break;
    }
    case KV_QUANT_AWQ:
    case KV_QUANT_GPTQ:
    case KV_QUANT_COMPRESSED_TENSORS: {
        if (bits <= 0)
            bits = 4;
        double g = group > 0 ? group : 0;
        double per_group = 0;
        if (g > 0) {
            per_group = 2; /* 16-bit scale */
            if (q == KV_QUANT_AWQ || q == KV_QUANT_GPTQ)
                per_group += bits / 8.0; /* packed zero point */
            if (q == KV_QUANT_GPTQ)
                per_group += 4.0 * g / (double)m->hidden_size; /* int32 g_idx per input row, spread over outputs */
        }
        bytes = lin * bits / 8.0 + (g > 0 ? lin / g * per_group : 0) + rest;
        name = q == KV_QUANT_AWQ ? "awq" : q == KV_QUANT_GPTQ ? "gptq" : "compressed-tensors";
        if (g > 0)
            snprintf(how, howlen, "%.2fe9 linear x %d bits + scales/%s per %d (%s) + %.2fe9 x %.0f bytes", lin / 1e9,
                     bits, q == KV_QUANT_COMPRESSED_TENSORS ? "" : "zeros", group, name, (emb + oth) / 1e9, wide);
        else
            snprintf(how, howlen, "%.2fe9 linear x %d bits (%s) + %.2fe9 x %.0f bytes", lin / 1e9, bits, name,
                     (emb + oth) / 1e9, wide);
        break;
    }
    case KV_QUANT_MXFP4: {
        double ex = (double)m->params_expert_linear;
        bytes = ex * (0.5 + 1.0 / 32) + (lin - ex) * wide + rest;
        snprintf(how, howlen, "%.2fe9 expert x 4.25 bits (mxfp4) + %.2fe9 x %.0f bytes", ex / 1e9,
                 (lin - ex + emb + oth) / 1e9, wide);
        break;
    }
    case KV_QUANT_BITSANDBYTES:
        if (bits == 8)
            bytes = lin + rest;
        else
            bytes = lin * (0.5 + 4.0 / 64) + rest;
        snprintf(how, howlen, "%.2fe9 linear x %s (bitsandbytes) + %.2fe9 x %.0f bytes", lin / 1e9,
                 bits == 8 ? "1 byte" : "4.5 bits", (emb + oth) / 1e9, wide);
        break;
    default:
        snprintf(how, howlen, "quant_method '%s' in config.json: kvlab cannot size these weights",
                 m->quant_method[0] ? m->quant_method : kv_args_quant_name(a->quantization));
        return -1;
    }
    if (tp > 1)
        appendf(how, howlen, " / tp %d", tp);
    return bytes / tp;
}

const char *kv_plan_error_name(kv_plan_error e)
{
    switch (e) {
    case KV_PLAN_ERR_FREE_MEMORY: return "free_memory";
    case KV_PLAN_ERR_NO_KV_MEMORY: return "no_memory_for_cache_blocks";
    case KV_PLAN_ERR_MAX_MODEL_LEN: return "max_model_len";
    case KV_PLAN_ERR_AUTO_FIT: return "auto_fit";
    case KV_PLAN_ERR_WEIGHTS_OOM: return "weights_oom";
    case KV_PLAN_ERR_PROFILE_OOM: return "profile_oom";
    default: return "";
    }
}

/* ------------------------------------------------------------ KV sizing */

/* double -> int64 without overflow (hostile configs and flags). */
static int64_t clamp_i64(double v)
{
    if (!(v > 0))
        return 0;
    return v >= 9.0e18 ? (int64_t)9.0e18 : (int64_t)v;
}

int64_t kv_plan_request_bytes(const kv_plan *p, int64_t len)
{
    if (len <= 0)
        return 0;
    int64_t bs = p->block_size;
    double full = p->num_layers - p->num_sliding_layers;
    double need = full * (double)kv_cdiv(len, bs) * (double)p->page_size_bytes;
    if (p->num_sliding_layers > 0) {
        int64_t toks = (int64_t)p->sliding_window - 1 + p->max_num_batched_tokens;
        if (toks > len)
            toks = len;
        need += (double)p->num_sliding_layers * (double)(kv_cdiv(toks, bs) + 1) * (double)p->page_size_bytes;
    }
    return clamp_i64(need);
}

/* Blocks one request of len tokens takes from the shared pool: the sum over
 * KV cache groups of one layer's need (get_max_concurrency_for_kv_cache_config). */
static int64_t request_blocks(const kv_plan *p, int64_t len)
{
    int64_t bs = p->block_size, gs = p->group_size > 0 ? p->group_size : 1;
    int64_t full = p->num_layers - p->num_sliding_layers;
    int64_t nfull = p->num_sliding_layers ? kv_cdiv(full, gs) : 1;
    int64_t blocks = full > 0 ? nfull * kv_cdiv(len, bs) : 0;
    if (p->num_sliding_layers > 0) {
        int64_t nsw = p->num_sliding_layers == p->num_layers ? 1 : kv_cdiv(p->num_sliding_layers, gs);
        int64_t toks = (int64_t)p->sliding_window - 1 + p->max_num_batched_tokens;
        if (toks > len)
            toks = len;
        blocks += nsw * (kv_cdiv(toks, bs) + 1);
    }
    return blocks;
}

int64_t kv_plan_estimate_max_model_len(const kv_plan *p, double available, int64_t max_len)
{
    if (max_len < 1 || (double)kv_plan_request_bytes(p, 1) > available)
        return 0;
    int64_t lo = 1, hi = max_len;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if ((double)kv_plan_request_bytes(p, mid) <= available)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Python's str(round(x, 2)) for a GiB figure, as vLLM's format_gib prints:
 * 16.0, 2.83, 0.5. */
static void fmt_gib_py(char *b, size_t n, double bytes)
{
    double g = round(bytes / KV_GIB * 100.0) / 100.0;
    snprintf(b, n, "%.2f", g);
    size_t l = strlen(b);
    if (l > 3 && b[l - 1] == '0')
        b[l - 1] = '\0';
}

/* 123456 -> "123,456" */
static void log_line(kv_plan *p, const char *level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void log_line(kv_plan *p, const char *level, const char *fmt, ...)
{
    if (p->num_log >= KV_PLAN_MAX_LOG)
        return;
    char *b = p->log[p->num_log++];
    int l = snprintf(b, sizeof p->log[0], "%s ", level);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b + l, sizeof p->log[0] - (size_t)l, fmt, ap);
    va_end(ap);
}

static void note(kv_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(kv_plan *p, const char *fmt, ...)
{
    if (p->num_notes >= KV_PLAN_MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->notes[p->num_notes++], sizeof p->notes[0], fmt, ap);
    va_end(ap);
}

static void set_term(kv_plan *p, int i, const char *name, double bytes, int over, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void set_term(kv_plan *p, int i, const char *name, double bytes, int over, const char *fmt, ...)
{
    kv_plan_term *t = &p->terms[i];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->bytes = bytes;
    t->overridden = over;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->how, sizeof t->how, fmt, ap);
    va_end(ap);
}

static void fail(kv_plan *p, kv_plan_error kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(kv_plan *p, kv_plan_error kind, const char *fmt, ...)
{
    p->starts = 0;
    p->error_kind = kind;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->error, sizeof p->error, fmt, ap);
    va_end(ap);
}

static int is_a100(const kv_gpu *g)
{
    return g && (strstr(g->id, "a100") || strstr(g->name, "A100"));
}

int kv_plan_compute_nofix(const kv_model *m, const kv_gpu *gpu, const kv_args *a, kv_plan *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    char buf[256];
    const int tp = a->tensor_parallel_size;
    if (tp < 1)
        return kv_errf(err, errlen, KV_PLAN_EINVAL, "tensor_parallel_size must be at least 1, got %d", tp);
    if (m->num_hidden_layers < 1 || m->num_attention_heads < 1 || m->hidden_size < 1)
        return kv_errf(err, errlen, KV_PLAN_EINVAL, "the model has no shape (was it loaded?)");
    if (m->num_attention_heads % tp)
        return kv_errf(err, errlen, KV_PLAN_EINVAL,
                       "Total number of attention heads (%d) must be divisible by tensor parallel size (%d).",
                       m->num_attention_heads, tp);
    if (a->gpu_memory_gib < 0 && !gpu)
        return kv_errf(err, errlen, KV_PLAN_EINVAL, "no GPU: give --gpu NAME (see kvlab gpus) or --gpu-memory-gib X");
    if (a->quantization != KV_ARGS_QUANT_NONE && m->quant != KV_QUANT_NONE) {
        const char *flag = kv_args_quant_name(a->quantization);
        int same = (a->quantization == KV_ARGS_QUANT_FP8 && m->quant == KV_QUANT_FP8) ||
                   (a->quantization == KV_ARGS_QUANT_AWQ && m->quant == KV_QUANT_AWQ) ||
                   (a->quantization == KV_ARGS_QUANT_GPTQ && m->quant == KV_QUANT_GPTQ) ||
                   (a->quantization == KV_ARGS_QUANT_MXFP4 && m->quant == KV_QUANT_MXFP4) ||
                   (a->quantization == KV_ARGS_QUANT_BITSANDBYTES && m->quant == KV_QUANT_BITSANDBYTES) ||
                   (a->quantization == KV_ARGS_QUANT_COMPRESSED_TENSORS && m->quant == KV_QUANT_COMPRESSED_TENSORS);
        if (!same)
            return kv_errf(err, errlen, KV_PLAN_EINVAL,
                           "Quantization method specified in the model config (%s) does not match the quantization "
                           "method specified in the `quantization` argument (%s).",
                           m->quant_method, flag);
    }
    if (a->kv_cache_dtype == KV_ARGS_KV_FP8_DS_MLA && !m->is_mla)
        return kv_errf(err, errlen, KV_PLAN_EINVAL, "--kv-cache-dtype fp8_ds_mla needs an MLA model (DeepSeek V2/V3)");

    /* The card. */
    if (gpu) {
        snprintf(p->gpu_id, sizeof p->gpu_id, "%s", gpu->id);
        snprintf(p->gpu_name, sizeof p->gpu_name, "%s", gpu->name);
    } else {
        snprintf(p->gpu_id, sizeof p->gpu_id, "custom");
        snprintf(p->gpu_name, sizeof p->gpu_name, "custom card");
    }
    double total = a->gpu_memory_gib >= 0 ? a->gpu_memory_gib * KV_GIB : gpu->reported_total_bytes;
    p->gpu_total_bytes = total;
    p->gpu_used_bytes = a->gpu_used_gib > 0 ? a->gpu_used_gib * KV_GIB : 0;
    p->gpu_memory_utilization = a->gpu_memory_utilization;
    p->tensor_parallel_size = tp;
    p->num_ranks = tp;
    p->enforce_eager = a->enforce_eager;
    p->enable_prefix_caching = a->enable_prefix_caching;

    /* Scheduler defaults (arg_utils.py _set_default_args, API server):
     * big non-A100 cards (>= 70 GiB) get 8192 tokens / 1024 seqs, others 2048 / 256. */
    int big = total >= 70.0 * KV_GIB && !is_a100(gpu);
    int64_t mnbt = a->max_num_batched_tokens > 0 ? a->max_num_batched_tokens : (big ? 8192 : 2048);
    int64_t mns = a->max_num_seqs > 0 ? a->max_num_seqs : (big ? 1024 : 256);
    if (a->max_num_seqs <= 0 && mns > mnbt)
        mns = mnbt;
    if (mnbt < mns)
        return kv_errf(err, errlen, KV_PLAN_EINVAL,
                       "max_num_batched_tokens (%lld) must be greater than or equal to max_num_seqs (%lld).",
                       (long long)mnbt, (long long)mns);
    p->max_num_batched_tokens = mnbt;
    p->max_num_seqs = mns;

    p->model_max_model_len = m->max_position_embeddings;
    int64_t mml = m->max_position_embeddings;
    if (a->max_model_len == KV_MAX_MODEL_LEN_AUTO)
        p->max_model_len_auto = 1;
    else if (a->max_model_len <= 0)
        p->max_model_len_default = 1;
    else {
        if (a->max_model_len > m->max_position_embeddings)
            return kv_errf(err, errlen, KV_PLAN_EINVAL,
                           "User-specified max_model_len (%lld) is greater than the derived max_model_len "
                           "(max_position_embeddings=%lld in model's config.json). To allow overriding this maximum, "
                           "set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.",
                           (long long)a->max_model_len, (long long)m->max_position_embeddings);
        mml = a->max_model_len;
    }
    if (!a->enable_chunked_prefill && !p->max_model_len_auto && mnbt < mml)
        return kv_errf(err, errlen, KV_PLAN_EINVAL,
                       "max_num_batched_tokens (%lld) is smaller than max_model_len (%lld). This effectively limits "
                       "the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. "
                       "Please increase max_num_batched_tokens or decrease max_model_len.",
                       (long long)mnbt, (long long)mml);
    p->max_model_len = mml;

    /* KV geometry (get_num_kv_heads, AttentionSpec page size). */
    int act_bytes = a->dtype == KV_ARGS_DTYPE_FP32 ? 4 : 2;
    const char *wdt = a->dtype == KV_ARGS_DTYPE_FP32   ? "float32"
                      : a->dtype == KV_ARGS_DTYPE_FP16 ? "float16"
                      : a->dtype == KV_ARGS_DTYPE_BF16 ? "bfloat16"
                      : !strcmp(m->torch_dtype, "float16") ? "float16"
                                                         : "bfloat16";
    p->block_size = a->block_size > 0 ? a->block_size : 16;
    p->num_layers = m->num_hidden_layers;
    p->num_sliding_layers = m->num_sliding_layers;
    p->sliding_window = m->sliding_window;
    int kvb = act_bytes;
    switch (a->kv_cache_dtype) {
    case KV_ARGS_KV_FP8: case KV_ARGS_KV_FP8_DS_MLA: kvb = 1; break;
    case KV_ARGS_KV_FP8_PER_TOKEN_HEAD: case KV_ARGS_KV_INT8_PER_TOKEN_HEAD:
        kvb = 1;
        note(p, "--kv-cache-dtype %s: 1 byte per value; its scales (per token and head) are not counted",
             kv_args_kv_dtype_name(a->kv_cache_dtype));
        break;
    case KV_ARGS_KV_BF16: case KV_ARGS_KV_FP16: kvb = 2; break;
    default: break;
    }
    snprintf(p->kv_cache_dtype, sizeof p->kv_cache_dtype, "%s",
             a->kv_cache_dtype == KV_ARGS_KV_AUTO ? wdt : kv_args_kv_dtype_name(a->kv_cache_dtype));
    p->kv_dtype_bytes = kvb;
    if (m->is_mla) {
        p->kv_factor = 1;
        p->kv_heads_per_gpu = 1;
        p->head_size = m->kv_lora_rank + m->qk_rope_head_dim;
        if (a->kv_cache_dtype == KV_ARGS_KV_FP8_DS_MLA)
            p->head_size = 656; /* 512 fp8 latent + 4 fp32 scales + 64 bf16 rope values */
    } else {
        p->kv_factor = 2;
        p->kv_heads_per_gpu = m->num_key_value_heads / tp;
        if (p->kv_heads_per_gpu < 1)
            p->kv_heads_per_gpu = 1;
        p->head_size = m->head_dim;
    }
    p->page_size_bytes = (int64_t)p->kv_factor * p->block_size * p->kv_heads_per_gpu * p->head_size * kvb;
    p->kv_bytes_per_token = p->page_size_bytes * p->num_layers / p->block_size;
    /* KV cache groups (_get_kv_cache_groups_uniform_page_size): full and
     * sliding layers form groups of group_size layers that share block ids. */
    int full = p->num_layers - p->num_sliding_layers, sw = p->num_sliding_layers;
    if (sw == 0 || full == 0) {
        p->num_kv_groups = 1;
        p->group_size = p->num_layers;
    } else {
        int lo = full < sw ? full : sw, hi = full < sw ? sw : full;
        p->group_size = hi < lo * 1.25 ? hi : lo;
        p->num_kv_groups = (int)(kv_cdiv(full, p->group_size) + kv_cdiv(sw, p->group_size));
    }

    /* The terms. */
    char how[160];
    double w;
    int w_over = a->weights_gib >= 0;
    if (w_over) {
        w = a->weights_gib * KV_GIB;
        snprintf(how, sizeof how, "--weights-gib");
    } else {
        w = kv_plan_weights_bytes(m, a, how, sizeof how);
        if (w < 0) {
            kv_args b = *a;
            b.quantization = KV_ARGS_QUANT_NONE;
            kv_model m16 = *m;
            m16.quant = KV_QUANT_NONE;
            note(p, "%s; sized as 16-bit here (an upper bound): pass --weights-gib with the real figure", how);
            w = kv_plan_weights_bytes(&m16, &b, how, sizeof how);
            appendf(how, sizeof how, " (unsized %s: 16-bit assumed)", m->quant_method);
        }
    }
    p->weights_bytes = w;
    {
        kv_quant q = m->quant;
        if (a->quantization != KV_ARGS_QUANT_NONE)
            snprintf(p->weights_dtype, sizeof p->weights_dtype, "%s", kv_args_quant_name(a->quantization));
        else if (q != KV_QUANT_NONE)
            snprintf(p->weights_dtype, sizeof p->weights_dtype, "%s", m->quant_method);
        else
            snprintf(p->weights_dtype, sizeof p->weights_dtype, "%s", wdt);
    }
    set_term(p, KV_PLAN_TERM_WEIGHTS, "weights", w, w_over, "%s", how);

    if (a->activation_gib >= 0) {
        p->activation_bytes = a->activation_gib * KV_GIB;
        set_term(p, KV_PLAN_TERM_ACTIVATION, "activation", p->activation_bytes, 1, "--activation-gib");
    } else {
        p->activation_bytes = kv_plan_activation_bytes(m, tp, mnbt);
        set_term(p, KV_PLAN_TERM_ACTIVATION, "activation", p->activation_bytes, 0,
                 "profile run of %lld batched tokens%s", (long long)mnbt, tp > 1 ? " (sharded)" : "");
    }
    if (a->cudagraph_gib >= 0) {
        p->cudagraph_bytes = a->cudagraph_gib * KV_GIB;
        set_term(p, KV_PLAN_TERM_CUDAGRAPH, "cudagraph", p->cudagraph_bytes, 1, "--cudagraph-gib");
    } else if (a->enforce_eager) {
        set_term(p, KV_PLAN_TERM_CUDAGRAPH, "cudagraph", 0, 0, "--enforce-eager: no CUDA graphs");
    } else {
        p->cudagraph_bytes = CUDAGRAPH_GIB * KV_GIB;
        set_term(p, KV_PLAN_TERM_CUDAGRAPH, "cudagraph", p->cudagraph_bytes, 0, "estimate (vLLM profiles a capture)");
    }
    if (a->cuda_context_gib >= 0) {
        p->cuda_context_bytes = a->cuda_context_gib * KV_GIB;
        set_term(p, KV_PLAN_TERM_CUDA_CONTEXT, "cuda_context", p->cuda_context_bytes, 1, "--cuda-context-gib");
    } else {
        p->cuda_context_bytes = CUDA_CONTEXT_GIB * KV_GIB;
        set_term(p, KV_PLAN_TERM_CUDA_CONTEXT, "cuda_context", p->cuda_context_bytes, 0, "typical CUDA context");
    }
    if (a->nccl_gib >= 0) {
        p->nccl_bytes = a->nccl_gib * KV_GIB;
        set_term(p, KV_PLAN_TERM_NCCL, "nccl", p->nccl_bytes, 1, "--nccl-gib");
    } else if (tp > 1) {
        p->nccl_bytes = NCCL_GIB * KV_GIB;
        set_term(p, KV_PLAN_TERM_NCCL, "nccl", p->nccl_bytes, 0, "NCCL buffers, tp %d", tp);
    } else {
        set_term(p, KV_PLAN_TERM_NCCL, "nccl", 0, 0, "none at tp 1");
    }
    double non_kv = p->weights_bytes + p->activation_bytes + p->cudagraph_bytes + p->cuda_context_bytes + p->nccl_bytes;
    if (a->kv_cache_memory_bytes > 0) {
        p->kv_cache_memory_bytes_set = 1;
        p->available_kv_bytes = (double)a->kv_cache_memory_bytes;
        p->budget_bytes = non_kv + p->available_kv_bytes;
        set_term(p, KV_PLAN_TERM_BUDGET, "budget", p->budget_bytes, 1,
                 "--kv-cache-memory-bytes: the terms + the pool (utilization ignored)");
    } else {
        p->budget_bytes = total * a->gpu_memory_utilization;
        p->available_kv_bytes = p->budget_bytes - non_kv;
        set_term(p, KV_PLAN_TERM_BUDGET, "budget", p->budget_bytes, a->gpu_memory_gib >= 0, "%.2f GiB x %g",
                 total / KV_GIB, a->gpu_memory_utilization);
    }
    set_term(p, KV_PLAN_TERM_KV_CACHE, "kv_cache", p->available_kv_bytes, p->kv_cache_memory_bytes_set,
             p->kv_cache_memory_bytes_set ? "--kv-cache-memory-bytes" : "budget - the terms above");

    /* 1. init_device: the free-memory check. vLLM initialises NCCL before it
     * takes the memory snapshot (gpu_worker.py init_device; vllm-internals.md
     * section 5), so at tp > 1 the buffers are already gone from "free": a
     * utilization that just fits on one GPU can fail the check on two. */
    p->free_at_start_bytes = total - p->gpu_used_bytes - p->cuda_context_bytes - p->nccl_bytes;
    double requested = total * a->gpu_memory_utilization;
    if (!p->kv_cache_memory_bytes_set && p->free_at_start_bytes < requested) {
        fail(p, KV_PLAN_ERR_FREE_MEMORY,
             "Free memory on device cuda:0 (%.2f/%.2f GiB) on startup is less than desired GPU memory utilization "
             "(%g, %.2f GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
             p->free_at_start_bytes / KV_GIB, total / KV_GIB, a->gpu_memory_utilization, requested / KV_GIB);
        log_line(p, "ERROR", "ValueError: %s", p->error);
        return KV_PLAN_OK;
    }
    /* 2. load_model. */
    double free_now = total - p->gpu_used_bytes - p->cuda_context_bytes - p->nccl_bytes;
    if (p->weights_bytes > free_now) {
        fail(p, KV_PLAN_ERR_WEIGHTS_OOM,
             "torch.OutOfMemoryError: CUDA out of memory while loading the weights: %.2f GiB needed, GPU 0 has a "
             "total capacity of %.2f GiB of which %.2f GiB is free.",
             p->weights_bytes / KV_GIB, total / KV_GIB, free_now / KV_GIB);
        log_line(p, "ERROR", "%s", p->error);
        return KV_PLAN_OK;
    }
    log_line(p, "INFO", "Model loading took %.2f GiB memory", p->weights_bytes / KV_GIB);
    /* 3. profile_run. */
    if (p->weights_bytes + p->activation_bytes > free_now) {
        fail(p, KV_PLAN_ERR_PROFILE_OOM,
             "torch.OutOfMemoryError: CUDA out of memory in the profile run (%lld batched tokens): weights %.2f GiB + "
             "activations %.2f GiB, GPU 0 has a total capacity of %.2f GiB of which %.2f GiB was free after loading.",
             (long long)mnbt, p->weights_bytes / KV_GIB, p->activation_bytes / KV_GIB, total / KV_GIB,
             (free_now - p->weights_bytes) / KV_GIB);
        log_line(p, "ERROR", "%s", p->error);
        return KV_PLAN_OK;
    }
    if (p->cudagraph_bytes > 0)
        log_line(p, "INFO", "Estimated CUDA graph memory: %.2f GiB total", p->cudagraph_bytes / KV_GIB);
    if (p->kv_cache_memory_bytes_set)
        log_line(p, "INFO", "Using --kv-cache-memory-bytes=%lld: gpu_memory_utilization is ignored",
                 (long long)a->kv_cache_memory_bytes);
    log_line(p, "INFO", "Available KV cache memory: %.2f GiB", p->available_kv_bytes / KV_GIB);
    if (p->num_sliding_layers && p->num_kv_groups > 1)
        note(p, "%d of %d layers use a %d-token sliding window: %d KV cache groups of %d layers share the pool",
             p->num_sliding_layers, p->num_layers, p->sliding_window, p->num_kv_groups, p->group_size);

    /* 4. get_kv_cache_configs: the memory checks. */
    int64_t per_block = p->page_size_bytes * p->group_size;
    p->num_blocks_computed = clamp_i64(floor(p->available_kv_bytes / (double)per_block));
    p->kv_cache_tokens_unrounded = clamp_i64(floor(p->available_kv_bytes / (double)p->kv_bytes_per_token));
    if (p->available_kv_bytes <= 0) {
        fail(p, KV_PLAN_ERR_NO_KV_MEMORY,
             "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
             "the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.");
        log_line(p, "ERROR", "ValueError: %s", p->error);
        return KV_PLAN_OK;
    }
    if (p->max_model_len_auto) {
        int64_t est = kv_plan_estimate_max_model_len(p, p->available_kv_bytes, m->max_position_embeddings);
        if (est == 0) {
            fail(p, KV_PLAN_ERR_AUTO_FIT,
                 "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. Try "
                 "increasing `gpu_memory_utilization`.");
            log_line(p, "ERROR", "ValueError: %s", p->error);
            return KV_PLAN_OK;
        }
        fmt_gib_py(buf, sizeof buf, p->available_kv_bytes);
        if (est < m->max_position_embeddings)
            log_line(p, "INFO",
                     "Auto-fit max_model_len: reduced from %lld to %lld to fit in available GPU memory (%s GiB "
                     "available for KV cache)",
                     (long long)m->max_position_embeddings, (long long)est, buf);
        else
            log_line(p, "INFO", "Auto-fit max_model_len: full model context length %lld fits in available GPU memory",
                     (long long)est);
        p->max_model_len = est;
    }
    p->needed_bytes = kv_plan_request_bytes(p, p->max_model_len);
    p->blocks_per_request = request_blocks(p, p->max_model_len);
    if ((double)p->needed_bytes > p->available_kv_bytes) {
        p->estimated_max_model_len = kv_plan_estimate_max_model_len(p, p->available_kv_bytes, p->max_model_len);
        char need[32], avail[32], based[160] = "";
        fmt_gib_py(need, sizeof need, (double)p->needed_bytes);
        fmt_gib_py(avail, sizeof avail, p->available_kv_bytes);
        if (p->estimated_max_model_len > 0)
            snprintf(based, sizeof based,
                     " Based on the available memory, the estimated maximum model length is %lld.",
                     (long long)p->estimated_max_model_len);
        fail(p, KV_PLAN_ERR_MAX_MODEL_LEN,
             "To serve at least one request with the model's max seq len (%lld), (%s GiB KV cache is needed, which is "
             "larger than the available KV cache memory (%s GiB).%s Try increasing `gpu_memory_utilization` or "
             "decreasing `max_model_len` when initializing the engine. See "
             "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
             (long long)p->max_model_len, need, avail, based);
        log_line(p, "ERROR", "ValueError: %s", p->error);
        return KV_PLAN_OK;
    }

    /* 5. The pool. */
    p->starts = 1;
    p->num_blocks = p->num_blocks_computed;
    if (a->num_gpu_blocks_override > 0) {
        log_line(p, "INFO", "Overriding num_gpu_blocks=%lld with num_gpu_blocks_override=%lld",
                 (long long)p->num_blocks, (long long)a->num_gpu_blocks_override);
        if (a->num_gpu_blocks_override > p->num_blocks)
            note(p, "num_gpu_blocks_override %lld is more than fits (%lld): the real server would run out of memory "
                 "when it allocates the pool",
                 (long long)a->num_gpu_blocks_override, (long long)p->num_blocks);
        p->num_blocks = a->num_gpu_blocks_override;
    }
    p->kv_pool_bytes = (double)p->num_blocks * (double)per_block;
    p->kv_cache_tokens = clamp_i64((double)(p->num_blocks / p->num_kv_groups) * p->block_size);
    p->max_concurrency = p->blocks_per_request > 0 ? (double)p->num_blocks / (double)p->blocks_per_request : 0;
    char toks[32], lens[32];
    kv_fmt_thousands(toks, sizeof toks, clamp_i64(p->max_concurrency * (double)p->max_model_len));
    kv_fmt_thousands(lens, sizeof lens, p->max_model_len);
    log_line(p, "INFO", "GPU KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx", toks, lens,
             p->max_concurrency);
    if (p->cudagraph_bytes > 0)
        log_line(p, "INFO", "Graph capturing finished, took %.2f GiB", p->cudagraph_bytes / KV_GIB);
    return KV_PLAN_OK;
}

/* ------------------------------------------------------------------ fixes */

static void add_fix(kv_plan *p, const char *what, const char *flags, const kv_plan *q, int lowered)
{
    if (p->num_fixes >= KV_PLAN_MAX_FIXES)
        return;
    kv_plan_fix *f = &p->fixes[p->num_fixes++];
    snprintf(f->what, sizeof f->what, "%s", what);
    snprintf(f->flags, sizeof f->flags, "%s", flags);
    f->starts = q->starts;
    f->lowers_max_model_len = lowered;
    f->error_kind = q->error_kind;
    f->kv_cache_bytes = q->available_kv_bytes;
    f->kv_cache_tokens = q->starts ? q->kv_cache_tokens : q->kv_cache_tokens_unrounded;
    f->max_model_len = q->starts ? q->max_model_len : q->estimated_max_model_len;
    f->max_concurrency = q->max_concurrency;
}

/* try_fix results. */
enum { FIX_FAILS = 0, FIX_STARTS_SHORTER = 1, FIX_STARTS = 2 };

/* Plan with args b; record the fix when it starts, or when it fails only
 * the max_model_len check (then paired with the estimate, which starts), or
 * when keep_failing is set (the row then says why it still fails). */
static int try_fix(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *b, const char *what,
                   const char *flags, int keep_failing)
{
    kv_plan *q = malloc(sizeof *q);
    if (!q)
        return FIX_FAILS;
    int res = FIX_FAILS;
    if (kv_plan_compute_nofix(m, g, b, q, NULL, 0) == KV_PLAN_OK) {
        if (q->starts) {
            add_fix(p, what, flags, q, 0);
            res = FIX_STARTS;
        } else if (q->error_kind == KV_PLAN_ERR_MAX_MODEL_LEN && q->estimated_max_model_len > 0) {
            kv_args c = *b;
            c.max_model_len = q->estimated_max_model_len;
            char f2[96];
            snprintf(f2, sizeof f2, "%s --max-model-len %lld", flags, (long long)q->estimated_max_model_len);
            if (kv_plan_compute_nofix(m, g, &c, q, NULL, 0) == KV_PLAN_OK && q->starts) {
                add_fix(p, what, f2, q, 1);
                res = FIX_STARTS_SHORTER;
            } else if (keep_failing) {
                add_fix(p, what, flags, q, 0);
            }
        } else if (keep_failing) {
            add_fix(p, what, flags, q, 0);
        }
    }
    free(q);
    return res;
}

/* Fixes, cheapest first: a shorter max_model_len (no cost until a request
 * is that long), fp8 KV (small accuracy cost), quantized weights (a
 * different checkpoint), more GPUs (hardware), and last a higher
 * utilization (it eats the headroom vLLM's estimates leave). */
static void compute_fixes(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    char flags[96];
    kv_args b;
    if (p->error_kind == KV_PLAN_ERR_FREE_MEMORY) {
        double u = floor(p->free_at_start_bytes / p->gpu_total_bytes * 100.0) / 100.0;
        if (u > 0) {
            b = *a;
            b.gpu_memory_utilization = u;
            snprintf(flags, sizeof flags, "--gpu-memory-utilization %.2f", u);
            try_fix(p, m, g, &b, "lower utilization to what is free", flags, 1);
        }
        return;
    }
    /* 1. Lower max_model_len to the estimate. */
    if (p->error_kind == KV_PLAN_ERR_MAX_MODEL_LEN && p->estimated_max_model_len > 0) {
        b = *a;
        b.max_model_len = p->estimated_max_model_len;
        snprintf(flags, sizeof flags, "--max-model-len %lld", (long long)p->estimated_max_model_len);
        try_fix(p, m, g, &b, "lower max_model_len", flags, 1);
    }
    /* 2. fp8 KV cache. */
    if (p->kv_dtype_bytes > 1 && p->error_kind == KV_PLAN_ERR_MAX_MODEL_LEN) { /* no help when nothing is left */
        b = *a;
        b.kv_cache_dtype = KV_ARGS_KV_FP8;
        try_fix(p, m, g, &b, "fp8 KV cache", "--kv-cache-dtype fp8", 1);
    }
    /* 3. Quantized weights: fp8, and 4-bit unless fp8 starts as it is. */
    if (a->weights_gib < 0 && a->quantization == KV_ARGS_QUANT_NONE && m->quant == KV_QUANT_NONE) {
        b = *a;
        b.quantization = KV_ARGS_QUANT_FP8;
        if (try_fix(p, m, g, &b, "fp8 weights", "--quantization fp8", 1) != FIX_STARTS) {
            b.quantization = KV_ARGS_QUANT_AWQ;
            try_fix(p, m, g, &b, "4-bit weights (AWQ)", "--quantization awq", 1);
        }
    } else if (a->weights_gib < 0 && a->quantization == KV_ARGS_QUANT_FP8) {
        b = *a;
        b.quantization = KV_ARGS_QUANT_AWQ;
        try_fix(p, m, g, &b, "4-bit weights (AWQ)", "--quantization awq", 1);
    }
    /* 4. More GPUs: double tensor parallelism while it divides the attention
     * heads (vllm/config/parallel.py); each size that starts, at the full
     * length or a shorter one, is a row, up to the first at the full length. */
    for (int tp = a->tensor_parallel_size * 2, rows = 0; tp <= 64 && rows < 3; tp *= 2) {
        if (m->num_attention_heads % tp)
            break;
        b = *a;
        b.tensor_parallel_size = tp;
        snprintf(flags, sizeof flags, "--tensor-parallel-size %d", tp);
        char what[64];
        snprintf(what, sizeof what, "%d GPUs (tensor parallel)", tp);
        int r = try_fix(p, m, g, &b, what, flags, 0);
        if (r == FIX_STARTS)
            break;
        rows += r == FIX_STARTS_SHORTER;
    }
    /* 5. Utilization, last: it borrows the headroom vLLM needs at run time. */
    if (!p->kv_cache_memory_bytes_set) {
        for (int u = (int)floor(a->gpu_memory_utilization * 100.0 + 1e-9) + 1; u <= 99; u++) {
            b = *a;
            b.gpu_memory_utilization = u / 100.0;
            snprintf(flags, sizeof flags, "--gpu-memory-utilization %.2f", u / 100.0);
            kv_plan *q = malloc(sizeof *q);
            if (!q)
                break;
            int ok = kv_plan_compute_nofix(m, g, &b, q, NULL, 0) == KV_PLAN_OK && q->starts;
            if (ok)
                add_fix(p, "raise utilization (last resort)", flags, q, 0);
            free(q);
            if (ok)
                break;
        }
    }
}

int kv_plan_compute(const kv_model *m, const kv_gpu *gpu, const kv_args *a, kv_plan *out, char *err, size_t errlen)
{
    int rc = kv_plan_compute_nofix(m, gpu, a, out, err, errlen);
    if (rc == KV_PLAN_OK && !out->starts)
        compute_fixes(out, m, gpu, a);
    return rc;
}

/* ------------------------------------------------------------------- JSON */

static double gib4(double bytes)
{
    return round(bytes / KV_GIB * 10000.0) / 10000.0;
}

struct cJSON *kv_plan_to_json(const kv_plan *p)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddBoolToObject(o, "starts", p->starts);
    if (p->starts)
        cJSON_AddNullToObject(o, "error");
    else
        cJSON_AddStringToObject(o, "error", p->error);
    cJSON_AddStringToObject(o, "error_kind", kv_plan_error_name(p->error_kind));
    cJSON_AddStringToObject(o, "gpu", p->gpu_id);
    cJSON_AddNumberToObject(o, "gpu_total_gib", gib4(p->gpu_total_bytes));
    cJSON_AddNumberToObject(o, "gpu_memory_utilization", p->gpu_memory_utilization);
    cJSON_AddNumberToObject(o, "budget_gib", gib4(p->budget_bytes));
    cJSON_AddNumberToObject(o, "weights_gib", gib4(p->weights_bytes));
    cJSON_AddNumberToObject(o, "activation_gib", gib4(p->activation_bytes));
    cJSON_AddNumberToObject(o, "cudagraph_gib", gib4(p->cudagraph_bytes));
    cJSON_AddNumberToObject(o, "cuda_context_gib", gib4(p->cuda_context_bytes));
    cJSON_AddNumberToObject(o, "nccl_gib", gib4(p->nccl_bytes));
    cJSON_AddNumberToObject(o, "kv_cache_gib", gib4(p->available_kv_bytes));
    cJSON_AddNumberToObject(o, "kv_bytes_per_token", (double)p->kv_bytes_per_token);
    cJSON_AddNumberToObject(o, "block_size", p->block_size);
    cJSON_AddNumberToObject(o, "page_size_bytes", (double)p->page_size_bytes);
    cJSON_AddNumberToObject(o, "num_layers", p->num_layers);
    cJSON_AddNumberToObject(o, "head_size", p->head_size);
    cJSON_AddStringToObject(o, "kv_cache_dtype", p->kv_cache_dtype);
    cJSON_AddStringToObject(o, "weights_dtype", p->weights_dtype);
    cJSON_AddNumberToObject(o, "num_blocks", (double)p->num_blocks);
    cJSON_AddNumberToObject(o, "kv_cache_tokens", (double)p->kv_cache_tokens);
    cJSON_AddNumberToObject(o, "max_model_len", (double)p->max_model_len);
    cJSON_AddBoolToObject(o, "max_model_len_default", p->max_model_len_default);
    cJSON_AddNumberToObject(o, "max_concurrency", round(p->max_concurrency * 100.0) / 100.0);
    if (p->error_kind == KV_PLAN_ERR_MAX_MODEL_LEN) {
        cJSON_AddNumberToObject(o, "estimated_max_model_len", (double)p->estimated_max_model_len);
        cJSON_AddNumberToObject(o, "needed_gib", gib4((double)p->needed_bytes));
    } else {
        cJSON_AddNullToObject(o, "estimated_max_model_len");
    }
    cJSON_AddNumberToObject(o, "max_num_batched_tokens", (double)p->max_num_batched_tokens);
    cJSON_AddNumberToObject(o, "max_num_seqs", (double)p->max_num_seqs);
    cJSON_AddNumberToObject(o, "tensor_parallel_size", p->tensor_parallel_size);
    cJSON_AddNumberToObject(o, "kv_heads_per_gpu", p->kv_heads_per_gpu);
    cJSON *terms = cJSON_AddArrayToObject(o, "terms");
    for (int i = 0; terms && i < KV_PLAN_NUM_TERMS; i++) {
        cJSON *t = cJSON_CreateObject();
        if (!t)
            break;
        cJSON_AddStringToObject(t, "name", p->terms[i].name);
        cJSON_AddStringToObject(t, "how", p->terms[i].how);
        cJSON_AddNumberToObject(t, "gib", gib4(p->terms[i].bytes));
        cJSON_AddBoolToObject(t, "overridden", p->terms[i].overridden);
        cJSON_AddItemToArray(terms, t);
    }
    cJSON *log = cJSON_AddArrayToObject(o, "log");
    for (int i = 0; log && i < p->num_log; i++)
        cJSON_AddItemToArray(log, cJSON_CreateString(p->log[i]));
    cJSON *fixes = cJSON_AddArrayToObject(o, "fixes");
    for (int i = 0; fixes && i < p->num_fixes; i++) {
        const kv_plan_fix *f = &p->fixes[i];
        cJSON *t = cJSON_CreateObject();
        if (!t)
            break;
        cJSON_AddStringToObject(t, "what", f->what);
        cJSON_AddStringToObject(t, "flags", f->flags);
        cJSON_AddBoolToObject(t, "starts", f->starts);
        cJSON_AddBoolToObject(t, "lowers_max_model_len", f->lowers_max_model_len);
        if (!f->starts)
            cJSON_AddStringToObject(t, "error_kind", kv_plan_error_name(f->error_kind));
        cJSON_AddNumberToObject(t, "kv_cache_gib", gib4(f->kv_cache_bytes));
        cJSON_AddNumberToObject(t, "kv_cache_tokens", (double)f->kv_cache_tokens);
        cJSON_AddNumberToObject(t, "max_model_len", (double)f->max_model_len);
        cJSON_AddNumberToObject(t, "max_concurrency", round(f->max_concurrency * 100.0) / 100.0);
        cJSON_AddItemToArray(fixes, t);
    }
    cJSON *notes = cJSON_AddArrayToObject(o, "notes");
    for (int i = 0; notes && i < p->num_notes; i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(p->notes[i]));
    return o;
}

char *kv_plan_json_string(const kv_plan *p)
{
    cJSON *o = kv_plan_to_json(p);
    if (!o)
        return NULL;
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}
