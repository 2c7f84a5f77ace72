#include "kv_req.h"

#include <stdlib.h>
#include <string.h>

#define KV_REQ_OUTPUT_SALT 0xD1B54A32D192ED03ull

/* map 64 random bits onto [0, vocab) without a division */
static inline int32_t scale(uint64_t x, uint32_t vocab)
{
    return (int32_t)(((x >> 32) * (uint64_t)vocab) >> 32);
}

int32_t kv_req_token(const kv_req *r, int32_t pos)
{
    uint32_t vocab = (uint32_t)(r->vocab > 0 ? r->vocab : 32000);
    if (pos < r->prefix_len)
        return scale(kv_hash_mix(r->prefix_seed, (uint64_t)pos), vocab);
    if (pos < r->prompt_len) {
        if (r->prompt_ids)
            return r->prompt_ids[pos - r->prefix_len];
        return scale(kv_hash_mix(r->tok_seed, (uint64_t)pos), vocab);
    }
    return scale(kv_hash_mix(r->tok_seed ^ KV_REQ_OUTPUT_SALT, (uint64_t)pos), vocab);
}

void kv_req_tokens(const kv_req *r, int32_t pos, int32_t n, int32_t *out)
{
    /* three straight runs (prefix, prompt, output) instead of a branch per token */
    uint32_t vocab = (uint32_t)(r->vocab > 0 ? r->vocab : 32000);
    int32_t end = pos + n, i = 0;
    for (; pos < end && pos < r->prefix_len; pos++)
        out[i++] = scale(kv_hash_mix(r->prefix_seed, (uint64_t)pos), vocab);
    if (r->prompt_ids) {
        for (; pos < end && pos < r->prompt_len; pos++)
            out[i++] = r->prompt_ids[pos - r->prefix_len];
    } else {
        for (; pos < end && pos < r->prompt_len; pos++)
            out[i++] = scale(kv_hash_mix(r->tok_seed, (uint64_t)pos), vocab);
    }
    uint64_t os = r->tok_seed ^ KV_REQ_OUTPUT_SALT;
    for (; pos < end; pos++)
        out[i++] = scale(kv_hash_mix(os, (uint64_t)pos), vocab);
}

int kv_req_reserve(kv_req *r, int32_t max_blocks)
{
    if (max_blocks < 1)
        max_blocks = 1;
    if (r->table_cap < max_blocks) {
        int32_t *t = realloc(r->table, (size_t)max_blocks * sizeof *t);
        if (!t)
            return -1;
        r->table = t;
        r->table_cap = max_blocks;
    }
    if (r->hashes_cap < max_blocks) {
        kv_hash *h = realloc(r->hashes, (size_t)max_blocks * sizeof *h);
        if (!h)
            return -1;
        r->hashes = h;
        r->hashes_cap = max_blocks;
    }
    return 0;
}

void kv_req_update_hashes(kv_req *r, int32_t block_size, kv_hash none)
{
    kv_req_hash_blocks(r, kv_req_num_tokens(r) / block_size, block_size, none);
}

void kv_req_hash_blocks(kv_req *r, int32_t full, int32_t block_size, kv_hash none)
{
    if (full > kv_req_num_tokens(r) / block_size)
        full = kv_req_num_tokens(r) / block_size;
    if (full > r->hashes_cap)
        full = r->hashes_cap;
    int32_t tok[256];
    while (r->num_hashes < full) {
        int32_t i = r->num_hashes;
        kv_hash parent = i ? r->hashes[i - 1] : none;
        int has_extra = i == 0 && r->has_salt;
        int32_t start = i * block_size, end = start + block_size;
        /* A block of one seeded stream (all prefix, all of a length-only
         * prompt, or all output) is keyed by the stream and position: the
         * same tokens, without generating them. Two such blocks are equal
         * exactly when their tokens are (the streams differ by seed). */
        uint64_t seed = 0;
        int seeded = 1;
        if (end <= r->prefix_len)
            seed = r->prefix_seed;
        else if (start >= r->prefix_len && end <= r->prompt_len && !r->prompt_ids)
            seed = r->tok_seed;
        else if (start >= r->prompt_len)
            seed = r->tok_seed ^ KV_REQ_OUTPUT_SALT;
        else
            seeded = 0;
        if (seeded) {
            r->hashes[i] = kv_hash_seeded(parent, seed, (uint32_t)r->vocab, start, has_extra, r->salt);
        } else if (block_size <= 256) {
            kv_req_tokens(r, i * block_size, block_size, tok);
            r->hashes[i] = kv_hash_block(parent, tok, block_size, has_extra, r->salt);
        } else {
            /* big blocks: hash the parent with each 256-token piece in turn */
            kv_hash h = parent;
            for (int32_t off = 0; off < block_size; off += 256) {
                int32_t n = block_size - off < 256 ? block_size - off : 256;
                kv_req_tokens(r, i * block_size + off, n, tok);
                h = kv_hash_block(h, tok, n, has_extra && off == 0, r->salt);
            }
            r->hashes[i] = h;
        }
        r->num_hashes++;
    }
}

void kv_req_clear(kv_req *r)
{
    int32_t *ids = r->prompt_ids, *table = r->table;
    int32_t icap = r->prompt_ids_cap, tcap = r->table_cap, hcap = r->hashes_cap;
    kv_hash *hashes = r->hashes;
    memset(r, 0, sizeof *r);
    r->prompt_ids = ids;
    r->prompt_ids_cap = icap;
    r->table = table;
    r->table_cap = tcap;
    r->hashes = hashes;
    r->hashes_cap = hcap;
    r->sched_index = -1;
}

void kv_req_release(kv_req *r)
{
    free(r->prompt_ids);
    free(r->table);
    free(r->hashes);
    r->prompt_ids = NULL;
    r->table = NULL;
    r->hashes = NULL;
    r->prompt_ids_cap = r->table_cap = r->hashes_cap = 0;
}
