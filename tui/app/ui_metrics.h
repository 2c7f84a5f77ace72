/* ui_metrics: vLLM's metrics by their names (vllm:kv_cache_usage_perc,
 * vllm:num_requests_running, ...) with their current value and a sparkline
 * of the engine's per-step timeline. */
#ifndef UI_METRICS_H
#define UI_METRICS_H

#include "ui_views.h"

extern const ui_view_class ui_view_metrics;

/* Draw a sparkline of v[0..n) (oldest first) scaled to [0, vmax] (vmax <= 0:
 * the series' own maximum) into width cells at (y, x); the newest sample is
 * the rightmost cell. */
void ui_sparkline(WINDOW *win, int y, int x, int width, const double *v, int n, double vmax, attr_t at);

#endif
