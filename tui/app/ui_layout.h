/* ui_layout: where each pane of the lesson app goes, as a pure function of
 * the terminal size and what the lesson wants shown. No ncurses in here, so
 * tests/unit/test_ui_layout.c can check it over a grid of sizes (the nvtop
 * habit, style-anchors.md section 11: guard every division, test the grid).
 *
 * Screen: row 0 is the header, the last row the key footer, everything in
 * between the body. The lesson text takes the left column of the body; the
 * other panes the lesson shows stack on the right (two columns of panes on
 * wide terminals). A pane that does not fit even at its minimum height is
 * dropped (reported in ui_layout.dropped) so the app can say "Tab: more". */
#ifndef UI_LAYOUT_H
#define UI_LAYOUT_H

#define UI_MIN_COLS 80   /* below this the app shows "enlarge the terminal" */
#define UI_MIN_ROWS 24

typedef enum ui_pane {
    UI_PANE_HEADER = 0,  /* 1 row: lesson, step, run state */
    UI_PANE_FOOTER,      /* 1 row: keys */
    UI_PANE_TEXT,        /* lesson narration, question, goal */
    UI_PANE_MEMORY,      /* the per-GPU memory subtraction as a stacked bar */
    UI_PANE_POOL,        /* block pool grid */
    UI_PANE_REQUESTS,    /* running / waiting queues and a block table */
    UI_PANE_TP,          /* one pool and memory bar per tensor-parallel rank */
    UI_PANE_PLOT,        /* line plot from the lesson */
    UI_PANE_FLAGS,       /* vLLM flags the lesson lets the learner change */
    UI_PANE_METRICS,     /* vLLM metrics with sparklines */
    UI_PANE_LOG,         /* start-up log */
    UI_PANE_COUNT
} ui_pane;

#define UI_PANE_BIT(p) (1u << (unsigned)(p))

typedef struct ui_rect {
    int y, x;   /* top-left cell, 0-based */
    int h, w;   /* rows and columns; 0 x 0 = not placed */
} ui_rect;

typedef struct ui_layout_req {
    unsigned shown;             /* UI_PANE_BIT of every side pane to place (MEMORY..LOG);
                                   header, footer and text are always placed */
    int focus;                  /* side pane placed first and given the most room, or -1 */
    int want_h[UI_PANE_COUNT];  /* preferred height incl. border (rows); 0 = grows to fill */
    int must_h[UI_PANE_COUNT];  /* rows incl. border that show what the lesson highlights in the pane
                                   whole (0: nothing highlighted): placed right after the focused pane,
                                   never below this while the column holds it (others drop first) */
} ui_layout_req;

typedef struct ui_layout {
    int rows, cols;             /* the terminal size it was computed for */
    int too_small;              /* 1: below UI_MIN_COLS x UI_MIN_ROWS, nothing placed */
    unsigned placed;            /* UI_PANE_BIT of every pane with a rectangle */
    unsigned dropped;           /* shown panes left out for lack of room */
    ui_rect r[UI_PANE_COUNT];   /* rectangles; {0,0,0,0} when not placed */
} ui_layout;

/* Smallest height a side pane is given (border included), in rows. */
int ui_layout_min_h(ui_pane p);

/* Compute the layout for a rows x cols terminal. Any size is accepted
 * (including 0 or negative: too_small). Placed rectangles lie inside the
 * screen and never overlap; the header, footer and text pane are always
 * placed when the terminal is large enough. Deterministic, no allocation. */
void ui_layout_compute(int rows, int cols, const ui_layout_req *req, ui_layout *out);

/* Name of a pane ("text", "pool", ...; the lesson API's view names). */
const char *ui_layout_pane_name(ui_pane p);

#endif
