/* app_stats: vLLM's periodic stats line ("Engine 000: Avg prompt throughput:
 * ..., Running: N reqs, Waiting: M reqs, GPU KV cache usage: X%, ...") as
 * the learner watching the app would see vLLM log it: every logging
 * interval of the release (10 s in V1, 5 s in V0) of the learner's own
 * time. vLLM's logger runs on the server's wall clock; kvlab's server lives
 * on the engine's virtual clock, which a page that animates slowly moves a
 * few times slower than the learner's (the playground: 2.8 s of engine time
 * in 30 s), so a line per 10 s of engine time came minutes late. Each line
 * covers the engine time since the last one (kv_metrics_stats_span), or
 * the newest whole interval when the engine ran a whole one or more since
 * (kv_metrics_stats_line, the frame's line). Engine figures only; the app
 * hands the line to the log view (ui_model.stats_line). */
#ifndef APP_STATS_H
#define APP_STATS_H

#include "kv_engine.h"
#include "kv_frame.h"
#include "kv_plan.h"

typedef struct app_stats {
    const kv_engine *eng;    /* the engine the figures are of (another one: start over) */
    double next;             /* learner's clock (s) of the next line */
    double clock;            /* engine clock at the last line */
    int active;              /* the last span had throughput (V1 is quiet after two idle ones) */
    char line[KV_FRAME_STATS_LEN];
    char hits[KV_FRAME_STATS_LEN / 2];
    kv_timeline_sample *tl;  /* scratch: the engine's timeline */
    int32_t cap;
} app_stats;

/* Forget everything (a new engine or none): no line until an interval of
 * the learner's time has passed from the next tick. */
void app_stats_reset(app_stats *s, const kv_engine *e);

/* Called every frame: at the interval's end, the line for the engine time
 * since the last one (kept as it was when the engine did not move: a paused
 * server logs nothing new). e NULL: no line. now: the learner's clock (s).
 * Returns 1 when the line changed (the log view is to be drawn again). */
int app_stats_tick(app_stats *s, const kv_engine *e, const kv_plan *plan, double now);

void app_stats_free(app_stats *s);

#endif
