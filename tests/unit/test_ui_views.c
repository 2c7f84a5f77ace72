/* The app's views drawn off-screen from a frame alone: the engine the frame
 * was taken from is gone, no lesson is loaded, and the pool, requests,
 * metrics and tp views still show that engine's blocks, block tables and
 * figures. Also the view table itself (a class per pane, named as the
 * layout names it) and a click handed to the pool view. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#include <cmocka.h>

#include "app.h"
#include "kv_frame.h"
#include "kv_history.h"
#include "kv_util.h"
#include "ui_chrome.h"
#include "ui_layout.h"
#include "ui_mem.h"
#include "ui_views.h"

static app A;
static SCREEN *g_scr;
static FILE *g_out, *g_in;

static int setup(void **state)
{
    (void)state;
    setenv("TERM", "xterm", 1);
    g_out = fopen("/dev/null", "w");
    g_in = fopen("/dev/null", "r");
    if (!g_out || !g_in) return -1;
    g_scr = newterm("xterm", g_out, g_in);
    if (!g_scr) return -1;
    ui_style_init(UI_COLOR_NONE);
    ui_glyphs_init(1);
    memset(&A, 0, sizeof A);
    A.rows = 24;
    A.cols = 80;
    A.speed = 1.0;
    A.view_focus = A.key_focus = -1;
    A.sel_req = -1;
    A.vst.sel_block = -1;
    A.victim = -1;
    A.verdict_kind = -1;
    A.vst.last_page = -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    kv_frame_free(&A.frame);
    endwin();
    delscreen(g_scr);
    fclose(g_out);
    fclose(g_in);
    return 0;
}

/* Row y of win as ASCII text (the glyphs are ASCII here). */
static const char *row_text(WINDOW *win, int y)
{
    static char s[256];
    int h, w;
    getmaxyx(win, h, w);
    (void)h;
    for (int x = 0; x < w && x < 255; x++) {
        cchar_t cc;
        wchar_t wc[CCHARW_MAX + 1];
        attr_t at;
        short pair;
        s[x] = '?';
        if (mvwin_wch(win, y, x, &cc) == OK && getcchar(&cc, wc, &at, &pair, NULL) == OK && wc[0] < 128)
            s[x] = wc[0] ? (char)wc[0] : ' ';
        s[x + 1] = 0;
    }
    return s;
}

/* Does any row of win hold text? */
static int win_has(WINDOW *win, const char *text)
{
    int h, w;
    getmaxyx(win, h, w);
    (void)w;
    for (int y = 0; y < h; y++)
        if (strstr(row_text(win, y), text)) return 1;
    return 0;
}

static void dump(WINDOW *win)
{
    int h, w;
    getmaxyx(win, h, w);
    (void)w;
    for (int y = 0; y < h; y++) fprintf(stderr, "  |%s|\n", row_text(win, y));
}

/* The number drawn after label on its row (-1 when the label is not drawn). */
static long value_after(WINDOW *win, const char *label)
{
    int h, w;
    getmaxyx(win, h, w);
    (void)w;
    for (int y = 0; y < h; y++) {
        const char *r = strstr(row_text(win, y), label);
        if (r) return strtol(r + strlen(label), NULL, 10);
    }
    dump(win);
    return -1;
}

#define assert_win_has(win, text) do { if (!win_has(win, text)) { dump(win); fail_msg("'%s' not drawn", text); } } while (0)

/* The state of test_frame.c: A and B share blocks 1 and 2 (B's 32-token
 * prefix-cache hit), A holds 3 and 4, B holds 5, C waits. */
static kv_engine *known_engine(void)
{
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 33;
    c.max_model_len = 4096;
    c.max_num_batched_tokens = 2048;
    c.max_num_seqs = 2;
    c.tensor_parallel_size = 2;
    c.verify = 0;
    c.write_kv = 0;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e) fail_msg("create: %s", err);
    int32_t ids[48];
    for (int r = 0; r < 3; r++) {
        for (int i = 0; i < 48; i++) ids[i] = (r < 2 && i < 32) ? 1000 + i : 5000 + r * 1000 + i;
        kv_request_spec s = { .prompt_token_ids = ids, .num_prompt_token_ids = 48, .output_tokens = 8,
                              .arrival_s = -1 };
        if (kv_engine_submit(e, &s, err, sizeof err) < 0) fail_msg("submit: %s", err);
        if (r == 0 && kv_engine_step(e, NULL, err, sizeof err) < 0) fail_msg("step: %s", err);
    }
    if (kv_engine_step(e, NULL, err, sizeof err) < 0) fail_msg("step: %s", err);
    return e;
}

static void test_table(void **state)
{
    (void)state;
    for (int p = 0; p < UI_PANE_COUNT; p++) {
        const ui_view_class *k = ui_view_class_of((ui_pane)p);
        assert_non_null(k);
        assert_int_equal(k->pane, p);
        assert_string_equal(k->name, ui_layout_pane_name((ui_pane)p));
        assert_non_null(k->draw);
        /* Tab stops at the side views only. */
        assert_int_equal(k->focusable, p >= UI_PANE_MEMORY);
    }
    assert_null(ui_view_class_of(UI_PANE_COUNT));
}

static void test_draw_from_frame_alone(void **state)
{
    (void)state;
    kv_engine *e = known_engine();
    char err[256];
    assert_int_equal(kv_frame_capture(&A.frame, e, NULL, NULL, err, sizeof err), 0);
    kv_engine_destroy(e);
    A.eng = NULL; /* the views must not need it */

    WINDOW *w = newwin(8, 40, 0, 0);
    assert_non_null(w);
    app_draw_view(&A, UI_PANE_POOL, w);
    assert_win_has(w, "33 blocks x 16 tokens");
    /* Null block, the two shared blocks (ref 2), A's own two (its letter),
     * B's one, then free blocks. */
    assert_win_has(w, "@22AAB....");
    assert_win_has(w, "used 5 (16%)  shared 2");

    WINDOW *wr = newwin(8, 60, 0, 0);
    app_draw_view(&A, UI_PANE_REQUESTS, wr);
    assert_win_has(wr, "2 running, 1 waiting");
    assert_win_has(wr, "A #0   run      49/56    tok  1 2 3 4");
    assert_win_has(wr, "B #1   run      48/56    tok  1 2 5");
    assert_win_has(wr, "C #2   wait      0/56    tok");
    delwin(wr);

    WINDOW *wm = newwin(10, 60, 0, 0);
    app_draw_view(&A, UI_PANE_METRICS, wm);
    assert_int_equal(value_after(wm, "vllm:num_requests_running"), 2);
    assert_int_equal(value_after(wm, "vllm:num_requests_waiting"), 1);
    assert_int_equal(value_after(wm, "vllm:num_preemptions_total"), 0);

    app_draw_view(&A, UI_PANE_TP, wm);
    assert_win_has(wm, "tp=2, 8 KV heads");
    assert_win_has(wm, "GPU0");
    assert_win_has(wm, "GPU1");
    delwin(wm);

    /* What the layout asks of the classes comes from the frame too. */
    app_model_update(&A);
    ui_view_ctx c = ui_view_ctx_of(&A.model, UI_PANE_REQUESTS);
    assert_int_equal(ui_view_class_of(UI_PANE_REQUESTS)->want_h(&c, 40), 2 + 4); /* 3 live: the 4-row step */
    c = ui_view_ctx_of(&A.model, UI_PANE_POOL);
    assert_int_equal(ui_view_class_of(UI_PANE_POOL)->want_h(&c, 40), 1 + 3); /* 33 blocks in 38 columns: one row */
    delwin(w);
}

static void test_click_picks_block(void **state)
{
    (void)state;
    kv_engine *e = known_engine();
    A.eng = e;
    kv_frame_forget(&A.frame);
    /* No view draws the pool: the frame holds no blocks. */
    memset(&A.lay, 0, sizeof A.lay);
    app_frame_update(&A);
    assert_true(A.frame.has_engine);
    assert_int_equal(A.frame.nblocks, 0);
    /* The pool as the layout placed it, drawn once so it knows its cells. */
    A.lay.rows = A.rows;
    A.lay.cols = A.cols;
    A.lay.placed = UI_PANE_BIT(UI_PANE_POOL);
    A.lay.r[UI_PANE_POOL] = (ui_rect){ .y = 2, .x = 10, .h = 8, .w = 40 };
    app_frame_update(&A);
    assert_int_equal(A.frame.nblocks, 33);
    WINDOW *w = newwin(8, 40, 2, 10);
    app_draw_view(&A, UI_PANE_POOL, w);
    /* Block 5 sits in the sixth cell of the first grid row. */
    app_mouse_at(&A, 2 + 1, 10 + 1 + 5, UI_MOUSE_CLICK);
    assert_int_equal(A.vst.sel_block, 5);
    assert_int_equal(A.sel_req, 1); /* its owner, B */
    assert_true(A.dirty & UI_PANE_BIT(UI_PANE_REQUESTS));
    /* The status line names the picked block and every request holding it. */
    app_draw_view(&A, UI_PANE_POOL, w);
    assert_win_has(w, "block 5: used ref 1 req #1 hashed");
    /* (The click relaid the screen out for a lesson-less app: no pool; put it back.) */
    A.lay.placed = UI_PANE_BIT(UI_PANE_POOL);
    A.lay.r[UI_PANE_POOL] = (ui_rect){ .y = 2, .x = 10, .h = 8, .w = 40 };
    app_mouse_at(&A, 2 + 1, 10 + 1 + 2, UI_MOUSE_CLICK);
    app_draw_view(&A, UI_PANE_POOL, w);
    assert_win_has(w, "block 2: used ref 2 req #0,#1 hashed");
    /* The wheel over the pool picks nothing. */
    A.lay.placed = UI_PANE_BIT(UI_PANE_POOL);
    A.lay.r[UI_PANE_POOL] = (ui_rect){ .y = 2, .x = 10, .h = 8, .w = 40 };
    A.vst.sel_block = -1;
    app_mouse_at(&A, 2 + 1, 10 + 1 + 5, UI_MOUSE_WHEEL_UP);
    assert_int_equal(A.vst.sel_block, -1);
    delwin(w);
    A.eng = NULL;
    kv_engine_destroy(e);
    kv_frame_forget(&A.frame);
}

/* An engine of the known config after `steps` steps of eight requests. */
static kv_engine *generating_engine(int steps)
{
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 200;
    c.max_model_len = 4096;
    c.max_num_batched_tokens = 2048;
    c.verify = 0;
    c.write_kv = 0;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e) fail_msg("create: %s", err);
    for (int r = 0; r < 8; r++) {
        kv_request_spec s = { .prompt_tokens = 64 + 16 * r, .output_tokens = 200, .arrival_s = -1 };
        if (kv_engine_submit(e, &s, err, sizeof err) < 0) fail_msg("submit: %s", err);
    }
    for (int i = 0; i < steps; i++)
        if (kv_engine_step(e, NULL, err, sizeof err) < 0) fail_msg("step: %s", err);
    return e;
}

/* The metrics view draws every sparkline from the frame alone: a frame of
 * an earlier step (a rewind) and then the later one again (back to the
 * present) draw the later one as the first time. The generation row kept
 * its own samples in the view, which a smaller step wiped ("6,807 ▁█"). */
static void test_metrics_back_and_forth(void **state)
{
    (void)state;
    kv_engine *now = generating_engine(120), *past = generating_engine(30);
    char err[256], before[256];
    WINDOW *wm = newwin(12, 70, 0, 0); /* every row */
    int row = -1;
    assert_int_equal(kv_frame_capture(&A.frame, now, NULL, NULL, err, sizeof err), 0);
    app_draw_view(&A, UI_PANE_METRICS, wm);
    for (int y = 0; y < 12 && row < 0; y++)
        if (strstr(row_text(wm, y), "generation_tokens_total")) row = y;
    if (row < 0) { dump(wm); fail_msg("no generation row"); }
    snprintf(before, sizeof before, "%s", row_text(wm, row));
    /* the value is the engine's, and its sparkline fills its cells (120
     * steps of samples in the frame's timeline, none left blank) */
    kv_engine_metrics m;
    kv_engine_get_metrics(now, &m);
    assert_int_equal(value_after(wm, "vllm:generation_tokens_total"), m.generation_tokens_total);
    const char *sp = strstr(before, "generation_tokens_total") + strlen("generation_tokens_total");
    while (*sp == ' ') sp++;
    while ((*sp >= '0' && *sp <= '9') || *sp == ',') sp++;
    assert_int_equal(*sp++, ' ');
    int cells = 0;
    for (; *sp && *sp != '|' && *sp != ' '; sp++) cells++;
    if (cells < 20 || (*sp && *sp != '|' && *sp != ' ')) fail_msg("a short sparkline (%d cells): |%s|", cells, before);
    for (; *sp == ' '; sp++) {}
    if (*sp && *sp != '|') fail_msg("a gap in the sparkline: |%s|", before);
    /* a rewind: the frame of an earlier step */
    assert_int_equal(kv_frame_capture(&A.frame, past, NULL, NULL, err, sizeof err), 0);
    app_draw_view(&A, UI_PANE_METRICS, wm);
    kv_engine_get_metrics(past, &m);
    assert_int_equal(value_after(wm, "vllm:generation_tokens_total"), m.generation_tokens_total);
    kv_frame_forget(&A.frame);
    assert_int_equal(kv_frame_capture(&A.frame, now, NULL, NULL, err, sizeof err), 0);
    app_draw_view(&A, UI_PANE_METRICS, wm);
    if (strcmp(row_text(wm, row), before)) {
        dump(wm);
        fail_msg("the generation row changed after a rewind and back:\n  before |%s|\n  after  |%s|", before,
                 row_text(wm, row));
    }
    delwin(wm);
    kv_engine_destroy(now);
    kv_engine_destroy(past);
    kv_frame_forget(&A.frame);
}

/* Every glyph a view draws (the glyph table in use, the letters and marks
 * the views put beside it) has a legend line in the help, each glyph once:
 * ':' (cached) and the bars' free KV are told apart. Checked in ASCII and
 * without colour, the mode that has only glyphs. */
static void test_help_legend_whole(void **state)
{
    (void)state;
    const ui_glyphs *g = ui_gl();
    /* glyph -> how many legend lines show it */
    int seen[128] = {0};
    int n = ui_chrome_help_lines(), legend = 0;
    assert_true(n > 22); /* taller than 80x24 leaves: the overlay must scroll */
    for (int i = 0; i < n; i++) {
        wchar_t gl[10];
        char text[160];
        int kind = ui_chrome_help_line(i, gl, 10, text, sizeof text);
        assert_true(kind >= 0);
        /* every line whole at 80 columns (a 74-column overlay): text from
         * column 2, a legend's words after its glyphs (column 14 on) */
        int ng = 0;
        while (gl[ng]) ng++;
        int room = kind == 2 ? 74 - 2 - (4 + ng + 2 > 14 ? 4 + ng + 2 : 14) : 70;
        if ((int)strlen(text) > room) fail_msg("help line %d is cut at 80 columns (%zu > %d): %s", i, strlen(text), room, text);
        if (kind != 2) continue;
        legend++;
        for (int k = 0; gl[k]; k++) {
            assert_true(gl[k] < 128); /* ASCII mode draws ASCII */
            int dup = 0;
            for (int j = 0; j < k; j++) dup |= gl[j] == gl[k];
            if (!dup) seen[gl[k]]++;
        }
    }
    assert_true(legend >= 30);
    const wchar_t must[] = {
        g->free_blk, g->cached_blk, g->null_blk, g->empty_blk, g->hit, g->evict, g->preempt, g->more_refs,
        g->level[1], g->level[2], g->level[3], g->level[4], g->spark[0], g->spark[7], g->bar_unused, g->kv_free,
        g->vline, g->head, g->play, g->pause, g->arrow_up, g->arrow_down, g->hline,
        L'A', L'2', L'W', L'K', L'C', L'N', L'G', L'<', L'>', L'!', L'|', L'o', L'+', L'x', L'*', L'~', L'[',
    };
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        if (!seen[must[i]]) fail_msg("glyph '%lc' has no legend line in the help", (wint_t)must[i]);
    /* one meaning per glyph where two views could disagree */
    assert_int_equal(seen[g->cached_blk], 1);
    assert_true(g->kv_free != g->cached_blk && g->kv_free != g->free_blk && g->empty_blk != g->free_blk);
}

/* The help at 80x24 shows what fits, and scrolling reaches its last line. */
static void test_help_scrolls(void **state)
{
    (void)state;
    A.overlay = UI_OV_HELP;
    int h, w;
    app_model_update(&A);
    ui_chrome_overlay_size(&A.model, 24, 80, &h, &w);
    assert_int_equal(h, 22);
    WINDOW *win = newwin(h, w, 0, 0);
    A.vst.help_scroll = 0;
    ui_chrome_overlay(&A.model, win);
    assert_win_has(win, "Keys");
    assert_win_has(win, "more below");
    assert_false(win_has(win, "lesson done / started"));
    A.vst.help_scroll = 1000; /* End: clamped to the last page */
    ui_chrome_overlay(&A.model, win);
    assert_win_has(win, "lesson done / started / not started");
    assert_false(win_has(win, "more below"));
    assert_int_equal(A.vst.help_scroll, ui_chrome_help_lines() - (h - 2));
    A.overlay = UI_OV_NONE;
    A.vst.help_scroll = 0;
    delwin(win);
}

/* Contiguous mode: a slab's blocks past the tokens it holds are drawn with
 * their own glyph, not the free one, so they read apart without colour. */
static void test_empty_slab_glyph(void **state)
{
    (void)state;
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 40;
    c.max_model_len = 256;
    c.max_num_batched_tokens = 2048;
    c.max_num_seqs = 2;
    c.mode = KV_MODE_CONTIGUOUS;
    c.verify = 0;
    c.write_kv = 0;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e) fail_msg("create: %s", err);
    int32_t ids[40];
    for (int i = 0; i < 40; i++) ids[i] = 7000 + i;
    kv_request_spec sp = { .prompt_token_ids = ids, .num_prompt_token_ids = 40, .output_tokens = 8, .arrival_s = -1 };
    if (kv_engine_submit(e, &sp, err, sizeof err) < 0) fail_msg("submit: %s", err);
    if (kv_engine_step(e, NULL, err, sizeof err) < 0) fail_msg("step: %s", err);
    kv_frame_forget(&A.frame);
    assert_int_equal(kv_frame_capture(&A.frame, e, NULL, NULL, err, sizeof err), 0);
    WINDOW *w = newwin(6, 60, 0, 0);
    app_draw_view(&A, UI_PANE_POOL, w);
    /* 40 tokens in 3 blocks of 16, the rest of the 16-block slab empty, then free */
    assert_win_has(w, "@AAAooooooooooooo.");
    assert_win_has(w, "13 empty");
    delwin(w);
    kv_engine_destroy(e);
    kv_frame_forget(&A.frame);
}

/* An engine that served traffic for more than 20 s of its clock. */
static kv_engine *busy_engine(void)
{
    kv_engine_config c;
    kv_engine_config_default(&c);
    c.num_blocks = 2000;
    c.verify = 0;
    c.write_kv = 0;
    char err[512];
    kv_engine *e = kv_engine_create(&c, err, sizeof err);
    if (!e) fail_msg("create: %s", err);
    kv_engine_info in;
    for (int i = 0; i < 20000; i++) {
        if (i % 20 == 0) {
            kv_request_spec s = { .prompt_tokens = 300, .output_tokens = 200, .arrival_s = -1 };
            if (kv_engine_submit(e, &s, err, sizeof err) < 0) fail_msg("submit: %s", err);
        }
        if (kv_engine_step(e, NULL, err, sizeof err) < 0) fail_msg("step: %s", err);
        kv_engine_get_info(e, &in);
        if (in.clock_s > 21) break;
    }
    return e;
}

/* The frame of e with a start-up plan of release `version` (only what the
 * views read of it: the release row and the engine). */
static void capture_with_release(kv_engine *e, const char *version)
{
    static kv_plan p;
    char err[256];
    memset(&p, 0, sizeof p);
    p.release = kv_release_find(version, err, sizeof err);
    assert_non_null(p.release);
    p.engine_v1 = 1;
    p.starts = 1;
    kv_frame_forget(&A.frame);
    assert_int_equal(kv_frame_capture(&A.frame, e, &p, NULL, err, sizeof err), 0);
    app_model_update(&A);
    A.model.engine_log_visible = 1;
    /* the frame's stats line: the app's own, logged on the learner's clock,
     * is test_tui_stats_line's (app_stats.h) */
    A.model.stats_line = A.model.stats_hits = NULL;
}

/* The log view ends with vLLM's periodic stats line in the release's
 * words, its figures the engine's; the metrics view has the latency
 * histograms under the release's names, their means the engine's. */
static void test_stats_line_and_latency(void **state)
{
    (void)state;
    kv_engine *e = busy_engine();
    WINDOW *w = newwin(12, 76, 0, 0);
    capture_with_release(e, "0.33.0");
    ui_views_draw(&A.model, UI_PANE_LOG, w);
    assert_win_has(w, "Engine 000: Avg prompt throughput:");
    assert_win_has(w, "Prefix cache hit rate:");
    /* the figures of (10 s, 20 s], from the engine's whole timeline (the
     * frame keeps only its newest samples for the sparklines) */
    static kv_timeline_sample tl[4096];
    int n = kv_engine_timeline(e, tl, 4096), a = -1, b = -1;
    for (int i = 0; i < n; i++) {
        if (tl[i].clock_s <= 10) a = i;
        if (tl[i].clock_s <= 20) b = i;
    }
    assert_true(a >= 0 && b > a && A.frame.timeline[0].clock_s > 10); /* the frame alone could not */
    char want[96];
    snprintf(want, sizeof want, "generation throughput: %.1f tokens/s",
             (double)(tl[b].generation_tokens_total - tl[a].generation_tokens_total) / 10.0);
    if (!strstr(A.frame.stats_line, want)) fail_msg("want '%s' in %s", want, A.frame.stats_line);
    snprintf(want, sizeof want, "Running: %d reqs, Waiting: %d reqs", tl[b].num_running, tl[b].num_waiting);
    if (!strstr(A.frame.stats_line, want)) fail_msg("want '%s' in %s", want, A.frame.stats_line);
    assert_win_has(w, "INFO Engine 000: Avg prompt throughput:"); /* drawn last, as the newest line */
    capture_with_release(e, "0.8.0"); /* no engine index before 0.8.3 */
    ui_views_draw(&A.model, UI_PANE_LOG, w);
    assert_win_has(w, "INFO Avg prompt throughput:");
    assert_false(win_has(w, "Engine 000"));

    WINDOW *wm = newwin(12, 76, 0, 0);
    ui_views_draw(&A.model, UI_PANE_METRICS, wm);
    assert_win_has(wm, "vllm:time_per_output_token_seconds");
    assert_win_has(wm, "vllm:time_to_first_token_seconds");
    assert_win_has(wm, "vllm:request_queue_time_seconds");
    capture_with_release(e, "0.33.0");
    ui_views_draw(&A.model, UI_PANE_METRICS, wm);
    assert_win_has(wm, "vllm:inter_token_latency_seconds");
    assert_false(win_has(wm, "time_per_output_token"));
    kv_engine_metrics m;
    kv_engine_get_metrics(e, &m);
    assert_true(m.ttft.count > 0 && m.itl.count > 0);
    char v[32];
    if (m.ttft.mean < 1.0) snprintf(v, sizeof v, "%.0fms mean", m.ttft.mean * 1e3);
    else snprintf(v, sizeof v, "%.2fs mean", m.ttft.mean);
    assert_win_has(wm, v);
    delwin(wm);
    delwin(w);
    kv_frame_forget(&A.frame);
    kv_engine_destroy(e);
}

/* The flags view with the keys at 80 columns (a 38-column side pane): the
 * selected flag's help whole, over as many rows as it takes, and the `vllm
 * serve` command of the flags cut between options into lines ending in " \"
 * that join back into the command. */
static void test_flags_help_and_command(void **state)
{
    (void)state;
    static const char *long_help = "the fraction of the GPU's memory vLLM may use in all: weights, activations, "
                                   "CUDA graphs and the KV cache come out of it (the end of the sentence)";
    lsn_flag fl[3] = {
        { .name = "max-model-len", .value = "8192", .help = "short" },
        { .name = "gpu-memory-utilization", .value = "0.85", .help = long_help },
        { .name = "max-num-seqs", .value = "", .help = "short too" },
    };
    static const char *cmd = "vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.85 "
                             "--max-model-len 8192 --no-enable-prefix-caching";
    lsn_scene sc = { .title = "", .text = "", .page_title = "", .nflags = 3, .flags = fl, .serve_cmd = cmd };
    kv_frame_forget(&A.frame);
    A.key_focus = UI_PANE_FLAGS;
    A.vst.flag_sel = 1;
    app_model_update(&A);
    A.model.scene = &sc;
    ui_view_ctx c = ui_view_ctx_of(&A.model, UI_PANE_FLAGS);
    int want = ui_view_class_of(UI_PANE_FLAGS)->want_h(&c, 38);
    assert_true(want >= 3 + 3 + 2 + 3); /* the list, three rows of help (two beyond one), three of command */
    WINDOW *w = newwin(want, 38, 0, 0);
    ui_views_draw(&A.model, UI_PANE_FLAGS, w);
    assert_win_has(w, "of the sentence)"); /* the last words of the help */
    /* the command's lines as a shell joins them: "\" and the newline go,
     * so a split word joins up and " \" leaves one space */
    char joined[512] = "";
    int h, ww, on = 0;
    getmaxyx(w, h, ww);
    for (int y = 1; y < h - 1; y++) {
        char line[256];
        snprintf(line, sizeof line, "%.*s", ww - 4, row_text(w, y) + 2); /* inside the border */
        if (!on && strncmp(line, "vllm serve", 10)) continue;
        on = 1;
        size_t l = strlen(line);
        while (l && line[l - 1] == ' ') line[--l] = 0;
        int cont = l > 0 && line[l - 1] == '\\';
        if (cont) line[--l] = 0;
        strcat(joined, line);
        if (!cont) break;
    }
    /* words apart by any spaces, as the shell splits them */
    char norm[512];
    size_t k = 0;
    for (const char *p = joined; *p; p++)
        if (*p != ' ' || (k > 0 && norm[k - 1] != ' ')) norm[k++] = *p;
    norm[k] = 0;
    if (strcmp(norm, cmd)) { dump(w); fail_msg("the command's lines join into\n  %s\nnot\n  %s", norm, cmd); }
    /* without the keys: the list, and the hint */
    A.key_focus = -1;
    app_model_update(&A);
    A.model.scene = &sc;
    werase(w);
    ui_views_draw(&A.model, UI_PANE_FLAGS, w);
    assert_win_has(w, "f, then arrows: change a flag");
    delwin(w);
    A.vst.flag_sel = 0;
}

/* With colours the pool and the requests still say by a glyph which
 * request holds a block: the letter, drawn reversed in the request's
 * colour, the same cells as without colour. */
static void test_colour_has_letters(void **state)
{
    (void)state;
    if (ui_style_init(UI_COLOR_8) != UI_COLOR_8) skip();
    kv_engine *e = known_engine();
    char err[256];
    kv_frame_forget(&A.frame);
    assert_int_equal(kv_frame_capture(&A.frame, e, NULL, NULL, err, sizeof err), 0);
    WINDOW *w = newwin(8, 40, 0, 0);
    app_draw_view(&A, UI_PANE_POOL, w);
    int ok = win_has(w, "@22AAB....");
    WINDOW *wr = newwin(8, 60, 0, 0);
    app_draw_view(&A, UI_PANE_REQUESTS, wr);
    ok = ok && win_has(wr, "A #0   run") && win_has(wr, "B #1   run");
    /* and the letter is reversed: a block of its colour */
    cchar_t cc;
    wchar_t wc[CCHARW_MAX + 1];
    attr_t at = 0;
    short pair = 0;
    mvwin_wch(w, 1, 4, &cc);
    getcchar(&cc, wc, &at, &pair, NULL);
    ui_style_init(UI_COLOR_NONE);
    if (!ok) { dump(w); dump(wr); fail_msg("a request's blocks are told by colour alone"); }
    assert_int_equal(wc[0], L'A');
    assert_true(at & A_REVERSE);
    delwin(wr);
    delwin(w);
    kv_frame_forget(&A.frame);
    kv_engine_destroy(e);
}

/* The memory view's running subtraction takes off only the terms the
 * release takes off the budget (kv_plan_term.counted) and counts non-torch
 * memory: under vLLM 0.9.1+ the CUDA context is used but not subtracted.
 * The old view subtracted the context and left non-torch out (lesson 1
 * under 0.33.0: 52.84 GiB left before a 52.22 GiB pool). */
static void test_memory_left_of_budget(void **state)
{
    (void)state;
    static kv_plan p;
    memset(&p, 0, sizeof p);
    static const struct { int t; const char *name; double gib; int counted; } T[] = {
        { KV_PLAN_TERM_BUDGET, "budget", 10.0, 1 },        { KV_PLAN_TERM_WEIGHTS, "weights", 2.0, 1 },
        { KV_PLAN_TERM_ACTIVATION, "activation", 1.0, 1 }, { KV_PLAN_TERM_CUDAGRAPH, "cudagraph", 0.5, 1 },
        { KV_PLAN_TERM_CUDA_CONTEXT, "cuda_context", 0.6, 0 }, { KV_PLAN_TERM_NCCL, "nccl", 0.0, 1 },
        { KV_PLAN_TERM_NON_TORCH, "non_torch", 0.4, 1 },   { KV_PLAN_TERM_KV_CACHE, "kv_cache", 6.1, 1 },
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        snprintf(p.terms[T[i].t].name, sizeof p.terms[0].name, "%s", T[i].name);
        p.terms[T[i].t].bytes = T[i].gib * KV_GIB;
        p.terms[T[i].t].counted = T[i].counted;
    }
    p.starts = 1;
    p.gpu_total_bytes = 12.0 * KV_GIB;
    p.gpu_memory_utilization = 10.0 / 12.0;
    p.budget_bytes = 10.0 * KV_GIB;
    p.weights_bytes = 2.0 * KV_GIB;
    p.activation_bytes = 1.0 * KV_GIB;
    p.cudagraph_bytes = 0.5 * KV_GIB;
    p.cuda_context_bytes = 0.6 * KV_GIB;
    p.non_torch_bytes = 0.4 * KV_GIB;
    p.available_kv_bytes = 6.1 * KV_GIB;
    char err[256];
    kv_frame_forget(&A.frame);
    assert_int_equal(kv_frame_capture(&A.frame, NULL, &p, NULL, err, sizeof err), 0);
    A.plan = &p;
    app_model_update(&A);
    A.model.mem_terms = ((1u << UI_MEM_NT) - 1) & ~(1u << UI_MEM_T_KV); /* all but the pool revealed */
    WINDOW *w = newwin(10, 60, 0, 0);
    ui_views_draw(&A.model, UI_PANE_MEMORY, w);
    assert_win_has(w, "T non-torch 0.40");
    assert_win_has(w, "left of the budget so far: 6.10 GiB"); /* 10 - 2 - 1 - 0.5 - 0.4; not the context */
    delwin(w);
    A.plan = NULL;
    kv_frame_forget(&A.frame);
}

/* The header and the lesson list draw the runner's and the history's
 * figures from the model alone (no runner, no history here): the replay
 * timeline's cells show the marks the app put in rw_marks, cell by cell,
 * and the cells cover first..present with no gap; the list shows each
 * lesson's row with its progress. */
static void test_chrome_from_model(void **state)
{
    (void)state;
    app_model_update(&A);
    ui_model *m = &A.model;
    /* replay, step 5 of 99: the label ends at column 29, '[' there, ']' at 77 */
    m->rw_active = 1;
    m->rw_pos = 5;
    m->rw_first = 0;
    m->rw_present = 99;
    int cells = ui_chrome_timeline_cells(80, m->rw_pos, m->rw_present);
    assert_int_equal(cells, 80 - 29 - 2 - 2);
    int64_t from, to, next = 0;
    for (int c = 0; c < cells; c++) {
        ui_chrome_timeline_span(m->rw_first, m->rw_present, cells, c, &from, &to);
        assert_true(from == next && to > from);
        next = to;
    }
    assert_int_equal(next, 100);
    m->rw_ncells = cells;
    memset(m->rw_marks, 0, sizeof m->rw_marks);
    m->rw_marks[10] = KV_MARK_PREEMPT | KV_MARK_HIT; /* the most telling wins */
    m->rw_marks[20] = KV_MARK_RESTART;
    m->rw_marks[30] = KV_MARK_FINISH;
    WINDOW *w = newwin(1, 80, 0, 0);
    ui_views_draw(m, UI_PANE_HEADER, w);
    const char *r = row_text(w, 0);
    if (strncmp(r, " kvlab  replay, step 5 of 99 [", 30) || r[29 + 1 + cells] != ']') dump(w);
    assert_int_equal(strncmp(r, " kvlab  replay, step 5 of 99 [", 30), 0);
    assert_int_equal(r[29 + 1 + cells], ']');
    for (int c = 0; c < cells; c++) {
        char want = c == 10 ? '!' : c == 20 ? '|' : c == 30 ? '.' : '-';
        if (r[30 + c] != want) { dump(w); fail_msg("timeline cell %d is '%c', want '%c'", c, r[30 + c], want); }
    }
    m->rw_active = 0;
    delwin(w);

    /* the lesson list and the header's "Lesson N/M" from the model's rows */
    static lsn_scene sc = { .title = "Two", .lesson = 2, .state = LSN_WAIT_NEXT, .text = "", .page_title = "" };
    m->scene = &sc;
    m->has_runner = 1;
    m->lesson_current = 2;
    m->nlessons = 3;
    m->lessons[0] = (lsn_info){ .number = 1, .title = "One", .available = 1, .done = 1 };
    m->lessons[1] = (lsn_info){ .number = 2, .title = "Two", .available = 1, .step = 3 };
    m->lessons[2] = (lsn_info){ .number = 3, .title = "Three" };
    w = newwin(1, 80, 0, 0);
    ui_views_draw(m, UI_PANE_HEADER, w);
    assert_win_has(w, "Lesson 2/3  Two");
    delwin(w);
    m->overlay = UI_OV_LESSONS;
    int h, ww;
    ui_chrome_overlay_size(m, 24, 80, &h, &ww);
    assert_int_equal(h, 3 + 4);
    w = newwin(h, ww, 0, 0);
    ui_chrome_overlay(m, w);
    assert_win_has(w, "[x]  1  One");
    assert_win_has(w, "[~]  2  Two");
    assert_win_has(w, "[ ]  3  Three  (not written yet)");
    delwin(w);
    A.overlay = UI_OV_NONE;
    app_model_update(&A);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_draw_from_frame_alone),
        cmocka_unit_test(test_click_picks_block),
        cmocka_unit_test(test_metrics_back_and_forth),
        cmocka_unit_test(test_help_legend_whole),
        cmocka_unit_test(test_help_scrolls),
        cmocka_unit_test(test_empty_slab_glyph),
        cmocka_unit_test(test_stats_line_and_latency),
        cmocka_unit_test(test_flags_help_and_command),
        cmocka_unit_test(test_colour_has_letters),
        cmocka_unit_test(test_memory_left_of_budget),
        cmocka_unit_test(test_chrome_from_model),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
