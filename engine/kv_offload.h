/* kv_offload: a host-memory (CPU) tier behind the GPU block pool, with the
 * scheduler-side semantics of vLLM's native OffloadingConnector (vLLM 0.11.0
 * and later; --kv-offloading-size from 0.11.1):
 *   vllm/distributed/kv_transfer/kv_connector/v1/offloading_connector.py and
 *   .../v1/offloading/scheduler.py (get_num_new_matched_tokens, the stores
 *   of build_connector_meta), vllm/v1/kv_offload/cpu/manager.py
 *   (lookup, prepare_store, touch) and cpu/policies/lru.py (the default
 *   "lru" eviction policy), vllm/v1/kv_offload/cpu/spec.py (num_chunks),
 *   vllm/config/vllm.py (_post_init_kv_transfer_config: cpu_bytes_to_use =
 *   kv_offloading_size GiB x 2^30, summed over the tp ranks).
 *
 * What is modelled, per block of block_size tokens keyed by its chained
 * block hash (one offloaded chunk = one GPU block, vLLM's default):
 *  - store: every full block the GPU prefix cache registers is offered
 *    (prepare_store); a key already held is not stored again; when the tier
 *    is full the least recently used keys are evicted, never one of the keys
 *    offered in the same batch; a batch that cannot fit is skipped whole.
 *  - lookup on admission: the longest run of consecutive block hashes held
 *    in the tier right after the GPU prefix hit (a request always keeps its
 *    last prompt token to compute); the hits are touched (most recent), the
 *    first block of the run the most recent so tails are evicted first.
 *  - counters in tokens: queries (tokens beyond the GPU hit) and hits
 *    (tokens loaded), vllm:external_prefix_cache_queries / _hits.
 * Not modelled: loads are synchronous (vLLM's are asynchronous by default:
 * the request waits in WAITING_FOR_REMOTE_KVS a step or more), ARC and
 * store_threshold, offloaded blocks larger than a GPU block, the 0.33 LRU's
 * per-request ranks beyond "tails before heads", hybrid (sliding-window,
 * Mamba) groups. The engine calls it; it never prints and never exits. */
#ifndef KV_OFFLOAD_H
#define KV_OFFLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "kv_hash.h"

typedef struct kv_offload kv_offload;

/* Number of host blocks that --kv-offloading-size gib gives: floor(gib x
 * 2^30 / (tp x block_bytes_per_rank)) (cpu/spec.py: cpu_bytes_to_use //
 * kv_bytes_per_chunk, the chunk holding every rank's copy). 0 when gib <= 0
 * or the block has no bytes. */
int64_t kv_offload_num_blocks(double gib, int32_t tp, double block_bytes_per_rank);

/* A tier of capacity blocks (>= 1). NULL on allocation failure or a
 * capacity below 1. */
kv_offload *kv_offload_create(int64_t capacity);
void kv_offload_destroy(kv_offload *o);

/* Offer the n block hashes keys[0..n) of one request, in position order, for
 * storing (manager.prepare_store): the ones not held are inserted (the last
 * position first, so the first is the most recent), evicting LRU keys not in
 * this offer; if the tier cannot make room, nothing is stored. Returns the
 * number of blocks stored (their bytes move host-bound). */
int32_t kv_offload_store(kv_offload *o, const kv_hash *keys, int32_t n);

/* Longest run of keys[start..max_blocks) held in the tier, counted from
 * start; the hit keys are touched (manager.touch). Returns the run length in
 * blocks (0 when start >= max_blocks). */
int32_t kv_offload_lookup(kv_offload *o, const kv_hash *keys, int32_t start, int32_t max_blocks);

/* Record one admission (the scheduler's connector_prefix_cache_stats.record):
 * queries += query_tokens (the request's tokens beyond its GPU hit), hits +=
 * hit_tokens, loaded_blocks += hit_tokens / block_size by the caller. */
void kv_offload_record(kv_offload *o, int64_t query_tokens, int64_t hit_tokens, int32_t loaded_blocks);

typedef struct kv_offload_stats {
    int64_t capacity;        /* blocks the tier holds at most */
    int64_t used;            /* blocks held now */
    int64_t stored_blocks;   /* blocks copied GPU -> host */
    int64_t loaded_blocks;   /* blocks copied host -> GPU */
    int64_t evicted_blocks;  /* blocks dropped from the tier */
    int64_t skipped_stores;  /* offers skipped whole: no room */
    int64_t queries;         /* tokens (vllm:external_prefix_cache_queries) */
    int64_t hits;            /* tokens (vllm:external_prefix_cache_hits) */
} kv_offload_stats;

/* Counters so far (o may be NULL: all zero). */
void kv_offload_get_stats(const kv_offload *o, kv_offload_stats *out);

#endif
