/* kv_torch_oom: the CUDA out-of-memory error of PyTorch's caching allocator
 * as the PyTorch of a vLLM release words it (c10/cuda/CUDACachingAllocator.cpp
 * of torch 2.5-2.9, the versions vLLM 0.6.4-0.33 pin), for the plan's failures
 * at a torch allocation: loading the weights, the profile run, the KV pool,
 * the warm-up. */
#ifndef KV_TORCH_OOM_H
#define KV_TORCH_OOM_H

#include <stddef.h>

/* One failing allocation, in bytes. */
typedef struct kv_torch_oom {
    double tried;                /* the allocation that failed ("Tried to allocate") */
    double total;                /* the card's total capacity (torch's total_memory) */
    double free;                 /* free on the card at that moment (cudaMemGetInfo) */
    double process;              /* this process's memory in use, non-PyTorch memory included */
    double allocated;            /* allocated by PyTorch */
    double private_pools;        /* in private pools (CUDA graphs); 0 leaves the clause out, as torch does */
    double reserved_unallocated; /* reserved by PyTorch but unallocated */
} kv_torch_oom;

/* torch's format_size: "512 bytes", "1.50 KiB", "896.00 MiB", "131.42 GiB"
 * (two decimals; up to 1024 bytes in bytes, up to 1 MiB in KiB, up to 1 GiB
 * in MiB). Negative sizes print as 0 bytes. */
void kv_torch_format_size(double bytes, char *out, size_t n);

/* The whole message of the exception (the class first:
 * "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ... See
 * documentation for Memory Management  (https://...)") with the allocator
 * setting the release's torch names (PYTORCH_CUDA_ALLOC_CONF up to vLLM
 * 0.16.0's torch 2.9.1, PYTORCH_ALLOC_CONF from 0.17.0's torch 2.10: the table
 * in kv_torch_oom.c). vllm_version "" or NULL is the newest. brief = 1 stops
 * after "... of which F is free." (the error line kvlab shows; the log gets
 * the whole text). Returns snprintf's count. */
int kv_torch_oom_text(const kv_torch_oom *o, const char *vllm_version, int brief, char *out, size_t n);

#endif
