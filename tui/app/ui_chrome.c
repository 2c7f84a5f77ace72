/* ui_chrome: see ui_chrome.h. */
#include "ui_chrome.h"

#include <stdio.h>
#include <string.h>

#include "kv_history.h" /* KV_MARK_* */
#include "ui_style.h"
#include "ui_text.h"

typedef struct keydef {
    const char *key, *what;
} keydef;

static const keydef keys_main[] = {
    /* Most used first: what fits at 80 columns ends with "? help  q quit". */
    { "n", "next" }, { "p", "back" }, { "f", "flags" }, { "h", "hint" }, { "l", "lessons" },
    { "Tab", "view" }, { "?", "help" }, { "q", "quit" }, { "space", "pause" }, { "s", "step" },
    { "+/-", "speed" }, { "r", "reset" }, { "t", "block table" },
};
/* Replaying a past step: moving in the history; any other key returns. */
static const keydef keys_replay[] = {
    { "[ ]", "step" }, { "{ }", "event" /* the kind m chose */ }, { "m", "kind" }, { "End", "present" },
    { "Home", "start" }, { "Tab", "view" }, { "t", "block table" }, { "?", "help" }, { "q", "quit" },
};
/* A follower: the presenter moves the lesson. */
static const keydef keys_follow[] = {
    { "x", "explore on your own" }, { "up/down", "scroll" }, { "?", "help" }, { "q", "quit" },
};
/* A follower on its own: the usual keys, and x to rejoin. */
static const keydef keys_away[] = {
    { "n", "next" }, { "p", "back" }, { "f", "flags" }, { "h", "hint" }, { "x", "rejoin" },
    { "Tab", "view" }, { "?", "help" }, { "q", "quit" }, { "l", "lessons" }, { "space", "pause" },
};
static const keydef keys_flags[] = {
    { "up/down", "pick" }, { "left/right", "change" }, { "Enter", "type a value" }, { "Esc", "done" },
    { "?", "help" },
};
static const keydef keys_edit[] = {
    { "Enter", "apply" }, { "Esc", "cancel" }, { "Backspace", "erase" }, { "Ctrl-U", "clear" },
};
static const keydef keys_answer[] = {
    { "Enter", "check" }, { "Esc", "leave the box" }, { "h", "hint" }, { "f", "flags (empty box)" },
    { "n", "next" }, { "?", "help" },
};

static void draw_keys(WINDOW *win, int w, const keydef *k, int n, int paused)
{
    int x = 1;
    for (int i = 0; i < n; i++) {
        /* space says what it does now: run when paused, pause when running */
        const char *what = paused && !strcmp(k[i].key, "space") ? "run" : k[i].what;
        int need = (int)strlen(k[i].key) + 1 + (int)strlen(what) + 2;
        if (x + need > w) break;
        x += ui_puts(win, 0, x, w - x, k[i].key, ui_attr(UI_R_KEY));
        x++;
        x += ui_puts(win, 0, x, w - x, what, ui_attr(UI_R_NORMAL));
        x += 2;
    }
}

static int text_cols(const char *utf8)
{
    wchar_t tmp[512];
    int n = ui_decode(utf8, tmp, 512), cols = 0;
    for (int i = 0; i < n; i++) cols += ui_wcwidth(tmp[i]);
    return cols;
}

/* The header's right end: the room, the step, the run state, the speed
 * (said only when not x1.0). compact: the short words ("held" for "held by
 * the lesson"), for a row too narrow for the page title beside the long ones. */
static void header_right(const ui_view_ctx *c, int compact, char *out, size_t len)
{
    const ui_model *a = c->m;
    lsn_state st = c->s->state;
    /* While the learner reads, answers or edits flags the lesson usually
     * holds the engine still on purpose: say so, so it does not look stuck. */
    int runs = a->has_runner && a->engine_runs;
    int held = a->has_runner && !runs && c->f->has_engine &&
               (st == LSN_WAIT_NEXT || st == LSN_WAIT_ANSWER || st == LSN_WAIT_GOAL);
    const char *state = a->paused ? "paused" : st == LSN_RUNNING || st == LSN_WAIT_COND || runs ? "running"
                       : st == LSN_DONE ? "done" : st == LSN_ERROR ? "error"
                       : held ? (compact ? "held" : "held by the lesson") : "waiting";
    const char *room = a->room_label;
    char speed[32];
    snprintf(speed, sizeof speed, " x%.1f", a->speed);
    if (!strcmp(speed, " x1.0")) speed[0] = '\0';
    snprintf(out, len, "%s%sstep %d%s%lc %s%s ", room, room[0] ? "  " : "", c->s->step, compact ? " " : "  ",
             (wint_t)(a->paused ? ui_gl()->pause : ui_gl()->play), state, speed);
}

/* The header's middle: the lesson and its title (a status message takes
 * the title's place while it lasts). */
static void header_mid(const ui_view_ctx *c, int with_title, char *out, size_t len)
{
    int num = c->s->lesson;
    int total = c->m->nlessons;
    if (num > 0) snprintf(out, len, "  Lesson %d/%d  %s", num, total, with_title ? c->s->title : "");
    else snprintf(out, len, "  no lesson  ");
}

/* The right end in its long words when the page title fits beside them,
 * else in its short ones. */
static void header_right_fit(const ui_view_ctx *c, char *out, size_t len)
{
    char mid[256];
    header_mid(c, 1, mid, sizeof mid);
    header_right(c, 0, out, len);
    if (1 + 5 + text_cols(mid) + 2 + text_cols(out) > c->m->cols) header_right(c, 1, out, len);
}

static int status_on(const ui_model *a) { return a->status[0] && a->status_until > a->now; }

int ui_chrome_status_in_footer(const ui_view_ctx *c)
{
    const ui_model *a = c->m;
    if (!status_on(a) || a->overlay != UI_OV_NONE || a->rw_active) return 0;
    char right[192], mid[256];
    header_right_fit(c, right, sizeof right);
    header_mid(c, 0, mid, sizeof mid);
    /* the header holds it whole after "kvlab" and the lesson, before the right end */
    int room = a->cols - (1 + 5) - text_cols(mid) - text_cols(right) - 2;
    return text_cols(a->status) > room;
}

void ui_chrome_footer(const ui_view_ctx *c, WINDOW *win)
{
    const ui_model *a = c->m;
    int h, w;
    getmaxyx(win, h, w);
    (void)h;
    werase(win);
    if (a->overlay != UI_OV_NONE) {
        const char *k = a->overlay == UI_OV_HELP ? "Up/Down PgUp/PgDn Home/End: scroll   Esc or q: close"
                      : a->overlay == UI_OV_LESSONS ? "up/down: pick   Enter: open   1-21: jump   Esc or q: close"
                      : a->overlay == UI_OV_CONFIRM_RESET ? "Start this lesson again from step 1?   y: yes   n or Esc: no"
                      : "Quit kvlab?   y: yes   n or Esc: no";
        ui_puts(win, 0, 1, w - 2, k, ui_attr(UI_R_KEY));
        return;
    }
    /* A message too long for the header has this row to itself while it
     * lasts (the keys come back after it). */
    if (ui_chrome_status_in_footer(c)) {
        ui_puts(win, 0, 1, w - 2, a->status, ui_attr(a->status_role) | A_BOLD);
        return;
    }
    int room = a->room_footer, p = a->paused;
    /* x breaks away only from a lesson: none is offered while the presenter has none open */
    int skip_x = room == 1 && !a->lesson_current;
    if (room == 1) draw_keys(win, w, keys_follow + skip_x, (int)(sizeof keys_follow / sizeof keys_follow[0]) - skip_x, p);
    else if (a->input_active) draw_keys(win, w, keys_answer, 6, p);
    else if (a->key_focus == UI_PANE_FLAGS && a->flag_editing) draw_keys(win, w, keys_edit, 4, p);
    else if (a->key_focus == UI_PANE_FLAGS) draw_keys(win, w, keys_flags, 5, p);
    else if (room == 2) draw_keys(win, w, keys_away, (int)(sizeof keys_away / sizeof keys_away[0]), p);
    else if (a->rw_active) {
        keydef k[sizeof keys_replay / sizeof keys_replay[0]];
        memcpy(k, keys_replay, sizeof k);
        if (a->rw_kind) k[1].what = a->rw_kind;
        draw_keys(win, w, k, (int)(sizeof k / sizeof k[0]), p);
    }
    else draw_keys(win, w, keys_main, (int)(sizeof keys_main / sizeof keys_main[0]), p);
}

/* One timeline cell for the marks in it: the most telling one wins. */
static void mark_cell(uint32_t k, wchar_t *c, attr_t *at)
{
    const ui_glyphs *g = ui_gl();
    *at = ui_attr(UI_R_HEADER);
    if (k & KV_MARK_RESTART) { *c = '|'; *at = ui_attr(UI_R_HEADER) | A_BOLD; }
    else if (k & KV_MARK_PREEMPT) { *c = g->preempt; *at = ui_attr(UI_R_FLASH_PREEMPT) | A_BOLD; }
    else if (k & KV_MARK_EVICT) { *c = g->evict; *at = ui_attr(UI_R_FLASH_EVICT); }
    else if (k & KV_MARK_HIT) { *c = g->hit; *at = ui_attr(UI_R_FLASH_HIT); }
    else if (k & KV_MARK_FINISH) { *c = '.'; }
    else { *c = g->hline; *at = ui_attr(UI_R_HEADER) | A_DIM; }
}

/* The replay line's label and the column it starts at: after "kvlab" and
 * two blanks (header_draw). */
#define RW_X (1 + 5 + 2)
static void rewind_label(int64_t pos, int64_t present, char *out, size_t len)
{
    snprintf(out, len, "replay, step %lld of %lld ", (long long)pos, (long long)present);
}

/* Columns the timeline has, '[' and ']' included, after the label at w columns. */
static int timeline_width(int w, const char *lbl)
{
    int lw = text_cols(lbl);
    if (lw > w - RW_X) lw = w - RW_X > 0 ? w - RW_X : 0;
    return w - (RW_X + lw) - 2;
}

int ui_chrome_timeline_cells(int cols, int64_t pos, int64_t present)
{
    char lbl[96];
    rewind_label(pos, present, lbl, sizeof lbl);
    int tw = timeline_width(cols, lbl);
    return tw < 8 ? 0 : tw - 2;
}

void ui_chrome_timeline_span(int64_t first, int64_t present, int cells, int c, int64_t *from, int64_t *to)
{
    double span = (double)(present - first + 1);
    *from = first + (int64_t)(c * span / cells);
    *to = first + (int64_t)((c + 1) * span / cells);
    if (*to <= *from) *to = *from + 1;
}

/* The header's replay line ("replay, step N of M" and the timeline with the
 * history's marks, as the app read them into the model), into row 0 of win
 * from column RW_X to the right edge. */
static void rewind_header(const ui_model *a, WINDOW *win, int w)
{
    attr_t hd = ui_attr(UI_R_HEADER);
    int64_t first = a->rw_first, present = a->rw_present;
    char lbl[96];
    rewind_label(a->rw_pos, present, lbl, sizeof lbl);
    int x = RW_X + ui_puts(win, 0, RW_X, w - RW_X, lbl, hd | A_BOLD);
    int st_on = a->status[0] && a->status_until > a->now;
    int tw = timeline_width(w, lbl);
    if (st_on && tw > 12) { /* a message takes the timeline's place while it lasts */
        ui_puts(win, 0, x + 1, tw, a->status, hd | A_BOLD);
        return;
    }
    if (tw < 8 || present <= first) return;
    ui_put(win, 0, x++, '[', hd);
    int cells = tw - 2;
    double span = (double)(present - first + 1);
    int cur = (int)((double)(a->rw_pos - first) * cells / span);
    for (int c = 0; c < cells; c++) {
        wchar_t g;
        attr_t at;
        /* the app filled rw_marks for this width; a cell it has none for is plain */
        mark_cell(cells == a->rw_ncells && c < UI_RW_MAX_CELLS ? a->rw_marks[c] : 0, &g, &at);
        if (c == cur) at = ui_attr(UI_R_SELECT) | A_BOLD;
        ui_put(win, 0, x + c, g, at);
    }
    ui_put(win, 0, x + cells, ']', hd);
}

static void header_draw(const ui_view_ctx *c, WINDOW *win)
{
    const ui_model *a = c->m;
    int h, w;
    getmaxyx(win, h, w);
    (void)h;
    attr_t hd = ui_attr(UI_R_HEADER);
    for (int x = 0; x < w; x++) ui_put(win, 0, x, L' ', hd);
    int x = 1;
    x += ui_puts(win, 0, x, w - x, "kvlab", hd | A_BOLD);
    if (a->rw_active) { /* "replay, step N of M" and the timeline take the row */
        rewind_header(a, win, w);
        return;
    }
    char right[192], mid[256];
    header_right_fit(c, right, sizeof right);
    int rl = text_cols(right);
    /* A message for the learner takes the title's place while it lasts
     * (at 80 columns there is no room for both); one too long for it goes
     * to the footer row, and the title stays. */
    int st_on = status_on(a) && !ui_chrome_status_in_footer(c);
    header_mid(c, !st_on, mid, sizeof mid);
    x += ui_puts(win, 0, x, w - x - rl - 2, mid, hd);
    if (st_on) ui_puts(win, 0, x, w - x - rl - 2, a->status, hd | A_BOLD);
    if (w - rl > x) ui_puts(win, 0, w - rl, rl, right, hd);
}

static wchar_t small_buf[16][256];
static int small_len[16], small_cnt;

static void small_line(void *ctx, const wchar_t *s, int n)
{
    (void)ctx;
    if (small_cnt >= 16) return;
    if (n > 255) n = 255;
    memcpy(small_buf[small_cnt], s, (size_t)n * sizeof *s);
    small_len[small_cnt++] = n;
}

void ui_chrome_small(const ui_model *a, WINDOW *win)
{
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    char msg[256];
    snprintf(msg, sizeof msg, "Terminal %dx%d is too small. kvlab needs %dx%d: please enlarge the terminal. (q quits)",
             a->cols, a->rows, UI_MIN_COLS, UI_MIN_ROWS);
    small_cnt = 0;
    int width = w > 2 ? w - 2 : 1;
    ui_text_wrap(msg, width, small_line, NULL);
    int y0 = (h - small_cnt) / 2;
    if (y0 < 0) y0 = 0;
    for (int i = 0; i < small_cnt && y0 + i < h; i++) {
        int lw = 0;
        for (int k = 0; k < small_len[i]; k++) lw += ui_wcwidth(small_buf[i][k]);
        int x = (w - lw) / 2;
        if (x < 0) x = 0;
        for (int k = 0; k < small_len[i] && x < w; k++) {
            ui_put(win, y0 + i, x, small_buf[i][k], ui_attr(i == 0 ? UI_R_WARN : UI_R_NORMAL));
            x += ui_wcwidth(small_buf[i][k]);
        }
    }
}

/* ---- overlays ---------------------------------------------------------- */

/* The help: the keys, then a legend line for every glyph a view draws,
 * each drawn with the glyph of the table in use (block elements or ASCII)
 * and its role, so the legend shows what the screen shows in any mode. The
 * overlay scrolls (Up/Down, PgUp/PgDn, Home/End) when it is taller than
 * the terminal. */
typedef enum help_glyph {
    HG_TEXT = 0, HG_HEAD, /* plain text, a heading */
    HG_USED, HG_SHARED, HG_CACHED, HG_FREE, HG_EMPTY, HG_NULL, HG_HIT, HG_EVICT, HG_PREEMPT, HG_LEVELS,
    HG_HILITE, HG_SELECTED, HG_TERMS, HG_KV_FREE, HG_UNUSED, HG_BUDGET, HG_REQ_PREEMPTED, HG_REQ_NEXT,
    HG_HEAD_TP, HG_PLAY, HG_PAUSE, HG_T_RESTART, HG_T_PREEMPT, HG_T_EVICT, HG_T_HIT, HG_T_FINISH, HG_T_NONE,
    HG_LOG_ERROR, HG_SPARK, HG_PLOT, HG_FLAG_SEL, HG_CUT, HG_MORE, HG_LIST,
} help_glyph;

typedef struct help_line {
    help_glyph g;
    const char *text;
} help_line;

static const help_line help_lines[] = {
    { HG_HEAD, "Keys" },
    { HG_TEXT, "  n or Right    next step (finish a running step at once)" },
    { HG_TEXT, "  p or Left     back one step" },
    { HG_TEXT, "  space  s      run or pause / one engine step (\"held\": kept still)" },
    { HG_TEXT, "  + / -         faster / slower" },
    { HG_TEXT, "  f             flags: Up/Down pick, Left/Right or +/- change," },
    { HG_TEXT, "                Enter or a digit types a value, Esc leaves" },
    { HG_TEXT, "  Tab           give the next view the most room" },
    { HG_TEXT, "  t             show a request's block table (cycles)" },
    { HG_TEXT, "  v             keep this plan as a second memory bar (v: drop it)" },
    { HG_TEXT, "  h             a hint for the question or goal" },
    { HG_TEXT, "  Up/Down PgUp  scroll the lesson text (and this help)" },
    { HG_TEXT, "  [ ] { } m     replay a step, an event (m: kind); End now, Home first" },
    { HG_TEXT, "  r             start the lesson again (asks first)" },
    { HG_TEXT, "  l             lesson list" },
    { HG_TEXT, "  q             quit (progress is saved)" },
    { HG_TEXT, "  mouse         click a block or a flag" },
    { HG_TEXT, "  x             following a room (--follow): go alone / rejoin" },
    { HG_TEXT, "" },
    { HG_HEAD, "Block pool: one cell per block" },
    { HG_USED, "used by one request: its letter (in its colour)" },
    { HG_SHARED, "shared by 2-9 requests (a prefix-cache hit); + more than 9" },
    { HG_CACHED, "free, still holding a cached prefix (can be hit again)" },
    { HG_FREE, "free, never used or its hash dropped" },
    { HG_EMPTY, "reserved for a request's slab, no token in it yet" },
    { HG_NULL, "the null block (block 0, never handed out)" },
    { HG_HIT, "flash: a prefix-cache hit" },
    { HG_EVICT, "flash: a cached block evicted for reuse" },
    { HG_PREEMPT, "flash: a preempted request's freed blocks" },
    { HG_LEVELS, "several blocks per cell: how full the cell is" },
    { HG_HILITE, "what the lesson points at (reverse)" },
    { HG_SELECTED, "the selected request's blocks (underlined)" },
    { HG_TEXT, "" },
    { HG_HEAD, "GPU memory bar" },
    { HG_TERMS, "weights, activation, graphs, context, NCCL, non-torch, KV" },
    { HG_KV_FREE, "the free part of a KV pool bar (ranks view)" },
    { HG_UNUSED, "outside gpu-memory-utilization" },
    { HG_BUDGET, "where the budget (total x utilization) ends" },
    { HG_TEXT, "" },
    { HG_HEAD, "Requests, ranks, metrics, plot" },
    { HG_REQ_PREEMPTED, "after wait: preempted, waiting to run again" },
    { HG_REQ_NEXT, "the request the scheduler preempts next (the last running)" },
    { HG_HEAD_TP, "one KV head on a GPU; xN: N GPUs hold copies of it" },
    { HG_SPARK, "sparkline, low to high (metrics view)" },
    { HG_PLOT, "the plot's series, named on its first row" },
    { HG_TEXT, "" },
    { HG_HEAD, "Header and replay timeline" },
    { HG_PLAY, "running (the engine steps)" },
    { HG_PAUSE, "paused (space runs)" },
    { HG_T_RESTART, "the server restarted (a flag changed)" },
    { HG_T_PREEMPT, "a preemption" },
    { HG_T_EVICT, "an eviction" },
    { HG_T_HIT, "a prefix-cache hit" },
    { HG_T_FINISH, "a request finished" },
    { HG_T_NONE, "nothing marked in that stretch" },
    { HG_TEXT, "" },
    { HG_HEAD, "Text, log, flags, lesson list" },
    { HG_MORE, "more text above / below (scroll with Up/Down)" },
    { HG_LOG_ERROR, "an error line in the start-up log" },
    { HG_FLAG_SEL, "the selected flag (Left/Right change it)" },
    { HG_CUT, "a value or line cut to fit" },
    { HG_LIST, "lesson done / started / not started" },
};

#define HELP_N ((int)(sizeof help_lines / sizeof help_lines[0]))

int ui_chrome_help_lines(void) { return HELP_N; }

void ui_chrome_overlay_size(const ui_model *a, int rows, int cols, int *h, int *w)
{
    int want_h = 10, want_w = 60;
    if (a->overlay == UI_OV_HELP) { want_h = HELP_N + 2; want_w = 74; }
    else if (a->overlay == UI_OV_LESSONS) { want_h = a->nlessons + 4; want_w = 72; }
    else { want_h = 5; want_w = 52; }
    if (want_h > rows - 2) want_h = rows - 2;
    if (want_w > cols - 4) want_w = cols - 4;
    if (want_h < 3) want_h = 3;
    if (want_w < 10) want_w = 10;
    *h = want_h;
    *w = want_w;
}

/* The glyphs of a legend line (at most 9 cells, 0-terminated) with their
 * attributes, as the views draw them. */
static int help_glyphs(help_glyph id, wchar_t *c, attr_t *at)
{
    const ui_glyphs *g = ui_gl();
    int n = 0;
#define PUT(ch, a) do { c[n] = (ch); at[n] = (a); n++; } while (0)
    switch (id) {
    case HG_USED:
        PUT(L'A', ui_letter_attr(UI_R_REQ0)); PUT(L'B', ui_letter_attr(UI_R_REQ1)); PUT(L'c', ui_letter_attr(UI_R_REQ2));
        break;
    case HG_SHARED:
        PUT(L'2', ui_attr(UI_R_REQ1) | A_REVERSE | A_BOLD);
        PUT(g->more_refs, ui_attr(UI_R_REQ1) | A_REVERSE | A_BOLD);
        break;
    case HG_CACHED: PUT(g->cached_blk, ui_attr(UI_R_CACHED)); break;
    case HG_FREE: PUT(g->free_blk, ui_attr(UI_R_FREE)); break;
    case HG_EMPTY: PUT(g->empty_blk, ui_attr(UI_R_REQ0)); break;
    case HG_NULL: PUT(g->null_blk, ui_attr(UI_R_NULL)); break;
    case HG_HIT: PUT(g->hit, ui_attr(UI_R_FLASH_HIT)); break;
    case HG_EVICT: PUT(g->evict, ui_attr(UI_R_FLASH_EVICT)); break;
    case HG_PREEMPT: PUT(g->preempt, ui_attr(UI_R_FLASH_PREEMPT)); break;
    case HG_LEVELS: for (int i = 1; i < 5; i++) PUT(g->level[i], ui_attr(UI_R_REQ0)); break;
    case HG_HILITE: PUT(L'A', ui_attr(UI_R_HILITE)); break;
    case HG_SELECTED: PUT(L'A', ui_letter_attr(UI_R_REQ0) | A_UNDERLINE | A_BOLD); break;
    case HG_TERMS: {
        static const struct { wchar_t l; ui_role r; } t[] = {
            { L'W', UI_R_TERM0 }, { L'A', UI_R_TERM1 }, { L'G', UI_R_TERM2 },
            { L'C', UI_R_TERM3 }, { L'N', UI_R_TERM4 }, { L'T', UI_R_TERM4 }, { L'K', UI_R_TERM5 },
        };
        for (unsigned i = 0; i < sizeof t / sizeof t[0]; i++) PUT(t[i].l, ui_letter_attr(t[i].r));
        break;
    }
    case HG_KV_FREE: PUT(g->kv_free, ui_attr(UI_R_TERM5)); break;
    case HG_UNUSED: PUT(g->bar_unused, ui_attr(UI_R_UNUSED)); break;
    case HG_BUDGET: PUT(g->vline, ui_attr(UI_R_KEY)); break;
    case HG_REQ_PREEMPTED: PUT(L'!', ui_attr(UI_R_NORMAL)); break;
    case HG_REQ_NEXT: PUT(L'<', ui_attr(UI_R_WARN)); break;
    case HG_HEAD_TP: PUT(g->head, ui_attr(UI_R_REQ0) | A_BOLD); break;
    case HG_SPARK: for (int i = 0; i < 8; i++) PUT(g->spark[i], ui_attr(UI_R_SERIES0)); break;
    case HG_PLOT:
        PUT(L'o', ui_attr(UI_R_SERIES0)); PUT(L'+', ui_attr(UI_R_SERIES1));
        PUT(L'x', ui_attr(UI_R_SERIES2)); PUT(L'*', ui_attr(UI_R_SERIES3));
        break;
    case HG_PLAY: PUT(g->play, ui_attr(UI_R_HEADER)); break;
    case HG_PAUSE: PUT(g->pause, ui_attr(UI_R_HEADER)); break;
    case HG_T_RESTART: PUT(L'|', ui_attr(UI_R_HEADER) | A_BOLD); break;
    case HG_T_PREEMPT: PUT(g->preempt, ui_attr(UI_R_FLASH_PREEMPT) | A_BOLD); break;
    case HG_T_EVICT: PUT(g->evict, ui_attr(UI_R_FLASH_EVICT)); break;
    case HG_T_HIT: PUT(g->hit, ui_attr(UI_R_FLASH_HIT)); break;
    case HG_T_FINISH: PUT(L'.', ui_attr(UI_R_HEADER)); break;
    case HG_T_NONE: PUT(g->hline, ui_attr(UI_R_HEADER) | A_DIM); break;
    case HG_MORE: PUT(g->arrow_up, ui_attr(UI_R_KEY)); PUT(g->arrow_down, ui_attr(UI_R_KEY)); break;
    case HG_LOG_ERROR: PUT(L'!', ui_attr(UI_R_ERROR)); break;
    case HG_FLAG_SEL:
        PUT(L'<', ui_attr(UI_R_SELECT)); PUT(L' ', ui_attr(UI_R_SELECT)); PUT(L'>', ui_attr(UI_R_SELECT));
        break;
    case HG_CUT: PUT(g->utf8 ? L'\u2026' : L'~', ui_attr(UI_R_NORMAL)); break;
    case HG_LIST: {
        const wchar_t *s = L"[x][~][ ]";
        for (int i = 0; s[i]; i++) PUT(s[i], ui_attr(UI_R_NORMAL));
        break;
    }
    default: break;
    }
#undef PUT
    c[n] = 0;
    return n;
}

int ui_chrome_help_line(int i, wchar_t *glyphs, int max, char *text, size_t len)
{
    if (i < 0 || i >= HELP_N || max < 10) return -1;
    attr_t at[10];
    int n = help_glyphs(help_lines[i].g, glyphs, at);
    snprintf(text, len, "%s", help_lines[i].text);
    return help_lines[i].g == HG_HEAD ? 1 : n > 0 ? 2 : 0;
}

/* One help line at row y: a heading, text, or the glyphs then what they mean. */
static void help_row(WINDOW *win, int y, int w, const help_line *l)
{
    if (l->g == HG_HEAD || l->g == HG_TEXT) {
        ui_puts(win, y, 2, w - 4, l->text, ui_attr(l->g == HG_HEAD ? UI_R_TITLE : UI_R_NORMAL));
        return;
    }
    wchar_t c[10];
    attr_t at[10];
    int n = help_glyphs(l->g, c, at), x = 4;
    for (int i = 0; i < n; i++) {
        ui_put(win, y, x, c[i], at[i]);
        x += ui_wcwidth(c[i]);
    }
    x = x < 14 ? 14 : x + 2;
    ui_puts(win, y, x, w - 2 - x, l->text, ui_attr(UI_R_NORMAL));
}

void ui_chrome_overlay(const ui_model *a, WINDOW *win)
{
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    if (a->overlay == UI_OV_HELP) {
        int rows = h - 2 > 0 ? h - 2 : 0;
        ui_view_state *st = a->st;
        int maxs = HELP_N - rows > 0 ? HELP_N - rows : 0;
        if (st->help_scroll > maxs) st->help_scroll = maxs;
        if (st->help_scroll < 0) st->help_scroll = 0;
        st->help_rows = rows;
        char right[48];
        if (maxs > 0) snprintf(right, sizeof right, "lines %d-%d of %d", st->help_scroll + 1, st->help_scroll + rows, HELP_N);
        else snprintf(right, sizeof right, "Esc closes");
        ui_box(win, "help", right, 1);
        for (int r = 0; r < rows && st->help_scroll + r < HELP_N; r++) help_row(win, 1 + r, w, &help_lines[st->help_scroll + r]);
        const ui_glyphs *g = ui_gl();
        if (st->help_scroll < maxs && w > 18) {
            ui_puts(win, h - 1, w - 16, 13, " more below ", ui_attr(UI_R_KEY));
            ui_put(win, h - 1, w - 4, g->arrow_down, ui_attr(UI_R_KEY));
        }
    } else if (a->overlay == UI_OV_LESSONS) {
        ui_box(win, "lessons", "Enter opens", 1);
        int n = a->nlessons;
        int rows = h - 2;
        ui_view_state *st = a->st;
        if (st->list_sel >= n) st->list_sel = n - 1;
        if (st->list_sel < 0) st->list_sel = 0;
        int first = a->st->list_sel >= rows ? a->st->list_sel - rows + 1 : 0;
        for (int r = 0; r < rows && first + r < n; r++) {
            const lsn_info *li = &a->lessons[first + r];
            int sel = first + r == a->st->list_sel;
            char line[256];
            snprintf(line, sizeof line, "%s %2d  %s%s", li->done ? "[x]" : li->step > 0 ? "[~]" : "[ ]",
                     li->number, li->title, li->available ? "" : "  (not written yet)");
            attr_t at = sel ? ui_attr(UI_R_SELECT) : li->available ? ui_attr(UI_R_NORMAL) : ui_attr(UI_R_DIM);
            if (sel) for (int x = 1; x < w - 1; x++) ui_put(win, 1 + r, x, L' ', at);
            ui_puts(win, 1 + r, 2, w - 4, line, at);
        }
    } else {
        char q[96];
        if (a->overlay == UI_OV_CONFIRM_RESET)
            snprintf(q, sizeof q, "Start lesson %d again from step 1?", a->lesson_current);
        else if (a->room_followers > 0)
            snprintf(q, sizeof q, "Quit kvlab? %d follower%s see%s the room close.", a->room_followers,
                     a->room_followers == 1 ? "" : "s", a->room_followers == 1 ? "s" : "");
        else
            snprintf(q, sizeof q, "Quit kvlab?");
        ui_box(win, a->overlay == UI_OV_CONFIRM_RESET ? "reset" : "quit", "", 1);
        ui_puts(win, 1, 2, w - 4, q, ui_attr(UI_R_NORMAL));
        ui_puts(win, h - 2, 2, w - 4, "y: yes   n or Esc: no", ui_attr(UI_R_KEY));
    }
}

static void footer_draw(const ui_view_ctx *c, WINDOW *win) { ui_chrome_footer(c, win); }

const ui_view_class ui_view_header = {
    .pane = UI_PANE_HEADER, .name = "header", .focusable = 0,
    .want_h = NULL, .draw = header_draw, .on_mouse = NULL,
};
const ui_view_class ui_view_footer = {
    .pane = UI_PANE_FOOTER, .name = "footer", .focusable = 0,
    .want_h = NULL, .draw = footer_draw, .on_mouse = NULL,
};
