/* ui_fit: is what a page points at on screen? The panes a lesson's scene
 * asks for and the one it focuses (what the app lays out, app_main.c), the
 * start-up log lines a view option reveals, and the rule `kvlab check`
 * applies at every wait for the learner (issue 21: "a page's highlighted
 * view is on screen at 80x24"): at each terminal size the app supports,
 * every view the page focuses or highlights is placed by the layout
 * (ui_layout.c) with the rows that show what it highlights whole. The
 * layout is computed as the app computes it, from the view classes' heights
 * (ui_views.h) for the engine and plan of the moment; nothing is drawn, so
 * the rule runs without a terminal (no initscr). The rule itself, which
 * reads the runner's scene, engine and plan, is `kvlab check`'s
 * (fit_rule in tui/cli/cmd_lessons.c): this file computes from what it is
 * handed and queries no runner or engine, like every ui_* file. */
#ifndef UI_FIT_H
#define UI_FIT_H

#include <stddef.h>

#include "kv_frame.h"
#include "kv_plan.h"
#include "lsn.h"
#include "lsn_scene.h"

/* Terminal sizes the rule checks, smallest first (UI_MIN_COLS x
 * UI_MIN_ROWS, two common ones, and a wide one with two columns of panes). */
#define UI_FIT_NSIZES 4
extern const int ui_fit_sizes[UI_FIT_NSIZES][2]; /* {cols, rows} */

#define UI_FIT_NPHASES 8 /* init, load, profile, cudagraph, kv, check, allocate, ready */

/* Rank of a start-up phase name ("init" 0 .. "ready" 7, lessons/API.md,
 * lab.log); NULL or unknown: the last. */
int ui_fit_phase_rank(const char *phase);

/* Plan log line i is within what view `view` ("log", "memory") of scene s
 * reveals (its option "upto", a phase; none: every line). 0 out of range. */
int ui_fit_log_visible(const lsn_scene *s, const kv_plan *p, const char *view, int i);

/* UI_PANE_BIT of every side pane scene s shows (lab.show), and in *focus the
 * pane it focuses (lab.focus), or -1. s may be NULL (nothing shown). */
unsigned ui_fit_shown(const lsn_scene *s, int *focus);

/* The rule at one size: lay out scene s over frame f (the engine and plan
 * of the moment) at cols x rows as the app does with no key pressed, and
 * check every pane s focuses or highlights: shown, placed, and at least as
 * tall as its minimum (ui_layout_min_h) and as the rows its highlight needs
 * whole (ui_view_class.must_h; flags: every highlighted flag's row and the
 * hint under them). Returns 0, or -1 with one line in msg. */
int ui_fit_page_at(const lsn_scene *s, const kv_frame *f, int cols, int rows, char *msg, size_t msglen);

#endif
