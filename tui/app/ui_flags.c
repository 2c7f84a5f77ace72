/* ui_flags: see ui_flags.h. */
#include "ui_flags.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui_chrome.h"
#include "ui_style.h"
#include "ui_text.h"

static int g_first, g_rows; /* scroll of the last draw */

#define HELP_ROWS 6 /* the selected flag's help, wrapped */
#define CMD_ROWS 8  /* the vllm serve command, wrapped */

/* The help of the selected flag wrapped at width, into rows (at most max). */
typedef struct wrap_rows {
    wchar_t s[HELP_ROWS][256];
    int n[HELP_ROWS];
    int count, total;
} wrap_rows;

static void wrap_row(void *ctx, const wchar_t *s, int n)
{
    wrap_rows *w = ctx;
    if (w->count < HELP_ROWS) {
        if (n > 255) n = 255;
        memcpy(w->s[w->count], s, (size_t)n * sizeof *s);
        w->n[w->count++] = n;
    }
    w->total++;
}

/* The command cut into lines of at most width columns between its options
 * (an option keeps its value), each line but the last ending in " \" so
 * the lines paste into a shell as one command; a word longer than a line
 * (a model path) is split with a bare "\" at the end and goes on at the
 * start of the next line, which the shell joins back into the word.
 * Returns the lines it takes; fills out with the first CMD_ROWS. */
static int cmd_lines(const char *cmd, int width, char out[CMD_ROWS][520])
{
    int n = 0;
    if (!cmd || !*cmd || width < 8) return 0;
    if (width > 500) width = 500;
    char cur[1100] = "";
#define EMIT(fmt, ...) do { if (n < CMD_ROWS) snprintf(out[n], 520, fmt, __VA_ARGS__); n++; } while (0)
    const char *p = cmd;
    while (*p) {
        /* the next token: "vllm serve", the model, then up to each " --" */
        const char *next = !strncmp(p, "vllm serve ", 11) ? p + 10 : strstr(p + 1, " --");
        size_t tl = next ? (size_t)(next - p) : strlen(p);
        char tok[520];
        snprintf(tok, sizeof tok, "%.*s", (int)(tl < sizeof tok - 1 ? tl : sizeof tok - 1), p);
        const char *piece = cur[0] && tok[0] == ' ' ? tok + 1 : tok;
        size_t cl = strlen(cur);
        if (!cur[0]) snprintf(cur, sizeof cur, "%s", piece);
        else if ((int)(cl + 1 + strlen(piece) + 2) <= width) snprintf(cur + cl, sizeof cur - cl, " %s", piece);
        else {
            EMIT("%.500s \\", cur);
            snprintf(cur, sizeof cur, "  %s", piece);
        }
        while ((int)strlen(cur) > width - 2) { /* a word longer than the line */
            EMIT("%.*s\\", width - 1, cur);
            memmove(cur, cur + width - 1, strlen(cur + width - 1) + 1);
        }
        p += tl;
    }
    if (cur[0]) EMIT("%.500s", cur);
#undef EMIT
    return n;
}

/* Rows of the help and command lines while the flags have the keys. */
static int extra_rows(const ui_view_ctx *c, int iw)
{
    const lsn_flag *flags = c->s->flags;
    int n = c->s->nflags, sel = c->st->flag_sel;
    wrap_rows hw = {0};
    if (sel >= 0 && sel < n && flags[sel].help) ui_text_wrap(flags[sel].help, iw, wrap_row, &hw);
    char cl[CMD_ROWS][520];
    int nc = cmd_lines(c->s->serve_cmd, iw, cl);
    return (hw.count > 1 ? hw.count - 1 : 0) + (nc < CMD_ROWS ? nc : CMD_ROWS);
}

/* Every flag, a row each; the layout gives them all only while the learner
 * edits them (f) or when the pictures have their room (ui_layout.c), and
 * the rows scroll to the flag the lesson highlights. */
static int flag_hilited(const ui_view_ctx *c, const char *name);

static int flags_want_h(const ui_view_ctx *c, int w)
{
    /* with the keys: the selected flag's whole help and the command too */
    int extra = c->m->key_focus == UI_PANE_FLAGS ? extra_rows(c, w - 4) : 0;
    return c->s->nflags + 3 + extra;
}

/* The lesson's highlighted flags whole: a row each, the hint under them and
 * the border (flags_draw keeps every highlighted flag in view when they fit). */
static int flags_must_h(const ui_view_ctx *c, int w)
{
    (void)w;
    int n = 0;
    for (int i = 0; i < c->s->nflags; i++) n += flag_hilited(c, c->s->flags[i].name);
    return n ? n + 3 : 0;
}

/* The flag on row y of the window at the last draw, or -1. */
static int row_at(const ui_view_ctx *c, int y)
{
    int n = c->s->nflags;
    int r = y - 1;
    if (r < 0 || r >= g_rows) return -1;
    r += g_first;
    return r < n ? r : -1;
}

int ui_flags_effective(const kv_frame *fr, const lsn_flag *f, char *out, size_t len)
{
    snprintf(out, len, "%s", f->value ? f->value : "");
    if (*out || !fr->has_plan) return 0;
    const kv_plan *p = &fr->plan;
    const char *n = f->name;
    if (!strcmp(n, "max-num-seqs")) snprintf(out, len, "%lld", (long long)p->max_num_seqs);
    else if (!strcmp(n, "max-num-batched-tokens")) snprintf(out, len, "%lld", (long long)p->max_num_batched_tokens);
    else if (!strcmp(n, "max-model-len")) snprintf(out, len, "%lld", (long long)p->max_model_len);
    else if (!strcmp(n, "gpu-memory-utilization")) snprintf(out, len, "%.2f", p->gpu_memory_utilization);
    else if (!strcmp(n, "block-size")) snprintf(out, len, "%d", p->block_size);
    else if (!strcmp(n, "tensor-parallel-size")) snprintf(out, len, "%d", p->tensor_parallel_size);
    else if (!strcmp(n, "kv-cache-dtype")) snprintf(out, len, "%s", p->kv_cache_dtype);
    else if (!strcmp(n, "enforce-eager")) snprintf(out, len, "%s", p->enforce_eager ? "true" : "false");
    else if (!strcmp(n, "enable-prefix-caching")) snprintf(out, len, "%s", p->enable_prefix_caching ? "true" : "false");
    else if (!strcmp(n, "gpu")) snprintf(out, len, "%s", p->gpu_id);
    else if (!strcmp(n, "vllm-version")) snprintf(out, len, "%s", p->vllm_version[0] ? p->vllm_version : "textbook");
    else if (!strcmp(n, "accounting")) snprintf(out, len, "%s", p->accounting ? "textbook" : "release");
    else if (!strcmp(n, "kv-heads") && fr->has_engine) snprintf(out, len, "%d", (int)fr->num_kv_heads);
    return *out != 0;
}

int ui_flags_step(const char *value, const lsn_flag *f, int dir, char *out, size_t len)
{
    const char *v = value ? value : "";
    if (f->nchoices > 0) {
        int cur = -1;
        for (int i = 0; i < f->nchoices; i++)
            if (!strcmp(f->choices[i], v)) cur = i;
        int next = cur < 0 ? (dir > 0 ? 0 : f->nchoices - 1)
                           : (cur + (dir > 0 ? 1 : f->nchoices - 1)) % f->nchoices;
        snprintf(out, len, "%s", f->choices[next]);
        return 1;
    }
    if (!*v) return 0;
    if (!strcmp(v, "on") || !strcmp(v, "off")) { snprintf(out, len, "%s", !strcmp(v, "on") ? "off" : "on"); return 1; }
    if (!strcmp(v, "true") || !strcmp(v, "false")) { snprintf(out, len, "%s", !strcmp(v, "true") ? "false" : "true"); return 1; }
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end) return 0;
    if (strchr(v, '.') || (x > 0 && x < 1)) {
        x += dir > 0 ? 0.01 : -0.01;
        if (x < 0.01) x = 0.01;
        if (x > 1.0 && strtod(v, NULL) <= 1.0) x = 1.0;
        snprintf(out, len, "%.2f", x);
        return 1;
    }
    long long n = llround(x);
    if (dir > 0) n = n < 1 ? 1 : n * 2;
    else n = n / 2 < 1 ? 1 : n / 2;
    snprintf(out, len, "%lld", n);
    return 1;
}

static int flag_hilited(const ui_view_ctx *c, const char *name)
{
    const lsn_view *v = ui_view_lesson(c, "flags");
    if (!v) return 0;
    for (int i = 0; i < v->nhighlights; i++)
        if (v->highlights[i].target && !strcmp(v->highlights[i].target, name)) return 1;
    return 0;
}

static void flags_draw(const ui_view_ctx *c, WINDOW *win)
{
    const ui_model *a = c->m;
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    int focus = a->key_focus == UI_PANE_FLAGS;
    ui_box(win, "flags", focus ? "Esc: done" : "f: edit", focus);
    int iw = w - 4, ih = h - 2;
    g_rows = 0;
    if (iw < 8 || ih < 1) return;
    const lsn_flag *flags = c->s->flags;
    int n = c->s->nflags;
    if (n == 0) {
        ui_puts(win, 1, 2, iw, "This lesson has no flags to change.", ui_attr(UI_R_DIM));
        return;
    }
    if (c->st->flag_sel >= n) c->st->flag_sel = n - 1;
    if (c->st->flag_sel < 0) c->st->flag_sel = 0;
    /* Under the list: a status message or the selected flag's help (whole,
     * up to HELP_ROWS rows, while the flags have the keys), then the `vllm
     * serve` command of the flags as they stand (with the keys, or in rows
     * the list leaves free). The list keeps at least one row (two when it has them). */
    const lsn_flag *self = &flags[c->st->flag_sel];
    int status = a->status[0] && a->status_until > a->now && !ui_chrome_status_in_footer(c);
    wrap_rows hw = {0};
    if (focus && !status && self->help) ui_text_wrap(self->help, iw, wrap_row, &hw);
    char cl[CMD_ROWS][520];
    int ncl_all = cmd_lines(c->s->serve_cmd, iw, cl);
    int ncl = ncl_all < CMD_ROWS ? ncl_all : CMD_ROWS;
    int hrows = hw.count > 1 ? hw.count : 1;
    int keep_list = n < 2 ? n : 2;
    if (!focus && ih - 1 - n < ncl) ncl = 0;            /* only in spare rows */
    while (ncl > 0 && ih - hrows - ncl < keep_list) ncl--;
    while (hrows > 1 && ih - hrows - ncl < keep_list) hrows--;
    int list_rows = ih - hrows - ncl > 0 ? ih - hrows - ncl : ih;
    g_first = 0;
    /* The row to keep in sight: the selected flag while editing, else the
     * first flag the lesson highlights. */
    int keep = c->st->flag_sel, keep_first = -1;
    if (!focus)
        for (int i = 0; i < n; i++)
            if (flag_hilited(c, flags[i].name)) {
                /* every highlighted flag when they fit, else the first */
                if (keep_first < 0) keep_first = keep = i;
                else if (i - keep_first < list_rows) keep = i;
            }
    if (keep >= list_rows) g_first = keep - list_rows + 1;
    g_rows = list_rows;
    int namew = 0;
    for (int i = 0; i < n; i++) {
        const lsn_flag *f = &flags[i];
        int l = (int)strlen(f->name);
        if (l > namew) namew = l;
    }
    if (namew > iw / 2 + 4) namew = iw / 2 + 4;
    for (int r = 0; r < list_rows && g_first + r < n; r++) {
        int i = g_first + r;
        const lsn_flag *f = &flags[i];
        int sel = focus && i == c->st->flag_sel;
        attr_t at = sel ? ui_attr(UI_R_SELECT) : flag_hilited(c, f->name) ? ui_attr(UI_R_HILITE) : ui_attr(UI_R_NORMAL);
        if (sel) for (int x = 0; x < iw; x++) ui_put(win, 1 + r, 2 + x, L' ', at);
        ui_puts(win, 1 + r, 2, namew, f->name, at);
        int vx = 2 + namew + 1, vw = iw - namew - 1;
        if (sel && a->flag_editing) {
            attr_t ia = ui_attr(UI_R_INPUT);
            for (int x = 0; x < vw; x++) ui_put(win, 1 + r, vx + x, L' ', ia);
            /* A selected pre-filled value shows reversed: typing replaces it. */
            int u = ui_puts(win, 1 + r, vx, vw - 1, a->flag_buf, a->flag_selall ? ia | A_REVERSE : ia);
            ui_put(win, 1 + r, vx + u, L' ', ia | A_REVERSE);
        } else {
            char eff[128];
            int dflt = ui_flags_effective(c->f, f, eff, sizeof eff);
            const char *v = *eff ? eff : "(default)";
            char shown[176];
            /* A value too long for the row (a model id) keeps its start and
             * the closing '>' with an ellipsis between. */
            int room = vw - (sel ? 4 : 0);
            char vv[160];
            if ((int)strlen(v) > room && room > 4)
                snprintf(vv, sizeof vv, "%.*s%s", room - 1, v, ui_gl()->utf8 ? "\u2026" : "~");
            else
                snprintf(vv, sizeof vv, "%s", v);
            if (sel) snprintf(shown, sizeof shown, "< %s >", vv);
            else snprintf(shown, sizeof shown, "%s", vv);
            wchar_t wtmp[160];
            int vlen = ui_decode(shown, wtmp, 160);
            int x = vx + (vw - vlen > 0 ? vw - vlen : 0);
            /* A default is dim; the value the learner set is plain. */
            ui_puts(win, 1 + r, x, vw, shown, dflt || !*eff ? (sel ? at | A_DIM : ui_attr(UI_R_DIM)) : at);
        }
    }
    /* Under the list: a status message, else what the selected flag
     * changes (whole), else how to change one; then the command. */
    int sy = 1 + list_rows;
    if (list_rows < ih) {
        /* (one too long for the header is whole on the footer row instead) */
        if (status)
            ui_puts(win, sy, 2, iw, a->status, ui_attr(a->status_role));
        else if (focus && hw.count > 0) {
            for (int r = 0; r < hrows && r < hw.count; r++) {
                int x = 2;
                /* a help longer than its rows ends in the cut mark */
                int cut = r == hrows - 1 && hw.total > hrows;
                for (int k = 0; k < hw.n[r] && x < 2 + iw - cut; k++) {
                    ui_put(win, sy + r, x, hw.s[r][k], ui_attr(UI_R_DIM));
                    x += ui_wcwidth(hw.s[r][k]);
                }
                if (cut) ui_put(win, sy + r, x < 1 + iw ? x : 1 + iw, ui_gl()->utf8 ? L'\u2026' : L'~', ui_attr(UI_R_DIM));
            }
        } else if (!focus) {
            ui_puts(win, sy, 2, iw, "f, then arrows: change a flag", ui_attr(UI_R_DIM));
        }
        for (int r = 0; r < ncl; r++) ui_puts(win, sy + hrows + r, 2, iw, cl[r], ui_attr(UI_R_NORMAL));
        /* not all of it fits: say so rather than offer half a command */
        if (ncl > 0 && ncl < ncl_all)
            ui_puts(win, sy + hrows + ncl - 1, 2 + iw - 12, 12, " (and more)", ui_attr(UI_R_WARN));
    }
}

static unsigned flags_mouse(const ui_view_ctx *c, int y, int x, ui_mouse m)
{
    (void)x;
    if (m != UI_MOUSE_CLICK) return 0;
    int row = row_at(c, y);
    if (row < 0) return 0;
    c->st->flag_sel = row;
    if (c->req) c->req->flags_keys = 1;
    return UI_PANE_BIT(UI_PANE_FLAGS) | UI_PANE_BIT(UI_PANE_FOOTER);
}

const ui_view_class ui_view_flags = {
    .pane = UI_PANE_FLAGS, .name = "flags", .focusable = 1,
    .want_h = flags_want_h, .must_h = flags_must_h, .draw = flags_draw, .on_mouse = flags_mouse,
};
