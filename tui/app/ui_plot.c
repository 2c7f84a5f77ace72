/* ui_plot: see ui_plot.h. */
#include "ui_plot.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ui_style.h"

static const wchar_t markers[4] = { L'o', L'+', L'x', L'*' };

static void fmt_num(char *b, size_t n, double v)
{
    double av = fabs(v);
    if (av >= 1e9) snprintf(b, n, "%.3gG", v / 1e9);
    else if (av >= 1e6) snprintf(b, n, "%.3gM", v / 1e6);
    else if (av >= 1e4) snprintf(b, n, "%.3gk", v / 1e3);
    else if (av > 0 && av < 0.1) snprintf(b, n, "%.2g", v); /* 0.0025: fits the 7-column label */
    else snprintf(b, n, "%.4g", v);
}

static void plot_draw(const ui_view_ctx *c, WINDOW *win)
{
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    const lsn_plot *pl = c->s->plot;
    ui_box(win, pl && pl->title && *pl->title ? pl->title : "plot", pl && pl->logy ? "log y" : "", c->focused);
    int iw = w - 4, ih = h - 2;
    if (iw < 20 || ih < 4) return;
    if (!pl || pl->nseries == 0) {
        ui_puts(win, 1, 2, iw, "Nothing plotted yet.", ui_attr(UI_R_DIM));
        return;
    }
    double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
    for (int s = 0; s < pl->nseries; s++)
        for (int i = 0; i < pl->series[s].npoints; i++) {
            double x = pl->series[s].x[i], y = pl->series[s].y[i];
            if (!isfinite(x) || !isfinite(y) || (pl->logy && y <= 0)) continue;
            if (pl->logy) y = log10(y);
            if (x < xmin) xmin = x;
            if (x > xmax) xmax = x;
            if (y < ymin) ymin = y;
            if (y > ymax) ymax = y;
        }
    /* Legend on the first row. */
    int lx = 2;
    for (int s = 0; s < pl->nseries && lx < 2 + iw; s++) {
        attr_t at = ui_attr((ui_role)(UI_R_SERIES0 + s % 4));
        ui_put(win, 1, lx, markers[s % 4], at);
        lx += 2 + ui_puts(win, 1, lx + 2, 2 + iw - lx - 2, pl->series[s].name, at) + 2;
    }
    /* The y axis's name beside the legend when it fits whole, else on a
     * row of its own: an axis is never left unnamed. */
    int py = 2;
    if (pl->ylabel && *pl->ylabel) {
        char yl[96];
        snprintf(yl, sizeof yl, "y: %s", pl->ylabel);
        int yw = (int)strlen(yl);
        if (lx + 1 + yw <= 2 + iw) {
            ui_puts(win, 1, lx + 1, 2 + iw - lx - 1, yl, ui_attr(UI_R_DIM));
        } else {
            ui_puts(win, 2, 2, iw, yl, ui_attr(UI_R_DIM));
            py = 3;
        }
    }
    if (!(xmax >= xmin) || !(ymax >= ymin)) {
        ui_puts(win, py, 2, iw, "No points yet.", ui_attr(UI_R_DIM)); /* below the y label when it took row 2 */
        return;
    }
    if (!pl->logy && ymin > 0) ymin = 0;
    if (xmax == xmin) xmax = xmin + 1;
    if (ymax == ymin) ymax = ymin + 1;
    int lm = 8;                 /* y labels */
    int px = 2 + lm, pw = iw - lm, ph = ih - py - 1;
    if (pw < 8 || ph < 2) return;
    char lab[32];
    fmt_num(lab, sizeof lab, pl->logy ? pow(10, ymax) : ymax);
    ui_puts(win, py, 2, lm - 1, lab, ui_attr(UI_R_DIM));
    fmt_num(lab, sizeof lab, pl->logy ? pow(10, ymin) : ymin);
    ui_puts(win, py + ph - 1, 2, lm - 1, lab, ui_attr(UI_R_DIM));
    const ui_glyphs *g = ui_gl();
    for (int y = 0; y < ph; y++) ui_put(win, py + y, px - 1, g->vline, ui_attr(UI_R_BORDER));
    for (int x = -1; x < pw; x++) ui_put(win, py + ph, px + x, g->hline, ui_attr(UI_R_BORDER));
    fmt_num(lab, sizeof lab, xmin);
    ui_puts(win, py + ph + 1, px, pw, lab, ui_attr(UI_R_DIM));
    fmt_num(lab, sizeof lab, xmax);
    int ll = (int)strlen(lab);
    ui_puts(win, py + ph + 1, px + pw - ll, ll, lab, ui_attr(UI_R_DIM));
    if (pl->xlabel && *pl->xlabel) {
        /* "x: name" between the first and last tick, cut to the room there */
        char xl[96], l0[32];
        snprintf(xl, sizeof xl, "x: %s", pl->xlabel);
        fmt_num(l0, sizeof l0, xmin);
        int left = px + (int)strlen(l0) + 2, right = px + pw - ll - 2;
        int room = right - left, xw = (int)strlen(xl);
        if (room >= 6) {
            int cx = xw < room ? left + (room - xw) / 2 : left;
            ui_puts(win, py + ph + 1, cx, room, xl, ui_attr(UI_R_DIM));
        }
    }
    for (int s = 0; s < pl->nseries; s++) {
        attr_t at = ui_attr((ui_role)(UI_R_SERIES0 + s % 4));
        const lsn_series *se = &pl->series[s];
        for (int i = 0; i < se->npoints; i++) {
            double x = se->x[i], y = se->y[i];
            if (!isfinite(x) || !isfinite(y) || (pl->logy && y <= 0)) continue;
            if (pl->logy) y = log10(y);
            int cx = (int)lround((x - xmin) / (xmax - xmin) * (pw - 1));
            int cy = (int)lround((y - ymin) / (ymax - ymin) * (ph - 1));
            if (cx < 0 || cx >= pw || cy < 0 || cy >= ph) continue;
            ui_put(win, py + ph - 1 - cy, px + cx, markers[s % 4], at);
        }
    }
}

const ui_view_class ui_view_plot = {
    .pane = UI_PANE_PLOT, .name = "plot", .focusable = 1,
    .want_h = NULL, .draw = plot_draw, .on_mouse = NULL,
};
