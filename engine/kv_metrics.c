#include "kv_metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Bucket bounds as vLLM declares them (vllm/v1/metrics/loggers.py). */
static const double ttft_b[] = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double itl_b[] = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
                               2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
static const double req_b[] = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
                               40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

/* vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py (0.33.0):
 * transfer times, and bytes in uniform powers of four from 2 KiB to 8 GiB. */
static const double nixl_time_b[] = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 5.0};
static const double nixl_bytes_b[] = {2048.0, 8192.0, 32768.0, 131072.0, 524288.0, 2097152.0, 8388608.0,
                                      33554432.0, 134217728.0, 536870912.0, 2147483648.0, 8589934592.0};

#define NB(a) a, (int)(sizeof a / sizeof a[0])
static const struct {
    const char *name, *help;
    const double *bounds;
    int nbounds;
} KINDS[] = {
    [KV_HIST_TTFT] = {"vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", NB(ttft_b)},
    [KV_HIST_ITL] = {"vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", NB(itl_b)},
    [KV_HIST_E2E] = {"vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", NB(req_b)},
    [KV_HIST_QUEUE] = {"vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.",
                       NB(req_b)},
    [KV_HIST_NIXL_XFER_TIME] = {"vllm:nixl_xfer_time_seconds",
                                "Histogram of transfer duration for NIXL KV Cache transfers.", NB(nixl_time_b)},
    [KV_HIST_NIXL_BYTES] = {"vllm:nixl_bytes_transferred",
                            "Histogram of bytes transferred per NIXL KV Cache transfers.", NB(nixl_bytes_b)},
};

void kv_hist_init(kv_hist *h, int kind)
{
    memset(h, 0, sizeof *h);
    if (kind < 0 || kind >= KV_HIST_KINDS)
        kind = KV_HIST_QUEUE;
    h->name = KINDS[kind].name;
    h->help = KINDS[kind].help;
    h->bounds = KINDS[kind].bounds;
    h->nbounds = KINDS[kind].nbounds;
}

/* fine bucket i covers [10^(-6 + i/10), 10^(-6 + (i+1)/10)); 0 and below go
 * to 0. Binary search over precomputed edges: no log10 per observation. */
static double fine_edges[KV_METRICS_FINE + 1];
static int fine_ready;

static int fine_index(double v)
{
    if (!fine_ready) {
        for (int i = 0; i <= KV_METRICS_FINE; i++)
            fine_edges[i] = pow(10.0, -6.0 + i / 10.0);
        fine_ready = 1;
    }
    if (!(v > fine_edges[0]))
        return 0;
    int lo = 0, hi = KV_METRICS_FINE; /* invariant: edges[lo] < v, answer in [lo, hi] */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (fine_edges[mid] < v)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

void kv_hist_observe(kv_hist *h, double v)
{
    kv_hist_observe_n(h, v, 1);
}

void kv_hist_observe_n(kv_hist *h, double v, int64_t n)
{
    if (n <= 0)
        return;
    if (v < 0)
        v = 0;
    int lo = 0, hi = h->nbounds; /* first bound >= v (Prometheus le), or nbounds for +Inf */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (v > h->bounds[mid])
            lo = mid + 1;
        else
            hi = mid;
    }
    h->counts[lo] += n;
    h->fine[fine_index(v)] += n;
    if (h->count == 0 || v < h->min)
        h->min = v;
    if (h->count == 0 || v > h->max)
        h->max = v;
    h->count += n;
    h->sum += v * (double)n;
}

void kv_hist_merge(kv_hist *dst, const kv_hist *src)
{
    if (!src->count)
        return;
    for (int i = 0; i <= KV_METRICS_MAX_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    for (int i = 0; i <= KV_METRICS_FINE; i++)
        dst->fine[i] += src->fine[i];
    if (dst->count == 0 || src->min < dst->min)
        dst->min = src->min;
    if (dst->count == 0 || src->max > dst->max)
        dst->max = src->max;
    dst->count += src->count;
    dst->sum += src->sum;
}

static double quantile(const kv_hist *h, double q)
{
    if (h->count == 0)
        return 0.0;
    int64_t target = (int64_t)ceil(q * (double)h->count);
    if (target < 1)
        target = 1;
    int64_t acc = 0;
    for (int i = 0; i <= KV_METRICS_FINE; i++) {
        acc += h->fine[i];
        if (acc >= target) {
            /* geometric middle of the bucket, clamped to what was seen */
            double v = pow(10.0, -6.0 + (i + 0.5) / 10.0);
            if (v < h->min)
                v = h->min;
            if (v > h->max)
                v = h->max;
            return v;
        }
    }
    return h->max;
}

void kv_hist_stats(const kv_hist *h, kv_latency_stats *out)
{
    memset(out, 0, sizeof *out);
    out->count = h->count;
    out->sum = h->sum;
    if (!h->count)
        return;
    out->mean = h->sum / (double)h->count;
    out->min = h->min;
    out->max = h->max;
    out->p50 = quantile(h, 0.50);
    out->p90 = quantile(h, 0.90);
    out->p99 = quantile(h, 0.99);
}

typedef struct sbuf {
    char *buf;
    size_t len, used;
} sbuf;

static void sb(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb(sbuf *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = s->used < s->len ? s->len - s->used : 0;
    int n = vsnprintf(room ? s->buf + s->used : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        s->used += (size_t)n;
}

static void metric(sbuf *s, const char *name, const char *type, const char *help, const char *model, double v)
{
    sb(s, "# HELP %s %s\n# TYPE %s %s\n%s{model_name=\"%s\"} %.17g\n", name, help, name, type, name, model, v);
}

size_t kv_metrics_prometheus(const kv_engine_metrics *m, const kv_hist *hists, int nhists,
                             const char *model_name, char *buf, size_t len)
{
    sbuf s = {buf, len, 0};
    const char *mn = model_name ? model_name : "kvlab";
    if (len)
        buf[0] = '\0';
    metric(&s, "vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", mn,
           m->num_requests_running);
    metric(&s, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", mn,
           m->num_requests_waiting);
    metric(&s, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", mn,
           m->kv_cache_usage_perc);
    metric(&s, "vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.", mn,
           (double)m->num_preemptions_total);
    metric(&s, "vllm:prefix_cache_queries_total", "counter",
           "Prefix cache queries, in terms of number of queried tokens.", mn, (double)m->prefix_cache_queries);
    metric(&s, "vllm:prefix_cache_hits_total", "counter",
           "Prefix cache hits, in terms of number of cached tokens.", mn, (double)m->prefix_cache_hits);
    /* the KV connector's prefix cache (loggers.py; 0 without a tier) */
    metric(&s, "vllm:external_prefix_cache_queries_total", "counter",
           "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of "
           "queried tokens.", mn, (double)m->external_prefix_cache_queries);
    metric(&s, "vllm:external_prefix_cache_hits_total", "counter",
           "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of "
           "cached tokens.", mn, (double)m->external_prefix_cache_hits);
    if (m->offload_capacity_blocks > 0) {
        /* the OffloadingConnector's own, registered only with it (0.33.0:
         * kv_connector/v1/offloading/metrics.py, v1/kv_offload/cpu/common.py) */
        metric(&s, "vllm:kv_offload_load_bytes_total", "counter", "Total bytes loaded from offload storage to GPU.",
               mn, (double)m->offload_load_bytes);
        metric(&s, "vllm:kv_offload_load_time_total", "counter",
               "Total load time from offload storage to GPU, in seconds.", mn, m->offload_load_s);
        metric(&s, "vllm:kv_offload_store_bytes_total", "counter", "Total bytes stored from GPU to offload storage.",
               mn, (double)m->offload_store_bytes);
        metric(&s, "vllm:kv_offload_allocation_failure_total", "counter",
               "Number of KV offload store allocation attempts that failed.", mn, (double)m->offload_skipped_stores);
    }
    metric(&s, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", mn,
           (double)m->prompt_tokens_total);
    metric(&s, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", mn,
           (double)m->generation_tokens_total);
    metric(&s, "vllm:request_success_total", "counter", "Count of successfully processed requests.", mn,
           (double)m->request_success_total);
    s.used += kv_metrics_prometheus_hists(hists, nhists, mn, s.used < len ? buf + s.used : NULL,
                                          s.used < len ? len - s.used : 0);
    return s.used;
}

size_t kv_metrics_prometheus_hists(const kv_hist *hists, int nhists, const char *model_name, char *buf, size_t len)
{
    sbuf s = {buf, len, 0};
    const char *mn = model_name ? model_name : "kvlab";
    if (len)
        buf[0] = '\0';
    for (int k = 0; k < nhists; k++) {
        const kv_hist *h = &hists[k];
        sb(&s, "# HELP %s %s\n# TYPE %s histogram\n", h->name, h->help, h->name);
        int64_t acc = 0;
        for (int b = 0; b < h->nbounds; b++) {
            acc += h->counts[b];
            sb(&s, "%s_bucket{le=\"%g\",model_name=\"%s\"} %lld\n", h->name, h->bounds[b], mn, (long long)acc);
        }
        acc += h->counts[h->nbounds];
        sb(&s, "%s_bucket{le=\"+Inf\",model_name=\"%s\"} %lld\n", h->name, mn, (long long)acc);
        sb(&s, "%s_count{model_name=\"%s\"} %lld\n", h->name, mn, (long long)h->count);
        sb(&s, "%s_sum{model_name=\"%s\"} %.17g\n", h->name, mn, h->sum);
    }
    return s.used;
}

/* The totals interval ((end - iv), end] starts from: the last sample at or
 * before its start, the engine's start (all zero, NULL) for the first
 * interval, else the oldest sample the timeline holds (then *t0 is that
 * sample's clock). *t0 < 0 when not even that lies inside the interval. */
static const kv_timeline_sample *interval_start(const kv_timeline_sample *tl, int n, double start, double *t0)
{
    const kv_timeline_sample *s = NULL;
    for (int i = 0; i < n && tl[i].clock_s <= start + 1e-9; i++)
        s = &tl[i];
    *t0 = start;
    if (s || start <= 1e-9)
        return s;
    *t0 = tl[0].clock_s < start + 1e-9 ? -1 : tl[0].clock_s;
    return &tl[0];
}

/* The interval ending at `end`: its first and last samples (s NULL: the
 * engine's start), its length, and its prompt and generation rates.
 * Returns 0 when the timeline does not reach into it. */
typedef struct stats_iv {
    const kv_timeline_sample *s, *e;
    double dt, prompt, gen;
} stats_iv;

static int span_at(const kv_release_metrics *rm, const kv_timeline_sample *tl, int n, double start, double end,
                   stats_iv *o);

static int interval_at(const kv_release_metrics *rm, const kv_timeline_sample *tl, int n, double end, stats_iv *o)
{
    return span_at(rm, tl, n, end - rm->interval_s, end, o);
}

/* The span (start, end] of the engine clock, as interval_at. */
static int span_at(const kv_release_metrics *rm, const kv_timeline_sample *tl, int n, double start, double end,
                   stats_iv *o)
{
    int ie = -1;
    for (int i = 0; i < n && tl[i].clock_s <= end + 1e-9; i++)
        ie = i;
    if (ie < 0)
        return 0;
    double t0;
    o->e = &tl[ie];
    o->s = interval_start(tl, n, start, &t0);
    if (t0 < 0 || end - t0 <= 0)
        return 0;
    o->dt = end - t0;
    int64_t p1 = rm->prompt_computed ? o->e->prompt_computed_total : o->e->prompt_tokens_total;
    int64_t p0 = !o->s ? 0 : rm->prompt_computed ? o->s->prompt_computed_total : o->s->prompt_tokens_total;
    o->prompt = (double)(p1 - p0) / o->dt;
    o->gen = (double)(o->e->generation_tokens_total - (o->s ? o->s->generation_tokens_total : 0)) / o->dt;
    return 1;
}

/* The line (and V0's prefix-cache line) for the span v, in row rm's words. */
static void format_stats(const kv_release_metrics *rm, const stats_iv *v, int prefix_caching, char *line, size_t len,
                         char *hits, size_t hlen)
{
    const kv_timeline_sample *e = v->e;
    int64_t pre = e->num_preemptions_total - (v->s ? v->s->num_preemptions_total : 0);
    char pre_part[48] = "";
    if (rm->preemptions_part && pre > 0)
        snprintf(pre_part, sizeof pre_part, "Preemptions: %lld, ", (long long)pre);
    kv_release_arg args[] = {
        {"prompt", v->prompt, NULL}, {"gen", v->gen, NULL}, {"running", e->num_running, NULL},
        {"waiting", e->num_waiting, NULL}, {"usage", e->kv_usage * 100.0, NULL},
        {"hit_rate", e->prefix_hit_rate * 100.0, NULL}, {"preemptions", 0, pre_part},
    };
    int na = (int)(sizeof args / sizeof args[0]);
    kv_release_format(line, len, rm->stats, args, na);
    if (rm->stats_hits && prefix_caching && hlen)
        kv_release_format(hits, hlen, rm->stats_hits, args, na);
}

int kv_metrics_stats_line(const kv_release_metrics *rm, const kv_timeline_sample *tl, int n, int prefix_caching,
                          char *line, size_t len, char *hits, size_t hlen)
{
    if (len)
        line[0] = '\0';
    if (hlen)
        hits[0] = '\0';
    if (!rm || !tl || n <= 0 || rm->interval_s <= 0)
        return 0;
    double iv = rm->interval_s;
    int64_t k = (int64_t)floor(tl[n - 1].clock_s / iv + 1e-9);
    for (int tries = 0; k >= 1 && tries < 64; tries++, k--) {
        stats_iv v, prev;
        if (!interval_at(rm, tl, n, (double)k * iv, &v))
            return 0;
        /* vLLM logs at debug while this interval and the one before had no
         * throughput: then the newest line on screen is an older one. */
        if (rm->quiet_when_idle && v.prompt <= 0 && v.gen <= 0 &&
            !(k >= 2 && interval_at(rm, tl, n, (double)(k - 1) * iv, &prev) && (prev.prompt > 0 || prev.gen > 0)))
            continue;
        format_stats(rm, &v, prefix_caching, line, len, hits, hlen);
        return 1;
    }
    return 0;
}

int kv_metrics_stats_span(const kv_release_metrics *rm, const kv_timeline_sample *tl, int n, int prefix_caching,
                          double t0, double t1, int *active, int was_active, char *line, size_t len, char *hits,
                          size_t hlen)
{
    if (len)
        line[0] = '\0';
    if (hlen)
        hits[0] = '\0';
    if (active)
        *active = 0;
    stats_iv v;
    if (!rm || !tl || n <= 0 || !(t1 > t0) || !span_at(rm, tl, n, t0, t1, &v))
        return 0;
    int busy = v.prompt > 0 || v.gen > 0;
    if (active)
        *active = busy;
    /* quiet while this span and the one before had no throughput */
    if (rm->quiet_when_idle && !busy && !was_active)
        return 0;
    format_stats(rm, &v, prefix_caching, line, len, hits, hlen);
    return 1;
}
