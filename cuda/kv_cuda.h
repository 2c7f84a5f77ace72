/* kv_cuda: the CUDA device backend (tests/gpu/README.md says how it is
 * checked on a real card).
 *
 * Plain C header with no CUDA types. The backend is a kv_device_driver
 * (engine/kv_device.h): the program's registry (engine/kv_device_reg.c)
 * hands it to the device layer, which measures each card once per process
 * and opens devices through it; nothing else calls CUDA.
 *
 * A device holds, per tensor-parallel rank, what vLLM's worker would hold on
 * its GPU: one cudaMalloc per plan term (weights, activation peak,
 * CUDA-graph pool, NCCL buffers) as placeholders, and the KV pool as one
 * cudaMalloc laid out like vLLM's FlashAttention cache (cuda/kv_cuda_layout.h).
 * Ranks: with at least num_ranks visible devices, rank r uses device r
 * (cudaSetDevice per rank, as vLLM starts one worker per GPU); with fewer,
 * rank r uses device r % count and the pools sit side by side.
 * reserve("cuda_context", ...) is bookkeeping only: the real context already
 * holds that memory. With placeholders off every reserve() is bookkeeping.
 * Beside the plan each rank needs a 32 MiB scratch buffer (device copies of
 * slot writes, block tables, keys and token ids; larger work goes in
 * pieces): it lives inside the rank's "activation" placeholder when there is
 * one (the plan's activation term, working memory as in a real worker), else
 * in its own cudaMalloc made before the pool (the OOM line counts it in what
 * kvlab holds). alloc_pool tells the device's progress hook before a large
 * pool (kv_device_progress), hands out the pool's handle before clearing it,
 * and frees a pool it cannot clear.
 *
 * A card is measured when first used in a process: its context is created
 * (cudaFree(0) on the primary context, which then lives until the process
 * ends; the backend never resets a device), every kernel is loaded, and
 * NVML's used memory before and after is the context's size. A MIG slice
 * is read through its own NVML handle (found by UUID).
 *
 * Errors: every CUDA call is checked. An allocation the card cannot satisfy
 * returns KV_DEV_ENOMEM with a PyTorch-style "CUDA out of memory. Tried to
 * allocate ... (<allocation>, rank R)" line; a failed launch or kernel names
 * the rank, the GPU and the kernel. A failure in a call that returns nothing
 * (free, release) is reported by the next call that can. */
#ifndef KV_CUDA_H
#define KV_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kv_device.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The CUDA driver for the device layer (kv_device_driver_open and friends). */
const kv_device_driver *kv_cuda_driver(void);

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
    uint64_t total;          /* cudaMemGetInfo total (0: could not be read) */
    uint64_t free;           /* cudaMemGetInfo free after the failure */
    uint64_t held;           /* bytes kvlab already holds on that rank's card */
    int64_t context;         /* measured CUDA context, -1 unknown */
} kv_cuda_oom;

/* Writes the one-line OOM message in PyTorch's shape:
 * "CUDA out of memory. Tried to allocate 20.00 GiB (KV cache pool, rank 0).
 *  GPU 0 has a total capacity of 139.80 GiB of which 3.10 GiB is free. kvlab
 *  holds 120.00 GiB there plus a 512.00 MiB CUDA context." (under 256
 * characters for the usual figures). Returns buf. */
const char *kv_cuda_format_oom(char *buf, size_t len, const kv_cuda_oom *o);

/* The MIG profile in a CUDA or NVML device name ("NVIDIA A100-SXM4-40GB MIG
 * 1g.5gb" -> "1g.5gb") into out; 1 when the name is a MIG slice's, else 0
 * (out = ""). */
int kv_cuda_mig_profile(const char *device_name, char *out, size_t len);

/* DRAM peak in 1e9 B/s from the memory clock (kHz, as
 * cudaDevAttrMemoryClockRate) and bus width (bits): two transfers per clock
 * (HBM and GDDR report the clock that way). 0 when either is unknown. */
double kv_cuda_peak_gbps(double mem_clock_khz, double bus_bits);

/* The 16 bytes of a CUDA device UUID as nvidia-smi prints them, with the
 * prefix given ("GPU-" or "MIG-"): "GPU-6482a92e-d06b-dc68-c272-e3d8f7ecabbf". */
void kv_cuda_format_uuid(char *buf, size_t len, const char *prefix, const unsigned char bytes[16]);

/* Why no CUDA device opened, as cudaGetDeviceCount and the loader saw it. */
typedef struct kv_cuda_no_device {
    int code;                /* cudaGetDeviceCount's cudaError_t (0 = success, with count < 1) */
    const char *cuda_text;   /* cudaGetErrorString(code) */
    const char *libcuda;     /* NULL: libcuda.so.1 loads; else dlerror()'s text */
    int driver_version;      /* cudaDriverGetVersion: 12020 = CUDA 12.2, 0 = no driver */
    int runtime_version;     /* cudaRuntimeGetVersion: the runtime kvlab was built with */
} kv_cuda_no_device;

/* cudaError_t values the message tells apart (cuda/kv_cuda.cu asserts
 * them against driver_types.h). */
#define KV_CUDA_ERR_INSUFFICIENT_DRIVER 35 /* cudaErrorInsufficientDriver */
#define KV_CUDA_ERR_NO_DEVICE 100          /* cudaErrorNoDevice */

/* The one-line reason (kv_device_driver.count's err): "no NVIDIA driver
 * (libcuda.so.1 not found)" when the driver library cannot be loaded, which
 * the CUDA runtime reports as cudaErrorInsufficientDriver ("CUDA driver
 * version is insufficient for CUDA runtime version") although no driver is
 * there at all; "no CUDA device: the NVIDIA driver supports CUDA 12.2, older
 * than the CUDA 13.0 runtime kvlab was built with" for a real old driver;
 * else "no CUDA device: <CUDA's text>". Returns buf. */
const char *kv_cuda_format_no_device(char *buf, size_t len, const kv_cuda_no_device *w);

#ifdef __cplusplus
}
#endif

#endif
