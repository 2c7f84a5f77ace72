/* ui_layout: see ui_layout.h. Pure arithmetic; every division is by a
 * constant or a count checked to be positive. */
#include "ui_layout.h"

#include <string.h>

static const char *const pane_names[UI_PANE_COUNT] = {
    "header", "footer", "text", "memory", "pool", "requests", "tp", "plot",
    "flags", "metrics", "log",
};

const char *ui_layout_pane_name(ui_pane p)
{
    return (p >= 0 && p < UI_PANE_COUNT) ? pane_names[p] : "?";
}

int ui_layout_min_h(ui_pane p)
{
    switch (p) {
    case UI_PANE_MEMORY:   return 5;  /* border, bar, legend (2 rows) */
    case UI_PANE_POOL:     return 5;
    case UI_PANE_REQUESTS: return 4;
    case UI_PANE_TP:       return 6;
    case UI_PANE_PLOT:     return 8;
    case UI_PANE_FLAGS:    return 4;
    case UI_PANE_METRICS:  return 4;
    case UI_PANE_LOG:      return 4;
    default:               return 1;
    }
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Display order inside each column (top to bottom). */
static const ui_pane col_pictures[] = {
    UI_PANE_MEMORY, UI_PANE_POOL, UI_PANE_REQUESTS, UI_PANE_TP, UI_PANE_PLOT,
};
static const ui_pane col_tables[] = { UI_PANE_FLAGS, UI_PANE_METRICS, UI_PANE_LOG };

/* Stack the panes of list[] that are in `want` into the column x..x+w,
 * rows y..y+h. */
static void stack(ui_layout *out, const ui_layout_req *req, const ui_pane *list, int n,
                  unsigned want, int y, int x, int h, int w)
{
    ui_pane order[UI_PANE_COUNT];
    int heights[UI_PANE_COUNT];
    int norder = 0;
    unsigned chosen = 0;
    int left = h;

    memset(heights, 0, sizeof heights);
    /* Priority: the focused pane first, then the flags and pictures the
     * learner acts on, the tables last. */
    static const ui_pane prio[] = {
        UI_PANE_MEMORY, UI_PANE_FLAGS, UI_PANE_POOL, UI_PANE_TP, UI_PANE_PLOT,
        UI_PANE_METRICS, UI_PANE_REQUESTS, UI_PANE_LOG,
    };
    unsigned in_list = 0;
    for (int i = 0; i < n; i++) in_list |= UI_PANE_BIT(list[i]);
    want &= in_list;
    if (req->focus >= 0 && req->focus < UI_PANE_COUNT && (want & UI_PANE_BIT(req->focus)))
        order[norder++] = (ui_pane)req->focus;
    /* Then the panes holding what the page points at: the line a lesson
     * highlights must be on screen whole (ui_layout_req.must_h). */
    unsigned placed_first = 0;
    for (unsigned i = 0; i < sizeof prio / sizeof prio[0]; i++)
        if ((want & UI_PANE_BIT(prio[i])) && prio[i] != (ui_pane)req->focus && req->must_h[prio[i]] > 0) {
            order[norder++] = prio[i];
            placed_first |= UI_PANE_BIT(prio[i]);
        }
    for (unsigned i = 0; i < sizeof prio / sizeof prio[0]; i++)
        if ((want & UI_PANE_BIT(prio[i])) && prio[i] != (ui_pane)req->focus && !(placed_first & UI_PANE_BIT(prio[i])))
            order[norder++] = prio[i];

    /* The focused pane first takes its preferred height (a growing pane:
     * half the column), at most two thirds of it, so focusing a pane on a
     * small terminal gives it real room at the others' expense. */
    int first = 0;
    if (norder > 0 && (int)order[0] == req->focus) {
        ui_pane f = order[0];
        int mh = ui_layout_min_h(f);
        if (req->must_h[f] > mh) mh = req->must_h[f];
        int pref = req->want_h[f] > 0 ? req->want_h[f] : h / 2;
        /* Tab must show: the focused pane gets at least half the column
         * even when its content asks for less. */
        if (pref < h / 2) pref = h / 2;
        int cap = h * 2 / 3;
        int fh = pref < cap ? pref : cap;
        /* ... but leaves the next pane in priority (the flags with all
         * their rows) its room when that does not cut the focused pane
         * below half the column: on a small terminal the panes after them
         * drop rather than squeeze the one the learner asked for. */
        if (norder > 1) {
            int omh = ui_layout_min_h(order[1]);
            if (req->must_h[order[1]] > omh) omh = req->must_h[order[1]];
            if (order[1] == UI_PANE_FLAGS && req->want_h[UI_PANE_FLAGS] > omh) omh = req->want_h[UI_PANE_FLAGS];
            int room = left - omh;
            if (room < h / 2) room = h / 2;
            if (fh > room) fh = room;
        }
        if (fh < mh) fh = mh;
        if (fh <= left) {
            chosen |= UI_PANE_BIT(f);
            heights[f] = fh;
            left -= fh;
        } else {
            out->dropped |= UI_PANE_BIT(f);
        }
        first = 1;
    }
    for (int i = first; i < norder; i++) {
        int mh = ui_layout_min_h(order[i]);
        /* a highlighted pane's rows; when they do not all fit, as many as
         * the highlighted panes after it leave (at least its minimum):
         * shown cut rather than not at all */
        if (req->must_h[order[i]] > mh) {
            int later = 0;
            for (int k = i + 1; k < norder; k++)
                if (req->must_h[order[k]] > 0) later += ui_layout_min_h(order[k]);
            int can = left - later;
            int m = req->must_h[order[i]] < can ? req->must_h[order[i]] : can;
            if (m > mh) mh = m;
        }
        if (order[i] == UI_PANE_FLAGS && req->want_h[UI_PANE_FLAGS] > mh && req->focus == UI_PANE_FLAGS) {
            /* All the flags when the panes after them still get their minimum. */
            int rest = 0;
            for (int k = i + 1; k < norder; k++) rest += ui_layout_min_h(order[k]);
            int full = req->want_h[UI_PANE_FLAGS];
            if (full + rest <= left) mh = full;
        }
        if (mh <= left) {
            chosen |= UI_PANE_BIT(order[i]);
            heights[order[i]] = mh;
            left -= mh;
        } else {
            out->dropped |= UI_PANE_BIT(order[i]);
        }
    }
    /* Panes with a preferred height grow toward it, in priority order (the
     * focused pane first; a highlighted one has its rows already). */
    /* The flags grow after the pictures: a list of flags must not squeeze
     * the pool the page is about (the learner presses f to see them all). */
    static const ui_pane grow_prio[] = {
        UI_PANE_MEMORY, UI_PANE_POOL, UI_PANE_TP, UI_PANE_PLOT, UI_PANE_FLAGS,
        UI_PANE_METRICS, UI_PANE_REQUESTS, UI_PANE_LOG,
    };
    ui_pane grow[UI_PANE_COUNT];
    int ngrow = 0;
    if (first) grow[ngrow++] = order[0];
    for (unsigned i = 0; i < sizeof grow_prio / sizeof grow_prio[0]; i++)
        if ((chosen & UI_PANE_BIT(grow_prio[i])) && !(first && grow_prio[i] == order[0])) grow[ngrow++] = grow_prio[i];
    int nflex = 0;
    for (int i = 0; i < ngrow; i++) {
        ui_pane p = grow[i];
        if (!(chosen & UI_PANE_BIT(p))) continue;
        int pref = req->want_h[p];
        if (pref <= 0) { nflex++; continue; }
        if (pref > heights[p]) {
            int add = pref - heights[p];
            if (add > left) add = left;
            heights[p] += add;
            left -= add;
        }
    }
    /* The rest goes to the growing panes; the focused one gets two shares. */
    if (left > 0) {
        int shares = 0;
        for (int i = 0; i < norder; i++) {
            ui_pane p = order[i];
            if ((chosen & UI_PANE_BIT(p)) && req->want_h[p] <= 0)
                shares += (int)p == req->focus ? 2 : 1;
        }
        if (shares > 0) {
            int unit = left / shares;
            for (int i = 0; i < norder; i++) {
                ui_pane p = order[i];
                if (!(chosen & UI_PANE_BIT(p)) || req->want_h[p] > 0) continue;
                int add = unit * ((int)p == req->focus ? 2 : 1);
                heights[p] += add;
                left -= add;
            }
            /* Rounding leftovers to the first growing pane in priority order. */
            for (int i = 0; i < norder && left > 0; i++) {
                ui_pane p = order[i];
                if ((chosen & UI_PANE_BIT(p)) && req->want_h[p] <= 0) {
                    heights[p] += left;
                    left = 0;
                }
            }
        } else {
            /* No growing pane: the last one placed takes the slack so the
             * column has no hole. */
            for (int i = n - 1; i >= 0 && left > 0; i--) {
                if (chosen & UI_PANE_BIT(list[i])) {
                    heights[list[i]] += left;
                    left = 0;
                }
            }
        }
    }
    (void)nflex;
    int cy = y;
    for (int i = 0; i < n; i++) {
        ui_pane p = list[i];
        if (!(chosen & UI_PANE_BIT(p))) continue;
        out->r[p] = (ui_rect){ .y = cy, .x = x, .h = heights[p], .w = w };
        out->placed |= UI_PANE_BIT(p);
        cy += heights[p];
    }
}

void ui_layout_compute(int rows, int cols, const ui_layout_req *req, ui_layout *out)
{
    static const ui_layout_req none = { .shown = 0, .focus = -1 };
    if (!req) req = &none;
    memset(out, 0, sizeof *out);
    out->rows = rows;
    out->cols = cols;
    if (rows < UI_MIN_ROWS || cols < UI_MIN_COLS) {
        out->too_small = 1;
        return;
    }

    unsigned side_mask = 0;
    for (int p = UI_PANE_MEMORY; p < UI_PANE_COUNT; p++) side_mask |= UI_PANE_BIT(p);
    unsigned side = req->shown & side_mask;

    int body_y = 1, body_h = rows - 2;
    out->r[UI_PANE_HEADER] = (ui_rect){ 0, 0, 1, cols };
    out->r[UI_PANE_FOOTER] = (ui_rect){ rows - 1, 0, 1, cols };
    out->placed |= UI_PANE_BIT(UI_PANE_HEADER) | UI_PANE_BIT(UI_PANE_FOOTER);

    if (!side) {
        out->r[UI_PANE_TEXT] = (ui_rect){ body_y, 0, body_h, cols };
        out->placed |= UI_PANE_BIT(UI_PANE_TEXT);
        return;
    }

    unsigned pics = 0, tabs = 0;
    for (unsigned i = 0; i < sizeof col_pictures / sizeof col_pictures[0]; i++)
        pics |= side & UI_PANE_BIT(col_pictures[i]);
    for (unsigned i = 0; i < sizeof col_tables / sizeof col_tables[0]; i++)
        tabs |= side & UI_PANE_BIT(col_tables[i]);

    int two = cols >= 160 && pics && tabs;
    int tw = two ? clampi(cols / 3, 40, 72) : clampi(cols / 2, 36, 64);
    int rw = cols - tw;
    out->r[UI_PANE_TEXT] = (ui_rect){ body_y, 0, body_h, tw };
    out->placed |= UI_PANE_BIT(UI_PANE_TEXT);

    if (two) {
        int bw = clampi(rw * 2 / 5, 36, 64);
        int aw = rw - bw;
        stack(out, req, col_pictures, (int)(sizeof col_pictures / sizeof col_pictures[0]), pics,
              body_y, tw, body_h, aw);
        stack(out, req, col_tables, (int)(sizeof col_tables / sizeof col_tables[0]), tabs,
              body_y, tw + aw, body_h, bw);
    } else {
        ui_pane all[UI_PANE_COUNT];
        int n = 0;
        for (unsigned i = 0; i < sizeof col_pictures / sizeof col_pictures[0]; i++)
            all[n++] = col_pictures[i];
        for (unsigned i = 0; i < sizeof col_tables / sizeof col_tables[0]; i++)
            all[n++] = col_tables[i];
        stack(out, req, all, n, side, body_y, tw, body_h, rw);
    }
}
