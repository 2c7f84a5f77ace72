/* ui_style: semantic colour roles and glyph tables (style-anchors.md section 8,
 * rules 12 and 13). Views ask for a role, never a raw colour; every role that
 * tells a state apart also has its own glyph or attribute, so the screen
 * reads the same in 256 colours, 8 colours and none (NO_COLOR, --no-color).
 * Glyphs are UTF-8 block elements when the locale's codeset is UTF-8, else
 * (LANG=C, --ascii) plain ASCII. The terminal's default background is kept
 * (use_default_colors, background -1). */
#ifndef UI_STYLE_H
#define UI_STYLE_H

#include <wchar.h>

#include <curses.h>

typedef enum ui_role {
    UI_R_NORMAL = 0,
    UI_R_DIM,          /* secondary text; also A_DIM in mono */
    UI_R_TITLE,        /* pane titles */
    UI_R_BORDER,
    UI_R_BORDER_FOCUS, /* the pane that has the keys */
    UI_R_KEY,          /* key names in the footer and help */
    UI_R_HEADER,       /* the header row */
    UI_R_ERROR,        /* errors (red; bold in mono) */
    UI_R_WARN,
    UI_R_OK,           /* met goals, correct answers */
    UI_R_HILITE,       /* what the lesson highlights (reverse in mono) */
    UI_R_SELECT,       /* the selected row (reverse) */
    UI_R_INPUT,        /* the answer box */
    UI_R_FREE,         /* a free block never used or without a hash */
    UI_R_CACHED,       /* a free block still holding a cached hash */
    UI_R_NULL,         /* the null block 0 */
    UI_R_FLASH_HIT,    /* prefix-cache hit */
    UI_R_FLASH_EVICT,  /* cached block evicted */
    UI_R_FLASH_PREEMPT,/* a preemption victim's blocks */
    UI_R_FLASH_ALLOC,  /* freshly allocated */
    UI_R_TERM0,        /* memory terms: weights, activation, cudagraph, context, nccl (and non-torch), kv */
    UI_R_TERM1, UI_R_TERM2, UI_R_TERM3, UI_R_TERM4, UI_R_TERM5,
    UI_R_UNUSED,       /* memory left outside the utilization budget */
    UI_R_REQ0,         /* requests cycle through UI_NREQ_COLORS roles */
    UI_R_REQ1, UI_R_REQ2, UI_R_REQ3, UI_R_REQ4, UI_R_REQ5,
    UI_R_SERIES0,      /* plot series */
    UI_R_SERIES1, UI_R_SERIES2, UI_R_SERIES3,
    UI_R_HOST,         /* a block held in the host (CPU) tier */
    UI_R_FLASH_STORE,  /* blocks just copied GPU -> host */
    UI_R_FLASH_LOAD,   /* blocks just loaded host -> GPU */
    UI_R_COUNT
} ui_role;

#define UI_NREQ_COLORS 6

typedef enum ui_color_mode { UI_COLOR_NONE = 0, UI_COLOR_8, UI_COLOR_256 } ui_color_mode;

/* The glyph table. Each is one terminal cell wide. */
typedef struct ui_glyphs {
    int utf8;                 /* 1 = block elements; 0 = ASCII */
    wchar_t free_blk;         /* free block */
    wchar_t cached_blk;       /* free, still cached */
    wchar_t used_blk;         /* used (colour mode; mono uses the request letter) */
    wchar_t null_blk;
    wchar_t empty_blk;        /* reserved for a request's slab, holding no token yet (contiguous mode) */
    wchar_t hit, evict, preempt; /* flashes */
    wchar_t more_refs;        /* ref count > 9 */
    wchar_t host_blk;         /* a block in the host tier */
    wchar_t level[5];         /* zoomed-out fill: empty .. full */
    wchar_t spark[8];         /* sparkline levels, low to high */
    wchar_t bar_full;         /* memory bar cell (colour mode) */
    wchar_t bar_unused;       /* memory outside the budget */
    wchar_t kv_free;          /* the free part of a KV pool bar (never the pool's free or cached glyph) */
    wchar_t hline, vline;     /* separators */
    wchar_t arrow_up, arrow_down, arrow_right;
    wchar_t bullet;
    wchar_t head;             /* one KV head in the tp view */
    wchar_t play, pause;
} ui_glyphs;

/* Set up colours for mode (after initscr). UI_COLOR_NONE gives the
 * monochrome scheme. Returns the mode actually used (NONE when the terminal
 * has no colours). */
ui_color_mode ui_style_init(ui_color_mode want);

/* Pick the colour mode from the environment and the terminal: NONE when
 * no_color (flag) or $NO_COLOR is set or has_colors() is false; 256 when
 * COLORS >= 256; else 8. Call after initscr. */
ui_color_mode ui_style_detect(int no_color);

ui_color_mode ui_style_mode(void);

/* Attributes (colour pair + A_*) for a role. */
attr_t ui_attr(ui_role r);
/* The colour pair number of a role (0 in mono). */
short ui_pair(ui_role r);

/* Role of request id's colour. */
ui_role ui_req_role(long long req_id);
/* A letter for request id: A..Z then a..z, cycling. */
wchar_t ui_req_letter(long long req_id);
/* The attribute a letter that stands for a block (a request's, a memory
 * term's) is drawn with, over role r's: in colour reversed, so it reads as
 * a block of that colour with the letter in it; without colour as it is.
 * Nothing is told by colour alone: the letter says it in every mode. */
attr_t ui_letter_attr(ui_role r);

/* Choose the glyph table: UTF-8 when !force_ascii and the locale codeset is
 * UTF-8 (after setlocale(LC_ALL, "")). */
void ui_glyphs_init(int force_ascii);
const ui_glyphs *ui_gl(void);

/* Put one wide character with attributes at (y, x) of win. */
void ui_put(WINDOW *win, int y, int x, wchar_t c, attr_t a);

/* Write UTF-8 text at (y, x), at most maxw cells, with attributes;
 * characters the glyph table cannot show (ASCII mode) are transliterated
 * (x for multiplication, -- for dashes, ...). Returns the cells written. */
int ui_puts(WINDOW *win, int y, int x, int maxw, const char *utf8, attr_t a);

/* printf into ui_puts. */
int ui_printf(WINDOW *win, int y, int x, int maxw, attr_t a, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Decode UTF-8 text into wide characters the current glyph table can show
 * (transliterating in ASCII mode; invalid bytes become '?'). Writes at most
 * max-1 characters plus a terminating 0 into out; returns the count. */
int ui_decode(const char *utf8, wchar_t *out, int max);

/* Display width of one character (1 for anything unknown; 0 for combining). */
int ui_wcwidth(wchar_t c);

/* Draw a box around win with a title (and an optional right-side label) in
 * the top border; focus picks the border role. */
void ui_box(WINDOW *win, const char *title, const char *right, int focus);

/* Case-insensitive substring test (ASCII): 1 when needle occurs in hay. */
int ui_contains_ci(const char *hay, const char *needle);

#endif
