/* kv_plan_checks: the checks vLLM makes before memory matters, as its config
 * and loader make them (kv_plan_int.h plan_check_config / plan_check_load):
 *
 *   config  the quantization method against the card's compute capability
 *           (config/vllm.py _get_quantization_config, config.py before 0.10:
 *           "The quantization method X is not supported for the current
 *           GPU. Minimum capability: N. Current capability: M.");
 *   load    weight shapes against tensor parallelism, in the order the
 *           first decoder layer creates its linear layers (qkv_proj, o_proj,
 *           then the MLP or the experts): FP8 block quantization
 *           (quantization/fp8.py, from 0.13 quantization/utils/fp8_utils.py
 *           validate_fp8_block_shape and validate_fp8_block_shape_moe), and
 *           AWQ/GPTQ groups on row-parallel layers (quantization/awq.py,
 *           gptq.py create_weights; from 0.24 auto_awq.py, auto_gptq.py).
 *
 * The minimum capabilities are rows of a table, one per method (vLLM's name)
 * and range of releases, each read in that release's get_min_capability. */
#include "kv_plan_int.h"
#include "kv_util.h"

#include <stdio.h>
#include <string.h>

/* One method's minimum compute capability over a range of releases, by
 * vLLM's method name (QuantizationConfig.get_name). */
typedef struct min_cc_row {
    const char *method;
    const char *first;  /* first release of the range */
    const char *last;   /* last release (NULL: still so) */
    int min_cc;         /* x10 */
    const char *source; /* the file that says so */
} min_cc_row;

static const min_cc_row MIN_CC[] = {
    /* Fp8Config.get_min_capability: 80 until 0.13, then 75 (Turing runs
     * fp8 weights through the Marlin fallback). */
    {"fp8", "0.6.4", "0.13.99", 80, "quantization/fp8.py"},
    {"fp8", "0.14.0", NULL, 75, "quantization/fp8.py"},
    /* An AWQ checkpoint falls back from awq_marlin (80, then 75 from 0.14)
     * to plain awq on older cards; awq itself needs 7.5. */
    {"awq", "0.6.4", NULL, 75, "quantization/awq.py, from 0.24 auto_awq.py"},
    {"awq_marlin", "0.6.4", "0.13.99", 80, "quantization/awq_marlin.py"},
    {"awq_marlin", "0.14.0", NULL, 75, "quantization/awq_marlin.py, from 0.24 auto_awq.py"},
    {"gptq", "0.6.4", NULL, 60, "quantization/gptq.py, from 0.22 auto_gptq.py"},
    {"gptq_marlin", "0.6.4", "0.13.99", 80, "quantization/gptq_marlin.py"},
    {"gptq_marlin", "0.14.0", NULL, 75, "quantization/gptq_marlin.py, from 0.22 auto_gptq.py"},
    {"bitsandbytes", "0.6.4", NULL, 70, "quantization/bitsandbytes.py"},
    {"compressed-tensors", "0.6.4", NULL, 70, "quantization/compressed_tensors/compressed_tensors.py"},
    {"mxfp4", "0.10.1", NULL, 80, "quantization/mxfp4.py"},
    {"fbgemm_fp8", "0.6.4", NULL, 80, "quantization/fbgemm_fp8.py"},
    /* ModelOptFp8Config: 89 (Ada) until 0.26, 80 from 0.27; NVFP4 75. */
    {"modelopt", "0.6.4", "0.26.99", 89, "quantization/modelopt.py"},
    {"modelopt", "0.27.0", NULL, 80, "quantization/modelopt.py"},
    {"modelopt_fp4", "0.7.0", NULL, 75, "quantization/modelopt.py ModelOptNvFp4Config"},
};
#define NUM_MIN_CC ((int)(sizeof MIN_CC / sizeof MIN_CC[0]))

/* The method vLLM runs, by its name: --quantization as typed, else the
 * checkpoint's quant_method (vLLM upgrades awq/gptq to their Marlin forms
 * on cards that run them, and falls back on older ones: the plain forms'
 * minimum is the binding one). */
static const char *effective_method(const kv_model *m, const kv_args *a)
{
    switch (a->quantization) {
    case KV_ARGS_QUANT_FP8: return "fp8";
    case KV_ARGS_QUANT_AWQ: return a->quantization_text[0] ? a->quantization_text : "awq";
    case KV_ARGS_QUANT_GPTQ: return a->quantization_text[0] ? a->quantization_text : "gptq";
    case KV_ARGS_QUANT_BITSANDBYTES: return "bitsandbytes";
    case KV_ARGS_QUANT_MXFP4: return "mxfp4";
    case KV_ARGS_QUANT_COMPRESSED_TENSORS: return "compressed-tensors";
    default: return m->quant == KV_QUANT_NONE ? "" : m->quant_method;
    }
}

/* The quantization format the weights are in (kv_quant). */
static kv_quant effective_quant(const kv_model *m, const kv_args *a)
{
    switch (a->quantization) {
    case KV_ARGS_QUANT_FP8: return KV_QUANT_FP8;
    case KV_ARGS_QUANT_AWQ: return KV_QUANT_AWQ;
    case KV_ARGS_QUANT_GPTQ: return KV_QUANT_GPTQ;
    case KV_ARGS_QUANT_BITSANDBYTES: return KV_QUANT_BITSANDBYTES;
    case KV_ARGS_QUANT_MXFP4: return KV_QUANT_MXFP4;
    case KV_ARGS_QUANT_COMPRESSED_TENSORS: return KV_QUANT_COMPRESSED_TENSORS;
    default: return m->quant;
    }
}

int plan_min_capability(const char *method, const char *version)
{
    for (int i = 0; method && i < NUM_MIN_CC; i++) {
        const min_cc_row *r = &MIN_CC[i];
        if (!strcmp(r->method, method) && kv_release_compare(version, r->first) >= 0 &&
            (!r->last || kv_release_compare(version, r->last) <= 0))
            return r->min_cc;
    }
    return 0;
}

int plan_check_config(const plan_ctx *c, kv_plan *p)
{
    if (c->textbook || !c->gpu || c->gpu->compute_capability <= 0)
        return 0;
    const char *name = effective_method(c->m, c->a);
    if (!name[0])
        return 0;
    int min = plan_min_capability(name, p->vllm_version);
    int cc = c->gpu->compute_capability;
    if (!min || cc >= min)
        return 0;
    char msg[256];
    snprintf(msg, sizeof msg,
             "The quantization method %s is not supported for the current GPU. Minimum capability: %d. Current "
             "capability: %d.",
             name, min, cc);
    plan_fail(p, KV_PLAN_ERR_QUANT_CAPABILITY, msg);
    char line[300];
    snprintf(line, sizeof line, "ValueError: %s", msg);
    plan_log(p, "ERROR", line);
    return 1;
}

/* Whether a kvlab flag of the note kind (no field of its own) was given. */
static int note_flag_given(const kv_args *a, const char *name)
{
    const kv_args_flag *f = kv_args_flag_find(name), *f0 = kv_args_flag_at(0);
    if (!f || !f0)
        return 0;
    int i = (int)(f - f0);
    return i >= 0 && i < 256 && ((a->given[i / 64] >> (i % 64)) & 1);
}

static int load_fail(kv_plan *p, const char *msg)
{
    plan_fail(p, KV_PLAN_ERR_LOAD_CHECK, msg);
    char line[300];
    snprintf(line, sizeof line, "ValueError: %s", msg);
    plan_log(p, "ERROR", line);
    return 1;
}

/* FP8 block quantization: validate_fp8_block_shape for a linear layer of
 * output partitions outs[0..n) (merged when n > 1) and input_per
 * (row-parallel when split), then _moe for the experts. */
static int fp8_linear(kv_plan *p, int tp, int row_split, int64_t input_per, const int64_t *outs, int n, int col_split,
                      int bn, int bk)
{
    char msg[256];
    if (tp > 1 && row_split && input_per % bk) {
        snprintf(msg, sizeof msg, "Weight input_size_per_partition = %lld is not divisible by weight quantization "
                                  "block_k = %d.", (long long)input_per, bk);
        return load_fail(p, msg);
    }
    int split = tp > 1 && col_split;
    if (split || n > 1) {
        int check = split ? n : n - 1; /* merged, not split: the last may be ragged */
        for (int i = 0; i < check; i++)
            if (outs[i] % bn) {
                snprintf(msg, sizeof msg, "Weight output_partition_size = %lld is not divisible by weight "
                                          "quantization block_n = %d.", (long long)outs[i], bn);
                return load_fail(p, msg);
            }
    }
    return 0;
}

static int check_fp8_blocks(const plan_ctx *c, kv_plan *p)
{
    const kv_model *m = c->m;
    int bn = m->quant_block[0], bk = m->quant_block[1], tp = c->tp;
    if (bn <= 0 || bk <= 0)
        return 0;
    if (m->is_mla)
        return 0; /* MLA's projections (q_a/kv_a replicated) are not checked here */
    int64_t hd = m->head_dim, h = m->hidden_size;
    int64_t kv_per = m->num_key_value_heads >= tp ? m->num_key_value_heads / tp : 1;
    int64_t qkv[3] = {(int64_t)m->num_attention_heads * hd / tp, kv_per * hd, kv_per * hd};
    if (fp8_linear(p, tp, 0, h, qkv, 3, 1, bn, bk))
        return 1;
    int64_t o[1] = {h};
    if (fp8_linear(p, tp, 1, (int64_t)m->num_attention_heads * hd / tp, o, 1, 0, bn, bk))
        return 1;
    int moe_first = m->num_experts > 0 && m->first_k_dense_replace <= 0;
    if (!moe_first) {
        int64_t I = m->intermediate_size / tp, gu[2] = {I, I}, d[1] = {h};
        if (fp8_linear(p, tp, 0, h, gu, 2, 1, bn, bk) || fp8_linear(p, tp, 1, I, d, 1, 0, bn, bk))
            return 1;
    }
    if (m->num_experts > 0) {
        /* expert parallelism keeps each expert whole */
        int64_t I = note_flag_given(c->a, "enable-expert-parallel") ? m->moe_intermediate_size
                                                                     : m->moe_intermediate_size / tp;
        char msg[256];
        if (I % bn) {
            snprintf(msg, sizeof msg, "The output_size of gate's and up's weight = %lld is not divisible by weight "
                                      "quantization block_n = %d.", (long long)I, bn);
            return load_fail(p, msg);
        }
        if (tp > 1 && I % bk) {
            snprintf(msg, sizeof msg, "The input_size of down's weight = %lld is not divisible by weight "
                                      "quantization block_k = %d.", (long long)I, bk);
            return load_fail(p, msg);
        }
    }
    return 0;
}

/* How an AWQ checkpoint meets a group that does not divide a layer's rows
 * where vLLM runs it through Marlin (a card at awq_marlin's minimum, the
 * method not forced to plain awq by --quantization awq): up to 0.7.2
 * marlin_utils.py verify_marlin_supports_shape raises its own error; from
 * 0.7.3 the layer falls back to the plain AWQ kernel with a warning
 * (awq_marlin.py, from 0.24 auto_awq.py), whose create_weights then raises
 * the plain error. One row per range of releases. */
static const struct {
    const char *first, *last; /* releases (last NULL: still so) */
    const char *fallback;     /* the Marlin method's name in the warning; NULL: Marlin raises */
} AWQ_MARLIN_GROUPS[] = {
    {"0.6.4", "0.7.2", NULL},
    {"0.7.3", "0.23.99", "AWQMarlin"},
    {"0.24.0", NULL, "AutoAWQMarlin"},
};

/* AWQ/GPTQ: a row-parallel layer's input rows per rank must hold whole
 * groups (o_proj first, then down_proj; the experts' own kernels are
 * not checked here), in the words of the kernel the release runs. */
static int check_groups(const plan_ctx *c, kv_plan *p, kv_quant q)
{
    const kv_model *m = c->m;
    int g = m->quant_group_size;
    if (c->tp <= 1 || (q != KV_QUANT_AWQ && q != KV_QUANT_GPTQ) || m->quant != q || g <= 0)
        return 0;
    int64_t o_in = (int64_t)m->num_attention_heads * m->head_dim / c->tp;
    int64_t d_in = m->num_experts > 0 && m->first_k_dense_replace <= 0 ? 0 : m->intermediate_size / c->tp;
    if (!(o_in % g || (d_in > 0 && d_in % g)))
        return 0;
    const char *plain = "The input size is not aligned with the quantized weight shape. This can be caused by too "
                        "large tensor parallel size.";
    int cc = c->gpu ? c->gpu->compute_capability : 0;
    int min = plan_min_capability("awq_marlin", p->vllm_version);
    int marlin = q == KV_QUANT_AWQ && strcmp(c->a->quantization_text, "awq") && cc > 0 && min > 0 && cc >= min;
    for (size_t i = 0; marlin && i < sizeof AWQ_MARLIN_GROUPS / sizeof AWQ_MARLIN_GROUPS[0]; i++) {
        if (kv_release_compare(p->vllm_version, AWQ_MARLIN_GROUPS[i].first) < 0 ||
            (AWQ_MARLIN_GROUPS[i].last && kv_release_compare(p->vllm_version, AWQ_MARLIN_GROUPS[i].last) > 0))
            continue;
        int64_t rows = o_in % g ? o_in : d_in;
        const char *layer = o_in % g ? "model.layers.0.self_attn.o_proj" : "model.layers.0.mlp.down_proj";
        char msg[256];
        if (!AWQ_MARLIN_GROUPS[i].fallback) {
            snprintf(msg, sizeof msg,
                     "Weight input_size_per_partition = %lld is not divisible by group_size = %d.Consider reducing "
                     "tensor_parallel_size or running with --quantization gptq.",
                     (long long)rows, g);
            return load_fail(p, msg);
        }
        snprintf(msg, sizeof msg, "Layer '%s' is not supported by %s. Falling back to unoptimized AWQ kernels.",
                 layer, AWQ_MARLIN_GROUPS[i].fallback);
        plan_log(p, "WARNING", msg);
    }
    return load_fail(p, plain);
}

int plan_check_load(const plan_ctx *c, kv_plan *p)
{
    if (c->textbook || c->a->weights_gib >= 0)
        return 0;
    kv_quant q = effective_quant(c->m, c->a);
    if (q == KV_QUANT_FP8 && c->m->quant == KV_QUANT_FP8 && !strcmp(c->m->quant_method, "fp8") &&
        kv_release_compare(p->vllm_version, "0.6.6") >= 0)
        return check_fp8_blocks(c, p);
    return check_groups(c, p, q);
}
