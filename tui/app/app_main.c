/* app_main: the lesson app. Terminal set-up and restore, the main loop
 * (input with a timeout, the lesson tick, the engine's event feed, drawing
 * only what changed), windows and overlays, resize and signals. Keys are in
 * app_keys.c, the event feed and start-up replay in app_feed.c.
 *
 * Speed: while nothing animates the loop blocks in wgetch with a long
 * timeout (no busy loop); while something animates it wakes at --fps.
 * Panes are redrawn only when marked dirty, and ncurses sends only the cells
 * that changed (wnoutrefresh + doupdate through the panel library; never
 * clear() or redrawwin() per frame). */
#include "app.h"
#include "app_rewind.h"
#include "app_room.h"

#include <stdarg.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "app_log.h"
#include "app_term.h"
#include "backend.h"
#include "commands.h"
#include "kv_history.h"
#include "kv_util.h"
#include "lsn_server.h"
#include "paths.h"
#include "ui_chrome.h"
#include "ui_fit.h"
#include "ui_style.h"
#include "ui_views.h"

#ifndef KVLAB_VERSION
#define KVLAB_VERSION "0.0.0"
#endif

static volatile sig_atomic_t g_quit_signal;

static void on_quit_signal(int sig) { g_quit_signal = sig; }
static int g_term_gone;  /* the loop ended because the terminal went away (app_term_gone) */

/* KVLAB_STATS=path: frame figures for bench/tui_bench.py, written at exit. */
static struct {
    const char *path;
    double t_start;           /* app_main entry, monotonic */
    double first_frame_s;     /* entry to the first frame on screen */
    long frames;              /* loop iterations that drew */
    double cpu_sum, cpu_max;  /* CPU seconds per drawing iteration (tick + events + draw) */
    float *cpu_samples;       /* per drawing iteration, seconds (up to 1<<20) */
} g_stats;

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void stats_write(void)
{
    if (!g_stats.path) return;
    char err[300];
    FILE *f = kv_open_output(g_stats.path, "w", NULL, 0, err, sizeof err); /* a FIFO or device: refused, not waited on */
    if (!f) { fprintf(stderr, "kvlab: KVLAB_STATS %s\n", err); return; }
    double p95 = 0;
    long n = g_stats.frames < (1L << 20) ? g_stats.frames : (1L << 20);
    if (g_stats.cpu_samples && n > 0) {
        /* Insertion sort would be slow on long runs; a counting pass over
         * 1 us buckets (capped at 20 ms) gives the 95th percentile exactly enough. */
        static long buckets[20001];
        memset(buckets, 0, sizeof buckets);
        for (long i = 0; i < n; i++) {
            long b = (long)(g_stats.cpu_samples[i] * 1e6);
            buckets[b < 20000 ? b : 20000]++;
        }
        long acc = 0;
        for (long b = 0; b <= 20000; b++) {
            acc += buckets[b];
            if (acc * 100 >= n * 95) { p95 = (double)(b + 1) * 1e-3; break; }
        }
    }
    fprintf(f, "{\"frames\": %ld, \"first_frame_ms\": %.2f, \"frame_cpu_mean_ms\": %.4f, "
               "\"frame_cpu_p95_ms\": %.3f, \"frame_cpu_max_ms\": %.4f}\n",
            g_stats.frames, g_stats.first_frame_s * 1e3,
            g_stats.frames ? g_stats.cpu_sum / (double)g_stats.frames * 1e3 : 0.0, p95, g_stats.cpu_max * 1e3);
    fclose(f);
}

double app_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}


/* ---- status line ------------------------------------------------------- */

void app_status(app *a, ui_role role, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->status, sizeof a->status, fmt, ap);
    va_end(ap);
    a->status_role = role;
    a->status_until = a->now + 6.0;
    a->status_page = -1; /* app_status_on_page binds one to its page */
    a->status_engine = 0;
    a->dirty |= UI_PANE_BIT(UI_PANE_HEADER) | UI_PANE_BIT(UI_PANE_FLAGS) | UI_PANE_BIT(UI_PANE_FOOTER);
}

/* The device is about to allocate and clear a lesson engine's KV pool (a
 * fraction of a second for tens of GiB, inside lesson code): the footer row
 * says so now, as the next frame comes only after it, and is redrawn then. */
static void on_device_progress(void *ctx, const char *what)
{
    app *a = ctx;
    WINDOW *w = a->lay.too_small ? NULL : a->win[UI_PANE_FOOTER];
    if (!w) return;
    werase(w);
    mvwaddnstr(w, 0, 1, what, getmaxx(w) - 2);
    wnoutrefresh(w);
    doupdate();
    a->dirty |= UI_PANE_BIT(UI_PANE_FOOTER);
}

/* ---- layout and windows ------------------------------------------------ */

unsigned app_shown_panes(const app *a, int *lesson_focus)
{
    /* the lesson's panes, as kvlab check's rule lays them out (ui_fit.h) */
    unsigned m = ui_fit_shown(a->lsn ? lsn_scene_get(a->lsn) : NULL, lesson_focus);
    if (a->key_focus == UI_PANE_FLAGS) m |= UI_PANE_BIT(UI_PANE_FLAGS);
    if (a->sel_req >= 0) m |= UI_PANE_BIT(UI_PANE_REQUESTS);
    /* The ranks of a tensor-parallel server, wherever the learner asks for
     * them with Tab (app_tp_reachable). */
    if (a->view_focus == UI_PANE_TP && app_tp_reachable(a)) m |= UI_PANE_BIT(UI_PANE_TP);
    return m;
}

int app_tp_reachable(const app *a)
{
    return a->plan && a->plan->starts && a->plan->tensor_parallel_size > 1;
}

static void destroy_windows(app *a)
{
    for (int p = 0; p < UI_PANE_COUNT; p++) {
        if (a->pan[p]) del_panel(a->pan[p]);
        if (a->win[p]) delwin(a->win[p]);
        a->pan[p] = NULL;
        a->win[p] = NULL;
    }
}

static WINDOW *g_small;
static PANEL *g_small_pan;
static WINDOW *g_ov;
static PANEL *g_ov_pan;

void app_close_overlay(void)
{
    if (g_ov_pan) del_panel(g_ov_pan);
    if (g_ov) delwin(g_ov);
    g_ov_pan = NULL;
    g_ov = NULL;
}

/* Recompute the layout; rebuild the windows when any rectangle moved. */
void app_relayout(app *a, int force)
{
    ui_layout_req req;
    memset(&req, 0, sizeof req);
    int lesson_focus;
    req.shown = app_shown_panes(a, &lesson_focus);
    req.focus = a->view_focus >= 0 ? a->view_focus : a->key_focus >= 0 ? a->key_focus : lesson_focus;
    int side_w = a->cols - a->cols / 2;
    if (side_w < 30) side_w = 30;
    app_frame_update(a);
    app_model_update(a);
    ui_views_want(&a->model, side_w, &req);
    ui_layout nl;
    ui_layout_compute(a->rows, a->cols, &req, &nl);
    if (!force && !memcmp(&nl, &a->lay, sizeof nl) && (a->win[UI_PANE_HEADER] || (nl.too_small && g_small)))
        return;
    a->lay = nl;
    destroy_windows(a);
    if (g_small_pan) { del_panel(g_small_pan); g_small_pan = NULL; }
    if (g_small) { delwin(g_small); g_small = NULL; }
    werase(stdscr);
    wnoutrefresh(stdscr);
    if (nl.too_small) {
        g_small = newwin(a->rows > 0 ? a->rows : 1, a->cols > 0 ? a->cols : 1, 0, 0);
        if (g_small) {
            keypad(g_small, TRUE);
            g_small_pan = new_panel(g_small);
        }
    } else {
        for (int p = 0; p < UI_PANE_COUNT; p++) {
            if (!(nl.placed & UI_PANE_BIT(p))) continue;
            ui_rect r = nl.r[p];
            a->win[p] = newwin(r.h, r.w, r.y, r.x);
            if (!a->win[p]) continue;
            keypad(a->win[p], TRUE);
            a->pan[p] = new_panel(a->win[p]);
        }
    }
    if (g_ov_pan) top_panel(g_ov_pan);
    a->dirty = ~0u;
}

static WINDOW *input_window(app *a)
{
    if (a->lay.too_small) return g_small ? g_small : stdscr;
    return a->win[UI_PANE_FOOTER] ? a->win[UI_PANE_FOOTER] : stdscr;
}

void app_open_overlay(app *a, int kind)
{
    a->overlay = kind;
    app_close_overlay();
    if (kind == APP_OV_NONE || a->lay.too_small) { a->dirty = ~0u; return; }
    int h, w;
    app_model_update(a);
    ui_chrome_overlay_size(&a->model, a->rows, a->cols, &h, &w);
    int y = (a->rows - h) / 2, x = (a->cols - w) / 2;
    if (y < 1) y = 1;
    if (x < 0) x = 0;
    g_ov = newwin(h, w, y, x);
    if (g_ov) {
        keypad(g_ov, TRUE);
        g_ov_pan = new_panel(g_ov);
    }
    a->dirty = ~0u;
}

/* ---- drawing ----------------------------------------------------------- */

static const lsn_scene no_scene = { .title = "", .state = LSN_IDLE, .text = "", .page_title = "" };

/* A recorded split (lab.split{show = true}) plays in the pool view over
 * SPLIT_PLAY_S seconds at speed 1, from its first frame when it appears. */
#define SPLIT_PLAY_S 12.0

static const lsn_split *split_of(app *a)
{
    const lsn_scene *s = app_rewind_scene(a, a->lsn ? lsn_scene_get(a->lsn) : &no_scene);
    return s ? s->split : NULL;
}

static int split_playing(app *a)
{
    const lsn_split *sp = split_of(a);
    return sp && !a->paused && a->split_frame >= 0 && a->split_frame < sp->nframes - 1;
}

static void split_tick(app *a, double dt)
{
    const lsn_split *sp = split_of(a);
    if (!sp || sp->nframes < 1) {
        a->split_key = NULL;
        a->split_frame = -1;
        return;
    }
    if (sp->frames != a->split_key) {
        a->split_key = sp->frames;
        a->split_clock = 0;
    } else if (!a->paused) {
        a->split_clock += dt * a->speed;
    }
    int k = (int)(a->split_clock / SPLIT_PLAY_S * (sp->nframes - 1));
    if (k > sp->nframes - 1) k = sp->nframes - 1;
    if (k != a->split_frame) {
        a->split_frame = k;
        a->dirty |= UI_PANE_BIT(UI_PANE_POOL);
    }
}

void app_model_update(app *a)
{
    ui_model *m = &a->model;
    m->frame = &a->frame;
    m->scene = app_rewind_scene(a, a->lsn ? lsn_scene_get(a->lsn) : &no_scene); /* a replay: its run's flags */
    m->st = &a->vst;
    m->rows = a->rows;
    m->cols = a->cols;
    m->lay = &a->lay;
    m->view_focus = a->view_focus;
    m->key_focus = a->key_focus;
    m->paused = a->paused;
    m->speed = a->speed;
    m->now = a->now;
    m->overlay = a->overlay;
    /* the runner's figures the header, the footer and the lesson list show */
    m->has_runner = a->lsn != NULL;
    m->lesson_current = a->lsn ? lsn_current(a->lsn) : 0;
    m->engine_runs = a->lsn ? lsn_engine_runs(a->lsn) : 0;
    m->nlessons = 0;
    for (int i = 0; a->lsn && i < lsn_count(a->lsn) && m->nlessons < UI_MAX_LESSONS; i++) {
        const lsn_info *li = lsn_info_at(a->lsn, i);
        if (li) m->lessons[m->nlessons++] = *li;
    }
    m->loading = a->loading;
    m->input_active = a->input_active;
    m->input = a->input;
    m->input_len = a->input_len;
    m->verdict = a->verdict;
    m->verdict_kind = a->verdict_kind;
    m->recap = a->recap;
    m->recap_page = a->recap_page;
    m->hints = (const char (*)[UI_HINT_MAX])a->hints;
    m->nhints = a->nhints;
    m->status = a->status;
    m->status_role = a->status_role;
    m->status_until = a->status_until;
    m->notice = a->notice;
    m->notice_page = a->notice_page;
    m->flag_editing = a->flag_editing;
    m->flag_selall = a->flag_selall;
    m->flag_buf = a->flag_buf;
    m->sel_req = a->sel_req;
    m->victim = a->victim;
    m->victim_until = a->victim_until;
    m->flashing = a->flashing;
    m->nflash = a->nflash;
    m->flash_kind = a->flash_kind;
    m->flash_until = a->flash_until;
    m->host_flash = a->host_flash;
    m->host_flash_blocks = a->host_flash_blocks;
    m->host_flash_until = a->host_flash_until;
    m->split_frame = m->scene->split ? a->split_frame : -1;
    m->startup_shown = a->startup_shown;
    m->log_target = app_log_target(a);
    m->engine_log_visible = app_engine_log_visible(a);
    /* the stats line as the learner's clock logs it; a replayed step: the frame's */
    m->stats_line = app_rewind_active(a) ? NULL : a->stats.line;
    m->stats_hits = app_rewind_active(a) ? NULL : a->stats.hits;
    m->starting = app_starting(a);
    m->mem_terms = app_mem_terms(a);
    memset(m->log_visible, 0, sizeof m->log_visible);
    for (int i = 0; a->plan && i < a->plan->num_log && i < KV_PLAN_MAX_LOG; i++)
        if (app_log_visible(a, i)) m->log_visible[i / 64] |= (uint64_t)1 << (i % 64);
    int lf;
    m->shown_panes = app_shown_panes(a, &lf);
    /* The memory view's second bar: the plan v kept, else the log's own. */
    m->mem_vs = a->vs_kept ? a->vs_plan : app_log_plan(&m->mem_vs_stated);
    if (a->vs_kept) m->mem_vs_stated = ~0u;
    m->mem_vs_label = a->vs_kept ? "kept" : "log";
    m->mem_label = a->vs_kept ? "now" : "kvlab";
    m->room_label = app_room_label(a);
    m->room_footer = app_room_footer_mode(a);
    m->room_followers = app_room_followers(a);
    m->room_drives = app_room_drives(a);
    m->presenter_left = app_room_presenter_left(a);
    m->room_idle = app_room_idle_text(a);
    const kv_history *h;
    app_rewind_view(a, &h, &m->rw_pos);
    m->rw_active = h != NULL;
    /* the header's replay timeline: its cells at this width and the marks in each */
    m->rw_first = h ? kv_history_first(h) : 0;
    m->rw_present = h ? kv_history_present(h) : 0;
    m->rw_ncells = h ? ui_chrome_timeline_cells(a->cols, m->rw_pos, m->rw_present) : 0;
    for (int c = 0; c < m->rw_ncells && c < UI_RW_MAX_CELLS && m->rw_present > m->rw_first; c++) {
        int64_t from, to;
        ui_chrome_timeline_span(m->rw_first, m->rw_present, m->rw_ncells, c, &from, &to);
        m->rw_marks[c] = kv_history_marks_between(h, from, to);
    }
    m->rw_kind = app_rewind_kind_name(a);
}

void app_draw_view(app *a, ui_pane p, WINDOW *win)
{
    app_model_update(a);
    ui_views_draw(&a->model, p, win);
}

void app_mouse_at(app *a, int sy, int sx, ui_mouse m)
{
    app_frame_update(a);
    app_model_update(a);
    ui_mouse_req req;
    a->dirty |= ui_views_mouse(&a->model, sy, sx, m, &req);
    if (req.sel_req != -2) a->sel_req = req.sel_req;
    if (req.flags_keys) a->key_focus = UI_PANE_FLAGS;
    if (req.relayout) app_relayout(a, 0);
}

static void draw(app *a)
{
    app_frame_update(a); /* one snapshot of the engine for every view */
    app_model_update(a);
    /* The header's run state decides where a status message goes (header
     * or footer, ui_chrome_status_in_footer) and what space does next. */
    if (a->dirty & UI_PANE_BIT(UI_PANE_HEADER)) a->dirty |= UI_PANE_BIT(UI_PANE_FOOTER) | UI_PANE_BIT(UI_PANE_FLAGS);
    if (a->lay.too_small) {
        if (g_small && a->dirty) ui_chrome_small(&a->model, g_small);
    } else {
        for (int p = 0; p < UI_PANE_COUNT; p++) {
            WINDOW *w = a->win[p];
            if (!w || !(a->dirty & UI_PANE_BIT(p))) continue;
            ui_views_draw(&a->model, (ui_pane)p, w);
        }
        if (g_ov && a->dirty) {
            ui_chrome_overlay(&a->model, g_ov);
            touchwin(g_ov);
        }
    }
    a->dirty = 0;
    update_panels();
    doupdate();
}

/* A lesson engine on a GPU writes K/V every step; each frame reads a
 * bounded sample back (LSN_VERIFY_SAMPLE_TOKENS), going round its requests,
 * and a mismatch is said once per engine. */
static void verify_sample(app *a)
{
    static const kv_engine *said;
    if (!a->eng || !strcmp(kv_engine_device_name(a->eng), "host") || said == a->eng)
        return;
    char err[320];
    if (kv_engine_verify_sample(a->eng, LSN_VERIFY_SAMPLE_TOKENS, NULL, err, sizeof err) != 0) {
        said = a->eng;
        app_status(a, UI_R_ERROR, "GPU read-back: %.240s", err);
    }
}

/* ---- reacting to the lesson --------------------------------------------- */

static void server_changed(app *a)
{
    a->eng = a->lsn ? lsn_engine(a->lsn) : NULL;
    a->plan = a->lsn ? lsn_plan(a->lsn) : NULL;
    a->last_seq = 0;
    a->vst.sel_block = -1;
    a->sel_req = -1;
    a->victim = -1;
    /* A preemption the old server had is not news about this one (the
     * restarted run would read as preempting before it has). */
    if (a->status_engine) {
        a->status[0] = '\0';
        a->status_until = 0;
        a->status_engine = 0;
    }
    app_reset_flashes(a);
    app_rewind_server(a); /* record the new engine (a new lesson: a new history) */
    a->startup_next = a->now;
    a->startup_shown = 0;
    app_relayout(a, 0);
    a->dirty = ~0u;
}

/* No hints shown, no typed text, no verdict: a new question, goal or lesson. */
static void clear_answer(app *a)
{
    a->nhints = 0;
    a->input_active = 0;
    a->input_len = 0;
    a->input[0] = 0;
    a->verdict[0] = 0;
    a->verdict_kind = -1;
}

void app_lesson_changed(app *a, unsigned ch)
{
    if (!ch) return;
    if (ch & LSN_CH_SERVER) server_changed(a);
    {
        /* A new question or goal starts with no hints, verdict or typed text;
         * a wrong answer to the same question keeps them. */
        const lsn_question *q = lsn_get_question(a->lsn);
        const lsn_goal *g = lsn_get_goal(a->lsn);
        char key[sizeof a->qkey];
        snprintf(key, sizeof key, "%s|%s", q ? q->prompt : "", g ? g->text : "");
        if (strcmp(key, a->qkey)) {
            snprintf(a->qkey, sizeof a->qkey, "%s", key);
            clear_answer(a);
            /* Whatever the learner types next answers the new question, so
             * the flags view gives the keys back (it kept them while the
             * learner reached the goal). */
            if (q && a->key_focus == UI_PANE_FLAGS) {
                a->key_focus = -1;
                a->flag_editing = 0;
                app_relayout(a, 0);
                a->dirty = ~0u;
            }
            if (q) a->input_active = 1;
        }
    }
    if (ch & (LSN_CH_VIEWS | LSN_CH_FLAGS | LSN_CH_SERVER | LSN_CH_ENGINE)) app_relayout(a, 0);
    a->dirty |= UI_PANE_BIT(UI_PANE_HEADER) | UI_PANE_BIT(UI_PANE_FOOTER);
    if (ch & (LSN_CH_TEXT | LSN_CH_QUESTION | LSN_CH_GOAL | LSN_CH_STATE)) a->dirty |= UI_PANE_BIT(UI_PANE_TEXT);
    if (ch & LSN_CH_ENGINE)
        a->dirty |= UI_PANE_BIT(UI_PANE_POOL) | UI_PANE_BIT(UI_PANE_METRICS) | UI_PANE_BIT(UI_PANE_REQUESTS) |
                    UI_PANE_BIT(UI_PANE_TP) | UI_PANE_BIT(UI_PANE_LOG);
    if (ch & LSN_CH_PLOT) a->dirty |= UI_PANE_BIT(UI_PANE_PLOT);
    if (ch & LSN_CH_FLAGS) a->dirty |= UI_PANE_BIT(UI_PANE_FLAGS);
    if (ch & LSN_CH_VIEWS) {
        a->dirty = ~0u;
        /* A flag the lesson points at becomes the selected one, so f then
         * Enter edits what the text talks about. */
        const lsn_view *fv = lsn_view_find(a->lsn, "flags");
        if (fv && fv->nhighlights > 0 && fv->highlights[0].target && !a->flag_editing) {
            for (int i = 0; i < lsn_flag_count(a->lsn); i++) {
                const lsn_flag *f = lsn_flag_at(a->lsn, i);
                if (f && !strcmp(f->name, fv->highlights[0].target)) { a->vst.flag_sel = i; break; }
            }
        }
    }
    const char *note = lsn_notice(a->lsn);
    if (note) {
        app_status(a, UI_R_WARN, "%s", note);
        /* the header shows one line of it: a longer one is also shown whole */
        if ((int)strlen(note) > a->cols - 30) {
            snprintf(a->notice, sizeof a->notice, "%s", note);
            a->notice_page = lsn_page_number(a->lsn);
            a->dirty |= UI_PANE_BIT(UI_PANE_TEXT);
        }
        lsn_notice_clear(a->lsn);
    }
}

/* What a newly opened lesson starts with in the app. */
static void lesson_ui_reset(app *a)
{
    clear_answer(a);
    a->status[0] = 0; /* nothing said in one lesson carries into the next */
    a->status_until = 0;
    a->recap[0] = 0;
    a->qkey[0] = 0;
    a->vst.text_scroll = 0;
    a->vst.last_page = -1;
    a->key_focus = -1;
    a->view_focus = -1;
    a->vst.flag_sel = 0;
    a->flag_editing = 0;
    a->vs_kept = 0; /* a plan kept in one lesson is not the next one's */
}

static void lesson_opened(app *a)
{
    lsn_set_speed(a->lsn, a->speed);
    server_changed(a);
    app_lesson_changed(a, ~0u & ~LSN_CH_SERVER);
}

void app_load_lesson(app *a, int number, int resume)
{
    lesson_ui_reset(a);
    if (lsn_load(a->lsn, number, resume) != 0 && lsn_current(a->lsn) != number)
        app_status(a, UI_R_ERROR, "Could not open lesson %d", number);
    lesson_opened(a);
}

void app_replay_lesson(app *a, int number, int step, const lsn_input *in, int nin, int step_starts)
{
    int focus = a->view_focus;
    /* The room's own message ("Following ...", "Back with ...") is about
     * the room, not the lesson: a replay keeps it. */
    char status[sizeof a->status];
    int role = a->status_role;
    double until = a->status_until;
    memcpy(status, a->status, sizeof status);
    lesson_ui_reset(a);
    memcpy(a->status, status, sizeof status);
    a->status_role = role;
    a->status_until = until;
    a->view_focus = focus; /* the presenter's, set again right after */
    if (lsn_replay(a->lsn, number, step, in, nin, 1 + (step_starts > 0 ? step_starts : 0)) != 0 && lsn_current(a->lsn) != number)
        app_status(a, UI_R_ERROR, "Could not open lesson %d", number);
    lesson_opened(a);
}

/* ---- start and the loop --------------------------------------------------- */

static const char *g_lessons_dir; /* --lessons DIR (else $KVLAB_LESSONS_DIR, else the installed lessons) */
static const char *g_vllm_version; /* --vllm-version V (else the progress file's, else the newest) */
static const char *g_accounting;   /* --accounting release|textbook */
static int g_room_mode;           /* APP_ROOM_*: --present / --follow */
static const char *g_log_file;    /* --log FILE: the app on a vLLM log (app_log.h) */
static char *g_log_args[4];       /* --model NAME / --gpu NAME with --log: what the log does not say */
static int g_log_nargs;
static const char *g_room_name;   /* ROOM after --present / --follow, NULL = the default room */
static const char *g_room_group;  /* --allow-group GROUP */

static int parse_args(app *a, int argc, char **argv, int *lesson)
{
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (!strcmp(s, "--version") || !strcmp(s, "-V")) {
            printf("kvlab %s (%s, %s)\n", KVLAB_VERSION, curses_version(), lsn_lua_version());
            return 0;
        } else if (!strcmp(s, "--lessons")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kvlab: --lessons needs a folder\n");
                return 2;
            }
            g_lessons_dir = argv[++i];
        } else if (!strcmp(s, "--log")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kvlab: --log needs a vLLM log file\n");
                return 2;
            }
            g_log_file = argv[++i];
        } else if ((!strcmp(s, "--model") || !strcmp(s, "--gpu")) && g_log_nargs < 3) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kvlab: %s needs a name (with --log: what the log does not say)\n", s);
                return 2;
            }
            g_log_args[g_log_nargs++] = argv[i];
            g_log_args[g_log_nargs++] = argv[++i];
        } else if (!strcmp(s, "--vllm-version") || !strcmp(s, "--accounting")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kvlab: %s needs a value (a release such as 0.11.0; release or textbook)\n", s);
                return 2;
            }
            if (!strcmp(s, "--vllm-version"))
                g_vllm_version = argv[++i];
            else
                g_accounting = argv[++i];
        } else if (!strcmp(s, "--present") || !strcmp(s, "--follow")) {
            int mode = !strcmp(s, "--present") ? APP_ROOM_PRESENT : APP_ROOM_FOLLOW;
            if (g_room_mode && g_room_mode != mode) {
                fprintf(stderr, "kvlab: --present and --follow do not go together\n");
                return 2;
            }
            g_room_mode = mode;
            if (i + 1 < argc && argv[i + 1][0] != '-')
                g_room_name = argv[++i]; /* the room is optional */
        } else if (!strcmp(s, "--allow-group")) {
            if (i + 1 >= argc || argv[i + 1][0] == '-') {
                fprintf(stderr, "kvlab: --allow-group needs a Unix group name (see getent group)\n");
                return 2;
            }
            g_room_group = argv[++i];
        } else if (!strcmp(s, "--ascii")) {
            a->force_ascii = 1;
        } else if (!strcmp(s, "--no-color") || !strcmp(s, "--no-colour")) {
            a->no_color = 1;
        } else if (!strcmp(s, "--lesson") || !strcmp(s, "--fps")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "kvlab: %s needs a number\n", s);
                return 2;
            }
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || end == argv[i]) {
                fprintf(stderr, "kvlab: %s takes a whole number, not '%s'\n", s, argv[i]);
                return 2;
            }
            if (!strcmp(s, "--fps")) {
                if (v < 1 || v > 120) {
                    fprintf(stderr, "kvlab: --fps must be between 1 and 120 (got %ld)\n", v);
                    return 2;
                }
                a->fps = (int)v;
            } else {
                if (v < 1 || v > 99) {
                    fprintf(stderr, "kvlab: --lesson takes a lesson number such as 1 (got %ld)\n", v);
                    return 2;
                }
                *lesson = (int)v;
            }
        } else if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            kvlab_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "kvlab: unknown option '%s' (try kvlab --help)\n", s);
            return 2;
        }
    }
    return -1;
}

int app_main(int argc, char **argv)
{
    static app A;
    app *a = &A;
    g_stats.t_start = app_now();
    g_stats.path = getenv("KVLAB_STATS");
    memset(a, 0, sizeof *a);
    a->fps = 30;
    a->speed = 1.0;
    a->key_focus = -1;
    a->view_focus = -1;
    a->sel_req = -1;
    a->vst.sel_block = -1;
    a->victim = -1;
    a->verdict_kind = -1;
    a->vst.last_page = -1;
    app_rewind_init(a);
    int lesson = 0;
    int rc = parse_args(a, argc, argv, &lesson);
    if (rc >= 0) return rc;
    if (g_room_group && g_room_mode != APP_ROOM_PRESENT) {
        fprintf(stderr, "kvlab: --allow-group opens a room you present: use it with --present\n");
        return 2;
    }
    if (g_room_mode == APP_ROOM_FOLLOW && lesson > 0) {
        fprintf(stderr, "kvlab: a follower shows the presenter's lesson: drop --lesson (x in the app explores on your own)\n");
        return 2;
    }

    if (g_log_nargs && !g_log_file) {
        fprintf(stderr, "kvlab: %s goes with --log FILE (kvlab serve takes a model on its own)\n", g_log_args[0]);
        return 2;
    }
    if (g_log_file && (lesson > 0 || g_room_mode || g_lessons_dir)) {
        fprintf(stderr, "kvlab: --log opens the app on one log: drop --lesson, --lessons, --present and --follow\n");
        return 2;
    }
    /* the locale is main.c's lesson_locale: the user's characters, C order and numbers */
    char err[512] = "";
    const char *log_course = NULL;
    if (g_log_file) { /* a one-lesson course made from the log; no progress is read or saved */
        log_course = app_log_course(g_log_file, g_log_nargs, g_log_args, err, sizeof err);
        if (!log_course) {
            fprintf(stderr, "kvlab: %s\n", err);
            return 2;
        }
        lesson = 1;
    }
    lsn_config cfg;
    memset(&cfg, 0, sizeof cfg);
    /* On a GPU box lesson engines hold real device memory (placeholders and
     * pools); without one this says so once and the host backend runs.
     * Creating the CUDA context takes a second or more before the screen
     * opens: say what is happening meanwhile. */
    const char *want_dev = getenv("KVLAB_DEVICE");
    /* A follower draws the presenter's state on the host backend: it never
     * opens the GPU (no CUDA context, no pool per student). */
    int follower = g_room_mode == APP_ROOM_FOLLOW;
    if (!follower && kv_device_gpu_driver() && !(want_dev && !strcmp(want_dev, "host")) && isatty(STDERR_FILENO))
        fprintf(stderr, "kvlab: opening the GPU (creating its CUDA context)...\n");
    kv_device *dev = follower ? NULL : kvlab_backend_open_app(8);
    cfg.device = dev;
    cfg.interrupt = &g_quit_signal; /* a signal also stops lesson code that is running */
    cfg.lessons_dir = log_course ? log_course : kvlab_lessons_dir_for(g_lessons_dir);
    cfg.assets_dir = kvlab_assets_dir();
    cfg.vllm_version = g_vllm_version;
    cfg.accounting = g_accounting;
    if (g_room_mode == APP_ROOM_FOLLOW || log_course)
        cfg.state_dir = ""; /* a follower neither reads nor writes progress (app_room.h) */
    cfg.history_bytes = KV_HISTORY_DEFAULT_BYTES; /* every run of the lesson, for [ ] { } (app_rewind.h) */
    a->lsn = lsn_new(&cfg, err, sizeof err);
    if (!a->lsn) { /* a lessons folder that is not one (--lessons /nonexistent): bad input */
        fprintf(stderr, "kvlab: %s\n", err);
        if (dev) dev->ops->destroy(dev);
        return 2;
    }
    if (lesson > 0 && !lsn_info_of(a->lsn, lesson)) {
        fprintf(stderr, "kvlab: there is no lesson %d (the course has %d; see kvlab lessons)\n", lesson,
                lsn_count(a->lsn));
        lsn_free(a->lsn);
        if (dev) dev->ops->destroy(dev);
        return 2;
    }
    if (app_room_open(a, g_room_mode, g_room_name, g_room_group, err, sizeof err) < 0) {
        fprintf(stderr, "kvlab: %s\n", err);
        lsn_free(a->lsn);
        if (dev) dev->ops->destroy(dev);
        return 2;
    }
    if (a->history_bytes) lsn_set_history_bytes(a->lsn, a->history_bytes); /* a follower's is short (app_room.c) */

    /* Our handlers are in place before the screen opens (newterm), so ncurses keeps them and
     * installs its own only for SIGTSTP (suspend: it restores the terminal
     * and redraws on resume). No SA_RESTART: wgetch returns and the loop
     * ends, restoring the terminal. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_quit_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);

    if (!getenv("ESCDELAY")) set_escdelay(25);
    if (app_term_open(err, sizeof err) < 0) {
        fprintf(stderr, "kvlab: %s\n", err);
        app_room_close(a);
        lsn_free(a->lsn);
        if (dev) dev->ops->destroy(dev);
        return 2;
    }
    cbreak();
    noecho();
    nonl();
    intrflush(stdscr, FALSE);
    curs_set(0);
    keypad(stdscr, TRUE);
    app_term_keys();
    ui_style_init(ui_style_detect(a->no_color));
    ui_glyphs_init(a->force_ascii);
    mousemask(BUTTON1_PRESSED | BUTTON1_CLICKED | BUTTON4_PRESSED
#ifdef BUTTON5_PRESSED
              | BUTTON5_PRESSED
#endif
              , NULL);
    mouseinterval(0);
    getmaxyx(stdscr, a->rows, a->cols);
    a->now = app_now();
    a->loading = g_room_mode == APP_ROOM_FOLLOW ? 0 : lesson > 0 ? lesson : lsn_resume_lesson(a->lsn);
    app_relayout(a, 1);
    if (dev) { /* a lesson engine's pool is allocated and cleared on this thread: say so meanwhile */
        dev->progress = on_device_progress;
        dev->progress_ctx = a;
    }
    draw(a); /* the first frame, before the lesson loads */
    g_stats.first_frame_s = app_now() - g_stats.t_start;

    if (a->loading)
        app_load_lesson(a, a->loading, 1);
    a->loading = 0;

    double last_tick = app_now();
    int quit = 0, no_key = 0;
    while (!quit && !g_quit_signal) {
        double cpu0 = g_stats.path ? cpu_now() : 0;
        a->now = app_now();
        double dt = a->now - last_tick;
        last_tick = a->now;
        if (dt > 0.25) dt = 0.25;
        unsigned ch_bits = 0;
        if (!a->paused && a->overlay == APP_OV_NONE && !app_room_drives(a) && !app_rewind_active(a)) {
            ch_bits = lsn_tick(a->lsn, dt);
            app_lesson_changed(a, ch_bits);
            verify_sample(a);
        }
        app_room_tick(a);
        app_feed_events(a);
        app_update_flashing(a);
        split_tick(a, dt);
        if (!app_rewind_active(a) && app_stats_tick(&a->stats, a->eng, a->plan, a->now))
            a->dirty |= UI_PANE_BIT(UI_PANE_LOG);
        if (a->plan) {
            /* Reveal the start-up log one line every 0.3 s (at speed 1); the
             * memory bar follows it term by term. */
            int target = app_log_target(a);
            if (a->startup_shown > target) {
                a->startup_shown = target;
                a->dirty |= UI_PANE_BIT(UI_PANE_MEMORY) | UI_PANE_BIT(UI_PANE_LOG) | UI_PANE_BIT(UI_PANE_TP);
            } else if (a->startup_shown < target && a->now >= a->startup_next) {
                a->startup_shown++;
                a->startup_next = a->now + 0.3 / a->speed;
                a->dirty |= UI_PANE_BIT(UI_PANE_MEMORY) | UI_PANE_BIT(UI_PANE_LOG) | UI_PANE_BIT(UI_PANE_TP);
            }
        }
        /* A message lasts a few seconds; one about a page ("Right: see the
         * text view.") only while that page is shown. */
        if (a->status[0] && (a->status_until <= a->now ||
                             (a->status_page >= 0 && a->lsn && lsn_page_number(a->lsn) != a->status_page))) {
            a->status[0] = 0;
            a->dirty |= UI_PANE_BIT(UI_PANE_HEADER) | UI_PANE_BIT(UI_PANE_FLAGS) | UI_PANE_BIT(UI_PANE_FOOTER);
        }
        if (a->dirty) {
            draw(a);
            app_room_drawn(a);
            if (g_stats.path) {
                double c = cpu_now() - cpu0;
                g_stats.frames++;
                g_stats.cpu_sum += c;
                if (c > g_stats.cpu_max) g_stats.cpu_max = c;
                if (!g_stats.cpu_samples) g_stats.cpu_samples = calloc((size_t)1 << 20, sizeof(float));
                if (g_stats.cpu_samples && g_stats.frames <= (1L << 20))
                    g_stats.cpu_samples[g_stats.frames - 1] = (float)c;
            }
        }

        lsn_state st = lsn_get_state(a->lsn);
        int animating = !a->paused && (st == LSN_RUNNING || st == LSN_WAIT_COND || ch_bits);
        animating |= (a->flashing && !app_rewind_active(a)) || app_starting(a) || split_playing(a);
        int timeout_ms = animating ? 1000 / a->fps : a->paused ? 1000 : 250;
        WINDOW *in = input_window(a);
        if (a->room) { /* wake for the room's sockets too */
            app_room_wait(a, timeout_ms);
            timeout_ms = 0;
        }
        wtimeout(in, timeout_ms);
        int ch = wgetch(in);
        if (ch == ERR) {
            /* No key: a timeout, or the terminal is gone (hung up without a
             * SIGHUP, end of input): then leave as on q instead of spinning.
             * Input that poll calls readable but that gives no key three
             * times running is end of input too. */
            no_key = app_term_readable() ? no_key + 1 : 0;
            if (app_term_gone() || no_key >= 3) {
                g_term_gone = 1;
                break;
            }
            continue;
        }
        no_key = 0;
        a->now = app_now();
        app_handle_key(a, ch, &quit);
        /* Drain keys already typed so a paste or a held key does not lag a frame each. */
        for (int k = 0; k < 64 && !quit; k++) {
            in = input_window(a);
            wtimeout(in, 0);
            ch = wgetch(in);
            if (ch == ERR) break;
            app_handle_key(a, ch, &quit);
        }
    }

    app_close_overlay();
    destroy_windows(a);
    if (g_small_pan) del_panel(g_small_pan);
    if (g_small) delwin(g_small);
    app_term_close();
    stats_write();
    free(g_stats.cpu_samples);
    app_room_close(a);
    app_rewind_free(a);
    lsn_free(a->lsn);
    if (dev) dev->ops->destroy(dev);
    app_stats_free(&a->stats);
    free(a->flash_kind);
    free(a->flash_until);
    free(a->vs_plan);
    kv_frame_free(&a->frame);
    if (g_quit_signal) return 128 + (int)g_quit_signal;
    if (g_term_gone) { /* as if hung up; stderr may be gone with the terminal */
        fprintf(stderr, "kvlab: the terminal went away (end of input); progress is saved\n");
        return 128 + SIGHUP;
    }
    return 0;
}
