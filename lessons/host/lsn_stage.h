/* lsn_stage: the narration, views and plot a lesson builds with lab.page,
 * lab.say, lab.show, lab.highlight and lab.plot (lessons/API.md, "Views"),
 * kept as the public structs of lsn_scene.h point at them. Plain C.
 *
 * Everything a lesson adds here is C memory outside its Lua heap, so each
 * part has a cap (below); a call over a cap returns -1 and the lab API turns
 * that into a Lua error naming the cap. */
#ifndef LSN_STAGE_H
#define LSN_STAGE_H

#include <stddef.h>

#include "lsn_scene.h"

#define LSN_PAGE_MAX_BYTES  (1u << 20)  /* narration on one page */
/* A page title's characters that the text pane's border shows whole at 80
 * columns beside the side panes (40 columns wide, less ui_box's 6);
 * tests/unit/test_ui_layout.c holds the layout to it. */
#define LSN_PAGE_TITLE_MAX  34
#define LSN_MAX_HIGHLIGHTS  256         /* per view */
#define LSN_MAX_IDS         1024        /* ids per highlight */
#define LSN_MAX_OPTIONS     32          /* per view */
#define LSN_MAX_SERIES      32
#define LSN_MAX_POINTS      100000      /* per series */

/* A growing NUL-terminated string. */
typedef struct lsn_strbuf {
    char *s;
    size_t len, cap;
} lsn_strbuf;

void lsn_sb_clear(lsn_strbuf *b);
/* Append n bytes. Returns 0, or -1 when out of memory (b unchanged). */
int lsn_sb_add(lsn_strbuf *b, const char *s, size_t n);
void lsn_sb_free(lsn_strbuf *b);

/* Make lesson text safe for a terminal, in place: C0 control bytes (but a
 * newline when keep_newlines; a tab becomes a space), DEL and the C1
 * controls (UTF-8 0xC2 0x80..0x9F, which include CSI) become spaces, so no
 * escape sequence from a lesson or a manifest reaches the screen or stdout. */
void lsn_text_clean(char *s, size_t n, int keep_newlines);

typedef struct lsn_stage_view {
    lsn_view pub;
    lsn_highlight *hl;
    int nhl, caphl;
    char **keys, **vals;
    int nopt;
} lsn_stage_view;

typedef struct lsn_stage_line {
    char *name;
    double *x, *y;
    int n, cap;
} lsn_stage_line;

typedef struct lsn_stage {
    lsn_strbuf text;          /* the current page */
    char page_title[256];
    int page_no;
    lsn_stage_view views[LSN_NVIEWS];
    lsn_view pub_views[LSN_NVIEWS];
    int plot_on;
    char *plot_title, *plot_xlabel, *plot_ylabel;
    int plot_logy;
    lsn_stage_line *series;
    int nseries;
    lsn_series *pub_series;
    lsn_plot pub_plot;
    int split_on;             /* a recorded split belongs to this page */
    lsn_split split;
    lsn_split_frame *split_frames;
} lsn_stage;

/* Empty stage: no text, only the text view shown, no plot. Also frees what
 * a previous lesson left (st must be zeroed or a stage already). */
void lsn_stage_reset(lsn_stage *st);
void lsn_stage_free(lsn_stage *st);

/* lab.page(title): a new, empty page. */
void lsn_stage_page(lsn_stage *st, const char *title);
/* Append a paragraph (separated from the last by a blank line). Returns 0,
 * or -1 when the page would pass LSN_PAGE_MAX_BYTES or memory ran out. */
int lsn_stage_say(lsn_stage *st, const char *s, size_t len);

/* Keep a recorded split for this page (lab.split{show = true}): frames[0..n)
 * are copied (n <= LSN_SPLIT_FRAMES), link too. Replaces the page's last
 * one; a new page or lesson drops it. Returns 0, or -1 out of memory. */
int lsn_stage_split(lsn_stage *st, const lsn_split *sp, const lsn_split_frame *frames, int n);
/* The page's split, or NULL. */
const lsn_split *lsn_stage_get_split(const lsn_stage *st);

/* The view named name, or NULL if it is not a view name. */
lsn_stage_view *lsn_stage_view_get(lsn_stage *st, const char *name);
const lsn_stage_view *lsn_stage_view_find(const lsn_stage *st, const char *name);
/* Returns 0, or -1 over LSN_MAX_OPTIONS / out of memory. */
int lsn_stage_view_option(lsn_stage_view *v, const char *key, const char *val);
/* Returns 0, or -1 over LSN_MAX_HIGHLIGHTS or LSN_MAX_IDS / out of memory. */
int lsn_stage_view_highlight(lsn_stage_view *v, const char *target, const int64_t *ids, int nids,
                             const char *note);
void lsn_stage_view_unhighlight(lsn_stage_view *v);
/* lab.focus: v takes the focus (and is shown); every other view loses it. */
void lsn_stage_focus(lsn_stage *st, lsn_stage_view *v);

/* The views as one array in lsn_view_names order (refreshed copies). */
const lsn_view *lsn_stage_views(lsn_stage *st);

/* lab.plot{...}: clear the plot and set its labels (any may be NULL). */
void lsn_stage_plot(lsn_stage *st, const char *title, const char *xlabel, const char *ylabel, int logy);
void lsn_stage_plot_clear(lsn_stage *st);
/* Index of the series called name, added if new; -1 over LSN_MAX_SERIES or
 * out of memory. */
int lsn_stage_series(lsn_stage *st, const char *name);
/* Append a point to series si (0-based). Returns 0, or -1 for a bad index,
 * LSN_MAX_POINTS reached or no memory. */
int lsn_stage_plot_add(lsn_stage *st, int si, double x, double y);
/* The public plot (refreshed), or NULL when none was set up. */
const lsn_plot *lsn_stage_get_plot(lsn_stage *st);

#endif
