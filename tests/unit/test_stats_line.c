/* vLLM's metric names and periodic stats line per release
 * (engine/kv_release.c metrics rows, kv_metrics_stats_line): the inter-token
 * latency histogram's name before and after 0.10.2, the line's words in
 * V0, in V1 before and after "Engine 000: " (0.8.3), the "Preemptions: N"
 * part (0.11.1), prompt throughput from computed tokens only (0.16), and
 * the idle intervals vLLM logs only at debug. The figures of each line are
 * worked out by hand from a timeline built here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "kv_engine.h"
#include "kv_metrics.h"
#include "kv_release.h"

static const kv_release_metrics *rm_of(const char *version, int v1)
{
    char err[256];
    const kv_release *r = kv_release_find(version, err, sizeof err);
    if (!r) fail_msg("%s: %s", version, err);
    return kv_release_metrics_of(r, v1);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(rm_of("0.10.1", 1)->itl, "vllm:time_per_output_token_seconds");
    assert_string_equal(rm_of("0.10.2", 1)->itl, "vllm:inter_token_latency_seconds");
    assert_string_equal(rm_of("0.33.0", 1)->itl, "vllm:inter_token_latency_seconds");
    assert_string_equal(rm_of("0.6.4", 0)->itl, "vllm:time_per_output_token_seconds");
    /* the usage gauge: renamed in V1 0.9.2 (the metrics view's row, lesson 10 under 0.8.5) */
    assert_string_equal(rm_of("0.8.5", 1)->usage, "vllm:gpu_cache_usage_perc");
    assert_string_equal(rm_of("0.9.1", 1)->usage, "vllm:gpu_cache_usage_perc");
    assert_string_equal(rm_of("0.9.2", 1)->usage, "vllm:kv_cache_usage_perc");
    assert_string_equal(rm_of("0.10.1", 0)->usage, "vllm:gpu_cache_usage_perc");
    assert_string_equal(rm_of("0.33.0", 1)->usage, "vllm:kv_cache_usage_perc");
    /* a V1 row's fallback to V0 on an old card reads V0's words */
    assert_int_equal(rm_of("0.9.1", 0)->engine_v1, 0);
    assert_non_null(rm_of("0.9.1", 0)->stats_hits);
    /* the textbook reads as the newest release */
    assert_ptr_equal(kv_release_metrics_of(kv_release_textbook(), 1), rm_of("0.33.0", 1));
    for (int i = 0; i < kv_release_count(); i++)
        for (int v1 = 0; v1 < 2; v1++) {
            const kv_release_metrics *m = kv_release_metrics_of(kv_release_at(i), v1);
            assert_int_equal(m->engine_v1, v1);
            assert_string_equal(m->ttft, "vllm:time_to_first_token_seconds");
            assert_string_equal(m->queue, "vllm:request_queue_time_seconds");
            assert_true(m->interval_s == (v1 ? 10.0 : 5.0));
        }
}

/* One sample a second up to `upto` s: 100 generated and 1,000 prompt tokens
 * (600 of them computed) a second, 3 running, 2 waiting, 45.67% KV usage,
 * a 12.5% hit rate, two preemptions at 15 s. */
static int busy_timeline(kv_timeline_sample *tl, int upto)
{
    for (int i = 1; i <= upto; i++) {
        kv_timeline_sample *s = &tl[i - 1];
        memset(s, 0, sizeof *s);
        s->step = i;
        s->clock_s = i;
        s->generation_tokens_total = 100 * i;
        s->prompt_tokens_total = 1000 * i;
        s->prompt_computed_total = 600 * i;
        s->num_running = 3;
        s->num_waiting = 2;
        s->kv_usage = 0.4567;
        s->prefix_hit_rate = 0.125;
        s->num_preemptions_total = i >= 15 ? 2 : 0;
    }
    return upto;
}

static void expect_line(const char *version, int v1, const kv_timeline_sample *tl, int n, const char *want,
                        const char *want_hits)
{
    char line[600], hits[200];
    assert_int_equal(kv_metrics_stats_line(rm_of(version, v1), tl, n, 1, line, sizeof line, hits, sizeof hits), 1);
    if (strcmp(line, want)) fail_msg("%s:\n  got  %s\n  want %s", version, line, want);
    assert_string_equal(hits, want_hits);
}

static void test_words(void **state)
{
    (void)state;
    kv_timeline_sample tl[40];
    int n = busy_timeline(tl, 25);
    /* V1: the interval (10 s, 20 s] */
    expect_line("0.33.0", 1, tl, n,
                "Engine 000: Avg prompt throughput: 600.0 tokens/s, Avg generation throughput: 100.0 tokens/s, "
                "Running: 3 reqs, Waiting: 2 reqs, Preemptions: 2, GPU KV cache usage: 45.7%, Prefix cache hit "
                "rate: 12.5%", "");
    expect_line("0.11.1", 1, tl, n,
                "Engine 000: Avg prompt throughput: 1000.0 tokens/s, Avg generation throughput: 100.0 tokens/s, "
                "Running: 3 reqs, Waiting: 2 reqs, Preemptions: 2, GPU KV cache usage: 45.7%, Prefix cache hit "
                "rate: 12.5%", "");
    expect_line("0.11.0", 1, tl, n,
                "Engine 000: Avg prompt throughput: 1000.0 tokens/s, Avg generation throughput: 100.0 tokens/s, "
                "Running: 3 reqs, Waiting: 2 reqs, GPU KV cache usage: 45.7%, Prefix cache hit rate: 12.5%", "");
    expect_line("0.8.0", 1, tl, n,
                "Avg prompt throughput: 1000.0 tokens/s, Avg generation throughput: 100.0 tokens/s, Running: 3 "
                "reqs, Waiting: 2 reqs, GPU KV cache usage: 45.7%, Prefix cache hit rate: 12.5%", "");
    /* V0: every 5 s, the interval (20 s, 25 s], and the prefix-cache line */
    expect_line("0.6.4", 0, tl, n,
                "Avg prompt throughput: 1000.0 tokens/s, Avg generation throughput: 100.0 tokens/s, Running: 3 "
                "reqs, Swapped: 0 reqs, Pending: 2 reqs, GPU KV cache usage: 45.7%, CPU KV cache usage: 0.0%.",
                "Prefix cache hit rate: GPU: 12.50%, CPU: 0.00%");
    /* no line before the first interval ends */
    char line[600], hits[200];
    assert_int_equal(kv_metrics_stats_line(rm_of("0.33.0", 1), tl, 9, 1, line, sizeof line, hits, sizeof hits), 0);
    assert_string_equal(line, "");
    assert_int_equal(kv_metrics_stats_line(rm_of("0.33.0", 1), tl, 10, 1, line, sizeof line, hits, sizeof hits), 1);
}

/* Tokens only in the first 10 s, then idle to 35 s with the running count
 * rising (so each interval's line differs): from 0.8.5 the idle interval
 * after an idle one goes to debug, and the newest line on screen is
 * (10 s, 20 s]'s; 0.8.0 logs (20 s, 30 s] too. */
static void test_quiet_when_idle(void **state)
{
    (void)state;
    kv_timeline_sample tl[40];
    int n = busy_timeline(tl, 35);
    for (int i = 0; i < n; i++) {
        int t = (int)tl[i].clock_s < 10 ? (int)tl[i].clock_s : 10;
        tl[i].generation_tokens_total = 100 * t;
        tl[i].prompt_tokens_total = tl[i].prompt_computed_total = 1000 * t;
        tl[i].num_running = (int32_t)tl[i].clock_s;
    }
    char line[600], hits[200];
    assert_int_equal(kv_metrics_stats_line(rm_of("0.8.5", 1), tl, n, 0, line, sizeof line, hits, sizeof hits), 1);
    if (!strstr(line, "Avg prompt throughput: 0.0 tokens/s") || !strstr(line, "Running: 20 reqs"))
        fail_msg("0.8.5: %s", line);
    assert_int_equal(kv_metrics_stats_line(rm_of("0.8.0", 1), tl, n, 0, line, sizeof line, hits, sizeof hits), 1);
    if (!strstr(line, "Running: 30 reqs")) fail_msg("0.8.0: %s", line);
}

/* A span of the engine clock shorter than an interval (the app logs every
 * interval of the learner's time: tui/app/app_stats.c): the rates over the
 * span, the counts at its end; (10 s, 20 s] reads as the interval's own
 * line; an empty span or one the timeline does not reach gives nothing;
 * quiet after an idle span only where the release is. */
static void test_span(void **state)
{
    (void)state;
    kv_timeline_sample tl[40];
    int n = busy_timeline(tl, 25);
    const kv_release_metrics *rm = kv_release_metrics_of(kv_release_find("0.33.0", NULL, 0), 1);
    char line[600], hits[200], whole[600], wh[200];
    int act = -1;
    assert_int_equal(kv_metrics_stats_span(rm, tl, n, 1, 0.0, 2.0, &act, 0, line, sizeof line, hits, sizeof hits), 1);
    assert_int_equal(act, 1);
    /* 0.16 on: the prompt tokens computed (600 of the 1,000 a second) */
    if (!strstr(line, "Engine 000: Avg prompt throughput: 600.0 tokens/s, Avg generation throughput: 100.0 tokens/s"))
        fail_msg("(0, 2 s]: %s", line);
    /* the counts at the span's end: two preemptions at 15 s are in (14, 16] */
    tl[15].num_running = 7; /* the sample at 16 s */
    assert_int_equal(kv_metrics_stats_span(rm, tl, n, 1, 14.0, 16.0, &act, 1, line, sizeof line, hits, sizeof hits), 1);
    if (!strstr(line, "Running: 7 reqs") || !strstr(line, "Preemptions: 2")) fail_msg("(14, 16 s]: %s", line);
    tl[15].num_running = 3;
    assert_int_equal(kv_metrics_stats_span(rm, tl, 20, 1, 10.0, 20.0, &act, 1, line, sizeof line, hits, sizeof hits), 1);
    assert_int_equal(kv_metrics_stats_line(rm, tl, 20, 1, whole, sizeof whole, wh, sizeof wh), 1);
    assert_string_equal(line, whole);
    assert_int_equal(kv_metrics_stats_span(rm, tl, n, 1, 5.0, 5.0, &act, 1, line, sizeof line, hits, sizeof hits), 0);
    assert_string_equal(line, "");
    /* idle: tokens stop at 10 s */
    for (int i = 0; i < n; i++) {
        int t = (int)tl[i].clock_s < 10 ? (int)tl[i].clock_s : 10;
        tl[i].generation_tokens_total = 100 * t;
        tl[i].prompt_tokens_total = tl[i].prompt_computed_total = 1000 * t;
    }
    assert_int_equal(kv_metrics_stats_span(rm, tl, n, 1, 12.0, 14.0, &act, 1, line, sizeof line, hits, sizeof hits), 1);
    assert_int_equal(act, 0);
    assert_int_equal(kv_metrics_stats_span(rm, tl, n, 1, 14.0, 16.0, &act, 0, line, sizeof line, hits, sizeof hits), 0);
    assert_int_equal(kv_metrics_stats_span(rm_of("0.8.0", 1), tl, n, 1, 14.0, 16.0, &act, 0, line, sizeof line, hits,
                                           sizeof hits), 1);
}

/* An engine run: the line's generation rate is the generated tokens of the
 * interval over its 10 s, and the counts are the engine's at its end. */
static void test_engine_run(void **state)
{
    (void)state;
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 2000;
    c.verify = 0;
    c.write_kv = 0;
    c.timeline_capacity = 8192; /* from the first step to past 20 s */
    char err[256];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    assert_non_null(e);
    static kv_timeline_sample tl[8192];
    int32_t n = 0;
    for (int i = 0; i < 8000; i++) {
        if (i % 20 == 0) {
            kv_request_spec s = { .prompt_tokens = 300, .output_tokens = 200, .arrival_s = -1 };
            assert_true(kv_engine_submit(e, &s, err, sizeof err) >= 0);
        }
        assert_true(kv_engine_step(e, NULL, err, sizeof err) >= 0);
        n = kv_engine_timeline(e, tl, 8192);
        if (n > 0 && tl[n - 1].clock_s > 21) break;
    }
    if (!(n > 0 && tl[n - 1].clock_s > 21 && tl[0].clock_s < 1))
        fail_msg("timeline: %d samples, %.3f s to %.3f s", n, n ? tl[0].clock_s : 0, n ? tl[n - 1].clock_s : 0);
    int a = -1, b = -1;
    for (int i = 0; i < n; i++) {
        if (tl[i].clock_s <= 10) a = i;
        if (tl[i].clock_s <= 20) b = i;
    }
    char line[600], hits[200], want[64];
    assert_int_equal(kv_metrics_stats_line(rm_of("0.33.0", 1), tl, n, 1, line, sizeof line, hits, sizeof hits), 1);
    snprintf(want, sizeof want, "Avg generation throughput: %.1f tokens/s",
             (double)(tl[b].generation_tokens_total - tl[a].generation_tokens_total) / 10.0);
    if (!strstr(line, want)) fail_msg("want '%s' in %s", want, line);
    snprintf(want, sizeof want, "Running: %d reqs, Waiting: %d reqs", tl[b].num_running, tl[b].num_waiting);
    if (!strstr(line, want)) fail_msg("want '%s' in %s", want, line);
    assert_true(tl[b].generation_tokens_total > tl[a].generation_tokens_total);
    assert_true(tl[b].prompt_tokens_total > 0 && tl[b].prompt_computed_total <= tl[b].prompt_tokens_total);
    kv_engine_destroy(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_words),
        cmocka_unit_test(test_quiet_when_idle),
        cmocka_unit_test(test_span),
        cmocka_unit_test(test_engine_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
