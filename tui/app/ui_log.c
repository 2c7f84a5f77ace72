/* ui_log: see ui_log.h. */
#include "ui_log.h"

#include <stdio.h>
#include <string.h>

#include "ui_style.h"
#include "ui_text.h"

int ui_log_level(const char *line)
{
    if (!line) return 0;
    if (!strncmp(line, "ERROR", 5) || strstr(line, "Error:") || strstr(line, "ERROR ")) return 2;
    if (!strncmp(line, "WARNING", 7) || strstr(line, "WARNING ")) return 1;
    return 0;
}

/* "INFO 11-29 09:00:00 [gpu_worker.py:276] Available ..." -> "INFO Available ..."
 * when the pane is narrow: the file and time say little on a small screen. */
static void shorten(const char *in, char *out, size_t len, int narrow)
{
    const char *b = narrow ? strstr(in, "] ") : NULL;
    const char *sp = strchr(in, ' ');
    if (b && sp && sp < b && b - in < 60) snprintf(out, len, "%.*s %s", (int)(sp - in), in, b + 2);
    else snprintf(out, len, "%s", in);
}

typedef struct logline {
    const char *text;
    int level;
} logline;

typedef struct wrapped {
    wchar_t s[256][160];
    int n[256];
    ui_role role[256];
    int count;
    ui_role cur;
} wrapped;

static void wrap_cb(void *ctx, const wchar_t *s, int n)
{
    wrapped *w = ctx;
    int k = w->count % 256;
    if (n > 159) n = 159;
    memcpy(w->s[k], s, (size_t)n * sizeof *s);
    w->n[k] = n;
    w->role[k] = w->cur;
    w->count++;
}

static int hilite(const ui_view_ctx *c, const char *line)
{
    const lsn_view *v = ui_view_lesson(c, "log");
    if (!v) return 0;
    for (int i = 0; i < v->nhighlights; i++)
        if (v->highlights[i].target && v->highlights[i].target[0] && strstr(line, v->highlights[i].target))
            return 1;
    return 0;
}

static void log_draw(const ui_view_ctx *c, WINDOW *win)
{
    static wrapped wr;
    const app *a = c->a;
    const kv_frame *f = c->f;
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    ui_box(win, "start-up log", app_starting(a) ? "starting" : "", c->focused);
    int iw = w - 4, ih = h - 2;
    if (iw < 8 || ih < 1) return;
    wr.count = 0;
    int hl_first = -1, hl_last = -1; /* wrapped lines of the first highlighted log line */
    const kv_plan *p = f->has_plan ? &f->plan : NULL;
    int shown = 0;
    char buf[600];
    for (int i = 0; p && i < p->num_log && shown < a->startup_shown; i++) {
        if (!app_log_visible(a, i)) continue;
        shown++;
        shorten(p->log[i], buf, sizeof buf, iw < 110);
        int lv = ui_log_level(p->log[i]);
        wr.cur = hilite(c, p->log[i]) ? UI_R_HILITE : lv == 2 ? UI_R_ERROR : lv == 1 ? UI_R_WARN : UI_R_NORMAL;
        int first_hl = wr.cur == UI_R_HILITE && hl_first < 0;
        if (first_hl) hl_first = wr.count;
        if (lv == 2) { char t[620]; snprintf(t, sizeof t, "! %s", buf); ui_text_wrap(t, iw, wrap_cb, &wr); }
        else ui_text_wrap(buf, iw, wrap_cb, &wr);
        if (first_hl) hl_last = wr.count - 1;
    }
    if (app_engine_log_visible(a)) {
        for (int i = 0; i < f->nlog; i++) {
            shorten(f->log[i], buf, sizeof buf, iw < 110);
            int lv = f->log_level[i];
            wr.cur = hilite(c, f->log[i]) ? UI_R_HILITE : lv == 2 ? UI_R_ERROR : lv == 1 ? UI_R_WARN : UI_R_DIM;
            int first_hl = wr.cur == UI_R_HILITE && hl_first < 0;
            if (first_hl) hl_first = wr.count;
            if (lv == 2) { char t[620]; snprintf(t, sizeof t, "! %s", buf); ui_text_wrap(t, iw, wrap_cb, &wr); }
            else ui_text_wrap(buf, iw, wrap_cb, &wr);
            if (first_hl) hl_last = wr.count - 1;
        }
    }
    if (wr.count == 0) {
        ui_puts(win, 1, 2, iw, p ? "" : "No server started yet.", ui_attr(UI_R_DIM));
        return;
    }
    int first = wr.count > ih ? wr.count - ih : 0;
    /* The log shows its newest lines, unless the lesson highlights an older
     * one: then the view scrolls back to show it whole (with a line of
     * context above when there is room for both). */
    if (hl_first >= 0 && (hl_first < first || hl_last >= first + ih)) {
        first = hl_first;
        if (first > 0 && hl_last - hl_first + 2 <= ih) first--;
    }
    if (wr.count - first > 256) first = wr.count - 256;
    for (int r = 0; first + r < wr.count && r < ih; r++) {
        int k = (first + r) % 256;
        attr_t at = ui_attr(wr.role[k]);
        int x = 2;
        for (int i = 0; i < wr.n[k]; i++) {
            ui_put(win, 1 + r, x, wr.s[k][i], at);
            x += ui_wcwidth(wr.s[k][i]);
        }
    }
    if (first + ih < wr.count && w > 18) {
        ui_puts(win, h - 1, w - 16, 13, " more below ", ui_attr(UI_R_KEY));
        ui_put(win, h - 1, w - 4, ui_gl()->arrow_down, ui_attr(UI_R_KEY));
    }
}

static void count_cb(void *ctx, const wchar_t *s, int n)
{
    (void)s;
    (void)n;
    (*(int *)ctx)++;
}

/* The rows the highlighted start-up line takes, wrapped as log_draw wraps
 * it, plus one of context above it and the border. */
static int log_must_h(const ui_view_ctx *c, int w)
{
    const kv_frame *f = c->f;
    const kv_plan *p = f->has_plan ? &f->plan : NULL;
    int iw = w - 4;
    if (!p || iw < 8) return 0;
    char buf[600];
    for (int i = 0; i < p->num_log; i++) {
        if (!app_log_visible(c->a, i) || !hilite(c, p->log[i])) continue;
        shorten(p->log[i], buf, sizeof buf, iw < 110);
        int rows = 0;
        if (ui_log_level(p->log[i]) == 2) {
            char t[620];
            snprintf(t, sizeof t, "! %s", buf);
            ui_text_wrap(t, iw, count_cb, &rows);
        } else {
            ui_text_wrap(buf, iw, count_cb, &rows);
        }
        return rows + 2;
    }
    return 0;
}

const ui_view_class ui_view_log = {
    .pane = UI_PANE_LOG, .name = "log", .focusable = 1,
    .want_h = NULL, .must_h = log_must_h, .draw = log_draw, .on_mouse = NULL,
};
