/* kvlab probe: what the CUDA backend measures on this machine (issue #4,
 * item 6): the device, its memory, the measured CUDA context, the time to
 * allocate a KV pool, and the write kernel's bandwidth against the
 * catalogue's HBM peak. Exit 0 when a device answered and every measurement
 * ran, 1 when there is no backend/device or an allocation failed (the OOM is
 * printed), 2 for bad flags. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "backend.h"
#include "commands.h"
#include "kv_gpu.h"
#include "kv_util.h"
#include "paths.h"
#ifdef KVLAB_HAVE_CUDA
#include "kv_cuda.h"
#include "kv_cuda_parity.h"
#endif

static void usage(FILE *f)
{
    fprintf(f, "usage: kvlab probe [--json] [--pool-gib X] [--kv-cache-dtype auto|bf16|fp16|fp8|fp32]\n"
               "                   [--repeats N] [--parity]\n"
               "  --parity       instead of the bandwidth figures: run a prefix-sharing trace that\n"
               "                 preempts, with a gather-verify after every step, on the host and\n"
               "                 CUDA backends (1 and 2 ranks) and compare them\n"
               "  --pool-gib X   size of the KV pool to allocate and write (default 8, capped at\n"
               "                 80%% of free memory unless given)\n");
}

#ifdef KVLAB_HAVE_CUDA
static int parse_dtype(const char *s)
{
    if (!strcmp(s, "auto") || !strcmp(s, "bf16") || !strcmp(s, "bfloat16")) return KV_DTYPE_BF16;
    if (!strcmp(s, "fp16") || !strcmp(s, "float16") || !strcmp(s, "half")) return KV_DTYPE_FP16;
    if (!strcmp(s, "fp8") || !strcmp(s, "fp8_e4m3")) return KV_DTYPE_FP8_E4M3;
    if (!strcmp(s, "fp32") || !strcmp(s, "float32")) return KV_DTYPE_FP32;
    return -1;
}

static const char *dtype_name(int d)
{
    return d == KV_DTYPE_FP16 ? "fp16" : d == KV_DTYPE_FP8_E4M3 ? "fp8_e4m3" : d == KV_DTYPE_FP32 ? "fp32" : "bf16";
}
#endif

#ifdef KVLAB_HAVE_CUDA
/* --parity: the trace on 1 and 2 ranks; exit 0 when both verify and agree. */
static int probe_parity(const kv_cuda_gpu_info *info, int json)
{
    kv_cuda_parity_report rep[2];
    char err[512] = "";
    int rc = 0, ran = 0;
    for (int tp = 1; tp <= 2 && !rc; tp++) {
        kv_device *d = kv_cuda_open(tp, err, sizeof err);
        if (!d || kv_cuda_parity_run(d, tp, &rep[tp - 1], err, sizeof err) != 0) rc = 1;
        else ran++;
        if (d) d->ops->destroy(d);
    }
    for (int i = 0; i < ran; i++)
        if (!rep[i].identical || rep[i].verify_error[0]) rc = 1;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", info->name);
        cJSON_AddStringToObject(o, "error", err);
        const kv_cuda_parity_report *r = &rep[0];
        if (ran) {
            cJSON_AddNumberToObject(o, "trace_steps", (double)r->steps);
            cJSON_AddNumberToObject(o, "trace_verified_steps", (double)r->verified_steps);
            cJSON_AddNumberToObject(o, "trace_requests_finished", (double)r->requests_finished);
            cJSON_AddNumberToObject(o, "trace_preemptions", (double)r->preemptions);
            cJSON_AddNumberToObject(o, "trace_prefix_cache_hits", (double)r->prefix_cache_hits);
            cJSON_AddStringToObject(o, "trace_verify_error", ran == 2 && !r->verify_error[0] ? rep[1].verify_error
                                                                                           : r->verify_error);
            cJSON_AddNumberToObject(o, "parity_events", (double)r->events);
            cJSON_AddBoolToObject(o, "parity_identical", ran == 2 && rep[0].identical && rep[1].identical);
            cJSON_AddStringToObject(o, "parity_difference", !r->identical ? r->difference
                                                            : ran == 2 ? rep[1].difference : "tp 2 did not run");
            cJSON_AddNumberToObject(o, "seconds_host", r->seconds_host);
            cJSON_AddNumberToObject(o, "seconds_cuda", r->seconds_device);
        }
        char *s = cJSON_Print(o);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
        return rc;
    }
    printf("kvlab probe --parity on %s\n", info->name);
    for (int i = 0; i < ran; i++) {
        const kv_cuda_parity_report *r = &rep[i];
        printf("  tp %d: %lld steps, %lld requests, %lld preemptions, %lld prefix-cache hit tokens; "
               "gather-verify after %lld steps: %s\n",
               r->tensor_parallel_size, (long long)r->steps, (long long)r->requests_finished,
               (long long)r->preemptions, (long long)r->prefix_cache_hits, (long long)r->verified_steps,
               r->verify_error[0] ? r->verify_error : "every request's blocks hold its own K/V");
        printf("        host vs CUDA: %s (%lld events; %.2f s host, %.2f s CUDA)\n",
               r->identical ? "identical block tables, events and metrics" : r->difference, (long long)r->events,
               r->seconds_host, r->seconds_device);
    }
    if (err[0]) fprintf(stderr, "kvlab probe: %s\n", err);
    return rc;
}
#endif

int cmd_probe(int argc, char **argv)
{
    int json = 0, repeats = 5, parity = 0;
    double pool_gib = 8.0;
    int pool_given = 0;
    const char *dtype_s = "auto";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--parity")) parity = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "--pool-gib") || !strcmp(a, "--repeats") || !strcmp(a, "--kv-cache-dtype")) &&
                 i + 1 < argc) {
            const char *v = argv[++i];
            char *end = NULL;
            if (!strcmp(a, "--kv-cache-dtype")) {
                dtype_s = v;
                continue;
            }
            double x = strtod(v, &end);
            if (!end || *end || x <= 0) {
                fprintf(stderr, "kvlab probe: %s needs a positive number, got '%s'\n", a, v);
                return 2;
            }
            if (!strcmp(a, "--pool-gib")) { pool_gib = x; pool_given = 1; }
            else repeats = (int)x;
        } else {
            fprintf(stderr, "kvlab probe: unknown or incomplete flag '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
#ifndef KVLAB_HAVE_CUDA
    (void)json; (void)repeats; (void)pool_gib; (void)pool_given; (void)dtype_s; (void)parity;
    fprintf(stderr, "kvlab probe: this build has no CUDA backend (configured without a CUDA toolkit or with KVLAB_CUDA=OFF); "
                    "kvlab uses the host backend\n");
    return 1;
#else
    const int dtype = parse_dtype(dtype_s);
    if (dtype < 0) {
        fprintf(stderr, "kvlab probe: --kv-cache-dtype must be auto, bf16, fp16, fp8 or fp32, got '%s'\n", dtype_s);
        return 2;
    }
    char err[512];
    kv_device *d = kv_cuda_open(1, err, sizeof err);
    if (!d) {
        fprintf(stderr, "kvlab probe: %s; kvlab uses the host backend\n", err);
        return 1;
    }
    kv_cuda_gpu_info info;
    kv_cuda_info(d, 0, &info, NULL, 0);
    if (parity) {
        d->ops->destroy(d);
        return probe_parity(&info, json);
    }

    kv_gpu_catalog cat = {0};
    char cerr[256] = "";
    const kv_gpu *match = NULL;
    if (kv_gpu_catalog_load(kvlab_assets_dir(), &cat, cerr, sizeof cerr) == 0)
        match = kv_cuda_match_catalog(&cat, info.name, (double)info.total_bytes);
    const double peak = match ? match->hbm_bandwidth_gbps : 0;

    /* A Llama-3.1-8B-shaped pool (32 layers x 8 KV heads x 128), the
     * classroom model, sized to --pool-gib. */
    kv_pool_layout l = {0, 16, 32, 8, 128, 2, dtype};
    const uint64_t block_bytes = kv_pool_layout_bytes(&(kv_pool_layout){1, 16, 32, 8, 128, 2, dtype});
    double want = kv_bytes_of_gib(pool_gib);
    if (!pool_given && want > 0.8 * (double)info.free_at_open) want = 0.8 * (double)info.free_at_open;
    l.num_blocks = (int32_t)(want / (double)block_bytes);
    if (l.num_blocks < 2) l.num_blocks = 2;
    const uint64_t pool_bytes = kv_pool_layout_bytes(&l);

    int rc = 0;
    double alloc_ms = -1, wr_gbps = 0, wr_ms = 0, rd_gbps = 0, rd_ms = 0;
    uint64_t wr_bytes = 0, rd_bytes = 0;
    int64_t mism = -1;
    char oom[768] = "";
    int r = d->ops->alloc_pool(d, 0, &l, err, sizeof err);
    if (r == KV_DEV_ENOMEM) {
        snprintf(oom, sizeof oom, "%s", err);
        rc = 1;
    } else if (r) {
        fprintf(stderr, "kvlab probe: %s\n", err);
        rc = 1;
    } else {
        alloc_ms = kv_cuda_pool_alloc_ms(d, 0);
        const int32_t ntok = (l.num_blocks - 1) * l.block_size;
        r = kv_cuda_bench_write(d, 0, ntok, repeats, &wr_gbps, &wr_ms, &wr_bytes, err, sizeof err);
        if (!r)
            r = kv_cuda_bench_gather(d, 0, ntok, repeats, &rd_gbps, &rd_ms, &rd_bytes, &mism, err, sizeof err);
        if (r) {
            fprintf(stderr, "kvlab probe: %s\n", err);
            rc = 1;
        } else if (mism != 0) {
            rc = 1;
        }
    }

    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "backend", "cuda");
        cJSON_AddNumberToObject(o, "device", info.device);
        cJSON_AddStringToObject(o, "name", info.name);
        cJSON_AddStringToObject(o, "pci_bus_id", info.pci_bus_id);
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", info.cc_major, info.cc_minor);
        cJSON_AddStringToObject(o, "compute_capability", cc);
        cJSON_AddNumberToObject(o, "sm_count", info.sm_count);
        cJSON_AddNumberToObject(o, "total_bytes", (double)info.total_bytes);
        cJSON_AddNumberToObject(o, "total_gib", kv_gib((double)info.total_bytes));
        cJSON_AddNumberToObject(o, "free_gib", kv_gib((double)info.free_at_open));
        if (info.context_bytes >= 0) cJSON_AddNumberToObject(o, "cuda_context_gib", kv_gib((double)info.context_bytes));
        else cJSON_AddNullToObject(o, "cuda_context_gib");
        cJSON_AddStringToObject(o, "cuda_context_how", info.context_how);
        cJSON_AddStringToObject(o, "catalogue_id", match ? match->id : "");
        cJSON_AddNumberToObject(o, "hbm_peak_gbps", peak);
        cJSON_AddStringToObject(o, "kv_cache_dtype", dtype_name(dtype));
        cJSON_AddNumberToObject(o, "pool_gib", kv_gib((double)pool_bytes));
        cJSON_AddNumberToObject(o, "pool_alloc_ms", alloc_ms);
        cJSON_AddNumberToObject(o, "write_gbps", wr_gbps);
        cJSON_AddNumberToObject(o, "write_ms", wr_ms);
        cJSON_AddNumberToObject(o, "write_fraction_of_peak", peak > 0 ? wr_gbps / peak : 0);
        cJSON_AddNumberToObject(o, "gather_gbps", rd_gbps);
        cJSON_AddNumberToObject(o, "gather_mismatches", (double)mism);
        cJSON_AddStringToObject(o, "error", oom);
        char *s = cJSON_Print(o);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        printf("kvlab probe: CUDA backend\n");
        printf("  device        %d: %s, compute capability %d.%d (sm_%d%d), %d SMs, PCI %s\n", info.device,
               info.name, info.cc_major, info.cc_minor, info.cc_major, info.cc_minor, info.sm_count,
               info.pci_bus_id);
        printf("  memory        total %.2f GiB, free %.2f GiB after creating the context (cudaMemGetInfo)\n",
               kv_gib((double)info.total_bytes), kv_gib((double)info.free_at_open));
        if (info.context_bytes >= 0)
            printf("  CUDA context  %.2f GiB (%lld MiB), measured from %s\n", kv_gib((double)info.context_bytes),
                   (long long)(info.context_bytes >> 20), info.context_how);
        else
            printf("  CUDA context  %s\n", info.context_how);
        if (match)
            printf("  catalogue     %s (%s), HBM peak %.0f GB/s\n", match->id, match->name, peak);
        else
            printf("  catalogue     no entry matches '%s'%s%s\n", info.name, *cerr ? ": " : "", cerr);
        if (*oom) {
            printf("  KV pool       %.2f GiB: %s\n", kv_gib((double)pool_bytes), oom);
        } else if (alloc_ms >= 0) {
            printf("  KV pool       %.2f GiB (%d blocks of 16 tokens, 32 layers x 8 heads x 128, %s) "
                   "in one cudaMalloc: %.2f ms\n",
                   kv_gib((double)pool_bytes), l.num_blocks, dtype_name(dtype), alloc_ms);
            printf("  write kernel  %.0f GB/s storing %.2f GiB of K/V in %.3f ms", wr_gbps,
                   kv_gib((double)wr_bytes), wr_ms);
            if (peak > 0) printf(" = %.1f%% of the %.0f GB/s peak", 100.0 * wr_gbps / peak, peak);
            printf("\n");
            printf("  gather-verify %.0f GB/s reading it back through a shuffled block table, %lld mismatches\n",
                   rd_gbps, (long long)mism);
        }
    }
    kv_gpu_catalog_free(&cat);
    d->ops->destroy(d);
    return rc;
#endif
}
