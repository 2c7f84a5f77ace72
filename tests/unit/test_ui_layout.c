/* ui_layout over every terminal size from 20x10 to 300x100 and every
 * combination of shown panes: rectangles inside the screen, no overlap,
 * header/footer/text always placed from 80x24 up, nothing placed below. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "lsn_stage.h"
#include "ui_layout.h"

static unsigned side_all(void)
{
    unsigned m = 0;
    for (int p = UI_PANE_MEMORY; p < UI_PANE_COUNT; p++) m |= UI_PANE_BIT(p);
    return m;
}

static int overlap(ui_rect a, ui_rect b)
{
    return a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;
}

/* Every invariant of one computed layout; returns a message or NULL. */
static const char *check_layout(const ui_layout *l, int rows, int cols, const ui_layout_req *req,
                                char *msg, size_t len)
{
    if (rows < UI_MIN_ROWS || cols < UI_MIN_COLS) {
        if (!l->too_small) return "small terminal not flagged too_small";
        if (l->placed) return "pane placed on a too-small terminal";
        return NULL;
    }
    if (l->too_small) return "large enough terminal flagged too_small";
    unsigned must = UI_PANE_BIT(UI_PANE_HEADER) | UI_PANE_BIT(UI_PANE_FOOTER) | UI_PANE_BIT(UI_PANE_TEXT);
    if ((l->placed & must) != must) return "header, footer or text missing";
    for (int p = 0; p < UI_PANE_COUNT; p++) {
        ui_rect r = l->r[p];
        int placed = (l->placed & UI_PANE_BIT(p)) != 0;
        if (!placed) {
            if (r.w || r.h) return "unplaced pane has a size";
            continue;
        }
        if (p >= UI_PANE_MEMORY && !(req->shown & UI_PANE_BIT(p))) return "pane placed but not shown";
        if (l->dropped & UI_PANE_BIT(p)) return "pane both placed and dropped";
        if (r.w < 1 || r.h < 1 || r.x < 0 || r.y < 0 || r.x + r.w > cols || r.y + r.h > rows) {
            snprintf(msg, len, "%s at %dx%d+%d+%d outside %dx%d", ui_layout_pane_name(p), r.w, r.h,
                     r.x, r.y, cols, rows);
            return msg;
        }
        if (p >= UI_PANE_MEMORY && r.h < ui_layout_min_h(p)) return "pane below its minimum height";
        if (p >= UI_PANE_MEMORY && r.w < 30) return "side pane narrower than 30 columns";
        for (int q = 0; q < p; q++) {
            if ((l->placed & UI_PANE_BIT(q)) && overlap(r, l->r[q])) {
                snprintf(msg, len, "%s overlaps %s at %dx%d", ui_layout_pane_name(p),
                         ui_layout_pane_name(q), cols, rows);
                return msg;
            }
        }
    }
    for (int p = UI_PANE_MEMORY; p < UI_PANE_COUNT; p++) {
        int shown = (req->shown & UI_PANE_BIT(p)) != 0;
        int acc = (l->placed | l->dropped) & UI_PANE_BIT(p) ? 1 : 0;
        if (shown != acc) return "shown pane neither placed nor dropped";
    }
    if (req->focus >= UI_PANE_MEMORY && (req->shown & UI_PANE_BIT(req->focus)) &&
        !(l->placed & UI_PANE_BIT(req->focus)))
        return "focused pane was dropped";
    return NULL;
}

static void test_size_grid(void **state)
{
    (void)state;
    char msg[160];
    /* A spread of pane sets: none, one, the lesson-1 set, all. */
    unsigned sets[] = {
        0,
        UI_PANE_BIT(UI_PANE_POOL),
        UI_PANE_BIT(UI_PANE_MEMORY) | UI_PANE_BIT(UI_PANE_LOG),
        UI_PANE_BIT(UI_PANE_MEMORY) | UI_PANE_BIT(UI_PANE_POOL) | UI_PANE_BIT(UI_PANE_FLAGS) |
            UI_PANE_BIT(UI_PANE_METRICS),
        UI_PANE_BIT(UI_PANE_PLOT) | UI_PANE_BIT(UI_PANE_METRICS),
        side_all(),
    };
    long checked = 0;
    for (unsigned s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        for (int focus = -1; focus < UI_PANE_COUNT; focus += 3) {
            ui_layout_req req = { .shown = sets[s], .focus = focus };
            req.want_h[UI_PANE_MEMORY] = 6;
            req.want_h[UI_PANE_FLAGS] = 9;
            req.want_h[UI_PANE_METRICS] = 10;
            for (int rows = 10; rows <= 100; rows++) {
                for (int cols = 20; cols <= 300; cols++) {
                    ui_layout l;
                    ui_layout_compute(rows, cols, &req, &l);
                    const char *err = check_layout(&l, rows, cols, &req, msg, sizeof msg);
                    if (err) fail_msg("%dx%d set %u focus %d: %s", cols, rows, s, focus, err);
                    checked++;
                }
            }
        }
    }
    assert_true(checked > 100000);
}

/* Every pane combination (all 2^8 subsets) at the sizes tests use. */
static void test_all_subsets(void **state)
{
    (void)state;
    char msg[160];
    int sizes[][2] = { { 24, 80 }, { 60, 200 }, { 20, 60 }, { 100, 300 }, { 25, 81 }, { 39, 184 } };
    for (unsigned m = 0; m < 256; m++) {
        unsigned shown = m << UI_PANE_MEMORY;
        for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            ui_layout_req req = { .shown = shown, .focus = UI_PANE_POOL };
            ui_layout l;
            ui_layout_compute(sizes[i][0], sizes[i][1], &req, &l);
            const char *err = check_layout(&l, sizes[i][0], sizes[i][1], &req, msg, sizeof msg);
            if (err) fail_msg("%dx%d mask %u: %s", sizes[i][1], sizes[i][0], m, err);
        }
    }
}

/* At 80x24 the lesson-1 panes (memory bar and log) both fit beside the text,
 * and the text keeps a readable width. */
static void test_minimum_fits_lesson_one(void **state)
{
    (void)state;
    ui_layout_req req = { .shown = UI_PANE_BIT(UI_PANE_MEMORY) | UI_PANE_BIT(UI_PANE_LOG), .focus = -1 };
    req.want_h[UI_PANE_MEMORY] = 7;
    ui_layout l;
    ui_layout_compute(24, 80, &req, &l);
    assert_false(l.too_small);
    assert_true(l.placed & UI_PANE_BIT(UI_PANE_MEMORY));
    assert_true(l.placed & UI_PANE_BIT(UI_PANE_LOG));
    assert_int_equal(l.dropped, 0);
    assert_int_equal(l.r[UI_PANE_MEMORY].h, 7);
    assert_int_equal(l.r[UI_PANE_LOG].h, 22 - 7);
    assert_true(l.r[UI_PANE_TEXT].w >= 34);
    /* kvlab check holds page titles to LSN_PAGE_TITLE_MAX characters: the
     * border (ui_box: the width less 6) shows that many whole, whatever side
     * panes share the row. */
    ui_layout_req busy = { .shown = UI_PANE_BIT(UI_PANE_MEMORY) | UI_PANE_BIT(UI_PANE_POOL) |
                                    UI_PANE_BIT(UI_PANE_FLAGS) | UI_PANE_BIT(UI_PANE_METRICS),
                           .focus = -1 };
    ui_layout_compute(24, 80, &busy, &l);
    assert_true(l.r[UI_PANE_TEXT].w - 6 >= LSN_PAGE_TITLE_MAX);
    /* No side pane: the text takes the whole body. */
    ui_layout_req none = { .shown = 0, .focus = -1 };
    ui_layout_compute(24, 80, &none, &l);
    assert_int_equal(l.r[UI_PANE_TEXT].w, 80);
    assert_int_equal(l.r[UI_PANE_TEXT].h, 22);
}

/* A focused pane is placed even when the column is crowded, and others drop. */
static void test_focus_wins_room(void **state)
{
    (void)state;
    ui_layout_req req = { .shown = side_all(), .focus = UI_PANE_LOG };
    ui_layout l;
    ui_layout_compute(24, 80, &req, &l);
    assert_true(l.placed & UI_PANE_BIT(UI_PANE_LOG));
    assert_true(l.dropped != 0);
    /* Wide terminals use two columns: flags beside the pool, not below it. */
    ui_layout_compute(60, 200, &req, &l);
    assert_true(l.r[UI_PANE_FLAGS].x > l.r[UI_PANE_POOL].x);
    assert_int_equal(l.dropped, 0);
}

/* The line a page points at is shown whole (ui_layout_req.must_h): on an
 * 80x24 screen with every pane asked for, a pane whose highlight needs N
 * rows gets them, even a low-priority one, whichever pane has the focus;
 * and two highlighted panes both get theirs when they fit together. */
static void test_highlight_gets_its_rows(void **state)
{
    (void)state;
    static const ui_pane panes[] = { UI_PANE_LOG, UI_PANE_METRICS, UI_PANE_REQUESTS, UI_PANE_MEMORY };
    for (size_t i = 0; i < sizeof panes / sizeof panes[0]; i++) {
        for (int focus = -1; focus < UI_PANE_COUNT; focus += 4) {
            ui_layout_req req = { .shown = side_all(), .focus = focus };
            for (int p = UI_PANE_MEMORY; p < UI_PANE_COUNT; p++) req.want_h[p] = 9;
            req.must_h[panes[i]] = 8;
            ui_layout l;
            ui_layout_compute(24, 80, &req, &l);
            if (!(l.placed & UI_PANE_BIT(panes[i])) || l.r[panes[i]].h < 8)
                fail_msg("%s with a highlight needing 8 rows got %d (focus %d)", ui_layout_pane_name(panes[i]),
                         (l.placed & UI_PANE_BIT(panes[i])) ? l.r[panes[i]].h : 0, focus);
        }
    }
    /* lesson 7's first page: the memory view's term and the log's error line */
    ui_layout_req req = { .shown = UI_PANE_BIT(UI_PANE_MEMORY) | UI_PANE_BIT(UI_PANE_LOG), .focus = -1 };
    req.want_h[UI_PANE_MEMORY] = 9;
    req.must_h[UI_PANE_MEMORY] = 6;
    req.must_h[UI_PANE_LOG] = 16;
    ui_layout l;
    ui_layout_compute(24, 80, &req, &l);
    assert_true(l.r[UI_PANE_MEMORY].h >= 6);
    assert_true(l.r[UI_PANE_LOG].h >= 16);
}

/* The flags pane asks for all its rows only while the learner edits flags
 * (ui_flags.c); a focused pane keeps half the column on a crowded screen. */
static void test_focus_keeps_half(void **state)
{
    (void)state;
    ui_layout_req req = { .shown = side_all(), .focus = UI_PANE_FLAGS };
    for (int p = UI_PANE_MEMORY; p < UI_PANE_COUNT; p++) req.want_h[p] = 0;
    req.want_h[UI_PANE_FLAGS] = 25;
    ui_layout l;
    ui_layout_compute(24, 80, &req, &l);
    assert_true(l.r[UI_PANE_FLAGS].h >= 22 / 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_highlight_gets_its_rows),
        cmocka_unit_test(test_focus_keeps_half),
        cmocka_unit_test(test_size_grid),
        cmocka_unit_test(test_all_subsets),
        cmocka_unit_test(test_minimum_fits_lesson_one),
        cmocka_unit_test(test_focus_wins_room),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
