/* kv_plan: vLLM's start-up memory plan, per GPU, in the phases vLLM goes
 * through: inputs and defaults, KV geometry, the terms (kv_plan_terms.c),
 * the free-memory check, loading, the profile run, KV sizing, the length
 * check, the pool and the sampler warm-up. */
#include "kv_plan_fields.h"
#include "kv_plan_int.h"
#include "kv_torch_oom.h"
#include "kv_vllm_flags.h"
#include "kv_util.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *kv_plan_error_name(kv_plan_error e)
{
    switch (e) {
    case KV_PLAN_ERR_FREE_MEMORY: return "free_memory";
    case KV_PLAN_ERR_NO_KV_MEMORY: return "no_memory_for_cache_blocks";
    case KV_PLAN_ERR_MAX_MODEL_LEN: return "max_model_len";
    case KV_PLAN_ERR_AUTO_FIT: return "auto_fit";
    case KV_PLAN_ERR_WEIGHTS_OOM: return "weights_oom";
    case KV_PLAN_ERR_PROFILE_OOM: return "profile_oom";
    case KV_PLAN_ERR_SAMPLER_OOM: return "sampler_oom";
    case KV_PLAN_ERR_QUANT_CAPABILITY: return "quantization_capability";
    case KV_PLAN_ERR_LOAD_CHECK: return "load_check";
    case KV_PLAN_ERR_POOL_OOM: return "pool_oom";
    default: return "";
    }
}

/* ------------------------------------------------------------ KV sizing */

int64_t plan_clamp_i64(double v)
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
    return plan_clamp_i64(need);
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

/* vLLM's estimate_max_model_len (v1/core/kv_cache_utils.py, from 0.33
 * kv_cache_planning.py): binary search over [1, max_len] for the largest
 * length whose max_memory_usage_bytes, summed over the layers' specs
 * (cdiv(len, block_size) x page_size per full-attention layer), fits. */
int64_t kv_plan_estimate_max_model_len(const kv_plan *p, double available, int64_t max_len)
{
    if (max_len < 1 || (double)kv_plan_request_bytes(p, 1) > available)
        return 0;
    int64_t lo = 1, hi = max_len, result = 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if ((double)kv_plan_request_bytes(p, mid) <= available) {
            result = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return result;
}

/* The memory the length check and auto-fit plan against: from 0.29 one
 * block of the pool (the null block the block pool keeps) comes off first
 * (check_enough_kv_cache_memory, _pool_bytes_per_block). */
static double check_memory(const kv_plan *p)
{
    double avail = p->available_kv_bytes;
    if (p->release->mem->check_reserves_null_block)
        avail -= (double)p->page_size_bytes * p->group_size;
    return avail;
}

/* -------------------------------------------------------- log and notes */

void plan_log(kv_plan *p, const char *level, const char *line)
{
    if (p->num_log >= KV_PLAN_MAX_LOG)
        return;
    char *b = p->log[p->num_log++];
    size_t lv = strlen(level), n = sizeof p->log[0];
    if (lv + 2 > n)
        lv = n - 2;
    memcpy(b, level, lv);
    b[lv] = ' ';
    size_t l = strlen(line);
    if (lv + 1 + l + 1 > n)
        l = n - lv - 2;
    memcpy(b + lv + 1, line, l);
    b[lv + 1 + l] = '\0';
}

void plan_note(kv_plan *p, const char *fmt, ...)
{
    if (p->num_notes >= KV_PLAN_MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->notes[p->num_notes++], sizeof p->notes[0], fmt, ap);
    va_end(ap);
}

void plan_set_term(kv_plan *p, int i, const char *name, double bytes, int over, int counted, const char *fmt, ...)
{
    kv_plan_term *t = &p->terms[i];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->bytes = bytes;
    t->overridden = over;
    t->counted = counted;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->how, sizeof t->how, fmt, ap);
    va_end(ap);
}

void plan_fail(kv_plan *p, kv_plan_error kind, const char *msg)
{
    p->starts = 0;
    p->error_kind = kind;
    snprintf(p->error, sizeof p->error, "%s", msg);
}

void plan_format(const kv_plan *p, const char *tpl, const kv_release_arg *extra, int nextra, char *out, size_t n)
{
    enum { NBASE = 22 };
    kv_release_arg args[NBASE + 8];
    double G = KV_GIB;
    double init = p->gpu_used_bytes + p->cuda_context_bytes + p->weights_bytes;
    double cg_delta = p->gpu_total_bytes > 0 ? p->cudagraph_bytes / p->gpu_total_bytes : 0;
    kv_release_arg base[NBASE] = {
        {"weights", p->weights_bytes / G, NULL},
        {"total", p->gpu_total_bytes / G, NULL},
        {"util", p->gpu_memory_utilization, NULL},
        {"budget", p->budget_bytes / G, NULL},
        {"initial", init / G, NULL},
        {"peak", (p->weights_bytes + p->activation_bytes) / G, NULL},
        {"post", (init + p->non_torch_bytes) / G, NULL},
        {"non_torch", (p->release->mem->budget == KV_BUDGET_PEAK
                           ? p->cuda_context_bytes + p->nccl_bytes + p->non_torch_bytes
                           : p->non_torch_bytes + p->nccl_bytes) / G, NULL},
        {"activation", p->activation_bytes / G, NULL},
        {"kv", p->available_kv_bytes / G, NULL},
        {"tokens", (double)p->kv_cache_tokens, NULL},
        {"blocks", (double)p->num_blocks_computed, NULL},
        {"cpu_blocks", p->page_size_bytes > 0 ? floor(4.0 * G / ((double)p->page_size_bytes * p->num_layers)) : 0, NULL},
        {"max_model_len", (double)p->max_model_len, NULL},
        {"concurrency", p->max_concurrency, NULL},
        {"needed", (double)p->needed_bytes / G, NULL},
        {"estimated", (double)p->estimated_max_model_len, NULL},
        {"free", p->free_at_start_bytes / G, NULL},
        {"requested", p->gpu_total_bytes * p->gpu_memory_utilization / G, NULL},
        {"cudagraph", p->cudagraph_bytes / G, NULL},
        /* gpu_worker.py: round(util -/+ estimate / total, 4), capped at 1.0 */
        {"equiv_util", p->gpu_total_bytes > 0 ? round((p->gpu_memory_utilization - cg_delta) * 1e4) / 1e4 : 0, NULL},
        {"suggested_util", p->gpu_total_bytes > 0 ? fmin(round((p->gpu_memory_utilization + cg_delta) * 1e4) / 1e4, 1.0)
                                                  : 0, NULL},
    };
    int na = 0;
    for (int i = 0; i < nextra && na < 8; i++)
        args[na++] = extra[i];
    for (int i = 0; i < NBASE; i++)
        args[na++] = base[i]; /* extra first: it wins */
    kv_release_format(out, n, tpl, args, na);
}

void plan_log_tpl(kv_plan *p, const char *level, const char *tpl, const kv_release_arg *extra, int nextra)
{
    if (!tpl)
        return;
    char line[1024];
    plan_format(p, tpl, extra, nextra, line, sizeof line);
    plan_log(p, level, line);
}

/* A failure: vLLM's message (a release template, or kvlab's own text for a
 * torch OOM) as the error and as an ERROR log line. */
static int fail_tpl(kv_plan *p, kv_plan_error kind, const char *tpl, const kv_release_arg *extra, int nextra,
                    const char *prefix)
{
    char msg[1024];
    plan_format(p, tpl, extra, nextra, msg, sizeof msg);
    plan_fail(p, kind, msg);
    char line[1100];
    size_t pl = strlen(prefix), ml = strlen(msg);
    if (pl + ml + 1 > sizeof line)
        ml = sizeof line - pl - 1;
    memcpy(line, prefix, pl);
    memcpy(line + pl, msg, ml);
    line[pl + ml] = '\0';
    plan_log(p, "ERROR", line);
    return KV_PLAN_OK;
}

/* The words of config/model.py _get_and_verify_max_len for a --max-model-len
 * past the model's derived length, by the release that first said them: the
 * message's tail, what the ValueError adds, and what the warning under
 * VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 adds. */
#define LONG_LEN_CAUTION                                                                                           \
    "VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with extreme caution. If the model uses relative position "        \
    "encoding (RoPE), positions exceeding derived_max_model_len lead to nan. If the model uses absolute position " \
    "encoding, positions exceeding derived_max_model_len will cause a CUDA array out-of-bounds error."
static const struct {
    const char *first, *msg_tail, *error_tail, *warning_tail;
    int float_len; /* the length prints as a float ("2048.0"): from 0.12 every RoPE model's length is multiplied
                      by its scaling factor (1.0 by default; not Gemma 3's), as the 0.19 log of
                      tests/vectors/logs/planner-0190-microsoft-phi-2-*.FAILED.log shows */
} LONG_LEN_TEXT[] = {
    {"0.6.4", " This may lead to incorrect model outputs or CUDA errors.",
     " To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1",
     " Make sure the value is correct and within the model context size.", 0},
    {"0.10.2", "", " To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. " LONG_LEN_CAUTION,
     " " LONG_LEN_CAUTION, 0},
    {"0.12.0", "", " To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. " LONG_LEN_CAUTION,
     " " LONG_LEN_CAUTION, 1},
};

/* ---------------------------------------------------------- the phases */

/* Input checks that vLLM makes before anything runs (config/parallel.py,
 * config/model.py): impossible input, KV_PLAN_EINVAL. */
static int phase_validate(const plan_ctx *c)
{
    const kv_model *m = c->m;
    const kv_args *a = c->a;
    if (c->tp < 1)
        return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL, "tensor_parallel_size must be at least 1, got %d", c->tp);
    if (m->num_hidden_layers < 1 || m->num_attention_heads < 1 || m->hidden_size < 1)
        return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL, "the model has no shape (was it loaded?)");
    if (m->num_attention_heads % c->tp)
        return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL,
                       "Total number of attention heads (%d) must be divisible by tensor parallel size (%d).",
                       m->num_attention_heads, c->tp);
    if (a->gpu_memory_gib < 0 && !c->gpu)
        return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL,
                       "no GPU: give --gpu NAME (see kvlab gpus) or --gpu-memory-gib X");
    if (a->quantization != KV_ARGS_QUANT_NONE && m->quant != KV_QUANT_NONE) {
        const char *flag = kv_args_quant_name(a->quantization);
        int same = (a->quantization == KV_ARGS_QUANT_FP8 && m->quant == KV_QUANT_FP8) ||
                   (a->quantization == KV_ARGS_QUANT_AWQ && m->quant == KV_QUANT_AWQ) ||
                   (a->quantization == KV_ARGS_QUANT_GPTQ && m->quant == KV_QUANT_GPTQ) ||
                   (a->quantization == KV_ARGS_QUANT_MXFP4 && m->quant == KV_QUANT_MXFP4) ||
                   (a->quantization == KV_ARGS_QUANT_BITSANDBYTES && m->quant == KV_QUANT_BITSANDBYTES) ||
                   (a->quantization == KV_ARGS_QUANT_COMPRESSED_TENSORS && m->quant == KV_QUANT_COMPRESSED_TENSORS);
        if (!same)
            return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL,
                           "Quantization method specified in the model config (%s) does not match the quantization "
                           "method specified in the `quantization` argument (%s).",
                           m->quant_method, flag);
    }
    /* --quantization X on a checkpoint without its quantization config, for
     * a method whose config is read from a file beside config.json (the
     * release's get_config_filenames lists one: awq, gptq, modelopt, hqq,
     * marlin, ...; kv_vllm_quantization_need_file): vLLM's get_quant_config
     * (model_executor/model_loader/weight_utils.py) finds none and stops.
     * The textbook sizes an AWQ/GPTQ checkpoint of the same shape (the
     * course's "what AWQ would give"). */
    const char *qt = a->quantization_text[0] ? a->quantization_text : kv_args_quant_name(a->quantization);
    int ri = kv_vllm_release_index(a->vllm_version);
    if (!c->textbook && m->quant == KV_QUANT_NONE && !m->has_quantize_config && ri >= 0 && strcmp(qt, "none") &&
        kv_vllm_list_has(kv_vllm_quantization_need_file[ri], qt)) {
        int awq = a->quantization == KV_ARGS_QUANT_AWQ, gptq = a->quantization == KV_ARGS_QUANT_GPTQ;
        if (awq || gptq)
            return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL,
                           "ValueError: Cannot find the config file for %s (%s has no quantization_config: "
                           "--quantization %s needs an %s checkpoint of the model; --accounting textbook sizes one)",
                           qt, m->id, qt, awq ? "AWQ" : "GPTQ");
        return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL,
                       "ValueError: Cannot find the config file for %s (%s has no quantization_config: --quantization "
                       "%s reads the scales' layout from a quantized checkpoint)",
                       qt, m->id, qt);
    }
    if (a->kv_cache_dtype == KV_ARGS_KV_FP8_DS_MLA && !m->is_mla)
        return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL,
                       "--kv-cache-dtype fp8_ds_mla needs an MLA model (DeepSeek V2/V3)");
    if (!c->textbook && a->max_model_len == KV_MAX_MODEL_LEN_AUTO && !c->r->mem->supports_auto_fit)
        return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL,
                       "--max-model-len auto: vLLM %s has no auto-fit (from 0.14.0); give a length",
                       a->vllm_version[0] ? a->vllm_version : c->r->first);
    return KV_PLAN_OK;
}

/* bfloat16 needs compute capability 8.0: an explicit --dtype bfloat16 is
 * refused on an older card (the worker's dtype check); with --dtype auto a
 * bfloat16 checkpoint falls back to float16 with a warning where the release
 * does (warn_bf16_fallback), else it is refused the same way. */
static int phase_dtype(plan_ctx *c, kv_plan *p)
{
    const kv_gpu *gpu = c->gpu;
    int cc = gpu ? gpu->compute_capability : 0;
    if (cc <= 0 || cc >= 80)
        return KV_PLAN_OK;
    const kv_args *a = c->a;
    int bf16_ckpt = strcmp(c->m->torch_dtype, "float16") && strcmp(c->m->torch_dtype, "float32");
    if (a->dtype != KV_ARGS_DTYPE_BF16 && !(a->dtype == KV_ARGS_DTYPE_AUTO && bf16_ckpt))
        return KV_PLAN_OK;
    char ccs[16];
    snprintf(ccs, sizeof ccs, "%d.%d", cc / 10, cc % 10);
    /* vLLM names the card as torch does (current_platform.get_device_name()) */
    kv_release_arg x[] = {{"gpu_name", 0, gpu->device_name[0] ? gpu->device_name : gpu->name}, {"cc", 0, ccs}};
    const kv_release_text *t = c->r->text;
    if (a->dtype == KV_ARGS_DTYPE_AUTO && t->warn_bf16_fallback) {
        plan_log_tpl(p, "WARNING", t->warn_bf16_fallback, x, 2);
        c->fp16_for_card = 1;
        return KV_PLAN_OK;
    }
    char msg[600];
    plan_format(p, t->err_bf16, x, 2, msg, sizeof msg);
    return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL, "%s%s", msg,
                   a->dtype == KV_ARGS_DTYPE_AUTO ? " (--dtype auto keeps the checkpoint's bfloat16 in this release)"
                                                  : "");
}

/* The card, the accounting and the scheduler's defaults
 * (engine/arg_utils.py _set_default_args, config.py SchedulerConfig). */
static int phase_inputs(const plan_ctx *c, kv_plan *p)
{
    const kv_model *m = c->m;
    const kv_args *a = c->a;
    const kv_gpu *gpu = c->gpu;
    const kv_release_memory *mem = c->r->mem;
    p->release = c->r;
    p->accounting = c->textbook ? KV_ACCOUNTING_TEXTBOOK : KV_ACCOUNTING_RELEASE;
    if (!c->textbook)
        snprintf(p->vllm_version, sizeof p->vllm_version, "%s",
                 a->vllm_version[0] ? a->vllm_version : kv_release_newest()->first);
    else if (a->vllm_version[0])
        plan_note(p, "--vllm-version %s is not used under --accounting textbook (the course's arithmetic)",
                  a->vllm_version);
    p->engine_v1 = mem->engine_v1;
    if (c->v0_for_offload)
        plan_log(p, "WARNING", "--cpu-offload-gb is not supported by the V1 Engine. Falling back to V0.");
    else if (!c->textbook && !mem->engine_v1 && a->use_v1 == 0 && kv_release_compare(c->r->first, "0.8.0") >= 0)
        plan_note(p, "VLLM_USE_V1=0: vLLM %s runs its V0 engine", p->vllm_version);
    else if (!c->textbook && !mem->engine_v1 && gpu && kv_release_compare(c->r->first, "0.8.0") >= 0)
        plan_note(p, "%s has compute capability %d.%d: vLLM %s falls back to its V0 engine below 8.0",
                  gpu->name, gpu->compute_capability / 10, gpu->compute_capability % 10, p->vllm_version);
    if (gpu) {
        snprintf(p->gpu_id, sizeof p->gpu_id, "%s", gpu->id);
        snprintf(p->gpu_name, sizeof p->gpu_name, "%s", gpu->name);
        snprintf(p->device_name, sizeof p->device_name, "%.63s", gpu->device_name[0] ? gpu->device_name : gpu->name);
    } else {
        snprintf(p->gpu_id, sizeof p->gpu_id, "custom");
        snprintf(p->gpu_name, sizeof p->gpu_name, "custom card");
        snprintf(p->device_name, sizeof p->device_name, "custom card");
    }
    p->gpu_total_bytes = c->total;
    p->gpu_used_bytes = a->gpu_used_gib > 0 ? a->gpu_used_gib * KV_GIB : 0;
    p->gpu_memory_utilization = kv_args_is_set(a, "gpu-memory-utilization") || c->textbook
                                    ? a->gpu_memory_utilization
                                    : mem->default_gpu_memory_utilization;
    p->tensor_parallel_size = c->tp;
    p->num_ranks = c->tp;
    p->enforce_eager = a->enforce_eager;
    /* unset: V1 turns prefix caching on, V0 leaves it off
     * (engine/arg_utils.py _set_default_args_v1; CacheConfig's None in V0) */
    p->enable_prefix_caching = kv_args_is_set(a, "enable-prefix-caching") || c->textbook ? a->enable_prefix_caching
                                                                                          : p->engine_v1;
    p->model_runner_v2 =
        !c->textbook && kv_release_uses_v2_runner(c->r, m->architecture, m->num_experts > 0, m->quant != KV_QUANT_NONE ||
                                                                                                  a->quantization != KV_ARGS_QUANT_NONE);
    /* VLLM_USE_V2_MODEL_RUNNER set: the runner it names (config/vllm.py use_v2_model_runner). */
    if (!c->textbook && a->use_v2_model_runner >= 0 && kv_release_reads_env(c->r, "VLLM_USE_V2_MODEL_RUNNER"))
        p->model_runner_v2 = a->use_v2_model_runner != 0;

    /* max_model_len. */
    p->model_max_model_len = m->max_position_embeddings;
    int64_t mml = m->max_position_embeddings;
    if (a->max_model_len == KV_MAX_MODEL_LEN_AUTO)
        p->max_model_len_auto = 1;
    else if (a->max_model_len <= 0)
        p->max_model_len_default = 1;
    else {
        /* config/model.py _get_and_verify_max_len: an error, or with
         * VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 a warning and the length as given,
         * in the release's words (LONG_LEN_TEXT) */
        if (a->max_model_len > m->max_position_embeddings) {
            const char *ver = a->vllm_version[0] ? a->vllm_version : kv_release_newest()->first;
            int row = 0;
            for (int k = 0; k < (int)(sizeof LONG_LEN_TEXT / sizeof LONG_LEN_TEXT[0]); k++)
                if (kv_release_compare(ver, LONG_LEN_TEXT[k].first) >= 0)
                    row = k;
            char msg[300], line[1000];
            int as_float = LONG_LEN_TEXT[row].float_len && !strstr(m->model_type, "gemma3");
            snprintf(msg, sizeof msg,
                     "User-specified max_model_len (%lld) is greater than the derived max_model_len (%s=%lld%s or "
                     "model_max_length=None in model's config.json).%s",
                     (long long)a->max_model_len, m->max_len_key[0] ? m->max_len_key : "max_position_embeddings",
                     (long long)m->max_position_embeddings, as_float ? ".0" : "", LONG_LEN_TEXT[row].msg_tail);
            if (!a->allow_long_max_model_len)
                return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL, "%s%s", msg, LONG_LEN_TEXT[row].error_tail);
            snprintf(line, sizeof line, "%s%s", msg, LONG_LEN_TEXT[row].warning_tail);
            plan_log(p, "WARNING", line);
        }
        mml = a->max_model_len;
    }
    p->max_model_len = mml;

    /* Scheduler defaults by card class; V0 by its SchedulerConfig rule.
     * engine/arg_utils.py reads the total from NVML and, where NVML has no
     * memory figure for the card, takes a card of 0 GiB (until 0.33). */
    int64_t mns, mnbt;
    int no_total = gpu && !gpu->nvml_memory_info && !mem->card_total_from_torch && !c->textbook;
    kv_release_card_defaults(c->r, no_total ? 0 : c->total / KV_GIB, gpu ? gpu->name : NULL, &mns, &mnbt);
    if (no_total && mem->engine_v1 && (!kv_args_is_set(a, "max-num-seqs") || !kv_args_is_set(a, "max-num-batched-tokens")))
        plan_note(p, "NVML has no memory figure for this card (nvidia-smi: Not Supported), so vLLM's defaults are a "
                     "small card's: max_num_seqs %lld, max_num_batched_tokens %lld (engine/arg_utils.py; 0.33 reads "
                     "torch's total instead)",
                  (long long)mns, (long long)mnbt);
    int chunked = a->enable_chunked_prefill;
    if (!mem->engine_v1) {
        /* arg_utils.py: chunked prefill on by default when max_model_len > 32K
         * (not for sliding-window models). */
        if (!kv_args_is_set(a, "enable-chunked-prefill"))
            chunked = mml > mem->v0_long_context && m->sliding_window == 0;
        if (mnbt == 0)
            mnbt = chunked ? mem->v0_chunked_tokens : (mml > 2048 ? mml : 2048);
    }
    p->chunked_prefill = chunked;
    if (a->max_num_batched_tokens > 0)
        mnbt = a->max_num_batched_tokens;
    if (a->max_num_seqs > 0)
        mns = a->max_num_seqs;
    else if (mns > mnbt)
        mns = mnbt;
    if (mnbt < mns)
        return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL,
                       "max_num_batched_tokens (%lld) must be greater than or equal to max_num_seqs (%lld).",
                       (long long)mnbt, (long long)mns);
    if (!chunked && !p->max_model_len_auto && mnbt < mml)
        return kv_errf(c->err, c->errlen, KV_PLAN_EINVAL,
                       "max_num_batched_tokens (%lld) is smaller than max_model_len (%lld). This effectively limits "
                       "the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. "
                       "Please increase max_num_batched_tokens or decrease max_model_len.",
                       (long long)mnbt, (long long)mml);
    p->max_num_batched_tokens = mnbt;
    p->max_num_seqs = mns;
    return KV_PLAN_OK;
}

/* KV geometry (get_num_kv_heads, AttentionSpec page size, KV cache groups). */
static void phase_geometry(const plan_ctx *c, kv_plan *p)
{
    const kv_model *m = c->m;
    const kv_args *a = c->a;
    const char *wdt = a->dtype == KV_ARGS_DTYPE_FP32   ? "float32"
                      : a->dtype == KV_ARGS_DTYPE_FP16 ? "float16"
                      : a->dtype == KV_ARGS_DTYPE_BF16 ? "bfloat16"
                      : !strcmp(m->torch_dtype, "float16") || c->fp16_for_card ? "float16"
                                                                             : "bfloat16";
    p->block_size = a->block_size > 0 ? a->block_size : 16;
    p->num_layers = m->num_hidden_layers;
    p->num_sliding_layers = m->num_sliding_layers;
    p->sliding_window = m->sliding_window;
    int kvb = c->act_bytes;
    switch (a->kv_cache_dtype) {
    case KV_ARGS_KV_FP8: case KV_ARGS_KV_FP8_DS_MLA: kvb = 1; break;
    case KV_ARGS_KV_FP8_PER_TOKEN_HEAD: case KV_ARGS_KV_INT8_PER_TOKEN_HEAD:
        kvb = 1;
        plan_note(p, "--kv-cache-dtype %s: 1 byte per value; its scales (per token and head) are not counted",
                  kv_args_kv_dtype_name(a->kv_cache_dtype));
        break;
    case KV_ARGS_KV_BF16: case KV_ARGS_KV_FP16: kvb = 2; break;
    default: break;
    }
    snprintf(p->kv_cache_dtype, sizeof p->kv_cache_dtype, "%s",
             a->kv_cache_dtype == KV_ARGS_KV_AUTO                  ? wdt
             : a->kv_cache_dtype == KV_ARGS_KV_FP8 && a->kv_fp8_e5m2 ? "fp8_e5m2" /* stored as itself */
                                                                     : kv_args_kv_dtype_name(a->kv_cache_dtype));
    p->kv_dtype_bytes = kvb;
    if (m->is_mla) {
        p->kv_factor = 1;
        p->kv_heads_per_gpu = 1;
        p->head_size = m->kv_lora_rank + m->qk_rope_head_dim;
        if (a->kv_cache_dtype == KV_ARGS_KV_FP8_DS_MLA)
            p->head_size = 656; /* 512 fp8 latent + 4 fp32 scales + 64 bf16 rope values */
    } else {
        p->kv_factor = 2;
        p->kv_heads_per_gpu = m->num_key_value_heads / c->tp;
        if (p->kv_heads_per_gpu < 1)
            p->kv_heads_per_gpu = 1;
        p->head_size = m->head_dim;
    }
    p->page_size_bytes = (int64_t)p->kv_factor * p->block_size * p->kv_heads_per_gpu * p->head_size * kvb;
    p->kv_bytes_per_token = p->page_size_bytes * p->num_layers / p->block_size;
    int full = p->num_layers - p->num_sliding_layers, sw = p->num_sliding_layers;
    if (sw == 0 || full == 0) {
        p->num_kv_groups = 1;
        p->group_size = p->num_layers;
    } else {
        int lo = full < sw ? full : sw, hi = full < sw ? sw : full;
        p->group_size = hi < lo * 1.25 ? hi : lo;
        p->num_kv_groups = (int)(kv_cdiv(full, p->group_size) + kv_cdiv(sw, p->group_size));
    }
    const kv_quant q = m->quant;
    if (a->quantization != KV_ARGS_QUANT_NONE)
        snprintf(p->weights_dtype, sizeof p->weights_dtype, "%s", kv_args_quant_name(a->quantization));
    else if (q != KV_QUANT_NONE)
        snprintf(p->weights_dtype, sizeof p->weights_dtype, "%s", m->quant_method);
    else
        snprintf(p->weights_dtype, sizeof p->weights_dtype, "%s", wdt);
}

/* init_device: the free-memory check (V1 from 0.9.1). vLLM takes its
 * snapshot after the CUDA context (and NCCL) exist. Returns 1 if it fails. */
static int phase_free_memory(const plan_ctx *c, kv_plan *p)
{
    const kv_release_text *t = c->r->text;
    p->free_at_start_bytes = c->total - p->gpu_used_bytes - p->cuda_context_bytes - (c->textbook ? p->nccl_bytes : 0);
    double requested = c->total * p->gpu_memory_utilization;
    if (p->kv_cache_memory_bytes_set || !t->err_free_memory || p->free_at_start_bytes >= requested)
        return 0;
    fail_tpl(p, KV_PLAN_ERR_FREE_MEMORY, t->err_free_memory, NULL, 0, "ValueError: ");
    return 1;
}

/* A torch OOM at one phase's allocations, in torch's words
 * (kv_torch_oom.h): the phase allocates tensors of chunk bytes from avail
 * free bytes, on top of allocated_before bytes PyTorch already holds; the
 * one that no longer fits fails. The log gets torch's whole message, the
 * error its first sentences, and a note says in kvlab's words what the
 * phase needed. */
static void fail_torch_oom(const plan_ctx *c, kv_plan *p, kv_plan_error kind, double chunk, double avail,
                           double allocated_before, double private_pools, const char *fmt, ...)
    __attribute__((format(printf, 8, 9)));
static void fail_torch_oom(const plan_ctx *c, kv_plan *p, kv_plan_error kind, double chunk, double avail,
                           double allocated_before, double private_pools, const char *fmt, ...)
{
    double k = chunk > 0 && avail > 0 ? floor(avail / chunk) : 0;
    kv_torch_oom o = {0};
    o.tried = chunk;
    o.total = c->total;
    o.free = avail > 0 ? avail - k * chunk : 0;
    o.process = c->total - o.free - p->gpu_used_bytes;
    o.allocated = allocated_before + k * chunk;
    o.private_pools = private_pools;
    char full[1024], brief[400], why[256];
    kv_torch_oom_text(&o, c->a->vllm_version, 0, full, sizeof full);
    kv_torch_oom_text(&o, c->a->vllm_version, 1, brief, sizeof brief);
    plan_fail(p, kind, brief);
    plan_log(p, "ERROR", full);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    plan_note(p, "%s", why);
}

/* The largest weight tensor of one rank, bytes (the fused gate_up of a
 * dense MLP, or every local expert's w13 of a fused MoE): the allocation
 * kvlab takes to fail when the weights do not fit (vLLM allocates every
 * parameter at model construction, layer by layer). */
static double largest_weight_tensor(const plan_ctx *c, const kv_plan *p)
{
    const kv_model *m = c->m;
    double per_param = m->params_total > 0 ? p->weights_bytes / ((double)m->params_total / c->tp) : 2.0;
    if (m->quant == KV_QUANT_NONE && c->a->quantization == KV_ARGS_QUANT_NONE)
        per_param = c->act_bytes; /* 16-bit weights (the RoPE cache is not a weight tensor) */
    double h = m->hidden_size, dense = 2.0 * m->intermediate_size * h, moe = 0;
    if (m->num_experts > 0)
        moe = 2.0 * m->num_experts * (double)(m->moe_intermediate_size > 0 ? m->moe_intermediate_size
                                                                           : m->intermediate_size) * h;
    double t = (dense > moe ? dense : moe) / c->tp * per_param;
    if (!(t > 0) || t > p->weights_bytes)
        t = p->weights_bytes;
    return t;
}

/* The largest activation of the profile run, bytes: the gate_up output of
 * max_num_batched_tokens tokens (a fused MoE's for its top-k experts). */
static double largest_activation(const plan_ctx *c, const kv_plan *p)
{
    const kv_model *m = c->m;
    double width = 2.0 * m->intermediate_size;
    if (m->num_experts > 0) {
        double w = 2.0 * (m->num_experts_per_tok > 0 ? m->num_experts_per_tok : 1) *
                   (m->moe_intermediate_size > 0 ? m->moe_intermediate_size : m->intermediate_size);
        if (w > width)
            width = w;
    }
    double t = (double)p->max_num_batched_tokens * width / c->tp * c->act_bytes;
    if (!(t > 0) || t > p->activation_bytes)
        t = p->activation_bytes;
    return t;
}

/* load_model and profile_run: torch OOMs (torch's words, kv_torch_oom.h).
 * Returns 1 if either fails. */
static int phase_load_and_profile(const plan_ctx *c, kv_plan *p)
{
    double free_now = c->total - p->gpu_used_bytes - p->cuda_context_bytes - (c->textbook ? p->nccl_bytes : 0);
    if (p->weights_bytes > free_now) {
        fail_torch_oom(c, p, KV_PLAN_ERR_WEIGHTS_OOM, largest_weight_tensor(c, p), free_now, 0, 0,
                       "the weights need %.2f GiB per GPU; %.2f GiB was free when loading began",
                       p->weights_bytes / KV_GIB, free_now / KV_GIB);
        return 1;
    }
    const kv_release_text *t = c->r->text;
    if (!p->model_runner_v2 && c->r->mem->sampler_flashinfer && !p->flashinfer_sampler &&
        !kv_args_is_set(c->a, "flashinfer-sampler") && c->gpu) { /* runner V1 builds its sampler first */
        char ccs[16];
        snprintf(ccs, sizeof ccs, "%d.%d", c->gpu->compute_capability / 10, c->gpu->compute_capability % 10);
        kv_release_arg x[] = {{"cc", 0, ccs}};
        plan_log_tpl(p, "WARNING", t->warn_fi_sampler, x, 1);
    }
    plan_log_tpl(p, "INFO", p->model_runner_v2 && t->weights_v2 ? t->weights_v2 : t->weights, NULL, 0);
    if (p->weights_bytes + p->activation_bytes > free_now) {
        fail_torch_oom(c, p, KV_PLAN_ERR_PROFILE_OOM, largest_activation(c, p), free_now - p->weights_bytes,
                       p->weights_bytes, 0,
                       "the profile run (%lld batched tokens) needs %.2f GiB of activations beside %.2f GiB of "
                       "weights; %.2f GiB was free after loading",
                       (long long)p->max_num_batched_tokens, p->activation_bytes / KV_GIB, p->weights_bytes / KV_GIB,
                       (free_now - p->weights_bytes) / KV_GIB);
        return 1;
    }
    return 0;
}

/* determine_available_memory's lines, then get_kv_cache_configs' sizing:
 * num_blocks and "No available memory for the cache blocks". Returns 1 if
 * nothing is left. */
static int phase_kv_sizing(const plan_ctx *c, kv_plan *p)
{
    const kv_release_text *t = c->r->text;
    const kv_args *a = c->a;
    /* profile_cudagraph_memory runs when graphs are captured and the pool is
     * not given (--kv-cache-memory-bytes skips the profile); each runner logs
     * it in its own words, subtracted or not. */
    const kv_release_memory *mem = c->r->mem;
    int cg_taken = p->cudagraph_bytes > 0 && (!p->kv_cache_memory_bytes_set || c->textbook) &&
                   plan_cg_profiled(c, p);
    int cg_flipped = !c->textbook && a->estimate_cudagraphs >= 0 &&
                     kv_release_reads_env(c->r, "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS") &&
                     (a->estimate_cudagraphs != 0) != (mem->cudagraph_estimate != 0);
    if (cg_taken)
        plan_log_tpl(p, "INFO", p->model_runner_v2 ? t->cudagraph_estimate_v2 : t->cudagraph_estimate, NULL, 0);
    if (p->kv_cache_memory_bytes_set) {
        char line[160];
        snprintf(line, sizeof line, "Using --kv-cache-memory-bytes=%lld: gpu_memory_utilization is ignored",
                 (long long)a->kv_cache_memory_bytes);
        plan_log(p, "INFO", line);
    }
    int64_t per_block = p->page_size_bytes * p->group_size;
    p->num_blocks_computed = plan_clamp_i64(floor(p->available_kv_bytes / (double)per_block));
    p->kv_cache_tokens_unrounded = plan_clamp_i64(floor(p->available_kv_bytes / (double)p->kv_bytes_per_token));
    p->kv_cache_tokens = plan_clamp_i64((double)(p->num_blocks_computed / p->num_kv_groups) * p->block_size);
    p->kv_cache_tokens_logged = p->kv_cache_tokens;
    plan_log_tpl(p, "INFO", t->profile, NULL, 0);
    plan_log_tpl(p, "INFO", t->available_kv, NULL, 0);
    if (cg_taken && cg_flipped)
        plan_log_tpl(p, t->cudagraph_util_flipped_level ? t->cudagraph_util_flipped_level : "INFO",
                     t->cudagraph_util_flipped, NULL, 0);
    else if (cg_taken)
        plan_log_tpl(p, "INFO", t->cudagraph_util, NULL, 0);
    if (p->num_sliding_layers && p->num_kv_groups > 1)
        plan_note(p, "%d of %d layers use a %d-token sliding window: %d KV cache groups of %d layers share the pool",
                  p->num_sliding_layers, p->num_layers, p->sliding_window, p->num_kv_groups, p->group_size);
    if (!p->engine_v1 && t->gpu_blocks) {
        /* V0 logs the block counts and the concurrency before it checks. */
        p->max_concurrency = p->max_model_len > 0 ? (double)p->kv_cache_tokens / (double)p->max_model_len : 0;
        plan_log_tpl(p, "INFO", t->gpu_blocks, NULL, 0);
        if (p->num_blocks_computed > 0)
            plan_log_tpl(p, "INFO", t->concurrency, NULL, 0);
    }
    if (p->available_kv_bytes <= 0 || (!p->engine_v1 && p->num_blocks_computed <= 0)) {
        fail_tpl(p, KV_PLAN_ERR_NO_KV_MEMORY, t->err_no_kv_memory, NULL, 0, "ValueError: ");
        return 1;
    }
    return 0;
}

/* --max-model-len auto (0.14 on), then the length check: V1's
 * check_enough_kv_cache_memory with its estimate, or V0's
 * raise_if_cache_size_invalid (blocks x block_size). Returns 1 if it fails. */
static int phase_length_check(const plan_ctx *c, kv_plan *p)
{
    const kv_model *m = c->m;
    const kv_release_text *t = c->r->text;
    char buf[32];
    if (p->max_model_len_auto) {
        int64_t est = kv_plan_estimate_max_model_len(p, check_memory(p), m->max_position_embeddings);
        if (est == 0) {
            plan_fail(p, KV_PLAN_ERR_AUTO_FIT,
                      "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. "
                      "Try increasing `gpu_memory_utilization`.");
            fail_tpl(p, KV_PLAN_ERR_AUTO_FIT, p->error, NULL, 0, "ValueError: ");
            return 1;
        }
        kv_release_arg x[] = {{"kv", check_memory(p) / KV_GIB, NULL}};
        char line[300];
        plan_format(p, "{kv:.2f}", x, 1, buf, sizeof buf);
        if (est < m->max_position_embeddings)
            snprintf(line, sizeof line,
                     "Auto-fit max_model_len: reduced from %lld to %lld to fit in available GPU memory (%s GiB "
                     "available for KV cache)",
                     (long long)m->max_position_embeddings, (long long)est, buf);
        else
            snprintf(line, sizeof line, "Auto-fit max_model_len: full model context length %lld fits in available GPU "
                                        "memory",
                     (long long)est);
        plan_log(p, "INFO", line);
        p->max_model_len = est;
    }
    p->needed_bytes = kv_plan_request_bytes(p, p->max_model_len);
    p->blocks_per_request = request_blocks(p, p->max_model_len);
    if (!p->engine_v1) {
        if (p->max_model_len > p->kv_cache_tokens) {
            p->estimated_max_model_len = p->kv_cache_tokens;
            fail_tpl(p, KV_PLAN_ERR_MAX_MODEL_LEN, t->err_max_model_len, NULL, 0, "ValueError: ");
            return 1;
        }
        return 0;
    }
    double avail = check_memory(p);
    /* From 0.29 the null block comes off first: what is left may be nothing,
     * and _check_enough_kv_cache_memory says so before it sizes a request. */
    if (avail <= 0) {
        fail_tpl(p, KV_PLAN_ERR_NO_KV_MEMORY, t->err_no_kv_memory, NULL, 0, "ValueError: ");
        return 1;
    }
    if ((double)p->needed_bytes <= avail)
        return 0;
    p->estimated_max_model_len = kv_plan_estimate_max_model_len(p, avail, p->max_model_len);
    char clause[200] = "";
    if (p->estimated_max_model_len > 0 && t->estimated_clause)
        plan_format(p, t->estimated_clause, NULL, 0, clause, sizeof clause);
    /* The message shows the memory it checked against. */
    kv_release_arg x[] = {{"estimated_clause", 0, clause}, {"kv", avail / KV_GIB, NULL}};
    fail_tpl(p, KV_PLAN_ERR_MAX_MODEL_LEN, t->err_max_model_len, x, 2, "ValueError: ");
    return 1;
}

/* What the card has free once the profile's activations are released,
 * before the pool: the card less other processes, the context, weights,
 * NCCL and non-torch memory (a peak budget already counts the context). */
static double free_after_profile(const plan_ctx *c, const kv_plan *p)
{
    double f = c->total - p->gpu_used_bytes - p->cuda_context_bytes - p->weights_bytes - p->nccl_bytes -
               p->non_torch_bytes;
    if (c->r->mem->budget == KV_BUDGET_PEAK)
        f += p->cuda_context_bytes;
    return f;
}

/* The pool, its log lines, CUDA graphs, and V1's sampler warm-up. */
static void phase_pool(const plan_ctx *c, kv_plan *p)
{
    const kv_args *a = c->a;
    const kv_release_text *t = c->r->text;
    char line[300];
    p->starts = 1;
    p->num_blocks = p->num_blocks_computed;
    if (a->num_gpu_blocks_override > 0) {
        snprintf(line, sizeof line, "Overriding num_gpu_blocks=%lld with num_gpu_blocks_override=%lld",
                 (long long)p->num_blocks, (long long)a->num_gpu_blocks_override);
        plan_log(p, "INFO", line);
        if (a->num_gpu_blocks_override > p->num_blocks)
            plan_note(p, "num_gpu_blocks_override %lld is more than the budget sizes (%lld): the pool takes memory "
                         "outside gpu_memory_utilization's budget",
                      (long long)a->num_gpu_blocks_override, (long long)p->num_blocks);
        p->num_blocks = a->num_gpu_blocks_override;
    }
    int64_t per_block = p->page_size_bytes * p->group_size;
    p->kv_pool_bytes = (double)p->num_blocks * (double)per_block;
    /* The pool is allocated after the profile (gpu_model_runner.py
     * initialize_kv_cache_tensors; V0 cache_engine.py): a size given by
     * num_gpu_blocks_override or --kv-cache-memory-bytes is held to what
     * the card has free then, not to the budget. */
    if (a->num_gpu_blocks_override > 0 || p->kv_cache_memory_bytes_set) {
        double free_b = free_after_profile(c, p);
        if (p->kv_pool_bytes > free_b) {
            /* one tensor per attention layer (initialize_kv_cache_tensors; V0 cache_engine.py) */
            int layers = c->m->num_hidden_layers > 0 ? c->m->num_hidden_layers : 1;
            fail_torch_oom(c, p, KV_PLAN_ERR_POOL_OOM, p->kv_pool_bytes / layers, free_b,
                           p->weights_bytes, 0,
                           "the KV cache of %lld blocks needs %.2f GiB per GPU; %.2f GiB was free after the profile "
                           "run",
                           (long long)p->num_blocks, p->kv_pool_bytes / KV_GIB, free_b > 0 ? free_b / KV_GIB : 0.0);
            p->num_blocks = 0;
            return;
        }
    }
    p->kv_cache_tokens = plan_clamp_i64((double)(p->num_blocks / p->num_kv_groups) * p->block_size);
    p->kv_cache_tokens_logged = p->kv_cache_tokens;
    if (p->engine_v1) {
        p->max_concurrency = p->blocks_per_request > 0 ? (double)p->num_blocks / (double)p->blocks_per_request : 0;
        if (c->r->mem->kv_size_by_concurrency)
            p->kv_cache_tokens_logged = plan_clamp_i64(p->max_concurrency * (double)p->max_model_len);
        kv_release_arg x[] = {{"tokens", (double)p->kv_cache_tokens_logged, NULL}};
        plan_log_tpl(p, "INFO", t->kv_cache_size, x, 1);
        plan_log_tpl(p, "INFO", t->concurrency, NULL, 0);
    } else {
        p->max_concurrency = p->max_model_len > 0 ? (double)p->kv_cache_tokens / (double)p->max_model_len : 0;
    }
    if (p->cudagraph_bytes > 0)
        plan_log_tpl(p, "INFO", t->graphs, NULL, 0);
    /* V1 warms the sampler up after the pool and the graphs, with
     * max_num_seqs dummy requests and top-k/top-p on
     * (gpu_worker.py compile_or_warm_up_model). What is free then: the
     * activation headroom the budget kept, what lies outside the budget, less
     * the context and graphs the budget did not count. */
    if (!c->textbook && p->engine_v1 && t->err_sampler_oom && a->activation_gib < 0) {
        /* the pool as sized (an override larger than that fails its own way) */
        double pool = fmin(p->kv_pool_bytes, fmax(p->available_kv_bytes, 0));
        double outside = free_after_profile(c, p) - pool;
        if (!p->terms[KV_PLAN_TERM_CUDAGRAPH].counted)
            outside -= p->cudagraph_bytes;
        outside -= c->r->mem->warmup_margin_gib * KV_GIB;
        p->warmup_free_bytes = outside;
        if (p->warmup_need_bytes > outside) {
            int64_t nreq = p->max_num_seqs < p->max_num_batched_tokens ? p->max_num_seqs : p->max_num_batched_tokens;
            kv_release_arg x[] = {{"num_reqs", (double)nreq, NULL}};
            p->num_blocks = 0;
            if (!p->model_runner_v2) {
                fail_tpl(p, KV_PLAN_ERR_SAMPLER_OOM, t->err_sampler_oom, x, 1, "RuntimeError: ");
                return;
            }
            /* V2 has no message of its own: warmup_kernels meets a torch OOM. */
            fail_torch_oom(c, p, KV_PLAN_ERR_SAMPLER_OOM, p->warmup_need_bytes, outside,
                           p->weights_bytes + pool, p->terms[KV_PLAN_TERM_CUDAGRAPH].counted ? 0 : p->cudagraph_bytes,
                           "the warm-up after the pool (warmup_kernels: %lld requests sampled with top-k/top-p) needs "
                           "%.2f GiB, %.2f GiB free; the profile run sampled without top-k/top-p, so the pool left too "
                           "little",
                           (long long)nreq, p->warmup_need_bytes / KV_GIB, outside > 0 ? outside / KV_GIB : 0.0);
            return;
        }
    }
    if (p->gpu_memory_utilization >= 0.95 && !p->kv_cache_memory_bytes_set)
        plan_note(p, "gpu_memory_utilization %g leaves %.2f GiB outside the budget for what vLLM allocates while "
                     "serving (CUDA graphs, NCCL, sampler and allocator fragmentation): it starts, but a busy server "
                     "may still run out of memory; 0.90-0.92 leaves room",
                  p->gpu_memory_utilization, c->total * (1.0 - p->gpu_memory_utilization) / KV_GIB);
}

int kv_plan_compute_nofix(const kv_model *m, const kv_gpu *gpu, const kv_args *a, kv_plan *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    plan_ctx c = {.m = m, .gpu = gpu, .a = a, .tp = a->tensor_parallel_size, .err = err, .errlen = errlen};
    c.textbook = a->accounting == KV_ACCOUNTING_TEXTBOOK;
    if (c.textbook) {
        c.r = kv_release_textbook();
    } else {
        c.r = kv_release_find(a->vllm_version, err, errlen);
        if (!c.r)
            return KV_PLAN_EINVAL;
        c.r = kv_release_for_card(c.r, gpu ? gpu->compute_capability : 0);
        if (a->cpu_offload_gb > 0 && c.r->mem->v0_fallback_cpu_offload) {
            c.r = kv_release_v0_fallback(c.r);
            c.v0_for_offload = 1;
        }
        /* VLLM_USE_V1=0: the V0 engine, in the releases that still ship it
         * beside V1 (engine/arg_utils.py _is_v1_supported_oracle: try_v1 is
         * off when the user sets it to 0) */
        if (a->use_v1 == 0 && c.r->mem->v0_fallback_below_cc)
            c.r = kv_release_v0_fallback(c.r);
    }
    c.act_bytes = a->dtype == KV_ARGS_DTYPE_FP32 ? 4 : 2;
    int rc = phase_validate(&c);
    if (rc)
        return rc;
    c.total = a->gpu_memory_gib >= 0 ? a->gpu_memory_gib * KV_GIB : gpu->reported_total_bytes;
    /* memory other processes hold is part of the card: all of it or more
     * is no card state vLLM could meet (its free-memory check would read
     * a negative free figure) */
    if (a->gpu_used_gib > 0 && a->gpu_used_gib * KV_GIB >= c.total)
        return kv_errf(c.err, c.errlen, KV_PLAN_EINVAL,
                       "--gpu-used-gib %g: other processes cannot hold all of the card's %.2f GiB or more",
                       a->gpu_used_gib, c.total / KV_GIB);
    if ((rc = phase_inputs(&c, p)) || (rc = phase_dtype(&c, p)))
        return rc;
    phase_geometry(&c, p);
    plan_weights(&c, p);
    plan_activation(&c, p);
    plan_cudagraph(&c, p);
    plan_budget(&c, p);
    if (plan_check_config(&c, p) || phase_free_memory(&c, p) || plan_check_load(&c, p) ||
        phase_load_and_profile(&c, p) || phase_kv_sizing(&c, p) || phase_length_check(&c, p))
        return KV_PLAN_OK;
    phase_pool(&c, p);
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
    f->kv_cache_tokens = q->starts ? q->kv_cache_tokens_logged : q->kv_cache_tokens_unrounded;
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
        } else if (keep_failing && q->error_kind != KV_PLAN_ERR_QUANT_CAPABILITY &&
                   q->error_kind != KV_PLAN_ERR_LOAD_CHECK) {
            add_fix(p, what, flags, q, 0); /* a change vLLM refuses outright is no fix */
        }
    }
    free(q);
    return res;
}

/* Set one flag on b by name (so it counts as given: a release's defaults
 * then stay out of the way). */
static void set_flag(kv_args *b, const char *name, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void set_flag(kv_args *b, const char *name, const char *fmt, ...)
{
    char v[48];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    kv_args_set(b, name, v, NULL, 0);
}

/* A fix that counts only if it starts at the full length (the levers that
 * trade throughput for memory). Returns 1 if it was recorded. */
static int try_fix_full(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *b, const char *what,
                        const char *flags)
{
    kv_plan *q = malloc(sizeof *q);
    if (!q)
        return 0;
    int ok = kv_plan_compute_nofix(m, g, b, q, NULL, 0) == KV_PLAN_OK && q->starts;
    if (ok)
        add_fix(p, what, flags, q, 0);
    free(q);
    return ok;
}

/* The fixes each failure has, cheapest first. */

static void fix_max_model_len(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    if (p->error_kind != KV_PLAN_ERR_MAX_MODEL_LEN || p->estimated_max_model_len <= 0)
        return;
    kv_args b = *a;
    char flags[96];
    set_flag(&b, "max-model-len", "%lld", (long long)p->estimated_max_model_len);
    snprintf(flags, sizeof flags, "--max-model-len %lld", (long long)p->estimated_max_model_len);
    try_fix(p, m, g, &b, "lower max_model_len", flags, 1);
}

static void fix_fp8_kv(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    if (p->kv_dtype_bytes <= 1 || p->error_kind != KV_PLAN_ERR_MAX_MODEL_LEN) /* no help when nothing is left */
        return;
    kv_args b = *a;
    b.kv_cache_dtype = KV_ARGS_KV_FP8;
    try_fix(p, m, g, &b, "fp8 KV cache", "--kv-cache-dtype fp8", 1);
}

/* V1's dummy sampler scales with max_num_seqs: where it is the activation
 * peak, fewer sequences give the pool the difference. */
static void fix_max_num_seqs(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    if (!p->engine_v1 || p->accounting == KV_ACCOUNTING_TEXTBOOK || p->max_num_seqs <= 64 ||
        (p->sampler_bytes <= p->forward_bytes && p->error_kind != KV_PLAN_ERR_SAMPLER_OOM))
        return;
    for (int64_t s = p->max_num_seqs / 2; s >= 64; s /= 2) {
        kv_args b = *a;
        char flags[96];
        set_flag(&b, "max-num-seqs", "%lld", (long long)s);
        snprintf(flags, sizeof flags, "--max-num-seqs %lld", (long long)s);
        if (try_fix_full(p, m, g, &b, "fewer sequences per step", flags))
            return;
    }
}

static void fix_batched_tokens(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    if (p->forward_bytes <= 0 && p->accounting != KV_ACCOUNTING_TEXTBOOK)
        return;
    for (int64_t t = p->max_num_batched_tokens / 2; t >= 512 && t >= p->max_num_seqs; t /= 2) {
        kv_args b = *a;
        char flags[96];
        set_flag(&b, "max-num-batched-tokens", "%lld", (long long)t);
        snprintf(flags, sizeof flags, "--max-num-batched-tokens %lld", (long long)t);
        if (try_fix_full(p, m, g, &b, "fewer tokens per step", flags))
            return;
    }
}

/* --enforce-eager: no CUDA graphs and no torch.compile, so neither the
 * graphs nor a cold compile take memory (config/vllm.py). Recorded when it
 * starts, at the full length or, paired with it, a shorter one. */
static void fix_eager(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    if (a->enforce_eager)
        return;
    kv_args b = *a;
    set_flag(&b, "enforce-eager", "true");
    int n = p->num_fixes;
    try_fix(p, m, g, &b, "no CUDA graphs or compile (slower)", "--enforce-eager", 0);
    /* only where it gives the pool memory (graphs captured after the pool
     * and a warm cache cost none before it): else it is the length fix */
    if (p->num_fixes > n && p->fixes[n].kv_cache_bytes <= p->available_kv_bytes + 1048576.0)
        p->num_fixes = n;
}

/* The multimodal encoder profile, where it is the activation peak
 * (kv_plan_mm_encoder): images only when the dummy batch is a video, then
 * smaller images and frames (max_pixels 1,003,520 = 1,280 tokens of 28 x 28,
 * transformers' Qwen2VLImageProcessor default), then no encoder profile
 * (vLLM then does not set its memory aside: a large input can run out of
 * memory at serve time). Each is re-planned and kept when it starts. */
static void fix_mm_encoder(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    if (p->mm_encoder_items <= 0 || p->mm_encoder_bytes < p->activation_bytes)
        return;
    kv_args b = *a;
    if (!strcmp(p->mm_encoder_modality, "video")) {
        kv_args_set(&b, "limit-mm-per-prompt", "{\"video\": 0}", NULL, 0);
        if (try_fix(p, m, g, &b, "images only (no video)", "--limit-mm-per-prompt '{\"video\": 0}'", 1) == FIX_STARTS)
            return;
    }
    int64_t small = 1003520;
    if (a->mm_max_pixels <= 0 || a->mm_max_pixels > small) {
        b = *a;
        kv_args_set(&b, "mm-processor-kwargs", "{\"max_pixels\": 1003520}", NULL, 0);
        if (try_fix(p, m, g, &b, "smaller images and frames", "--mm-processor-kwargs '{\"max_pixels\": 1003520}'", 1) ==
            FIX_STARTS)
            return;
    }
    if (kv_args_flag_in_release(kv_args_flag_find("skip-mm-profiling"), p->vllm_version)) {
        b = *a;
        b.skip_mm_profiling = 1;
        try_fix(p, m, g, &b, "no encoder profile (risky)", "--skip-mm-profiling", 1);
    }
}

/* The cheap levers first under release accounting, where they change the
 * terms vLLM measures (the textbook's graph figure is fixed). */
static void fix_cheap_first(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    if (p->accounting == KV_ACCOUNTING_TEXTBOOK)
        return;
    fix_mm_encoder(p, m, g, a);
    fix_eager(p, m, g, a);
}

/* Quantized weights. fp8 is a flag on this checkpoint (vLLM quantizes the
 * 16-bit weights as it loads them); 4-bit needs an AWQ or GPTQ checkpoint of
 * the same model, which the row says. */
static void fix_quantization(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    if (a->weights_gib >= 0)
        return;
    kv_args b = *a;
    if (a->quantization == KV_ARGS_QUANT_NONE && m->quant == KV_QUANT_NONE) {
        b.quantization = KV_ARGS_QUANT_FP8;
        if (try_fix(p, m, g, &b, "fp8 weights", "--quantization fp8", 1) == FIX_STARTS)
            return;
    } else if (!(a->quantization == KV_ARGS_QUANT_FP8 || m->quant == KV_QUANT_FP8)) {
        return;
    }
    if (m->quant == KV_QUANT_FP8)
        return; /* an fp8 checkpoint cannot take --quantization awq; a 4-bit one is another checkpoint */
    b = *a;
    b.quantization = KV_ARGS_QUANT_AWQ;
    if (p->accounting == KV_ACCOUNTING_TEXTBOOK || m->has_quantize_config) {
        try_fix(p, m, g, &b, "4-bit weights (AWQ checkpoint)", "--quantization awq", 1);
        return;
    }
    /* vLLM refuses --quantization awq on these weights: the row is another
     * checkpoint, as vLLM would load it (its config says awq, no flag). */
    kv_model *q = malloc(sizeof *q);
    if (!q)
        return;
    *q = *m;
    q->quant = KV_QUANT_AWQ;
    q->quant_bits = 4;
    q->quant_group_size = 128;
    snprintf(q->quant_method, sizeof q->quant_method, "awq");
    b.quantization = KV_ARGS_QUANT_NONE;
    try_fix(p, q, g, &b, "4-bit weights (AWQ checkpoint)", "MODEL=<its AWQ checkpoint>", 1);
    free(q);
}

/* More GPUs: double tensor parallelism while it divides the attention heads
 * (vllm/config/parallel.py); each size that starts, at the full length or a
 * shorter one, is a row, up to the first at the full length. */
static void fix_tp(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    for (int tp = a->tensor_parallel_size * 2, rows = 0; tp <= 64 && rows < 3; tp *= 2) {
        if (m->num_attention_heads % tp)
            break;
        kv_args b = *a;
        b.tensor_parallel_size = tp;
        char flags[96], what[64];
        snprintf(flags, sizeof flags, "--tensor-parallel-size %d", tp);
        snprintf(what, sizeof what, "%d GPUs (tensor parallel)", tp);
        int r = try_fix(p, m, g, &b, what, flags, 0);
        if (r == FIX_STARTS)
            break;
        rows += r == FIX_STARTS_SHORTER;
    }
}

/* The card cannot run the method: the checkpoint's own weights (drop
 * --quantization), then a 4-bit checkpoint, whose kernels run from 7.5. */
static void fix_quant_capability(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    if (a->quantization != KV_ARGS_QUANT_NONE) {
        kv_args b = *a;
        b.quantization = KV_ARGS_QUANT_NONE;
        b.quantization_text[0] = '\0';
        try_fix(p, m, g, &b, "the checkpoint's own weights", "(drop --quantization)", 1);
    }
    fix_quantization(p, m, g, a);
}

/* A shape the loader refuses at this tp: fewer GPUs (halving while it
 * still divides), or whole experts per rank for an MoE. */
static void fix_load_check(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    if (m->num_experts > 0 && a->tensor_parallel_size > 1) {
        kv_args b = *a;
        kv_args_set(&b, "enable-expert-parallel", "true", NULL, 0);
        try_fix(p, m, g, &b, "whole experts per GPU", "--enable-expert-parallel", 1);
    }
    for (int tp = a->tensor_parallel_size / 2; tp >= 1; tp /= 2) {
        kv_args b = *a;
        b.tensor_parallel_size = tp;
        char flags[96], what[64];
        snprintf(flags, sizeof flags, "--tensor-parallel-size %d", tp);
        snprintf(what, sizeof what, "%d GPU%s (tensor parallel)", tp, tp > 1 ? "s" : "");
        if (try_fix(p, m, g, &b, what, flags, 1) == FIX_STARTS)
            return;
    }
}

/* Utilization: up (last: it borrows the headroom vLLM needs at run time) or
 * down to at most hi (the free-memory check, the sampler warm-up). */
/* A pool given by size that does not fit: let vLLM size it from the
 * budget (the flag dropped), re-planned. */
static void fix_pool_size(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    kv_args b = *a;
    b.num_gpu_blocks_override = 0;
    b.kv_cache_memory_bytes = 0;
    try_fix(p, m, g, &b, "let vLLM size the pool from the budget",
            a->num_gpu_blocks_override > 0 ? "without --num-gpu-blocks-override" : "without --kv-cache-memory-bytes",
            0);
}

static void fix_utilization(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a, int up, int hi,
                            const char *what)
{
    if (p->kv_cache_memory_bytes_set)
        return;
    int cur = (int)floor(p->gpu_memory_utilization * 100.0 + 1e-9);
    for (int u = up ? cur + 1 : (hi < cur - 1 ? hi : cur - 1); up ? u <= hi : u >= 50; u += up ? 1 : -1) {
        kv_args b = *a;
        char flags[96];
        set_flag(&b, "gpu-memory-utilization", "%.2f", u / 100.0);
        snprintf(flags, sizeof flags, "--gpu-memory-utilization %.2f", u / 100.0);
        kv_plan *q = malloc(sizeof *q);
        if (!q)
            return;
        int ok = kv_plan_compute_nofix(m, g, &b, q, NULL, 0) == KV_PLAN_OK && q->starts;
        if (ok)
            add_fix(p, what, flags, q, 0);
        free(q);
        if (ok)
            return;
    }
}

/* Fixes ranked for the failure at hand:
 *   free memory     lower utilization to what is free (never 0.95 or more)
 *   weights OOM     quantized weights, more GPUs
 *   profile OOM     fewer batched tokens, fewer sequences (V1's sampler),
 *                   no CUDA graphs, then quantized weights, more GPUs
 *   no KV memory    (release) eager, fewer sequences (V1's sampler), fewer
 *                   batched tokens, quantized weights, more GPUs, utilization last
 *   length check    textbook: shorter max_model_len, fp8 KV, fewer sequences;
 *                   release: eager, fewer sequences, fp8 KV, shorter max_model_len;
 *                   then quantized weights, more GPUs, utilization last
 *   sampler warm-up (release) eager, fewer sequences, a lower utilization
 *   quantization    the checkpoint's own weights, a 4-bit checkpoint
 *   load check      whole experts per GPU (MoE), fewer GPUs
 *   pool OOM        the pool sized by vLLM (the size flag dropped) */
static void compute_fixes(kv_plan *p, const kv_model *m, const kv_gpu *g, const kv_args *a)
{
    switch (p->error_kind) {
    case KV_PLAN_ERR_FREE_MEMORY: {
        int u = (int)floor(p->free_at_start_bytes / p->gpu_total_bytes * 100.0);
        fix_utilization(p, m, g, a, 0, u < 94 ? u : 94, "lower utilization to what is free");
        return;
    }
    case KV_PLAN_ERR_QUANT_CAPABILITY:
        fix_quant_capability(p, m, g, a);
        return;
    case KV_PLAN_ERR_LOAD_CHECK:
        fix_load_check(p, m, g, a);
        return;
    case KV_PLAN_ERR_POOL_OOM:
        fix_pool_size(p, m, g, a);
        return;
    case KV_PLAN_ERR_WEIGHTS_OOM:
        fix_quantization(p, m, g, a);
        fix_tp(p, m, g, a);
        return;
    case KV_PLAN_ERR_PROFILE_OOM:
        fix_batched_tokens(p, m, g, a);
        fix_max_num_seqs(p, m, g, a);
        fix_eager(p, m, g, a);
        fix_quantization(p, m, g, a);
        fix_tp(p, m, g, a);
        return;
    case KV_PLAN_ERR_SAMPLER_OOM:
        fix_cheap_first(p, m, g, a);
        fix_max_num_seqs(p, m, g, a);
        fix_utilization(p, m, g, a, 0, 92, "lower utilization (room for the warm-up)");
        return;
    case KV_PLAN_ERR_MAX_MODEL_LEN:
        if (p->accounting == KV_ACCOUNTING_TEXTBOOK) {
            fix_max_model_len(p, m, g, a);
            fix_fp8_kv(p, m, g, a);
            fix_max_num_seqs(p, m, g, a);
        } else {
            fix_cheap_first(p, m, g, a);
            fix_max_num_seqs(p, m, g, a);
            fix_fp8_kv(p, m, g, a);
            fix_max_model_len(p, m, g, a);
        }
        fix_quantization(p, m, g, a);
        fix_tp(p, m, g, a);
        fix_utilization(p, m, g, a, 1, 99, "raise utilization (last resort)");
        return;
    default: /* no KV memory, auto-fit */
        fix_cheap_first(p, m, g, a);
        fix_max_num_seqs(p, m, g, a);
        fix_batched_tokens(p, m, g, a);
        fix_quantization(p, m, g, a);
        fix_tp(p, m, g, a);
        fix_utilization(p, m, g, a, 1, 99, "raise utilization (last resort)");
        return;
    }
}

/* The fixes that start first, each group in the order tried (cheapest
 * first): a row that still fails says why but never stands before one that
 * works (a 70B on a 4090 listed fp8 and AWQ weights, both still OOM, above
 * the tensor-parallel sizes that start). */
static void fixes_working_first(kv_plan *p)
{
    kv_plan_fix sorted[KV_PLAN_MAX_FIXES];
    int n = 0;
    for (int pass = 1; pass >= 0; pass--)
        for (int i = 0; i < p->num_fixes; i++)
            if ((p->fixes[i].starts != 0) == pass)
                sorted[n++] = p->fixes[i];
    memcpy(p->fixes, sorted, (size_t)n * sizeof sorted[0]);
}

int kv_plan_compute(const kv_model *m, const kv_gpu *gpu, const kv_args *a, kv_plan *out, char *err, size_t errlen)
{
    int rc = kv_plan_compute_nofix(m, gpu, a, out, err, errlen);
    if (rc != KV_PLAN_OK)
        return rc;
    if (!out->starts) {
        compute_fixes(out, m, gpu, a);
        fixes_working_first(out);
    }
    /* The other compile-cache state, when a cold compile costs anything. */
    if (out->compile_cold_bytes > 0 || a->compile_cache_warm) {
        kv_args b = *a;
        b.compile_cache_warm = !a->compile_cache_warm;
        kv_plan *q = malloc(sizeof *q);
        if (q && kv_plan_compute_nofix(m, gpu, &b, q, NULL, 0) == KV_PLAN_OK &&
            (q->compile_cold_bytes > 0 || out->compile_cold_bytes > 0)) {
            out->other_valid = 1;
            out->other_starts = q->starts;
            out->other_available_kv_bytes = q->available_kv_bytes;
            out->other_kv_cache_tokens = q->starts ? q->kv_cache_tokens : 0;
            out->other_max_concurrency = q->starts ? q->max_concurrency : 0;
        }
        free(q);
    }
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
    cJSON_AddNumberToObject(o, "schema_version", KV_JSON_SCHEMA_VERSION);
    /* The scalars: one table for every reader (kv_plan_fields.h). */
    for (int i = 0; i < kv_plan_field_count(); i++) {
        const kv_plan_field *f = kv_plan_field_at(i);
        kv_plan_value v = kv_plan_field_get(f, p);
        switch (v.kind) {
        case KV_PLAN_VALUE_BOOL: cJSON_AddBoolToObject(o, f->name, v.b); break;
        case KV_PLAN_VALUE_INT: cJSON_AddNumberToObject(o, f->name, (double)v.i); break;
        case KV_PLAN_VALUE_NUM: cJSON_AddNumberToObject(o, f->name, v.d); break;
        case KV_PLAN_VALUE_STR: cJSON_AddStringToObject(o, f->name, v.s); break;
        default: cJSON_AddNullToObject(o, f->name); break;
        }
    }
    cJSON *terms = cJSON_AddArrayToObject(o, "terms");
    for (int i = 0; terms && i < KV_PLAN_NUM_TERMS; i++) {
        cJSON *t = cJSON_CreateObject();
        if (!t)
            break;
        cJSON_AddStringToObject(t, "name", p->terms[i].name);
        cJSON_AddStringToObject(t, "how", p->terms[i].how);
        cJSON_AddNumberToObject(t, "gib", gib4(p->terms[i].bytes));
        cJSON_AddNumberToObject(t, "bytes", (double)llround(p->terms[i].bytes));
        cJSON_AddBoolToObject(t, "overridden", p->terms[i].overridden);
        cJSON_AddBoolToObject(t, "counted", p->terms[i].counted);
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
        cJSON_AddNumberToObject(t, "kv_cache_bytes", (double)llround(f->kv_cache_bytes));
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
