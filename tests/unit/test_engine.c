/* The kv_engine facade: events, snapshots, modes, tensor-parallel ranks, the
 * device read-back, the time model, metrics, the plan glue, bad input, and
 * the capacity arithmetic of vLLM's KV cache sizing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kv_device_host.h"
#include "kv_engine.h"
#include "kv_release.h"
#include "kv_plan.h"
#include "kv_timemodel.h"
#include "kv_util.h"

static kv_engine *mk(int32_t num_blocks, int32_t bs, int32_t max_model_len, kv_engine_mode mode)
{
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = num_blocks;
    c.block_size = bs;
    c.max_model_len = max_model_len;
    c.max_num_batched_tokens = 2048;
    c.max_num_seqs = 16;
    c.mode = mode;
    c.verify = 1;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e)
        fail_msg("create: %s", err);
    return e;
}

static int64_t submit(kv_engine *e, int32_t prompt, int32_t out, const char *prefix, int32_t prefix_len)
{
    kv_request_spec s = {0};
    s.prompt_tokens = prompt;
    s.output_tokens = out;
    s.prefix_id = prefix;
    s.prefix_tokens = prefix_len;
    s.arrival_s = -1;
    char err[512];
    int64_t id = kv_engine_submit(e, &s, err, sizeof err);
    if (id < 0)
        fail_msg("submit: %s", err);
    return id;
}

static void run_all(kv_engine *e)
{
    char err[512];
    for (int i = 0; i < 10000; i++) {
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        if (!info.num_running && !info.num_waiting)
            return;
        if (kv_engine_step(e, NULL, err, sizeof err) < 0)
            fail_msg("step: %s", err);
        assert_int_equal(kv_engine_check(e, err, sizeof err), 0);
    }
    fail_msg("did not finish");
}

static int32_t count_type(const kv_event *ev, int32_t n, kv_event_type t, int64_t req)
{
    int32_t c = 0;
    for (int32_t i = 0; i < n; i++)
        if (ev[i].type == t && (req < 0 || ev[i].req_id == req))
            c++;
    return c;
}

static void test_events(void **state)
{
    (void)state;
    kv_engine *e = mk(11, 16, 1024, KV_MODE_PAGED);
    static kv_event ev[4096];
    int32_t n = kv_engine_events_since(e, 0, ev, 4096);
    assert_true(n >= 1);
    assert_int_equal(ev[0].type, KV_EV_LOG);
    assert_non_null(ev[0].text);
    uint64_t mark = kv_engine_last_event_seq(e);

    int64_t a = submit(e, 40, 4, "sys", 32); /* 72 tokens: 4 full blocks + 8 */
    char err[256];
    assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    n = kv_engine_events_since(e, mark, ev, 4096);
    assert_int_equal(count_type(ev, n, KV_EV_ADMIT, a), 1);
    assert_int_equal(count_type(ev, n, KV_EV_ALLOC, a), 5);
    assert_int_equal(count_type(ev, n, KV_EV_CACHE_STORE, a), 4);
    for (int32_t i = 1; i < n; i++)
        assert_true(ev[i].seq == ev[i - 1].seq + 1);
    run_all(e);
    mark = ev[n - 1].seq;
    n = kv_engine_events_since(e, mark, ev, 4096);
    assert_int_equal(count_type(ev, n, KV_EV_FINISH, a), 1);
    assert_int_equal(count_type(ev, n, KV_EV_FREE, a), 5);

    /* same prefix: the two prefix blocks are hits */
    mark = kv_engine_last_event_seq(e);
    int64_t b = submit(e, 10, 2, "sys", 32);
    assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    n = kv_engine_events_since(e, mark, ev, 4096);
    assert_int_equal(count_type(ev, n, KV_EV_CACHE_HIT, b), 2);
    kv_request_view v;
    assert_int_equal(kv_engine_request(e, b, &v), 0);
    assert_int_equal(v.num_cached_tokens, 32);
    run_all(e);
    /* a big unrelated request must evict cached blocks */
    mark = kv_engine_last_event_seq(e);
    int64_t c = submit(e, 150, 2, NULL, 0);
    assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    n = kv_engine_events_since(e, mark, ev, 4096);
    assert_true(count_type(ev, n, KV_EV_EVICT, c) >= 1);
    assert_int_equal(kv_engine_events_since(e, kv_engine_last_event_seq(e), ev, 4096), 0);
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    assert_int_equal(m.prefix_cache_hits, 32);
    assert_true(m.block_evictions >= 1);
    kv_engine_destroy(e);
}

static void test_event_ring_wraps(void **state)
{
    (void)state;
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 64;
    c.event_capacity = 64;
    char err[256];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    assert_non_null(e);
    for (int i = 0; i < 100; i++)
        kv_engine_log(e, 0, "line %d", i);
    kv_event ev[128];
    int32_t n = kv_engine_events_since(e, 0, ev, 128);
    assert_int_equal(n, 64);
    assert_true(ev[0].seq > 1); /* the gap shows */
    assert_int_equal(ev[63].seq, kv_engine_last_event_seq(e));
    assert_string_equal(ev[63].text, "line 99");
    kv_engine_destroy(e);
}

static void test_snapshots(void **state)
{
    (void)state;
    kv_engine *e = mk(20, 16, 1024, KV_MODE_PAGED);
    int64_t a = submit(e, 20, 50, "p", 32);
    int64_t b = submit(e, 20, 50, "p", 32);
    char err[256];
    assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    int32_t ta[16], tb[16];
    int32_t na = kv_engine_block_table(e, a, ta, 16), nb = kv_engine_block_table(e, b, tb, 16);
    assert_int_equal(na, 4);
    assert_int_equal(nb, 4);
    /* the prefix blocks are shared: same ids, ref 2, owners a and b */
    assert_int_equal(ta[0], tb[0]);
    assert_int_equal(ta[1], tb[1]);
    assert_true(ta[2] != tb[2]);
    kv_block_view bv[20];
    assert_int_equal(kv_engine_blocks(e, bv, 20), 20);
    /* The brief snapshot is the same except for the free-queue positions. */
    kv_block_view brief[20];
    assert_int_equal(kv_engine_blocks_brief(e, brief, 20), 20);
    for (int i = 0; i < 20; i++) {
        assert_int_equal(brief[i].free_pos, -1);
        kv_block_view full = bv[i];
        full.free_pos = -1;
        assert_memory_equal(&brief[i], &full, sizeof full);
    }
    assert_true(bv[0].is_null);
    assert_int_equal(bv[ta[0]].ref_cnt, 2);
    assert_int_equal(bv[ta[0]].num_owners, 2);
    assert_int_equal(bv[ta[0]].owner, a);
    assert_true(bv[ta[0]].has_hash);
    int64_t owners[4];
    assert_int_equal(kv_engine_block_owners(e, ta[0], owners, 4), 2);
    assert_int_equal(owners[0], a);
    assert_int_equal(owners[1], b);
    kv_block_view one;
    assert_int_equal(kv_engine_block(e, ta[0], &one), 0);
    assert_int_equal(one.ref_cnt, 2);
    assert_int_equal(kv_engine_block(e, 99, &one), KV_ENGINE_EINVAL);
    int32_t q[32];
    int32_t nq = kv_engine_free_queue(e, q, 32);
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    assert_int_equal(nq, info.num_free_blocks);
    for (int32_t i = 0; i < nq; i++)
        assert_int_equal(bv[q[i]].free_pos, i);
    assert_int_equal(kv_engine_token(e, a, 0), kv_engine_token(e, b, 0)); /* shared prefix ids */
    assert_true(kv_engine_token(e, a, 40) != kv_engine_token(e, b, 40) ||
                kv_engine_token(e, a, 41) != kv_engine_token(e, b, 41));
    kv_engine_destroy(e);
}

static void test_contiguous_mode(void **state)
{
    (void)state;
    kv_engine *e = mk(40, 4, 64, KV_MODE_CONTIGUOUS); /* slab = 16 blocks; 39 usable -> 2 slabs */
    int64_t ids[3];
    for (int i = 0; i < 3; i++)
        ids[i] = submit(e, 10, 20, NULL, 0);
    char err[256];
    assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_running, 2);
    assert_int_equal(info.num_waiting, 1);
    int32_t t[32];
    assert_int_equal(kv_engine_block_table(e, ids[0], t, 32), 16);
    for (int i = 1; i < 16; i++)
        assert_int_equal(t[i], t[i - 1] + 1); /* one slab of consecutive blocks */
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    assert_int_equal(m.reserved_tokens, 128);
    assert_int_equal(m.used_tokens, 20);
    assert_true(m.internal_fragmentation > 0.8);
    kv_request_view v;
    assert_int_equal(kv_engine_request(e, ids[0], &v), 0);
    assert_int_equal(v.reserved_tokens, 64);
    assert_int_equal(kv_engine_set_mode(e, KV_MODE_PAGED, err, sizeof err), KV_ENGINE_EBUSY);
    run_all(e);
    assert_int_equal(kv_engine_set_mode(e, KV_MODE_PAGED, err, sizeof err), 0);
    /* the same three requests paged: all run at once */
    for (int i = 0; i < 3; i++)
        submit(e, 10, 20, NULL, 0);
    assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_running, 3);
    /* a slab larger than the pool can never be scheduled */
    kv_engine_destroy(e);
    e = mk(10, 4, 64, KV_MODE_CONTIGUOUS);
    kv_request_spec s = {0};
    s.prompt_tokens = 4;
    s.output_tokens = 1;
    assert_int_equal(kv_engine_submit(e, &s, err, sizeof err), KV_ENGINE_ENOFIT);
    assert_non_null(strstr(err, "slab"));
    kv_engine_destroy(e);
}

static void test_no_cache_mode(void **state)
{
    (void)state;
    kv_engine_metrics m[2];
    double clock[2];
    for (int mode = 0; mode < 2; mode++) {
        kv_engine *e = mk(256, 16, 4096, mode ? KV_MODE_NO_CACHE : KV_MODE_PAGED);
        submit(e, 3000, 5, NULL, 0);
        char err[256];
        while (kv_engine_step(e, NULL, err, sizeof err) > 0) {
            kv_engine_info info;
            kv_engine_get_info(e, &info);
            if (mode)
                assert_int_equal(info.num_free_blocks, 255); /* nothing kept */
        }
        kv_engine_get_metrics(e, &m[mode]);
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        clock[mode] = info.clock_s;
        kv_engine_destroy(e);
    }
    for (int mode = 0; mode < 2; mode++) {
        assert_int_equal(m[mode].work_tokens_with_cache, 3000 + 4);
        assert_int_equal(m[mode].work_tokens_without_cache, 3000 + 3001 + 3002 + 3003 + 3004);
        assert_int_equal(m[mode].generation_tokens_total, 5);
    }
    assert_int_equal(m[0].computed_tokens, 3004);
    assert_int_equal(m[1].computed_tokens, 3000 + 3001 + 3002 + 3003 + 3004);
    assert_true(clock[1] > 3 * clock[0]); /* every token redoes a compute-bound prefill */
}

static void test_tp_ranks(void **state)
{
    (void)state;
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 32;
    c.verify = 1;
    char err[256];
    int32_t tps[3] = {1, 4, 16};
    uint64_t bpb[3];
    for (int i = 0; i < 3; i++) {
        c.tensor_parallel_size = tps[i];
        kv_engine *e = kv_engine_create(&c, err, sizeof err);
        assert_non_null(e);
        kv_rank_view r;
        assert_int_equal(kv_engine_rank(e, tps[i] - 1, &r), 0);
        assert_int_equal(kv_engine_rank(e, tps[i], &r), KV_ENGINE_EINVAL);
        bpb[i] = r.bytes_per_block;
        if (tps[i] == 4) {
            assert_int_equal(r.num_kv_heads, 2);
            assert_int_equal(r.first_kv_head, 6);
            assert_int_equal(r.replicated, 0);
        }
        if (tps[i] == 16) {
            assert_int_equal(r.num_kv_heads, 1);
            assert_int_equal(r.replicated, 1);
            assert_int_equal(r.first_kv_head, 7);
        }
        assert_true(r.terms[KV_TERM_KV_CACHE] == (double)r.pool_bytes);
        /* every rank holds the same blocks: one block table, checked per rank */
        submit(e, 50, 10, NULL, 0);
        run_all(e);
        kv_engine_destroy(e);
    }
    assert_true(bpb[0] == 2ull * 16 * 32 * 8 * 128 * 2);
    assert_true(bpb[1] == bpb[0] / 4);
    assert_true(bpb[2] == bpb[0] / 8); /* past 8 ranks the per-GPU KV stops shrinking */
}

static void test_verify_detects_corruption(void **state)
{
    (void)state;
    char err[256];
    kv_device *d = kv_device_host_open(1, 0, err, sizeof err);
    assert_non_null(d);
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 32;
    c.verify = 1;
    c.device = d;
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    assert_non_null(e);
    int64_t id = submit(e, 40, 20, NULL, 0);
    assert_true(kv_engine_step(e, NULL, err, sizeof err) > 0);
    assert_int_equal(kv_engine_verify(e, err, sizeof err), 0);
    int32_t t[8];
    kv_engine_block_table(e, id, t, 8);
    kv_slot_write w = {(int64_t)t[1] * 16 + 3, kv_engine_token(e, id, 19) + 1, 19, 0};
    assert_int_equal(d->ops->write_kv(d, 0, &w, 1, err, sizeof err), 0);
    assert_int_equal(kv_engine_verify(e, err, sizeof err), KV_ENGINE_EVERIFY);
    assert_non_null(strstr(err, "differ"));
    kv_engine_destroy(e);
    d->ops->destroy(d);
}

static void test_time_model(void **state)
{
    (void)state;
    kv_time_params p = {8e9, 16e9, 131072, 1e15, 3e12, 0, 1, 32, 4096};
    kv_step_work prefill = {0, 0, 0}, decode = {0, 0, 0};
    kv_timemodel_add_chunk(&prefill, 0, 4096);
    for (int i = 0; i < 32; i++)
        kv_timemodel_add_chunk(&decode, 1000, 1);
    kv_step_time tp, td;
    double t1 = kv_timemodel_step(&p, &prefill, &tp);
    double t2 = kv_timemodel_step(&p, &decode, &td);
    assert_false(tp.memory_bound);
    assert_true(td.memory_bound);
    /* prefill: 2 x 8e9 x 4096 + 2 x 32 x 4096 x (4096 x 4097 / 2) FLOPs at 1e15 */
    double f = 2 * 8e9 * 4096 + 2.0 * 32 * 4096 * (4096.0 * 4097 / 2);
    assert_true(t1 > f / 1e15 * 0.999 && t1 < f / 1e15 * 1.001);
    /* decode: weights + 32 x 1001 KV tokens read + 32 written, at 3e12 B/s */
    double b = 16e9 + 131072.0 * (32 * 1001 + 32);
    assert_true(t2 > b / 3e12 * 0.999 && t2 < b / 3e12 * 1.001);
    /* tp halves the FLOPs per rank and adds the all-reduce */
    p.tp = 2;
    p.link_bytes_per_s = 450e9;
    kv_step_time t2p;
    kv_timemodel_step(&p, &prefill, &t2p);
    assert_true(t2p.compute_s < tp.compute_s * 0.51);
    assert_true(t2p.comm_s > 0);
}

static void test_metrics_and_prometheus(void **state)
{
    (void)state;
    kv_engine *e = mk(64, 16, 1024, KV_MODE_PAGED);
    submit(e, 100, 10, "x", 64);
    submit(e, 100, 10, "x", 64);
    run_all(e);
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    assert_int_equal(m.request_success_total, 2);
    assert_int_equal(m.generation_tokens_total, 20);
    assert_int_equal(m.prompt_tokens_total, 328);
    assert_int_equal(m.prefix_cache_queries, 328);
    /* blocks are registered when allocated (before they are computed), so the
     * second request admitted in the same step already hits the 64-token prefix */
    assert_int_equal(m.prefix_cache_hits, 64);
    assert_int_equal(m.ttft.count, 2);
    assert_int_equal(m.itl.count, 18);
    assert_true(m.ttft.mean > 0 && m.itl.mean > 0 && m.e2e.mean >= m.ttft.mean);
    assert_true(m.peak_kv_usage > 0 && m.mean_kv_usage > 0 && m.mean_kv_usage <= m.peak_kv_usage);
    size_t need = kv_engine_prometheus(e, "m", NULL, 0);
    char *buf = malloc(need + 1);
    assert_int_equal(kv_engine_prometheus(e, "m", buf, need + 1), need);
    const char *names[] = {"vllm:kv_cache_usage_perc{model_name=\"m\"}", "vllm:num_requests_running",
                           "vllm:num_requests_waiting", "vllm:num_preemptions_total", "vllm:prefix_cache_queries_total{",
                           "vllm:prefix_cache_hits_total{", "vllm:prompt_tokens_total{model_name=\"m\"} 328",
                           "vllm:generation_tokens_total{model_name=\"m\"} 20",
                           "vllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 2",
                           "vllm:inter_token_latency_seconds_count", "vllm:e2e_request_latency_seconds_sum",
                           "# TYPE vllm:num_preemptions_total counter"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strstr(buf, names[i]))
            fail_msg("missing %s in:\n%s", names[i], buf);
    free(buf);
    kv_timeline_sample tl[64];
    int32_t n = kv_engine_timeline(e, tl, 64);
    assert_true(n > 5);
    for (int32_t i = 1; i < n; i++) {
        assert_true(tl[i].step > tl[i - 1].step);
        assert_true(tl[i].clock_s > tl[i - 1].clock_s);
    }
    kv_engine_destroy(e);
}

static void test_bad_input(void **state)
{
    (void)state;
    char err[512];
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 1;
    assert_null(kv_engine_create(&c, err, sizeof err));
    assert_non_null(strstr(err, "num_blocks"));
    kv_engine_config_default(&c);
    c.max_num_seqs = 512;
    c.max_num_batched_tokens = 256;
    assert_null(kv_engine_create(&c, err, sizeof err));
    assert_string_equal(err, "max_num_batched_tokens (256) must be greater than or equal to max_num_seqs (512).");

    kv_engine *e = mk(5, 16, 1024, KV_MODE_PAGED); /* 4 usable blocks = 64 tokens */
    kv_request_spec s = {0};
    s.prompt_tokens = 60;
    s.output_tokens = 10;
    assert_int_equal(kv_engine_submit(e, &s, err, sizeof err), KV_ENGINE_ENOFIT);
    assert_non_null(strstr(err, "only 4 usable blocks"));
    s.output_tokens = 0;
    assert_int_equal(kv_engine_submit(e, &s, err, sizeof err), KV_ENGINE_EINVAL);
    s.prompt_tokens = 0;
    s.output_tokens = 3;
    assert_int_equal(kv_engine_submit(e, &s, err, sizeof err), KV_ENGINE_EINVAL);
    assert_int_equal(kv_engine_abort(e, 12345, err, sizeof err), KV_ENGINE_ENOTFOUND);
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    assert_int_equal(m.requests_rejected, 3);
    kv_engine_destroy(e);
}

/* Limits are refused with the limit in the message, never cut to fit an
 * int32 (4294967304 used to become 8); a pool whose host memory exceeds
 * what the engine may take is refused before anything is allocated. */
static void test_limits_refused(void **state)
{
    (void)state;
    char err[512];
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.max_num_seqs = KV_ENGINE_MAX_NUM_SEQS + 1;
    c.max_num_batched_tokens = KV_ENGINE_MAX_NUM_SEQS + 1;
    assert_int_equal(kv_engine_config_check(&c, err, sizeof err), KV_ENGINE_ERANGE);
    assert_non_null(strstr(err, "1,048,576"));
    assert_null(kv_engine_create(&c, err, sizeof err));
    kv_engine_config_default(&c);
    c.max_num_batched_tokens = KV_ENGINE_MAX_TOKENS + 1;
    assert_int_equal(kv_engine_config_check(&c, err, sizeof err), KV_ENGINE_ERANGE);
    assert_non_null(strstr(err, "1,073,741,824"));
    /* host memory: the estimate grows with the pool, and a cap below it refuses */
    kv_engine_config_default(&c);
    c.num_blocks = 1000000;
    c.verify = 0;
    c.write_kv = 0;
    c.gpu_total_bytes = 0; /* the simulated card holds any pool: only host memory counts here */
    uint64_t need = kv_engine_host_bytes(&c);
    c.num_blocks = 2000000;
    assert_true(kv_engine_host_bytes(&c) > need + 1000000ull * 40);
    c.host_memory_bytes = need;
    assert_int_equal(kv_engine_config_check(&c, err, sizeof err), KV_ENGINE_ERANGE);
    assert_non_null(strstr(err, "host memory"));
    assert_non_null(strstr(err, "2,000,000 blocks"));
    assert_null(kv_engine_create(&c, err, sizeof err));
    c.num_blocks = 1000000;
    assert_int_equal(kv_engine_config_check(&c, err, sizeof err), 0);
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e)
        fail_msg("create: %s", err);
    kv_engine_destroy(e);
    /* writing K/V on the host backend adds 8 bytes per slot and rank */
    c.write_kv = 1;
    c.tensor_parallel_size = 2;
    assert_true(kv_engine_host_bytes(&c) >= need + 1000000ull * 16 * 8 * 2);
    /* a plan past a limit: ERANGE from the plan glue, not a truncated engine */
    kv_plan *p = calloc(1, sizeof *p);
    p->starts = 1;
    p->num_blocks = 1000;
    p->block_size = 16;
    p->max_model_len = 8192;
    p->max_num_seqs = 256;
    p->max_num_batched_tokens = 4294967304LL;
    kv_model m;
    memset(&m, 0, sizeof m);
    m.num_key_value_heads = 8;
    assert_int_equal(kv_engine_config_from_plan(p, &m, NULL, NULL, &c, NULL, 0, err, sizeof err), KV_ENGINE_ERANGE);
    assert_non_null(strstr(err, "--max-num-batched-tokens 4,294,967,304"));
    p->max_num_batched_tokens = 8192;
    p->max_num_seqs = 4294967304LL;
    assert_int_equal(kv_engine_config_from_plan(p, &m, NULL, NULL, &c, NULL, 0, err, sizeof err), KV_ENGINE_ERANGE);
    assert_non_null(strstr(err, "--max-num-seqs"));
    free(p);
}

/* The scheduling rules come from the release table row of --vllm-version
 * (kv_release.c), the newest when none is given. */
static void test_rules_by_release(void **state)
{
    (void)state;
    kv_plan *p = calloc(1, sizeof *p);
    p->starts = 1;
    p->num_blocks = 1000;
    p->block_size = 16;
    p->max_model_len = 8192;
    p->max_num_seqs = 256;
    p->max_num_batched_tokens = 8192;
    kv_model m;
    memset(&m, 0, sizeof m);
    m.num_key_value_heads = 8;
    kv_args a;
    kv_args_init(&a);
    kv_engine_config c;
    char err[256];
    assert_int_equal(kv_engine_config_from_plan(p, &m, NULL, &a, &c, NULL, 0, err, sizeof err), 0);
    assert_memory_equal(&c.sched_rules, kv_release_newest()->sched, sizeof c.sched_rules);
    assert_int_equal(c.sched_rules.reserve_full_prompt, 1);
    assert_int_equal(c.sched_rules.priority_self_continue, 1);
    const struct { const char *v; int full, unsched, self, free_first, at_adm, skip; } want[] = {
        {"0.11.0", 0, 0, 0, 0, 0, 1}, {"0.11.2", 0, 1, 0, 0, 0, 1}, {"0.12.0", 0, 1, 0, 0, 0, 0},
        {"0.19.0", 1, 1, 0, 0, 0, 0}, {"0.24.0", 1, 1, 0, 1, 0, 0}, {"0.27.0", 1, 1, 0, 1, 1, 0},
        {"0.33.0", 1, 1, 1, 1, 1, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(kv_args_set(&a, "vllm-version", want[i].v, err, sizeof err), 0);
        assert_int_equal(kv_engine_config_from_plan(p, &m, NULL, &a, &c, NULL, 0, err, sizeof err), 0);
        const kv_sched_rules *r = &c.sched_rules;
        if (r->reserve_full_prompt != want[i].full || r->priority_unschedule_victim != want[i].unsched ||
            r->priority_self_continue != want[i].self || r->free_uncached_first != want[i].free_first ||
            r->stats_at_admission != want[i].at_adm || r->skip_unchunkable != want[i].skip)
            fail_msg("vLLM %s: wrong scheduling rules", want[i].v);
    }
    /* vLLM's --scheduler-reserve-full-isl and --watermark override them, where they exist */
    assert_int_equal(kv_args_set(&a, "scheduler-reserve-full-isl", "false", err, sizeof err), 0);
    assert_int_equal(kv_args_set(&a, "watermark", "0.05", err, sizeof err), 0);
    assert_int_equal(kv_engine_config_from_plan(p, &m, NULL, &a, &c, NULL, 0, err, sizeof err), 0);
    assert_int_equal(c.sched_rules.reserve_full_prompt, 0);
    assert_true(c.sched_rules.watermark == 0.05);
    assert_int_equal(kv_args_set(&a, "vllm-version", "0.20", err, sizeof err), 0);
    assert_int_equal(kv_engine_config_from_plan(p, &m, NULL, &a, &c, NULL, 0, err, sizeof err), KV_ENGINE_ERANGE);
    assert_string_equal(err, "--watermark: vLLM 0.20 has no such flag (0.24.0 and later)");
    free(p);
}

/* Item 11 of section 11: capacity arithmetic, with the foundation's plan
 * helpers and the engine's pool sizing. */
static void test_capacity_math(void **state)
{
    (void)state;
    kv_plan *p = calloc(1, sizeof *p);
    p->num_layers = 32;
    p->block_size = 16;
    p->kv_heads_per_gpu = 32;
    p->head_size = 128;
    p->kv_factor = 2;
    p->kv_dtype_bytes = 2;
    p->page_size_bytes = 2 * 16 * 32 * 128 * 2;
    p->group_size = 32;
    p->num_kv_groups = 1;
    double avail = 8.0 * KV_GIB;
    assert_int_equal(kv_plan_estimate_max_model_len(p, avail, 16385), 16384);
    assert_int_equal(kv_plan_estimate_max_model_len(p, avail, 16383), 16383);
    free(p);
    /* max concurrency: 1536 blocks / cdiv(16384, 16) = 1.5 */
    assert_true(1536.0 / (double)kv_cdiv(16384, 16) == 1.5);
    /* get_kv_cache_configs: page 16*2*64*4*2 = 16384 B; memory 2 x 32 pages
     * over 2 layers -> 32 blocks; the engine's pool layout agrees */
    kv_pool_layout l = {32, 16, 2, 2, 64, 2, KV_DTYPE_FP32, 0};
    assert_true(kv_pool_layout_bytes(&l) == 2ull * 32 * 16384);
    kv_pool_layout one = l;
    one.num_blocks = 1;
    assert_int_equal((int64_t)(2ull * 32 * 16384 / kv_pool_layout_bytes(&one)), 32);
    /* num_gpu_blocks_override=16: the engine runs a pool of exactly that */
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 16;
    c.num_layers = 2;
    c.num_kv_heads = 2;
    c.head_size = 64;
    c.cache_dtype = KV_DTYPE_FP32;
    char err[256];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    assert_non_null(e);
    kv_rank_view r;
    kv_engine_rank(e, 0, &r);
    assert_true(r.pool_bytes == 16ull * 16384 * 2);
    kv_engine_destroy(e);
}

static void test_from_plan(void **state)
{
    (void)state;
    const char *src = getenv("KVLAB_SOURCE_DIR");
    char assets[1024];
    snprintf(assets, sizeof assets, "%s/assets", src ? src : KVLAB_SOURCE_DIR);
    kv_model m;
    char err[1024];
    if (kv_model_load("meta-llama/Llama-3.1-8B-Instruct", assets, &m, err, sizeof err) != 0)
        fail_msg("model: %s", err);
    kv_gpu_catalog cat;
    assert_int_equal(kv_gpu_catalog_load(assets, &cat, err, sizeof err), 0);
    const kv_gpu *g = kv_gpu_find(&cat, "rtx-4090", err, sizeof err);
    assert_non_null(g);
    kv_args a;
    kv_args_init(&a);
    kv_plan *plan = malloc(sizeof *plan);
    /* no --max-model-len: 131072 does not fit a 4090, vLLM's error */
    assert_null(kv_engine_create_vllm(&m, g, &a, NULL, plan, err, sizeof err));
    assert_non_null(strstr(err, "To serve at least one request"));
    assert_int_equal(plan->starts, 0);
    assert_int_equal(kv_args_set(&a, "max-model-len", "8192", err, sizeof err), 0);
    kv_engine *e = kv_engine_create_vllm(&m, g, &a, NULL, plan, err, sizeof err);
    if (!e)
        fail_msg("create_vllm: %s", err);
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_blocks, plan->num_blocks);
    assert_int_equal(kv_engine_get_config(e)->max_model_len, 8192);
    kv_rank_view r;
    kv_engine_rank(e, 0, &r);
    assert_true(r.terms[KV_TERM_WEIGHTS] == plan->weights_bytes);
    assert_true(r.bytes_per_block == (uint64_t)plan->page_size_bytes * (uint64_t)plan->num_layers);
    static kv_event ev[512];
    int32_t n = kv_engine_events_since(e, 0, ev, 512);
    int found = 0;
    for (int32_t i = 0; i < n; i++)
        if (ev[i].type == KV_EV_LOG && strstr(ev[i].text, "GPU KV cache size"))
            found = 1;
    assert_true(found);
    kv_engine_destroy(e);

    /* a model with sliding-window layers: one group, every layer in a block,
     * and the pool still fits the plan's KV memory */
    kv_model gm;
    if (kv_model_load("google/gemma-2-9b-it", assets, &gm, err, sizeof err) != 0)
        fail_msg("model: %s", err);
    const kv_gpu *h = kv_gpu_find(&cat, "h100-80gb", err, sizeof err);
    assert_non_null(h);
    kv_args_init(&a);
    assert_int_equal(kv_args_set(&a, "max-model-len", "4096", err, sizeof err), 0);
    assert_int_equal(kv_plan_compute_nofix(&gm, h, &a, plan, err, sizeof err), 0);
    assert_int_equal(plan->starts, 1);
    assert_true(plan->num_sliding_layers > 0);
    kv_engine_config c;
    char note[512];
    assert_int_equal(kv_engine_config_from_plan(plan, &gm, h, &a, &c, note, sizeof note, err, sizeof err), 0);
    assert_non_null(strstr(note, "sliding-window"));
    kv_engine *ge = kv_engine_create(&c, err, sizeof err);
    if (!ge)
        fail_msg("create: %s", err);
    kv_engine_rank(ge, 0, &r);
    assert_true((double)r.pool_bytes <= plan->available_kv_bytes);
    assert_true((double)r.pool_bytes > 0.99 * plan->available_kv_bytes - (double)r.bytes_per_block);
    kv_engine_destroy(ge);
    free(plan);
    kv_gpu_catalog_free(&cat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_event_ring_wraps),
        cmocka_unit_test(test_snapshots),
        cmocka_unit_test(test_contiguous_mode),
        cmocka_unit_test(test_no_cache_mode),
        cmocka_unit_test(test_tp_ranks),
        cmocka_unit_test(test_verify_detects_corruption),
        cmocka_unit_test(test_time_model),
        cmocka_unit_test(test_metrics_and_prometheus),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_limits_refused),
        cmocka_unit_test(test_rules_by_release),
        cmocka_unit_test(test_capacity_math),
        cmocka_unit_test(test_from_plan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
