/* ui_chrome: everything around the views: the header row (lesson, step,
 * run state), the key footer, the "enlarge the terminal" screen, and the
 * overlays drawn on panels above the views (? help with the glyph legend,
 * the lesson list, confirmations). */
#ifndef UI_CHROME_H
#define UI_CHROME_H

#include "ui_views.h"

/* The header row and the key footer as view classes (one row each). */
extern const ui_view_class ui_view_header;
extern const ui_view_class ui_view_footer;

/* The key footer (or, while one lasts, a status message too long for the header). */
void ui_chrome_footer(const ui_view_ctx *c, WINDOW *win);

/* 1 when the status message is drawn on the footer row this frame: it does
 * not fit the header beside the lesson and the run state at a->cols. */
int ui_chrome_status_in_footer(const ui_view_ctx *c);

/* The replay timeline in the header at cols columns while step pos of
 * present is shown: how many cells it has (0: no room for one), and the
 * steps [*from, *to) of the history's first..present that cell c covers.
 * The app fills the model's marks with them (kv_history_marks_between);
 * pure arithmetic, no history. */
int ui_chrome_timeline_cells(int cols, int64_t pos, int64_t present);
void ui_chrome_timeline_span(int64_t first, int64_t present, int cells, int c, int64_t *from, int64_t *to);

/* The whole-terminal screen shown below UI_MIN_COLS x UI_MIN_ROWS. */
void ui_chrome_small(const ui_model *m, WINDOW *win);

/* Size an overlay wants for the current overlay kind, within rows x cols. */
void ui_chrome_overlay_size(const ui_model *m, int rows, int cols, int *h, int *w);
/* Draw the current overlay (m->overlay); the lesson list clamps
 * m->st->list_sel to the lessons there are, the help m->st->help_scroll to
 * its lines (and notes the rows it had in m->st->help_rows). */
void ui_chrome_overlay(const ui_model *m, WINDOW *win);

/* The help's lines (keys, then a legend line per glyph the views draw). */
int ui_chrome_help_lines(void);
/* Help line i: its glyphs as drawn now (glyph table and colour mode;
 * 0-terminated, max >= 10) and its text. Returns 1 for a heading, 2 for a
 * legend line (glyphs, then what they mean), 0 for plain text, -1 when i
 * is out of range. */
int ui_chrome_help_line(int i, wchar_t *glyphs, int max, char *text, size_t len);

#endif
