/* Seeded property test: at least 1M random operations (arrivals, steps,
 * aborts, prefix-cache resets, clock jumps) on small engines in every mode,
 * checking as it goes: free + used + null = num_blocks; each block's ref
 * count equals the number of block tables holding it; each hashed block is
 * in the hash map exactly once; the free queue is well linked (kv_engine_check
 * after every operation); and after every step every running request reads
 * back exactly its own tokens' fingerprints from every rank (verify on).
 * At the end everything is aborted and every block must be free.
 *
 * KVLAB_PROPERTY_OPS overrides the operation count; ASan builds default to
 * 200k (the 2-core CI runs both), normal builds to 1,000,000. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kv_engine.h"
#include "kv_release.h"
#include "kv_hash.h"

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_OPS 200000L
#else
#define DEFAULT_OPS 1000000L
#endif

typedef struct rng {
    uint64_t s;
} rng;

static uint32_t rnd(rng *g, uint32_t n)
{
    g->s += 0x9E3779B97F4A7C15ull;
    return (uint32_t)(kv_hash_mix(g->s, 7) % n);
}

typedef struct variant {
    const char *name;
    int32_t num_blocks, block_size, max_model_len, max_num_seqs, budget, tp, kv_heads;
    int caching, chunked;
    kv_sched_policy policy;
    kv_engine_mode mode;
    const char *release;         /* vLLM release whose scheduling rules to run (NULL: the newest) */
    double watermark;
} variant;

static const variant variants[] = {
    {"fcfs paged", 40, 4, 96, 8, 64, 1, 8, 1, 1, KV_POLICY_FCFS, KV_MODE_PAGED, NULL, 0},
    {"priority paged", 33, 4, 96, 6, 48, 1, 8, 1, 1, KV_POLICY_PRIORITY, KV_MODE_PAGED, NULL, 0},
    {"fcfs no chunking", 48, 8, 64, 8, 64, 1, 8, 1, 0, KV_POLICY_FCFS, KV_MODE_PAGED, NULL, 0},
    {"caching off, tp 2", 40, 4, 96, 8, 64, 2, 8, 0, 1, KV_POLICY_FCFS, KV_MODE_PAGED, NULL, 0},
    {"tp 4 over 2 KV heads (replicated)", 30, 16, 128, 4, 64, 4, 2, 1, 1, KV_POLICY_FCFS, KV_MODE_PAGED, NULL, 0},
    {"contiguous", 64, 4, 48, 8, 64, 1, 8, 0, 1, KV_POLICY_FCFS, KV_MODE_CONTIGUOUS, NULL, 0},
    {"no-cache", 16, 4, 64, 4, 64, 1, 8, 1, 1, KV_POLICY_FCFS, KV_MODE_NO_CACHE, NULL, 0},
    /* older releases' rules: every freed block to the tail, stats at each
     * lookup, unchunkable prompts skipped, first-chunk admission */
    {"fcfs no chunking, vLLM 0.11.0 rules", 48, 8, 64, 8, 64, 1, 8, 1, 0, KV_POLICY_FCFS, KV_MODE_PAGED, "0.11.0", 0},
    {"priority, vLLM 0.18 rules", 33, 4, 96, 6, 48, 1, 8, 1, 1, KV_POLICY_PRIORITY, KV_MODE_PAGED, "0.18.0", 0},
    {"priority, vLLM 0.11.0 rules (a victim keeps its step)", 33, 4, 96, 6, 48, 1, 8, 1, 1, KV_POLICY_PRIORITY,
     KV_MODE_PAGED, "0.11.0", 0},
    {"fcfs with a watermark, vLLM 0.24 rules", 40, 4, 96, 8, 64, 1, 8, 1, 1, KV_POLICY_FCFS, KV_MODE_PAGED, "0.24.0",
     0.1},
};

static void run_variant(const variant *v, long ops, uint64_t seed, long *steps_out, long *preempt_out)
{
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = v->num_blocks;
    c.block_size = v->block_size;
    c.max_model_len = v->max_model_len;
    c.max_num_seqs = v->max_num_seqs;
    c.max_num_batched_tokens = v->budget;
    c.tensor_parallel_size = v->tp;
    c.num_kv_heads = v->kv_heads;
    c.enable_prefix_caching = v->caching;
    c.enable_chunked_prefill = v->chunked;
    c.scheduling_policy = v->policy;
    c.mode = v->mode;
    if (v->release) {
        const kv_release *rel = kv_release_find(v->release, NULL, 0);
        assert_non_null(rel);
        c.sched_rules = *rel->sched;
    }
    c.sched_rules.watermark = v->watermark;
    c.verify = 1;
    c.seed = seed;
    c.event_capacity = 1024;
    c.timeline_capacity = 64;
    c.gpu_total_bytes = 0;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e)
        fail_msg("%s: create: %s", v->name, err);
    rng g = {seed * 0x2545F4914F6CDD1Dull + 17};
    static const char *prefixes[] = {"sys-a", "sys-b", "repo"};
    static const int32_t prefix_len[] = {8, 12, 20};
    int32_t ids[64];
    long steps = 0;
    uint64_t last_seq = 0;
    kv_event evs[256];
    for (long op = 0; op < ops; op++) {
        uint32_t k = rnd(&g, 100);
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        if (k < 38 && info.num_waiting < 24) {
            kv_request_spec s;
            memset(&s, 0, sizeof s);
            int32_t maxp = v->max_model_len / 2;
            s.output_tokens = 1 + (int32_t)rnd(&g, 24);
            if (rnd(&g, 2)) {
                int p = (int)rnd(&g, 3);
                s.prefix_id = prefixes[p];
                s.prefix_tokens = prefix_len[p];
            }
            if (rnd(&g, 4) == 0) {
                int32_t n = 1 + (int32_t)rnd(&g, 40);
                for (int32_t i = 0; i < n; i++)
                    ids[i] = (int32_t)rnd(&g, 5); /* few distinct ids: identical blocks happen */
                s.prompt_token_ids = ids;
                s.num_prompt_token_ids = n;
            } else {
                s.prompt_tokens = 1 + (int32_t)rnd(&g, (uint32_t)maxp);
            }
            if (rnd(&g, 8) == 0)
                s.cache_salt = rnd(&g, 2) ? "salt-1" : "salt-2";
            s.priority = (int32_t)rnd(&g, 4);
            s.arrival_s = -1;
            if (rnd(&g, 50) == 0)
                s.prompt_tokens = v->max_model_len + 5; /* rejected with vLLM's message */
            kv_engine_submit(e, &s, NULL, 0);
        } else if (k < 88) {
            kv_step_result r;
            int rc = kv_engine_step(e, &r, err, sizeof err);
            if (rc < 0)
                fail_msg("%s: op %ld: step: %s", v->name, op, err);
            steps++;
            *preempt_out += r.num_preempted;
        } else if (k < 95) {
            if (info.num_submitted > 0) {
                int64_t id = (int64_t)rnd(&g, (uint32_t)info.num_submitted);
                kv_engine_abort(e, id, NULL, 0);
            }
        } else if (k < 97) {
            int ok = kv_engine_reset_prefix_cache(e);
            kv_engine_get_info(e, &info);
            if (ok)
                assert_int_equal(info.num_cached_blocks, 0);
            else
                assert_true(info.num_free_blocks < v->num_blocks - 1);
        } else if (k < 99) {
            kv_engine_advance_clock(e, info.clock_s + 0.001 * rnd(&g, 100));
        } else {
            /* a view reading events since last time: sequence numbers only grow */
            int32_t n = kv_engine_events_since(e, last_seq, evs, 256);
            for (int32_t i = 0; i < n; i++) {
                assert_true(evs[i].seq > last_seq);
                last_seq = evs[i].seq;
            }
        }
        if (kv_engine_check(e, err, sizeof err) != 0)
            fail_msg("%s: op %ld: %s", v->name, op, err);
    }
    kv_engine_abort_all(e);
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_running, 0);
    assert_int_equal(info.num_waiting, 0);
    assert_int_equal(info.num_free_blocks, v->num_blocks - 1);
    assert_true(info.kv_usage == 0.0);
    assert_int_equal(kv_engine_check(e, err, sizeof err), 0);
    assert_int_equal(kv_engine_reset_prefix_cache(e), 1);
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_cached_blocks, 0);
    *steps_out += steps;
    kv_engine_destroy(e);
}

static void test_random_operations(void **state)
{
    (void)state;
    long ops = DEFAULT_OPS;
    const char *env = getenv("KVLAB_PROPERTY_OPS");
    if (env && atol(env) > 0)
        ops = atol(env);
    size_t nv = sizeof variants / sizeof variants[0];
    long per = (ops + (long)nv - 1) / (long)nv, steps = 0, preempt = 0;
    for (size_t i = 0; i < nv; i++)
        run_variant(&variants[i], per, 1000 + i, &steps, &preempt);
    print_message("property: %ld operations over %zu engines, %ld steps, %ld preemptions\n", per * (long)nv, nv,
                  steps, preempt);
    assert_true(per * (long)nv >= ops);
    assert_true(preempt > 0); /* the pools are small on purpose: preemption paths ran */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_operations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
