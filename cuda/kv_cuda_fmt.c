/* kv_cuda_fmt: the CUDA backend's pure helpers (messages, rank mapping).
 * No CUDA here, so the unit tests build it on machines without a toolkit. */
#include <stdio.h>

#include "kv_cuda.h"

const char *kv_cuda_format_size(char *buf, size_t len, uint64_t bytes)
{
    /* Same thresholds as PyTorch: a unit is used up to and including 1024 of it. */
    if (bytes <= 1024ull)
        snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
    else if (bytes <= 1048576ull)
        snprintf(buf, len, "%.2f KiB", (double)bytes / 1024.0);
    else if (bytes <= 1073741824ull)
        snprintf(buf, len, "%.2f MiB", (double)bytes / 1048576.0);
    else
        snprintf(buf, len, "%.2f GiB", (double)bytes / 1073741824.0);
    return buf;
}

const char *kv_cuda_format_oom(char *buf, size_t len, const kv_cuda_oom *o)
{
    char tried[32], total[32], free_s[32], held[32], ctx[32];
    kv_cuda_format_size(tried, sizeof tried, o->tried);
    kv_cuda_format_size(total, sizeof total, o->total);
    kv_cuda_format_size(free_s, sizeof free_s, o->free);
    kv_cuda_format_size(held, sizeof held, o->held);
    if (o->context >= 0)
        kv_cuda_format_size(ctx, sizeof ctx, (uint64_t)o->context);
    snprintf(buf, len,
             "CUDA out of memory. Tried to allocate %s (%s, rank %d). GPU %d has a total capacity "
             "of %s of which %s is free. kvlab already holds %s on this GPU for rank %d%s%s%s. "
             "Lower --gpu-memory-utilization or --max-model-len, or free the card.",
             tried, o->what ? o->what : "allocation", o->rank, o->gpu, total, free_s, held,
             o->rank, o->context >= 0 ? " plus a " : "", o->context >= 0 ? ctx : "",
             o->context >= 0 ? " CUDA context" : "");
    return buf;
}

int kv_cuda_map_ranks(int num_ranks, int num_gpus, int *gpu_of_rank)
{
    if (num_ranks < 1 || num_gpus < 1) return -1;
    int shared = num_gpus < num_ranks;
    for (int r = 0; r < num_ranks; r++)
        gpu_of_rank[r] = shared ? 0 : r;
    return shared;
}
