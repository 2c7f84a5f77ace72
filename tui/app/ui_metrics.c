/* ui_metrics: see ui_metrics.h. */
#include "ui_metrics.h"

#include <stdio.h>
#include <string.h>

#include "kv_util.h"
#include "ui_style.h"

enum { M_USAGE, M_RUNNING, M_WAITING, M_PREEMPT, M_HITS, M_GEN, M_TPUT, M_COUNT };

static const char *const mnames[M_COUNT] = {
    "vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting",
    "vllm:num_preemptions_total", "prefix cache hit rate", "vllm:generation_tokens_total",
    "throughput (tokens/s)",
};

static int metrics_want_h(const ui_view_ctx *c, int w)
{
    (void)c;
    (void)w;
    return M_COUNT + 2;
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

static int hilited(const ui_view_ctx *c, const char *name)
{
    const lsn_view *v = ui_view_lesson(c, "metrics");
    if (!v) return 0;
    for (int i = 0; i < v->nhighlights; i++) {
        const char *t = v->highlights[i].target;
        if (!t) continue;
        if (!strncmp(t, "vllm:", 5)) t += 5;
        if (strstr(name, t)) return 1;
    }
    return 0;
}

static void metrics_draw(const ui_view_ctx *c, WINDOW *win)
{
    static double series[KV_FRAME_TIMELINE];
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    ui_box(win, "metrics", "", c->focused);
    int iw = w - 4, ih = h - 2;
    if (iw < 10 || ih < 1) return;
    if (!c->f->has_engine) {
        ui_puts(win, 1, 2, iw, "No server is running.", ui_attr(UI_R_DIM));
        return;
    }
    const kv_engine_metrics *m = &c->f->metrics;
    const kv_timeline_sample *tl = c->f->timeline;
    int n = c->f->ntimeline;
    int strip = iw < 56; /* drop "vllm:" on narrow panes; the rest is vLLM's name */
    int namew = strip ? 23 : 28;
    if (namew > iw - 12) namew = iw - 12;
    int valw = 9;
    int sparkw = iw - namew - valw - 2;
    for (int k = 0; k < M_COUNT && k < ih; k++) {
        const char *name = mnames[k];
        if (strip && !strncmp(name, "vllm:", 5)) name += 5;
        char val[48], t1[32];
        double vmax = 0;
        for (int i = 0; i < n; i++) {
            switch (k) {
            case M_USAGE:   series[i] = tl[i].kv_usage; vmax = 1.0; break;
            case M_RUNNING: series[i] = tl[i].num_running; break;
            case M_WAITING: series[i] = tl[i].num_waiting; break;
            case M_PREEMPT: series[i] = tl[i].num_preempted; break;
            case M_HITS:    series[i] = tl[i].prefix_hit_rate; vmax = 1.0; break;
            case M_GEN:     series[i] = tl[i].num_scheduled_tokens; break;
            default:        series[i] = tl[i].tokens_per_s; break;
            }
        }
        if (k == M_PREEMPT && n > 0) {
            /* A counter only grows: plot its running total (ending at the
             * value shown), not the per-step preemptions. */
            double step_next = series[n - 1];
            series[n - 1] = (double)m->num_preemptions_total;
            for (int i = n - 2; i >= 0; i--) {
                double here = series[i];
                series[i] = series[i + 1] - step_next;
                if (series[i] < 0) series[i] = 0;
                step_next = here;
            }
        }
        switch (k) {
        case M_USAGE:   snprintf(val, sizeof val, "%.1f%%", m->kv_cache_usage_perc * 100.0); break;
        case M_RUNNING: snprintf(val, sizeof val, "%d", m->num_requests_running); break;
        case M_WAITING: snprintf(val, sizeof val, "%d", m->num_requests_waiting); break;
        case M_PREEMPT: kv_fmt_thousands(val, sizeof val, m->num_preemptions_total); break;
        case M_HITS:
            snprintf(val, sizeof val, "%.0f%%",
                     m->prefix_cache_queries > 0 ? 100.0 * (double)m->prefix_cache_hits / (double)m->prefix_cache_queries : 0.0);
            break;
        case M_GEN:     kv_fmt_thousands(val, sizeof val, m->generation_tokens_total); break;
        default:
            kv_fmt_thousands(t1, sizeof t1, n > 0 ? (long long)tl[n - 1].tokens_per_s : 0);
            snprintf(val, sizeof val, "%s", t1);
            break;
        }
        attr_t at = hilited(c, name) ? ui_attr(UI_R_HILITE) : ui_attr(UI_R_NORMAL);
        ui_puts(win, 1 + k, 2, namew, name, at);
        int vl = (int)strlen(val);
        ui_puts(win, 1 + k, 2 + namew + (valw - vl > 0 ? valw - vl : 0), valw, val,
                k == M_PREEMPT && m->num_preemptions_total > 0 ? ui_attr(UI_R_WARN) : ui_attr(UI_R_TITLE));
        if (sparkw >= 3)
            ui_sparkline(win, 1 + k, 2 + namew + valw + 2, sparkw, series, n, vmax,
                         ui_attr((ui_role)(UI_R_SERIES0 + k % 4)));
    }
}

const ui_view_class ui_view_metrics = {
    .pane = UI_PANE_METRICS, .name = "metrics", .focusable = 1,
    .want_h = metrics_want_h, .draw = metrics_draw, .on_mouse = NULL,
};
