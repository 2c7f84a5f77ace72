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

/* One log line into w, wrapped at iw ("! " before an error); *first and
 * *last get its rows when it is the first line of its kind (mark). */
static void add_line(wrapped *w, const char *line, int level, ui_role role, int iw, int mark, int *first,
                     int *last)
{
    char buf[600], t[1100];
    shorten(line, buf, sizeof buf, iw < 110);
    w->cur = role;
    int at = w->count;
    if (level == 2) { snprintf(t, sizeof t, "! %s", buf); ui_text_wrap(t, iw, wrap_cb, w); }
    else ui_text_wrap(buf, iw, wrap_cb, w);
    if (mark && *first < 0) { *first = at; *last = w->count - 1; }
}

static int failed(const ui_view_ctx *c) { return c->s->server_error && c->s->server_error[0]; }

/* The log as the view wraps it at iw into w: the plan's start-up lines
 * (those the replay has revealed, or all of them when all), the engine's
 * log, or for a server refused before start-up its refusal. *first..*last:
 * the rows the view must show whole, -1 for none: the lesson's first
 * highlighted line, else after a failed start its first error. Returns 1
 * when they are the highlighted line's. */
static int build(const ui_view_ctx *c, int iw, int all, wrapped *w, int *first, int *last)
{
    const ui_model *a = c->m;
    const kv_frame *f = c->f;
    const kv_plan *p = f->has_plan ? &f->plan : NULL;
    int hf = -1, hl = -1, ef = -1, el = -1, shown = 0;
    w->count = 0;
    for (int i = 0; p && i < p->num_log && (all || shown < a->startup_shown); i++) {
        if (!ui_model_log_visible(a, i)) continue;
        shown++;
        int lv = ui_log_level(p->log[i]), hi = hilite(c, p->log[i]);
        ui_role role = hi ? UI_R_HILITE : lv == 2 ? UI_R_ERROR : lv == 1 ? UI_R_WARN : UI_R_NORMAL;
        if (hi) add_line(w, p->log[i], lv, role, iw, 1, &hf, &hl);
        else add_line(w, p->log[i], lv, role, iw, lv == 2, &ef, &el);
    }
    if (a->engine_log_visible) {
        for (int i = 0; i < f->nlog; i++) {
            int lv = f->log_level[i], hi = hilite(c, f->log[i]);
            ui_role role = hi ? UI_R_HILITE : lv == 2 ? UI_R_ERROR : lv == 1 ? UI_R_WARN : UI_R_DIM;
            if (hi) add_line(w, f->log[i], lv, role, iw, 1, &hf, &hl);
            else add_line(w, f->log[i], lv, role, iw, 0, &ef, &el);
        }
    }
    const char *sl = a->stats_line ? a->stats_line : f->stats_line;
    const char *sh = a->stats_line && a->stats_hits ? a->stats_hits : f->stats_hits;
    if (a->engine_log_visible && f->has_engine && sl[0]) {
        /* vLLM's periodic stats line in the release's words (kv_frame.h),
         * as the app logs it every interval of the learner's time (app_stats.h) */
        char buf[KV_FRAME_STATS_LEN + 8];
        {
            const char *ls[2] = { sl, sh };
            for (int k = 0; k < 2 && ls[k][0]; k++) {
                snprintf(buf, sizeof buf, "INFO %s", ls[k]);
                int hi = hilite(c, buf);
                if (hi) add_line(w, buf, 0, UI_R_HILITE, iw, 1, &hf, &hl);
                else add_line(w, buf, 0, UI_R_DIM, iw, 0, &ef, &el);
            }
        }
    }
    if (!p && failed(c)) {
        /* Stopped before start-up (the model, the card or a flag refused):
         * no plan and no start-up lines; its refusal is the log. */
        char line[1100];
        snprintf(line, sizeof line, "ERROR %s", c->s->server_error);
        add_line(w, line, 2, UI_R_ERROR, iw, 1, &ef, &el);
        w->cur = UI_R_DIM;
        ui_text_wrap("(stopped before start-up: the model, the card or a flag was refused)", iw, wrap_cb, w);
    }
    *first = hf >= 0 ? hf : failed(c) ? ef : -1;
    *last = hf >= 0 ? hl : failed(c) ? el : -1;
    return hf >= 0;
}

static void log_draw(const ui_view_ctx *c, WINDOW *win)
{
    static wrapped wr;
    const ui_model *a = c->m;
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    ui_box(win, "start-up log", a->starting ? "starting" : "", c->focused);
    int iw = w - 4, ih = h - 2;
    if (iw < 8 || ih < 1) return;
    int hl_first, hl_last;
    build(c, iw, 0, &wr, &hl_first, &hl_last);
    if (wr.count == 0) {
        ui_puts(win, 1, 2, iw, c->f->has_plan ? "" : "No server started yet.", ui_attr(UI_R_DIM));
        return;
    }
    int first = wr.count > ih ? wr.count - ih : 0;
    /* The log shows its newest lines, unless the lesson highlights an older
     * one or a failed start's error is: then the view scrolls back to show
     * it whole (with a line of context above when there is room for both). */
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

/* The rows the lesson's highlighted start-up line takes, wrapped as
 * log_draw wraps it, plus the border. (A failed start's error only scrolls
 * the log to its first words: it asks for no rows, so the memory view and
 * the flags that explain and fix it keep theirs.) */
static int log_must_h(const ui_view_ctx *c, int w)
{
    static wrapped wr;
    int iw = w - 4;
    if (iw < 8) return 0;
    int first, last;
    if (!build(c, iw, 1, &wr, &first, &last)) return 0;
    return last - first + 1 + 2;
}

const ui_view_class ui_view_log = {
    .pane = UI_PANE_LOG, .name = "log", .focusable = 1,
    .want_h = NULL, .must_h = log_must_h, .draw = log_draw, .on_mouse = NULL,
};
