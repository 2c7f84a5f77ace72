/* kv_pool: the block pool (vllm/v1/core/block_pool.py) and its free block
 * queue (vllm/v1/core/kv_cache_utils.py FreeKVCacheBlockQueue).
 *
 * num_blocks blocks; block 0 is the null block, popped at creation and never
 * freed, so num_blocks - 1 are usable. The free block queue is an intrusive
 * doubly linked list (O(1) removal from the middle when a prefix hit revives
 * a cached block). Allocation pops from the head. Freeing follows current
 * vLLM (after PR #42656): blocks that reach ref_cnt 0 without a hash go to
 * the head (reused first), blocks with a hash go to the tail (kept longest
 * for prefix hits); callers pass a request's blocks last-first so its tail is
 * evicted before its prefix. A cached block keeps its hash while free and is
 * only evicted (hash dropped) when popped for reuse. The hash -> block map
 * is an open-addressing table (linear probing, at most half full, sized at
 * creation: no allocation later); like vLLM it does not de-duplicate: two
 * blocks filled with the same content both stay cached under one hash, the
 * later ones chained behind the first. */
#ifndef KV_POOL_H
#define KV_POOL_H

#include <stddef.h>
#include <stdint.h>

#include "kv_hash.h"

/* 40 bytes: the pool walks these on every allocation and free. */
typedef struct kv_block {
    kv_hash hash;             /* valid when has_hash */
    int32_t block_id;
    int32_t ref_cnt;          /* requests holding it */
    int32_t prev_free;        /* free-queue links (block index; sentinels past the end) */
    int32_t next_free;
    int32_t dup_next;         /* next block cached under the same hash, -1 = none */
    uint8_t is_null;
    uint8_t has_hash;
    uint8_t in_free;          /* linked in the free queue */
    uint8_t in_map;           /* the block the map points at for its hash */
} kv_block;

/* Host bytes a pool of num_blocks takes (block records, map), for the
 * engine's memory estimate before it allocates. */
uint64_t kv_pool_host_bytes(int64_t num_blocks);

/* The free block queue over an array of blocks, with a fake head and tail
 * (indices n and n+1 of the array, which must hold n + 2 entries). */
typedef struct kv_pool_fq {
    kv_block *blocks;
    int32_t n;                /* real blocks */
    int32_t num_free;
} kv_pool_fq;

/* Build the queue over blocks[0..n) in id order (block ids 0..n-1 are
 * assigned here). blocks must have room for n + 2 entries. */
void kv_pool_fq_init(kv_pool_fq *q, kv_block *blocks, int32_t n);
/* Pop the head block id; -1 with "No free blocks available" in err when empty. */
int32_t kv_pool_fq_popleft(kv_pool_fq *q, char *err, size_t errlen);
/* Unlink block id from the middle; -1 with "remove() called on an invalid
 * block: ..." when it is not linked. */
int kv_pool_fq_remove(kv_pool_fq *q, int32_t id, char *err, size_t errlen);
/* Link block id at the tail (-1 if already linked). */
int kv_pool_fq_append(kv_pool_fq *q, int32_t id);
/* Link block id right after block `after` (-1 = at the head). */
void kv_pool_fq_insert_after(kv_pool_fq *q, int32_t after, int32_t id);
/* Head id, tail id (-1 when empty). */
int32_t kv_pool_fq_head(const kv_pool_fq *q);
int32_t kv_pool_fq_tail(const kv_pool_fq *q);
/* Queue ids head to tail into out[0..max); returns the queue length. */
int32_t kv_pool_fq_get_all(const kv_pool_fq *q, int32_t *out, int32_t max);

/* Event sink: type is a KV_EV_* of kv_engine.h (alloc, free, cache_hit,
 * evict, cache_store); value as documented there. */
typedef void (*kv_pool_event_fn)(void *ctx, int type, int32_t block_id, int64_t req_id, int64_t value);

typedef struct kv_pool kv_pool;

/* Create a pool of num_blocks (>= 1; block 0 becomes the null block).
 * enable_caching 0 = blocks are never hashed. NULL on bad arguments or
 * out of memory (message in err). */
kv_pool *kv_pool_create(int32_t num_blocks, int enable_caching, char *err, size_t errlen);
void kv_pool_destroy(kv_pool *p);
/* 1: every freed block goes to the tail of the free queue in the given
 * order (block_pool.py free_blocks before 0.24); 0 (default): blocks
 * without a hash go to the head. */
void kv_pool_set_free_to_tail(kv_pool *p, int on);
/* Route block events to fn(ctx, ...) (NULL = none). */
void kv_pool_set_event_sink(kv_pool *p, kv_pool_event_fn fn, void *ctx);

int32_t kv_pool_num_blocks(const kv_pool *p);
int kv_pool_caching(const kv_pool *p);
/* Blocks in the free queue, including cached-but-free ones (get_num_free_blocks). */
int32_t kv_pool_num_free(const kv_pool *p);
/* Blocks currently carrying a hash. */
int32_t kv_pool_num_hashed(const kv_pool *p);
/* 1 - free / (num_blocks - 1) (get_usage); 0 when only the null block exists. */
double kv_pool_usage(const kv_pool *p);
/* Read-only block by id (NULL when out of range). */
const kv_block *kv_pool_block(const kv_pool *p, int32_t id);
/* The free queue (read-only). */
const kv_pool_fq *kv_pool_queue(const kv_pool *p);

/* Pop n blocks from the head for req_id into out[0..n): each cached one is
 * evicted (hash dropped), each gets ref_cnt 1. -1 with "Cannot get n free
 * blocks from the pool" when n > free, nothing changed. */
int kv_pool_get_new_blocks(kv_pool *p, int32_t n, int32_t *out, int64_t req_id, char *err, size_t errlen);

/* Pop n blocks with consecutive ids (a contiguous slab, first fit from id 1)
 * for req_id into out; -1 when no run of n free blocks exists (the free
 * count may still be >= n: external fragmentation). O(num_blocks). */
int kv_pool_get_contiguous(kv_pool *p, int32_t n, int32_t *out, int64_t req_id);

/* A prefix hit: for each block, unlink it from the free queue if ref_cnt is
 * 0, then ref_cnt += 1 (BlockPool.touch). */
void kv_pool_touch(kv_pool *p, const int32_t *ids, int32_t n, int64_t req_id);

/* Drop one reference of each block, in the order given (callers pass a
 * request's blocks last-first). Blocks reaching 0: without a hash ->
 * inserted at the head in the given order; with a hash -> appended to the
 * tail (vllm/v1/core/block_pool.py free_blocks, 0.24 and later; with
 * kv_pool_set_free_to_tail every block goes to the tail, as before). The
 * null block is skipped. */
void kv_pool_free_blocks(kv_pool *p, const int32_t *ordered, int32_t n, int64_t req_id);

/* Register a full block under hash (cache_full_blocks). A block that already
 * has a hash keeps it (returns 1 if it differs: a bug). 0 when caching is off. */
int kv_pool_cache_block(kv_pool *p, int32_t id, kv_hash hash, int64_t req_id);

/* Start fetching the map slot of hash (a lookup or registration of it
 * follows soon); changes nothing. */
void kv_pool_prefetch_hash(const kv_pool *p, kv_hash hash);

/* The cached block for hash (the first registered), or -1. */
int32_t kv_pool_get_cached(const kv_pool *p, kv_hash hash);

/* reset_prefix_cache: only when every block but the null block is free;
 * then every hash is dropped. Returns 1 on success, 0 otherwise (*held =
 * number of blocks still held, when non-NULL). */
int kv_pool_reset_prefix_cache(kv_pool *p, int32_t *held);

/* Counters since creation. */
typedef struct kv_pool_stats {
    int64_t allocations;   /* blocks popped for a request */
    int64_t frees;         /* blocks that went back to the free queue */
    int64_t evictions;     /* cached blocks evicted when popped */
    int64_t hits;          /* touch() calls per block */
} kv_pool_stats;
void kv_pool_get_stats(const kv_pool *p, kv_pool_stats *out);

/* Restore a saved state (engine snapshots, kv_snapshot.c), in two calls:
 * kv_pool_restore_begin empties the pool (every block unhashed, unlinked,
 * ref_cnt 0, the map empty; block 0 stays the null block) and returns its
 * block records [0, num_blocks) for the caller to fill ref_cnt, has_hash,
 * hash, in_map and dup_next of; kv_pool_restore_end then links the free
 * queue in the order free_ids[0..nfree) (head to tail), sets the counters
 * to *stats, recounts the hashed blocks and rebuilds the map from the in_map
 * blocks. 0, or -1 with the first problem in err (the pool is then
 * inconsistent: restore again). It checks only what it links; the caller
 * runs kv_pool_check (or kv_engine_check) on the result. */
kv_block *kv_pool_restore_begin(kv_pool *p);
int kv_pool_restore_end(kv_pool *p, const int32_t *free_ids, int32_t nfree, const kv_pool_stats *stats, char *err,
                        size_t errlen);

/* Check the structure: queue links and count, ref_cnt 0 <=> in the queue
 * (null excepted), each hashed block reachable from the map exactly once.
 * Returns 0 or -1 with the first problem in err. O(num_blocks). */
int kv_pool_check(const kv_pool *p, char *err, size_t errlen);

#endif
