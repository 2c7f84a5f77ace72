/* Scheduler scenarios (vllm-internals.md section 11, item 12, mirroring
 * tests/v1/core/test_scheduler.py): FCFS preemption of the last running
 * request, priority preemption of the lowest priority, priority order, and
 * chunked prefill vs head-of-line blocking. Plus the other scheduler rules
 * of issue #3: no admission in a step that preempted, recompute on resume,
 * max_model_len rejection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kv_engine.h"
#include "kv_kvcm.h"
#include "kv_pool.h"
#include "kv_req.h"
#include "kv_sched.h"

static kv_engine *mk(int32_t num_blocks, int32_t budget, int32_t max_seqs, int caching, int chunked,
                     kv_sched_policy policy, int32_t max_model_len)
{
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = num_blocks;
    c.block_size = 16;
    c.max_num_batched_tokens = budget;
    c.max_num_seqs = max_seqs;
    c.enable_prefix_caching = caching;
    c.enable_chunked_prefill = chunked;
    c.scheduling_policy = policy;
    c.max_model_len = max_model_len;
    c.verify = 1;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e)
        fail_msg("create: %s", err);
    return e;
}

static int64_t submit(kv_engine *e, int32_t prompt, int32_t out, int32_t prio, double arrival)
{
    kv_request_spec s = {0};
    s.prompt_tokens = prompt;
    s.output_tokens = out;
    s.priority = prio;
    s.arrival_s = arrival;
    char err[512];
    int64_t id = kv_engine_submit(e, &s, err, sizeof err);
    if (id < 0)
        fail_msg("submit: %s", err);
    return id;
}

static void step_ok(kv_engine *e, kv_step_result *r)
{
    char err[512];
    int rc = kv_engine_step(e, r, err, sizeof err);
    if (rc < 0)
        fail_msg("step: %s", err);
    assert_int_equal(kv_engine_check(e, err, sizeof err), 0);
}

static kv_req_status status(kv_engine *e, int64_t id)
{
    kv_request_view v;
    assert_int_equal(kv_engine_request(e, id, &v), 0);
    return v.status;
}

/* test_preempt_during_execution, replayed on the scheduler with vLLM's
 * pipelined order: schedule req0, schedule req1 before req0's output
 * arrives, then req0's token needs a 6th block -> FCFS preempts the last
 * running request (req1). */
static void test_preempt_during_execution(void **state)
{
    (void)state;
    kv_pool *pool = kv_pool_create(11, 0, NULL, 0);
    kv_kvcm m;
    kv_kvcm_init(&m, pool, 16, 4096, KV_MODE_PAGED, 0, 0);
    kv_sched_config sc = {128, 100, 4096, 0, 1, KV_POLICY_FCFS, KV_MODE_PAGED, 11, {0}};
    kv_sched_rules_default(&sc.rules);
    kv_sched *s = kv_sched_create(&sc, &m, 11, NULL, NULL, NULL, 0);
    kv_req r[2];
    memset(r, 0, sizeof r);
    for (int i = 0; i < 2; i++) {
        r[i].id = i;
        r[i].prompt_len = 80;
        r[i].max_output = 10;
        r[i].num_cached_tokens = -1;
        r[i].tok_seed = (uint64_t)i + 1;
        r[i].first_token_s = -1;
        kv_req_reserve(&r[i], 8);
        kv_req_update_hashes(&r[i], 16, m.none_hash);
    }
    kv_sched_output o0, o1, o2;
    kv_sched_add(s, &r[0]);
    kv_sched_schedule(s, &o0);
    assert_int_equal(o0.num_scheduled, 1);
    assert_int_equal(r[0].num_blocks, 5);
    kv_sched_add(s, &r[1]);
    kv_sched_schedule(s, &o1);
    assert_int_equal(o1.num_scheduled, 1);
    assert_ptr_equal(o1.scheduled[0], &r[1]);
    assert_int_equal(r[1].num_blocks, 5);
    assert_int_equal(kv_pool_num_free(pool), 0);
    /* req0's output arrives: one sampled token (81 tokens) */
    assert_int_equal(kv_sched_append_token(s, &r[0], 0.0), 0);
    kv_sched_schedule(s, &o2);
    assert_int_equal(o2.num_preempted, 1);
    assert_int_equal(kv_sched_num_running(s), 1);
    assert_ptr_equal(kv_sched_running_at(s, 0), &r[0]);
    assert_int_equal(r[1].status, KV_REQ_PREEMPTED);
    assert_int_equal(r[1].num_computed, 0);
    assert_int_equal(r[1].num_preemptions, 1);
    assert_int_equal(r[1].num_blocks, 0);
    assert_int_equal(r[0].num_blocks, 6);
    kv_sched_destroy(s);
    kv_pool_destroy(pool);
    kv_req_release(&r[0]);
    kv_req_release(&r[1]);
}

/* test_priority_scheduling_preemption: 6 blocks (5 usable). */
static void test_priority_preemption(void **state)
{
    (void)state;
    kv_engine *e = mk(6, 256, 16, 1, 1, KV_POLICY_PRIORITY, 1024);
    kv_step_result res;
    int64_t low = submit(e, 32, 40, 5, 0.0);
    step_ok(e, &res); /* prefill 32 tokens (2 blocks), samples -> 33 tokens */
    assert_int_equal(res.num_scheduled_tokens, 32);
    int64_t high = submit(e, 32, 40, 0, 0.001);
    step_ok(e, &res); /* low decodes into a 3rd block; high admitted with 2 */
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_running, 2);
    assert_int_equal(info.num_free_blocks, 0);
    step_ok(e, &res); /* high's token 33 needs a block: the low-priority one goes */
    assert_int_equal(res.num_preempted, 1);
    assert_int_equal(status(e, low), KV_REQ_PREEMPTED);
    assert_int_equal(status(e, high), KV_REQ_RUNNING);
    int64_t run[4];
    assert_int_equal(kv_engine_running(e, run, 4), 1);
    assert_int_equal(run[0], high);
    kv_engine_destroy(e);
}

/* priorities [2,1,1,0], arrivals [1,3,2,4] -> scheduled 3, 2, 1, 0 */
static void test_priority_order(void **state)
{
    (void)state;
    kv_engine *e = mk(64, 1024, 16, 1, 1, KV_POLICY_PRIORITY, 1024);
    int prio[4] = {2, 1, 1, 0};
    double arr[4] = {1, 3, 2, 4};
    for (int i = 0; i < 4; i++)
        submit(e, 10, 4, prio[i], arr[i]);
    int64_t w[4];
    assert_int_equal(kv_engine_waiting(e, w, 4), 4);
    int64_t want[4] = {3, 2, 1, 0};
    for (int i = 0; i < 4; i++)
        assert_int_equal(w[i], want[i]);
    kv_step_result res;
    step_ok(e, &res);
    int64_t run[4];
    assert_int_equal(kv_engine_running(e, run, 4), 4);
    for (int i = 0; i < 4; i++)
        assert_int_equal(run[i], want[i]);
    kv_engine_destroy(e);
}

/* test_schedule_order: budget 1024, max_num_seqs 3, two 800-token and two
 * 10-token requests: 2 scheduled with chunked prefill, 1 without. */
static void test_schedule_order(void **state)
{
    (void)state;
    for (int chunked = 1; chunked >= 0; chunked--) {
        kv_engine *e = mk(512, 1024, 3, 1, chunked, KV_POLICY_FCFS, 1024);
        submit(e, 800, 4, 0, 0);
        submit(e, 800, 4, 0, 0);
        submit(e, 10, 4, 0, 0);
        submit(e, 10, 4, 0, 0);
        kv_step_result res;
        step_ok(e, &res);
        assert_int_equal(res.num_scheduled_reqs, chunked ? 2 : 1);
        assert_int_equal(res.num_scheduled_tokens, chunked ? 1024 : 800);
        kv_engine_destroy(e);
    }
}

/* A step that preempts admits nobody; the preempted request goes to the
 * front of the queue, is recomputed later (prefix cache recovers most of
 * it), and everything finishes with every block free. */
static void test_preempt_then_resume(void **state)
{
    (void)state;
    kv_engine *e = mk(9, 512, 16, 1, 1, KV_POLICY_FCFS, 1024); /* 8 usable blocks */
    int64_t a = submit(e, 48, 40, 0, 0);
    int64_t b = submit(e, 48, 40, 0, 0);
    int64_t c = submit(e, 16, 4, 0, 0);
    kv_step_result res;
    int preempted_step = -1, admitted_in_preempt_step = 0;
    int64_t seen_preempt = 0;
    for (int i = 0; i < 400; i++) {
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        if (info.num_running == 0 && info.num_waiting == 0)
            break;
        step_ok(e, &res);
        if (res.num_preempted > 0) {
            if (preempted_step < 0)
                preempted_step = i;
            admitted_in_preempt_step += res.num_new_reqs;
            seen_preempt += res.num_preempted;
            int64_t w[8];
            int32_t nw = kv_engine_waiting(e, w, 8);
            assert_true(nw >= 1);
            kv_request_view v;
            assert_int_equal(kv_engine_request(e, w[0], &v), 0);
            assert_int_equal(v.status, KV_REQ_PREEMPTED);
            assert_int_equal(v.num_computed_tokens, 0);
        }
    }
    assert_true(preempted_step >= 0);
    assert_int_equal(admitted_in_preempt_step, 0);
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    assert_int_equal(m.num_preemptions_total, seen_preempt);
    assert_int_equal(m.request_success_total, 3);
    assert_true(m.recomputed_tokens > 0);
    assert_true(m.preempted_prefix_cache_queries > 0);
    assert_int_equal(status(e, a), KV_REQ_FINISHED);
    assert_int_equal(status(e, b), KV_REQ_FINISHED);
    assert_int_equal(status(e, c), KV_REQ_FINISHED);
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_free_blocks, 8);
    kv_engine_destroy(e);
}

static void test_too_long_rejected(void **state)
{
    (void)state;
    kv_engine *e = mk(64, 256, 16, 1, 1, KV_POLICY_FCFS, 256);
    kv_request_spec s = {0};
    s.prompt_tokens = 300;
    s.output_tokens = 4;
    char err[512];
    assert_int_equal(kv_engine_submit(e, &s, err, sizeof err), KV_ENGINE_ETOOLONG);
    assert_string_equal(err, "The decoder prompt (length 300) is longer than the maximum model length of 256. "
                             "Make sure that `max_model_len` is no smaller than the number of text tokens.");
    /* prompt fits, output would pass max_model_len: capped (finishes at 256 tokens) */
    s.prompt_tokens = 250;
    s.output_tokens = 100;
    int64_t id = kv_engine_submit(e, &s, err, sizeof err);
    assert_true(id >= 0);
    kv_step_result res;
    for (int i = 0; i < 50; i++)
        step_ok(e, &res);
    kv_request_view v;
    assert_int_equal(kv_engine_request(e, id, &v), 0);
    assert_int_equal(v.status, KV_REQ_FINISHED);
    assert_int_equal(v.num_tokens, 256);
    kv_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_preempt_during_execution),
        cmocka_unit_test(test_priority_preemption),
        cmocka_unit_test(test_priority_order),
        cmocka_unit_test(test_schedule_order),
        cmocka_unit_test(test_preempt_then_resume),
        cmocka_unit_test(test_too_long_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
