/* kv_kvcm: the KV cache manager (vllm/v1/core/kv_cache_manager.py with the
 * full-attention single-type manager and the unitary coordinator).
 *
 * Prefix-cache lookup (get_computed_blocks), allocate_slots, free and the
 * prefix-cache reset, over one kv_pool. Block tables live in the requests.
 * Modes: paged (vLLM), contiguous (a max_model_len slab of consecutive blocks
 * reserved at admission, no prefix caching) and no-cache (no blocks held). */
#ifndef KV_KVCM_H
#define KV_KVCM_H

#include <stddef.h>
#include <stdint.h>

#include "kv_pool.h"
#include "kv_req.h"

typedef struct kv_kvcm {
    kv_pool *pool;
    int32_t block_size;
    int32_t max_model_len;
    int mode;                     /* kv_engine_mode */
    int caching;                  /* prefix caching on (paged mode only) */
    kv_hash none_hash;            /* parent of every chain's first block */
    /* prefix cache stats in tokens (PrefixCacheStats.record) */
    int64_t queries, hits, preempted_queries, preempted_hits;
    int64_t hash_conflicts;       /* a held block carried a different hash than its position needs (a bug) */
    struct kv_offload *offload;   /* host tier (kv_offload.h), NULL = none: every block cache_blocks registers
                                     is offered to it (the OffloadingConnector's stores) */
} kv_kvcm;

/* Set up over pool (borrowed). mode is a kv_engine_mode; hash_seed gives
 * NONE_HASH (vLLM: PYTHONHASHSEED). */
void kv_kvcm_init(kv_kvcm *m, kv_pool *pool, int32_t block_size, int32_t max_model_len, int mode,
                  int enable_caching, uint64_t hash_seed);

/* Longest prefix-cache hit of r (find_longest_cache_hit): walks r's block
 * hashes from the start, at most (num_tokens - 1) / block_size blocks (the
 * last prompt token is always computed), stopping at the first miss. Writes
 * the hit block ids into out (room for num_tokens / block_size) and returns
 * their count; hit tokens = count x block_size. 0 when caching is off.
 * Changes neither ref counts nor stats. */
int32_t kv_kvcm_get_computed_blocks(kv_kvcm *m, const kv_req *r, int32_t *out);

/* Record one prefix-cache lookup in tokens (PrefixCacheStats.record):
 * queries += r's tokens, hits += hit_tokens, into the preempted_* counters
 * for a request that was preempted before. Called once per admission, after
 * allocate_slots succeeded, as current vLLM does (PR #48860: a request that
 * waits several steps is not counted several times). */
void kv_kvcm_record_stats(kv_kvcm *m, const kv_req *r, int32_t hit_tokens);

/* The same with the preempted split chosen by the caller: split 0 counts a
 * resumed request with the others (vLLM 0.11.0 and earlier had no split). */
void kv_kvcm_record_stats_split(kv_kvcm *m, const kv_req *r, int32_t hit_tokens, int split);

/* allocate_slots: make room for num_new_tokens more tokens of r after its
 * computed tokens and the n_hit prefix-hit blocks hit[0..n_hit) (only for a
 * request being admitted). Counts the hit blocks that are free (ref_cnt 0)
 * as taken from the free queue; if the free queue is too short, returns -1
 * with nothing changed. Otherwise touches the hits, appends them and fresh
 * blocks to r's table, registers newly full blocks in the prefix cache, and
 * returns the number of fresh blocks. num_new_tokens must be >= 1. */
int32_t kv_kvcm_allocate_slots(kv_kvcm *m, kv_req *r, int32_t num_new_tokens, const int32_t *hit, int32_t n_hit);

/* The same, leaving at least keep_free blocks in the free queue (the
 * admission watermark of vllm/v1/core/kv_cache_manager.py, 0.24 and later):
 * -1 with nothing changed when the allocation would dip below it. */
int32_t kv_kvcm_allocate_slots_keep(kv_kvcm *m, kv_req *r, int32_t num_new_tokens, const int32_t *hit,
                                    int32_t n_hit, int32_t keep_free);

/* Would r's whole sequence (min(num_tokens, max_model_len) tokens), after
 * the n_hit prefix-hit blocks, fit the free blocks with keep_free left over?
 * (allocate_slots' full_sequence_must_fit, scheduler_reserve_full_isl in
 * vllm/config/scheduler.py, 0.19 and later.) Paged mode only; 1 otherwise. */
int kv_kvcm_full_sequence_fits(const kv_kvcm *m, const kv_req *r, const int32_t *hit, int32_t n_hit,
                               int32_t keep_free);

/* The common decode step, decided without a call: r's next n tokens fit the
 * blocks it holds and fill none (so allocate_slots would change nothing and
 * return 0). Paged mode. */
static inline int kv_kvcm_fits_held(const kv_kvcm *m, const kv_req *r, int32_t n)
{
    int64_t end = (int64_t)r->num_computed + n;
    return m->mode == 0 && end <= (int64_t)r->num_blocks * m->block_size && end <= m->max_model_len &&
           (!m->caching || end / m->block_size <= r->num_cached_blocks);
}

/* Free all of r's blocks last-first (so its tail is evicted before its
 * prefix) and clear its table. */
void kv_kvcm_free(kv_kvcm *m, kv_req *r);

/* Blocks a request of max_tokens tokens can need at most in this mode
 * (paged: cdiv(min(max_tokens, max_model_len), block_size); contiguous: the
 * slab cdiv(max_model_len, block_size); no-cache: 0). */
int32_t kv_kvcm_max_blocks(const kv_kvcm *m, int32_t max_tokens);

#endif
