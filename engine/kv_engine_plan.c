/* kv_engine_plan.c: from a start-up plan (kv_plan.h) to an engine config,
 * and planning plus starting an engine the way `vllm serve` would. */
#include "kv_engine_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_util.h"

/* ---- glue: plan -> engine ---------------------------------------------- */

int kv_engine_config_from_plan(const kv_plan *p, const kv_model *m, const kv_gpu *gpu, const kv_args *a,
                               kv_engine_config *c, char *note, size_t notelen, char *err, size_t errlen)
{
    if (note && notelen)
        note[0] = '\0';
    if (!p->starts)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "%s", p->error[0] ? p->error : "the plan would not start");
    if (p->num_blocks < 2)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "the plan has %lld blocks", (long long)p->num_blocks);
    char x[32], y[32];
    const struct { const char *flag; int64_t v, max; const char *unit; } lim[] = {
        {"num_blocks", p->num_blocks, KV_ENGINE_MAX_BLOCKS, "blocks"},
        {"--max-model-len", p->max_model_len, KV_ENGINE_MAX_TOKENS, "tokens"},
        {"--max-num-seqs", p->max_num_seqs, KV_ENGINE_MAX_NUM_SEQS, "running requests"},
        {"--max-num-batched-tokens", p->max_num_batched_tokens, KV_ENGINE_MAX_TOKENS, "tokens per step"},
    };
    for (size_t i = 0; i < sizeof lim / sizeof lim[0]; i++)
        if (lim[i].v > lim[i].max)
            return kv_errf(err, errlen, KV_ENGINE_ERANGE, "%s %s is more than the engine holds (at most %s %s)",
                           lim[i].flag, kv_fmt_thousands(x, sizeof x, lim[i].v),
                           kv_fmt_thousands(y, sizeof y, lim[i].max), lim[i].unit);
    kv_engine_config_default(c);
    c->num_blocks = (int32_t)p->num_blocks;
    c->block_size = p->block_size;
    c->max_model_len = (int32_t)p->max_model_len;
    c->max_num_seqs = (int32_t)p->max_num_seqs;
    c->max_num_batched_tokens = (int32_t)p->max_num_batched_tokens;
    c->enable_prefix_caching = p->enable_prefix_caching;
    c->enable_chunked_prefill = a ? a->enable_chunked_prefill : 1;
    c->scheduling_policy = a && a->scheduling_policy ? KV_POLICY_PRIORITY : KV_POLICY_FCFS;
    /* the scheduling rules of the release asked for (also under textbook
     * accounting, which has no release of its own), else the plan's row */
    const kv_release *rel = a && a->vllm_version[0] ? kv_release_find(a->vllm_version, NULL, 0) : NULL;
    if (!rel)
        rel = p->release ? p->release : kv_release_newest();
    c->sched_rules = *rel->sched;
    /* vLLM's own flags for two of those rules, in the releases that have them */
    const struct { const char *flag, *since; } newer[] = {{"scheduler-reserve-full-isl", "0.19.0"},
                                                           {"watermark", "0.24.0"}};
    for (size_t i = 0; a && i < sizeof newer / sizeof newer[0]; i++)
        if (kv_args_is_set(a, newer[i].flag) && rel != kv_release_textbook() &&
            kv_release_compare(rel->last, newer[i].since) < 0)
            return kv_errf(err, errlen, KV_ENGINE_ERANGE, "--%s: vLLM %s has no such flag (%s and later)",
                           newer[i].flag, a->vllm_version[0] ? a->vllm_version : rel->last, newer[i].since);
    if (a && kv_args_is_set(a, "scheduler-reserve-full-isl"))
        c->sched_rules.reserve_full_prompt = a->scheduler_reserve_full_isl != 0;
    if (a && kv_args_is_set(a, "watermark"))
        c->sched_rules.watermark = a->watermark;
    c->num_layers = p->num_layers;
    c->num_kv_heads = m->is_mla ? 1 : m->num_key_value_heads;
    c->head_size = p->head_size;
    c->kv_factor = p->kv_factor;
    c->cache_dtype = kv_dtype_from_name(p->kv_cache_dtype, p->kv_dtype_bytes);
    if (c->cache_dtype < 0 || kv_dtype_bytes(c->cache_dtype) != p->kv_dtype_bytes)
        c->cache_dtype = p->kv_dtype_bytes == 1 ? KV_DTYPE_FP8_E4M3 : p->kv_dtype_bytes == 4 ? KV_DTYPE_FP32 : KV_DTYPE_BF16;
    c->hidden_size = m->hidden_size;
    c->vocab_size = m->vocab_size;
    c->tensor_parallel_size = p->tensor_parallel_size > 0 ? p->tensor_parallel_size : 1;
    if (c->tensor_parallel_size > KV_ENGINE_MAX_RANKS)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "tensor_parallel_size %d is more than kvlab's %d ranks",
                       (int)c->tensor_parallel_size, KV_ENGINE_MAX_RANKS);
    c->active_params = (double)(m->params_active > 0 ? m->params_active : m->params_total);
    c->weight_bytes = p->weights_bytes;
    c->gpu_total_bytes = p->gpu_total_bytes;
    for (int32_t r = 0; r < c->tensor_parallel_size; r++) {
        c->terms[r][KV_TERM_WEIGHTS] = p->weights_bytes;
        c->terms[r][KV_TERM_ACTIVATION] = p->activation_bytes;
        c->terms[r][KV_TERM_CUDAGRAPH] = p->cudagraph_bytes;
        c->terms[r][KV_TERM_CUDA_CONTEXT] = p->cuda_context_bytes;
        c->terms[r][KV_TERM_NCCL] = p->nccl_bytes;
    }
    size_t used = 0;
    if (p->num_sliding_layers > 0 || p->num_kv_groups > 1) {
        /* The engine has one KV cache group: it runs sliding-window layers as
         * full attention, as vLLM does with --disable-hybrid-kv-cache-manager,
         * so a block spans every layer and the same memory holds fewer. */
        double per_block = (double)p->page_size_bytes * (double)p->num_layers;
        int64_t nb = per_block > 0 ? (int64_t)(p->available_kv_bytes / per_block) : 0;
        if (a && a->num_gpu_blocks_override > 0)
            nb = a->num_gpu_blocks_override;
        if (nb < 2)
            return kv_errf(err, errlen, KV_ENGINE_EINVAL,
                           "with its %d sliding-window layers run as full attention, %.2f GiB holds no KV block",
                           (int)p->num_sliding_layers, p->available_kv_bytes / KV_GIB);
        if (nb > KV_ENGINE_MAX_BLOCKS)
            return kv_errf(err, errlen, KV_ENGINE_ERANGE, "num_blocks %s is more than the engine holds (at most %s blocks)",
                           kv_fmt_thousands(x, sizeof x, nb), kv_fmt_thousands(y, sizeof y, KV_ENGINE_MAX_BLOCKS));
        if (note && notelen > used)
            used += (size_t)snprintf(note + used, notelen - used,
                                     "the engine runs the %d sliding-window layers as full attention (vLLM with "
                                     "--disable-hybrid-kv-cache-manager): %lld blocks of %d layers instead of the "
                                     "plan's %lld hybrid blocks. ",
                                     (int)p->num_sliding_layers, (long long)nb, (int)p->num_layers,
                                     (long long)p->num_blocks);
        c->num_blocks = (int32_t)nb;
    }
    double bw = gpu ? gpu->hbm_bandwidth_gbps * 1e9 : 0.0;
    double fl = gpu ? gpu->bf16_dense_tflops * 1e12 : 0.0;
    if (bw <= 0) {
        bw = 1e12; /* stand-in: 1 TB/s */
        if (note && notelen > used)
            used += (size_t)snprintf(note + used, notelen - used,
                                     "time model: no HBM bandwidth for this card; assuming 1000 GB/s. ");
    }
    if (fl <= 0) {
        /* stand-in: a ridge point of 150 FLOP per byte (A100 ~153, RTX 4090 ~164) */
        fl = bw * 150.0;
        if (note && notelen > used)
            used += (size_t)snprintf(note + used, notelen - used,
                                     "time model: no bf16 dense TFLOPS for this card; assuming %.0f TFLOPS "
                                     "(150 FLOP per byte of bandwidth).", fl / 1e12);
    }
    c->hbm_bytes_per_s = bw;
    c->peak_flops = fl;
    /* ring all-reduce: each GPU sends and receives at once, so one direction's
     * bandwidth counts; the catalogue adds both directions */
    double link = gpu ? (gpu->nvlink_gbps > 0 ? gpu->nvlink_gbps : gpu->pcie_gbps) : 0.0;
    c->link_bytes_per_s = link > 0 ? link / 2.0 * 1e9 : 0.0;
    /* the host KV tier (kv_offload.h): off unless asked for; its loads cross
     * the card's host link one way (the catalogue adds both directions) */
    c->offload_num_blocks = a ? kv_args_offload_blocks(a, (double)p->page_size_bytes * (double)p->num_layers) : 0;
    c->offload_protect_offer = rel->mem->offload_protects_offer;
    c->offload_lru = rel->mem->offload_lru;
    if (c->offload_num_blocks > 0) {
        double pcie = gpu && gpu->pcie_gbps > 0 ? gpu->pcie_gbps : 64.0;
        c->offload_link_bytes_per_s = pcie / 2.0 * 1e9;
        if ((!gpu || gpu->pcie_gbps <= 0) && note && notelen > used)
            used += (size_t)snprintf(note + used, notelen - used,
                                     "time model: no host link for this card; KV offloading loads assume PCIe 4.0 "
                                     "x16 (32 GB/s each way). ");
    }
    return 0;
}

kv_engine *kv_engine_create_vllm(const kv_model *m, const kv_gpu *gpu, const kv_args *a, kv_device *device,
                                 kv_plan *plan_out, char *err, size_t errlen)
{
    kv_plan *p = malloc(sizeof *p);
    if (!p) {
        kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory");
        return NULL;
    }
    kv_engine *e = NULL;
    char perr[1024] = "";
    if (kv_plan_compute_nofix(m, gpu, a, p, perr, sizeof perr) != KV_PLAN_OK) {
        kv_errf(err, errlen, KV_ENGINE_EINVAL, "%s", perr);
        free(p);
        return NULL;
    }
    if (plan_out)
        *plan_out = *p;
    kv_engine_config c;
    char note[512];
    if (kv_engine_config_from_plan(p, m, gpu, a, &c, note, sizeof note, err, errlen) == 0) {
        c.device = device;
        e = kv_engine_create(&c, err, errlen);
        if (e) {
            for (int i = 0; i < p->num_log; i++)
                kv_engine_log(e, strstr(p->log[i], "WARNING") ? 1 : 0, "%s", p->log[i]);
            if (note[0])
                kv_engine_log(e, 1, "%s", note);
        }
    }
    free(p);
    return e;
}

