#include "kv_kvcm.h"
#include "kv_offload.h"

#include "kv_engine.h"
#include "kv_util.h"

void kv_kvcm_init(kv_kvcm *m, kv_pool *pool, int32_t block_size, int32_t max_model_len, int mode,
                  int enable_caching, uint64_t hash_seed)
{
    m->none_hash = kv_hash_none(hash_seed);
    m->pool = pool;
    m->block_size = block_size;
    m->max_model_len = max_model_len;
    m->mode = mode;
    m->caching = enable_caching && mode == KV_MODE_PAGED && kv_pool_caching(pool);
    m->queries = m->hits = m->preempted_queries = m->preempted_hits = 0;
    m->hash_conflicts = 0;
    m->offload = NULL;
}

int32_t kv_kvcm_max_blocks(const kv_kvcm *m, int32_t max_tokens)
{
    if (m->mode == KV_MODE_NO_CACHE)
        return 0;
    if (m->mode == KV_MODE_CONTIGUOUS)
        return (int32_t)kv_cdiv(m->max_model_len, m->block_size);
    int32_t t = max_tokens < m->max_model_len ? max_tokens : m->max_model_len;
    return (int32_t)kv_cdiv(t, m->block_size);
}

int32_t kv_kvcm_get_computed_blocks(kv_kvcm *m, const kv_req *r, int32_t *out)
{
    if (!m->caching)
        return 0;
    int32_t num_tokens = kv_req_num_tokens(r);
    int32_t max_blocks = (num_tokens - 1) / m->block_size; /* last-token rule */
    if (max_blocks > r->num_hashes)
        max_blocks = r->num_hashes;
    int32_t n = 0;
    while (n < max_blocks) {
        if (n + 1 < max_blocks)
            kv_pool_prefetch_hash(m->pool, r->hashes[n + 1]);
        int32_t id = kv_pool_get_cached(m->pool, r->hashes[n]);
        if (id < 0)
            break;
        out[n++] = id;
    }
    return n;
}

void kv_kvcm_record_stats(kv_kvcm *m, const kv_req *r, int32_t hit_tokens)
{
    kv_kvcm_record_stats_split(m, r, hit_tokens, 1);
}

void kv_kvcm_record_stats_split(kv_kvcm *m, const kv_req *r, int32_t hit_tokens, int split)
{
    if (!m->caching)
        return;
    if (split && r->num_preemptions > 0) {
        m->preempted_queries += kv_req_num_tokens(r);
        m->preempted_hits += hit_tokens;
    } else {
        m->queries += kv_req_num_tokens(r);
        m->hits += hit_tokens;
    }
}

static void cache_blocks(kv_kvcm *m, kv_req *r, int32_t num_tokens)
{
    int32_t full = num_tokens / m->block_size;
    if (full > r->num_blocks)
        full = r->num_blocks;
    if (full > r->num_hashes)
        full = r->num_hashes;
    for (int32_t i = r->num_cached_blocks; i < full; i++) {
        if (i + 1 < full)
            kv_pool_prefetch_hash(m->pool, r->hashes[i + 1]);
        m->hash_conflicts += kv_pool_cache_block(m->pool, r->table[i], r->hashes[i], r->id);
    }
    if (full > r->num_cached_blocks)
        r->num_cached_blocks = full;
    /* the host tier (offloading_connector.py _get_reqs_to_store): the full
     * blocks not offered yet (from the first, GPU hits included); offered
     * again next step when it could not store them; when it stored some,
     * every full block of the request is touched (up to 0.30) */
    if (m->offload && full > r->offload_next) {
        int32_t stored = kv_offload_prepare_store(m->offload, r->id, r->hashes + r->offload_next, r->offload_next,
                                                  full - r->offload_next);
        if (stored >= 0)
            r->offload_next = full;
        if (stored > 0)
            kv_offload_scheduler_touch(m->offload, r->hashes, full);
    }
}

static int32_t evictable(const kv_kvcm *m, const int32_t *hit, int32_t n_hit)
{
    int32_t k = 0;
    for (int32_t i = 0; i < n_hit; i++) {
        const kv_block *b = kv_pool_block(m->pool, hit[i]);
        if (b->ref_cnt == 0 && !b->is_null)
            k++;
    }
    return k;
}

int kv_kvcm_full_sequence_fits(const kv_kvcm *m, const kv_req *r, const int32_t *hit, int32_t n_hit,
                               int32_t keep_free)
{
    if (m->mode != KV_MODE_PAGED)
        return 1;
    int32_t nt = kv_req_num_tokens(r);
    if (nt > m->max_model_len)
        nt = m->max_model_len;
    int32_t fresh = (int32_t)kv_cdiv(nt, m->block_size) - r->num_blocks - n_hit;
    if (fresh < 0)
        fresh = 0;
    return (int64_t)fresh + evictable(m, hit, n_hit) + keep_free <= kv_pool_num_free(m->pool);
}

int32_t kv_kvcm_allocate_slots(kv_kvcm *m, kv_req *r, int32_t num_new_tokens, const int32_t *hit, int32_t n_hit)
{
    return kv_kvcm_allocate_slots_keep(m, r, num_new_tokens, hit, n_hit, 0);
}

int32_t kv_kvcm_allocate_slots_keep(kv_kvcm *m, kv_req *r, int32_t num_new_tokens, const int32_t *hit,
                                    int32_t n_hit, int32_t keep_free)
{
    if (num_new_tokens < 1)
        return -1;
    if (m->mode == KV_MODE_NO_CACHE)
        return 0;
    if (m->mode == KV_MODE_CONTIGUOUS) {
        if (r->num_blocks > 0)
            return 0; /* the slab holds max_model_len tokens */
        int32_t need = (int32_t)kv_cdiv(m->max_model_len, m->block_size);
        if (need + keep_free > kv_pool_num_free(m->pool) ||
            kv_pool_get_contiguous(m->pool, need, r->table, r->id) != 0)
            return -1;
        r->num_blocks = need;
        r->reserved_blocks = need;
        return need;
    }
    int32_t bs = m->block_size;
    if (n_hit == 0 && keep_free == 0 && (int64_t)r->num_computed + num_new_tokens <= (int64_t)r->num_blocks * bs &&
        (int64_t)r->num_computed + num_new_tokens <= m->max_model_len) {
        /* the common decode step: the tokens fit the blocks already held;
         * only a block that fills up now has anything to register */
        if (m->caching && (r->num_computed + num_new_tokens) / bs > r->num_cached_blocks)
            cache_blocks(m, r, r->num_computed + num_new_tokens);
        return 0;
    }
    int64_t computed = (int64_t)r->num_computed + (int64_t)n_hit * bs;
    if (computed > m->max_model_len)
        computed = m->max_model_len;
    int64_t need_slots = computed + num_new_tokens;
    if (need_slots > m->max_model_len)
        need_slots = m->max_model_len;
    int32_t required = (int32_t)kv_cdiv(need_slots, bs);
    int32_t fresh = required - r->num_blocks - n_hit;
    if (fresh < 0)
        fresh = 0;
    if ((int64_t)fresh + evictable(m, hit, n_hit) + keep_free > kv_pool_num_free(m->pool))
        return -1;
    if (r->num_blocks + n_hit + fresh > r->table_cap)
        return -1; /* cannot happen: tables are reserved for the request's maximum */
    if (n_hit > 0) {
        kv_pool_touch(m->pool, hit, n_hit, r->id);
        for (int32_t i = 0; i < n_hit; i++)
            r->table[r->num_blocks + i] = hit[i];
        r->num_blocks += n_hit;
        r->num_cached_blocks = r->num_blocks;
    }
    if (fresh > 0) {
        kv_pool_get_new_blocks(m->pool, fresh, r->table + r->num_blocks, r->id, NULL, 0);
        r->num_blocks += fresh;
    }
    if (m->caching) {
        int64_t upto = computed + num_new_tokens;
        int32_t nt = kv_req_num_tokens(r);
        cache_blocks(m, r, (int32_t)(upto < nt ? upto : nt));
    }
    return fresh;
}

void kv_kvcm_free(kv_kvcm *m, kv_req *r)
{
    if (r->num_blocks > 0) {
        /* reverse in place, free, and forget: the table is cleared anyway */
        for (int32_t i = 0, j = r->num_blocks - 1; i < j; i++, j--) {
            int32_t t = r->table[i];
            r->table[i] = r->table[j];
            r->table[j] = t;
        }
        kv_pool_free_blocks(m->pool, r->table, r->num_blocks, r->id);
    }
    r->num_blocks = 0;
    r->num_cached_blocks = 0;
    r->reserved_blocks = 0;
}
