/* kv_hash: chained block hashes for prefix caching (vLLM
 * vllm/v1/core/kv_cache_utils.py hash_block_tokens, with the xxh3-128 hash
 * that vLLM offers as --prefix-caching-hash-algo xxhash).
 *
 * hash(block i) = xxh3_128(parent hash || token ids of the block || extra
 * keys), parent = hash(block i-1) or NONE_HASH for block 0, so a block's hash
 * covers its whole prefix. Extra keys (a cache salt) enter the first block
 * only, like vLLM's cache_salt. Also the deterministic token-id generator the
 * engine uses for length-only prompts and outputs. */
#ifndef KV_HASH_H
#define KV_HASH_H

#include <stdint.h>

typedef struct kv_hash {
    uint64_t lo, hi;
} kv_hash;

/* NONE_HASH for a seed: the parent of every chain's first block. vLLM uses
 * hash(PYTHONHASHSEED) when the seed is set; so does this (xxh3-128 of it). */
kv_hash kv_hash_none(uint64_t seed);

/* Hash of one full block: parent, n token ids, and (when has_extra) one
 * 64-bit extra key. n may be any size (block_size tokens). */
kv_hash kv_hash_block(kv_hash parent, const int32_t *tokens, int32_t n, int has_extra, uint64_t extra);

/* Hash of one full block whose tokens are the seeded stream `seed` (token
 * at position p = vocab-scaled kv_hash_mix(seed, p)) from position start:
 * keyed by (parent, seed, vocab, start) instead of the generated ids, so
 * equal keys mean equal tokens. A tag keeps it apart from kv_hash_block. */
kv_hash kv_hash_seeded(kv_hash parent, uint64_t seed, uint32_t vocab, int32_t start, int has_extra,
                       uint64_t extra);

/* 64-bit hash of a string (prefix ids, cache salts). */
uint64_t kv_hash_str(const char *s);

/* 1 when a and b are the same hash. */
static inline int kv_hash_eq(kv_hash a, kv_hash b) { return a.lo == b.lo && a.hi == b.hi; }

/* Deterministic 64-bit mix of (seed, i) (splitmix64 finaliser), used to
 * derive token ids: same seed and index give the same id. */
static inline uint64_t kv_hash_mix(uint64_t seed, uint64_t i)
{
    uint64_t x = seed + 0x9E3779B97F4A7C15ull * (i + 1);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

#endif
