/* kv_engine_read.c: reading the engine's state for views and tests
 * (summaries, block and request snapshots, metrics, events) and the
 * invariant check and device read-back. */
#include "kv_engine_int.h"
#include "kv_offload.h"

#include <stdlib.h>
#include <string.h>

#include "kv_util.h"

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
    const kv_req *r = kv_eng_live_req(e, id);
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
    const kv_req *r = kv_eng_live_req(e, id);
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
    const kv_req *r = kv_eng_live_req(e, id);
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
    kv_offload_stats os;
    kv_offload_get_stats(e->kvcm.offload, &os);
    o->external_prefix_cache_queries = os.queries;
    o->external_prefix_cache_hits = os.hits;
    o->offload_stored_blocks = os.stored_blocks;
    o->offload_loaded_blocks = os.loaded_blocks;
    o->offload_evicted_blocks = os.evicted_blocks;
    o->offload_capacity_blocks = os.capacity;
    o->offload_used_blocks = os.used;
    o->offload_skipped_stores = os.skipped_stores;
    double block_bytes = (double)e->cfg.block_size * e->tparams.kv_bytes_per_token * e->cfg.tensor_parallel_size;
    o->offload_load_bytes = (int64_t)((double)os.loaded_blocks * block_bytes + 0.5);
    o->offload_store_bytes = (int64_t)((double)os.stored_blocks * block_bytes + 0.5);
    o->remote_prefill_tokens = kv_sched_remote_tokens(e->sched);
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

uint64_t kv_eng_block_key(const kv_engine *e, const kv_req *r, int32_t b)
{
    if (b == 0) {
        uint64_t root = e->kvcm.none_hash.lo ^ kv_mix64(e->kvcm.none_hash.hi);
        return r->has_salt ? kv_mix64(root ^ r->salt) : root;
    }
    if (b - 1 < r->num_hashes)
        return r->hashes[b - 1].lo ^ kv_mix64(r->hashes[b - 1].hi);
    return kv_mix64(0xB10C0000ull + (uint64_t)b); /* not reached: a block after a full one */
}

/* Reads positions [first, first + n) of r back on every rank. */
static int verify_range(kv_engine *e, const kv_req *r, int32_t first, int32_t n, char *err, size_t errlen)
{
    if (n <= 0)
        return 0;
    char derr[256];
    kv_req_tokens(r, first, n, e->tokbuf);
    for (int32_t b = 0; b < r->num_blocks; b++)
        e->keybuf[b] = kv_eng_block_key(e, r, b);
    const kv_verify_req v = {r->table, e->keybuf, r->num_blocks, e->tokbuf, first, n};
    for (int32_t rank = 0; rank < e->cfg.tensor_parallel_size; rank++) {
        int64_t bad = 0;
        int rc = e->dev->ops->verify(e->dev, rank, &v, &bad, derr, sizeof derr);
        if (rc)
            return kv_errf(err, errlen, KV_ENGINE_EDEVICE, "verify request %lld rank %d: %s", (long long)r->id,
                           (int)rank, derr);
        if (bad)
            return kv_errf(err, errlen, KV_ENGINE_EVERIFY,
                           "request %lld on rank %d: %lld K/V values differ from its own tokens "
                           "(positions %d..%d, %d blocks)",
                           (long long)r->id, (int)rank, (long long)bad, (int)first, (int)(first + n - 1),
                           (int)r->num_blocks);
    }
    return 0;
}

/* The per-step read-back: what changed this step, not everything (that is
 * quadratic over a run). For each running request: its tokens not checked
 * since it last got its blocks (new tokens, prefix-cache hits, a resumed
 * request's whole table), and its earlier tokens in any block another
 * request wrote this step (a shared or reused block overwritten). */
int kv_eng_verify_changed(kv_engine *e, char *err, size_t errlen)
{
    if (!e->write_kv)
        return 0;
    const int32_t bs = e->cfg.block_size;
    for (int32_t k = 0; k < kv_sched_num_running(e->sched); k++) {
        kv_req *r = kv_sched_running_at(e->sched, k);
        int32_t n = r->num_computed;
        int32_t start = r->verified_gen == r->num_preemptions + 1 ? r->num_verified : 0;
        if (start > n)
            start = 0;
        int32_t seen = (int32_t)kv_cdiv(start, bs);
        for (int32_t b = 0; b < seen && b < r->num_blocks; b++)
            if (e->dirty[r->table[b]] && e->dirty[r->table[b]] != r->id + 1) { /* someone else wrote it */
                start = b * bs;
                break;
            }
        int rc = verify_range(e, r, start, n - start, err, errlen);
        if (rc)
            return rc;
        r->num_verified = n;
        r->verified_gen = r->num_preemptions + 1;
    }
    return 0;
}

int kv_engine_verify(kv_engine *e, char *err, size_t errlen)
{
    if (!e->write_kv || e->cfg.mode == KV_MODE_NO_CACHE)
        return 0;
    for (int32_t k = 0; k < kv_sched_num_running(e->sched); k++) {
        const kv_req *r = kv_sched_running_at(e->sched, k);
        int rc = verify_range(e, r, 0, r->num_computed, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

int kv_engine_verify_sample(kv_engine *e, int32_t max_tokens, int64_t *checked, char *err, size_t errlen)
{
    if (checked)
        *checked = 0;
    if (!e->write_kv || e->cfg.mode == KV_MODE_NO_CACHE || max_tokens < 1)
        return 0;
    int32_t nrun = kv_sched_num_running(e->sched), left = max_tokens;
    for (int32_t visited = 0; visited <= nrun && left > 0 && nrun > 0; visited++) {
        if (e->sample_next >= nrun) {
            e->sample_next = 0;
            e->sample_pos = 0;
        }
        const kv_req *r = kv_sched_running_at(e->sched, (int32_t)e->sample_next);
        int32_t n = r->num_computed;
        if (e->sample_pos >= n) { /* this one is done (or shrank): the next request */
            e->sample_next++;
            e->sample_pos = 0;
            continue;
        }
        int32_t take = n - e->sample_pos < left ? n - e->sample_pos : left;
        int rc = verify_range(e, r, e->sample_pos, take, err, errlen);
        if (rc)
            return rc;
        e->sample_pos += take;
        left -= take;
        if (checked)
            *checked += take;
    }
    return 0;
}

double kv_engine_device_scale(const kv_engine *e) { return e->dev_scale > 0 ? e->dev_scale : 1.0; }

