#include "kv_engine.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_device_host.h"
#include "kv_events.h"
#include "kv_hash.h"
#include "kv_kvcm.h"
#include "kv_metrics.h"
#include "kv_pool.h"
#include "kv_req.h"
#include "kv_sched.h"
#include "kv_timemodel.h"
#include "kv_util.h"

#define DONE_KEEP 256          /* finished requests kept readable before recycling */
#define WRITE_BATCH 4096       /* slot writes per device call */

typedef struct rank_info {
    int32_t num_kv_heads, first_kv_head, replicated;
    kv_pool_layout layout;
    double terms[KV_TERM_COUNT];
} rank_info;

struct kv_engine {
    kv_engine_config cfg;
    kv_pool *pool;
    kv_kvcm kvcm;
    kv_sched *sched;
    kv_events *ev;
    kv_device *dev;
    int own_dev;
    rank_info ranks[KV_ENGINE_MAX_RANKS];
    kv_time_params tparams;
    /* requests */
    kv_req **by_id;
    int64_t num_ids, cap_ids;
    kv_req *free_reqs;
    kv_req *done[DONE_KEEP];
    int64_t num_done;
    /* clock */
    int64_t step;
    double clock;
    int verify, write_kv;
    /* metrics */
    kv_engine_metrics m;
    kv_hist hist[KV_HIST_COUNT];
    double usage_time, waiting_time, running_time, total_time;
    /* timeline */
    kv_timeline_sample *tl;
    uint32_t tl_cap;
    int64_t tl_n;
    /* scratch (sized at creation: no allocation per step) */
    kv_slot_write *writes;
    int32_t *tokbuf;
    int32_t *counts;
    int64_t *owner_buf;        /* max_num_seqs ids, for kv_engine_block_owners */
    /* the last step's decisions (kv_engine_last_step), max_num_seqs + 1 each */
    int64_t ls_step, *ls_ids, *ls_pre, *ls_fin;
    int32_t *ls_tok, *ls_hit, ls_n, ls_first_new, ls_npre, ls_nfin;
    uint8_t *ls_resumed;
};

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

void kv_engine_log(kv_engine *e, int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    logv(e, level, fmt, ap);
    va_end(ap);
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
                                      c->kv_factor, c->cache_dtype};
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
    kv_sched_config sc = {c->max_num_seqs, c->max_num_batched_tokens, c->max_model_len,
                          c->long_prefill_token_threshold, c->enable_chunked_prefill, c->scheduling_policy, c->mode,
                          c->num_blocks, c->sched_rules};
    e->sched = kv_sched_create(&sc, &e->kvcm, c->num_blocks, on_event, e, err, errlen);
    return e->sched ? 0 : KV_ENGINE_ENOMEM;
}

static void destroy_core(kv_engine *e)
{
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
            int rc = e->dev->ops->reserve(e->dev, r, term_names[t], (uint64_t)b, derr, sizeof derr);
            if (rc)
                return kv_errf(err, errlen, rc == KV_DEV_ENOMEM ? KV_ENGINE_ENOMEM : KV_ENGINE_EDEVICE, "%s", derr);
        }
        int rc = e->dev->ops->alloc_pool(e->dev, r, &e->ranks[r].layout, derr, sizeof derr);
        if (rc)
            return kv_errf(err, errlen, rc == KV_DEV_ENOMEM ? KV_ENGINE_ENOMEM : KV_ENGINE_EDEVICE, "%s", derr);
    }
    return 0;
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
    if (!e->ev || !e->tl || !e->writes || !e->tokbuf || !e->counts || !e->owner_buf || !e->ls_ids || !e->ls_pre ||
        !e->ls_fin || !e->ls_tok || !e->ls_hit || !e->ls_resumed) {
        kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory creating the engine");
        kv_engine_destroy(e);
        return NULL;
    }
    kv_events_set_block_events(e->ev, c->block_events);
    for (int k = 0; k < KV_HIST_COUNT; k++)
        kv_hist_init(&e->hist[k], k);
    setup_ranks(e);
    if (build_core(e, err, errlen) != 0 || open_device(e, err, errlen) != 0) {
        kv_engine_destroy(e);
        return NULL;
    }
    int32_t usable = c->num_blocks - 1;
    kv_engine_log(e, 0, "block pool: %d blocks of %d tokens (block 0 is the null block, %d usable), %s backend, tp=%d",
                  (int)c->num_blocks, (int)c->block_size, (int)usable, e->dev->name, (int)c->tensor_parallel_size);
    if (c->enable_chunked_prefill)
        kv_engine_log(e, 0, "Chunked prefill is enabled with max_num_batched_tokens=%d.", (int)c->max_num_batched_tokens);
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
    for (int64_t i = 0; i < e->num_ids; i++)
        if (e->by_id[i])
            free_req(e->by_id[i]);
    while (e->free_reqs) {
        kv_req *n = e->free_reqs->next_free;
        free_req(e->free_reqs);
        e->free_reqs = n;
    }
    free(e->by_id);
    destroy_core(e);
    if (e->dev) {
        e->dev->ops->release(e->dev);
        if (e->own_dev)
            e->dev->ops->destroy(e->dev);
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
    free(e);
}

const kv_engine_config *kv_engine_get_config(const kv_engine *e) { return &e->cfg; }

/* ---- requests ---------------------------------------------------------- */

static kv_req *live_req(const kv_engine *e, int64_t id)
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

int64_t kv_engine_submit(kv_engine *e, const kv_request_spec *sp, char *err, size_t errlen)
{
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
    int32_t *ids = r->prompt_ids;
    int32_t ids_cap = r->prompt_ids_cap;
    int32_t *table = r->table;
    int32_t tcap = r->table_cap;
    kv_hash *hashes = r->hashes;
    int32_t hcap = r->hashes_cap;
    memset(r, 0, sizeof *r);
    r->prompt_ids_cap = ids_cap;
    r->table = table;
    r->table_cap = tcap;
    r->hashes = hashes;
    r->hashes_cap = hcap;
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
    r->sched_index = -1;
    kv_req_update_hashes(r, c->block_size, e->kvcm.none_hash);
    if (kv_sched_add(e->sched, r) != 0) {
        free_req(r);
        return kv_errf(err, errlen, KV_ENGINE_ENOMEM, "out of memory");
    }
    e->by_id[e->num_ids++] = r;
    return r->id;
}

/* A finished/aborted request stays readable for DONE_KEEP more finishes. */
static void retire(kv_engine *e, kv_req *r)
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

/* ---- stepping ---------------------------------------------------------- */

static void accumulate_time(kv_engine *e, double dt, double usage)
{
    if (dt <= 0)
        return;
    e->total_time += dt;
    e->usage_time += usage * dt;
    e->waiting_time += kv_sched_num_waiting(e->sched) * dt;
    e->running_time += kv_sched_num_running(e->sched) * dt;
}

void kv_engine_advance_clock(kv_engine *e, double t)
{
    if (t <= e->clock)
        return;
    accumulate_time(e, t - e->clock, kv_pool_usage(e->pool));
    e->clock = t;
}

static int flush_writes(kv_engine *e, int32_t n, char *err, size_t errlen)
{
    char derr[256];
    for (int32_t r = 0; r < e->cfg.tensor_parallel_size; r++) {
        int rc = e->dev->ops->write_kv(e->dev, r, e->writes, (size_t)n, derr, sizeof derr);
        if (rc)
            return kv_errf(err, errlen, KV_ENGINE_EDEVICE, "%s", derr);
    }
    return 0;
}

static int write_step_kv(kv_engine *e, const kv_sched_output *o, char *err, size_t errlen)
{
    int32_t bs = e->cfg.block_size, n = 0;
    for (int32_t k = 0; k < o->num_scheduled; k++) {
        const kv_req *r = o->scheduled[k];
        if (r->status != KV_REQ_RUNNING)
            continue; /* a priority victim that kept its place (vLLM 0.11.0): no blocks to write */
        for (int32_t pos = r->num_computed - r->scheduled; pos < r->num_computed; pos++) {
            kv_slot_write *w = &e->writes[n++];
            w->slot = (int64_t)r->table[pos / bs] * bs + pos % bs;
            w->token_id = kv_req_token(r, pos);
            w->position = pos;
            if (n == WRITE_BATCH) {
                int rc = flush_writes(e, n, err, errlen);
                if (rc)
                    return rc;
                n = 0;
            }
        }
    }
    return n ? flush_writes(e, n, err, errlen) : 0;
}

static void sample_timeline(kv_engine *e, const kv_sched_output *o, double dur, double usage)
{
    kv_timeline_sample *s = &e->tl[e->tl_n % e->tl_cap];
    s->step = e->step;
    s->clock_s = e->clock;
    s->kv_usage = usage;
    s->num_running = kv_sched_num_running(e->sched);
    s->num_waiting = kv_sched_num_waiting(e->sched);
    s->num_scheduled_tokens = o->num_tokens;
    s->num_preempted = o->num_preempted;
    s->num_preemptions_total = kv_sched_num_preemptions(e->sched);
    s->prefix_hit_rate = e->kvcm.queries ? (double)e->kvcm.hits / (double)e->kvcm.queries : 0.0;
    s->tokens_per_s = dur > 0 ? o->num_tokens / dur : 0.0;
    s->work_with_cache = e->m.work_tokens_with_cache;
    s->work_without_cache = e->m.work_tokens_without_cache;
    e->tl_n++;
}

static void record_step(kv_engine *e, const kv_sched_output *o)
{
    e->ls_step = e->step;
    e->ls_n = o->num_scheduled;
    e->ls_first_new = o->num_scheduled - o->num_new;
    for (int32_t k = 0; k < o->num_scheduled; k++) {
        const kv_req *r = o->scheduled[k];
        int admitted = k >= e->ls_first_new;
        e->ls_ids[k] = r->id;
        e->ls_tok[k] = r->scheduled;
        e->ls_hit[k] = admitted ? r->admit_hit : 0;
        e->ls_resumed[k] = (uint8_t)(admitted && r->num_preemptions > 0);
    }
    e->ls_npre = o->num_preempted;
    for (int32_t k = 0; k < o->num_preempted; k++)
        e->ls_pre[k] = o->preempted[k]->id;
    e->ls_nfin = 0;
}

void kv_engine_last_step(const kv_engine *e, kv_step_detail *d)
{
    d->step = e->ls_step;
    d->num_scheduled = e->ls_n;
    d->ids = e->ls_ids;
    d->num_tokens = e->ls_tok;
    d->first_admitted = e->ls_first_new;
    d->hit_tokens = e->ls_hit;
    d->resumed = e->ls_resumed;
    d->num_preempted = e->ls_npre;
    d->preempted = e->ls_pre;
    d->num_finished = e->ls_nfin;
    d->finished = e->ls_fin;
}

int32_t kv_engine_future_token(const kv_engine *e, int64_t id, int32_t pos)
{
    const kv_req *r = live_req(e, id);
    if (!r || pos < 0)
        return -1;
    int64_t end = (int64_t)r->prompt_len + r->max_output;
    if (end > e->cfg.max_model_len)
        end = e->cfg.max_model_len;
    return pos < end ? kv_req_token(r, pos) : -1;
}

int kv_engine_step(kv_engine *e, kv_step_result *out, char *err, size_t errlen)
{
    kv_step_result res;
    memset(&res, 0, sizeof res);
    res.step = e->step;
    res.clock_s = e->clock;
    if (out)
        *out = res;
    if (kv_sched_num_running(e->sched) == 0 && kv_sched_num_waiting(e->sched) == 0)
        return 0;
    kv_sched_output o;
    double start = e->clock;
    kv_sched_schedule(e->sched, &o);
    record_step(e, &o);
    res.num_preempted = o.num_preempted;
    res.num_new_reqs = o.num_new;
    e->m.num_preemptions_total += o.num_preempted;
    if (o.num_tokens == 0) {
        e->step++;
        if (out)
            *out = res;
        if (o.num_preempted == 0)
            /* requests exist yet none could run: without this a caller's
             * "step until done" loop would spin forever */
            return kv_errf(err, errlen, KV_ENGINE_EINVAL,
                           "no request can make progress: %d running, %d waiting, %d of %d blocks free",
                           (int)kv_sched_num_running(e->sched), (int)kv_sched_num_waiting(e->sched),
                           (int)kv_pool_num_free(e->pool), (int)(e->cfg.num_blocks - 1));
        return 0;
    }
    /* model execution: write the K/V of every scheduled token */
    if (e->write_kv && e->cfg.mode != KV_MODE_NO_CACHE) {
        int rc = write_step_kv(e, &o, err, errlen);
        if (rc)
            return rc;
    }
    kv_step_work w = {0, 0, 0};
    for (int32_t k = 0; k < o.num_scheduled; k++) {
        kv_req *r = o.scheduled[k];
        int32_t s0 = r->num_computed - r->scheduled;
        kv_timemodel_add_chunk(&w, s0, r->scheduled);
        if (r->first_sched_s < 0) {
            r->first_sched_s = start;
            kv_hist_observe(&e->hist[KV_HIST_QUEUE], start - r->arrival_s);
        }
        if (r->high_water > s0) {
            /* tokens this request had computed before it was preempted */
            int32_t redo = (r->high_water < r->num_computed ? r->high_water : r->num_computed) - s0;
            e->m.recomputed_tokens += redo;
        }
        if (r->num_computed > r->high_water && e->cfg.mode != KV_MODE_NO_CACHE)
            r->high_water = r->num_computed;
    }
    if (e->cfg.mode == KV_MODE_NO_CACHE)
        w.kv_tokens_read = 0; /* nothing cached to read: the work is all in the recompute */
    double usage = kv_pool_usage(e->pool);
    double dur = kv_timemodel_step(&e->tparams, &w, NULL);
    accumulate_time(e, dur, usage);
    e->clock += dur;
    if (usage > e->m.peak_kv_usage)
        e->m.peak_kv_usage = usage;
    e->m.computed_tokens += o.num_tokens;

    /* sampling: which requests produce a token this step, before update() */
    int64_t same_itl = 0; /* requests whose previous token came at the end of the previous step */
    for (int32_t k = 0; k < o.num_scheduled; k++) {
        kv_req *r = o.scheduled[k];
        if (r->status != KV_REQ_RUNNING || r->num_computed < kv_req_num_tokens(r))
            continue;
        int32_t seq = kv_req_num_tokens(r);
        if (r->first_token_s < 0) {
            kv_hist_observe(&e->hist[KV_HIST_TTFT], e->clock - r->arrival_s);
            e->m.prompt_tokens_total += r->prompt_len;
            e->m.work_tokens_with_cache += r->prompt_len;
        } else {
            if (r->last_token_s == start)
                same_itl++;
            else
                kv_hist_observe(&e->hist[KV_HIST_ITL], e->clock - r->last_token_s);
            e->m.work_tokens_with_cache += 1;
        }
        e->m.work_tokens_without_cache += seq;
        e->m.generation_tokens_total++;
    }
    kv_hist_observe_n(&e->hist[KV_HIST_ITL], e->clock - start, same_itl);
    kv_sched_update(e->sched, &o, e->clock);
    e->ls_nfin = o.num_finished;
    for (int32_t k = 0; k < o.num_finished; k++) {
        kv_req *r = o.finished[k];
        e->ls_fin[k] = r->id;
        kv_hist_observe(&e->hist[KV_HIST_E2E], r->finish_s - r->arrival_s);
        e->m.request_success_total++;
        retire(e, r);
    }
    res.num_scheduled_reqs = o.num_scheduled;
    res.num_scheduled_tokens = o.num_tokens;
    res.num_prefill_tokens = o.num_prefill_tokens;
    res.num_decode_tokens = o.num_decode_tokens;
    res.num_finished = o.num_finished;
    res.duration_s = dur;
    res.clock_s = e->clock;
    sample_timeline(e, &o, dur, usage);
    e->step++;
    if (out)
        *out = res;
    if (e->verify && e->cfg.mode != KV_MODE_NO_CACHE) {
        int rc = kv_engine_verify(e, err, errlen);
        if (rc)
            return rc;
    }
    return o.num_tokens;
}

int kv_engine_abort(kv_engine *e, int64_t id, char *err, size_t errlen)
{
    kv_req *r = live_req(e, id);
    if (!r || r->status == KV_REQ_FINISHED || r->status == KV_REQ_ABORTED)
        return kv_errf(err, errlen, KV_ENGINE_ENOTFOUND, "no live request %lld", (long long)id);
    if (kv_sched_abort(e->sched, r) != 0)
        return kv_errf(err, errlen, KV_ENGINE_ENOTFOUND, "request %lld is not scheduled", (long long)id);
    r->finish_s = e->clock;
    e->m.requests_aborted++;
    retire(e, r);
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
    int32_t held = 0;
    if (!kv_pool_reset_prefix_cache(e->pool, &held)) {
        kv_engine_log(e, 1, "Failed to reset prefix cache because some blocks (%d) are not freed yet", (int)held);
        return 0;
    }
    kv_engine_log(e, 0, "Successfully reset prefix cache");
    return 1;
}

int kv_engine_set_mode(kv_engine *e, kv_engine_mode mode, char *err, size_t errlen)
{
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
    kv_engine_log(e, 0, "mode: %s", names[mode]);
    return 0;
}

void kv_engine_set_verify(kv_engine *e, int on)
{
    e->verify = on ? 1 : 0;
    if (on)
        e->write_kv = 1;
}

/* ---- reading ----------------------------------------------------------- */

void kv_engine_get_info(const kv_engine *e, kv_engine_info *o)
{
    memset(o, 0, sizeof *o);
    o->mode = e->cfg.mode;
    o->num_blocks = e->cfg.num_blocks;
    o->block_size = e->cfg.block_size;
    o->tensor_parallel_size = e->cfg.tensor_parallel_size;
    o->num_free_blocks = kv_pool_num_free(e->pool);
    o->num_cached_blocks = kv_pool_num_hashed(e->pool);
    o->num_running = kv_sched_num_running(e->sched);
    o->num_waiting = kv_sched_num_waiting(e->sched);
    o->num_submitted = e->num_ids;
    o->num_finished = e->num_done;
    o->step = e->step;
    o->clock_s = e->clock;
    o->kv_usage = kv_pool_usage(e->pool);
}

static void fill_block(const kv_engine *e, int32_t id, kv_block_view *v)
{
    const kv_block *b = kv_pool_block(e->pool, id);
    memset(v, 0, sizeof *v);
    v->block_id = id;
    v->ref_cnt = b->ref_cnt;
    v->is_null = b->is_null;
    v->has_hash = b->has_hash;
    v->is_free = b->in_free;
    v->cached_free = b->in_free && b->has_hash;
    v->free_pos = -1;
    v->owner = -1;
    v->hash_lo = b->has_hash ? b->hash.lo : 0;
}

static int32_t blocks_snapshot(const kv_engine *e, kv_block_view *out, int32_t max, int with_free_pos)
{
    int32_t n = e->cfg.num_blocks < max ? e->cfg.num_blocks : max;
    for (int32_t i = 0; i < n; i++)
        fill_block(e, i, &out[i]);
    if (with_free_pos) {
        const kv_pool_fq *q = kv_pool_queue(e->pool);
        int32_t pos = 0;
        for (int32_t id = kv_pool_fq_head(q); id >= 0 && id < q->n; id = q->blocks[id].next_free, pos++)
            if (id < n)
                out[id].free_pos = pos;
    }
    for (int32_t k = 0; k < kv_sched_num_running(e->sched); k++) {
        const kv_req *r = kv_sched_running_at(e->sched, k);
        for (int32_t i = 0; i < r->num_blocks; i++) {
            int32_t b = r->table[i];
            if (b >= n)
                continue;
            if (out[b].owner < 0 || r->id < out[b].owner)
                out[b].owner = r->id;
            out[b].num_owners++;
        }
    }
    return n;
}

int32_t kv_engine_blocks(const kv_engine *e, kv_block_view *out, int32_t max)
{
    return blocks_snapshot(e, out, max, 1);
}

int32_t kv_engine_blocks_brief(const kv_engine *e, kv_block_view *out, int32_t max)
{
    return blocks_snapshot(e, out, max, 0);
}

int kv_engine_block(const kv_engine *e, int32_t id, kv_block_view *out)
{
    if (id < 0 || id >= e->cfg.num_blocks)
        return KV_ENGINE_EINVAL;
    fill_block(e, id, out);
    if (out->is_free) {
        const kv_pool_fq *q = kv_pool_queue(e->pool);
        int32_t pos = 0;
        for (int32_t b = kv_pool_fq_head(q); b >= 0 && b < q->n; b = q->blocks[b].next_free, pos++)
            if (b == id) {
                out->free_pos = pos;
                break;
            }
    }
    int64_t owners[1];
    out->num_owners = kv_engine_block_owners(e, id, owners, 1);
    out->owner = out->num_owners > 0 ? owners[0] : -1;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int32_t kv_engine_block_owners(const kv_engine *e, int32_t block_id, int64_t *out, int32_t max)
{
    int32_t n = 0;
    for (int32_t k = 0; k < kv_sched_num_running(e->sched); k++) {
        const kv_req *r = kv_sched_running_at(e->sched, k);
        for (int32_t i = 0; i < r->num_blocks; i++) {
            if (r->table[i] == block_id) {
                e->owner_buf[n++] = r->id; /* running <= max_num_seqs */
                break;
            }
        }
    }
    qsort(e->owner_buf, (size_t)n, sizeof e->owner_buf[0], cmp_i64);
    for (int32_t i = 0; i < n && i < max; i++)
        out[i] = e->owner_buf[i];
    return n;
}

int32_t kv_engine_free_queue(const kv_engine *e, int32_t *out, int32_t max)
{
    return kv_pool_fq_get_all(kv_pool_queue(e->pool), out, max);
}

int kv_engine_request(const kv_engine *e, int64_t id, kv_request_view *o)
{
    const kv_req *r = live_req(e, id);
    if (!r)
        return KV_ENGINE_ENOTFOUND;
    memset(o, 0, sizeof *o);
    o->id = r->id;
    o->status = (kv_req_status)r->status;
    o->prefix_tokens = r->prefix_len;
    o->prompt_tokens = r->prompt_len;
    o->output_tokens = r->max_output;
    o->num_output_tokens = r->num_output;
    o->num_tokens = kv_req_num_tokens(r);
    o->num_computed_tokens = r->num_computed;
    o->num_cached_tokens = r->num_cached_tokens < 0 ? 0 : r->num_cached_tokens;
    o->num_blocks = r->num_blocks;
    o->num_preemptions = r->num_preemptions;
    o->priority = r->priority;
    o->arrival_s = r->arrival_s;
    o->first_token_s = r->first_token_s;
    o->finish_s = r->finish_s;
    o->reserved_tokens = (r->reserved_blocks ? r->reserved_blocks : r->num_blocks) * e->cfg.block_size;
    return 0;
}

int32_t kv_engine_block_table(const kv_engine *e, int64_t id, int32_t *out, int32_t max)
{
    const kv_req *r = live_req(e, id);
    if (!r)
        return KV_ENGINE_ENOTFOUND;
    for (int32_t i = 0; i < r->num_blocks && i < max; i++)
        out[i] = r->table[i];
    return r->num_blocks;
}

int32_t kv_engine_running(const kv_engine *e, int64_t *out, int32_t max)
{
    int32_t n = kv_sched_num_running(e->sched);
    for (int32_t i = 0; i < n && i < max; i++)
        out[i] = kv_sched_running_at(e->sched, i)->id;
    return n;
}

int32_t kv_engine_waiting(const kv_engine *e, int64_t *out, int32_t max)
{
    int32_t n = kv_sched_num_waiting(e->sched);
    if (max <= 0 || n == 0)
        return n;
    int32_t k = n < max ? n : max;
    kv_req **tmp = malloc((size_t)n * sizeof *tmp);
    if (!tmp)
        return n;
    kv_sched_waiting(e->sched, tmp, n);
    for (int32_t i = 0; i < k; i++)
        out[i] = tmp[i]->id;
    free(tmp);
    return n;
}

int32_t kv_engine_token(const kv_engine *e, int64_t id, int32_t pos)
{
    const kv_req *r = live_req(e, id);
    if (!r || pos < 0 || pos >= kv_req_num_tokens(r))
        return -1;
    return kv_req_token(r, pos);
}

int kv_engine_rank(const kv_engine *e, int32_t rank, kv_rank_view *o)
{
    if (rank < 0 || rank >= e->cfg.tensor_parallel_size)
        return KV_ENGINE_EINVAL;
    const rank_info *ri = &e->ranks[rank];
    memset(o, 0, sizeof *o);
    o->rank = rank;
    o->num_kv_heads = ri->num_kv_heads;
    o->first_kv_head = ri->first_kv_head;
    o->replicated = ri->replicated;
    kv_pool_layout one = ri->layout;
    one.num_blocks = 1;
    o->bytes_per_block = kv_pool_layout_bytes(&one);
    o->pool_bytes = kv_pool_layout_bytes(&ri->layout);
    memcpy(o->terms, ri->terms, sizeof o->terms);
    if (e->dev)
        e->dev->ops->mem_info(e->dev, rank, &o->device_free_bytes, &o->device_total_bytes, NULL, 0);
    return 0;
}

const char *kv_engine_device_name(const kv_engine *e) { return e->dev ? e->dev->name : "none"; }

void kv_engine_get_metrics(const kv_engine *e, kv_engine_metrics *o)
{
    *o = e->m;
    o->kv_cache_usage_perc = kv_pool_usage(e->pool);
    o->num_requests_running = kv_sched_num_running(e->sched);
    o->num_requests_waiting = kv_sched_num_waiting(e->sched);
    o->prefix_cache_queries = e->kvcm.queries;
    o->prefix_cache_hits = e->kvcm.hits;
    o->preempted_prefix_cache_queries = e->kvcm.preempted_queries;
    o->preempted_prefix_cache_hits = e->kvcm.preempted_hits;
    kv_pool_stats ps;
    kv_pool_get_stats(e->pool, &ps);
    o->block_allocations += ps.allocations;
    o->block_frees += ps.frees;
    o->block_evictions += ps.evictions;
    int64_t reserved = 0, used = 0;
    for (int32_t k = 0; k < kv_sched_num_running(e->sched); k++) {
        const kv_req *r = kv_sched_running_at(e->sched, k);
        reserved += (int64_t)r->num_blocks * e->cfg.block_size;
        used += r->num_computed;
    }
    o->reserved_tokens = reserved;
    o->used_tokens = used;
    o->internal_fragmentation = reserved ? 1.0 - (double)used / (double)reserved : 0.0;
    o->mean_kv_usage = e->total_time > 0 ? e->usage_time / e->total_time : 0.0;
    o->mean_num_requests_waiting = e->total_time > 0 ? e->waiting_time / e->total_time : 0.0;
    o->mean_num_requests_running = e->total_time > 0 ? e->running_time / e->total_time : 0.0;
    o->busy_s = 0;
    kv_hist_stats(&e->hist[KV_HIST_TTFT], &o->ttft);
    kv_hist_stats(&e->hist[KV_HIST_ITL], &o->itl);
    kv_hist_stats(&e->hist[KV_HIST_E2E], &o->e2e);
    kv_hist_stats(&e->hist[KV_HIST_QUEUE], &o->queue);
}

size_t kv_engine_prometheus(const kv_engine *e, const char *model_name, char *buf, size_t len)
{
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    return kv_metrics_prometheus(&m, e->hist, KV_HIST_COUNT, model_name, buf, len);
}

int32_t kv_engine_timeline(const kv_engine *e, kv_timeline_sample *out, int32_t max)
{
    int64_t have = e->tl_n < (int64_t)e->tl_cap ? e->tl_n : (int64_t)e->tl_cap;
    int64_t n = have < max ? have : max;
    int64_t first = e->tl_n - n;
    for (int64_t i = 0; i < n; i++)
        out[i] = e->tl[(first + i) % e->tl_cap];
    return (int32_t)n;
}

int32_t kv_engine_events_since(const kv_engine *e, uint64_t since, kv_event *out, int32_t max)
{
    return kv_events_since(e->ev, since, out, max);
}

uint64_t kv_engine_last_event_seq(const kv_engine *e) { return kv_events_last(e->ev); }

/* ---- checks ------------------------------------------------------------ */

int kv_engine_check(const kv_engine *e, char *err, size_t errlen)
{
    char perr[256];
    if (kv_pool_check(e->pool, perr, sizeof perr) != 0)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "block pool: %s", perr);
    if (e->kvcm.hash_conflicts)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "%lld cached blocks were asked to carry a second hash",
                       (long long)e->kvcm.hash_conflicts);
    int32_t nb = e->cfg.num_blocks;
    memset(e->counts, 0, (size_t)nb * sizeof *e->counts);
    int32_t nrun = kv_sched_num_running(e->sched);
    for (int32_t k = 0; k < nrun; k++) {
        const kv_req *r = kv_sched_running_at(e->sched, k);
        if (r->status != KV_REQ_RUNNING)
            return kv_errf(err, errlen, KV_ENGINE_EINVAL, "request %lld in the running list with status %d",
                           (long long)r->id, r->status);
        if (e->cfg.mode != KV_MODE_NO_CACHE &&
            (int64_t)r->num_blocks * e->cfg.block_size < r->num_computed)
            return kv_errf(err, errlen, KV_ENGINE_EINVAL, "request %lld: %d computed tokens in %d blocks",
                           (long long)r->id, r->num_computed, r->num_blocks);
        for (int32_t i = 0; i < r->num_blocks; i++) {
            int32_t b = r->table[i];
            if (b <= 0 || b >= nb)
                return kv_errf(err, errlen, KV_ENGINE_EINVAL, "request %lld holds invalid block %d",
                               (long long)r->id, (int)b);
            e->counts[b]++;
        }
    }
    int32_t used = 0;
    for (int32_t b = 1; b < nb; b++) {
        const kv_block *blk = kv_pool_block(e->pool, b);
        if (blk->ref_cnt != e->counts[b])
            return kv_errf(err, errlen, KV_ENGINE_EINVAL, "block %d: ref_cnt %d but %d block tables hold it",
                           (int)b, (int)blk->ref_cnt, (int)e->counts[b]);
        if (blk->ref_cnt > 0)
            used++;
    }
    int32_t nfree = kv_pool_num_free(e->pool);
    if (nfree + used + 1 != nb)
        return kv_errf(err, errlen, KV_ENGINE_EINVAL, "free %d + used %d + null 1 != num_blocks %d", (int)nfree,
                       (int)used, (int)nb);
    /* waiting requests hold nothing */
    int32_t nw = kv_sched_num_waiting(e->sched);
    for (int32_t k = 0; k < nw; k++) {
        const kv_req *r = kv_sched_waiting_at(e->sched, k);
        if (r->status != KV_REQ_WAITING && r->status != KV_REQ_PREEMPTED)
            return kv_errf(err, errlen, KV_ENGINE_EINVAL, "request %lld in the waiting queue with status %d",
                           (long long)r->id, r->status);
        if (r->num_blocks != 0)
            return kv_errf(err, errlen, KV_ENGINE_EINVAL, "waiting request %lld holds %d blocks",
                           (long long)r->id, (int)r->num_blocks);
    }
    return 0;
}

int kv_engine_verify(kv_engine *e, char *err, size_t errlen)
{
    if (!e->write_kv || e->cfg.mode == KV_MODE_NO_CACHE)
        return 0;
    char derr[256];
    for (int32_t k = 0; k < kv_sched_num_running(e->sched); k++) {
        const kv_req *r = kv_sched_running_at(e->sched, k);
        int32_t n = r->num_computed;
        kv_req_tokens(r, 0, n, e->tokbuf);
        for (int32_t rank = 0; rank < e->cfg.tensor_parallel_size; rank++) {
            int64_t bad = 0;
            int rc = e->dev->ops->verify(e->dev, rank, r->table, r->num_blocks, e->tokbuf, n, &bad, derr,
                                         sizeof derr);
            if (rc)
                return kv_errf(err, errlen, KV_ENGINE_EDEVICE, "verify request %lld rank %d: %s", (long long)r->id,
                               (int)rank, derr);
            if (bad)
                return kv_errf(err, errlen, KV_ENGINE_EVERIFY,
                               "request %lld on rank %d: %lld K/V values differ from its own tokens "
                               "(%d tokens, %d blocks)",
                               (long long)r->id, (int)rank, (long long)bad, (int)n, (int)r->num_blocks);
        }
    }
    return 0;
}

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
    c->num_layers = p->num_layers;
    c->num_kv_heads = m->is_mla ? 1 : m->num_key_value_heads;
    c->head_size = p->head_size;
    c->kv_factor = p->kv_factor;
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
