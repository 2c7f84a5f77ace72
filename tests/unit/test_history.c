/* The engine's history (kv_history.h) and the snapshots it is built on
 * (kv_snapshot.h).
 *
 * The property: for random seeds, engine configs and inputs (submits of
 * every kind, steps, aborts, prefix-cache resets, mode switches, clock moves,
 * log lines, restarts with another config), the replay engine after a seek
 * to step N shows every figure a fresh run of the same inputs shows when
 * stopped at step N (tests/unit/engine_describe.h writes them all out), while
 * the live engine is left exactly as a run without a history would be; and
 * the history stays under its memory bound, thinning and forgetting as it
 * says. KVLAB_HISTORY_SEEDS overrides the number of runs (default 60). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "engine_describe.h"
#include "kv_engine.h"
#include "kv_hash.h"
#include "kv_history.h"
#include "kv_snapshot.h"

typedef struct rng {
    uint64_t s;
} rng;

static uint32_t rnd(rng *g, uint32_t n)
{
    g->s += 0x9E3779B97F4A7C15ull;
    return (uint32_t)(kv_hash_mix(g->s, 7) % n);
}

/* A random small engine config (the pool small on purpose: preemption). */
static void random_config(rng *g, kv_engine_config *c)
{
    kv_engine_config_default(c);
    static const int32_t bs[] = {1, 2, 4, 8, 16};
    c->block_size = bs[rnd(g, 5)];
    c->num_blocks = 8 + (int32_t)rnd(g, 120);
    c->max_model_len = 64 + (int32_t)rnd(g, 192);
    c->max_num_seqs = 1 + (int32_t)rnd(g, 12);
    c->max_num_batched_tokens = c->max_num_seqs + (int32_t)rnd(g, 128);
    c->enable_chunked_prefill = rnd(g, 5) != 0;
    if (!c->enable_chunked_prefill && c->max_num_batched_tokens < c->max_model_len)
        c->max_num_batched_tokens = c->max_model_len;
    c->enable_prefix_caching = rnd(g, 4) != 0;
    c->long_prefill_token_threshold = rnd(g, 4) == 0 ? 8 + (int32_t)rnd(g, 32) : 0;
    c->scheduling_policy = rnd(g, 3) == 0 ? KV_POLICY_PRIORITY : KV_POLICY_FCFS;
    c->sched_rules.watermark = rnd(g, 4) == 0 ? 0.01 * rnd(g, 10) : 0.0;
    c->sched_rules.free_uncached_first = (int)rnd(g, 2);
    c->sched_rules.skip_unchunkable = (int)rnd(g, 2);
    c->tensor_parallel_size = 1 + (int32_t)rnd(g, 2);
    c->mode = rnd(g, 6) == 0 ? (kv_engine_mode)(1 + rnd(g, 2)) : KV_MODE_PAGED;
    c->seed = rnd(g, 1000);
    c->verify = 0;
    c->write_kv = 0;
    c->block_events = rnd(g, 4) != 0;
    c->event_capacity = rnd(g, 2) ? 256 : 4096; /* a small ring wraps: restored rings must too */
    c->timeline_capacity = rnd(g, 2) ? 64 : 1024;
    c->gpu_total_bytes = 0;
}

typedef struct driver {
    uint64_t seed;
    int64_t ops;
    kv_history *h;     /* attached to each engine the driver creates, or NULL */
    int64_t stop_at;   /* global position to stop at, -1 = run to the end */
    kv_engine *e;
    int64_t base;      /* global position of the current engine's step 0 */
    int64_t steps, preemptions, restarts, mode_switches;
} driver;

static kv_engine *make(driver *d, rng *g)
{
    kv_engine_config c;
    random_config(g, &c);
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e)
        fail_msg("create: %s", err);
    kv_engine_log(e, 0, "lesson: a new server (seed %llu)", (unsigned long long)d->seed);
    if (d->h && kv_history_attach(d->h, e, err, sizeof err) != 0)
        fail_msg("attach: %s", err);
    return e;
}

static int at_stop(const driver *d)
{
    kv_engine_info in;
    kv_engine_get_info(d->e, &in);
    return d->stop_at >= 0 && d->base + in.step == d->stop_at;
}

/* Drive a run; the same seed gives the same inputs. Returns with d->e at
 * position stop_at (before the input that would pass it), or at the end. */
static void drive(driver *d)
{
    rng g = {d->seed * 0x2545F4914F6CDD1Dull + 99};
    static const char *prefixes[] = {"sys-a", "sys-b", "repo"};
    static const int32_t prefix_len[] = {8, 12, 20};
    int32_t ids[64];
    char err[512];
    d->e = make(d, &g);
    d->base = 0;
    for (int64_t op = 0; op < d->ops; op++) {
        uint32_t k = rnd(&g, 1000);
        kv_engine_info in;
        kv_engine_get_info(d->e, &in);
        const kv_engine_config *c = kv_engine_get_config(d->e);
        if (k < 360 && in.num_waiting < 30) {
            kv_request_spec s;
            memset(&s, 0, sizeof s);
            s.output_tokens = 1 + (int32_t)rnd(&g, 40);
            if (rnd(&g, 2)) {
                int p = (int)rnd(&g, 3);
                s.prefix_id = prefixes[p];
                s.prefix_tokens = prefix_len[p];
            }
            if (rnd(&g, 5) == 0) {
                /* a prompt that is a whole shared prefix: its last block is
                 * recomputed (the last-token rule) and cached a second time */
                int32_t n = rnd(&g, 3) == 0 ? 0 : (int32_t)rnd(&g, 40);
                if (!n && !s.prefix_id)
                    n = 1;
                for (int32_t i = 0; i < n; i++)
                    ids[i] = (int32_t)rnd(&g, 5);
                s.prompt_token_ids = ids;
                s.num_prompt_token_ids = n;
            } else {
                s.prompt_tokens = 1 + (int32_t)rnd(&g, (uint32_t)c->max_model_len / 2);
            }
            if (rnd(&g, 8) == 0)
                s.cache_salt = rnd(&g, 2) ? "salt-1" : "salt-2";
            s.priority = (int32_t)rnd(&g, 4) - 1;
            s.arrival_s = rnd(&g, 3) ? -1 : in.clock_s - 0.01 * rnd(&g, 10);
            if (rnd(&g, 40) == 0)
                s.prompt_tokens = c->max_model_len + 5; /* refused */
            kv_engine_submit(d->e, &s, NULL, 0);
        } else if (k < 880) {
            if ((in.num_running || in.num_waiting) && at_stop(d))
                return;
            kv_step_result r;
            int rc = kv_engine_step(d->e, &r, err, sizeof err);
            if (rc < 0 && rc != KV_ENGINE_EINVAL)
                fail_msg("op %lld: step: %s", (long long)op, err);
            d->steps += in.num_running || in.num_waiting;
            d->preemptions += r.num_preempted;
        } else if (k < 930) {
            if (in.num_submitted > 0)
                kv_engine_abort(d->e, (int64_t)rnd(&g, (uint32_t)in.num_submitted), NULL, 0);
        } else if (k < 945) {
            kv_engine_reset_prefix_cache(d->e);
        } else if (k < 960) {
            kv_engine_advance_clock(d->e, in.clock_s + 0.001 * rnd(&g, 100));
        } else if (k < 975) {
            kv_engine_log(d->e, (int)rnd(&g, 3), "lesson says %u", rnd(&g, 1000));
        } else if (k < 985) {
            if (kv_engine_set_mode(d->e, (kv_engine_mode)rnd(&g, 3), NULL, 0) == 0)
                d->mode_switches++;
        } else if (k < 989) {
            kv_engine_abort_all(d->e);
        } else if (k < 992) {
            /* a restart with other flags: a new engine, a new segment */
            if (at_stop(d))
                return;
            d->base += in.step + 1;
            kv_engine_destroy(d->e);
            d->e = make(d, &g);
            d->restarts++;
        }
    }
}

static void expect_same(const kv_engine *a, const kv_engine *b, desc *da, desc *db, const char *what)
{
    describe_engine(a, da);
    describe_engine(b, db);
    char msg[1200];
    if (describe_diff(da->s, db->s, msg, sizeof msg))
        fail_msg("%s: %s", what, msg);
}

/* Every event the replay engine's ring returns is one the fresh run's ring
 * returns too, the same in every field (a restored ring holds fewer). */
static void expect_events_subset(const kv_engine *r, const kv_engine *f, const char *what)
{
    static kv_event a[1024], b[1024];
    uint64_t since = 0;
    for (;;) {
        int32_t n = kv_engine_events_since(r, since, a, 1024);
        if (n <= 0)
            break;
        for (int32_t i = 0; i < n; i++) {
            if (a[i].seq <= since)
                fail_msg("%s: replay events out of order at seq %llu", what, (unsigned long long)a[i].seq);
            if (kv_engine_events_since(f, a[i].seq - 1, b, 1) != 1 || b[0].seq != a[i].seq ||
                b[0].type != a[i].type || b[0].block_id != a[i].block_id || b[0].req_id != a[i].req_id ||
                b[0].value != a[i].value || b[0].step != a[i].step || b[0].clock_s != a[i].clock_s ||
                (a[i].text && (!b[0].text || strcmp(a[i].text, b[0].text))))
                fail_msg("%s: replay event seq %llu (%s) is not the fresh run's", what,
                         (unsigned long long)a[i].seq, kv_event_type_name(a[i].type));
            since = a[i].seq;
        }
    }
}

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && atol(v) > 0 ? atol(v) : dflt;
}

static void test_seek_equals_fresh_run(void **state)
{
    (void)state;
    long seeds = env_long("KVLAB_HISTORY_SEEDS", 60);
    desc da = {0}, db = {0};
    int64_t total_steps = 0, total_pre = 0, total_restarts = 0, total_modes = 0, seeks = 0, thinned = 0;
    for (long sd = 0; sd < seeds; sd++) {
        char err[512];
        rng g = {(uint64_t)sd * 7919 + 3};
        kv_history_opts o = {(uint64_t)(64 + rnd(&g, 512)) << 10, 1 + (int32_t)rnd(&g, 16)};
        kv_history *h = kv_history_create(&o, err, sizeof err);
        assert_non_null(h);
        driver live = {.seed = 1000 + (uint64_t)sd, .ops = 1500 + rnd(&g, 3000), .h = h, .stop_at = -1};
        drive(&live);
        total_steps += live.steps;
        total_pre += live.preemptions;
        total_restarts += live.restarts;
        total_modes += live.mode_switches;
        kv_history_sync(h);
        kv_history_stats st;
        kv_history_get_stats(h, &st);
        if (st.bytes > st.max_bytes)
            fail_msg("seed %ld: %llu bytes over the bound of %llu", sd, (unsigned long long)st.bytes,
                     (unsigned long long)st.max_bytes);
        thinned += st.every > o.every;
        int64_t first = kv_history_first(h), present = kv_history_present(h);
        assert_true(first >= 0 && present >= first);
        assert_int_equal(first, st.forgotten);
        /* the live engine is what a run without a history gives */
        driver plain = {.seed = live.seed, .ops = live.ops, .stop_at = -1};
        drive(&plain);
        expect_same(live.e, plain.e, &da, &db, "live engine with a history vs without");
        /* seek around, in random order, against fresh runs stopped there */
        for (int k = 0; k < 10; k++) {
            int64_t pos = first + (int64_t)rnd(&g, (uint32_t)(present - first + 1));
            if (k == 0)
                pos = present;
            if (k == 1)
                pos = first;
            if (kv_history_seek(h, pos, err, sizeof err) != 0)
                fail_msg("seed %ld: seek %lld of %lld..%lld: %s", sd, (long long)pos, (long long)first,
                         (long long)present, err);
            assert_int_equal(kv_history_position(h), pos);
            kv_history_get_stats(h, &st);
            if (st.last_seek_steps > st.every)
                fail_msg("seed %ld: seek %lld replayed %lld steps, more than the spacing %d", sd, (long long)pos,
                         (long long)st.last_seek_steps, st.every);
            driver fresh = {.seed = live.seed, .ops = live.ops, .stop_at = pos};
            drive(&fresh);
            char what[128];
            snprintf(what, sizeof what, "seed %ld, position %lld (of %lld..%lld)", sd, (long long)pos,
                     (long long)first, (long long)present);
            expect_same(kv_history_engine(h), fresh.e, &da, &db, what);
            expect_events_subset(kv_history_engine(h), fresh.e, what);
            kv_engine_destroy(fresh.e);
            seeks++;
            /* one step on from there, as ']' does */
            if (pos < present) {
                assert_int_equal(kv_history_seek(h, pos + 1, err, sizeof err), 0);
                driver next = {.seed = live.seed, .ops = live.ops, .stop_at = pos + 1};
                drive(&next);
                snprintf(what, sizeof what, "seed %ld, one step after %lld", sd, (long long)pos);
                expect_same(kv_history_engine(h), next.e, &da, &db, what);
                kv_engine_destroy(next.e);
                seeks++;
            }
        }
        /* seeking touched nothing live */
        expect_same(live.e, plain.e, &da, &db, "live engine after seeks");
        kv_engine_destroy(plain.e);
        kv_engine_destroy(live.e); /* ends the segment */
        assert_null(kv_history_live(h));
        assert_int_equal(kv_history_seek(h, present, err, sizeof err), 0);
        assert_int_not_equal(kv_history_seek(h, present + 1, err, sizeof err), 0);
        if (first > 0)
            assert_int_not_equal(kv_history_seek(h, first - 1, err, sizeof err), 0);
        kv_history_destroy(h);
    }
    print_message("history: %ld runs, %lld steps, %lld preemptions, %lld restarts, %lld mode switches, %lld seeks "
                  "compared, %lld runs thinned\n",
                  seeds, (long long)total_steps, (long long)total_pre, (long long)total_restarts,
                  (long long)total_modes, (long long)seeks, (long long)thinned);
    assert_true(total_pre > 0 && total_restarts > 0 && total_modes > 0);
    assert_true(thinned > 0); /* the bounds are small on purpose: thinning ran */
    free(da.s);
    free(db.s);
}

/* Marks land right after the step that did it, and {/} find them. */
static void test_marks(void **state)
{
    (void)state;
    char err[512];
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 9; /* 8 usable blocks of 4 tokens */
    c.block_size = 4;
    c.max_model_len = 64;
    c.max_num_seqs = 4;
    c.max_num_batched_tokens = 64;
    c.verify = 0;
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    assert_non_null(e);
    kv_history *h = kv_history_create(NULL, err, sizeof err);
    assert_int_equal(kv_history_attach(h, e, err, sizeof err), 0);
    kv_request_spec s = {.prompt_tokens = 12, .output_tokens = 16, .arrival_s = -1};
    for (int i = 0; i < 2; i++)
        assert_true(kv_engine_submit(e, &s, NULL, 0) >= 0);
    int64_t pre_step = -1, fin_step = -1;
    for (int i = 0; i < 200; i++) {
        kv_step_result r;
        if (kv_engine_step(e, &r, NULL, 0) < 0)
            break;
        if (r.num_preempted && pre_step < 0)
            pre_step = r.step;
        if (r.num_finished && fin_step < 0)
            fin_step = r.step;
        kv_engine_info in;
        kv_engine_get_info(e, &in);
        if (!in.num_running && !in.num_waiting)
            break;
    }
    assert_true(pre_step >= 0 && fin_step >= 0);
    kv_history_sync(h);
    kv_history_mark m;
    assert_int_equal(kv_history_next_mark(h, -1, 1, KV_MARK_PREEMPT, &m), 0);
    assert_int_equal(m.pos, pre_step + 1);
    assert_int_equal(m.req_id, 1); /* FCFS: the last running one */
    assert_int_equal(kv_history_next_mark(h, kv_history_present(h), -1, KV_MARK_FINISH, &m), 0);
    assert_true(m.pos > fin_step);
    assert_int_equal(kv_history_next_mark(h, fin_step + 1, 1, KV_MARK_PREEMPT, &m) == 0 ? m.pos > fin_step + 1 : 1, 1);
    assert_true(kv_history_marks_between(h, pre_step + 1, pre_step + 2) & KV_MARK_PREEMPT);
    assert_false(kv_history_marks_between(h, 0, pre_step + 1) & KV_MARK_PREEMPT);
    /* the preemption step shows the victim waiting with no blocks; one step
     * before, it still holds them */
    assert_int_equal(kv_history_seek(h, pre_step + 1, err, sizeof err), 0);
    kv_request_view v;
    assert_int_equal(kv_engine_request(kv_history_engine(h), 1, &v), 0);
    assert_int_equal(v.status, KV_REQ_PREEMPTED);
    assert_int_equal(v.num_blocks, 0);
    assert_int_equal(kv_history_seek(h, pre_step, err, sizeof err), 0);
    assert_int_equal(kv_engine_request(kv_history_engine(h), 1, &v), 0);
    assert_int_equal(v.status, KV_REQ_RUNNING);
    assert_true(v.num_blocks > 0);
    /* a restart is a mark, and positions run on */
    int64_t present = kv_history_present(h);
    kv_engine_destroy(e);
    e = kv_engine_create(&c, err, sizeof err);
    assert_int_equal(kv_history_attach(h, e, err, sizeof err), 0);
    assert_int_equal(kv_history_present(h), present + 1);
    assert_int_equal(kv_history_next_mark(h, present, 1, KV_MARK_RESTART, &m), 0);
    assert_int_equal(m.pos, present + 1);
    int32_t seg;
    int64_t step;
    assert_int_equal(kv_history_locate(h, present + 1, &seg, &step), 0);
    assert_int_equal(seg, 1);
    assert_int_equal(step, 0);
    kv_engine_destroy(e);
    kv_history_destroy(h);
}

/* A long run under a small bound: memory stays under it, old steps are
 * forgotten, seeking still works from the first kept position. */
static void test_bound_forgets(void **state)
{
    (void)state;
    char err[512];
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 200;
    c.block_size = 4;
    c.max_model_len = 256;
    c.max_num_seqs = 8;
    c.max_num_batched_tokens = 64;
    c.verify = 0;
    c.event_capacity = 256;
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    kv_history_opts o = {256 << 10, 4};
    kv_history *h = kv_history_create(&o, err, sizeof err);
    assert_int_equal(kv_history_attach(h, e, err, sizeof err), 0);
    rng g = {5};
    uint64_t peak = 0;
    for (int i = 0; i < 20000; i++) {
        kv_engine_info in;
        kv_engine_get_info(e, &in);
        if (in.num_waiting < 6) {
            kv_request_spec s = {.prompt_tokens = 1 + (int32_t)rnd(&g, 100), .output_tokens = 1 + (int32_t)rnd(&g, 60),
                                 .arrival_s = -1};
            kv_engine_submit(e, &s, NULL, 0);
        }
        kv_engine_step(e, NULL, NULL, 0);
        kv_history_stats st;
        kv_history_get_stats(h, &st);
        if (st.bytes > st.max_bytes)
            fail_msg("step %d: %llu bytes (checkpoints %llu in %d, journal %llu, marks %llu) over %llu", i,
                     (unsigned long long)st.bytes, (unsigned long long)st.checkpoint_bytes, st.checkpoints,
                     (unsigned long long)st.journal_bytes, (unsigned long long)st.mark_bytes,
                     (unsigned long long)st.max_bytes);
        peak = st.bytes > peak ? st.bytes : peak;
    }
    kv_history_stats st;
    kv_history_get_stats(h, &st);
    assert_true(peak <= st.max_bytes);
    assert_true(st.forgotten > 0);
    assert_true(kv_history_first(h) == st.forgotten);
    assert_int_equal(kv_history_seek(h, kv_history_first(h), err, sizeof err), 0);
    assert_int_equal(kv_history_seek(h, kv_history_present(h), err, sizeof err), 0);
    desc da = {0}, db = {0};
    expect_same(kv_history_engine(h), e, &da, &db, "present after forgetting");
    free(da.s);
    free(db.s);
    assert_int_not_equal(kv_history_seek(h, kv_history_first(h) - 1, err, sizeof err), 0);
    kv_history_destroy(h);
    kv_engine_destroy(e);
}

/* ---- one timeline of many runs ------------------------------------------ */

/* One run of a lesson: engine `run`'s own inputs from its own seed (submits,
 * steps, aborts, prefix-cache resets), stopping before the step that would
 * pass engine step stop (-1: all ops). */
static void drive_run(kv_engine *e, uint64_t seed, int64_t ops, int64_t stop)
{
    rng g = {seed * 0x9E3779B97F4A7C15ull + 17};
    for (int64_t op = 0; op < ops; op++) {
        uint32_t k = rnd(&g, 100);
        kv_engine_info in;
        kv_engine_get_info(e, &in);
        const kv_engine_config *c = kv_engine_get_config(e);
        if (k < 30 && in.num_waiting < 20) {
            kv_request_spec s = {.prompt_tokens = 1 + (int32_t)rnd(&g, (uint32_t)c->max_model_len / 2),
                                 .output_tokens = 1 + (int32_t)rnd(&g, 40), .arrival_s = -1};
            if (rnd(&g, 3) == 0) {
                s.prefix_id = "sys";
                s.prefix_tokens = 8;
            }
            kv_engine_submit(e, &s, NULL, 0);
        } else if (k < 94) {
            if (stop >= 0 && in.step >= stop && (in.num_running || in.num_waiting))
                return; /* (a step with nothing to do leaves the step count: it is part of position stop) */
            kv_engine_step(e, NULL, NULL, 0);
        } else if (k < 97) {
            if (in.num_submitted > 0)
                kv_engine_abort(e, (int64_t)rnd(&g, (uint32_t)in.num_submitted), NULL, 0);
        } else {
            kv_engine_reset_prefix_cache(e);
        }
    }
}

static kv_engine *run_engine(int run)
{
    rng g = {(uint64_t)run * 31 + 5};
    kv_engine_config c;
    random_config(&g, &c);
    c.mode = KV_MODE_PAGED;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e)
        fail_msg("run %d: create: %s", run, err);
    kv_engine_log(e, 0, "run %d starts", run);
    return e;
}

/* A lesson's life: runs one after another in one history (a restart right
 * after the old engine went, so the new one often gets its address; one
 * engine stepped before it is recorded; one recorded while the old one
 * still runs). Every position seeks to the run that was live there, equal
 * to a fresh engine of that run stopped at that step; (run, step) names the
 * same position; each run's note and marks are its own; a preemption found
 * with { from the end is the newest run's. */
static void test_runs_timeline(void **state)
{
    (void)state;
    enum { RUNS = 9 };
    char err[512];
    desc da = {0}, db = {0};
    kv_history *h = kv_history_create(NULL, err, sizeof err);
    assert_non_null(h);
    int64_t ops[RUNS], first[RUNS], last[RUNS], pre_runs = 0;
    kv_engine *prev = NULL;
    for (int run = 0; run < RUNS; run++) {
        ops[run] = 400 + 150 * run;
        kv_engine *e = run_engine(run);
        if (run == 4) /* stepped before it is recorded: its run starts at that step */
            drive_run(e, (uint64_t)run, ops[run] / 3, -1);
        assert_int_equal(kv_history_attach(h, e, err, sizeof err), 0);
        assert_int_equal(kv_history_runs(h), run + 1);
        char note[32];
        snprintf(note, sizeof note, "run %d", run);
        assert_int_equal(kv_history_set_note(h, note, strlen(note) + 1, err, sizeof err), 0);
        if (prev) /* run 6 was recorded while run 5 still ran: it stepped no more */
            kv_engine_destroy(prev);
        prev = NULL;
        if (run == 4)
            drive_run(e, (uint64_t)run + 1000, ops[run], -1);
        else
            drive_run(e, (uint64_t)run, ops[run], -1);
        kv_history_sync(h);
        assert_int_equal(kv_history_run_span(h, run, &first[run], &last[run]), 0);
        assert_int_equal(last[run], kv_history_present(h));
        if (run == 5)
            prev = e;
        else
            kv_engine_destroy(e);
    }
    kv_history_stats st;
    kv_history_get_stats(h, &st);
    assert_int_equal(st.segments, RUNS);
    assert_true(st.bytes <= st.max_bytes);
    for (int run = 1; run < RUNS; run++) {
        assert_int_equal(first[run], last[run - 1] + 1);
        kv_history_mark m; /* the restart mark is where the run starts */
        assert_int_equal(kv_history_next_mark(h, first[run] - 1, 1, KV_MARK_RESTART, &m), 0);
        assert_int_equal(m.pos, first[run]);
    }
    /* every run, at its start, in its middle, at its end and at random
     * steps, against a fresh engine of that run */
    rng g = {77};
    int64_t seeks = 0;
    for (int run = RUNS - 1; run >= 0; run--) {
        int64_t span = last[run] - first[run] + 1;
        for (int k = 0; k < 6; k++) {
            int64_t pos = k == 0 ? first[run] : k == 1 ? last[run] : k == 2 ? first[run] + span / 2
                                                                           : first[run] + rnd(&g, (uint32_t)span);
            if (kv_history_seek(h, pos, err, sizeof err) != 0)
                fail_msg("run %d: seek %lld: %s", run, (long long)pos, err);
            assert_int_equal(kv_history_run_at(h, pos), run);
            int64_t step;
            assert_int_equal(kv_history_locate(h, pos, NULL, &step), 0);
            assert_int_equal(kv_history_position_of(h, run, step), pos);
            size_t len;
            const char *note = kv_history_note(h, pos, &len);
            char want[32];
            snprintf(want, sizeof want, "run %d", run);
            assert_non_null(note);
            assert_string_equal(note, want);
            kv_engine *fresh = run_engine(run);
            if (run == 4) {
                drive_run(fresh, (uint64_t)run, ops[run] / 3, -1);
                drive_run(fresh, (uint64_t)run + 1000, ops[run], step);
            } else {
                drive_run(fresh, (uint64_t)run, ops[run], step);
            }
            char what[96];
            snprintf(what, sizeof what, "run %d, step %lld (position %lld)", run, (long long)step, (long long)pos);
            expect_same(kv_history_engine(h), fresh, &da, &db, what);
            expect_events_subset(kv_history_engine(h), fresh, what);
            kv_engine_destroy(fresh);
            seeks++;
        }
        /* the run's preemptions are marks inside it; the newest one, found
         * from the run's end as { finds it, shows its victim preempted */
        kv_history_mark m;
        if (kv_history_next_mark(h, last[run] + 1, -1, KV_MARK_PREEMPT, &m) == 0 && m.pos >= first[run]) {
            assert_int_equal(kv_history_run_at(h, m.pos), run);
            assert_int_equal(kv_history_seek(h, m.pos, err, sizeof err), 0);
            kv_request_view v;
            assert_int_equal(kv_engine_request(kv_history_engine(h), m.req_id, &v), 0);
            assert_int_not_equal(v.status, KV_REQ_RUNNING);
            assert_int_equal(v.num_blocks, 0);
            pre_runs++;
        }
    }
    assert_int_equal(kv_history_position_of(h, RUNS, 0), -1);
    assert_int_equal(kv_history_position_of(h, 0, last[0] - first[0] + 1), -1);
    assert_int_equal(kv_history_run_at(h, last[RUNS - 1] + 1), -1);
    assert_true(pre_runs >= 2); /* small pools: several runs preempt */
    print_message("runs: %d runs, %lld positions, %lld seeks compared, %lld runs with a preemption\n", RUNS,
                  (long long)(last[RUNS - 1] + 1), (long long)seeks, (long long)pre_runs);
    kv_history_destroy(h);
    free(da.s);
    free(db.s);
}

/* An image loads into another engine of the config, both go on alike; a
 * damaged image or another config is refused with a message and leaves a
 * consistent (empty) engine. */
static void test_snapshot_round_trip(void **state)
{
    (void)state;
    char err[512];
    desc da = {0}, db = {0};
    for (uint64_t sd = 0; sd < 20; sd++) {
        rng g = {sd + 77};
        kv_engine_config c;
        random_config(&g, &c);
        /* half of them with a host tier (each release's ranking) and decode
         * requests whose prompt KV comes from a prefill instance: the image
         * carries the tier and the requests' remote prefill */
        int tier = sd % 2 == 0;
        if (tier) {
            c.enable_prefix_caching = 1;
            c.offload_num_blocks = 6 + (int64_t)rnd(&g, 40);
            c.offload_lru = (int)(sd / 2 % 3);
            c.offload_protect_offer = (int)rnd(&g, 2);
        }
        kv_engine *a = kv_engine_create(&c, err, sizeof err);
        kv_engine *b = kv_engine_create(&c, err, sizeof err);
        assert_non_null(a);
        assert_non_null(b);
        kv_snapshot img;
        kv_snapshot_init(&img);
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < 300; i++) {
                kv_engine_info in;
                kv_engine_get_info(a, &in);
                if (rnd(&g, 3) == 0 && in.num_waiting < 20) {
                    kv_request_spec s = {.prompt_tokens = 1 + (int32_t)rnd(&g, 60),
                                         .output_tokens = 1 + (int32_t)rnd(&g, 30), .arrival_s = -1,
                                         .prefix_id = rnd(&g, 2) ? "p" : NULL, .prefix_tokens = 8,
                                         .remote_prefill = tier && rnd(&g, 4) == 0};
                    kv_engine_submit(a, &s, NULL, 0);
                    kv_engine_submit(b, &s, NULL, 0);
                } else {
                    kv_engine_step(a, NULL, NULL, 0);
                    kv_engine_step(b, NULL, NULL, 0);
                }
            }
            assert_int_equal(kv_snapshot_save(a, &img, err, sizeof err), 0);
            kv_engine *c2 = kv_engine_create(&c, err, sizeof err);
            if (kv_snapshot_load(c2, &img, err, sizeof err) != 0)
                fail_msg("load: %s", err);
            expect_same(a, c2, &da, &db, "loaded image");
            assert_int_equal(kv_engine_check(c2, err, sizeof err), 0);
            /* a loaded engine goes on exactly as the saved one */
            for (int i = 0; i < 50; i++) {
                kv_engine_step(a, NULL, NULL, 0);
                kv_engine_step(c2, NULL, NULL, 0);
                kv_engine_step(b, NULL, NULL, 0);
            }
            expect_same(a, c2, &da, &db, "stepped after load");
            kv_engine_destroy(c2);
        }
        expect_same(a, b, &da, &db, "saving changes nothing");
        /* damage: truncated, a flipped byte (refused or loads consistently) */
        kv_engine *d = kv_engine_create(&c, err, sizeof err);
        size_t len = img.len;
        img.len = len / 2;
        assert_int_equal(kv_snapshot_load(d, &img, err, sizeof err), KV_ENGINE_EINVAL);
        assert_true(strstr(err, "engine image") != NULL);
        assert_int_equal(kv_engine_check(d, err, sizeof err), 0);
        img.len = len;
        for (int flip = 0; flip < 40; flip++) {
            size_t at = 4 + rnd(&g, (uint32_t)(len - 8));
            img.data[at] ^= (uint8_t)(1 + rnd(&g, 255));
            int lrc = kv_snapshot_load(d, &img, err, sizeof err); /* either way: never a broken engine */
            char cerr[256];
            if (kv_engine_check(d, cerr, sizeof cerr) != 0)
                fail_msg("flip at %zu (load rc %d: %s): %s", at, lrc, lrc ? err : "", cerr);
            kv_engine_step(d, NULL, NULL, 0);
            if (kv_engine_check(d, cerr, sizeof cerr) != 0)
                fail_msg("flip at %zu, after a step (load rc %d): %s", at, lrc, cerr);
            assert_int_equal(kv_snapshot_save(a, &img, err, sizeof err), 0);
        }
        kv_engine_destroy(d);
        /* another config */
        kv_engine_config c3 = c;
        c3.num_blocks = c.num_blocks + 1;
        kv_engine *o = kv_engine_create(&c3, err, sizeof err);
        assert_int_equal(kv_snapshot_load(o, &img, err, sizeof err), KV_ENGINE_EINVAL);
        assert_true(strstr(err, "another config") != NULL);
        kv_engine_destroy(o);
        kv_snapshot_free(&img);
        kv_engine_destroy(a);
        kv_engine_destroy(b);
    }
    free(da.s);
    free(db.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_round_trip),
        cmocka_unit_test(test_marks),
        cmocka_unit_test(test_bound_forgets),
        cmocka_unit_test(test_seek_equals_fresh_run),
        cmocka_unit_test(test_runs_timeline),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
