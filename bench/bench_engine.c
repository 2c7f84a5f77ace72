/* kvlab engine benchmark. Not a test: it
 * prints figures for the README.
 *
 *   1. block pool: allocations + frees per second on one core, on the
 *      8B/H100 pool, with prefix-cache hashes, hits and evictions in the mix;
 *   2. the whole simulation of a generated 100k-request trace with 30% shared
 *      prefixes on Llama-3.1-8B / H100 (the plan sizes the pool): wall time,
 *      peak RSS, steps, and heap allocations made inside kv_engine_step after
 *      warm-up (should be 0: free lists and arrays sized at start);
 *   3. interning 1,000,000 distinct cache salts (a trace where every request
 *      has its own).
 *
 * usage: bench_engine [ASSETS_DIR] [TRACE_SPEC] [vLLM flags...]
 * (default flags: --max-model-len 8192; BENCH_SIM_ONLY=1 runs part 2 alone,
 * as bench/nano_vllm_bench.py does to time the engine loop on its trace) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "kv_engine.h"
#include "kv_hash.h"
#include "kv_plan.h"
#include "kv_pool.h"
#include "kv_trace.h"

/* Count heap calls by interposing glibc's allocator entry points. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static volatile long heap_calls;
void *malloc(size_t n) { heap_calls++; return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { heap_calls++; return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { heap_calls++; return __libc_realloc(p, n); }

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* CPU time of this process: what one core spent, whatever else the machine runs */
static double cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void bench_pool(int32_t num_blocks)
{
    kv_pool *p = kv_pool_create(num_blocks, 1, NULL, 0);
    int32_t *held = malloc((size_t)num_blocks * sizeof *held);
    int32_t nheld = 0;
    uint64_t x = 1;
    int64_t ops = 0;
    kv_hash parent = kv_hash_none(0);
    double t0 = now(), c0 = cpu();
    for (int round = 0; round < 400; round++) {
        /* take ~90% of the pool in requests of 1..64 blocks, hashing most */
        while (nheld < num_blocks * 9 / 10) {
            x = kv_hash_mix(x, 1);
            int32_t n = 1 + (int32_t)(x % 64);
            if (n > kv_pool_num_free(p))
                break;
            kv_pool_get_new_blocks(p, n, held + nheld, round, NULL, 0);
            for (int32_t i = 0; i < n - 1; i++) {
                kv_hash h = parent;
                h.lo ^= (uint64_t)(x % 4096) * 1315423911u + (uint64_t)i; /* repeats -> duplicates and hits */
                kv_pool_cache_block(p, held[nheld + i], h, round);
            }
            nheld += n;
            ops += n;
        }
        /* free them last-first in request-sized runs */
        for (int32_t i = 0; i < nheld; i += 32) {
            int32_t n = nheld - i < 32 ? nheld - i : 32;
            int32_t tmp[32];
            for (int32_t k = 0; k < n; k++)
                tmp[k] = held[i + n - 1 - k];
            kv_pool_free_blocks(p, tmp, n, round);
            ops += n;
        }
        nheld = 0;
    }
    double dt = now() - t0, dc = cpu() - c0;
    kv_pool_stats st;
    kv_pool_get_stats(p, &st);
    printf("block pool (%d blocks): %lld allocations + frees in %.3f s wall, %.3f s CPU = %.1f M/s per core "
           "(%lld evictions)\n",
           (int)num_blocks, (long long)ops, dt, dc, (double)ops / dc / 1e6, (long long)st.evictions);
    free(held);
    kv_pool_destroy(p);
}

static void bench_intern(int n)
{
    size_t cap = (size_t)n * 100 + 1, len = 0; /* a line is under 100 bytes */
    char *t = malloc(cap);
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(t + len, cap - len,
                                "{\"arrival_s\": 0, \"prompt_tokens\": 4, \"output_tokens\": 1, \"cache_salt\": \"u%d\"}\n", i);
    kv_trace tr;
    char err[256];
    double c0 = cpu();
    int rc = kv_trace_parse(t, len, &tr, err, sizeof err);
    double dc = cpu() - c0;
    printf("trace of %d requests with distinct cache salts: parsed and interned in %.3f s CPU (%d strings)%s%s\n", n,
           dc, rc ? 0 : (int)tr.num_strings, rc ? ": " : "", rc ? err : "");
    if (!rc)
        kv_trace_free(&tr);
    free(t);
    char spec[96];
    snprintf(spec, sizeof spec, "gen:requests=1,prefixes=%d", n);
    c0 = cpu();
    rc = kv_trace_generate(spec, &tr, err, sizeof err);
    dc = cpu() - c0;
    printf("%s: %d distinct prefix ids interned in %.3f s CPU\n", spec, rc ? 0 : (int)tr.num_strings, dc);
    if (!rc)
        kv_trace_free(&tr);
}

int main(int argc, char **argv)
{
    const char *assets = argc > 1 ? argv[1] : KVLAB_SOURCE_DIR "/assets";
    const char *spec = argc > 2 ? argv[2]
                                : "gen:requests=100000,rate=60,prompt=512,output=128,shared=0.3,prefix=1024,"
                                  "prefixes=8,seed=1";
    char err[1024];
    kv_model m;
    if (kv_model_load("meta-llama/Llama-3.1-8B-Instruct", assets, &m, err, sizeof err)) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    kv_gpu_catalog cat;
    if (kv_gpu_catalog_load(assets, &cat, err, sizeof err)) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    const kv_gpu *g = kv_gpu_find(&cat, "h100-80gb", err, sizeof err);
    kv_args a;
    kv_args_init(&a);
    kv_args_set(&a, "max-model-len", "8192", NULL, 0);
    for (int i = 3; i < argc; i++) {
        const char *v = i + 1 < argc && strncmp(argv[i + 1], "--", 2) ? argv[i + 1] : NULL;
        int rc = kv_args_set(&a, argv[i], v, err, sizeof err);
        if (rc < 0) {
            fprintf(stderr, "bench: %s\n", err);
            return 2;
        }
        if (v && rc != KV_ARGS_IGNORED && !strchr(argv[i], '='))
            i++;
    }
    double t0 = now();
    kv_trace tr;
    if (kv_trace_open(spec, &tr, err, sizeof err)) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    kv_plan *plan = malloc(sizeof *plan);
    kv_plan_compute_nofix(&m, g, &a, plan, err, sizeof err);
    kv_engine_config c;
    if (kv_engine_config_from_plan(plan, &m, g, &a, &c, NULL, 0, err, sizeof err)) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    c.verify = 0;
    c.write_kv = 0;
    c.block_events = 0;
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e) {
        fprintf(stderr, "bench: %s\n", err);
        return 2;
    }
    double t1 = now(), c1 = cpu();
    int64_t next = 0, steps = 0, rejected = 0;
    long step_heap = 0;
    kv_engine_info info;
    for (;;) {
        kv_engine_get_info(e, &info);
        while (next < tr.count && tr.reqs[next].arrival_s <= info.clock_s) {
            kv_request_spec sp;
            kv_trace_spec(&tr, next++, &sp);
            if (kv_engine_submit(e, &sp, NULL, 0) < 0)
                rejected++;
        }
        kv_engine_get_info(e, &info);
        if (!info.num_running && !info.num_waiting) {
            if (next >= tr.count)
                break;
            kv_engine_advance_clock(e, tr.reqs[next].arrival_s);
            continue;
        }
        long before = heap_calls;
        if (kv_engine_step(e, NULL, err, sizeof err) < 0) {
            fprintf(stderr, "bench: %s\n", err);
            return 1;
        }
        if (steps >= 1000) /* after warm-up: hash buckets and queues have grown */
            step_heap += heap_calls - before;
        steps++;
    }
    double t2 = now(), c2 = cpu();
    kv_engine_metrics mt;
    kv_engine_get_metrics(e, &mt);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("simulation: %lld requests (%lld rejected), %lld steps, %.1f s virtual, %lld preemptions, "
           "prefix hit rate %.1f%%\n",
           (long long)tr.count, (long long)rejected, (long long)steps, info.clock_s,
           (long long)mt.num_preemptions_total,
           mt.prefix_cache_queries ? 100.0 * (double)mt.prefix_cache_hits / (double)mt.prefix_cache_queries : 0.0);
    printf("  engine: %lld block allocations + %lld frees; %lld tokens computed\n", (long long)mt.block_allocations,
           (long long)mt.block_frees, (long long)mt.computed_tokens);
    printf("  simulation: %.3f s wall, %.3f s CPU (+ %.3f s generating the trace and planning), peak RSS %.1f MiB\n",
           t2 - t1, c2 - c1, t1 - t0, ru.ru_maxrss / 1024.0);
    printf("  heap calls inside kv_engine_step after the first 1000 steps: %ld\n", step_heap);
    kv_engine_destroy(e);
    if (!getenv("BENCH_SIM_ONLY")) {
        bench_pool(c.num_blocks);
        bench_intern(1000000);
    }
    kv_trace_free(&tr);
    kv_gpu_catalog_free(&cat);
    free(plan);
    return 0;
}
