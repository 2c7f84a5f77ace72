/* app_feed: what the views draw and animate. The frame: the engine and its
 * plan as of this frame, captured for the views (kv_frame.h). The engine's
 * event stream becomes block flashes (hits, evictions, a preemption
 * victim's blocks) and status lines; the start-up replay reveals the plan's
 * log line by line and the memory bar term by term. */
#include "app.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app_rewind.h"
#include "lsn_server.h"
#include "ui_fit.h"
#include "ui_mem.h"
#include "ui_pool.h"
#include "ui_style.h"

/* ---- helpers the views use -------------------------------------------- */

/* Start-up phases in order (ui_fit.h, shared with kvlab check's rule). */
#define NPHASES UI_FIT_NPHASES
static int phase_rank(const char *phase) { return ui_fit_phase_rank(phase); }

int app_line_phase(const char *line) { return phase_rank(lsn_server_log_phase(line)); }

/* The phase a view was asked to show up to (option "upto"), or the last. */
static int upto_rank(const app *a, const char *view)
{
    const char *upto = a->lsn ? lsn_view_option(a->lsn, view, "upto") : NULL;
    return upto ? phase_rank(upto) : NPHASES - 1;
}

int app_log_visible(const app *a, int i)
{
    const kv_plan *p = a->plan;
    if (!p || i < 0 || i >= p->num_log) return 0;
    return app_line_phase(p->log[i]) <= upto_rank(a, "log");
}

int app_engine_log_visible(const app *a)
{
    return upto_rank(a, "log") >= phase_rank("allocate") && a->startup_shown >= app_log_target(a);
}

/* Lines the log view may show now (visible lines are revealed in order). */
int app_log_target(const app *a)
{
    int n = 0;
    if (!a->plan) return 0;
    for (int i = 0; i < a->plan->num_log; i++) n += app_log_visible(a, i);
    return n;
}

static const int term_phase[UI_MEM_NT] = {
    [UI_MEM_T_CONTEXT] = 0, [UI_MEM_T_WEIGHTS] = 1, [UI_MEM_T_ACTIVATION] = 2,
    [UI_MEM_T_CUDAGRAPH] = 3, [UI_MEM_T_NCCL] = 2, [UI_MEM_T_NON_TORCH] = 2, [UI_MEM_T_KV] = 4,
};

unsigned app_mem_terms(const app *a)
{
    const kv_plan *p = a->plan;
    if (!p) return 0;
    int lim = upto_rank(a, "memory");
    /* While the log is still being revealed, the bar follows it. */
    int target = app_log_target(a);
    if (a->startup_shown < target) {
        int reached = -1, k = 0;
        for (int i = 0; i < p->num_log && k < a->startup_shown; i++) {
            if (!app_log_visible(a, i)) continue;
            int ph = app_line_phase(p->log[i]);
            if (ph > reached) reached = ph;
            k++;
        }
        if (reached < lim) lim = reached;
    }
    unsigned m = 0;
    for (int t = 0; t < UI_MEM_NT; t++)
        if (term_phase[t] <= lim) m |= 1u << t;
    return m;
}

int app_starting(const app *a) { return a->plan && a->startup_shown < app_log_target(a); }

/* ---- the engine's event feed ------------------------------------------- */

void app_reset_flashes(app *a)
{
    int32_t n = 0;
    if (a->eng) {
        kv_engine_info info;
        kv_engine_get_info(a->eng, &info);
        n = info.num_blocks;
    }
    if (n != a->nflash) {
        free(a->flash_kind);
        free(a->flash_until);
        a->flash_kind = n > 0 ? calloc((size_t)n, 1) : NULL;
        a->flash_until = n > 0 ? calloc((size_t)n, sizeof *a->flash_until) : NULL;
        a->nflash = (a->flash_kind && a->flash_until) ? n : 0;
    } else if (n > 0) {
        memset(a->flash_kind, 0, (size_t)n);
        memset(a->flash_until, 0, (size_t)n * sizeof *a->flash_until);
    }
    a->flashing = 0;
    a->host_flash = 0;
    a->host_flash_until = 0;
    a->host_stored_seen = a->host_loaded_seen = 0;
    if (a->eng) {
        kv_engine_metrics mt;
        kv_engine_get_metrics(a->eng, &mt);
        a->host_stored_seen = mt.offload_stored_blocks;
        a->host_loaded_seen = mt.offload_loaded_blocks;
    }
    kv_frame_forget(&a->frame);
}

void app_frame_update(app *a)
{
    kv_frame_opts o;
    /* Blocks only while the pool view is placed, and then the prefix its zoom needs. */
    o.blocks_prefix = (a->lay.placed & UI_PANE_BIT(UI_PANE_POOL)) ? ui_pool_blocks_wanted(&a->lay.r[UI_PANE_POOL]) : -1;
    o.extra_req = a->sel_req;
    const kv_engine *e;
    const kv_plan *p;
    app_rewind_source(a, &e, &p); /* the live engine, or the replay's past step */
    if (kv_frame_current(&a->frame, e, p, &o)) return;
    char err[160];
    if (kv_frame_capture(&a->frame, e, p, &o, err, sizeof err) != 0) app_status(a, UI_R_ERROR, "%s", err);
}

static void flash_block(app *a, int32_t b, int kind, double secs)
{
    if (b < 0 || b >= a->nflash) return;
    /* A stronger flash is not overwritten by a weaker one while it lasts. */
    if (a->flash_until[b] > a->now && a->flash_kind[b] == APP_FL_PREEMPT && kind != APP_FL_PREEMPT) return;
    a->flash_kind[b] = (uint8_t)kind;
    a->flash_until[b] = a->now + secs;
    a->flashing = 1;
}

/* Flashes and status lines for e's events after seq *since (only those of
 * step only_step when >= 0), each flash lasting `hold` seconds when hold > 0
 * (a replayed step keeps them until the next move). */
static void feed(app *a, const kv_engine *e, uint64_t *since, int64_t only_step, double hold)
{
    static kv_event ev[1024];
    for (;;) {
        int32_t n = kv_engine_events_since(e, *since, ev, 1024);
        if (n <= 0) break;
        int64_t preempted[16];
        int npre = 0;
        for (int32_t i = 0; i < n; i++)
            if (ev[i].type == KV_EV_PREEMPT && npre < 16) preempted[npre++] = ev[i].req_id;
        for (int32_t i = 0; i < n; i++) {
            const kv_event *v = &ev[i];
            if (only_step >= 0 && v->step != only_step) continue;
            switch (v->type) {
            case KV_EV_ALLOC: flash_block(a, v->block_id, APP_FL_ALLOC, hold > 0 ? hold : 0.3); break;
            case KV_EV_CACHE_HIT: flash_block(a, v->block_id, APP_FL_HIT, hold > 0 ? hold : 0.9); break;
            case KV_EV_EVICT: flash_block(a, v->block_id, APP_FL_EVICT, hold > 0 ? hold : 0.9); break;
            case KV_EV_FREE: {
                int victim = 0;
                for (int k = 0; k < npre; k++) victim |= preempted[k] == v->req_id;
                if (victim) flash_block(a, v->block_id, APP_FL_PREEMPT, hold > 0 ? hold : 1.5);
                break;
            }
            case KV_EV_PREEMPT:
                a->victim = v->req_id;
                a->victim_until = a->now + (hold > 0 ? hold : 2.0);
                app_status(a, UI_R_WARN, "Preempted request #%lld: its blocks are freed; it waits and will recompute",
                           (long long)v->req_id);
                a->status_engine = 1;
                break;
            case KV_EV_RESUME:
                app_status(a, UI_R_WARN, "Request #%lld is back from the queue: it recomputes what it lost",
                           (long long)v->req_id);
                a->status_engine = 1;
                break;
            default: break;
            }
        }
        *since = ev[n - 1].seq;
        if (n < 1024) break;
    }
    a->dirty |= UI_PANE_BIT(UI_PANE_POOL) | UI_PANE_BIT(UI_PANE_LOG) | UI_PANE_BIT(UI_PANE_REQUESTS);
}

void app_feed_from(app *a, const kv_engine *e, uint64_t since, int64_t only_step, double hold)
{
    if (e) feed(a, e, &since, only_step, hold);
}

/* The host tier moves no block the event stream names: its counters say
 * what a step stored (GPU -> host) or loaded (host -> GPU); a load wins. */
static void feed_host(app *a)
{
    kv_engine_metrics mt;
    kv_engine_get_metrics(a->eng, &mt);
    int64_t ds = mt.offload_stored_blocks - a->host_stored_seen, dl = mt.offload_loaded_blocks - a->host_loaded_seen;
    a->host_stored_seen = mt.offload_stored_blocks;
    a->host_loaded_seen = mt.offload_loaded_blocks;
    if (ds <= 0 && dl <= 0) return;
    a->host_flash = dl > 0 ? UI_FL_LOAD : UI_FL_STORE;
    a->host_flash_blocks = dl > 0 ? dl : ds;
    a->host_flash_until = a->now + 0.9;
    a->flashing = 1;
}

void app_feed_events(app *a)
{
    if (!a->eng || app_rewind_active(a)) return;
    feed_host(a);
    uint64_t newest = kv_engine_last_event_seq(a->eng);
    if (newest <= a->last_seq) return;
    /* After a long unanimated run only the recent past is worth flashing. */
    if (newest - a->last_seq > 8192) a->last_seq = newest - 8192;
    feed(a, a->eng, &a->last_seq, -1, 0);
}

void app_update_flashing(app *a)
{
    if (!a->flashing || app_rewind_active(a)) return; /* a replayed step's flashes hold still */
    int any = a->host_flash_until > a->now;
    for (int32_t b = 0; b < a->nflash && !any; b++) any = a->flash_until[b] > a->now;
    a->flashing = any;
    a->dirty |= UI_PANE_BIT(UI_PANE_POOL);
    if (a->victim >= 0) a->dirty |= UI_PANE_BIT(UI_PANE_REQUESTS);
}
