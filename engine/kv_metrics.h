/* kv_metrics: latency histograms on the virtual clock and the Prometheus
 * text dump with vLLM's metric names (vllm/v1/metrics/loggers.py).
 * Each histogram keeps vLLM's bucket bounds (for the exposition) and a fine
 * log-spaced set (10 per decade, 1 us .. 100000 s) for percentile estimates.
 * Observing never allocates. */
#ifndef KV_METRICS_H
#define KV_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "kv_engine.h"
#include "kv_release.h"

#define KV_METRICS_MAX_BUCKETS 32
#define KV_METRICS_FINE 111

typedef struct kv_hist {
    const char *name;            /* e.g. "vllm:time_to_first_token_seconds" */
    const char *help;
    const double *bounds;        /* vLLM's upper bounds, ascending */
    int nbounds;
    int64_t counts[KV_METRICS_MAX_BUCKETS + 1]; /* per bound, plus +Inf */
    int64_t fine[KV_METRICS_FINE + 1];
    int64_t count;
    double sum, min, max;
} kv_hist;

/* Histogram kinds with vLLM's buckets: an engine keeps the first
 * KV_HIST_COUNT; the NIXL ones are a prefill/decode split's (kv_disagg.h). */
enum {
    KV_HIST_TTFT = 0, KV_HIST_ITL, KV_HIST_E2E, KV_HIST_QUEUE, KV_HIST_COUNT,
    KV_HIST_NIXL_XFER_TIME = KV_HIST_COUNT, /* vllm:nixl_xfer_time_seconds */
    KV_HIST_NIXL_BYTES,                     /* vllm:nixl_bytes_transferred (bytes, not seconds) */
    KV_HIST_KINDS
};

/* Set up histogram kind (KV_HIST_*) empty. */
void kv_hist_init(kv_hist *h, int kind);
/* Add one observation (seconds). */
void kv_hist_observe(kv_hist *h, double v);
/* Add n observations of the same value (a decode step gives every request
 * that also ran the step before the same inter-token latency). */
void kv_hist_observe_n(kv_hist *h, double v, int64_t n);
/* Add src's observations to dst (both of the same kind): the histogram of
 * several engines' requests together (kv_disagg.h). */
void kv_hist_merge(kv_hist *dst, const kv_hist *src);
/* Count, sum, mean, min, max and p50/p90/p99 (from the fine buckets). */
void kv_hist_stats(const kv_hist *h, kv_latency_stats *out);

/* Write m and the histograms as Prometheus text (label model_name) into
 * buf[len]; returns the length needed, like snprintf. */
size_t kv_metrics_prometheus(const kv_engine_metrics *m, const kv_hist *hists, int nhists,
                             const char *model_name, char *buf, size_t len);

/* vLLM's periodic stats line as release row rm words it ("Engine 000: Avg
 * prompt throughput: 812.4 tokens/s, ..., GPU KV cache usage: 41.0%, Prefix
 * cache hit rate: 12.5%"), for the newest logging interval that ends within
 * the timeline tl[0..n) (oldest first) and that the release logs at info
 * (rm->quiet_when_idle: not two idle intervals running). Interval k covers
 * the engine clock ((k-1) x rm->interval_s, k x rm->interval_s]; rates are
 * the token totals' growth over it in tokens/s (when the timeline starts
 * inside it, over the part it holds); running, waiting, KV usage and the
 * hit rate are the last sample's at its end. hits: V0's prefix-cache line
 * (rm->stats_hits, written only when prefix_caching), "" otherwise.
 * Returns 1 with the lines, 0 when no interval has ended yet within tl
 * (line and hits ""). Mirrors vllm/v1/metrics/loggers.py and
 * vllm/engine/metrics.py LoggingStatLogger.log of the row's releases. */
int kv_metrics_stats_line(const kv_release_metrics *rm, const kv_timeline_sample *tl, int n, int prefix_caching,
                          char *line, size_t len, char *hits, size_t hlen);

/* The same line for the span (t0, t1] of the engine clock instead of a
 * whole logging interval: for a caller whose logger runs on another clock
 * than the engine's (the lesson app logs every rm->interval_s of the
 * learner's time, so a page that runs the engine slowly still shows the
 * line as vLLM would, every interval: tui/app/app_stats.c). *active (may be
 * NULL) gets 1 when the span had throughput; was_active: the span before
 * had (rm->quiet_when_idle: two idle spans running log nothing). Returns 1
 * with the lines, 0 with "" (t1 <= t0, the timeline does not reach into
 * the span, or quiet). */
int kv_metrics_stats_span(const kv_release_metrics *rm, const kv_timeline_sample *tl, int n, int prefix_caching,
                          double t0, double t1, int *active, int was_active, char *line, size_t len, char *hits,
                          size_t hlen);

/* The histograms alone, as kv_metrics_prometheus writes them. */
size_t kv_metrics_prometheus_hists(const kv_hist *hists, int nhists, const char *model_name, char *buf, size_t len);

#endif
