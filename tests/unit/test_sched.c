/* Scheduler scenarios (docs/engine-runtime.md; mirroring
 * tests/v1/core/test_scheduler.py): FCFS preemption of the last running
 * request, priority preemption of the lowest priority, priority order, and
 * chunked prefill vs head-of-line blocking. Plus the other scheduler rules
 * of the engine: no admission in a step that preempted, recompute on resume,
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
    /* the output of req1's step arrives after its preemption: the preempted
     * request is still updated with the sampled token */
    assert_int_equal(kv_sched_append_token(s, &r[1], 0.0), 0);
    assert_int_equal(r[1].num_output, 1);
    assert_int_equal(kv_req_num_tokens(&r[1]), 81);
    assert_int_equal(r[1].status, KV_REQ_PREEMPTED);
    kv_sched_destroy(s);
    kv_pool_destroy(pool);
    kv_req_release(&r[0]);
    kv_req_release(&r[1]);
}

/* vLLM's test_priority_scheduling_preemption_and_resumption_when_out_of_kv
 * (tests/v1/core/test_scheduler.py): 5 blocks (4 usable, 64 tokens),
 * max_num_seqs 2, budget 200. A low-priority request runs; a high-priority
 * one joins and fills the pool; the next step preempts the low one (already
 * scheduled in that step: it is taken out again), the high one finishes, and
 * the low one resumes with its 30 prompt and 2 decoded tokens. */
static void test_priority_preemption(void **state)
{
    (void)state;
    kv_engine *e = mk(5, 200, 2, 1, 1, KV_POLICY_PRIORITY, 200);
    kv_step_result res;
    kv_engine_info info;
    kv_step_detail d;
    int64_t low = submit(e, 30, 16, 1, 0.0);
    step_ok(e, &res); /* 1st schedule */
    assert_int_equal(res.num_new_reqs, 1);
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_waiting, 0);
    assert_int_equal(info.num_running, 1);
    int64_t high = submit(e, 32, 16, 0, 1.0);
    step_ok(e, &res); /* 2nd schedule: the KV cache is full */
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_free_blocks, 0);
    assert_int_equal(res.num_new_reqs, 1);
    assert_int_equal(res.num_scheduled_reqs, 2); /* one new, one cached */
    assert_int_equal(info.num_waiting, 0);
    assert_int_equal(info.num_running, 2);
    step_ok(e, &res); /* 3rd schedule: low needs 2 blocks, high 3: low is preempted */
    kv_engine_last_step(e, &d);
    assert_int_equal(res.num_new_reqs, 0);
    assert_int_equal(d.num_scheduled, 1);
    assert_int_equal(d.ids[0], high);
    assert_int_equal(status(e, low), KV_REQ_PREEMPTED);
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_waiting, 1);
    assert_int_equal(info.num_running, 1);
    /* finish the high one to make room (finish_requests: its blocks are freed) */
    assert_int_equal(kv_engine_abort(e, high, NULL, 0), 0);
    step_ok(e, &res); /* 4th schedule: the resumption */
    kv_engine_last_step(e, &d);
    assert_int_equal(d.num_scheduled, 1);
    assert_int_equal(d.ids[0], low);
    assert_int_equal(d.first_admitted, 0);
    assert_int_equal(d.resumed[0], 1);
    kv_engine_get_info(e, &info);
    assert_int_equal(info.num_waiting, 0);
    assert_int_equal(info.num_running, 1);
    kv_request_view v;
    assert_int_equal(kv_engine_request(e, low, &v), 0);
    /* resumed with 30 prompt tokens and 2 decoded ones (the 3rd comes from this step) */
    assert_int_equal(v.num_tokens, 33);
    assert_int_equal(v.num_output_tokens, 3);
    kv_engine_destroy(e);
}

static kv_engine *mk_rules(int32_t num_blocks, int32_t budget, int32_t max_seqs, kv_sched_policy policy,
                           const kv_sched_rules *rules)
{
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = num_blocks;
    c.block_size = 16;
    c.max_num_batched_tokens = budget;
    c.max_num_seqs = max_seqs;
    c.enable_prefix_caching = 0;
    c.scheduling_policy = policy;
    c.max_model_len = 1024;
    c.verify = 1;
    if (rules)
        c.sched_rules = *rules;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e)
        fail_msg("create: %s", err);
    return e;
}

/* A step that preempts admits nobody, even a waiting request that would fit
 * the blocks the victim freed (scheduler.py: "if not preempted_reqs"). A and
 * B fill the pool; C (priority between them) waits for a sequence slot; when
 * A's next token needs a block, B is preempted and C stays waiting until the
 * next step. */
static void test_no_admission_in_preempting_step(void **state)
{
    (void)state;
    kv_engine *e = mk_rules(7, 512, 2, KV_POLICY_PRIORITY, NULL); /* 6 usable blocks */
    kv_step_result res;
    int64_t a = submit(e, 48, 40, 0, 0.0);
    int64_t b = submit(e, 48, 40, 5, 0.1);
    step_ok(e, &res);
    assert_int_equal(res.num_new_reqs, 2);
    int64_t c = submit(e, 16, 2, 1, 0.2);
    step_ok(e, &res); /* A's token 49 needs a 4th block: B goes */
    assert_int_equal(res.num_preempted, 1);
    assert_int_equal(status(e, b), KV_REQ_PREEMPTED);
    assert_int_equal(res.num_new_reqs, 0);
    assert_int_equal(status(e, c), KV_REQ_WAITING);
    step_ok(e, &res); /* now C (priority 1, ahead of B) is admitted */
    assert_int_equal(res.num_preempted, 0);
    assert_int_equal(res.num_new_reqs, 1);
    assert_int_equal(status(e, c), KV_REQ_RUNNING);
    assert_int_equal(status(e, a), KV_REQ_RUNNING);
    kv_engine_destroy(e);
}

/* A priority victim already scheduled in the step gives its tokens back to
 * the budget (scheduler.py 0.11.1 and later: token_budget += ...), so a
 * request after the one that preempted gets them. Budget 32: low (priority 9,
 * 5 blocks) decodes first, x's token needs a block of a full pool, low is
 * preempted, and y's prefill chunk takes the 31 tokens left (30 without the
 * refund). Before 0.11.1 the victim kept its place and its token, and the
 * scan skipped the request after the one that preempted. */
static void test_priority_victim_refund(void **state)
{
    (void)state;
    kv_sched_rules ru;
    kv_sched_rules_default(&ru);
    ru.reserve_full_prompt = 0; /* y's 400-token prompt is admitted by its first chunk */
    for (int old = 0; old <= 1; old++) {
        ru.priority_unschedule_victim = !old;
        kv_engine *e = mk_rules(8, 32, 4, KV_POLICY_PRIORITY, &ru); /* 7 usable blocks */
        kv_step_result res;
        kv_step_detail d;
        int64_t low = submit(e, 64, 40, 9, 0.0);
        step_ok(e, &res);
        step_ok(e, &res); /* low's 64-token prompt in two chunks of 32 */
        int64_t x = submit(e, 16, 40, 0, 0.1);
        int64_t y = submit(e, 100, 2, 1, 0.2);
        step_ok(e, &res); /* low 1 (5th block), x 16 (1 block), y 15 (1 block): 7 used */
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        assert_int_equal(info.num_free_blocks, 0);
        step_ok(e, &res); /* low 1, then x's token 17 needs a block: low is preempted */
        kv_engine_last_step(e, &d);
        assert_int_equal(d.num_preempted, 1);
        assert_int_equal(d.preempted[0], low);
        if (!old) {
            assert_int_equal(d.num_scheduled, 2);
            assert_int_equal(d.ids[0], x);
            assert_int_equal(d.ids[1], y);
            assert_int_equal(d.num_tokens[1], 31);
            assert_int_equal(res.num_scheduled_tokens, 32);
        } else {
            /* 0.11.0: low keeps its token in the step, and the scan, not moved
             * back, steps over y */
            assert_int_equal(d.num_scheduled, 2);
            assert_int_equal(d.ids[0], low);
            assert_int_equal(d.ids[1], x);
            assert_int_equal(res.num_scheduled_tokens, 2);
        }
        kv_engine_destroy(e);
    }
}

/* Priority policy, 0.33: when the lowest-priority running request preempts
 * itself, the ones after it still run in that step (before 0.33 the running
 * phase ended there and the step was empty for them). */
static void test_priority_self_preemption(void **state)
{
    (void)state;
    kv_sched_rules ru;
    kv_sched_rules_default(&ru);
    for (int v033 = 0; v033 <= 1; v033++) {
        ru.priority_self_continue = v033;
        kv_engine *e = mk_rules(7, 256, 4, KV_POLICY_PRIORITY, &ru); /* 6 usable blocks */
        kv_step_result res;
        kv_step_detail d;
        int64_t lo = submit(e, 32, 50, 9, 0.0); /* admitted first: first in running */
        step_ok(e, &res);
        int64_t hi = submit(e, 31, 50, 0, 0.1);
        int steps = 0;
        do { /* decode until lo's next token needs a block of the full pool */
            step_ok(e, &res);
        } while (res.num_preempted == 0 && ++steps < 40);
        kv_engine_last_step(e, &d);
        assert_int_equal(d.num_preempted, 1);
        assert_int_equal(d.preempted[0], lo);
        if (v033) { /* hi still ran in that step */
            assert_int_equal(d.num_scheduled, 1);
            assert_int_equal(d.ids[0], hi);
            assert_int_equal(res.num_scheduled_tokens, 1);
        } else {
            assert_int_equal(d.num_scheduled, 0);
            assert_int_equal(res.num_scheduled_tokens, 0);
        }
        kv_engine_destroy(e);
    }
}

/* scheduler_reserve_full_isl (0.19 and later, default True): a waiting
 * request is admitted only if its whole prompt fits the free blocks, not
 * just its first chunk. A holds 4 of 10 blocks; B's 128-token prompt needs 8,
 * its first 63-token chunk only 4. */
static void test_reserve_full_prompt(void **state)
{
    (void)state;
    kv_sched_rules ru;
    kv_sched_rules_default(&ru);
    for (int full = 0; full <= 1; full++) {
        ru.reserve_full_prompt = full;
        kv_engine *e = mk_rules(11, 64, 8, KV_POLICY_FCFS, &ru);
        kv_step_result res;
        submit(e, 60, 20, 0, 0.0);
        step_ok(e, &res); /* A: 60 tokens, 4 blocks */
        int64_t b = submit(e, 128, 4, 0, 0.1);
        step_ok(e, &res);
        assert_int_equal(res.num_new_reqs, full ? 0 : 1);
        assert_int_equal(status(e, b), full ? KV_REQ_WAITING : KV_REQ_RUNNING);
        kv_engine_destroy(e);
    }
}

/* SchedulerConfig.watermark (0.24 and later): int(watermark x num_blocks)
 * blocks stay free when a waiting request is admitted while others run;
 * with nothing running the watermark does not apply. */
static void test_admission_watermark(void **state)
{
    (void)state;
    kv_sched_rules ru;
    kv_sched_rules_default(&ru);
    for (int wm = 0; wm <= 1; wm++) {
        ru.watermark = wm ? 0.2 : 0.0; /* 11 blocks: 2 kept free */
        kv_engine *e = mk_rules(11, 256, 8, KV_POLICY_FCFS, &ru);
        kv_step_result res;
        int64_t a = submit(e, 64, 2, 0, 0.0); /* 4 blocks + 1 for its output: admitted, nothing runs yet */
        step_ok(e, &res);
        assert_int_equal(status(e, a), KV_REQ_RUNNING);
        int64_t b = submit(e, 80, 3, 0, 0.1); /* 5 blocks of the 5 free (A takes 1 more this step) */
        step_ok(e, &res);
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        assert_int_equal(status(e, b), wm ? KV_REQ_WAITING : KV_REQ_RUNNING);
        kv_engine_destroy(e);
    }
}

/* Chunked prefill off, a waiting prompt over the token budget: 0.9.2-0.11.x
 * skip it and admit the ones behind it, putting it back at the head; 0.12
 * and later stop admitting there. */
static void test_unchunkable_prompt(void **state)
{
    (void)state;
    kv_sched_rules ru;
    kv_sched_rules_default(&ru);
    for (int skip = 0; skip <= 1; skip++) {
        ru.skip_unchunkable = skip;
        kv_engine_config c;
        kv_engine_config_default(&c);
        c.num_blocks = 64;
        c.max_num_batched_tokens = 256;
        c.max_model_len = 256;
        c.max_num_seqs = 3;
        c.enable_chunked_prefill = 0;
        c.enable_prefix_caching = 0;
        c.sched_rules = ru;
        c.verify = 1;
        char err[256];
        kv_engine *e = kv_engine_create(&c, err, sizeof err);
        if (!e)
            fail_msg("create: %s", err);
        kv_step_result res;
        submit(e, 100, 30, 0, 0.0);
        submit(e, 100, 30, 0, 0.0);
        step_ok(e, &res); /* A and A2 run */
        int64_t big = submit(e, 255, 1, 0, 0.1);   /* 255 > 256 - 2 left after two decodes */
        int64_t small = submit(e, 20, 2, 0, 0.2);
        int64_t late = submit(e, 20, 2, 0, 0.3); /* max_num_seqs 3: no room left for it */
        step_ok(e, &res);
        assert_int_equal(status(e, big), KV_REQ_WAITING);
        assert_int_equal(status(e, small), skip ? KV_REQ_RUNNING : KV_REQ_WAITING);
        assert_int_equal(status(e, late), KV_REQ_WAITING);
        int64_t w[4];
        assert_int_equal(kv_engine_waiting(e, w, 4), skip ? 2 : 3);
        assert_int_equal(w[0], big); /* back at the head, ahead of the late one */
        assert_int_equal(w[skip ? 1 : 2], late);
        kv_engine_destroy(e);
    }
}

/* long_prefill_token_threshold caps a prefill chunk; 0.31 and later only
 * while more than one request is running or waiting. */
static void test_long_prefill_threshold(void **state)
{
    (void)state;
    kv_sched_rules ru;
    kv_sched_rules_default(&ru);
    for (int two = 0; two <= 1; two++) {
        ru.long_prefill_needs_two = two;
        kv_engine_config c;
        kv_engine_config_default(&c);
        c.num_blocks = 64;
        c.max_num_batched_tokens = 512;
        c.long_prefill_token_threshold = 16;
        c.max_model_len = 512;
        c.sched_rules = ru;
        c.verify = 1;
        char err[256];
        kv_engine *e = kv_engine_create(&c, err, sizeof err);
        if (!e)
            fail_msg("create: %s", err);
        kv_step_result res;
        submit(e, 100, 2, 0, 0.0);
        step_ok(e, &res);
        assert_int_equal(res.num_scheduled_tokens, two ? 100 : 16);
        submit(e, 100, 2, 0, 0.1);
        step_ok(e, &res); /* two requests now: both capped (the first is decoding or still prefilling) */
        kv_step_detail d;
        kv_engine_last_step(e, &d);
        assert_int_equal(d.num_tokens[d.num_scheduled - 1], 16);
        kv_engine_destroy(e);
    }
}

/* Prefix-cache stats: 0.27 and later once per admission; before, at every
 * lookup, also while the request waits for room. */
static void test_prefix_stats_timing(void **state)
{
    (void)state;
    kv_sched_rules ru;
    kv_sched_rules_default(&ru);
    for (int adm = 0; adm <= 1; adm++) {
        ru.stats_at_admission = adm;
        kv_engine_config c;
        kv_engine_config_default(&c);
        c.num_blocks = 9; /* 8 usable blocks */
        c.max_num_batched_tokens = 256;
        c.max_model_len = 1024;
        c.sched_rules = ru;
        c.verify = 1;
        char err[256];
        kv_engine *e = kv_engine_create(&c, err, sizeof err);
        if (!e)
            fail_msg("create: %s", err);
        kv_step_result res;
        submit(e, 100, 10, 0, 0.0); /* 7 blocks, then 8 with its output */
        step_ok(e, &res);
        submit(e, 40, 2, 0, 0.1); /* needs 3: waits until A finishes */
        int waited = 0;
        kv_engine_info info;
        for (int i = 0; i < 30; i++) {
            kv_engine_get_info(e, &info);
            if (info.num_waiting == 0)
                break;
            step_ok(e, &res);
            waited++;
        }
        assert_true(waited > 2);
        kv_engine_metrics m;
        kv_engine_get_metrics(e, &m);
        /* queries: A's 100 once, B's 40 once per lookup (or once) */
        if (adm)
            assert_int_equal(m.prefix_cache_queries, 140);
        else
            assert_true(m.prefix_cache_queries >= 100 + 40 * 3);
        kv_engine_destroy(e);
    }
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
        cmocka_unit_test(test_no_admission_in_preempting_step),
        cmocka_unit_test(test_priority_victim_refund),
        cmocka_unit_test(test_priority_self_preemption),
        cmocka_unit_test(test_reserve_full_prompt),
        cmocka_unit_test(test_admission_watermark),
        cmocka_unit_test(test_unchunkable_prompt),
        cmocka_unit_test(test_long_prefill_threshold),
        cmocka_unit_test(test_prefix_stats_timing),
        cmocka_unit_test(test_priority_order),
        cmocka_unit_test(test_schedule_order),
        cmocka_unit_test(test_preempt_then_resume),
        cmocka_unit_test(test_too_long_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
