/* kv_torch_oom: torch's CUDA out-of-memory message (kv_torch_oom.h). */
#include "kv_torch_oom.h"

#include <stdio.h>

#include "kv_release.h"

/* The allocator setting torch's message names, by the vLLM release that
 * first pinned that torch (the wheel's Requires-Dist): torch 2.9 deprecated
 * PYTORCH_CUDA_ALLOC_CONF but its OOM text still names it (a vLLM 0.11.1
 * log on torch 2.9.0 does); the text names PYTORCH_ALLOC_CONF from torch
 * 2.10, which vLLM pins from 0.17.0 (0.16.0: torch 2.9.1). The H100 log
 * tests/vectors/logs/planner-0190-openai-gpt-oss-20b-*.FAILED.log of 0.19
 * shows the new name; 0.6-0.8 logs show the old one. */
static const struct {
    const char *since; /* vLLM release */
    const char *alloc_conf;
} TORCH_ROWS[] = {
    {"0.6.4", "PYTORCH_CUDA_ALLOC_CONF"}, /* torch 2.5.1 to 2.9.1 */
    {"0.17.0", "PYTORCH_ALLOC_CONF"},     /* torch 2.10 on */
};

void kv_torch_format_size(double b, char *out, size_t n)
{
    if (!(b > 0))
        b = 0;
    if (b <= 1024)
        snprintf(out, n, "%.0f bytes", b);
    else if (b <= 1048576.0)
        snprintf(out, n, "%.2f KiB", b / 1024.0);
    else if (b <= 1073741824.0)
        snprintf(out, n, "%.2f MiB", b / 1048576.0);
    else
        snprintf(out, n, "%.2f GiB", b / 1073741824.0);
}

int kv_torch_oom_text(const kv_torch_oom *o, const char *vllm_version, int brief, char *out, size_t n)
{
    char tried[32], total[32], freeb[32];
    kv_torch_format_size(o->tried, tried, sizeof tried);
    kv_torch_format_size(o->total, total, sizeof total);
    kv_torch_format_size(o->free, freeb, sizeof freeb);
    if (brief)
        return snprintf(out, n,
                        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %s. GPU 0 has a total "
                        "capacity of %s of which %s is free.",
                        tried, total, freeb);
    const char *conf = TORCH_ROWS[0].alloc_conf;
    const char *v = vllm_version && *vllm_version ? vllm_version : kv_release_newest()->first;
    for (size_t i = 0; i < sizeof TORCH_ROWS / sizeof TORCH_ROWS[0]; i++)
        if (kv_release_compare(v, TORCH_ROWS[i].since) >= 0)
            conf = TORCH_ROWS[i].alloc_conf;
    char proc[32], alloc[32], pools[32], unalloc[32], pools_clause[128] = "";
    kv_torch_format_size(o->process, proc, sizeof proc);
    kv_torch_format_size(o->allocated, alloc, sizeof alloc);
    kv_torch_format_size(o->reserved_unallocated, unalloc, sizeof unalloc);
    if (o->private_pools > 0) {
        kv_torch_format_size(o->private_pools, pools, sizeof pools);
        snprintf(pools_clause, sizeof pools_clause, ", with %s allocated in private pools (e.g., CUDA Graphs),", pools);
    }
    return snprintf(out, n,
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of "
                    "%s of which %s is free. Including non-PyTorch memory, this process has %s memory in use. Of the "
                    "allocated memory %s is allocated by PyTorch%s and %s is reserved by PyTorch but unallocated. If "
                    "reserved but unallocated memory is large try setting %s=expandable_segments:True to avoid "
                    "fragmentation.  See documentation for Memory Management  "
                    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
                    tried, total, freeb, proc, alloc, pools_clause[0] ? pools_clause : ",", unalloc, conf);
}
