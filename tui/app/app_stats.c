/* app_stats: see app_stats.h. */
#include "app_stats.h"

#include <stdlib.h>
#include <string.h>

#include "kv_metrics.h"
#include "kv_release.h"

void app_stats_reset(app_stats *s, const kv_engine *e)
{
    s->eng = e;
    s->clock = 0;
    s->active = 0;
    s->line[0] = s->hits[0] = '\0';
    s->next = -1; /* set at the next tick, from the plan's release */
}

void app_stats_free(app_stats *s)
{
    free(s->tl);
    s->tl = NULL;
    s->cap = 0;
}

int app_stats_tick(app_stats *s, const kv_engine *e, const kv_plan *plan, double now)
{
    int changed = 0;
    if (e != s->eng) {
        changed = s->line[0] != '\0';
        app_stats_reset(s, e);
    }
    if (!e || !plan) return changed;
    const kv_release_metrics *rm = kv_release_metrics_of(plan->release, plan->engine_v1);
    if (!rm || rm->interval_s <= 0) return changed;
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    if (info.clock_s + 1e-9 < s->clock) { /* the same address, a new engine */
        changed |= s->line[0] != '\0';
        app_stats_reset(s, e);
    }
    if (s->next < 0) s->next = now + rm->interval_s;
    int whole = info.clock_s >= s->clock + rm->interval_s;
    if (now < s->next && !whole) return changed;
    s->next = now + rm->interval_s;
    if (!(info.clock_s > s->clock)) return changed; /* the engine did not move: nothing new */
    const kv_engine_config *cfg = kv_engine_get_config(e);
    int32_t cap = (int32_t)(cfg->timeline_capacity ? cfg->timeline_capacity : 4096);
    if (cap > s->cap) {
        kv_timeline_sample *t = realloc(s->tl, (size_t)cap * sizeof *t);
        if (!t) return changed;
        s->tl = t;
        s->cap = cap;
    }
    int32_t n = kv_engine_timeline(e, s->tl, s->cap);
    /* A line that is not logged (quiet while idle) leaves the last one
     * standing, as it stays in vLLM's log. */
    char line[sizeof s->line], hits[sizeof s->hits];
    int got, act = 0;
    if (whole) {
        /* a whole interval or more of engine time since the last line: the
         * newest whole interval, as vLLM on that clock would have logged it */
        got = kv_metrics_stats_line(rm, s->tl, n, cfg->enable_prefix_caching, line, sizeof line, hits, sizeof hits);
        act = got;
    } else {
        got = kv_metrics_stats_span(rm, s->tl, n, cfg->enable_prefix_caching, s->clock, info.clock_s, &act,
                                    s->active, line, sizeof line, hits, sizeof hits);
    }
    if (got) {
        memcpy(s->line, line, sizeof line);
        memcpy(s->hits, hits, sizeof hits);
    }
    s->active = act;
    s->clock = info.clock_s;
    return changed || got;
}
