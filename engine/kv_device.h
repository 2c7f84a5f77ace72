/* kv_device: the device interface (DESIGN.md, "Device backends").
 *
 * A backend holds, per tensor-parallel rank, the memory vLLM would hold on
 * that GPU: placeholders for each non-KV plan term and the KV pool itself.
 * The pool layout mirrors vLLM (vllm/v1/kv_cache_interface.py,
 * vllm/v1/worker/gpu_model_runner.py): per layer one tensor of
 * num_blocks pages; a page is block_size x num_kv_heads x head_size values for
 * K and the same for V. Block id b means slot range [b*block_size,
 * (b+1)*block_size) in every layer ("one block table for all layers").
 *
 * Two backends implement it: the host backend (engine/kv_device_host.c)
 * keeps one fingerprint per slot and touches only pages it writes; the CUDA
 * backend (cuda/) cudaMallocs the real pool and writes real K/V values.
 * Functions return 0 on success or a negative KV_DEV_E* code and fill err
 * (if non-NULL) with one line the caller can show. */
#ifndef KV_DEVICE_H
#define KV_DEVICE_H

#include <stddef.h>
#include <stdint.h>

/* Lets cuda/ call the inline helpers below from kernels; plain C sees nothing. */
#ifdef __CUDACC__
#define KV_HOST_DEVICE __host__ __device__
#else
#define KV_HOST_DEVICE
#endif

enum {
    KV_DEV_OK = 0,
    KV_DEV_EINVAL = -1,   /* bad argument (rank out of range, slot past the pool) */
    KV_DEV_ENOMEM = -2,   /* allocation failed: a real out-of-memory */
    KV_DEV_EDEVICE = -3,  /* driver or kernel error */
};

/* What a rank's KV pool looks like. Sizes are per rank (this GPU's share). */
typedef struct kv_pool_layout {
    int32_t num_blocks;      /* includes the null block 0 */
    int32_t block_size;      /* tokens per block (vLLM default 16) */
    int32_t num_layers;      /* attention layers holding KV on this rank */
    int32_t num_kv_heads;    /* KV heads on this rank: max(1, kv_heads // tp); 1 for MLA */
    int32_t head_size;       /* values per head (MLA: kv_lora_rank + qk_rope_head_dim) */
    int32_t kv_factor;       /* 2 = separate K and V; 1 = MLA latent */
    int32_t cache_dtype;     /* KV_DTYPE_* below */
} kv_pool_layout;

enum { KV_DTYPE_BF16 = 0, KV_DTYPE_FP16 = 1, KV_DTYPE_FP8_E4M3 = 2, KV_DTYPE_FP32 = 3 };

/* Bytes per value of a KV_DTYPE_*: 2, 2, 1, 4. */
static inline KV_HOST_DEVICE int kv_dtype_bytes(int dtype)
{
    return dtype == KV_DTYPE_FP8_E4M3 ? 1 : dtype == KV_DTYPE_FP32 ? 4 : 2;
}

/* Bytes of one rank's whole pool: num_blocks x layers x kv_factor x
 * block_size x heads x head_size x dtype bytes. */
static inline uint64_t kv_pool_layout_bytes(const kv_pool_layout *l)
{
    return (uint64_t)l->num_blocks * (uint64_t)l->num_layers * (uint64_t)l->kv_factor *
           (uint64_t)l->block_size * (uint64_t)l->num_kv_heads * (uint64_t)l->head_size *
           (uint64_t)kv_dtype_bytes(l->cache_dtype);
}

/* One token's K/V to write: its slot (block_id * block_size + offset),
 * the token id and its position in the sequence. */
typedef struct kv_slot_write {
    int64_t slot;
    int32_t token_id;
    int32_t position;
} kv_slot_write;

/* The deterministic value a token's K/V has at (layer, kv head): both
 * backends derive what they store from it, so a block shared by two requests
 * is provably the same bytes and a read-back can be checked. splitmix64-style
 * mixing; the same in C and CUDA. */
static inline KV_HOST_DEVICE uint64_t kv_fingerprint(int32_t token_id, int32_t position, int32_t layer, int32_t head)
{
    uint64_t x = ((uint64_t)(uint32_t)token_id << 32) ^ (uint64_t)(uint32_t)position;
    x ^= ((uint64_t)(uint32_t)layer << 48) ^ ((uint64_t)(uint32_t)head << 40) ^ 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

typedef struct kv_device kv_device;

typedef struct kv_device_ops {
    /* Total and free memory of the rank's device in bytes (host: the
     * simulated card's figures as given at open). */
    int (*mem_info)(kv_device *d, int rank, uint64_t *free_bytes, uint64_t *total_bytes,
                    char *err, size_t errlen);
    /* Hold bytes for a named non-KV plan term ("weights", "activation",
     * "cudagraph", "nccl") on a rank, so the process holds what vLLM would.
     * KV_DEV_ENOMEM when the device cannot give it. */
    int (*reserve)(kv_device *d, int rank, const char *term, uint64_t bytes,
                   char *err, size_t errlen);
    /* Allocate a rank's KV pool with the given layout (replaces any earlier pool). */
    int (*alloc_pool)(kv_device *d, int rank, const kv_pool_layout *layout,
                      char *err, size_t errlen);
    /* Write K/V for n tokens into their slots, every layer and KV head of the rank. */
    int (*write_kv)(kv_device *d, int rank, const kv_slot_write *w, size_t n,
                    char *err, size_t errlen);
    /* Read a request's first num_tokens tokens through its block table and
     * compare with what token_ids[i] at position i must hold; *mismatches =
     * number of (token, layer, head) values that differ (0 = correct). */
    int (*verify)(kv_device *d, int rank, const int32_t *block_table, int32_t num_table_blocks,
                  const int32_t *token_ids, int32_t num_tokens, int64_t *mismatches,
                  char *err, size_t errlen);
    /* Free everything held on all ranks (pool and placeholders). */
    void (*release)(kv_device *d);
    /* Free the backend itself (after release). */
    void (*destroy)(kv_device *d);
} kv_device_ops;

/* A backend instance: ops, a name for the screen ("host", "cuda"), the number
 * of ranks it serves and backend-private state. */
struct kv_device {
    const kv_device_ops *ops;
    const char *name;
    int num_ranks;
    void *impl;
};

#endif
