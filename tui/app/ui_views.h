/* ui_views: the lesson app's views as one table of view classes, the way
 * htop has Panel and Meter classes and nvtop its per-vendor interfaces:
 * each view says how tall it wants to be for a width, draws itself and
 * takes the mouse. The layout (ui_layout.c, a pure function) places them
 * from their want_h; the app draws whatever is placed and dirty through
 * this table, and hands a click to the view under it.
 *
 * Every view draws from one context: the frame (kv_frame.h, the engine as
 * of this frame, captured once before drawing by app_frame_update), the
 * lesson's scene (lsn_scene.h: text, views wanted and their highlights,
 * plot, question, goal, flags) and the view model (ui_model.h: what the
 * learner selected, focus, flashes, typed text, the room and rewind state),
 * which the app fills before it draws. Views never call the engine or the
 * app (nothing in app_*): whatever they show of the engine or its start-up
 * plan is in the frame, so a frame from elsewhere (a past step, another
 * machine) draws the same way. */
#ifndef UI_VIEWS_H
#define UI_VIEWS_H

#include "kv_frame.h"
#include "ui_model.h"

#include <curses.h>

typedef struct ui_view_ctx {
    const kv_frame *f;   /* the engine as of this frame (f->has_engine 0: no server) */
    const lsn_scene *s;  /* what the lesson asks to show (never NULL: an empty scene
                            without a lesson); valid while the view draws */
    const ui_model *m;   /* the view model (selection, focus, flashes, typed text) */
    ui_view_state *st;   /* the figures views write as they draw (text scroll
                            limits, a clamped selection): m->st */
    ui_mouse_req *req;   /* on_mouse: what the click asks of the app (NULL otherwise) */
    ui_pane pane;        /* the view's slot in the layout */
    int focused;         /* Tab gave this view the focus (its border shows it) */
} ui_view_ctx;

typedef struct ui_view_class {
    ui_pane pane;        /* its slot in the layout (UI_PANE_*) */
    const char *name;    /* the lesson API's view name (lessons/API.md: "pool", ...) */
    int focusable;       /* Tab stops at it */
    /* Rows it would like, border included, at width w (columns); 0 = it
     * grows to fill what is left. NULL: 0. Header and footer are one row. */
    int (*want_h)(const ui_view_ctx *c, int w);
    /* Rows, border included, that show whole at width w what the lesson
     * highlights in this view (a log line, a metric): the layout gives it
     * at least that (ui_layout_req.must_h). NULL or 0: nothing highlighted. */
    int (*must_h)(const ui_view_ctx *c, int w);
    void (*draw)(const ui_view_ctx *c, WINDOW *win);
    /* A click or wheel at cell (y, x) of its window. Returns UI_PANE_BIT of
     * the panes to redraw (0: nothing happened). NULL: it ignores the mouse. */
    unsigned (*on_mouse)(const ui_view_ctx *c, int y, int x, ui_mouse m);
} ui_view_class;

/* The class of pane p, or NULL when out of range. */
const ui_view_class *ui_view_class_of(ui_pane p);

/* The context a view of pane p draws with for model m. */
ui_view_ctx ui_view_ctx_of(const ui_model *m, ui_pane p);

/* The scene's entry for view `name` ("pool", ...; lsn_view_names), or NULL. */
const lsn_view *ui_view_lesson(const ui_view_ctx *c, const char *name);

/* Does the scene highlight request id in view `name` (target "request")? */
int ui_view_req_highlighted(const ui_view_ctx *c, const char *name, int64_t req_id);

/* Fill req->want_h for every side pane from its class (the caller brings
 * the frame and the model up to date first). side_w: the width a side pane gets. */
void ui_views_want(const ui_model *m, int side_w, ui_layout_req *req);

/* Draw pane p into win through its class. */
void ui_views_draw(const ui_model *m, ui_pane p, WINDOW *win);

/* Hand a mouse event at screen cell (sy, sx) to the placed view under it
 * (m->lay). Returns UI_PANE_BIT of the panes it changed; *out says what
 * else the click asks the app to do (sel_req -2 and zeros: nothing). */
unsigned ui_views_mouse(const ui_model *m, int sy, int sx, ui_mouse ev, ui_mouse_req *out);

#endif
