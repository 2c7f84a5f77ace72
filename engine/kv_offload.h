/* kv_offload: a host-memory (CPU) tier behind the GPU block pool, with the
 * scheduler-side semantics of vLLM's native OffloadingConnector and its LRU
 * manager as vLLM 0.11.0 - 0.30.x have them (--kv-offloading-size from
 * 0.11.1): vllm/v1/kv_offload/lru_manager.py LRUOffloadingManager (lookup,
 * touch, prepare_store, complete_store over an OrderedDict), called as
 * distributed/kv_transfer/kv_connector/v1/offloading_connector.py calls it
 * (get_num_new_matched_tokens: touch every full block of the request, then
 * lookup after the GPU hit; _get_reqs_to_store: prepare_store of the blocks
 * not offered yet, then touch every full block when something was stored);
 * its size from vllm/v1/kv_offload/cpu.py (num_cpu_blocks, from 0.14
 * cpu_bytes_to_use // the bytes of one block over the tp ranks) and
 * vllm/config/vllm.py (--kv-offloading-size GiB x 2^30).
 *
 * One offloaded block = one GPU block of block_size tokens, keyed by its
 * chained block hash (vLLM's default block size). Stores and loads complete
 * at once (vLLM's complete_store / complete_load come a step or more later;
 * until then a stored block cannot be hit or evicted and a loading one
 * cannot be evicted). 0.18 keeps an offer's own held keys from eviction
 * (protect_offer); 0.19 - 0.30 have the same OrderedDict LRU as
 * vllm/v1/kv_offload/cpu/policies/lru.py behind cpu/manager.py. From 0.31 the
 * LRU ranks keys per request and refreshes them when a request finishes:
 * not modelled, those releases run the 0.30 rules. The differential
 * test tests/vllm/offload/ replays the same operations on a transcription of
 * that manager (and on vLLM's own class when a vLLM venv is there).
 * Counters in tokens: vllm:external_prefix_cache_queries / _hits. The engine
 * calls it; it never prints and never exits. */
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

/* A tier of capacity blocks (>= 1). protect_offer: a prepare_store never
 * evicts a key of its own offer (vLLM 0.18 on: lru_manager.py, then
 * cpu/policies/lru.py evict(protected); kv_release_memory.offload_protects_offer).
 * NULL on allocation failure or a capacity below 1. */
kv_offload *kv_offload_create(int64_t capacity, int protect_offer);
void kv_offload_destroy(kv_offload *o);

/* LRUOffloadingManager.prepare_store of keys[0..n) in position order (then
 * complete_store): the keys not held are to store; when they need more room
 * than is free, that many least recently used keys are evicted, whichever
 * they are (a held key of this very offer included: it is not stored
 * again); when fewer are held, nothing changes and -1 is returned ("cannot
 * store", counted in skipped_stores). The keys to store go in at the most
 * recent end in offer order. With protect_offer (0.18 on) the held keys of
 * the offer are never evicted, and -1 comes when the others are too few.
 * Returns the number stored (>= 0) or -1. */
int32_t kv_offload_prepare_store(kv_offload *o, const kv_hash *keys, int32_t n);

/* LRUOffloadingManager.lookup: how many of keys[0..n) are held, counted from
 * keys[0] until the first miss. Changes nothing. */
int32_t kv_offload_lookup(const kv_offload *o, const kv_hash *keys, int32_t n);

/* LRUOffloadingManager.touch: the held keys of keys[0..n) become the most
 * recently used, keys[0] the most recent of all (walked in reverse). */
void kv_offload_touch(kv_offload *o, const kv_hash *keys, int32_t n);

/* The held keys from least to most recently used into out[0..max).
 * Returns how many are held (may exceed max). For tests and views. */
int32_t kv_offload_keys(const kv_offload *o, kv_hash *out, int32_t max);

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
