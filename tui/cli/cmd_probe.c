/* kvlab probe: what the device backend measures on this machine: the device
 * (name, bus id, MIG slice, memory, the measured CUDA context, peak
 * bandwidth), the time to allocate a KV pool, and, best and median of N
 * runs, the write, paged-gather and verify kernels against the roofline of
 * their kind of traffic measured in the same run (cudaMemset for writes,
 * cudaMemcpy for the gather's read + write, a plain read for verify). Without a GPU it reports the
 * host backend the same way. Exit 0 when every measurement ran and read
 * back right, 1 when one failed (an OOM is printed), 2 for bad flags. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "backend.h"
#include "commands.h"
#include "kv_device_host.h"
#include "kv_device_parity.h"
#include "kv_gpu.h"
#include "kv_util.h"
#include "paths.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvlab probe [--json] [--pool-gib X] [--gather-gib X] [--repeats N]\n"
               "                   [--kv-cache-dtype auto|bfloat16|float16|fp8|fp8_e4m3|fp8_e5m2|float32|int8]\n"
               "                   [--parity]\n"
               "  --parity       instead of the bandwidth figures: run a prefix-sharing trace that\n"
               "                 preempts, reading back what changed after every step, on the host\n"
               "                 and device backends (1 and 2 ranks) and compare them\n"
               "  --pool-gib X   size of the KV pool to allocate and write (default 8, capped at\n"
               "                 80%% of free memory unless given)\n"
               "  --gather-gib X K/V bytes the gather and the memset/memcpy roofline move (default 2)\n"
               "  --repeats N    timed runs of each benchmark (default 10; best and median)\n");
}

/* --parity: the trace on 1 and 2 ranks; exit 0 when both verify and agree. */
static int probe_parity(int json)
{
    kv_device_parity_report rep[2];
    char err[512] = "", name[160] = "host";
    int rc = 0, ran = 0;
    for (int tp = 1; tp <= 2 && !rc; tp++) {
        int failed = 0;
        kv_device *d = kvlab_backend_open(tp, 1, &failed, err, sizeof err);
        if (!d && failed) {
            rc = 1;
            break;
        }
        if (!d) d = kv_device_host_open(tp, 0, err, sizeof err);
        kv_device_info info;
        if (d && d->ops->info(d, 0, &info, NULL, 0) == 0) snprintf(name, sizeof name, "%.120s", info.name);
        if (!d || kv_device_parity_run(d, tp, &rep[tp - 1], err, sizeof err) != 0) rc = 1;
        else ran++;
        if (d) d->ops->destroy(d);
    }
    for (int i = 0; i < ran; i++)
        if (!rep[i].identical || rep[i].verify_error[0]) rc = 1;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", name);
        cJSON_AddStringToObject(o, "error", err);
        const kv_device_parity_report *r = &rep[0];
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
            cJSON_AddNumberToObject(o, "seconds_device", r->seconds_device);
        }
        char *s = cJSON_Print(o);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
        return rc;
    }
    printf("kvlab probe --parity on %s\n", name);
    for (int i = 0; i < ran; i++) {
        const kv_device_parity_report *r = &rep[i];
        printf("  tp %d: %lld steps, %lld requests, %lld preemptions, %lld prefix-cache hit tokens; "
               "read-back after %lld steps: %s\n",
               r->tensor_parallel_size, (long long)r->steps, (long long)r->requests_finished,
               (long long)r->preemptions, (long long)r->prefix_cache_hits, (long long)r->verified_steps,
               r->verify_error[0] ? r->verify_error : "every request's blocks hold its own K/V");
        printf("        host vs device: %s (%lld events; %.2f s host, %.2f s device)\n",
               r->identical ? "identical block tables, events and metrics" : r->difference, (long long)r->events,
               r->seconds_host, r->seconds_device);
    }
    if (err[0]) fprintf(stderr, "kvlab probe: %s\n", err);
    return rc;
}

static const char *bench_names[KV_BENCH_COUNT] = {"memset", "memcpy", "read", "write", "gather", "verify"};
/* The roofline each kernel is measured against: the same kind of traffic. */
static const int bench_roof[KV_BENCH_COUNT] = {-1, -1, -1, KV_BENCH_MEMSET, KV_BENCH_MEMCPY, KV_BENCH_READ};

int cmd_probe(int argc, char **argv)
{
    int json = 0, repeats = 10, parity = 0;
    double pool_gib = 8.0, gather_gib = 2.0;
    int pool_given = 0;
    const char *dtype_s = "auto";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--parity")) parity = 1;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "--pool-gib") || !strcmp(a, "--gather-gib") || !strcmp(a, "--repeats") ||
                  !strcmp(a, "--kv-cache-dtype")) && i + 1 < argc) {
            const char *v = argv[++i];
            char *end = NULL;
            if (!strcmp(a, "--kv-cache-dtype")) {
                dtype_s = v;
                continue;
            }
            double x = strtod(v, &end);
            if (!end || end == v || *end || !(x > 0) || x > 1e9 || (!strcmp(a, "--repeats") && x > 1000)) {
                fprintf(stderr, "kvlab probe: %s needs a positive number%s, got '%s'\n", a,
                        !strcmp(a, "--repeats") ? " up to 1000" : "", v);
                return 2;
            }
            if (!strcmp(a, "--pool-gib")) { pool_gib = x; pool_given = 1; }
            else if (!strcmp(a, "--gather-gib")) gather_gib = x;
            else repeats = (int)x < 1 ? 1 : (int)x;
        } else {
            fprintf(stderr, "kvlab probe: unknown or incomplete flag '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    const int dtype = !strcmp(dtype_s, "auto") ? KV_DTYPE_BF16 : kv_dtype_from_name(dtype_s, 0);
    if (dtype < 0) {
        fprintf(stderr, "kvlab probe: --kv-cache-dtype must be auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, "
                        "float32 or int8, got '%s'\n", dtype_s);
        return 2;
    }
    if (parity) return probe_parity(json);

    char err[512] = "";
    int failed = 0;
    kv_device *d = kvlab_backend_open(1, 1, &failed, err, sizeof err);
    if (!d && failed) {
        fprintf(stderr, "kvlab probe: %s\n", err);
        return 1;
    }
    if (!d) d = kv_device_host_open(1, 0, err, sizeof err); /* no GPU: the host backend, on an unlimited card */
    if (!d) {
        fprintf(stderr, "kvlab probe: %s\n", err);
        return 1;
    }
    kv_device_info info;
    if (d->ops->info(d, 0, &info, err, sizeof err) != 0) {
        fprintf(stderr, "kvlab probe: %s\n", err);
        d->ops->destroy(d);
        return 1;
    }
    const int host = !strcmp(info.backend, "host");
    kv_gpu_catalog cat = {0};
    char cerr[256] = "";
    const kv_gpu *match = NULL;
    if (!host && kv_gpu_catalog_load(kvlab_assets_dir(), &cat, cerr, sizeof cerr) == 0)
        match = kv_device_match_catalog(&cat, &info);

    /* A Llama-3.1-8B-shaped pool (32 layers x 8 KV heads x 128), the
     * classroom model, sized to --pool-gib. */
    kv_pool_layout l = {0, 16, 32, 8, 128, 2, dtype, 0};
    kv_pool_layout one = l;
    one.num_blocks = 1;
    const uint64_t block_bytes = kv_pool_layout_bytes(&one), token_bytes = block_bytes / 16;
    double want = kv_bytes_of_gib(pool_gib);
    if (!pool_given && info.free_bytes && want > 0.8 * (double)info.free_bytes) want = 0.8 * (double)info.free_bytes;
    l.num_blocks = (int32_t)(want / (double)block_bytes > 2e9 ? 2e9 : want / (double)block_bytes);
    if (l.num_blocks < 2) l.num_blocks = 2;
    const uint64_t pool_bytes = kv_pool_layout_bytes(&l);
    /* Tokens in the pool's usable blocks, in 64 bits (2e9 blocks x 16 is past
     * int32), then as many as one bench request takes. */
    int64_t ptok = (int64_t)(l.num_blocks - 1) * l.block_size;
    const int32_t ntok = (int32_t)(ptok > INT32_MAX ? INT32_MAX : ptok);
    int64_t gtok = (int64_t)(kv_bytes_of_gib(gather_gib) / (double)token_bytes);
    if (info.free_bytes) { /* the gather and copy buffers come out of what the pool leaves */
        double room = ((double)info.free_bytes - (double)pool_bytes) * 0.8;
        if (gtok > (int64_t)(room / (double)token_bytes)) gtok = (int64_t)(room / (double)token_bytes);
    }
    if (gtok > ntok) gtok = ntok;
    if (gtok < 1) gtok = 1;

    int rc = 0, stop = 0;
    char oom[768] = "", failed_why[512] = "";
    kv_bench_result res[KV_BENCH_COUNT];
    memset(res, 0, sizeof res);
    int ran[KV_BENCH_COUNT] = {0};
    double alloc_ms = -1;
    int r = d->ops->alloc_pool(d, 0, &l, NULL, err, sizeof err);
    if (r == KV_DEV_ENOMEM) {
        snprintf(oom, sizeof oom, "%s", err);
        rc = 1;
    } else if (r) {
        fprintf(stderr, "kvlab probe: %s\n", err);
        snprintf(failed_why, sizeof failed_why, "%s", err);
        rc = 1;
    } else {
        kv_device_info after;
        if (d->ops->info(d, 0, &after, NULL, 0) == 0) alloc_ms = after.pool_alloc_ms;
        for (int k = 0; k < KV_BENCH_COUNT && !stop; k++) { /* a device error stops the rest; a wrong value does not */
            const int32_t n = k == KV_BENCH_WRITE || k == KV_BENCH_VERIFY ? ntok : (int32_t)gtok;
            kv_bench_req q = {(kv_bench_kind)k, n, repeats};
            r = d->ops->bench(d, 0, &q, &res[k], err, sizeof err);
            if (r) {
                if (r == KV_DEV_ENOMEM) snprintf(oom, sizeof oom, "%s", err);
                else fprintf(stderr, "kvlab probe: %s\n", err);
                snprintf(failed_why, sizeof failed_why, "%s bench: %.400s", bench_names[k], err);
                rc = 1;
                stop = 1;
            } else {
                ran[k] = 1;
                if (res[k].mismatches > 0) rc = 1;
            }
        }
    }
    /* Kernels against the roofline of their kind of traffic: writes against
     * memset, the gather (read + write) against memcpy, verify (read only)
     * against the plain read; 0 when that roofline did not run. */
    double roof[KV_BENCH_COUNT] = {0};
    for (int k = 0; k < KV_BENCH_COUNT; k++)
        if (bench_roof[k] >= 0 && ran[bench_roof[k]]) roof[k] = res[bench_roof[k]].best_gbps;
    const double peak = info.peak_gbps > 0 ? info.peak_gbps : match ? match->hbm_bandwidth_gbps : 0;

    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "backend", info.backend);
        cJSON_AddNumberToObject(o, "device", info.card);
        cJSON_AddStringToObject(o, "name", info.name);
        cJSON_AddStringToObject(o, "pci_bus_id", info.pci_bus_id);
        cJSON_AddStringToObject(o, "uuid", info.uuid);
        cJSON_AddStringToObject(o, "mig", info.mig);
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", info.cc_major, info.cc_minor);
        cJSON_AddStringToObject(o, "compute_capability", cc);
        cJSON_AddNumberToObject(o, "sm_count", info.sm_count);
        cJSON_AddNumberToObject(o, "total_bytes", (double)info.total_bytes);
        cJSON_AddNumberToObject(o, "total_gib", kv_gib((double)info.total_bytes));
        cJSON_AddNumberToObject(o, "free_gib", kv_gib((double)info.free_bytes));
        if (info.context_bytes >= 0) cJSON_AddNumberToObject(o, "cuda_context_gib", kv_gib((double)info.context_bytes));
        else cJSON_AddNullToObject(o, "cuda_context_gib");
        cJSON_AddStringToObject(o, "cuda_context_how", info.context_how);
        cJSON_AddStringToObject(o, "catalogue_id", match ? match->id : "");
        cJSON_AddNumberToObject(o, "peak_gbps", peak);
        cJSON_AddStringToObject(o, "peak_how", info.peak_gbps > 0 ? info.peak_how : match ? "the catalogue" : info.peak_how);
        cJSON_AddStringToObject(o, "kv_cache_dtype", kv_dtype_name(dtype));
        cJSON_AddNumberToObject(o, "pool_gib", kv_gib((double)pool_bytes));
        cJSON_AddNumberToObject(o, "pool_alloc_ms", alloc_ms);
        cJSON_AddNumberToObject(o, "repeats", repeats);
        for (int k = 0; k < KV_BENCH_COUNT; k++) {
            char key[64];
#define ADD(suffix, v) (snprintf(key, sizeof key, "%s_%s", bench_names[k], suffix), cJSON_AddNumberToObject(o, key, v))
            snprintf(key, sizeof key, "%s_ran", bench_names[k]);
            cJSON_AddBoolToObject(o, key, ran[k]);
            ADD("gib", kv_gib((double)res[k].bytes));
            ADD("best_gbps", res[k].best_gbps);
            ADD("median_gbps", res[k].median_gbps);
            ADD("best_ms", res[k].best_ms);
            ADD("median_ms", res[k].median_ms);
            if (bench_roof[k] >= 0) {
                snprintf(key, sizeof key, "%s_roofline", bench_names[k]);
                cJSON_AddStringToObject(o, key, bench_names[bench_roof[k]]);
                ADD("fraction_of_roofline", roof[k] > 0 ? res[k].best_gbps / roof[k] : 0);
                ADD("mismatches", ran[k] ? (double)res[k].mismatches : -1);
            }
            ADD("fraction_of_peak", peak > 0 ? res[k].best_gbps / peak : 0);
#undef ADD
        }
        cJSON_AddStringToObject(o, "error", oom[0] ? oom : failed_why);
        char *s = cJSON_Print(o);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        printf("kvlab probe: %s backend\n", host ? "host" : "CUDA");
        if (host) {
            printf("  device        %s\n", info.name);
        } else {
            printf("  device        %d: %s, compute capability %d.%d (sm_%d%d), %d SMs, PCI %s%s%s\n", info.card,
                   info.name, info.cc_major, info.cc_minor, info.cc_major, info.cc_minor, info.sm_count,
                   info.pci_bus_id, info.mig[0] ? ", MIG " : "", info.mig);
            printf("  memory        total %.2f GiB, free %.2f GiB after creating the context (cudaMemGetInfo)\n",
                   kv_gib((double)info.total_bytes), kv_gib((double)info.free_bytes));
        }
        if (info.context_bytes >= 0 && !host)
            printf("  CUDA context  %.2f GiB (%lld MiB), measured from %s\n", kv_gib((double)info.context_bytes),
                   (long long)(info.context_bytes >> 20), info.context_how);
        else
            printf("  CUDA context  %s\n", info.context_how);
        if (peak > 0)
            printf("  peak DRAM     %.0f GB/s (%s)\n", peak, info.peak_gbps > 0 ? info.peak_how : "the catalogue");
        if (!host && match)
            printf("  catalogue     %s (%s)\n", match->id, match->name);
        else if (!host)
            printf("  catalogue     no entry is '%s'%s%s\n", info.name, *cerr ? ": " : "", cerr);
        if (*oom) {
            printf("  KV pool       %.2f GiB: %s\n", kv_gib((double)pool_bytes), oom);
        } else if (alloc_ms >= 0) {
            printf("  KV pool       %.2f GiB (%d blocks of 16 tokens, 32 layers x 8 heads x 128, %s) in one %s: "
                   "%.2f ms\n",
                   kv_gib((double)pool_bytes), l.num_blocks, kv_dtype_name(dtype), host ? "mapping" : "cudaMalloc",
                   alloc_ms);
            if (host)
                printf("  (the host backend stores one 8-byte fingerprint per token: its figures are host memory's)\n");
            printf("  best / median of %d runs:\n", repeats);
            for (int k = 0; k < KV_BENCH_COUNT; k++) {
                if (!ran[k]) continue;
                printf("  %-13s %7.0f / %7.0f GB/s  %8.2f GiB in %8.3f ms", bench_names[k], res[k].best_gbps,
                       res[k].median_gbps, kv_gib((double)res[k].bytes), res[k].best_ms);
                if (roof[k] > 0) printf("  = %5.1f%% of %s", 100.0 * res[k].best_gbps / roof[k], bench_names[bench_roof[k]]);
                if (peak > 0) printf(", %5.1f%% of peak", 100.0 * res[k].best_gbps / peak);
                if (bench_roof[k] >= 0) printf(", %lld mismatches", (long long)res[k].mismatches);
                printf("\n");
            }
        }
    }
    kv_gpu_catalog_free(&cat);
    d->ops->destroy(d);
    return rc;
}
