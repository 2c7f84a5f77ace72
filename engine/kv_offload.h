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
 * vllm/v1/kv_offload/cpu/policies/lru.py behind cpu/manager.py.
 *
 * From 0.31 the LRU ranks keys instead (kv_offload_lru, a release-table row:
 * kv_release_memory.offload_lru): the connector's scheduler no longer
 * touches (offloading/scheduler.py lost _touch); the manager records which
 * keys each request accessed (cpu/manager.py _record_request_cache_access:
 * the keys it loads, and every key it offers to store, held or not) and,
 * when the request finishes (on_request_finished), gives them new ranks from
 * the tail to the head, the head most recent of all; a key stored for the
 * first time gets the newest rank (policies/lru.py insert). 0.33 adds a
 * provisional rank per request (lru.py _RequestRank): while the request
 * runs, the keys it stores or accesses rank (request's rank, -position), the
 * request's rank taken from the same counter when it first accesses a key,
 * so a running request's tail goes before its head and before any later
 * request's keys. Eviction takes the lowest rank first. vLLM signals the
 * finish at the next step's build_connector_meta; here it comes when the
 * engine frees the finished request. The differential test
 * tests/vllm/offload/ replays the same calls on a transcription of each
 * release's manager (and on vLLM's own classes when its source is there).
 *
 * Counters in tokens: vllm:external_prefix_cache_queries / _hits. The engine
 * calls it; it never prints and never exits. */
#ifndef KV_OFFLOAD_H
#define KV_OFFLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "kv_hash.h"

typedef struct kv_offload kv_offload;

/* How the host tier ranks its keys (kv_release_memory.offload_lru). */
typedef enum kv_offload_lru {
    KV_OFFLOAD_LRU_TOUCH = 0,   /* 0.11 - 0.30: an OrderedDict the connector touches */
    KV_OFFLOAD_LRU_FINISH,      /* 0.31 - 0.32: ranks on store and when a request finishes */
    KV_OFFLOAD_LRU_PROVISIONAL, /* 0.33 on: and a running request's provisional rank */
} kv_offload_lru;

/* Number of host blocks that --kv-offloading-size gib gives: floor(gib x
 * 2^30 / (tp x block_bytes_per_rank)) (cpu/spec.py: cpu_bytes_to_use //
 * kv_bytes_per_chunk, the chunk holding every rank's copy). 0 when gib <= 0
 * or the block has no bytes. */
int64_t kv_offload_num_blocks(double gib, int32_t tp, double block_bytes_per_rank);

/* A tier of capacity blocks (>= 1). protect_offer: a prepare_store never
 * evicts a key of its own offer (vLLM 0.18 on: lru_manager.py, then
 * cpu/policies/lru.py evict(protected); kv_release_memory.offload_protects_offer).
 * lru: the release's ranking (kv_offload_lru).
 * NULL on allocation failure, a capacity below 1 or an unknown lru. */
kv_offload *kv_offload_create(int64_t capacity, int protect_offer, kv_offload_lru lru);
void kv_offload_destroy(kv_offload *o);

/* LRUOffloadingManager.prepare_store of keys[0..n) in position order (then
 * complete_store), offered by request req_id, keys[0] at block position
 * first (0-based: the block index in the request): the keys not held are to
 * store; when they need more room than is free, that many lowest-ranked keys
 * are evicted, whichever they are (a held key of this very offer included:
 * it is not stored again); when fewer are held, nothing changes and -1 is
 * returned ("cannot store", counted in skipped_stores). With protect_offer
 * (0.18 on) the held keys of the offer are never evicted, and -1 comes when
 * the others are too few. Stored keys rank newest in offer order (0.33: at
 * the request's provisional rank, by position). From 0.31 every key of the
 * offer counts as accessed by the request, a refused offer too (recorded
 * before the allocation, cpu/manager.py prepare_store). Returns the number
 * stored (>= 0) or -1 (also when out of memory). */
int32_t kv_offload_prepare_store(kv_offload *o, int64_t req_id, const kv_hash *keys, int32_t first, int32_t n);

/* LRUOffloadingManager.lookup: how many of keys[0..n) are held, counted from
 * keys[0] until the first miss. Changes nothing. */
int32_t kv_offload_lookup(const kv_offload *o, const kv_hash *keys, int32_t n);

/* The policy's touch: the held keys of keys[0..n) get the newest ranks,
 * keys[0] the newest of all (walked in reverse; the same in every release). */
void kv_offload_touch(kv_offload *o, const kv_hash *keys, int32_t n);

/* The connector scheduler's _touch of keys[0..n) (every full block of a
 * request, on admission and after a store): kv_offload_touch up to 0.30;
 * from 0.31 the scheduler touches nothing (offloading/scheduler.py). */
void kv_offload_scheduler_touch(kv_offload *o, const kv_hash *keys, int32_t n);

/* prepare_load of keys[0..n) (held: a kv_offload_lookup hit) for request
 * req_id, keys[0] at block position first: from 0.31 they count as accessed
 * by the request (0.33: they rise to its provisional rank). Loads complete
 * at once, so nothing is pinned. */
void kv_offload_prepare_load(kv_offload *o, int64_t req_id, const kv_hash *keys, int32_t first, int32_t n);

/* on_request_finished of request req_id, whose blocks are keys[0..n) by
 * position: from 0.31 the keys it accessed that are still held get new
 * ranks from its tail to its head (the head newest); its record is dropped.
 * Before 0.31 nothing changes. A request with no record is a no-op. */
void kv_offload_request_finished(kv_offload *o, int64_t req_id, const kv_hash *keys, int32_t n);

/* The held keys from the lowest rank (least recently used) up into out[0..max).
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

/* ---- the whole state, for engine images (kv_snapshot.h) ---- */

/* One held key and its rank (kv_offload_lru: (major, minor), lowest first). */
typedef struct kv_offload_entry {
    kv_hash key;
    int64_t rank_major, rank_minor;
} kv_offload_entry;

/* One running request's record (from 0.31): its provisional rank (0 none)
 * and the block positions it accessed, seen[0..nseen) (1 = accessed). */
typedef struct kv_offload_rec {
    int64_t req_id, rank;
    int32_t nseen;
    const uint8_t *seen;
} kv_offload_rec;

/* The held keys from the lowest rank up into out[0..max); returns how many
 * are held. The rank counter into *next_rank. */
int64_t kv_offload_entries(const kv_offload *o, kv_offload_entry *out, int64_t max, int64_t *next_rank);

/* The request records, in no order, into out[0..max) (seen points into o:
 * valid until the next call that changes o); returns how many there are. */
int64_t kv_offload_recs(const kv_offload *o, kv_offload_rec *out, int64_t max);

/* Replace o's state: keys e[0..n) in rank order (strictly rising, distinct,
 * n <= capacity), the rank counter (>= every rank's major), the request
 * records r[0..nr) and the counters *st (capacity and used are o's own).
 * 0; -1 for a state o cannot hold (o is then empty) or out of memory. */
int kv_offload_restore(kv_offload *o, const kv_offload_entry *e, int64_t n, int64_t next_rank,
                       const kv_offload_rec *r, int64_t nr, const kv_offload_stats *st);

#endif
