/* ui_metrics: see ui_metrics.h. */
#include "ui_metrics.h"

#include <stdio.h>
#include <string.h>

#include "kv_metrics.h"
#include "kv_util.h"
#include "ui_style.h"

/* In the order they are drawn: the queue and its wait first, the latencies
 * before the token counters (a short pane keeps the first rows). */
enum { M_USAGE, M_RUNNING, M_WAITING, M_QUEUE, M_PREEMPT, M_HITS, M_TTFT, M_ITL, M_GEN, M_TPUT, M_EXT, M_COUNT };

/* How a row's sparkline reads the timeline: a gauge is averaged over each
 * cell's steps; a counter is drawn as its running total (it never goes
 * down); a rate is averaged like a gauge but says per second. */
typedef enum { K_GAUGE, K_TOTAL, K_RATE, K_HIST } m_kind;

static const struct { const char *name; m_kind kind; } rows_def[M_COUNT] = {
    [M_USAGE] = { "vllm:kv_cache_usage_perc", K_GAUGE },
    [M_RUNNING] = { "vllm:num_requests_running", K_GAUGE },
    [M_WAITING] = { "vllm:num_requests_waiting", K_GAUGE },
    [M_PREEMPT] = { "vllm:num_preemptions_total", K_TOTAL },
    [M_HITS] = { "prefix cache hit rate", K_GAUGE },
    [M_GEN] = { "vllm:generation_tokens_total", K_TOTAL },
    [M_TPUT] = { "throughput (tokens/s)", K_RATE },
    /* hits by tier: the host (CPU) tier's own rate, beside the GPU's
     * (vllm:external_prefix_cache_hits / _queries); only with a tier */
    [M_EXT] = { "CPU tier hit rate", K_GAUGE },
    /* vLLM's latency histograms: the names are the release's (kv_release_metrics),
     * these the newest's; the row shows the mean, then p50 and p99 */
    [M_TTFT] = { "vllm:time_to_first_token_seconds", K_HIST },
    [M_ITL] = { "vllm:inter_token_latency_seconds", K_HIST },
    [M_QUEUE] = { "vllm:request_queue_time_seconds", K_HIST },
};

/* Row k's name under the frame's release (the ITL histogram was
 * vllm:time_per_output_token_seconds before 0.10.2, the usage gauge
 * vllm:gpu_cache_usage_perc before 0.9.2 and in V0). */
static const char *row_name(const kv_frame *f, int k)
{
    if ((rows_def[k].kind != K_HIST && k != M_USAGE) || !f->has_plan) return rows_def[k].name;
    const kv_release_metrics *rm = kv_release_metrics_of(f->plan.release, f->plan.engine_v1);
    return k == M_USAGE ? rm->usage : k == M_TTFT ? rm->ttft : k == M_ITL ? rm->itl : rm->queue;
}

/* Seconds as a latency reads: 850us, 42ms, 1.35s. */
static void fmt_latency(char *b, size_t n, double s)
{
    if (s < 0.001) snprintf(b, n, "%.0fus", s * 1e6);
    else if (s < 1.0) snprintf(b, n, "%.0fms", s * 1e3);
    else snprintf(b, n, "%.2fs", s);
}

/* The lesson names a metric as vLLM does (lab.metrics() keys): the hit
 * rate row answers to the two counters it divides. */
static const struct { const char *target, *row; } aliases[] = {
    { "prefix_cache_hits", "prefix cache hit rate" }, { "prefix_cache_queries", "prefix cache hit rate" },
    { "prefix_cache_hit_rate", "prefix cache hit rate" }, { "tokens_per_s", "throughput (tokens/s)" },
    { "external_prefix_cache_hits", "CPU tier hit rate" }, { "external_prefix_cache_queries", "CPU tier hit rate" },
    { "ttft", "vllm:time_to_first_token_seconds" }, { "itl", "vllm:inter_token_latency_seconds" },
    { "time_per_output_token_seconds", "vllm:inter_token_latency_seconds" },
    { "queue", "vllm:request_queue_time_seconds" },
};

static int is_hilited(const ui_view_ctx *c, const char *name)
{
    const lsn_view *v = ui_view_lesson(c, "metrics");
    if (!v) return 0;
    for (int i = 0; i < v->nhighlights; i++) {
        const char *t = v->highlights[i].target;
        if (!t) continue;
        if (!strncmp(t, "vllm:", 5)) t += 5;
        if (strstr(name, t)) return 1;
        for (size_t k = 0; k < sizeof aliases / sizeof aliases[0]; k++)
            if (!strcmp(t, aliases[k].target) && !strcmp(name, aliases[k].row)) return 1;
    }
    return 0;
}

/* Row k is drawn: the CPU tier's only with a tier. */
static int row_shown(const kv_frame *f, int k)
{
    return k != M_EXT || f->metrics.offload_capacity_blocks > 0;
}

static int metrics_want_h(const ui_view_ctx *c, int w)
{
    (void)w;
    return M_COUNT - !row_shown(c->f, M_EXT) + 2;
}

static int metrics_must_h(const ui_view_ctx *c, int w)
{
    (void)w;
    int n = 0;
    for (int k = 0; k < M_COUNT; k++) n += is_hilited(c, rows_def[k].name);
    return n ? n + 2 : 0;
}

void ui_sparkline(WINDOW *win, int y, int x, int width, const double *v, int n, double vmax, attr_t at)
{
    const ui_glyphs *g = ui_gl();
    if (width <= 0) return;
    if (vmax <= 0) {
        for (int i = 0; i < n; i++)
            if (v[i] > vmax) vmax = v[i];
    }
    int first = n > width ? n - width : 0;
    int pad = width - (n - first);
    for (int i = 0; i < pad; i++) ui_put(win, y, x + i, L' ', at);
    for (int i = first; i < n; i++) {
        int lvl = 0;
        if (vmax > 0 && v[i] > 0) {
            lvl = (int)(v[i] / vmax * 7.0 + 0.5);
            if (lvl < 1) lvl = 1;
            if (lvl > 7) lvl = 7;
            ui_put(win, y, x + pad + (i - first), g->spark[lvl], at);
        } else {
            ui_put(win, y, x + pad + (i - first), g->spark[0], ui_attr(UI_R_DIM));
        }
    }
}

/* Row k's value at timeline sample i (a running total for counters). */
static double sample(const kv_frame *f, int k, int i)
{
    const kv_timeline_sample *t = &f->timeline[i];
    switch (k) {
    case M_USAGE:   return t->kv_usage;
    case M_RUNNING: return t->num_running;
    case M_WAITING: return t->num_waiting;
    case M_PREEMPT: return (double)t->num_preemptions_total;
    case M_GEN:     return (double)t->generation_tokens_total;
    case M_HITS:    return t->prefix_hit_rate;
    case M_EXT:     return t->external_hit_rate;
    case M_TPUT:    return t->tokens_per_s;
    default:        return 0;
    }
}

/* The sparkline of row k in `cells` cells over the whole window the frame
 * holds: each cell covers an equal share of its steps, oldest left. */
static int bucket(const kv_frame *f, int k, int cells, double *out)
{
    int n = f->ntimeline;
    if (n == 0) return 0;
    int nc = cells < n ? cells : n;
    for (int c = 0; c < nc; c++) {
        int lo = (int)(((int64_t)c * n) / nc), hi = (int)(((int64_t)(c + 1) * n) / nc);
        if (rows_def[k].kind == K_TOTAL) {
            /* the total at the end of the cell, from where the window starts */
            out[c] = sample(f, k, hi - 1) - sample(f, k, 0);
        } else {
            double sum = 0;
            for (int i = lo; i < hi; i++) sum += sample(f, k, i);
            out[c] = hi > lo ? sum / (hi - lo) : 0;
        }
    }
    return nc;
}

static void metrics_draw(const ui_view_ctx *c, WINDOW *win)
{
    static double series[KV_FRAME_TIMELINE];
    const kv_frame *f = c->f;
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    char right[48] = "";
    if (f->has_engine && f->ntimeline > 1) {
        /* the window every sparkline covers */
        double span = f->timeline[f->ntimeline - 1].clock_s - f->timeline[0].clock_s;
        snprintf(right, sizeof right, "last %d steps, %.1f s", f->ntimeline, span);
    }
    ui_box(win, "metrics", right, c->focused);
    int iw = w - 4, ih = h - 2;
    if (iw < 10 || ih < 1) return;
    if (!f->has_engine) {
        ui_puts(win, 1, 2, iw, "No server is running.", ui_attr(UI_R_DIM));
        return;
    }
    const kv_engine_metrics *m = &f->metrics;
    const kv_timeline_sample *tl = f->timeline;
    int n = f->ntimeline;
    int strip = iw < 56; /* drop "vllm:" on narrow panes; the rest is vLLM's name */
    int valw = strip ? 7 : 9;
    /* The name column fits the longest name shown (vLLM's names are
     * long: vllm:time_per_output_token_seconds), leaving the value its room. */
    int namew = 0;
    for (int k = 0; k < M_COUNT; k++) {
        if (!row_shown(f, k)) continue;
        const char *nm = row_name(f, k);
        int l = (int)strlen(strip && !strncmp(nm, "vllm:", 5) ? nm + 5 : nm) + 1;
        if (l > namew) namew = l;
    }
    if (namew > iw - valw - 1) namew = iw - valw - 1;
    if (namew < 8) namew = 8;
    int sparkw = iw - namew - valw - 1;
    /* Which rows fit: all of them, else the ones the lesson highlights
     * first (the page points at them), then the rest in order. */
    int pick[M_COUNT], np = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int k = 0; k < M_COUNT && np < ih; k++)
            if (row_shown(f, k) && is_hilited(c, rows_def[k].name) == !pass) pick[np++] = k;
    for (int i = 1; i < np; i++) /* back in their own order */
        for (int j = i; j > 0 && pick[j - 1] > pick[j]; j--) { int t = pick[j]; pick[j] = pick[j - 1]; pick[j - 1] = t; }
    for (int r = 0; r < np; r++) {
        int k = pick[r];
        const char *name = row_name(f, k);
        int hl = is_hilited(c, rows_def[k].name) || is_hilited(c, name);
        if (strip && !strncmp(name, "vllm:", 5)) name += 5;
        char val[48], t1[32];
        switch (k) {
        case M_USAGE:   snprintf(val, sizeof val, "%.1f%%", m->kv_cache_usage_perc * 100.0); break;
        case M_RUNNING: snprintf(val, sizeof val, "%d", m->num_requests_running); break;
        case M_WAITING: snprintf(val, sizeof val, "%d", m->num_requests_waiting); break;
        case M_PREEMPT: kv_fmt_thousands(val, sizeof val, m->num_preemptions_total); break;
        case M_HITS:
            snprintf(val, sizeof val, "%.0f%%",
                     m->prefix_cache_queries > 0 ? 100.0 * (double)m->prefix_cache_hits / (double)m->prefix_cache_queries : 0.0);
            break;
        case M_EXT:
            snprintf(val, sizeof val, "%.0f%%",
                     m->external_prefix_cache_queries > 0
                         ? 100.0 * (double)m->external_prefix_cache_hits / (double)m->external_prefix_cache_queries
                         : 0.0);
            break;
        case M_GEN:     kv_fmt_thousands(val, sizeof val, m->generation_tokens_total); break;
        case M_TTFT: case M_ITL: case M_QUEUE: {
            const kv_latency_stats *ls = k == M_TTFT ? &m->ttft : k == M_ITL ? &m->itl : &m->queue;
            if (ls->count > 0) fmt_latency(val, sizeof val, ls->mean);
            else snprintf(val, sizeof val, "-");
            break;
        }
        default:
            kv_fmt_thousands(t1, sizeof t1, n > 0 ? (long long)tl[n - 1].tokens_per_s : 0);
            snprintf(val, sizeof val, "%s", t1);
            break;
        }
        attr_t at = hl ? ui_attr(UI_R_HILITE) : ui_attr(UI_R_NORMAL);
        ui_puts(win, 1 + r, 2, namew, name, at);
        int vl = (int)strlen(val);
        ui_puts(win, 1 + r, 2 + namew + (valw - vl > 0 ? valw - vl : 0), valw, val,
                k == M_PREEMPT && m->num_preemptions_total > 0 ? ui_attr(UI_R_WARN) : ui_attr(UI_R_TITLE));
        if (rows_def[k].kind == K_HIST) {
            /* a histogram has no per-step sample: its percentiles instead (mean in the value column) */
            const kv_latency_stats *ls = k == M_TTFT ? &m->ttft : k == M_ITL ? &m->itl : &m->queue;
            char pc[96], a1[16], a2[16];
            if (ls->count > 0) {
                fmt_latency(a1, sizeof a1, ls->p50);
                fmt_latency(a2, sizeof a2, ls->p99);
                snprintf(pc, sizeof pc, "mean  p50 %s  p99 %s  n %lld", a1, a2, (long long)ls->count);
            } else {
                snprintf(pc, sizeof pc, "no request yet");
            }
            if (sparkw >= 3) ui_puts(win, 1 + r, 2 + namew + valw + 1, sparkw, pc, ui_attr(UI_R_DIM));
        } else if (sparkw >= 3) {
            int nc = bucket(f, k, sparkw, series);
            double vmax = (k == M_USAGE || k == M_HITS || k == M_EXT) ? 1.0 : 0.0;
            ui_sparkline(win, 1 + r, 2 + namew + valw + 1, sparkw, series, nc, vmax,
                         ui_attr((ui_role)(UI_R_SERIES0 + k % 4)));
        }
    }
}

const ui_view_class ui_view_metrics = {
    .pane = UI_PANE_METRICS, .name = "metrics", .focusable = 1,
    .want_h = metrics_want_h, .must_h = metrics_must_h, .draw = metrics_draw, .on_mouse = NULL,
};
