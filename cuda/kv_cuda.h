/* kv_cuda: the CUDA device backend (DESIGN.md, "Device backends"; issue #4).
 *
 * Plain C header with no CUDA types, so tui/ can call it. The backend holds,
 * per tensor-parallel rank, what vLLM's worker would hold on its GPU: one
 * cudaMalloc per plan term (weights, activation peak, CUDA-graph pool, NCCL
 * buffers) as placeholders, and the KV pool as one cudaMalloc laid out like
 * vLLM's FlashAttention cache: per layer [2][num_blocks][block_size]
 * [num_kv_heads][head_size] (vllm/v1/attention/backends/flash_attn.py,
 * get_kv_cache_shape), so slot s of layer l is row s of that layer's K and V.
 *
 * Ranks: with at least num_ranks visible devices, rank r uses device r
 * (cudaSetDevice per rank, as vLLM starts one worker per GPU); with fewer,
 * rank r uses device r % count and the pools sit side by side (on device 0
 * when there is one GPU).
 *
 * reserve("cuda_context", ...) is bookkeeping only: the real context already
 * holds that memory. With placeholders off every reserve() is bookkeeping.
 *
 * Errors: functions return KV_DEV_* codes (engine/kv_device.h) and write one
 * line into err. An allocation the card cannot satisfy returns KV_DEV_ENOMEM
 * with a PyTorch-style "CUDA out of memory. Tried to allocate ..." line. */
#ifndef KV_CUDA_H
#define KV_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kv_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the backend measured about one GPU. */
typedef struct kv_cuda_gpu_info {
    int device;                 /* CUDA ordinal */
    char name[256];             /* cudaDeviceProp.name, e.g. "NVIDIA H200" */
    char pci_bus_id[32];
    int cc_major, cc_minor;     /* compute capability */
    int sm_count;
    uint64_t total_bytes;       /* cudaMemGetInfo total (what PyTorch/vLLM call total) */
    uint64_t free_at_open;      /* cudaMemGetInfo free right after the context was created */
    /* The CUDA context: device memory the process held after creating its
     * context minus before, read with NVML (which needs no context) since
     * cudaMemGetInfo itself creates one. -1 when it could not be measured;
     * context_how says how or why not. */
    int64_t context_bytes;
    char context_how[160];
} kv_cuda_gpu_info;

/* Opens the backend for num_ranks (1..64) tensor-parallel ranks: counts the
 * devices, creates a context on each device used, and measures it. Returns
 * NULL with err = "no CUDA device: <reason>" when there is no usable driver
 * or device (the caller then uses the host backend), or another one-line
 * reason. Placeholders are on by default. */
kv_device *kv_cuda_open(int num_ranks, char *err, size_t errlen);

/* True when d is a CUDA backend made by kv_cuda_open. */
int kv_cuda_is(const kv_device *d);

/* Placeholders on (1) or off (0): off keeps the reserve() figures as
 * bookkeeping only, for a card shared with other users (--no-placeholders).
 * Takes effect for later reserve() calls. */
void kv_cuda_set_placeholders(kv_device *d, int on);

/* CUDA ordinal that serves rank r, or -1 if r is out of range. */
int kv_cuda_rank_gpu(const kv_device *d, int rank);

/* 1 when several ranks share one device (fewer devices than ranks). */
int kv_cuda_ranks_share_card(const kv_device *d);

/* Copies what was measured about rank r's device at open into *out. */
int kv_cuda_info(const kv_device *d, int rank, kv_cuda_gpu_info *out, char *err, size_t errlen);

/* Bytes this backend holds on rank r's behalf (placeholders + pool). */
uint64_t kv_cuda_held_bytes(const kv_device *d, int rank);

/* Milliseconds the last alloc_pool on rank r spent in cudaMalloc (the
 * one allocation; clearing it is timed separately), or -1 if none. */
double kv_cuda_pool_alloc_ms(const kv_device *d, int rank);

/* Bandwidth of the write kernel: writes K/V for num_tokens slots 0..n-1 of
 * rank r's pool (n <= num_blocks x block_size) `repeats` times and keeps the
 * fastest run. *bytes = bytes one run stores, *ms its time, *gbps = bytes /
 * time in 1e9 bytes/s (the unit datasheets use). */
int kv_cuda_bench_write(kv_device *d, int rank, int32_t num_tokens, int repeats,
                        double *gbps, double *ms, uint64_t *bytes, char *err, size_t errlen);

/* Bandwidth of the gather-verify kernel (a paged read through a block table
 * of the first num_tokens slots, as a decode step reads its context): same
 * units as kv_cuda_bench_write; *mismatches as in verify(). */
int kv_cuda_bench_gather(kv_device *d, int rank, int32_t num_tokens, int repeats,
                         double *gbps, double *ms, uint64_t *bytes, int64_t *mismatches,
                         char *err, size_t errlen);

/* ---- pure helpers (kv_cuda_fmt.c; no CUDA, unit-tested without a GPU) ---- */

/* A byte count the way PyTorch's allocator prints it (format_size in
 * c10/cuda/CUDACachingAllocator.cpp): "512 bytes", "3.50 KiB", "20.00 MiB",
 * "1.25 GiB". Returns buf. */
const char *kv_cuda_format_size(char *buf, size_t len, uint64_t bytes);

/* What an out-of-memory report needs. */
typedef struct kv_cuda_oom {
    const char *what;        /* "KV cache pool", "weights placeholder", ... */
    int rank;
    int gpu;                 /* CUDA ordinal */
    uint64_t tried;          /* the allocation that failed */
    uint64_t total;          /* cudaMemGetInfo total */
    uint64_t free;           /* cudaMemGetInfo free after the failure */
    uint64_t held;           /* bytes kvlab already holds on that rank */
    int64_t context;         /* measured CUDA context, -1 unknown */
} kv_cuda_oom;

/* Writes the one-line OOM message in PyTorch's shape:
 * "CUDA out of memory. Tried to allocate 20.00 GiB (KV cache pool, rank 0).
 *  GPU 0 has a total capacity of 139.80 GiB of which 3.10 GiB is free. kvlab
 *  holds 120.00 GiB there plus a 512.00 MiB CUDA context." (under 256
 * characters for the usual figures). Returns buf. */
const char *kv_cuda_format_oom(char *buf, size_t len, const kv_cuda_oom *o);

/* Maps num_ranks ranks onto num_gpus devices: gpu_of_rank[r] = r % num_gpus,
 * so each rank has its own device when there are enough, and otherwise the
 * pools sit side by side (all on device 0 with one GPU). Returns 1 when ranks
 * share a device, 0 when each has its own, -1 on bad input (num_ranks < 1 or
 * num_gpus < 1). */
int kv_cuda_map_ranks(int num_ranks, int num_gpus, int *gpu_of_rank);

struct kv_gpu;
struct kv_gpu_catalog;

/* The catalogue entry (engine/kv_gpu.h) that a real device is: the id's
 * first word ("h100", "rtx6000", "gh200") must appear in the device name
 * with spaces, dashes and "NVIDIA"/"GeForce" ignored; the longest such word
 * wins, then the most other id words found ("pcie", "nvl", "ada"), then the
 * reported total closest to total_bytes. NULL when nothing matches. */
const struct kv_gpu *kv_cuda_match_catalog(const struct kv_gpu_catalog *cat, const char *device_name,
                                           double total_bytes);

#ifdef __cplusplus
}
#endif

#endif
