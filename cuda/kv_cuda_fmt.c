/* kv_cuda_fmt: the CUDA backend's pure helpers (messages, names, figures).
 * No CUDA here, so the unit tests build it on machines without a toolkit. */
#include <stdio.h>
#include <string.h>

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
    /* Kept under 256 characters: callers pass one-line buffers of that size. */
    char tried[32], total[32], free_s[32], held[32], ctx[32];
    kv_cuda_format_size(tried, sizeof tried, o->tried);
    kv_cuda_format_size(total, sizeof total, o->total);
    kv_cuda_format_size(free_s, sizeof free_s, o->free);
    kv_cuda_format_size(held, sizeof held, o->held);
    if (o->context >= 0)
        kv_cuda_format_size(ctx, sizeof ctx, (uint64_t)o->context);
    snprintf(buf, len,
             "CUDA out of memory. Tried to allocate %s (%s, rank %d). GPU %d has a total capacity "
             "of %s of which %s is free. kvlab holds %s there%s%s%s.",
             tried, o->what ? o->what : "allocation", o->rank, o->gpu, total, free_s, held,
             o->context >= 0 ? " plus a " : "", o->context >= 0 ? ctx : "",
             o->context >= 0 ? " CUDA context" : "");
    return buf;
}

int kv_cuda_mig_profile(const char *name, char *out, size_t len)
{
    if (len)
        out[0] = '\0';
    for (const char *p = name; p && (p = strstr(p, "MIG")) != NULL; p += 3) {
        int word = (p == name || p[-1] == ' ' || p[-1] == '-') && (p[3] == ' ' || p[3] == '-');
        if (!word)
            continue;
        const char *q = p + 4;
        size_t n = 0;
        while (q[n] && q[n] != ' ' && q[n] != ')')
            n++;
        if (len)
            snprintf(out, len, "%.*s", (int)n, q);
        return 1;
    }
    return 0;
}

double kv_cuda_peak_gbps(double mem_clock_khz, double bus_bits)
{
    if (!(mem_clock_khz > 0) || !(bus_bits > 0))
        return 0;
    return 2.0 * mem_clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
}

void kv_cuda_format_uuid(char *buf, size_t len, const char *prefix, const unsigned char b[16])
{
    snprintf(buf, len, "%s%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", prefix, b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

const char *kv_cuda_format_no_device(char *buf, size_t len, const kv_cuda_no_device *w)
{
    if (w->libcuda) {
        /* The runtime's "driver version is insufficient" when there is no driver at all. */
        int missing = strstr(w->libcuda, "No such file") || strstr(w->libcuda, "cannot open shared object");
        if (missing)
            snprintf(buf, len, "no NVIDIA driver (libcuda.so.1 not found)");
        else
            snprintf(buf, len, "no NVIDIA driver (libcuda.so.1 does not load: %s)", w->libcuda);
    } else if (w->code == KV_CUDA_ERR_INSUFFICIENT_DRIVER && w->driver_version > 0 && w->runtime_version > 0) {
        snprintf(buf, len, "no CUDA device: the NVIDIA driver supports CUDA %d.%d, older than the CUDA %d.%d runtime "
                 "kvlab was built with (%s)", w->driver_version / 1000, w->driver_version % 1000 / 10,
                 w->runtime_version / 1000, w->runtime_version % 1000 / 10,
                 w->cuda_text ? w->cuda_text : "driver too old");
    } else if (w->code == 0 || w->code == KV_CUDA_ERR_NO_DEVICE) {
        snprintf(buf, len, "no CUDA device: no CUDA-capable device is detected (the NVIDIA driver is there; "
                 "see nvidia-smi and CUDA_VISIBLE_DEVICES)");
    } else {
        snprintf(buf, len, "no CUDA device: %s", w->cuda_text ? w->cuda_text : "unknown CUDA error");
    }
    return buf;
}
