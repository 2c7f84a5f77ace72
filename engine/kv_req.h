/* kv_req: one request (vllm/v1/request.py): its tokens, block table, block
 * hashes and scheduling state.
 *
 * Tokens are not stored unless given: a length-only prompt and every output
 * token are derived from seeds (kv_hash_mix), a shared prefix from the
 * prefix id, so 100k requests cost no token memory. block_hashes covers every
 * full block of prompt + output, updated when tokens are appended, as
 * vLLM's request block hasher does. */
#ifndef KV_REQ_H
#define KV_REQ_H

#include <stdint.h>

#include "kv_hash.h"

/* Fields each step reads come first (one cache line for the scheduler's
 * loops over hundreds of running requests), the rest after. */
typedef struct kv_req {
    int32_t num_computed;        /* num_computed_tokens */
    int32_t prompt_len;          /* whole prompt incl. prefix */
    int32_t num_output;          /* generated so far */
    int32_t max_output;          /* output_tokens asked for */
    int32_t scheduled;           /* tokens scheduled this step */
    int32_t sched_index;         /* position in the step's scheduled list, -1 = none */
    int32_t num_blocks;
    int32_t num_cached_blocks;   /* leading blocks registered in the prefix cache */
    int32_t *table;              /* block table */
    int64_t id;
    int status;                  /* kv_req_status (kv_engine.h) */
    int32_t num_hashes;
    kv_hash *hashes;             /* block_hashes */
    /* second cache line: timing and the rest */
    int32_t high_water;          /* most tokens ever computed (tells recompute apart) */
    int32_t table_cap;
    double first_token_s, last_token_s, first_sched_s, arrival_s;
    int32_t admit_hit;           /* prefix-hit tokens at its latest admission */
    int32_t num_preemptions;
    int32_t prefix_len;          /* shared prefix tokens (part of the prompt) */
    int32_t priority;
    int32_t num_cached_tokens;   /* prefix hit at first schedule, -1 before */
    int32_t hashes_cap;
    double finish_s;
    uint64_t prefix_seed, tok_seed;
    int has_salt;
    int32_t vocab;
    uint64_t salt;
    int32_t *prompt_ids;         /* explicit ids after the prefix, or NULL */
    int32_t prompt_ids_cap;
    int32_t reserved_blocks;     /* contiguous mode: slab size */
    int32_t num_verified;        /* engine read-back: tokens checked since verified_gen */
    int32_t verified_gen;        /* num_preemptions + 1 when num_verified was set; 0 = never */
    int32_t remote_prefill;      /* its prompt KV arrives at the first admission (kv_request_spec) */
    int32_t offload_next;        /* blocks offered to the host tier so far (kv_offload.h) */
    int32_t kv_lost;             /* admitted with computed tokens whose K/V this device lacks (a vLLM 0.11.0
                                    priority victim that kept its step; blocks loaded from the host tier or
                                    the prefill instance): the engine writes those K/V next */
    struct kv_req *next_free;    /* engine recycling list */
} kv_req;

/* Tokens in the request: prompt + generated. */
static inline int32_t kv_req_num_tokens(const kv_req *r) { return r->prompt_len + r->num_output; }

/* Token id at position pos (0 <= pos < num_tokens). */
int32_t kv_req_token(const kv_req *r, int32_t pos);

/* Fill out[0..n) with the tokens at positions [pos, pos + n). */
void kv_req_tokens(const kv_req *r, int32_t pos, int32_t n, int32_t *out);

/* Make sure table and hash arrays hold max_blocks without reallocating
 * later (so steps never allocate). Returns 0 or -1 on out of memory. */
int kv_req_reserve(kv_req *r, int32_t max_blocks);

/* Append the hashes of newly completed full blocks (prompt + output) so
 * hashes covers num_tokens / block_size blocks. none = NONE_HASH. */
void kv_req_update_hashes(kv_req *r, int32_t block_size, kv_hash none);

/* The same, up to at most nblocks blocks (a shared prefix's full blocks). */
void kv_req_hash_blocks(kv_req *r, int32_t nblocks, int32_t block_size, kv_hash none);

/* Zero a reused record for a new request, keeping its prompt_ids, table
 * and hashes arrays and their capacities (a reused record allocates
 * nothing it already has); sched_index = -1 (in no queue). */
void kv_req_clear(kv_req *r);

/* Free the arrays (the struct itself is the caller's). */
void kv_req_release(kv_req *r);

#endif
