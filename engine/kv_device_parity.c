/* kv_device_parity: the host-vs-device trace comparison (see kv_device_parity.h). */
#include "kv_device_parity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_engine.h"
#include "kv_util.h"

#define MAX_LIVE 64
#define MAX_STEPS 20000

/* One run's record: a digest of what it did after every step, so two runs
 * can be compared step by step without storing them. */
typedef struct run_log {
    uint64_t *step_digest;   /* block tables + step result, per step */
    int64_t nsteps;
    uint64_t event_digest;
    int64_t events;
    kv_engine_metrics metrics;
    int64_t verified_steps;
    char verify_error[256];
    double seconds;
} run_log;

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h * 0xFF51AFD7ED558CCDull;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    for (; s && *s; s++) h = mix(h, (unsigned char)*s);
    return h;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The engine both runs use: a Llama-3.1-8B-shaped model on a 63-block pool. */
static void trace_config(kv_engine_config *c, int tp, kv_device *dev)
{
    kv_engine_config_default(c);
    c->num_blocks = 64;
    c->block_size = 16;
    c->max_model_len = 1024;
    c->max_num_seqs = 16;
    c->max_num_batched_tokens = 512;
    c->tensor_parallel_size = tp;
    c->verify = 1;
    c->write_kv = 1;
    c->seed = 7;
    c->device = dev;
    c->gpu_total_bytes = 0;
}

/* 12 requests at time 0: a 200-token system prompt shared by all, its own
 * 40..150-token question, 60..120 output tokens. Together they need far
 * more than 63 blocks, so requests are preempted and resumed. */
static void trace_request(int i, kv_request_spec *s)
{
    memset(s, 0, sizeof *s);
    s->prefix_id = "system";
    s->prefix_tokens = 200;
    s->prompt_tokens = 40 + (i * 37) % 111;
    s->output_tokens = 60 + (i * 53) % 61;
    s->arrival_s = 0;
}

static void fold_events(kv_engine *e, run_log *log, uint64_t *since)
{
    kv_event ev[256];
    int32_t n;
    while ((n = kv_engine_events_since(e, *since, ev, 256)) > 0) {
        for (int32_t i = 0; i < n; i++) {
            uint64_t h = log->event_digest;
            h = mix(h, ev[i].seq);
            h = mix(h, (uint64_t)ev[i].type);
            h = mix(h, (uint64_t)(int64_t)ev[i].block_id);
            h = mix(h, (uint64_t)ev[i].req_id);
            h = mix(h, (uint64_t)ev[i].value);
            h = mix(h, (uint64_t)ev[i].step);
            if (ev[i].type == KV_EV_LOG && ev[i].text) {
                /* The start-up line names the backend: the one expected difference. */
                char t[512];
                snprintf(t, sizeof t, "%s", ev[i].text);
                char *b = strstr(t, " backend");
                if (b) {
                    char *w = b;
                    while (w > t && w[-1] != ' ') w--;
                    memmove(w, b, strlen(b) + 1);
                }
                h = mix_str(h, t);
            }
            log->event_digest = h;
            log->events++;
            *since = ev[i].seq;
        }
    }
}

static int run_trace(kv_device *dev, int tp, run_log *log, char *err, size_t errlen)
{
    memset(log, 0, sizeof *log);
    log->step_digest = calloc(MAX_STEPS, sizeof *log->step_digest);
    if (!log->step_digest) return kv_errf(err, errlen, -1, "out of host memory");
    kv_engine_config c;
    trace_config(&c, tp, dev);
    const double t0 = now_s();
    kv_engine *e = kv_engine_create(&c, err, errlen);
    if (!e) return -1;
    for (int i = 0; i < 12; i++) {
        kv_request_spec s;
        trace_request(i, &s);
        if (kv_engine_submit(e, &s, err, errlen) < 0) {
            kv_engine_destroy(e);
            return -1;
        }
    }
    uint64_t since = 0;
    int rc = 0;
    while (log->nsteps < MAX_STEPS) {
        kv_step_result r;
        char serr[256] = "";
        int n = kv_engine_step(e, &r, serr, sizeof serr);
        if (n == KV_ENGINE_EVERIFY) {
            snprintf(log->verify_error, sizeof log->verify_error, "step %lld: %.200s", (long long)log->nsteps, serr);
            break;
        }
        if (n < 0) {
            rc = kv_errf(err, errlen, -1, "step %lld: %.200s", (long long)log->nsteps, serr);
            break;
        }
        kv_engine_info info;
        kv_engine_get_info(e, &info);
        if (n == 0 && info.num_running == 0 && info.num_waiting == 0) break;
        if (n == 0) kv_engine_advance_clock(e, info.clock_s + 0.01); /* nothing ready yet */
        if (log->nsteps % 8 == 7 && (n = kv_engine_verify(e, serr, sizeof serr)) != 0) {
            snprintf(log->verify_error, sizeof log->verify_error, "step %lld (full read-back): %.180s",
                     (long long)log->nsteps, serr);
            break;
        }
        log->verified_steps++;
        uint64_t h = mix(0, (uint64_t)r.num_scheduled_tokens);
        h = mix(h, (uint64_t)r.num_preempted);
        h = mix(h, (uint64_t)r.num_finished);
        int64_t ids[MAX_LIVE];
        int32_t nr = kv_engine_running(e, ids, MAX_LIVE);
        for (int32_t k = 0; k < nr && k < MAX_LIVE; k++) {
            int32_t table[128];
            int32_t nb = kv_engine_block_table(e, ids[k], table, 128);
            h = mix(h, (uint64_t)ids[k]);
            for (int32_t b = 0; b < nb && b < 128; b++) h = mix(h, (uint64_t)table[b]);
        }
        log->step_digest[log->nsteps++] = h;
        fold_events(e, log, &since);
    }
    fold_events(e, log, &since);
    kv_engine_get_metrics(e, &log->metrics);
    kv_engine_destroy(e);
    log->seconds = now_s() - t0;
    return rc;
}

/* First metric that differs, or NULL. Every figure is computed from the
 * same virtual clock, so they must match exactly. */
static const char *metrics_differ(const kv_engine_metrics *a, const kv_engine_metrics *b)
{
#define CMP(f) if (a->f != b->f) return #f
    CMP(kv_cache_usage_perc); CMP(num_requests_running); CMP(num_requests_waiting);
    CMP(num_preemptions_total); CMP(prefix_cache_queries); CMP(prefix_cache_hits);
    CMP(preempted_prefix_cache_queries); CMP(preempted_prefix_cache_hits); CMP(prompt_tokens_total); CMP(prompt_computed_total);
    CMP(generation_tokens_total); CMP(request_success_total); CMP(requests_aborted);
    CMP(requests_rejected); CMP(block_allocations); CMP(block_frees); CMP(block_evictions);
    CMP(computed_tokens); CMP(recomputed_tokens); CMP(peak_kv_usage); CMP(mean_kv_usage);
    CMP(mean_num_requests_waiting); CMP(mean_num_requests_running); CMP(busy_s);
    CMP(ttft.count); CMP(ttft.sum); CMP(itl.sum); CMP(e2e.sum); CMP(queue.sum);
#undef CMP
    return NULL;
}

int kv_device_parity_run(kv_device *dev, int tp, kv_device_parity_report *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->tensor_parallel_size = tp;
    if (!dev || tp < 1 || tp > 8 || dev->num_ranks < tp)
        return kv_errf(err, errlen, -1, "parity: need a backend serving %d ranks", tp);
    run_log host, other;
    char e1[256] = "";
    int rc = run_trace(NULL, tp, &host, e1, sizeof e1);
    if (rc) {
        free(host.step_digest);
        return kv_errf(err, errlen, -1, "host backend: %s", e1);
    }
    rc = run_trace(dev, tp, &other, e1, sizeof e1);
    if (rc) {
        free(host.step_digest);
        free(other.step_digest);
        return kv_errf(err, errlen, -1, "%s backend: %s", dev->name, e1);
    }
    out->steps = other.nsteps;
    out->requests_finished = other.metrics.request_success_total;
    out->preemptions = other.metrics.num_preemptions_total;
    out->prefix_cache_hits = other.metrics.prefix_cache_hits;
    out->events = other.events;
    out->verified_steps = other.verified_steps;
    out->seconds_host = host.seconds;
    out->seconds_device = other.seconds;
    snprintf(out->verify_error, sizeof out->verify_error, "%s", other.verify_error[0] ? other.verify_error
                                                                : host.verify_error);
    const char *m;
    if (host.nsteps != other.nsteps) {
        snprintf(out->difference, sizeof out->difference, "host ran %lld steps, %s %lld", (long long)host.nsteps,
                 dev->name, (long long)other.nsteps);
    } else {
        for (int64_t s = 0; s < host.nsteps; s++)
            if (host.step_digest[s] != other.step_digest[s]) {
                snprintf(out->difference, sizeof out->difference, "block tables differ after step %lld", (long long)s);
                break;
            }
    }
    if (!out->difference[0] && (host.events != other.events || host.event_digest != other.event_digest))
        snprintf(out->difference, sizeof out->difference, "event streams differ (%lld host events, %lld %s)",
                 (long long)host.events, (long long)other.events, dev->name);
    if (!out->difference[0] && (m = metrics_differ(&host.metrics, &other.metrics)) != NULL)
        snprintf(out->difference, sizeof out->difference, "metric %s differs", m);
    out->identical = !out->difference[0] && !out->verify_error[0];
    free(host.step_digest);
    free(other.step_digest);
    return 0;
}
