/* ui_style: see ui_style.h. */
#include "ui_style.h"

#include <ctype.h>
#include <langinfo.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ui_color_mode g_mode = UI_COLOR_NONE;
static attr_t g_attr[UI_R_COUNT];
static short g_pair[UI_R_COUNT];
static ui_glyphs g_gl;

/* One row per role: foreground in 256 colours, in 8 colours, the attribute
 * added in colour modes, the attribute used alone in mono. Background is the
 * terminal's own (-1) except where noted. Meaning never rests on gray or
 * dark blue alone (style-anchors.md section 9, complaint 2): every state
 * also has a glyph. */
struct role_spec {
    short fg256, fg8;
    attr_t color_attr, mono_attr;
};

static const struct role_spec specs[UI_R_COUNT] = {
    [UI_R_NORMAL]        = { -1, -1, A_NORMAL, A_NORMAL },
    [UI_R_DIM]           = { 245, -1, A_NORMAL, A_DIM },
    [UI_R_TITLE]         = { 75, COLOR_CYAN, A_BOLD, A_BOLD },
    [UI_R_BORDER]        = { 242, -1, A_NORMAL, A_NORMAL },
    [UI_R_BORDER_FOCUS]  = { 214, COLOR_YELLOW, A_BOLD, A_BOLD },
    [UI_R_KEY]           = { 214, COLOR_YELLOW, A_BOLD, A_BOLD },
    [UI_R_HEADER]        = { -1, -1, A_REVERSE, A_REVERSE },
    [UI_R_ERROR]         = { 196, COLOR_RED, A_BOLD, A_BOLD },
    [UI_R_WARN]          = { 214, COLOR_YELLOW, A_NORMAL, A_BOLD },
    [UI_R_OK]            = { 77, COLOR_GREEN, A_BOLD, A_BOLD },
    [UI_R_HILITE]        = { 220, COLOR_YELLOW, A_REVERSE, A_REVERSE },
    [UI_R_SELECT]        = { -1, -1, A_REVERSE, A_REVERSE },
    [UI_R_INPUT]         = { 229, COLOR_YELLOW, A_UNDERLINE, A_UNDERLINE },
    [UI_R_FREE]          = { 244, -1, A_NORMAL, A_NORMAL },
    [UI_R_CACHED]        = { 73, COLOR_CYAN, A_NORMAL, A_DIM },
    [UI_R_NULL]          = { 168, COLOR_MAGENTA, A_BOLD, A_BOLD },
    [UI_R_FLASH_HIT]     = { 46, COLOR_GREEN, A_BOLD | A_REVERSE, A_BOLD | A_REVERSE },
    [UI_R_FLASH_EVICT]   = { 208, COLOR_YELLOW, A_BOLD, A_BOLD },
    [UI_R_FLASH_PREEMPT] = { 196, COLOR_RED, A_BOLD | A_REVERSE, A_BOLD | A_REVERSE },
    [UI_R_FLASH_ALLOC]   = { 231, COLOR_WHITE, A_BOLD, A_BOLD },
    [UI_R_TERM0]         = { 33, COLOR_BLUE, A_NORMAL, A_NORMAL },     /* weights */
    [UI_R_TERM1]         = { 170, COLOR_MAGENTA, A_NORMAL, A_NORMAL }, /* activation */
    [UI_R_TERM2]         = { 178, COLOR_YELLOW, A_NORMAL, A_NORMAL },  /* cuda graphs */
    [UI_R_TERM3]         = { 250, COLOR_WHITE, A_NORMAL, A_NORMAL },   /* cuda context */
    [UI_R_TERM4]         = { 37, COLOR_CYAN, A_NORMAL, A_NORMAL },     /* nccl */
    [UI_R_TERM5]         = { 34, COLOR_GREEN, A_BOLD, A_BOLD },        /* kv cache */
    [UI_R_UNUSED]        = { 240, -1, A_NORMAL, A_DIM },
    [UI_R_REQ0]          = { 39, COLOR_CYAN, A_NORMAL, A_NORMAL },
    [UI_R_REQ1]          = { 208, COLOR_YELLOW, A_NORMAL, A_NORMAL },
    [UI_R_REQ2]          = { 141, COLOR_MAGENTA, A_NORMAL, A_NORMAL },
    [UI_R_REQ3]          = { 41, COLOR_GREEN, A_NORMAL, A_NORMAL },
    [UI_R_REQ4]          = { 203, COLOR_RED, A_NORMAL, A_NORMAL },
    [UI_R_REQ5]          = { 111, COLOR_BLUE, A_BOLD, A_NORMAL },
    [UI_R_SERIES0]       = { 39, COLOR_CYAN, A_BOLD, A_BOLD },
    [UI_R_SERIES1]       = { 208, COLOR_YELLOW, A_BOLD, A_NORMAL },
    [UI_R_SERIES2]       = { 141, COLOR_MAGENTA, A_BOLD, A_NORMAL },
    [UI_R_SERIES3]       = { 41, COLOR_GREEN, A_BOLD, A_NORMAL },
    [UI_R_HOST]          = { 135, COLOR_MAGENTA, A_NORMAL, A_NORMAL },
    [UI_R_FLASH_STORE]   = { 135, COLOR_MAGENTA, A_BOLD | A_REVERSE, A_BOLD | A_REVERSE },
    [UI_R_FLASH_LOAD]    = { 46, COLOR_GREEN, A_BOLD | A_REVERSE, A_BOLD | A_REVERSE },
};

ui_color_mode ui_style_detect(int no_color)
{
    const char *nc = getenv("NO_COLOR");
    if (no_color || (nc && nc[0]) || !has_colors()) return UI_COLOR_NONE;
    /* COLORS is only set by start_color(); ask terminfo directly. */
    int n = tigetnum("colors");
    return n >= 256 ? UI_COLOR_256 : UI_COLOR_8;
}

ui_color_mode ui_style_init(ui_color_mode want)
{
    if (want != UI_COLOR_NONE && !has_colors()) want = UI_COLOR_NONE;
    if (want != UI_COLOR_NONE) {
        start_color();
        short bg = -1;
        if (use_default_colors() != OK) bg = COLOR_BLACK;
        if (want == UI_COLOR_256 && COLORS < 256) want = UI_COLOR_8;
        for (int r = 0; r < UI_R_COUNT; r++) {
            short fg = want == UI_COLOR_256 ? specs[r].fg256 : specs[r].fg8;
            if (fg < 0 && bg == COLOR_BLACK) fg = COLOR_WHITE;
            short pair = (short)(r + 1);
            if (pair >= COLOR_PAIRS) { g_pair[r] = 0; g_attr[r] = specs[r].color_attr; continue; }
            init_pair(pair, fg, bg);
            g_pair[r] = pair;
            g_attr[r] = COLOR_PAIR(pair) | specs[r].color_attr;
        }
    } else {
        for (int r = 0; r < UI_R_COUNT; r++) {
            g_pair[r] = 0;
            g_attr[r] = specs[r].mono_attr;
        }
    }
    g_mode = want;
    return want;
}

ui_color_mode ui_style_mode(void) { return g_mode; }

attr_t ui_attr(ui_role r) { return (r >= 0 && r < UI_R_COUNT) ? g_attr[r] : A_NORMAL; }
short ui_pair(ui_role r) { return (r >= 0 && r < UI_R_COUNT) ? g_pair[r] : 0; }

ui_role ui_req_role(long long req_id)
{
    if (req_id < 0) return UI_R_NORMAL;
    return (ui_role)(UI_R_REQ0 + (int)(req_id % UI_NREQ_COLORS));
}

wchar_t ui_req_letter(long long req_id)
{
    if (req_id < 0) return L'?';
    int k = (int)(req_id % 52);
    return k < 26 ? (wchar_t)(L'A' + k) : (wchar_t)(L'a' + (k - 26));
}

attr_t ui_letter_attr(ui_role r) { return ui_attr(r) | (g_mode == UI_COLOR_NONE ? A_NORMAL : A_REVERSE); }

void ui_glyphs_init(int force_ascii)
{
    const char *cs = nl_langinfo(CODESET);
    int utf8 = !force_ascii && cs && (!strcmp(cs, "UTF-8") || !strcmp(cs, "utf8"));
    ui_glyphs g;
    memset(&g, 0, sizeof g);
    g.utf8 = utf8;
    if (utf8) {
        g.free_blk = L'\u00b7';    /* middle dot */
        g.cached_blk = L'\u2591';  /* light shade */
        g.used_blk = L'\u2588';    /* full block */
        g.null_blk = L'\u2205';    /* empty set */
        g.empty_blk = L'\u25e6';   /* white bullet */
        g.hit = L'\u2726';         /* four-pointed star */
        g.evict = L'\u00d7';
        g.preempt = L'!';
        g.more_refs = L'+';
        g.host_blk = L'\u2592';  /* medium shade */
        const wchar_t lv[5] = { L'\u00b7', L'\u2582', L'\u2584', L'\u2586', L'\u2588' };
        memcpy(g.level, lv, sizeof lv);
        const wchar_t sp[8] = { L'\u2581', L'\u2582', L'\u2583', L'\u2584',
                                L'\u2585', L'\u2586', L'\u2587', L'\u2588' };
        memcpy(g.spark, sp, sizeof sp);
        g.bar_full = L'\u2588';
        g.bar_unused = L'\u00b7';
        g.kv_free = L'\u2592';     /* medium shade */
        g.hline = L'\u2500';
        g.vline = L'\u2502';
        g.arrow_up = L'\u2191';
        g.arrow_down = L'\u2193';
        g.arrow_right = L'\u2192';
        g.bullet = L'\u2022';
        g.head = L'\u25a0';
        g.play = L'\u25b6';
        g.pause = L'\u2016';
    } else {
        g.free_blk = L'.';
        g.cached_blk = L':';
        g.used_blk = L'#';
        g.null_blk = L'@';
        g.empty_blk = L'o';
        g.hit = L'*';
        g.evict = L'x';
        g.preempt = L'!';
        g.more_refs = L'+';
        g.host_blk = L'h';
        const wchar_t lv[5] = { L'.', L'_', L'-', L'=', L'#' };
        memcpy(g.level, lv, sizeof lv);
        const wchar_t sp[8] = { L'_', L'.', L',', L'-', L'~', L'=', L'*', L'#' };
        memcpy(g.spark, sp, sizeof sp);
        g.bar_full = L'#';
        g.bar_unused = L'.';
        g.kv_free = L'k';
        g.hline = L'-';
        g.vline = L'|';
        g.arrow_up = L'^';
        g.arrow_down = L'v';
        g.arrow_right = L'>';
        g.bullet = L'*';
        g.head = L'H';
        g.play = L'>';
        g.pause = L'=';
    }
    g_gl = g;
}

const ui_glyphs *ui_gl(void) { return &g_gl; }

void ui_put(WINDOW *win, int y, int x, wchar_t c, attr_t a)
{
    cchar_t cc;
    wchar_t s[2] = { c, 0 };
    setcchar(&cc, s, a & ~A_COLOR, (short)PAIR_NUMBER(a), NULL);
    mvwadd_wch(win, y, x, &cc);
}

int ui_wcwidth(wchar_t c)
{
    if (c < 0x80) return c >= 0x20 ? 1 : 0;
    int w = wcwidth(c);
    return w < 0 ? 1 : w;
}

/* ASCII stand-ins for the characters lesson text uses. */
static const char *translit(unsigned cp)
{
    switch (cp) {
    case 0x00d7: return "x";     /* multiplication sign */
    case 0x2014: return "--";    /* em dash */
    case 0x2013: return "-";     /* en dash */
    case 0x2212: return "-";     /* minus */
    case 0x2018: case 0x2019: return "'";
    case 0x201c: case 0x201d: return "\"";
    case 0x2026: return "...";
    case 0x2192: return "->";
    case 0x2190: return "<-";
    case 0x2248: return "~";
    case 0x2264: return "<=";
    case 0x2265: return ">=";
    case 0x00b7: case 0x2022: return "*";
    case 0x00a0: case 0x2009: case 0x202f: return " ";
    case 0x00b2: return "^2";
    case 0x00b5: case 0x03bc: return "u";
    default: return NULL;
    }
}

/* Decode one UTF-8 sequence; returns bytes used (>= 1), *cp = U+FFFD on error. */
static int utf8_next(const unsigned char *s, unsigned *cp)
{
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int n = c >= 0xf0 && c < 0xf8 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (n == 0 || c >= 0xf8) { *cp = 0xfffd; return 1; }
    unsigned v = c & (0x3fu >> (n - 1));
    for (int i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) { *cp = 0xfffd; return i; }
        v = (v << 6) | (s[i] & 0x3f);
    }
    *cp = v;
    return n;
}

int ui_decode(const char *utf8, wchar_t *out, int max)
{
    int n = 0;
    const unsigned char *s = (const unsigned char *)(utf8 ? utf8 : "");
    if (max <= 0) return 0;
    while (*s && n < max - 1) {
        unsigned cp;
        s += utf8_next(s, &cp);
        if (cp == '\n' || cp == '\t') { out[n++] = (wchar_t)cp; continue; }
        if (cp < 0x20 || cp == 0x7f || (cp >= 0x80 && cp < 0xa0)) { out[n++] = L' '; continue; }
        if (cp < 0x80 || (g_gl.utf8 && cp != 0xfffd)) { out[n++] = (wchar_t)cp; continue; }
        const char *t = translit(cp);
        if (!t) t = "?";
        for (; *t && n < max - 1; t++) out[n++] = (wchar_t)*t;
    }
    out[n] = 0;
    return n;
}

int ui_puts(WINDOW *win, int y, int x, int maxw, const char *utf8, attr_t a)
{
    wchar_t buf[1024];
    int n = ui_decode(utf8, buf, (int)(sizeof buf / sizeof buf[0]));
    int used = 0;
    int total = 0;
    for (int i = 0; i < n; i++) total += ui_wcwidth(buf[i] == L'\n' || buf[i] == L'\t' ? L' ' : buf[i]);
    /* Text that does not fit ends in an ellipsis, so a cut is never silent
     * (trailing spaces may be dropped without one). */
    int cut = 0;
    if (total > maxw && maxw >= 2) {
        int t = n;
        while (t > 0 && buf[t - 1] == L' ') t--;
        int tw = 0;
        for (int i = 0; i < t; i++) tw += ui_wcwidth(buf[i] == L'\n' || buf[i] == L'\t' ? L' ' : buf[i]);
        if (tw > maxw) cut = 1;
    }
    int room = cut ? maxw - 1 : maxw;
    for (int i = 0; i < n; i++) {
        wchar_t c = buf[i];
        if (c == L'\n' || c == L'\t') c = L' ';
        int w = ui_wcwidth(c);
        if (w == 0) continue;
        if (used + w > room) break;
        ui_put(win, y, x + used, c, a);
        used += w;
    }
    if (cut) {
        ui_put(win, y, x + used, ui_gl()->utf8 ? L'\u2026' : L'~', a);
        used++;
    }
    return used;
}

int ui_printf(WINDOW *win, int y, int x, int maxw, attr_t a, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return ui_puts(win, y, x, maxw, buf, a);
}

void ui_box(WINDOW *win, const char *title, const char *right, int focus)
{
    int h, w;
    getmaxyx(win, h, w);
    if (h < 2 || w < 4) return;
    attr_t b = ui_attr(focus ? UI_R_BORDER_FOCUS : UI_R_BORDER);
    wattr_set(win, b & ~A_COLOR, (short)PAIR_NUMBER(b), NULL);
    if (g_gl.utf8) box(win, 0, 0);
    else wborder(win, '|', '|', '-', '-', '+', '+', '+', '+');
    wattr_set(win, A_NORMAL, 0, NULL);
    int x = 2;
    if (title && *title) {
        ui_put(win, 0, 1, L' ', b);
        x += ui_puts(win, 0, 2, w - 6, title, ui_attr(focus ? UI_R_BORDER_FOCUS : UI_R_TITLE));
        ui_put(win, 0, x, L' ', b);
    }
    if (right && *right) {
        wchar_t buf[128];
        int n = ui_decode(right, buf, 128), rw = 0;
        for (int i = 0; i < n; i++) rw += ui_wcwidth(buf[i]);
        int rx = w - 2 - rw;
        if (rx > x + 1) {
            ui_put(win, 0, rx - 1, L' ', b);
            ui_puts(win, 0, rx, rw, right, ui_attr(UI_R_DIM));
            ui_put(win, 0, rx + rw, L' ', b);
        }
    }
}

int ui_contains_ci(const char *hay, const char *needle)
{
    if (!hay || !needle) return 0;
    size_t n = strlen(needle);
    if (n == 0) return 1;
    for (; *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] && tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i])) i++;
        if (i == n) return 1;
    }
    return 0;
}

