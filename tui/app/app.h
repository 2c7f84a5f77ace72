/* app: the lesson app's shared state. app_main.c owns it (terminal set-up,
 * the main loop, keys, the event feed); the ui_*.c views (ui_views.h) draw
 * from `frame`, the engine as of this frame, and `model`, the view model
 * (ui_model.h) filled from this state before each draw; they never see
 * this struct nor call anything in app_*. Views change nothing in the engine or the lesson: flag
 * edits go through lsn_set_flag, exactly as a lesson's own changes do. */
#ifndef APP_H
#define APP_H

#include <stdint.h>

#include "kv_engine.h"
#include "kv_frame.h"
#include "kv_plan.h"
#include "app_stats.h"
#include "lsn.h"
#include "ui_layout.h"
#include "ui_model.h"
#include "ui_style.h"

#include <curses.h>
#include <panel.h>

#define APP_MAX_HINTS UI_MAX_HINTS
#define APP_INPUT_MAX 128

/* Flash kinds a block can show for a moment (driven by engine events). */
enum { APP_FL_NONE = UI_FL_NONE, APP_FL_ALLOC = UI_FL_ALLOC, APP_FL_HIT = UI_FL_HIT, APP_FL_EVICT = UI_FL_EVICT,
       APP_FL_FREE = UI_FL_FREE, APP_FL_PREEMPT = UI_FL_PREEMPT };

typedef struct app {
    /* Options. */
    int fps;                 /* frames per second while animating (--fps) */
    int force_ascii;         /* --ascii */
    int no_color;            /* --no-color */

    lsn_runner *lsn;         /* the lesson runner (owns the engine) */
    struct app_room *room;   /* classroom mode (app_room.h), NULL when off */
    struct app_rewind *rw;   /* replaying a past step of the lesson's history (app_rewind.h) */
    uint64_t history_bytes;  /* bound on the lesson history (lsn_set_history_bytes), 0 = the default (a follower: small) */
    kv_engine *eng;          /* lsn_engine(); NULL when no server runs (not for views) */
    const kv_plan *plan;     /* last start-up plan (also after a failed start), or NULL (not for views) */
    kv_frame frame;          /* what every view draws: eng and plan as of this frame (app_frame_update) */
    ui_model model;          /* and the view model (app_model_update) */
    ui_view_state vst;       /* the views' own figures: text scroll, selections (ui_model.h) */

    /* Screen. */
    int rows, cols;
    ui_layout lay;
    WINDOW *win[UI_PANE_COUNT];
    PANEL *pan[UI_PANE_COUNT];
    unsigned dirty;          /* UI_PANE_BIT of panes to redraw */
    int view_focus;          /* pane given priority by Tab (-1 = the lesson's choice) */
    int key_focus;           /* UI_PANE_FLAGS when the flags pane has the keys, else -1 */

    /* Run state. */
    int paused;              /* space: stop ticking the lesson and the engine */
    double speed;            /* +/-: multiplies the lesson's step rate */
    double now;              /* monotonic seconds */

    /* Text view. */
    int loading;             /* lesson number being opened (first frame), 0 = none */
    int input_active;        /* the answer box has the keys */
    char input[APP_INPUT_MAX];
    int input_len;
    char verdict[512];       /* last answer's verdict message */
    char recap[1024];        /* last right answer + explanation, shown until n/p */
    int recap_page;          /* lsn_page_number when it was answered */
    int verdict_kind;        /* lsn_verdict_kind, -1 = none */
    char qkey[600];          /* the question/goal the hints and verdict belong to */
    char hints[APP_MAX_HINTS][UI_HINT_MAX];
    int nhints;
    char status[256];        /* one-line message for the learner (flag errors, notices) */
    char notice[4608];       /* a runner notice too long for the header (a failed save and why), */
    int notice_page;         /* shown whole at the top of the text view while this page lasts */
    int status_role;         /* ui_role for it */
    double status_until;
    int status_page;         /* >= 0: the page it is about (shown only while that page is); -1: any */
    int status_engine;       /* it tells an event of the running engine (a preemption): gone with that engine */

    /* Flags view. */
    int flag_editing;        /* typing a value */
    char flag_buf[APP_INPUT_MAX];
    int flag_len;
    int flag_selall;         /* the pre-filled value is selected: typing replaces it */

    /* Event feed and animation. */
    uint64_t last_seq;       /* newest engine event consumed */
    int32_t nflash;          /* size of the flash arrays (num_blocks) */
    uint8_t *flash_kind;     /* per block */
    double *flash_until;     /* per block, app->now when the flash ends */
    int flashing;            /* some flash is still running */
    int host_flash;          /* host tier flash: UI_FL_STORE / UI_FL_LOAD (ui_model.h) */
    int64_t host_flash_blocks;
    double host_flash_until;
    const void *split_key;   /* the recorded split being played (its frames), NULL none */
    double split_clock;      /* seconds of it played (at the app's speed, not while paused) */
    int split_frame;         /* its frame shown now (ui_model.split_frame), -1 none */
    int64_t host_stored_seen, host_loaded_seen; /* the tier's counters as last fed */
    app_stats stats;         /* vLLM's periodic stats line, every interval of the learner's time */
    int64_t victim;          /* last preempted request (-1 none) */
    double victim_until;
    double startup_next;     /* when the next start-up log line appears */
    int startup_shown;       /* visible plan log lines revealed so far */
    int64_t sel_req;         /* request whose block table is shown (t), -1 none */

    /* The memory view's second plan (v): a copy of the frame's plan kept
     * for comparing against the next ones, allocated at the first v. */
    kv_plan *vs_plan;
    int vs_kept;             /* 1: vs_plan is drawn beside the frame's plan */

    /* Overlays. */
    int overlay;             /* APP_OV_* */
    double list_typed_at;    /* when a digit was last typed in the list (two-digit numbers) */
} app;

enum { APP_OV_NONE = UI_OV_NONE, APP_OV_HELP = UI_OV_HELP, APP_OV_CONFIRM_RESET = UI_OV_CONFIRM_RESET,
       APP_OV_LESSONS = UI_OV_LESSONS, APP_OV_CONFIRM_QUIT = UI_OV_CONFIRM_QUIT };

/* ---- app_main.c --------------------------------------------------------- */

double app_now(void);                                   /* monotonic seconds */
/* A one-line message in the header (and the flags view) for a few seconds. */
void app_status(app *a, ui_role role, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Side panes to place: what the lesson shows, plus the flags while they have
 * the keys and the requests while a block table is asked for. */
unsigned app_shown_panes(const app *a, int *lesson_focus);
/* Recompute the layout; rebuild windows when a rectangle moved (force: always). */
void app_relayout(app *a, int force);
void app_open_overlay(app *a, int kind);               /* APP_OV_*; NONE closes */
void app_close_overlay(void);                          /* drop its window (resize) */
/* React to LSN_CH_* bits from the runner: redraw, relayout, new server. */
void app_lesson_changed(app *a, unsigned ch);
void app_load_lesson(app *a, int number, int resume);
/* Open lesson `number` replayed to `step` with someone else's inputs
 * (classroom follower: lsn_replay, stopping inside an animation once the
 * step has started step_starts servers). */
void app_replay_lesson(app *a, int number, int step, const lsn_input *in, int nin, int step_starts);

/* Fill a->model, the view model, from the app's state, the room and the
 * rewind (call after app_frame_update, before handing it to a view). */
void app_model_update(app *a);
/* Draw pane p into win from a->frame as it is (the model brought up to date first). */
void app_draw_view(app *a, ui_pane p, WINDOW *win);
/* A mouse event at screen cell (sy, sx): the view under it takes it (the
 * frame and model brought up to date first) and the app does what the click
 * asks (select a request, flags keys, relayout). */
void app_mouse_at(app *a, int sy, int sx, ui_mouse m);

/* ---- app_keys.c --------------------------------------------------------- */

/* One key (or KEY_MOUSE / KEY_RESIZE); sets *quit to leave. */
void app_handle_key(app *a, int ch, int *quit);

/* ---- app_feed.c --------------------------------------------------------- */

void app_reset_flashes(app *a);     /* a new engine: no flashes, arrays sized to its pool; the frame forgets the old one */
/* Bring a->frame up to date with the engine and plan (a capture only when
 * the engine moved, the plan or the views' needs changed since the last). */
void app_frame_update(app *a);
void app_feed_events(app *a);       /* consume the engine's new events */
/* Flash what e's events after seq since did (only step only_step's when >= 0),
 * each flash held `hold` seconds when hold > 0 (a replayed step). */
void app_feed_from(app *a, const kv_engine *e, uint64_t since, int64_t only_step, double hold);
void app_update_flashing(app *a);   /* end flashes whose time is over */

/* Start-up replay. The log view reveals the plan's log lines one by one,
 * up to the phase a lesson asked for (view option "upto"); the memory bar
 * shows the terms of the phases reached so far. */
int app_line_phase(const char *line);        /* 0 init .. 7 ready */
int app_log_visible(const app *a, int i);    /* plan log line i is within "upto" */
int app_log_target(const app *a);            /* visible plan log lines */
int app_engine_log_visible(const app *a);    /* the engine's own lines may show */
unsigned app_mem_terms(const app *a);
int app_tp_reachable(const app *a);          /* tp > 1: Tab reaches the ranks view even if the lesson hides it */        /* bit t: memory term t (UI_MEM_T_*) shown */
int app_starting(const app *a);              /* the replay is still revealing lines */

#endif
