/* kv_plan_terms: the terms vLLM subtracts from the budget, per accounting:
 * weights, the profile run's activation peak, CUDA graphs, the CUDA
 * context, NCCL and non-torch memory (kv_plan.h; the release rules are rows
 * of kv_release.c). */
#include "kv_plan_int.h"
#include "kv_util.h"

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
 * Other vLLM versions measure differently (tests/vectors/real-logs.json): v0 engines (0.6.x, Dec 2024) logged
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
        double keep = q == m->quant ? (double)m->quant_unconverted_params : 0; /* left 16-bit by the checkpoint */
        bytes = lin + scales + keep * (wide - 1.0) + rest;
        snprintf(how, howlen, "%.2fe9 linear x 1 byte (fp8) + %.2fe9 x %.0f bytes", lin / 1e9, (emb + oth + keep) / 1e9,
                 wide);
        break;
    }
    case KV_QUANT_NVFP4: {
        /* e2m1 weights (half a byte) and an fp8 scale per 16 (ModelOpt
         * NVFP4, compressed-tensors nvfp4; the per-tensor global scales are
         * a few bytes) */
        double keep = (double)m->quant_unconverted_params;
        bytes = (lin - keep) * (0.5 + 1.0 / 16) + keep * wide + rest;
        snprintf(how, howlen, "%.2fe9 linear x 4.5 bits (nvfp4) + %.2fe9 x %.0f bytes", (lin - keep) / 1e9,
                 (emb + oth + keep) / 1e9, wide);
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
    case KV_QUANT_BITSANDBYTES: {
        /* nf4: one absmax per 64 weights, fp32; with double quantization the
         * absmax is itself 8-bit, with one fp32 scale per 256 of them
         * (bitsandbytes' QuantState nested), about 0.516 byte per weight. */
        int dq = m->quant == KV_QUANT_BITSANDBYTES && m->quant_double;
        double per = bits == 8 ? 1.0 : dq ? 0.5 + 1.0 / 64 + 4.0 / (64.0 * 256) : 0.5 + 4.0 / 64;
        bytes = lin * per + rest;
        snprintf(how, howlen, "%.2fe9 linear x %s (bitsandbytes) + %.2fe9 x %.0f bytes", lin / 1e9,
                 bits == 8 ? "1 byte" : dq ? "4.13 bits, double quant" : "4.5 bits", (emb + oth) / 1e9, wide);
        break;
    }
    default:
        snprintf(how, howlen, "quant_method '%s' in config.json: kvlab cannot size these weights",
                 m->quant_method[0] ? m->quant_method : kv_args_quant_name(a->quantization));
        return -1;
    }
    if (tp > 1)
        appendf(how, howlen, " / tp %d", tp);
    return bytes / tp;
}

/* ------------------------------------------------- weights as vLLM loads */

/* Bytes per GPU of the linear layers alone, as kv_plan_weights_bytes sizes them. */
static double linear_bytes(const kv_model *m, const kv_args *a)
{
    kv_model z = *m;
    z.params_linear = 0;
    z.params_expert_linear = 0;
    double all = kv_plan_weights_bytes(m, a, NULL, 0), none = kv_plan_weights_bytes(&z, a, NULL, 0);
    return all >= 0 && none >= 0 ? all - none : 0;
}

/* mxfp4 experts as Mxfp4MoEMethod.create_weights pads them
 * (model_executor/layers/quantization/mxfp4.py): the Marlin kernel wants the
 * intermediate size a multiple of 128 and the hidden size of 256. Marlin runs
 * on cards before Hopper, and on every card while vLLM required a torch
 * older than 2.8 for its Triton kernels (up to 0.10.x). */
/* On Hopper from 0.11 the Triton kernels take the experts; their swizzled
 * layout (triton_kernels, not vLLM's own code) pads the hidden size to 256
 * too: the llm-d 0.11 log and vllm issue #33155 (0.14.1) both show 64.38 GiB
 * for gpt-oss-120b, 6% over the tally, which this reproduces. */
static double mxfp4_pad_factor(const kv_model *m, const plan_ctx *c)
{
    if (m->quant != KV_QUANT_MXFP4 && c->a->quantization != KV_ARGS_QUANT_MXFP4)
        return 1.0;
    int hopper = c->gpu && c->gpu->fp8 && !strstr(c->gpu->name, "L4") && !strstr(c->gpu->name, "L40") &&
                 !strstr(c->gpu->name, "4090") && !strstr(c->gpu->name, "Ada");
    int tp = c->tp;
    double I = (double)m->moe_intermediate_size / tp, h = m->hidden_size;
    double Ip = ceil(I / 128.0) * 128.0, hp = ceil(h / 256.0) * 256.0;
    int marlin = c->a->mxfp4_backend ? c->a->mxfp4_backend == 1 : !hopper || c->r->mem->mxfp4_marlin_everywhere;
    if (!marlin)
        return hp / h; /* Triton: the hidden size only */
    return (Ip * hp) / (I * h);
}

double kv_plan_loaded_weights_bytes(const kv_model *m, const kv_args *a, char *how, size_t howlen)
{
    char dummy[8];
    if (!how) {
        how = dummy;
        howlen = sizeof dummy;
    }
    double w = kv_plan_weights_bytes(m, a, how, howlen);
    if (w < 0)
        return w;
    int tp = a->tensor_parallel_size > 0 ? a->tensor_parallel_size : 1;
    double wide = a->dtype == KV_ARGS_DTYPE_FP32 ? 4 : 2;
    /* RoPE: one cos_sin_cache per rotary shape, [max_position, rotary_dim]
     * in the model dtype, on every rank (get_rope caches the module).
     * Gemma 3 has two (local and global theta). */
    int rot = m->is_mla ? m->qk_rope_head_dim : m->head_dim;
    double rope = (double)m->max_position_embeddings * rot * wide * (strstr(m->model_type, "gemma3") ? 2 : 1);
    w += rope;
    /* Router gates stay whole and 16-bit on every rank (ReplicatedLinear). */
    double gate = m->num_experts > 0 ? (double)m->hidden_size * m->num_experts * m->num_moe_layers : 0;
    w += gate * wide * (1.0 - 1.0 / tp);
    /* KV heads replicated when tp exceeds them: every rank holds one. */
    double lin = (double)m->params_linear;
    if (!m->is_mla && tp > m->num_key_value_heads && lin > 0) {
        double kvp = 2.0 * m->hidden_size * m->head_dim * m->num_hidden_layers; /* one KV head, K and V */
        double per_param = linear_bytes(m, a) * tp / lin;
        w += kvp * per_param * (1.0 - (double)m->num_key_value_heads / tp);
    }
    /* The vision tower and projector of a multimodal checkpoint, 16-bit, sharded like the language model. */
    double vision = (double)m->params_vision * wide / tp;
    w += vision;
    appendf(how, howlen, " + RoPE cache %.2f GiB", rope / KV_GIB);
    if (vision > 0)
        appendf(how, howlen, " + vision %.2f GiB", vision / KV_GIB);
    if (gate > 0 && tp > 1)
        appendf(how, howlen, " + gates replicated");
    return w;
}

/* A decoder layer's parameters in vLLM's order (named_parameters of the
 * layer), as counts of weights; returns how many (at most 8). */
static int layer_params(const kv_model *m, int layer, double *out)
{
    double h = m->hidden_size;
    int n = 0;
    if (m->is_mla) {
        double qk = (double)m->qk_nope_head_dim + m->qk_rope_head_dim, H = m->num_attention_heads;
        if (m->q_lora_rank > 0) {
            out[n++] = h * m->q_lora_rank;             /* q_a_proj */
            out[n++] = (double)m->q_lora_rank * H * qk; /* q_b_proj */
        } else {
            out[n++] = h * H * qk;                     /* q_proj */
        }
        out[n++] = h * ((double)m->kv_lora_rank + m->qk_rope_head_dim);      /* kv_a_proj_with_mqa */
        out[n++] = (double)m->kv_lora_rank * H * ((double)m->qk_nope_head_dim + m->v_head_dim); /* kv_b_proj */
        out[n++] = H * m->v_head_dim * h;                                       /* o_proj */
    } else {
        double hd = m->head_dim;
        out[n++] = h * ((double)m->num_attention_heads + 2.0 * m->num_key_value_heads) * hd; /* qkv_proj */
        out[n++] = (double)m->num_attention_heads * hd * h;                                  /* o_proj */
    }
    int moe = m->num_experts > 0 && layer >= m->first_k_dense_replace &&
              layer < m->first_k_dense_replace + (m->num_moe_layers > 0 ? m->num_moe_layers : m->num_hidden_layers);
    if (moe) {
        double E = m->num_experts, I = m->moe_intermediate_size;
        double shared = (double)m->num_shared_experts * I + m->shared_expert_intermediate_size;
        out[n++] = E * h;           /* the router gate */
        out[n++] = E * 2.0 * I * h; /* experts.w13_weight: every expert in one tensor */
        out[n++] = E * I * h;       /* experts.w2_weight */
        if (shared > 0) {
            out[n++] = 2.0 * shared * h; /* shared expert gate_up_proj */
            out[n++] = shared * h;       /* down_proj */
        }
    } else {
        out[n++] = 2.0 * m->intermediate_size * h; /* gate_up_proj */
        out[n++] = (double)m->intermediate_size * h; /* down_proj */
    }
    return n;
}

double kv_plan_cpu_offload_bytes(const kv_model *m, const kv_args *a, double *layer_max)
{
    if (layer_max)
        *layer_max = 0;
    double limit = floor(a->cpu_offload_gb * 1073741824.0);
    int L = m->num_hidden_layers;
    if (!(limit > 0) || L < 1)
        return 0;
    /* Scale the shape's counts to the bytes the weights term gives the linear layers. */
    double counts = 0, par[8];
    for (int l = 0; l < L; l++) {
        int n = layer_params(m, l, par);
        for (int i = 0; i < n; i++)
            counts += par[i];
    }
    double lin = linear_bytes(m, a);
    if (!(counts > 0) || !(lin > 0))
        return 0;
    double per = lin / counts, done = 0;
    for (int l = 0; l < L && done < limit; l++) {
        int n = layer_params(m, l, par);
        double here = 0;
        for (int i = 0; i < n && done < limit; i++) {
            done += par[i] * per;
            here += par[i] * per;
        }
        if (layer_max && here > *layer_max)
            *layer_max = here;
    }
    return done;
}

/* --cpu-offload-gb: what leaves the weights term (not with --weights-gib,
 * which is what stays on the GPU). */
static void plan_cpu_offload(const plan_ctx *c, kv_plan *p, double *w, char *how, size_t howlen)
{
    const kv_args *a = c->a;
    if (!(a->cpu_offload_gb > 0))
        return;
    if (a->weights_gib >= 0) {
        plan_note(p, "--cpu-offload-gb %g: --weights-gib is what stays on the GPU, so nothing more is taken off",
                  a->cpu_offload_gb);
        return;
    }
    double layer = 0, off = kv_plan_cpu_offload_bytes(c->m, a, &layer);
    if (off > *w)
        off = *w;
    p->cpu_offload_bytes = off;
    p->cpu_offload_layer_bytes = layer;
    *w -= off;
    char tail[64];
    snprintf(tail, sizeof tail, " - %.2f GiB in CPU memory", off / KV_GIB);
    size_t l = strlen(how), tl = strlen(tail);
    if (l + tl + 1 > howlen) /* keep the offload visible: it changes the figure */
        l = howlen > tl + 1 ? howlen - tl - 1 : 0;
    snprintf(how + l, howlen - l, "%s", tail);
    plan_note(p, "--cpu-offload-gb %g: vLLM keeps %.2f GiB of the weights per GPU in CPU memory (whole parameters "
                 "of the first decoder layers); every forward reads them from there%s",
              a->cpu_offload_gb, off / KV_GIB,
              off + 1.0 < a->cpu_offload_gb * KV_GIB ? " (that is all the decoder layers hold)" : "");
}

/* The weights as the checkpoint on disk holds them (the shard headers,
 * kv_model.disk), when vLLM loads that format as is: no --quantization that
 * changes it. An unquantized checkpoint's floats become the model dtype (a
 * float32 checkpoint served in bfloat16 loads at half its size), a quantized
 * one loads as stored. Per GPU: the shards' bytes / tp, plus what the loader
 * adds beside the checkpoint (kv_plan_loaded_weights_bytes's RoPE cache and
 * the tensors every rank keeps whole). Returns < 0 when it does not apply. */
static double disk_weights_bytes(const plan_ctx *c, char *how, size_t howlen)
{
    const kv_model *m = c->m;
    const kv_args *a = c->a;
    if (m->disk.shards <= 0 || a->weights_gib >= 0)
        return -1;
    int same = a->quantization == KV_ARGS_QUANT_NONE ||
               (a->quantization == KV_ARGS_QUANT_FP8 && m->quant == KV_QUANT_FP8) ||
               (a->quantization == KV_ARGS_QUANT_AWQ && m->quant == KV_QUANT_AWQ) ||
               (a->quantization == KV_ARGS_QUANT_GPTQ && m->quant == KV_QUANT_GPTQ) ||
               (a->quantization == KV_ARGS_QUANT_MXFP4 && m->quant == KV_QUANT_MXFP4) ||
               (a->quantization == KV_ARGS_QUANT_COMPRESSED_TENSORS && m->quant == KV_QUANT_COMPRESSED_TENSORS) ||
               (a->quantization == KV_ARGS_QUANT_BITSANDBYTES && m->quant == KV_QUANT_BITSANDBYTES);
    if (!same)
        return -1;
    double wide = c->act_bytes, total = 0;
    int cast = m->quant == KV_QUANT_NONE;
    char kinds[96] = "";
    for (int i = 0; i < m->disk.num_dtypes; i++) {
        const kv_st_dtype *d = &m->disk.dtypes[i];
        double b = (double)d->bytes;
        if (cast && kv_st_dtype_is_wide_float(d->name) && d->elements > 0)
            b = (double)d->elements * wide;
        total += b;
        if (i < 3)
            appendf(kinds, sizeof kinds, "%s%s %.2f", i ? ", " : "", d->name, (double)d->bytes / KV_GIB);
    }
    /* what the loader adds: the tally's extras over its own linear layers */
    kv_args b = *a;
    b.tensor_parallel_size = c->tp;
    double extras = kv_plan_loaded_weights_bytes(m, &b, NULL, 0) - kv_plan_weights_bytes(m, &b, NULL, 0) -
                    (double)m->params_vision * wide / c->tp; /* the vision tower is in the shards */
    if (extras < 0)
        extras = 0;
    snprintf(how, howlen, "%d safetensors shard%s: %.2f GiB on disk (%s)%s", m->disk.shards,
             m->disk.shards > 1 ? "s" : "", (double)m->disk.bytes / KV_GIB, kinds, cast ? ", floats as the dtype" : "");
    if (c->tp > 1)
        appendf(how, howlen, " / tp %d", c->tp);
    return total / c->tp + extras;
}

void plan_weights(const plan_ctx *c, kv_plan *p)
{
    const kv_model *m = c->m;
    const kv_args *a = c->a;
    char how[160];
    double w;
    int over = a->weights_gib >= 0;
    if (over) {
        w = a->weights_gib * KV_GIB;
        snprintf(how, sizeof how, "--weights-gib");
    } else if (!c->textbook && (w = disk_weights_bytes(c, how, sizeof how)) >= 0) {
        double f = mxfp4_pad_factor(m, c);
        if (f > 1.0) {
            double ex = (double)m->params_expert_linear * (0.5 + 1.0 / 32) / c->tp;
            w += ex * (f - 1.0);
            appendf(how, sizeof how, " (experts padded x%.3f)", f);
        }
    } else {
        if (!c->textbook && m->disk_error[0])
            plan_note(p, "the checkpoint's safetensors could not be read (%s): weights sized from config.json",
                      m->disk_error);
        w = c->textbook ? kv_plan_weights_bytes(m, a, how, sizeof how) : kv_plan_loaded_weights_bytes(m, a, how, sizeof how);
        if (w < 0) {
            kv_args b = *a;
            b.quantization = KV_ARGS_QUANT_NONE;
            kv_model m16 = *m;
            m16.quant = KV_QUANT_NONE;
            plan_note(p, "%s; sized as 16-bit here (an upper bound): pass --weights-gib with the real figure", how);
            w = c->textbook ? kv_plan_weights_bytes(&m16, &b, how, sizeof how)
                            : kv_plan_loaded_weights_bytes(&m16, &b, how, sizeof how);
            appendf(how, sizeof how, " (unsized %s: 16-bit assumed)", m->quant_method);
        } else if (!c->textbook) {
            double f = mxfp4_pad_factor(m, c);
            if (f > 1.0) {
                double ex = (double)m->params_expert_linear * (0.5 + 1.0 / 32) / c->tp;
                w += ex * (f - 1.0);
                appendf(how, sizeof how, " (experts padded x%.3f)", f);
            }
        }
    }
    if (!over && a->enable_lora) { /* the LoRA manager is made inside load_model */
        char lh[96];
        double lora = kv_plan_lora_bytes(m, a, c->tp, c->act_bytes, lh, sizeof lh);
        w += lora;
        appendf(how, sizeof how, " + LoRA %.2f GiB", lora / KV_GIB);
        plan_note(p, "--enable-lora: %s take %.2f GiB per GPU (in \"Model loading took\"); CUDA graphs captured "
                     "apart for LoRA batches are not counted", lh, lora / KV_GIB);
    }
    plan_cpu_offload(c, p, &w, how, sizeof how);
    p->weights_bytes = w;
    plan_set_term(p, KV_PLAN_TERM_WEIGHTS, "weights", w, over, 1, "%s", how);
}

/* --------------------------------------------------- the activation peak */

double kv_plan_forward_bytes(const kv_model *m, int32_t tp, int64_t tokens, int act_bytes)
{
    if (tp < 1)
        tp = 1;
    double width = m->intermediate_size;
    if (m->num_experts > 0) {
        double moe = (double)m->num_experts_per_tok * m->moe_intermediate_size +
                     (double)m->num_shared_experts * m->moe_intermediate_size + m->shared_expert_intermediate_size;
        width = m->first_k_dense_replace > 0 && m->intermediate_size > moe ? m->intermediate_size : moe;
    }
    return (double)tokens * act_bytes * (3.0 * m->hidden_size + 3.0 * width / tp);
}

void kv_plan_mm_encoder(const kv_model *m, int32_t tp, int act_bytes, int64_t T, int64_t S, int64_t mml,
                        int chunked, int video_max_frames, int limit_image, int limit_video, int64_t max_pixels,
                        kv_plan *p)
{
    p->mm_encoder_modality[0] = '\0';
    p->mm_encoder_budget = p->mm_encoder_items = p->mm_encoder_tokens = 0;
    p->mm_encoder_bytes = p->mm_encoder_output_bytes = 0;
    if (m->vision_depth <= 0 || m->vision_patch <= 0 || m->vision_merge <= 0)
        return;
    if (tp < 1)
        tp = 1;
    int64_t unit = (int64_t)m->vision_patch * m->vision_merge;
    int64_t img = (max_pixels > 0 ? max_pixels : m->vision_max_pixels) / (unit * unit);
    if (img < 1)
        img = 1;
    /* the dummy video: frames added while their tokens fit max_model_len (at least 1), capped */
    int tpz = m->vision_temporal_patch > 0 ? m->vision_temporal_patch : 1;
    int64_t frames = 1;
    for (;;) {
        int64_t f = frames + 1, grid_t = (f + f % tpz) / tpz;
        if ((grid_t < 1 ? 1 : grid_t) * img > mml)
            break;
        frames = f;
    }
    if (video_max_frames > 0 && frames > video_max_frames)
        frames = video_max_frames;
    int64_t gt = (frames + frames % tpz) / tpz;
    int64_t vid = (gt < 1 ? 1 : gt) * img;
    int li = limit_image < 0 ? 999 : limit_image, lv = limit_video < 0 ? 999 : limit_video;
    /* the modality with the most tokens per item; a tie goes to the later name (encoder_budget.py) */
    int64_t item = 0, limit = 0;
    const char *mod = "";
    if (li > 0)
        item = img, limit = li, mod = "image";
    if (lv > 0 && vid >= item)
        item = vid, limit = lv, mod = "video";
    if (!item)
        return;
    int64_t budget = T > item ? T : item;
    int64_t per_prompt = mml / item < limit ? mml / item : limit;
    if (per_prompt < 1)
        per_prompt = 1;
    int64_t reqs = S;
    if (!chunked && T / item < reqs)
        reqs = T / item;
    int64_t items = budget / item < reqs * per_prompt ? budget / item : reqs * per_prompt;
    if (items < 1)
        items = 1;
    int64_t tokens = items * item, patches = tokens * m->vision_merge * m->vision_merge;
    double H = m->vision_hidden, I = m->vision_intermediate;
    double head_dim = m->vision_heads > 0 ? H / m->vision_heads : 0;
    double per_patch = act_bytes * (3.0 * H + 3.0 * I / tp) +
                       4.0 * m->vision_in_chans * tpz * m->vision_patch * m->vision_patch + 4.0 * head_dim;
    snprintf(p->mm_encoder_modality, sizeof p->mm_encoder_modality, "%s", mod);
    p->mm_encoder_budget = budget;
    p->mm_encoder_items = items;
    p->mm_encoder_tokens = tokens;
    p->mm_encoder_output_bytes = (double)tokens * m->vision_out_hidden * act_bytes;
    p->mm_encoder_bytes = (double)patches * per_patch + p->mm_encoder_output_bytes;
}

/* The dummy sampler pass: S requests' logits over the vocabulary, plus the
 * hidden states of the T batched tokens and the S sampled rows that stay
 * alive around it (gpu_model_runner.py profile_run, _dummy_sampler_run). */
static double sampler_bytes(const kv_model *m, int64_t S, int64_t T, double bytes_per_elem, int act_bytes)
{
    if (bytes_per_elem <= 0 || S <= 0)
        return 0;
    return (double)S * m->vocab_size * bytes_per_elem + (double)(S + T) * m->hidden_size * act_bytes;
}

void plan_activation(const plan_ctx *c, kv_plan *p)
{
    const kv_args *a = c->a;
    const kv_model *m = c->m;
    int64_t T = p->max_num_batched_tokens;
    if (a->activation_gib >= 0) {
        p->activation_bytes = a->activation_gib * KV_GIB;
        plan_set_term(p, KV_PLAN_TERM_ACTIVATION, "activation", p->activation_bytes, 1, 1, "--activation-gib");
        return;
    }
    if (c->textbook) {
        p->activation_bytes = kv_plan_activation_bytes(m, c->tp, T);
        plan_set_term(p, KV_PLAN_TERM_ACTIVATION, "activation", p->activation_bytes, 0, 1,
                      "profile run of %lld batched tokens%s", (long long)T, c->tp > 1 ? " (sharded)" : "");
        return;
    }
    const kv_release_memory *mem = c->r->mem;
    p->forward_bytes = kv_plan_forward_bytes(m, c->tp, T, c->act_bytes);
    if (mem->runner == KV_RUNNER_V0) {
        /* V0's profile samples max_num_seqs dummy sequences with top-k/top-p
         * (worker/model_runner.py profile_run); no warm-up check after. */
        int64_t S = p->max_num_seqs < T ? p->max_num_seqs : T;
        p->sampler_bytes = sampler_bytes(m, S, T, mem->sampler_bytes_per_elem, c->act_bytes);
    } else if (mem->runner == KV_RUNNER_V1) {
        int64_t S = p->max_num_seqs < T ? p->max_num_seqs : T;
        /* the default-on FlashInfer sampler falls back to PyTorch's on a card it does not support */
        int cc = c->gpu ? c->gpu->compute_capability : 0;
        int fi_card = cc <= 0 || !mem->sampler_fi_cc[0] || (cc >= mem->sampler_fi_cc[0] && cc <= mem->sampler_fi_cc[1]);
        int fi = kv_args_is_set(a, "flashinfer-sampler") ? a->flashinfer_sampler != 0 : mem->sampler_flashinfer && fi_card;
        p->flashinfer_sampler = fi;
        double topk = fi ? mem->sampler_fi_bytes_per_elem : mem->sampler_bytes_per_elem;
        double bpe = topk;
        if (p->model_runner_v2)
            bpe = mem->v2_profiles_warmup ? fmax(topk, mem->sampler_v2_bytes_per_elem) : mem->sampler_v2_bytes_per_elem;
        p->sampler_bytes = sampler_bytes(m, S, T, bpe, c->act_bytes);
        /* The warm-up after the pool samples max_num_seqs requests with
         * top-k/top-p on (V1: compile_or_warm_up_model; V2: warmup_kernels
         * with SamplingParams.for_sampler_warmup). */
        p->warmup_need_bytes = fmax(sampler_bytes(m, S, S, topk, c->act_bytes),
                                    kv_plan_forward_bytes(m, c->tp, S, c->act_bytes));
    }
    /* A cold compile cache: the compile in the profile's first forward
     * (kv_release_memory.compile_cold_*); no torch.compile under
     * --enforce-eager or -O0 (config/vllm.py: mode NONE). */
    p->compile_cache_warm = a->compile_cache_warm != 0;
    int compiles = mem->engine_v1 && !a->enforce_eager &&
                   !(a->optimization_level == 0 && mem->opt_levels == KV_OPT_LEVELS);
    if (compiles && !a->compile_cache_warm && mem->compile_cold_bytes_per_elem > 0) {
        int64_t t = T < mem->compile_cold_max_tokens ? T : mem->compile_cold_max_tokens;
        p->compile_cold_bytes = (double)t * m->hidden_size * mem->compile_cold_bytes_per_elem;
        p->compile_cold_non_torch_bytes = p->compile_cold_bytes * mem->compile_cold_non_torch_frac;
        p->forward_bytes += p->compile_cold_bytes;
    }
    /* V0 has no UVA view of offloaded weights: each offloaded layer's
     * forward copies its parameters back to the GPU for the call
     * (functional_call in maybe_offload_to_cpu), on top of the activations. */
    double onload = mem->runner == KV_RUNNER_V0 ? p->cpu_offload_layer_bytes : 0;
    p->forward_bytes += onload;
    char fwd[96];
    snprintf(fwd, sizeof fwd, "forward of %lld tokens", (long long)T);
    if (onload > 0)
        snprintf(fwd + strlen(fwd), sizeof fwd - strlen(fwd), " + %.2f GiB offloaded layer copied in",
                 onload / KV_GIB);
    if (p->compile_cold_bytes > 0)
        snprintf(fwd + strlen(fwd), sizeof fwd - strlen(fwd), " + %.2f GiB cold torch.compile",
                 p->compile_cold_bytes / KV_GIB);
    if (p->sampler_bytes > p->forward_bytes) {
        p->activation_bytes = p->sampler_bytes;
        int64_t S = p->max_num_seqs < T ? p->max_num_seqs : T;
        plan_set_term(p, KV_PLAN_TERM_ACTIVATION, "activation", p->activation_bytes, 0, 1,
                      "sampler: %lld seqs x %d vocab (%s)", (long long)S, m->vocab_size,
                      p->model_runner_v2 && !c->r->mem->v2_profiles_warmup ? "V2, no top-k"
                      : p->flashinfer_sampler                             ? "FlashInfer"
                      : c->r->mem->sampler_bytes_per_elem < 30.0          ? "Triton top-k/top-p"
                                                                          : "PyTorch sort");
    } else {
        p->activation_bytes = p->forward_bytes;
        plan_set_term(p, KV_PLAN_TERM_ACTIVATION, "activation", p->activation_bytes, 0, 1, "%s%s", fwd,
                      c->tp > 1 ? " (MLP sharded)" : "");
    }
    /* The encoder-cache profile runs first; its outputs stay while the text
     * profile runs (kv_release_memory.mm_encoder_profile). */
    if (mem->mm_encoder_profile && !a->skip_mm_profiling) {
        int64_t mml = p->max_model_len > 0 ? p->max_model_len : p->model_max_model_len;
        kv_plan_mm_encoder(m, c->tp, c->act_bytes, T, p->max_num_seqs, mml, a->enable_chunked_prefill,
                           mem->mm_video_max_frames, a->mm_limit_image, a->mm_limit_video, a->mm_max_pixels, p);
        if (p->mm_encoder_items > 0) {
            double text = p->activation_bytes + p->mm_encoder_output_bytes;
            if (p->mm_encoder_bytes >= text) {
                p->activation_bytes = p->mm_encoder_bytes;
                plan_set_term(p, KV_PLAN_TERM_ACTIVATION, "activation", p->activation_bytes, 0, 1,
                              "encoder profile: %lld %s x %lld tokens (budget %lld)", (long long)p->mm_encoder_items,
                              p->mm_encoder_modality, (long long)(p->mm_encoder_tokens / p->mm_encoder_items),
                              (long long)p->mm_encoder_budget);
            } else {
                char how[sizeof p->terms[0].how];
                snprintf(how, sizeof how, "%s", p->terms[KV_PLAN_TERM_ACTIVATION].how);
                p->activation_bytes = text;
                plan_set_term(p, KV_PLAN_TERM_ACTIVATION, "activation", text, 0, 1, "%.100s + encoder outputs %.2f GiB",
                              how, p->mm_encoder_output_bytes / KV_GIB);
            }
        }
    }
}

/* ------------------------------------------------------------ CUDA graphs */

/* Memory one captured graph adds per layer it spans (its nodes, kernel
 * parameters and per-graph buffers), MiB. At tp 1 the estimates vLLM logs
 * give 0.24: Qwen2.5-7B on 0.22.0 with 35 PIECEWISE and 19 FULL graphs,
 * "Estimated CUDA graph memory: 0.37 GiB total"; Llama-3.1-8B on 0.19.0
 * (H100, 51 + 51 graphs), 0.84 GiB; gpt-oss-20b's PIECEWISE graphs on
 * 0.19.0 (DEBUG "(83-1) x 6.00 MiB per-graph" over 25 pieces). At tp > 1
 * every layer also captures its all-reduce, one kernel node more whichever
 * kind runs it: 0.40 on NVLink (custom all-reduce) and on PCIe (NCCL) alike.
 * NVLink: above 0.37 (0.10.2, H200, Qwen3-Next-80B at tp 2 took 2.37 GiB for
 * 67 + 67 graphs of 48 layers; a capture can free cached blocks, so "took"
 * only bounds it from below) and 0.39 (0.11.0, H100, Qwen3-32B at tp 2 and
 * utilization 0.95 fails its sampler warm-up), and at most 0.41 (0.19.0,
 * H100: the 80-layer Qwen2.5-72B and Llama-3.3-70B start at tp 2 and 4 at
 * 0.95). PCIe: 0.19.0 on 4 L40S with custom all-reduce off, Qwen2.5-72B at
 * tp 4, 51 + 35 graphs of 80 layers: estimate 2.73 GiB, pool 2.62 GiB, i.e.
 * 0.39-0.41. What this leaves out: Qwen3-235B-A22B (MoE) at tp 4 on L40S
 * (0.10.2) took at least 3.45 GiB for 67 graphs of 94 layers, 0.56, so MoE
 * layers at tp > 1 can cost more; one log is too few to fit a rule on.
 * tests/vectors/real-logs.json holds the logs. */
#define CG_NODE_MIB 0.24
#define CG_NODE_TP_MIB 0.40

/* Capture sizes of rule k up to max_size: how many, and the largest. */
static int cg_count(kv_release_cg_sizes k, int64_t max_size, int64_t *largest)
{
    int n = 0;
    *largest = 0;
    for (int64_t s = 1; s <= max_size && s <= 1024; s = s < 4 ? s * 2 : s < 8 ? 8 : s + ((k == KV_CG_STEP16_2SEQS && s >= 256) ? 16 : 8)) {
        if (k == KV_CG_V0 && s > 256)
            break;
        n++;
        *largest = s;
    }
    return n;
}

/* The user's graph flags: a largest size, an explicit list, FULL graphs off. */
typedef struct cg_flags {
    int64_t max_size;          /* --max-cudagraph-capture-size, or --cuda-graph-sizes N (0: the release's) */
    const int64_t *list;       /* --cuda-graph-sizes A B C ... (NULL: the release's rule) */
    int nlist;
    int no_full;               /* -O1 (0.12 on): PIECEWISE graphs only */
} cg_flags;

/* Sizes of an explicit list up to max_size: how many, and the largest. */
static int cg_count_list(const cg_flags *f, int64_t max_size, int64_t *largest)
{
    int n = 0;
    *largest = 0;
    for (int i = 0; i < f->nlist; i++)
        if (f->list[i] <= max_size) {
            n++;
            *largest = f->list[i] > *largest ? f->list[i] : *largest;
        }
    return n;
}

static double cg_bytes(const kv_release *r, const kv_model *m, int32_t tp, int nvlink, int64_t mns, int64_t mnbt,
                       int act_bytes, const cg_flags *f, int *pw_out, int *full_out)
{
    const kv_release_memory *mem = r->mem;
    if (tp < 1)
        tp = 1;
    int64_t cap;
    switch (mem->cg_sizes) {
    case KV_CG_V0: cap = (mns + 7) / 8 * 8; break;
    case KV_CG_STEP8_512: cap = 512; break;
    case KV_CG_STEP8_2SEQS:
    case KV_CG_STEP16_2SEQS: cap = 2 * mns < 512 ? 2 * mns : 512; break;
    default: cap = 0; break;
    }
    kv_release_cg_sizes rule = mem->cg_sizes;
    if (mem->cg_big_arch && !strcmp(m->architecture, mem->cg_big_arch)) {
        rule = KV_CG_STEP16_2SEQS;
        cap = mem->cg_big_max;
    }
    if (f && f->max_size > 0 && mem->cg_sizes != KV_CG_NONE)
        cap = f->max_size;
    if (cap > mnbt)
        cap = mnbt;
    int64_t largest = 0, largest_full = 0;
    int list = f && f->list && f->nlist > 0 && mem->cg_sizes != KV_CG_NONE;
    int n = list ? cg_count_list(f, mnbt, &largest) : cap > 0 ? cg_count(rule, cap, &largest) : 0;
    if (list)
        cap = largest;
    int full_decode = mem->cg_full_decode && !(f && f->no_full);
    int nfull = n > 0 && full_decode ? (list ? cg_count_list(f, cap < mns ? cap : mns, &largest_full)
                                             : cg_count(rule, cap < mns ? cap : mns, &largest_full))
                                     : 0;
    if (pw_out)
        *pw_out = mem->cg_sizes == KV_CG_V0 ? 0 : n;
    if (full_out)
        *full_out = mem->cg_sizes == KV_CG_V0 ? n : nfull;
    if (n == 0)
        return 0;
    double node = (tp == 1 ? CG_NODE_MIB : CG_NODE_TP_MIB) * 1024.0 * 1024.0;
    (void)nvlink; /* the all-reduce node costs the same on NVLink and PCIe */
    double L = m->num_hidden_layers;
    double first = kv_plan_forward_bytes(m, tp, largest, act_bytes);
    if (mem->cg_sizes == KV_CG_V0)
        return first + (n - 1) * L * node;
    double bytes = first + (n - 1) * (L + 1) * node;
    if (nfull > 0)
        bytes += (nfull - 1) * L * node;
    return bytes;
}

double kv_plan_cudagraph_bytes(const kv_release *r, const kv_model *m, int32_t tp, int nvlink, int64_t mns,
                               int64_t mnbt, int act_bytes, int *pw_out, int *full_out)
{
    return cg_bytes(r, m, tp, nvlink, mns, mnbt, act_bytes, NULL, pw_out, full_out);
}

/* -O N by release (kv_release_opt_levels): 1 when it turns the graphs off
 * (the term is then set), else fills *no_full for PIECEWISE-only. */
static int plan_opt_level(const plan_ctx *c, kv_plan *p, int *no_full)
{
    int lv = c->a->optimization_level;
    *no_full = 0;
    if (lv < 0)
        return 0;
    if (c->textbook) {
        plan_note(p, "-O %d is not used under --accounting textbook (its CUDA-graph figure is fixed)", lv);
        return 0;
    }
    switch (c->r->mem->opt_levels) {
    case KV_OPT_LEVELS:
        if (lv == 0) {
            plan_set_term(p, KV_PLAN_TERM_CUDAGRAPH, "cudagraph", 0, 0, 1, "-O0: no CUDA graphs");
            return 1;
        }
        *no_full = lv == 1;
        return 0;
    case KV_OPT_COMPILE_LEVEL:
        if (lv != 3) {
            plan_set_term(p, KV_PLAN_TERM_CUDAGRAPH, "cudagraph", 0, 0, 1,
                          "-O %d: V1 captures CUDA graphs only at compilation level 3", lv);
            return 1;
        }
        return 0;
    default:
        if (lv != 3 || !p->engine_v1)
            plan_note(p, "-O %d is not modelled for vLLM %s: the CUDA graphs shown are the release's default", lv,
                      p->vllm_version);
        return 0;
    }
}

void plan_cudagraph(const plan_ctx *c, kv_plan *p)
{
    const kv_args *a = c->a;
    const kv_release_memory *mem = c->r->mem;
    if (a->cudagraph_gib >= 0) {
        p->cudagraph_bytes = a->cudagraph_gib * KV_GIB;
        int counted = plan_cg_subtracted(c, p);
        plan_set_term(p, KV_PLAN_TERM_CUDAGRAPH, "cudagraph", p->cudagraph_bytes, 1, counted, "--cudagraph-gib%s",
                      counted ? "" : " (captured after the pool: not in the budget)");
        return;
    }
    if (a->enforce_eager) {
        plan_set_term(p, KV_PLAN_TERM_CUDAGRAPH, "cudagraph", 0, 0, 1, "--enforce-eager: no CUDA graphs");
        return;
    }
    cg_flags f = {.max_size = a->max_cudagraph_capture_size};
    if (a->cuda_graph_sizes_n == 1)
        f.max_size = a->cuda_graph_sizes[0];
    else if (a->cuda_graph_sizes_n > 1)
        f.list = a->cuda_graph_sizes, f.nlist = a->cuda_graph_sizes_n;
    if (plan_opt_level(c, p, &f.no_full))
        return;
    if (c->textbook) {
        if (f.max_size || f.list)
            plan_note(p, "the CUDA-graph sizes are not used under --accounting textbook (its figure is fixed)");
        p->cudagraph_bytes = mem->cudagraph_gib * KV_GIB;
        plan_set_term(p, KV_PLAN_TERM_CUDAGRAPH, "cudagraph", p->cudagraph_bytes, 0, 1,
                      "estimate (vLLM profiles a capture)");
        return;
    }
    int pw = 0, full = 0;
    p->cudagraph_bytes = cg_bytes(c->r, c->m, c->tp, c->gpu && c->gpu->nvlink_gbps > 0, p->max_num_seqs,
                                  p->max_num_batched_tokens, c->act_bytes, &f, &pw, &full);
    char graphs[64];
    if (pw > 0 && full > 0)
        snprintf(graphs, sizeof graphs, "%d PIECEWISE + %d FULL graphs", pw, full);
    else if (pw > 0)
        snprintf(graphs, sizeof graphs, "%d PIECEWISE graphs", pw);
    else
        snprintf(graphs, sizeof graphs, "%d graphs", full);
    if (plan_cg_subtracted(c, p))
        plan_set_term(p, KV_PLAN_TERM_CUDAGRAPH, "cudagraph", p->cudagraph_bytes, 0, 1,
                      "estimate taken before the pool: %s", graphs);
    else
        plan_set_term(p, KV_PLAN_TERM_CUDAGRAPH, "cudagraph", p->cudagraph_bytes, 0, 0,
                      "%s: %s, not in the budget", graphs,
                      p->model_runner_v2 && !plan_cg_profiled(c, p) && mem->cudagraph_estimate
                          ? "runner V2's estimate is 0; captured after the pool"
                      : plan_cg_profiled(c, p) && a->estimate_cudagraphs == 0
                          ? "estimate not subtracted (environment); captured after the pool"
                          : "captured after the pool");
}

int plan_cg_profiled(const plan_ctx *c, const kv_plan *p)
{
    return p->model_runner_v2 ? c->r->mem->cudagraph_estimate_v2 : c->r->mem->cudagraph_profiled;
}

int plan_cg_subtracted(const plan_ctx *c, const kv_plan *p)
{
    if (c->textbook)
        return 1;
    int on = c->r->mem->cudagraph_estimate;
    if (c->a->estimate_cudagraphs >= 0 && kv_release_reads_env(c->r, "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS"))
        on = c->a->estimate_cudagraphs != 0;
    return on && plan_cg_profiled(c, p);
}

/* ------------------------------------------------------------- the budget */

void plan_budget(const plan_ctx *c, kv_plan *p)
{
    const kv_args *a = c->a;
    const kv_release_memory *mem = c->r->mem;
    int tp = c->tp;
    double used = p->gpu_used_bytes;
    int peak = mem->budget == KV_BUDGET_PEAK;
    /* CUDA context. */
    double ctx = mem->cuda_context_gib[c->total >= 40.0 * KV_GIB] * KV_GIB;
    int ctx_over = a->cuda_context_gib >= 0;
    if (ctx_over)
        ctx = a->cuda_context_gib * KV_GIB;
    p->cuda_context_bytes = ctx;
    if (c->textbook)
        plan_set_term(p, KV_PLAN_TERM_CUDA_CONTEXT, "cuda_context", ctx, ctx_over, 1, "%s",
                      ctx_over ? "--cuda-context-gib" : "typical CUDA context");
    else if (peak)
        plan_set_term(p, KV_PLAN_TERM_CUDA_CONTEXT, "cuda_context", ctx, ctx_over, 1, "%s",
                      ctx_over ? "--cuda-context-gib (non-torch: in the budget)"
                               : "context and workspaces: non-torch memory, in the budget");
    else
        plan_set_term(p, KV_PLAN_TERM_CUDA_CONTEXT, "cuda_context", ctx, ctx_over, 0, "%s",
                      ctx_over ? "--cuda-context-gib (before the snapshot: outside the budget)"
                               : "made before vLLM's snapshot: outside the budget");
    /* NCCL and custom all-reduce buffers at tp > 1. */
    int nvlink = c->gpu && c->gpu->nvlink_gbps > 0;
    double nccl = 0;
    if (a->nccl_gib >= 0)
        nccl = a->nccl_gib * KV_GIB;
    else if (tp > 1)
        nccl = (c->textbook ? 1.0 : nvlink ? mem->non_torch_tp_nvlink_gib : mem->non_torch_tp_pcie_gib) * KV_GIB;
    /* FlashInfer's all-reduce fusion (0.17 on): Hopper and Blackwell only
     * (config/vllm.py enable_allreduce_rms_fusion); before 0.29 only when the
     * model is compiled at -O2/-O3 (kv_release_memory.fusion_needs_compile). */
    int cc = c->gpu ? c->gpu->compute_capability : 0;
    int compiled_o2 = !a->enforce_eager && !(mem->opt_levels == KV_OPT_LEVELS && a->optimization_level >= 0 &&
                                             a->optimization_level < 2);
    int fusion_card = !c->textbook && a->nccl_gib < 0 && tp > 1 && mem->non_torch_tp_fusion_gib > 0 &&
                      (cc == 90 || (cc >= 100 && cc < 110));
    /* Not compiled at -O2/-O3 from 0.29: the standalone all-reduce makes the
     * workspace on the first all-reduce small enough for it; the profile's
     * [max_num_batched_tokens, hidden] one must fit, or the workspace comes
     * after the pool is sized (flashinfer_all_reduce.py should_use_fi_ar). */
    double profile_ar = (double)p->max_num_batched_tokens * c->m->hidden_size * c->act_bytes;
    int eager_fits = profile_ar <= kv_release_fi_allreduce_max_mib(cc, tp) * 1048576.0;
    int fusion = fusion_card && (compiled_o2 || (!mem->fusion_needs_compile && eager_fits));
    if (fusion_card && !fusion && !mem->fusion_needs_compile && kv_release_fi_allreduce_max_mib(cc, tp) > 0)
        plan_note(p, "FlashInfer's all-reduce workspace (%.2f GiB) is not in the budget: the profile's all-reduce "
                     "(%.0f MiB) passes its %g MiB limit at tp %d, so the first all-reduce under the limit makes it "
                     "after the pool is sized",
                  mem->non_torch_tp_fusion_gib, profile_ar / 1048576.0, kv_release_fi_allreduce_max_mib(cc, tp), tp);
    if (fusion)
        nccl = mem->non_torch_tp_fusion_gib * KV_GIB;
    p->nccl_bytes = nccl;
    if (a->nccl_gib >= 0)
        plan_set_term(p, KV_PLAN_TERM_NCCL, "nccl", nccl, 1, 1, "--nccl-gib");
    else if (tp > 1)
        plan_set_term(p, KV_PLAN_TERM_NCCL, "nccl", nccl, 0, 1,
                      c->textbook ? "NCCL buffers, tp %d"
                      : fusion    ? "NCCL + FlashInfer all-reduce fusion workspace, tp %d (%s)"
                                  : "NCCL + custom all-reduce, tp %d (%s)",
                      tp, nvlink ? "NVLink" : "PCIe");
    else
        plan_set_term(p, KV_PLAN_TERM_NCCL, "nccl", 0, 0, 1, "none at tp 1");
    /* Non-torch growth in the profile (release accounting only). */
    if (!c->textbook) {
        if (peak) {
            /* Everything in use that torch did not allocate: other processes too. */
            p->non_torch_bytes = used;
            plan_set_term(p, KV_PLAN_TERM_NON_TORCH, "non_torch", used, a->gpu_used_gib > 0, 1,
                          "other processes on the card (vLLM counts all non-torch memory)");
        } else {
            p->non_torch_bytes = mem->non_torch_gib * KV_GIB + p->compile_cold_non_torch_bytes;
            if (p->compile_cold_non_torch_bytes > 0)
                plan_set_term(p, KV_PLAN_TERM_NON_TORCH, "non_torch", p->non_torch_bytes, 0, 1,
                              "workspaces the profile run adds (measured) + %.2f GiB a cold compile leaves",
                              p->compile_cold_non_torch_bytes / KV_GIB);
            else
                plan_set_term(p, KV_PLAN_TERM_NON_TORCH, "non_torch", p->non_torch_bytes, 0, 1,
                              "workspaces the profile run adds (measured)");
        }
        /* utils/mem_utils.py MemorySnapshot.measure: on an integrated GPU
         * the free memory is the host's (psutil's available memory from
         * 0.12, cudaMemGetInfo before), so the host side's growth between
         * the snapshots is non-torch memory too */
        if (c->gpu && c->gpu->unified_memory)
            plan_note(p, "%s shares its memory with the host (unified memory): vLLM counts what the host side takes while the model "
                         "loads and is profiled (the engine's own process, compile workers, page cache of a cold "
                         "load) as non-torch memory, which kvlab does not model (2.2 GiB in a 0.27.1 run of "
                         "Qwen3-0.6B): the pool comes out smaller than this and changes from one start to the next",
                      c->gpu->id);
    } else {
        plan_set_term(p, KV_PLAN_TERM_NON_TORCH, "non_torch", 0, 0, 0, "not a textbook term");
    }
    double non_kv = 0;
    for (int i = KV_PLAN_TERM_WEIGHTS; i < KV_PLAN_TERM_KV_CACHE; i++)
        if (p->terms[i].counted)
            non_kv += p->terms[i].bytes;
    if (a->kv_cache_memory_bytes > 0) {
        p->kv_cache_memory_bytes_set = 1;
        p->available_kv_bytes = (double)a->kv_cache_memory_bytes;
        p->budget_bytes = non_kv + p->available_kv_bytes;
        plan_set_term(p, KV_PLAN_TERM_BUDGET, "budget", p->budget_bytes, 1, 1,
                      "--kv-cache-memory-bytes: the terms + the pool (utilization ignored)");
    } else {
        p->budget_bytes = c->total * p->gpu_memory_utilization;
        p->available_kv_bytes = p->budget_bytes - non_kv;
        plan_set_term(p, KV_PLAN_TERM_BUDGET, "budget", p->budget_bytes, a->gpu_memory_gib >= 0, 1, "%.2f GiB x %g",
                      c->total / KV_GIB, p->gpu_memory_utilization);
    }
    plan_set_term(p, KV_PLAN_TERM_KV_CACHE, "kv_cache", p->available_kv_bytes, p->kv_cache_memory_bytes_set, 1, "%s",
                  p->kv_cache_memory_bytes_set ? "--kv-cache-memory-bytes" : "budget - the terms above");
}
