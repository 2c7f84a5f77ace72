/* ui_text: see ui_text.h. */
#include "ui_text.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ui_style.h"

#define TEXT_MAX_WCHARS 65536
#define TEXT_MAX_LINES 4096

int ui_text_wrap(const char *utf8, int width, void (*line)(void *ctx, const wchar_t *s, int n),
                 void *ctx)
{
    static wchar_t buf[TEXT_MAX_WCHARS];
    int n = ui_decode(utf8, buf, TEXT_MAX_WCHARS);
    int count = 0;
    if (width < 1) width = 1;
    int i = 0;
    while (i <= n) {
        int j = i;
        while (j < n && buf[j] != L'\n') j++;
        /* buf[i..j) is one input line. */
        if (j - i >= 2 && buf[i] == L' ' && buf[i + 1] == L' ') {
            /* Kept as it is (commands, log lines, tables); when wider than
             * the pane it continues on the next lines, indented, rather
             * than losing its end. */
            int k = i, first = 1, lead = 0;
            while (i + lead < j && buf[i + lead] == L' ') lead++;
            /* Continuation lines hang two columns under the line's own indent. */
            int hang = lead + 2 < width / 2 ? lead + 2 : width / 2;
            static wchar_t cont[1024];
            while (k < j) {
                int w = 0, e = k;
                int room = first ? width : width - hang;
                if (room < 1) room = 1;
                while (e < j && w + ui_wcwidth(buf[e]) <= room) w += ui_wcwidth(buf[e++]);
                if (e == k) e = k + 1;
                if (e < j) {
                    /* Break at the last space that leaves a word on this
                     * line; only a word wider than the line is cut. */
                    int sp = e;
                    while (sp > k && buf[sp] != L' ') sp--;
                    int min = first ? k + lead : k;
                    if (sp > min) e = sp;
                }
                int t = e;
                while (t > k && buf[t - 1] == L' ') t--;
                if (first) {
                    line(ctx, buf + k, t - k);
                } else {
                    int n = 0;
                    for (int s2 = 0; s2 < hang && s2 < width - 1; s2++) cont[n++] = L' ';
                    for (int q = k; q < t && n < 1023; q++) cont[n++] = buf[q];
                    line(ctx, cont, n);
                }
                count++;
                first = 0;
                k = e;
                while (k < j && buf[k] == L' ') k++;
            }
        } else if (j == i) {
            if (j < n || i == 0) { line(ctx, buf + i, 0); count++; }
        } else {
            int s = i;
            while (s < j) {
                while (s < j && buf[s] == L' ') s++;
                if (s >= j) break;
                int w = 0, k = s, last_space = -1;
                while (k < j) {
                    int cw = ui_wcwidth(buf[k]);
                    if (w + cw > width) break;
                    if (buf[k] == L' ') last_space = k;
                    w += cw;
                    k++;
                }
                int e = k;
                if (k < j && last_space > s) e = last_space;
                int t = e;
                while (t > s && buf[t - 1] == L' ') t--;
                line(ctx, buf + s, t - s);
                count++;
                s = e;
            }
        }
        i = j + 1;
    }
    return count;
}

/* Collected lines of one draw: pointers into a copy of the text. */
typedef struct tline {
    wchar_t *s;
    int n;
    ui_role role;
} tline;

typedef struct collect {
    tline *lines;
    int n, max;
    ui_role role;
    wchar_t *store;
    int used, cap;
} collect;

static void collect_line(void *ctx, const wchar_t *s, int n)
{
    collect *c = ctx;
    if (c->n >= c->max || c->used + n > c->cap) return;
    memcpy(c->store + c->used, s, (size_t)n * sizeof *s);
    c->lines[c->n++] = (tline){ c->store + c->used, n, c->role };
    c->used += n;
}

static void add_text(collect *c, const char *utf8, int width, ui_role role)
{
    c->role = role;
    ui_text_wrap(utf8, width, collect_line, c);
}

static void add_blank(collect *c)
{
    if (c->n > 0 && c->lines[c->n - 1].n == 0) return;
    collect_line(c, L"", 0);
}

static void draw_lines(WINDOW *win, int y0, int x0, int rows, const tline *l, int n, int first)
{
    for (int r = 0; r < rows && first + r < n; r++) {
        const tline *t = &l[first + r];
        attr_t at = ui_attr(t->role);
        int x = x0;
        for (int i = 0; i < t->n; i++) {
            ui_put(win, y0 + r, x, t->s[i], at);
            x += ui_wcwidth(t->s[i]);
        }
    }
}

void ui_text_scroll(ui_view_state *a, int delta)
{
    int maxs = a->text_lines - a->text_rows;
    if (maxs < 0) maxs = 0;
    a->text_scroll += delta;
    if (a->text_scroll > maxs) a->text_scroll = maxs;
    if (a->text_scroll < 0) a->text_scroll = 0;
}

/* Draws into win (its whole area, border included) and records
 * a->text_lines / a->text_rows so scrolling knows the limits. */
static void text_draw(const ui_view_ctx *c, WINDOW *win)
{
    const ui_model *a = c->m;
    ui_view_state *vs = c->st;
    const lsn_scene *sc = c->s;
    static tline nar_l[TEXT_MAX_LINES], bot_l[512];
    static wchar_t nar_s[TEXT_MAX_WCHARS], bot_s[16384];
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    char right[64];
    lsn_state st = sc->state;
    snprintf(right, sizeof right, "step %d", sc->step);
    const char *ptitle = sc->page_title;
    ui_box(win, ptitle && *ptitle ? ptitle : "lesson", right, a->key_focus < 0 && a->input_active);
    int iw = w - 4, ih = h - 2;
    if (iw < 4 || ih < 2) return;

    /* The pinned part: what waits for the learner. */
    collect bot = { bot_l, 0, 512, UI_R_NORMAL, bot_s, 0, 16384 };
    if (st == LSN_ERROR) {
        add_text(&bot, "The lesson stopped with an error:", iw, UI_R_ERROR);
        const char *err = sc->error;
        add_text(&bot, err ? err : "(no message)", iw, UI_R_ERROR);
        add_text(&bot, "r: start the lesson again   l: pick another lesson", iw, UI_R_DIM);
    }
    const char *serr = sc->server_error;
    /* With the log on screen vLLM's message is there in full, in red: the
     * rows here stay the page's. */
    int log_shown = (a->lay->placed & UI_PANE_BIT(UI_PANE_LOG)) != 0;
    if (serr && *serr && st != LSN_ERROR && !log_shown) {
        /* vLLM's message can be long; three lines here, all of it in the log. */
        add_text(&bot, "The server did not start:", iw, UI_R_ERROR);
        int before = bot.n;
        add_text(&bot, serr, iw, UI_R_ERROR);
        if (bot.n - before > 3) {
            bot.n = before + 3;
            tline *l = &bot.lines[bot.n - 1];
            /* point at the log only where it is: on screen, or one Tab away */
            unsigned shown = a->shown_panes;
            int placed = (a->lay->placed & UI_PANE_BIT(UI_PANE_LOG)) != 0;
            int u = ui_gl()->utf8;
            const wchar_t *more = placed ? (u ? L" \u2026 (see the log)" : L" ... (see the log)")
                                : (shown & UI_PANE_BIT(UI_PANE_LOG)) ? (u ? L" \u2026 (Tab: the log)" : L" ... (Tab: the log)")
                                : (u ? L" \u2026" : L" ...");
            int ml = (int)wcslen(more);
            int keep = iw - ml < l->n ? iw - ml : l->n;
            if (keep < 0) keep = 0;
            if (bot.used + keep + ml <= bot.cap) {
                wchar_t *dst = bot.store + bot.used;
                memcpy(dst, l->s, (size_t)keep * sizeof *dst);
                memcpy(dst + keep, more, (size_t)ml * sizeof *dst);
                l->s = dst;
                l->n = keep + ml;
                bot.used += keep + ml;
            }
        }
    }
    const lsn_goal *goal = sc->goal;
    if (goal) {
        if (bot.n) add_blank(&bot);
        char g[600];
        snprintf(g, sizeof g, "%s %s", goal->met ? "Goal reached:" : "Goal:", goal->text);
        add_text(&bot, g, iw, goal->met ? UI_R_OK : UI_R_TITLE);
        if (!goal->met && !a->room_drives) add_text(&bot, "f: change flags   h: hint", iw, UI_R_DIM);
    }
    const lsn_question *q = sc->question;
    if (q) {
        if (bot.n) add_blank(&bot);
        add_text(&bot, q->prompt, iw, UI_R_TITLE);
        for (int i = 0; i < q->nchoices; i++) {
            char chb[600];
            snprintf(chb, sizeof chb, "  %c) %s", 'a' + i, q->choices[i]);
            add_text(&bot, chb, iw, UI_R_NORMAL);
        }
    }
    for (int i = 0; i < a->nhints; i++) {
        char hb[600];
        snprintf(hb, sizeof hb, "Hint: %s", a->hints[i]);
        add_text(&bot, hb, iw, UI_R_WARN);
    }
    if (q && a->verdict_kind >= 0 && a->verdict[0])
        add_text(&bot, a->verdict, iw, a->verdict_kind == LSN_V_CORRECT ? UI_R_OK : UI_R_ERROR);
    int input_row = -1;
    if (a->room_drives) {
        /* A follower: the presenter answers and moves on. */
        add_blank(&bot);
        /* x breaks away only from a lesson: say it only when one is open */
        int lesson_open = a->lesson_current != 0;
        if (a->presenter_left)
            add_text(&bot, lesson_open ? "The presenter has left: this page stays until they come back (x: explore "
                                         "on your own)"
                                       : "The presenter has left: this page stays until they come back",
                     iw, UI_R_WARN);
        else {
            if (q && a->input_len > 0) { /* what the presenter is typing, in its box */
                input_row = bot.n;
                collect_line(&bot, L"", 0);
            }
            add_text(&bot, q ? "the presenter answers (x: try it)" : goal ? "the presenter's goal (x: try it)"
                         : lesson_open ? "the presenter moves on (x: explore)" : "the presenter moves on",
                     iw, UI_R_DIM);
        }
    } else if (q) {
        input_row = bot.n;
        collect_line(&bot, L"", 0);
        const char *how = q->predict ? (q->kind == LSN_Q_CHOICE ? "predict: a letter, Enter"
                                                                : "type your prediction, Enter")
                        : q->kind == LSN_Q_CHOICE ? "a letter, Enter to answer" : "the answer, Enter to check";
        char hb[200];
        /* one row at 80 columns: the rows above are the page the question is about */
        snprintf(hb, sizeof hb, q->predict && !q->hints_total ? "%s" : "%s  h: hint", how);
        add_text(&bot, hb, iw, UI_R_DIM);
    } else if (st == LSN_WAIT_NEXT) {
        add_blank(&bot);
        add_text(&bot, "n: next", iw, UI_R_KEY);
    } else if (st == LSN_RUNNING || st == LSN_WAIT_COND) {
        add_blank(&bot);
        add_text(&bot, a->paused ? "paused   space: run   s: one step   n: finish now"
                                 : "running  space: pause  n: finish now", iw, UI_R_DIM); /* one row at 80 columns */
    } else if (st == LSN_DONE) {
        add_blank(&bot);
        add_text(&bot, "Lesson complete.   n: next lesson   l: lesson list", iw, UI_R_OK);
    }
    int nb = bot.n;
    if (nb > ih - 2) nb = ih - 2 > 0 ? ih - 2 : 0;

    /* The narration. */
    collect nar = { nar_l, 0, TEXT_MAX_LINES, UI_R_NORMAL, nar_s, 0, TEXT_MAX_WCHARS };
    const char *txt = sc->text;
    char loading[64];
    snprintf(loading, sizeof loading, "Opening lesson %d ...", a->loading);
    const char *idle = st == LSN_IDLE ? a->room_idle : NULL; /* a follower waiting for its presenter */
    if ((!txt || !*txt) && idle) txt = idle;
    if (!txt || !*txt) txt = st != LSN_IDLE ? "" : a->loading ? loading : "No lesson loaded. Press l to pick one.";
    int page = sc->page_no;
    /* A right answer whose page the lesson left at once: its explanation
     * heads the new page until the learner moves on (n/p). */
    if (a->notice[0] && page == a->notice_page) { /* a runner notice too long for the header, whole */
        add_text(&nar, a->notice, iw, UI_R_WARN);
        add_blank(&nar);
    }
    if (a->recap[0] && page != a->recap_page) {
        add_text(&nar, a->recap, iw, UI_R_OK);
        add_blank(&nar);
    }
    add_text(&nar, txt, iw, UI_R_NORMAL);
    while (nar.n > 0 && nar.lines[nar.n - 1].n == 0) nar.n--;
    int nrows = ih - nb - (nb > 0 ? 1 : 0);
    if (nrows < 1) nrows = 1;
    int old_lines = vs->text_lines, old_max = vs->text_lines - vs->text_rows;
    int at_bottom = vs->text_scroll >= (old_max > 0 ? old_max : 0);
    vs->text_lines = nar.n;
    vs->text_rows = nrows;
    if (page != vs->last_page) {
        vs->last_page = page;
        vs->text_scroll = 0;
    } else if (nar.n > old_lines && (at_bottom || vs->text_follow)) {
        /* New text on the same page (a flag report, the answer's
         * explanation): follow it, starting one line above the new text,
         * unless the learner scrolled up to read. */
        int first_new = old_lines > 0 ? old_lines - 1 : 0;
        if (first_new > vs->text_scroll) vs->text_scroll = first_new;
        int maxs = nar.n - nrows;
        if (vs->text_scroll > maxs) vs->text_scroll = maxs > 0 ? maxs : 0;
    }
    vs->text_follow = 0;
    ui_text_scroll(vs, 0);
    draw_lines(win, 1, 2, nrows, nar.lines, nar.n, vs->text_scroll);
    const ui_glyphs *g = ui_gl();
    if (vs->text_scroll > 0) ui_put(win, 1, w - 2, g->arrow_up, ui_attr(UI_R_KEY));
    int more_below = vs->text_scroll + nrows < nar.n;

    /* Pinned block at the bottom, with a rule above it. */
    if (nb > 0) {
        int y0 = 1 + ih - nb;
        for (int x = 2; x < w - 2; x++) ui_put(win, y0 - 1, x, g->hline, ui_attr(UI_R_BORDER));
        int first = bot.n - nb;
        draw_lines(win, y0, 2, nb, bot.lines, bot.n, first);
        if (input_row >= first && input_row < bot.n) {
            int y = y0 + (input_row - first);
            attr_t ia = ui_attr(UI_R_INPUT);
            ui_puts(win, y, 2, 2, "> ", ui_attr(UI_R_KEY));
            int bw = iw - 2 - (q && q->unit && *q->unit ? (int)strlen(q->unit) + 1 : 0);
            if (bw < 4) bw = 4;
            for (int x = 0; x < bw; x++) ui_put(win, y, 4 + x, L' ', ia);
            const char *shown = a->input;
            if (a->input_len > bw - 1) shown = a->input + (a->input_len - (bw - 1));
            int used = ui_puts(win, y, 4, bw - 1, shown, ia);
            if (a->input_active) ui_put(win, y, 4 + used, L' ', ia | A_REVERSE);
            if (q && q->unit && *q->unit) ui_puts(win, y, 4 + bw + 1, iw - bw - 3, q->unit, ui_attr(UI_R_DIM));
        }
    }
    if (more_below) {
        /* "more below" on the rule under the narration (or the border). */
        int y = nb > 0 ? 1 + ih - nb - 1 : h - 1;
        if (w > 18) ui_puts(win, y, w - 16, 13, " more below ", ui_attr(UI_R_KEY));
        ui_put(win, y, w - 4, g->arrow_down, ui_attr(UI_R_KEY));
    }
}

static unsigned text_mouse(const ui_view_ctx *c, int y, int x, ui_mouse m)
{
    (void)y;
    (void)x;
    if (m == UI_MOUSE_CLICK) return 0;
    ui_text_scroll(c->st, m == UI_MOUSE_WHEEL_UP ? -3 : 3);
    return UI_PANE_BIT(UI_PANE_TEXT);
}

const ui_view_class ui_view_text = {
    .pane = UI_PANE_TEXT, .name = "text", .focusable = 0,
    .want_h = NULL, .draw = text_draw, .on_mouse = text_mouse,
};
