/* kv_frame: a frame captured from a known engine state holds the right
 * blocks, request block tables, metrics, ranks and log lines; it stays
 * whole after the engine moves on or is destroyed; its buffers are reused;
 * a pool prefix is widened when a block past it is in use. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kv_engine.h"
#include "kv_frame.h"

static kv_engine *mk(int32_t num_blocks, int32_t max_num_seqs, int32_t tp)
{
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = num_blocks;
    c.block_size = 16;
    c.max_model_len = 4096;
    c.max_num_batched_tokens = 2048;
    c.max_num_seqs = max_num_seqs;
    c.tensor_parallel_size = tp;
    c.verify = 0;
    c.write_kv = 0;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e) fail_msg("create: %s", err);
    return e;
}

/* A request of n explicit token ids, the first `shared` of them 1000+i (the
 * same in every request), the rest unique to `salt`. */
static int64_t submit_ids(kv_engine *e, int32_t n, int32_t shared, int32_t salt, int32_t out)
{
    int32_t ids[4096];
    for (int32_t i = 0; i < n; i++) ids[i] = i < shared ? 1000 + i : 5000 + salt * 1000 + i;
    kv_request_spec s = {0};
    s.prompt_token_ids = ids;
    s.num_prompt_token_ids = n;
    s.output_tokens = out;
    s.arrival_s = -1;
    char err[512];
    int64_t id = kv_engine_submit(e, &s, err, sizeof err);
    if (id < 0) fail_msg("submit: %s", err);
    return id;
}

static void step(kv_engine *e)
{
    char err[512];
    if (kv_engine_step(e, NULL, err, sizeof err) < 0) fail_msg("step: %s", err);
}

static void capture(kv_frame *f, const kv_engine *e, const kv_plan *p, const kv_frame_opts *o)
{
    char err[256];
    if (kv_frame_capture(f, e, p, o, err, sizeof err) != 0) fail_msg("capture: %s", err);
}

static int has_log(const kv_frame *f, const char *text, int level)
{
    for (int i = 0; i < f->nlog; i++)
        if (!strcmp(f->log[i], text) && f->log_level[i] == level) return 1;
    return 0;
}

/* The known state: A (48 tokens, ids shared with B's first 32) ran one step
 * alone, so its 3 full blocks 1, 2, 3 are in the prefix cache; then B and C
 * arrive with max_num_seqs 2: A decodes into a 4th block, B is admitted
 * with a 32-token hit on blocks 1 and 2 and a new block for the rest, C
 * waits holding nothing. */
static kv_engine *known_state(int64_t *a, int64_t *b, int64_t *c)
{
    kv_engine *e = mk(33, 2, 2);
    *a = submit_ids(e, 48, 32, 1, 8);
    step(e);
    *b = submit_ids(e, 48, 32, 2, 8);
    *c = submit_ids(e, 48, 0, 3, 8);
    step(e);
    return e;
}

static void test_known_state(void **state)
{
    (void)state;
    int64_t a, b, c;
    kv_engine *e = known_state(&a, &b, &c);
    kv_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.num_log = 1;
    snprintf(plan.log[0], sizeof plan.log[0], "INFO a start-up line of the plan");
    kv_engine_log(e, 0, "INFO a start-up line of the plan");
    kv_engine_log(e, 1, "WARNING the engine's own line");
    /* a plan line longer than the engine's log keeps: its cut copy is the plan's too */
    plan.num_log = 2;
    memset(plan.log[1], 'x', 400);
    memcpy(plan.log[1], "INFO long", 9);
    plan.log[1][400] = '\0';
    kv_engine_log(e, 0, "%s", plan.log[1]);

    static kv_frame f;
    kv_frame_init(&f);
    capture(&f, e, &plan, NULL);
    assert_true(f.has_engine);
    assert_true(f.has_plan);
    assert_string_equal(f.plan.log[0], "INFO a start-up line of the plan");

    /* Summary and config. */
    assert_int_equal(f.info.num_blocks, 33);
    assert_int_equal(f.info.block_size, 16);
    assert_int_equal(f.info.num_running, 2);
    assert_int_equal(f.info.num_waiting, 1);
    assert_int_equal(f.info.step, 2);
    assert_int_equal(f.info.num_free_blocks, 33 - 1 - 5);
    assert_int_equal(f.tensor_parallel_size, 2);
    assert_int_equal(f.max_num_seqs, 2);
    assert_int_equal(f.max_model_len, 4096);
    assert_string_equal(f.device_name, kv_engine_device_name(e));

    /* Requests: A then B running (scheduler order), C waiting with no blocks. */
    assert_int_equal(f.nrunning, 2);
    assert_int_equal(f.nwaiting, 1);
    assert_int_equal(f.nextra, 0);
    assert_int_equal(f.reqs[0].req.id, a);
    assert_int_equal(f.reqs[1].req.id, b);
    assert_int_equal(f.reqs[2].req.id, c);
    assert_int_equal(f.reqs[2].req.status, KV_REQ_WAITING);
    assert_int_equal(f.reqs[2].req.num_blocks, 0);
    const kv_frame_req *ra = kv_frame_find_req(&f, a), *rb = kv_frame_find_req(&f, b);
    assert_non_null(ra);
    assert_non_null(rb);
    assert_null(kv_frame_find_req(&f, 99));
    static const int32_t want_a[] = { 1, 2, 3, 4 }, want_b[] = { 1, 2, 5 };
    assert_int_equal(ra->req.num_blocks, 4);
    assert_memory_equal(kv_frame_table(&f, ra), want_a, sizeof want_a);
    assert_int_equal(rb->req.num_blocks, 3);
    assert_memory_equal(kv_frame_table(&f, rb), want_b, sizeof want_b);
    assert_int_equal(rb->req.num_cached_tokens, 32);
    assert_int_equal(ra->req.num_computed_tokens, 49);
    /* Every copied table and view is what the engine says. */
    for (int32_t i = 0; i < f.nrunning + f.nwaiting; i++) {
        const kv_frame_req *r = &f.reqs[i];
        kv_request_view rv;
        assert_int_equal(kv_engine_request(e, r->req.id, &rv), 0);
        assert_memory_equal(&rv, &r->req, sizeof rv);
        int32_t t[64];
        int32_t n = kv_engine_block_table(e, r->req.id, t, 64);
        assert_int_equal(n, r->req.num_blocks);
        if (n) assert_memory_equal(t, kv_frame_table(&f, r), (size_t)n * sizeof t[0]);
    }

    /* Blocks: the whole pool, equal to the engine's own snapshot. */
    static kv_block_view bv[33];
    assert_int_equal(f.nblocks, 33);
    assert_int_equal(kv_engine_blocks_brief(e, bv, 33), 33);
    assert_memory_equal(bv, f.blocks, sizeof bv);
    assert_true(f.blocks[0].is_null);
    assert_int_equal(f.blocks[1].ref_cnt, 2);
    assert_int_equal(f.blocks[2].ref_cnt, 2);
    assert_int_equal(f.blocks[3].ref_cnt, 1);
    assert_int_equal(f.blocks[5].owner, b);
    assert_true(f.blocks[6].is_free);
    assert_null(kv_frame_block(&f, 33));
    assert_int_equal(kv_frame_block(&f, 4)->owner, a);
    int64_t own[4];
    assert_int_equal(kv_frame_block_owners(&f, 2, own, 4), 2);
    assert_int_equal(own[0], a);
    assert_int_equal(own[1], b);
    assert_int_equal(kv_frame_block_owners(&f, 5, own, 4), 1);
    assert_int_equal(own[0], b);
    assert_int_equal(kv_frame_block_owners(&f, 6, own, 4), 0);
    int64_t own_e[4];
    for (int32_t blk = 0; blk < 33; blk++) {
        int32_t n = kv_engine_block_owners(e, blk, own_e, 4);
        assert_int_equal(kv_frame_block_owners(&f, blk, own, 4), n);
        if (n) assert_memory_equal(own, own_e, (size_t)(n < 4 ? n : 4) * sizeof own[0]);
    }

    /* Metrics and their timeline. */
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    assert_memory_equal(&m, &f.metrics, sizeof m);
    assert_int_equal(f.metrics.prefix_cache_hits, 32);
    assert_int_equal(f.metrics.num_requests_running, 2);
    assert_int_equal(f.ntimeline, 2);
    assert_int_equal(f.timeline[0].step, 0);
    assert_int_equal(f.timeline[1].step, 1);
    assert_int_equal(f.timeline[1].num_running, 2);

    /* Ranks. */
    assert_int_equal(f.nranks, 2);
    for (int r = 0; r < 2; r++) {
        kv_rank_view rv;
        assert_int_equal(kv_engine_rank(e, r, &rv), 0);
        assert_memory_equal(&rv, &f.ranks[r], sizeof rv);
    }
    assert_int_equal(f.ranks[1].first_kv_head, 4);

    /* Log: the engine's line, not the plan's own. */
    assert_true(has_log(&f, "WARNING the engine's own line", 1));
    assert_false(has_log(&f, "INFO a start-up line of the plan", 0));
    for (int i = 0; i < f.nlog; i++) assert_false(!strncmp(f.log[i], "INFO long", 9));

    /* The engine moves on: the frame still shows the step it was taken at. */
    kv_engine_abort_all(e);
    step(e);
    assert_int_equal(f.nrunning, 2);
    assert_memory_equal(kv_frame_table(&f, ra), want_a, sizeof want_a);
    assert_int_equal(f.blocks[1].ref_cnt, 2);
    assert_int_equal(f.info.num_running, 2);
    kv_engine_destroy(e);
    /* ... and after it is gone (ASan would see a read through the engine). */
    assert_memory_equal(kv_frame_table(&f, rb), want_b, sizeof want_b);
    assert_int_equal(kv_frame_block_owners(&f, 1, own, 4), 2);
    assert_true(has_log(&f, "WARNING the engine's own line", 1));
    kv_frame_free(&f);
}

/* Owners come back ascending by id even when the scheduler runs a later
 * request first (priority policy). */
static void test_owners_sorted(void **state)
{
    (void)state;
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 33;
    c.max_model_len = 4096;
    c.max_num_seqs = 4;
    c.scheduling_policy = KV_POLICY_PRIORITY;
    c.verify = 0;
    c.write_kv = 0;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e) fail_msg("create: %s", err);
    submit_ids(e, 48, 32, 1, 1); /* caches blocks of the shared 32 tokens, then finishes */
    step(e);
    int32_t ids[48];
    for (int i = 0; i < 48; i++) ids[i] = i < 32 ? 1000 + i : 9000 + i;
    kv_request_spec s = { .prompt_token_ids = ids, .num_prompt_token_ids = 48, .output_tokens = 8,
                          .priority = 5, .arrival_s = -1 };
    int64_t x = kv_engine_submit(e, &s, err, sizeof err);
    ids[40] = 77;
    s.priority = 0;
    int64_t y = kv_engine_submit(e, &s, err, sizeof err);
    assert_true(x >= 0 && y > x);
    step(e);
    static kv_frame f;
    kv_frame_init(&f);
    capture(&f, e, NULL, NULL);
    assert_int_equal(f.nrunning, 2);
    assert_int_equal(f.reqs[0].req.id, y); /* the more important one runs first */
    const int32_t shared = kv_frame_table(&f, &f.reqs[0])[0];
    int64_t own[2], own_e[2];
    assert_int_equal(kv_frame_block_owners(&f, shared, own, 2), 2);
    assert_int_equal(kv_engine_block_owners(e, shared, own_e, 2), 2);
    assert_int_equal(own[0], x);
    assert_int_equal(own[1], y);
    assert_memory_equal(own, own_e, sizeof own);
    /* Room for one: the lowest id. */
    assert_int_equal(kv_frame_block_owners(&f, shared, own, 1), 2);
    assert_int_equal(own[0], x);
    kv_engine_destroy(e);
    kv_frame_free(&f);
}

static void test_reuse_and_new_engine(void **state)
{
    (void)state;
    int64_t a, b, c;
    kv_engine *e = known_state(&a, &b, &c);
    static kv_frame f;
    kv_frame_init(&f);
    capture(&f, e, NULL, NULL);
    assert_false(f.has_plan);
    kv_block_view *blocks = f.blocks;
    kv_frame_req *reqs = f.reqs;
    int32_t *tables = f.tables;
    kv_engine_log(e, 0, "INFO line one");
    capture(&f, e, NULL, NULL);
    capture(&f, e, NULL, NULL);
    /* Same pool, same requests: the same buffers, the log line once. */
    assert_ptr_equal(f.blocks, blocks);
    assert_ptr_equal(f.reqs, reqs);
    assert_ptr_equal(f.tables, tables);
    int once = 0;
    for (int i = 0; i < f.nlog; i++) once += !strcmp(f.log[i], "INFO line one");
    assert_int_equal(once, 1);
    /* Current until the engine moves, the plan or the opts change. */
    assert_true(kv_frame_current(&f, e, NULL, NULL));
    kv_frame_opts o = { .blocks_prefix = 0, .extra_req = 7 };
    assert_false(kv_frame_current(&f, e, NULL, &o));
    kv_plan p0;
    memset(&p0, 0, sizeof p0);
    assert_false(kv_frame_current(&f, e, &p0, NULL));
    capture(&f, e, &p0, NULL);
    assert_true(kv_frame_current(&f, e, &p0, NULL));
    p0.num_blocks = 3;
    assert_false(kv_frame_current(&f, e, &p0, NULL));
    capture(&f, e, NULL, NULL);
    submit_ids(e, 20, 0, 7, 2); /* a submit records no event */
    assert_false(kv_frame_current(&f, e, NULL, NULL));
    capture(&f, e, NULL, NULL);
    assert_int_equal(f.nwaiting, 2);
    kv_engine_advance_clock(e, f.info.clock_s + 1.0);
    assert_false(kv_frame_current(&f, e, NULL, NULL));
    capture(&f, e, NULL, NULL);
    assert_true(kv_frame_current(&f, e, NULL, NULL));
    /* The block copy follows a step (a new event and step number). */
    step(e);
    assert_false(kv_frame_current(&f, e, NULL, NULL));
    capture(&f, e, NULL, NULL);
    static kv_block_view bv[33];
    kv_engine_blocks_brief(e, bv, 33);
    assert_memory_equal(bv, f.blocks, sizeof bv);
    kv_engine_destroy(e);

    /* No engine: an empty frame, the plan still there. */
    kv_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.num_blocks = 7;
    capture(&f, NULL, &plan, NULL);
    assert_false(f.has_engine);
    assert_true(f.has_plan);
    assert_int_equal(f.plan.num_blocks, 7);
    assert_int_equal(f.nblocks, 0);
    assert_int_equal(f.nrunning + f.nwaiting + f.nextra, 0);
    assert_int_equal(f.nlog, 0);
    assert_int_equal(f.nranks, 0);
    assert_true(kv_frame_current(&f, NULL, &plan, NULL));
    assert_false(kv_frame_current(&f, NULL, NULL, NULL));

    /* A new engine: nothing of the old one is kept. */
    kv_engine *e2 = mk(17, 4, 1);
    int64_t d = submit_ids(e2, 20, 0, 9, 2);
    step(e2);
    kv_frame_forget(&f);
    capture(&f, e2, NULL, NULL);
    assert_int_equal(f.nblocks, 17);
    assert_int_equal(f.nrunning, 1);
    assert_int_equal(f.reqs[0].req.id, d);
    assert_int_equal(f.reqs[0].req.num_blocks, 2);
    assert_int_equal(f.nranks, 1);
    for (int i = 0; i < f.nlog; i++) assert_string_not_equal(f.log[i], "INFO line one");
    /* Another live engine captured into the same frame without a forget:
     * still nothing of the first one. */
    kv_engine *e3 = mk(9, 4, 1);
    kv_engine_log(e2, 0, "INFO only in e2");
    capture(&f, e2, NULL, NULL);
    assert_true(has_log(&f, "INFO only in e2", 0));
    capture(&f, e3, NULL, NULL);
    assert_false(has_log(&f, "INFO only in e2", 0));
    assert_int_equal(f.nblocks, 9);
    assert_int_equal(f.nrunning, 0);
    kv_engine_destroy(e3);
    kv_engine_destroy(e2);
    kv_frame_free(&f);
}

/* Without block events (long headless runs) a decode step that takes a new
 * block records no event: the step number alone must renew the block copy. */
static void test_blocks_follow_steps_without_events(void **state)
{
    (void)state;
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 33;
    c.max_model_len = 4096;
    c.block_events = 0;
    c.verify = 0;
    c.write_kv = 0;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e) fail_msg("create: %s", err);
    submit_ids(e, 16, 0, 1, 8); /* one full block; the first decode token needs a second */
    step(e);
    static kv_frame f;
    kv_frame_init(&f);
    capture(&f, e, NULL, NULL);
    int32_t used0 = f.info.num_blocks - 1 - f.info.num_free_blocks;
    uint64_t seq = f.last_event_seq;
    step(e);
    capture(&f, e, NULL, NULL);
    assert_int_equal(f.last_event_seq, seq); /* the premise: no event */
    int32_t used1 = f.info.num_blocks - 1 - f.info.num_free_blocks;
    assert_true(used1 > used0);
    static kv_block_view bv[33];
    kv_engine_blocks_brief(e, bv, 33);
    assert_memory_equal(bv, f.blocks, sizeof bv);
    kv_engine_destroy(e);
    kv_frame_free(&f);
}

static void test_extra_request(void **state)
{
    (void)state;
    kv_engine *e = mk(33, 4, 1);
    int64_t a = submit_ids(e, 20, 0, 1, 1);
    int64_t b = submit_ids(e, 20, 0, 2, 40);
    step(e);
    step(e);
    static kv_frame f;
    kv_frame_init(&f);
    capture(&f, e, NULL, NULL);
    /* A finished (one output token); B still runs. */
    assert_int_equal(f.nrunning, 1);
    assert_int_equal(f.reqs[0].req.id, b);
    assert_null(kv_frame_find_req(&f, a));
    kv_frame_opts o = { .blocks_prefix = 0, .extra_req = a };
    capture(&f, e, NULL, &o);
    assert_int_equal(f.nextra, 1);
    const kv_frame_req *r = kv_frame_find_req(&f, a);
    assert_non_null(r);
    assert_int_equal(r->req.status, KV_REQ_FINISHED);
    assert_int_equal(r->req.num_blocks, 0);
    /* A live request asked for as extra is not copied twice. */
    o.extra_req = b;
    capture(&f, e, NULL, &o);
    assert_int_equal(f.nextra, 0);
    assert_int_equal(f.nrunning, 1);
    kv_engine_destroy(e);
    kv_frame_free(&f);
}

/* Count used and hashed blocks of the copy; every one the engine has must be in it. */
static void assert_prefix_holds_all(const kv_frame *f)
{
    int32_t used = 0, hashed = 0;
    for (int32_t i = 0; i < f->nblocks; i++) {
        if (f->blocks[i].is_null) continue;
        used += !f->blocks[i].is_free;
        hashed += f->blocks[i].has_hash;
    }
    assert_int_equal(used, f->info.num_blocks - 1 - f->info.num_free_blocks);
    assert_int_equal(hashed, f->info.num_cached_blocks);
}

static void test_blocks_prefix(void **state)
{
    (void)state;
    kv_engine *e = mk(1025, 8, 1);
    submit_ids(e, 40, 0, 1, 200);
    step(e);
    static kv_frame f;
    kv_frame_init(&f);
    kv_frame_opts o = { .blocks_prefix = 64, .extra_req = -1 };
    capture(&f, e, NULL, &o);
    /* 3 blocks in use: the 64-block prefix is enough. */
    assert_int_equal(f.nblocks, 64);
    assert_int_equal(f.info.num_blocks, 1025);
    assert_prefix_holds_all(&f);
    /* A wider prefix asked for on the same step is copied. */
    o.blocks_prefix = 128;
    capture(&f, e, NULL, &o);
    assert_int_equal(f.nblocks, 128);
    /* A 70-block request: blocks past the prefix are in use, so the whole pool. */
    o.blocks_prefix = 64;
    submit_ids(e, 70 * 16, 0, 2, 4);
    step(e);
    capture(&f, e, NULL, &o);
    assert_int_equal(f.nblocks, 1025);
    assert_prefix_holds_all(&f);
    /* No blocks wanted: none copied, and the next copy is fresh. */
    o.blocks_prefix = -1;
    capture(&f, e, NULL, &o);
    assert_int_equal(f.nblocks, 0);
    assert_null(kv_frame_block(&f, 1));
    assert_int_equal(f.nrunning, 2);
    o.blocks_prefix = 0;
    capture(&f, e, NULL, &o);
    assert_int_equal(f.nblocks, 1025);
    kv_engine_destroy(e);
    kv_frame_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_state),
        cmocka_unit_test(test_owners_sorted),
        cmocka_unit_test(test_reuse_and_new_engine),
        cmocka_unit_test(test_blocks_follow_steps_without_events),
        cmocka_unit_test(test_extra_request),
        cmocka_unit_test(test_blocks_prefix),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
