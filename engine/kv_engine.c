/* kv_engine.c: configuration, creation and destruction, submitting and
 * aborting requests, modes and logging (the rest of the facade of
 * kv_engine.h is in kv_engine_step.c, kv_engine_read.c, kv_engine_plan.c). */
#include "kv_engine_int.h"
#include "kv_offload.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_device_host.h"
#include "kv_hash.h"
#include "kv_util.h"

static const char *term_names[KV_TERM_COUNT] = {"weights", "activation", "cudagraph", "cuda_context", "nccl",
                                                "kv_cache"};

const char *kv_engine_term_name(int term)
{
    return term >= 0 && term < KV_TERM_COUNT ? term_names[term] : "?";
}

static const char *ev_names[KV_EV_COUNT] = {"alloc", "free", "cache_hit", "evict", "cache_store", "admit",
                                            "preempt", "resume", "finish", "abort", "reject", "log"};

const char *kv_event_type_name(kv_event_type t)
{
    return (unsigned)t < KV_EV_COUNT ? ev_names[t] : "?";
}

void kv_engine_config_default(kv_engine_config *c)
{
    memset(c, 0, sizeof *c);
    c->num_blocks = 1024;
    c->block_size = 16;
    c->max_model_len = 8192;
    c->max_num_seqs = 256;
    c->max_num_batched_tokens = 8192;
    c->enable_prefix_caching = 1;
    c->enable_chunked_prefill = 1;
    c->scheduling_policy = KV_POLICY_FCFS;
    kv_sched_rules_default(&c->sched_rules);
    c->num_layers = 32;
    c->num_kv_heads = 8;
    c->head_size = 128;
    c->kv_factor = 2;
    c->cache_dtype = KV_DTYPE_BF16;
    c->hidden_size = 4096;
    c->vocab_size = 128256;
    c->tensor_parallel_size = 1;
    /* Llama-3.1-8B: ~7.5e9 parameters in its linear layers; bf16 weights
     * 14.96 GiB; H100 SXM: 989 dense bf16 TFLOP/s, 3.35 TB/s HBM3. */
    c->active_params = 7.5e9;
    c->weight_bytes = 14.96 * KV_GIB;
    c->peak_flops = 989e12;
    c->hbm_bytes_per_s = 3.35e12;
    c->link_bytes_per_s = 450e9;
    c->gpu_total_bytes = 79.2 * KV_GIB;
    c->mode = KV_MODE_PAGED;
    c->seed = 0;
    c->verify = -1;
    c->write_kv = -1;
    c->fit_device = KV_FIT_SHARED;
    c->event_capacity = 65536;
    c->timeline_capacity = 4096;
    c->block_events = 1;
}

/* ---- events and logging ------------------------------------------------ */

static void on_event(void *ctx, int type, int32_t block_id, int64_t req_id, int64_t value)
{
    kv_engine *e = ctx;
    kv_events_push(e->ev, (kv_event_type)type, block_id, req_id, value, e->step, e->clock);
}

static void logv(kv_engine *e, int level, const char *fmt, va_list ap)
{
    char line[256];
    vsnprintf(line, sizeof line, fmt, ap);
    kv_events_log(e->ev, level, line, e->step, e->clock);
}

/* A line the engine logs itself (not an input: a replay logs it again). */
static void engine_log(kv_engine *e, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void engine_log(kv_engine *e, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    logv(e, level, fmt, ap);
    va_end(ap);
}

void kv_engine_set_journal(kv_engine *e, kv_engine_journal_fn fn, void *ctx)
{
    e->journal = fn;
    e->journal_ctx = fn ? ctx : NULL;
}

void kv_engine_log(kv_engine *e, int level, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    kv_eng_journal(e, &(kv_engine_input){.type = KV_IN_LOG, .level = level, .text = line});
    kv_events_log(e->ev, level, line, e->step, e->clock);
}

/* ---- creation ---------------------------------------------------------- */

static int resolve_config(kv_engine_config *c, char *err, size_t errlen)
{
    if (c->num_blocks < 2)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL,
                       "num_blocks must be at least 2 (block 0 is the null block), got %d", (int)c->num_blocks);
    if (c->block_size < 1 || c->block_size > 4096)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "block_size must be 1..4096, got %d", (int)c->block_size);
    if (c->max_model_len < 1)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "max_model_len must be positive");
    if (c->max_num_seqs < 1 || c->max_num_batched_tokens < 1)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "max_num_seqs and max_num_batched_tokens must be positive");
    if (c->max_num_batched_tokens < c->max_num_seqs)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL,
                       "max_num_batched_tokens (%d) must be greater than or equal to max_num_seqs (%d).",
                       (int)c->max_num_batched_tokens, (int)c->max_num_seqs);
    if (!c->enable_chunked_prefill && c->max_num_batched_tokens < c->max_model_len)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL,
                       "max_num_batched_tokens (%d) is smaller than max_model_len (%d). This effectively limits "
                       "the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer "
                       "sequences. Please increase max_num_batched_tokens or decrease max_model_len.",
                       (int)c->max_num_batched_tokens, (int)c->max_model_len);
    if (c->tensor_parallel_size < 1 || c->tensor_parallel_size > KV_ENGINE_MAX_RANKS)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "tensor_parallel_size must be 1..%d", KV_ENGINE_MAX_RANKS);
    if (c->num_layers < 1 || c->num_kv_heads < 1 || c->head_size < 1)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "model geometry (layers, KV heads, head size) must be positive");
    if (c->kv_factor != 1 && c->kv_factor != 2)
        c->kv_factor = 2;
    if (c->mode < KV_MODE_PAGED || c->mode > KV_MODE_NO_CACHE)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "unknown mode %d", (int)c->mode);
    if (c->vocab_size < 2)
        c->vocab_size = 32000;
    if (c->event_capacity == 0)
        c->event_capacity = 65536;
    if (c->timeline_capacity == 0)
        c->timeline_capacity = 4096;
#ifdef NDEBUG
    int dflt_verify = 0;
#else
    int dflt_verify = 1;
#endif
    if (c->verify < 0)
        c->verify = dflt_verify;
    if (c->write_kv < 0)
        c->write_kv = c->verify;
    if (c->verify)
        c->write_kv = 1;
    return 0;
}

/* Bytes of host memory this machine can give now: MemAvailable, capped by a
 * cgroup v2 limit when one is set. 0 when unknown (no check then). */
static uint64_t host_available(void)
{
    uint64_t avail = 0;
    char *buf;
    size_t n;
    if (kv_read_file("/proc/meminfo", 1 << 16, &buf, &n, NULL, 0) == 0) {
        const char *m = strstr(buf, "MemAvailable:");
        unsigned long long kb;
        if (m && sscanf(m + 13, "%llu", &kb) == 1)
            avail = (uint64_t)kb * 1024;
        free(buf);
    }
    uint64_t lim = 0, cur = 0;
    if (kv_read_file("/sys/fs/cgroup/memory.max", 256, &buf, &n, NULL, 0) == 0) {
        unsigned long long v;
        if (sscanf(buf, "%llu", &v) == 1)
            lim = v;
        free(buf);
    }
    if (lim && kv_read_file("/sys/fs/cgroup/memory.current", 256, &buf, &n, NULL, 0) == 0) {
        unsigned long long v;
        if (sscanf(buf, "%llu", &v) == 1)
            cur = v;
        free(buf);
        uint64_t room = lim > cur ? lim - cur : 0;
        if (!avail || room < avail)
            avail = room;
    }
    return avail;
}

uint64_t kv_engine_host_bytes(const kv_engine_config *c)
{
    uint64_t nb = c->num_blocks > 0 ? (uint64_t)c->num_blocks : 0;
    uint64_t seqs = c->max_num_seqs > 0 ? (uint64_t)c->max_num_seqs + 1 : 1;
    uint64_t ev = c->event_capacity ? c->event_capacity : 65536, tl = c->timeline_capacity ? c->timeline_capacity : 4096;
    uint64_t b = sizeof(kv_engine) + kv_pool_host_bytes(c->num_blocks);
    b += nb * 2 * sizeof(int32_t);                    /* check counts, prefix-hit scratch */
    b += nb * (sizeof(int64_t) + sizeof(int32_t));    /* blocks written this step (read-back) */
    b += seqs * (4 * sizeof(kv_req *) + 4 * sizeof(int64_t) + 2 * sizeof(int32_t) + 1); /* scheduler lists, step detail */
    b += ((uint64_t)(c->max_model_len > 0 ? c->max_model_len : 0) + 1) * sizeof(int32_t);
    b += ev * (sizeof(kv_event) + 8) + tl * sizeof(kv_timeline_sample) + WRITE_BATCH * sizeof(kv_slot_write);
    int tp = c->tensor_parallel_size > 0 ? c->tensor_parallel_size : 1;
    int writes = c->write_kv > 0 || c->verify > 0;
#ifndef NDEBUG
    writes = writes || c->verify < 0;
#endif
    if (!c->device && writes) /* the host backend keeps one fingerprint per slot and rank */
        b += nb * (uint64_t)(c->block_size > 0 ? c->block_size : 1) * sizeof(uint64_t) * (uint64_t)tp;
    return b;
}

int kv_engine_config_check(const kv_engine_config *c, char *err, size_t errlen)
{
    char a[32], b[32];
    if (c->num_blocks > KV_ENGINE_MAX_BLOCKS)
        return kv_errf(err, errlen, KV_ENGINE_ERANGE, "num_blocks %s is more than the engine holds (at most %s)",
                       kv_fmt_thousands(a, sizeof a, c->num_blocks), kv_fmt_thousands(b, sizeof b, KV_ENGINE_MAX_BLOCKS));
    if (c->max_num_seqs > KV_ENGINE_MAX_NUM_SEQS)
        return kv_errf(err, errlen, KV_ENGINE_ERANGE, "max_num_seqs %s is more than the engine runs (at most %s)",
                       kv_fmt_thousands(a, sizeof a, c->max_num_seqs),
                       kv_fmt_thousands(b, sizeof b, KV_ENGINE_MAX_NUM_SEQS));
    if (c->max_num_batched_tokens > KV_ENGINE_MAX_TOKENS || c->max_model_len > KV_ENGINE_MAX_TOKENS)
        return kv_errf(err, errlen, KV_ENGINE_ERANGE, "%s %s is more than the engine holds (at most %s tokens)",
                       c->max_model_len > KV_ENGINE_MAX_TOKENS ? "max_model_len" : "max_num_batched_tokens",
                       kv_fmt_thousands(a, sizeof a, c->max_model_len > KV_ENGINE_MAX_TOKENS ? c->max_model_len
                                                                                          : c->max_num_batched_tokens),
                       kv_fmt_thousands(b, sizeof b, KV_ENGINE_MAX_TOKENS));
    uint64_t need = kv_engine_host_bytes(c);
    uint64_t have = c->host_memory_bytes ? c->host_memory_bytes : host_available();
    if (have && need > have)
        return kv_errf(err, errlen, KV_ENGINE_ERANGE,
                       "the engine would take %.2f GiB of host memory for %s blocks (about %.0f bytes each), more "
                       "than the %.2f GiB available here: use fewer blocks (--num-gpu-blocks-override) or a smaller card",
                       kv_gib((double)need), kv_fmt_thousands(a, sizeof a, c->num_blocks),
                       c->num_blocks > 0 ? (double)need / c->num_blocks : 0.0, kv_gib((double)have));
    return 0;
}

static void setup_ranks(kv_engine *e)
{
    const kv_engine_config *c = &e->cfg;
    int32_t tp = c->tensor_parallel_size;
    int32_t per = c->num_kv_heads / tp;
    if (per < 1)
        per = 1; /* vLLM get_num_kv_heads: max(1, total // tp), replicated past that */
    for (int32_t r = 0; r < tp; r++) {
        rank_info *ri = &e->ranks[r];
        ri->num_kv_heads = per;
        ri->replicated = tp > c->num_kv_heads;
        ri->first_kv_head = ri->replicated ? (int32_t)((int64_t)r * c->num_kv_heads / tp) : r * per;
        ri->layout = (kv_pool_layout){c->num_blocks, c->block_size, c->num_layers, per, c->head_size,
                                      c->kv_factor, c->cache_dtype, ri->first_kv_head};
        memcpy(ri->terms, c->terms[r], sizeof ri->terms);
        ri->terms[KV_TERM_KV_CACHE] = (double)kv_pool_layout_bytes(&ri->layout);
    }
    double kvpt = (double)c->num_layers * c->kv_factor * per * c->head_size * kv_dtype_bytes(c->cache_dtype);
    e->tparams = (kv_time_params){c->active_params, c->weight_bytes, kvpt, c->peak_flops, c->hbm_bytes_per_s,
                                  c->link_bytes_per_s, tp, c->num_layers, c->hidden_size};
}

static int build_core(kv_engine *e, char *err, size_t errlen)
{
    const kv_engine_config *c = &e->cfg;
    int caching = c->enable_prefix_caching && c->mode == KV_MODE_PAGED;
    e->pool = kv_pool_create(c->num_blocks, caching, err, errlen);
    if (!e->pool)
        return KV_ENGINE_ENOMEM;
    if (c->block_events)
        kv_pool_set_event_sink(e->pool, on_event, e); /* else no call per block at all */
    kv_kvcm_init(&e->kvcm, e->pool, c->block_size, c->max_model_len, c->mode, caching, c->seed);
    kv_pool_set_free_to_tail(e->pool, !c->sched_rules.free_uncached_first);
    if (c->offload_num_blocks > 0 && caching) {
        e->kvcm.offload = kv_offload_create(c->offload_num_blocks, c->offload_protect_offer, (kv_offload_lru)c->offload_lru);
        if (!e->kvcm.offload)
            return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory for the host KV tier");
    }
    kv_sched_config sc = {c->max_num_seqs, c->max_num_batched_tokens, c->max_model_len,
                          c->long_prefill_token_threshold, c->enable_chunked_prefill, c->scheduling_policy, c->mode,
                          c->num_blocks, c->sched_rules};
    e->sched = kv_sched_create(&sc, &e->kvcm, c->num_blocks, on_event, e, err, errlen);
    return e->sched ? 0 : KV_ENGINE_ENOMEM;
}

static void destroy_core(kv_engine *e)
{
    kv_offload_destroy(e->kvcm.offload);
    e->kvcm.offload = NULL;
    kv_sched_destroy(e->sched);
    kv_pool_destroy(e->pool);
    e->sched = NULL;
    e->pool = NULL;
}

static int open_device(kv_engine *e, char *err, size_t errlen)
{
    const kv_engine_config *c = &e->cfg;
    char derr[256] = "";
    if (c->device) {
        e->dev = c->device;
        e->own_dev = 0;
    } else {
        e->dev = kv_device_host_open(c->tensor_parallel_size, (uint64_t)c->gpu_total_bytes, derr, sizeof derr);
        if (!e->dev)
            return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "%s", derr);
        e->own_dev = 1;
    }
    if (e->dev->num_ranks < c->tensor_parallel_size)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "the %s backend serves %d ranks, tensor_parallel_size is %d",
                       e->dev->name, e->dev->num_ranks, (int)c->tensor_parallel_size);
    for (int32_t r = 0; r < c->tensor_parallel_size; r++) {
        for (int t = 0; t < KV_TERM_KV_CACHE; t++) {
            double b = e->ranks[r].terms[t];
            if (b <= 0)
                continue;
            int rc = e->dev->ops->reserve(e->dev, r, term_names[t], (uint64_t)b, &e->dev_h[r][t], derr, sizeof derr);
            if (rc)
                return kv_errf(err, errlen, rc == KV_DEV_ENOMEM ? KV_ENGINE_ENOMEM : KV_ENGINE_EDEVICE, "%s", derr);
        }
        int rc = e->dev->ops->alloc_pool(e->dev, r, &e->ranks[r].layout, &e->dev_h[r][KV_TERM_KV_CACHE], derr,
                                         sizeof derr);
        if (rc)
            return kv_errf(err, errlen, rc == KV_DEV_ENOMEM ? KV_ENGINE_ENOMEM : KV_ENGINE_EDEVICE, "%s", derr);
    }
    return 0;
}

/* A borrowed device whose ranks share cards (or, with KV_FIT_SMALLER, whose
 * cards are smaller than the plan's) holds a scaled copy of the plan: every
 * term and num_blocks times the backend's kv_device_fit_scale. */
static void fit_to_device(kv_engine *e)
{
    kv_engine_config *c = &e->cfg;
    e->dev_scale = 1.0;
    if (!c->device || !c->fit_device)
        return;
    double want = c->gpu_total_bytes;
    if (want <= 0) /* no card named: what rank 0 holds */
        for (int t = 0; t < KV_TERM_COUNT; t++)
            want += e->ranks[0].terms[t];
    double s = kv_device_fit_scale(c->device, c->tensor_parallel_size, want, c->fit_device);
    if (s >= 1.0)
        return;
    int64_t nb = (int64_t)((double)c->num_blocks * s);
    c->num_blocks = (int32_t)(nb < 2 ? 2 : nb);
    for (int32_t r = 0; r < c->tensor_parallel_size; r++)
        for (int t = 0; t < KV_TERM_COUNT; t++)
            c->terms[r][t] *= s;
    e->dev_scale = s;
    setup_ranks(e);
}

kv_engine *kv_engine_create(const kv_engine_config *cfg, char *err, size_t errlen)
{
    kv_engine *e = calloc(1, sizeof *e);
    if (!e) {
        kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory creating the engine");
        return NULL;
    }
    e->cfg = *cfg;
    if (resolve_config(&e->cfg, err, errlen) != 0 || kv_engine_config_check(&e->cfg, err, errlen) != 0) {
        free(e);
        return NULL;
    }
    const kv_engine_config *c = &e->cfg;
    e->verify = c->verify;
    e->write_kv = c->write_kv;
    e->ev = kv_events_create(c->event_capacity);
    e->tl_cap = c->timeline_capacity;
    e->tl = calloc(e->tl_cap, sizeof *e->tl);
    e->writes = calloc(WRITE_BATCH, sizeof *e->writes);
    e->tokbuf = calloc((size_t)c->max_model_len + 1, sizeof *e->tokbuf);
    e->counts = calloc((size_t)c->num_blocks, sizeof *e->counts);
    e->owner_buf = calloc((size_t)c->max_num_seqs + 1, sizeof *e->owner_buf);
    size_t ns = (size_t)c->max_num_seqs + 1;
    e->ls_ids = calloc(ns, sizeof *e->ls_ids);
    e->ls_pre = calloc(ns, sizeof *e->ls_pre);
    e->ls_fin = calloc(ns, sizeof *e->ls_fin);
    e->ls_tok = calloc(ns, sizeof *e->ls_tok);
    e->ls_hit = calloc(ns, sizeof *e->ls_hit);
    e->ls_resumed = calloc(ns, sizeof *e->ls_resumed);
    e->keybuf = calloc((size_t)kv_cdiv((int64_t)c->max_model_len + 1, c->block_size) + 1, sizeof *e->keybuf);
    e->dirty = calloc((size_t)c->num_blocks, sizeof *e->dirty);
    e->dirty_list = calloc((size_t)c->num_blocks, sizeof *e->dirty_list);
    if (!e->ev || !e->tl || !e->writes || !e->tokbuf || !e->counts || !e->owner_buf || !e->ls_ids || !e->ls_pre ||
        !e->ls_fin || !e->ls_tok || !e->ls_hit || !e->ls_resumed || !e->keybuf || !e->dirty || !e->dirty_list) {
        kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory creating the engine");
        kv_engine_destroy(e);
        return NULL;
    }
    kv_events_set_block_events(e->ev, c->block_events);
    for (int k = 0; k < KV_HIST_COUNT; k++)
        kv_hist_init(&e->hist[k], k);
    setup_ranks(e);
    int32_t planned_blocks = c->num_blocks;
    fit_to_device(e);
    /* the device first: a pool it cannot hold fails before the host allocates one */
    if (open_device(e, err, errlen) != 0 || build_core(e, err, errlen) != 0) {
        kv_engine_destroy(e);
        return NULL;
    }
    int32_t usable = c->num_blocks - 1;
    engine_log(e, 0, "block pool: %d blocks of %d tokens (block 0 is the null block, %d usable), %s backend, tp=%d",
                  (int)c->num_blocks, (int)c->block_size, (int)usable, e->dev->name, (int)c->tensor_parallel_size);
    if (c->enable_chunked_prefill)
        engine_log(e, 0, "Chunked prefill is enabled with max_num_batched_tokens=%d.", (int)c->max_num_batched_tokens);
    if (e->dev_scale < 1.0)
        engine_log(e, 1, "the %s backend's cards hold %.1f%% of this plan (ranks that share a card split it): "
                         "every term and the pool scaled to fit, %d blocks instead of %d",
                   e->dev->name, 100.0 * e->dev_scale, (int)c->num_blocks, (int)planned_blocks);
    return e;
}

static void free_req(kv_req *r)
{
    kv_req_release(r);
    free(r);
}

void kv_engine_destroy(kv_engine *e)
{
    if (!e)
        return;
    kv_eng_journal(e, &(kv_engine_input){.type = KV_IN_DESTROY});
    for (int64_t i = 0; i < e->num_ids; i++)
        if (e->by_id[i])
            free_req(e->by_id[i]);
    while (e->free_reqs) {
        kv_req *n = e->free_reqs->next_free;
        free_req(e->free_reqs);
        e->free_reqs = n;
    }
    free(e->by_id);
    kv_prefix_hashes *ph, *tmp;
    HASH_ITER(hh, e->prefix_hashes, ph, tmp) {
        HASH_DELETE(hh, e->prefix_hashes, ph);
        free(ph);
    }
    destroy_core(e);
    if (e->dev && e->own_dev) {
        e->dev->ops->destroy(e->dev);
    } else if (e->dev) { /* borrowed: give back only what this engine took */
        for (int32_t r = 0; r < e->cfg.tensor_parallel_size; r++)
            for (int t = 0; t < KV_TERM_COUNT; t++)
                if (e->dev_h[r][t])
                    e->dev->ops->free(e->dev, r, e->dev_h[r][t]);
    }
    kv_events_destroy(e->ev);
    free(e->tl);
    free(e->writes);
    free(e->tokbuf);
    free(e->counts);
    free(e->owner_buf);
    free(e->ls_ids);
    free(e->ls_pre);
    free(e->ls_fin);
    free(e->ls_tok);
    free(e->ls_hit);
    free(e->ls_resumed);
    free(e->keybuf);
    free(e->dirty);
    free(e->dirty_list);
    free(e);
}

const kv_engine_config *kv_engine_get_config(const kv_engine *e) { return &e->cfg; }

/* ---- requests ---------------------------------------------------------- */

kv_req *kv_eng_live_req(const kv_engine *e, int64_t id)
{
    if (id < 0 || id >= e->num_ids)
        return NULL;
    return e->by_id[id];
}

static int64_t reject(kv_engine *e, int rc, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int64_t reject(kv_engine *e, int rc, char *err, size_t errlen, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    e->m.requests_rejected++;
    kv_events_push(e->ev, KV_EV_REJECT, -1, -1, rc, e->step, e->clock);
    kv_events_log(e->ev, 2, line, e->step, e->clock);
    return kv_errf(err, errlen, rc, "%s", line);
}

/* Start r's block hashes from its prefix's cached chain (the prefix's full
 * blocks hold only prefix tokens, identical for every request naming it). */
static void prefix_hashes(kv_engine *e, kv_req *r)
{
    int32_t full = r->prefix_len / e->cfg.block_size;
    if (full <= 0 || full > r->hashes_cap)
        return;
    uint64_t key[3] = {r->prefix_seed, (uint64_t)(r->has_salt != 0), r->has_salt ? r->salt : 0};
    kv_prefix_hashes *ph = NULL;
    HASH_FIND(hh, e->prefix_hashes, key, sizeof key, ph);
    if (ph && ph->n == full) {
        memcpy(r->hashes, ph->hashes, (size_t)full * sizeof(kv_hash));
        r->num_hashes = full;
        return;
    }
    if (ph || e->num_prefix_hashes >= KV_PREFIX_HASHES_MAX)
        return;
    kv_req_hash_blocks(r, full, e->cfg.block_size, e->kvcm.none_hash);
    ph = malloc(sizeof *ph + (size_t)full * sizeof(kv_hash));
    if (!ph)
        return; /* only a cache: the request hashes its own prefix */
    memcpy(ph->key, key, sizeof key);
    ph->n = full;
    memcpy(ph->hashes, r->hashes, (size_t)full * sizeof(kv_hash));
    HASH_ADD(hh, e->prefix_hashes, key, sizeof ph->key, ph);
    e->num_prefix_hashes++;
}

int64_t kv_engine_submit(kv_engine *e, const kv_request_spec *sp, char *err, size_t errlen)
{
    kv_eng_journal(e, &(kv_engine_input){.type = KV_IN_SUBMIT, .spec = sp});
    const kv_engine_config *c = &e->cfg;
    int32_t prefix = sp->prefix_id && sp->prefix_tokens > 0 ? sp->prefix_tokens : 0;
    int32_t body = sp->prompt_token_ids ? sp->num_prompt_token_ids : sp->prompt_tokens;
    if (body < 0 || prefix < 0 || sp->output_tokens < 1 || (int64_t)prefix + body < 1 ||
        (int64_t)prefix + body > INT32_MAX / 2)
        return reject(e, KV_ENGINE_EINVAL, err, errlen,
                      "bad request: prompt of %d tokens (prefix %d), output_tokens %d (need a prompt of at least "
                      "1 token and output_tokens >= 1)",
                      (int)body, (int)prefix, (int)sp->output_tokens);
    int32_t prompt = prefix + body;
    if (prompt > c->max_model_len)
        return reject(e, KV_ENGINE_ETOOLONG, err, errlen,
                      "The decoder prompt (length %d) is longer than the maximum model length of %d. Make sure "
                      "that `max_model_len` is no smaller than the number of text tokens.",
                      (int)prompt, (int)c->max_model_len);
    /* A prompt that fills max_model_len leaves no room for the one token every
     * request generates; vLLM refuses it at admission too (its scheduler would
     * never compute the last prompt token, max_model_len - 1 - computed = 0). */
    if (prompt == c->max_model_len)
        return reject(e, KV_ENGINE_ETOOLONG, err, errlen,
                      "The decoder prompt (length %d) plus the number of requested output tokens (at least 1) is "
                      "longer than the maximum model length of %d. Make sure that `max_model_len` is no smaller "
                      "than the number of text tokens (prompt + requested output tokens).",
                      (int)prompt, (int)c->max_model_len);
    int64_t total = (int64_t)prompt + sp->output_tokens;
    if (total > c->max_model_len)
        total = c->max_model_len;
    int32_t need = c->mode == KV_MODE_NO_CACHE ? 0 : kv_kvcm_max_blocks(&e->kvcm, (int32_t)total);
    if (need > c->num_blocks - 1)
        return reject(e, KV_ENGINE_ENOFIT, err, errlen,
                      "request needs %d blocks (%lld tokens%s) but the pool has only %d usable blocks "
                      "(num_blocks %d incl. the null block): it could never be scheduled",
                      (int)need, (long long)(c->mode == KV_MODE_CONTIGUOUS ? c->max_model_len : total),
                      c->mode == KV_MODE_CONTIGUOUS ? ", a max_model_len slab" : "", (int)(c->num_blocks - 1),
                      (int)c->num_blocks);
    /* a request slot: recycled when possible so steady traffic stops allocating */
    kv_req *r = e->free_reqs;
    if (r) {
        e->free_reqs = r->next_free;
    } else if (!(r = calloc(1, sizeof *r))) {
        return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory");
    }
    if (e->num_ids == e->cap_ids) {
        int64_t ncap = e->cap_ids ? e->cap_ids * 2 : 1024;
        kv_req **nb = realloc(e->by_id, (size_t)ncap * sizeof *nb);
        if (!nb) {
            r->next_free = e->free_reqs;
            e->free_reqs = r;
            return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory");
        }
        e->by_id = nb;
        e->cap_ids = ncap;
    }
    kv_req_clear(r);
    int32_t *ids = r->prompt_ids; /* kept below only if this request has ids */
    int32_t ids_cap = r->prompt_ids_cap;
    r->prompt_ids = NULL;
    if (sp->prompt_token_ids) {
        if (ids_cap < body) {
            int32_t *n = realloc(ids, (size_t)(body > 0 ? body : 1) * sizeof *n);
            if (!n) {
                free(ids);
                free_req(r);
                return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory");
            }
            ids = n;
            r->prompt_ids_cap = body;
        }
        if (body > 0) /* a prompt that is all shared prefix has no ids of its own */
            memcpy(ids, sp->prompt_token_ids, (size_t)body * sizeof *ids);
        r->prompt_ids = ids;
    } else {
        free(ids);
        r->prompt_ids_cap = 0;
    }
    int32_t max_blocks = (int32_t)kv_cdiv(total, c->block_size);
    if (need > max_blocks)
        max_blocks = need;
    if (kv_req_reserve(r, max_blocks) != 0) {
        free_req(r);
        return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory");
    }
    r->id = e->num_ids;
    r->prefix_len = prefix;
    r->prompt_len = prompt;
    r->max_output = sp->output_tokens;
    r->num_cached_tokens = -1;
    r->priority = sp->priority;
    r->arrival_s = sp->arrival_s >= 0 ? sp->arrival_s : e->clock;
    r->first_sched_s = r->first_token_s = r->last_token_s = r->finish_s = -1;
    r->prefix_seed = prefix ? kv_hash_mix(c->seed ^ 0x7072656669780000ull, kv_hash_str(sp->prefix_id)) : 0;
    r->tok_seed = kv_hash_mix(c->seed, (uint64_t)r->id + 1);
    r->has_salt = sp->cache_salt && sp->cache_salt[0];
    r->salt = r->has_salt ? kv_hash_str(sp->cache_salt) : 0;
    r->vocab = c->vocab_size;
    r->remote_prefill = sp->remote_prefill != 0;
    prefix_hashes(e, r);
    kv_req_update_hashes(r, c->block_size, e->kvcm.none_hash);
    if (kv_sched_add(e->sched, r) != 0) {
        free_req(r);
        return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory");
    }
    e->by_id[e->num_ids++] = r;
    return r->id;
}

/* A finished/aborted request stays readable for DONE_KEEP more finishes. */
void kv_eng_retire(kv_engine *e, kv_req *r)
{
    kv_req **slot = &e->done[e->num_done % DONE_KEEP];
    if (*slot) {
        kv_req *old = *slot;
        e->by_id[old->id] = NULL;
        old->next_free = e->free_reqs;
        e->free_reqs = old;
    }
    *slot = r;
    e->num_done++;
}

int kv_engine_abort(kv_engine *e, int64_t id, char *err, size_t errlen)
{
    kv_eng_journal(e, &(kv_engine_input){.type = KV_IN_ABORT, .req_id = id});
    kv_req *r = kv_eng_live_req(e, id);
    if (!r || r->status == KV_REQ_FINISHED || r->status == KV_REQ_ABORTED)
        return kv_errf(err, errlen, KV_ENGINE_ENOTFOUND, "no live request %lld", (long long)id);
    if (kv_sched_abort(e->sched, r) != 0)
        return kv_errf(err, errlen, KV_ENGINE_ENOTFOUND, "request %lld is not scheduled", (long long)id);
    r->finish_s = e->clock;
    e->m.requests_aborted++;
    kv_eng_retire(e, r);
    return 0;
}

int kv_engine_abort_all(kv_engine *e)
{
    int n = 0;
    for (int64_t id = 0; id < e->num_ids; id++) {
        kv_req *r = e->by_id[id];
        if (r && (r->status == KV_REQ_WAITING || r->status == KV_REQ_RUNNING || r->status == KV_REQ_PREEMPTED))
            n += kv_engine_abort(e, id, NULL, 0) == 0;
    }
    return n;
}

int kv_engine_reset_prefix_cache(kv_engine *e)
{
    kv_eng_journal(e, &(kv_engine_input){.type = KV_IN_RESET_PREFIX_CACHE});
    int32_t held = 0;
    if (!kv_pool_reset_prefix_cache(e->pool, &held)) {
        engine_log(e, 1, "Failed to reset prefix cache because some blocks (%d) are not freed yet", (int)held);
        return 0;
    }
    engine_log(e, 0, "Successfully reset prefix cache");
    return 1;
}

int kv_engine_set_mode(kv_engine *e, kv_engine_mode mode, char *err, size_t errlen)
{
    kv_eng_journal(e, &(kv_engine_input){.type = KV_IN_SET_MODE, .mode = mode});
    if (mode < KV_MODE_PAGED || mode > KV_MODE_NO_CACHE)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "unknown mode %d", (int)mode);
    if (kv_sched_num_running(e->sched) || kv_sched_num_waiting(e->sched))
        return kv_errf(err, errlen, KV_ENGINE_EBUSY,
                       "switching modes needs an idle engine: %d running, %d waiting",
                       (int)kv_sched_num_running(e->sched), (int)kv_sched_num_waiting(e->sched));
    int64_t q = e->kvcm.queries, h = e->kvcm.hits, pq = e->kvcm.preempted_queries, ph = e->kvcm.preempted_hits;
    kv_pool_stats ps;
    kv_pool_get_stats(e->pool, &ps);
    e->m.block_allocations += ps.allocations;
    e->m.block_frees += ps.frees;
    e->m.block_evictions += ps.evictions;
    destroy_core(e);
    e->cfg.mode = mode;
    if (build_core(e, err, errlen) != 0)
        return KV_ENGINE_ENOMEM;
    e->kvcm.queries = q;
    e->kvcm.hits = h;
    e->kvcm.preempted_queries = pq;
    e->kvcm.preempted_hits = ph;
    static const char *names[] = {"paged", "contiguous", "no-cache"};
    engine_log(e, 0, "mode: %s", names[mode]);
    return 0;
}

void kv_engine_set_verify(kv_engine *e, int on)
{
    e->verify = on ? 1 : 0;
    if (on)
        e->write_kv = 1;
}

