/* ui_model: what the views draw besides the frame and the scene: a small
 * view model the app fills once per frame (app_model_update in app_main.c)
 * from its own state, the lesson runtime, the room and the rewind. The
 * views read it, call nothing in app_* and query no runner, engine or
 * history (it holds none): calls go one way, app -> views (docs/DESIGN.md).
 *
 * What a view changes as it draws or takes a click goes to ui_view_state
 * (its own scroll and selection figures, kept by the app between frames)
 * or to ui_mouse_req (what the click asks the app to do). */
#ifndef UI_MODEL_H
#define UI_MODEL_H

#include <stdint.h>

#include "kv_frame.h"
#include "kv_plan.h"
#include "lsn.h"
#include "ui_layout.h"
#include "ui_style.h"

#define UI_MAX_HINTS 8
#define UI_HINT_MAX 512
#define UI_MAX_LESSONS LSN_MAX_LESSONS /* rows of the lesson list the model holds: every number a course may have (lsn_progress.h) */
#define UI_RW_MAX_CELLS 1024  /* replay timeline cells the model holds (a wider header draws fewer marks) */

/* Overlays drawn above the views. */
enum { UI_OV_NONE = 0, UI_OV_HELP, UI_OV_CONFIRM_RESET, UI_OV_LESSONS, UI_OV_CONFIRM_QUIT };

/* Flash kinds a block can show for a moment (driven by engine events). */
enum { UI_FL_NONE = 0, UI_FL_ALLOC, UI_FL_HIT, UI_FL_EVICT, UI_FL_FREE, UI_FL_PREEMPT, UI_FL_STORE, UI_FL_LOAD };

/* Figures the views keep between frames: written as they draw (scroll
 * limits, a clamped selection) and by the keys (scrolling). */
typedef struct ui_view_state {
    int text_scroll;         /* first narration line shown */
    int text_lines;          /* narration lines at the last draw (for scrolling limits) */
    int text_rows;           /* rows the narration had at the last draw */
    int last_page;           /* lsn_page_number at the last draw */
    int text_follow;         /* scroll to the newest text at the next draw */
    int flag_sel;            /* selected row of the flags view */
    int list_sel;            /* lesson list selection */
    int32_t sel_block;       /* block picked with the mouse, -1 none */
    int help_scroll;         /* first help line shown */
    int help_rows;           /* rows the help had at the last draw (a page for PgUp/PgDn) */
} ui_view_state;

/* What the mouse did, in a view's own cells. */
typedef enum ui_mouse { UI_MOUSE_CLICK = 0, UI_MOUSE_WHEEL_UP, UI_MOUSE_WHEEL_DOWN } ui_mouse;

/* What a click asks the app to do (the app applies it after the view). */
typedef struct ui_mouse_req {
    int64_t sel_req;         /* show this request's block table; -2 = unchanged */
    int flags_keys;          /* give the keys to the flags view */
    int relayout;            /* the panes to place may have changed */
} ui_mouse_req;

typedef struct ui_model {
    const kv_frame *frame;   /* the engine as of this frame */
    const lsn_scene *scene;  /* what the lesson asks to show (never NULL) */
    ui_view_state *st;       /* the app's copy of the views' own figures */

    /* Screen and run state. */
    int rows, cols;
    const ui_layout *lay;
    int view_focus;          /* pane given priority by Tab (-1 = the lesson's choice) */
    int key_focus;           /* UI_PANE_FLAGS when the flags pane has the keys, else -1 */
    int paused;
    double speed;            /* the app's multiplier of the lesson's step rate */
    double now;              /* monotonic seconds */
    int overlay;             /* UI_OV_* */

    /* The lesson runtime's state, as the app read it (lsn.h): the views
     * get figures, not the runner. */
    int has_runner;          /* a lesson runtime is loaded (else the figures below are 0) */
    int lesson_current;      /* lsn_current: the loaded lesson's number, 0 none */
    int engine_runs;         /* lsn_engine_runs: the lesson lets the engine step now */
    int nlessons;            /* lsn_count, at most UI_MAX_LESSONS */
    lsn_info lessons[UI_MAX_LESSONS]; /* lsn_info_at 0..nlessons-1 (the list's rows: number, title, progress) */

    /* Text view. */
    int loading;             /* lesson number being opened (first frame), 0 = none */
    int input_active;        /* the answer box has the keys */
    const char *input;       /* typed answer */
    int input_len;
    const char *verdict;     /* last answer's verdict message */
    int verdict_kind;        /* lsn_verdict_kind, -1 = none */
    const char *recap;       /* last right answer + explanation */
    int recap_page;
    const char (*hints)[UI_HINT_MAX];
    int nhints;
    const char *status;      /* one-line message for the learner, "" none */
    int status_role;         /* ui_role for it */
    double status_until;
    const char *notice;      /* a runner notice too long for the header, "" none */
    int notice_page;

    /* Flags view. */
    int flag_editing, flag_selall;
    const char *flag_buf;

    /* Requests and pool. */
    int64_t sel_req;         /* request whose block table is shown, -1 none */
    int64_t victim;          /* last preempted request (-1 none) */
    double victim_until;
    int flashing;            /* some flash is still running */
    int32_t nflash;          /* size of the flash arrays */
    const uint8_t *flash_kind;
    const double *flash_until;
    int host_flash;          /* host tier: UI_FL_STORE or UI_FL_LOAD while host_flash_until > now */
    int64_t host_flash_blocks; /* how many blocks that step stored or loaded */
    double host_flash_until;
    int split_frame;         /* frame of scene->split the pool view plays (ui_split.h), -1 none */

    /* Start-up replay (what the log and the memory bar reveal). */
    int startup_shown;       /* visible plan log lines revealed so far */
    int log_target;          /* visible plan log lines */
    int engine_log_visible;  /* the engine's own lines may show */
    int starting;            /* the replay is still revealing lines */
    unsigned mem_terms;      /* bit t: memory term t (UI_MEM_T_*) shown */
    uint64_t log_visible[(KV_PLAN_MAX_LOG + 63) / 64]; /* bit i: plan log line i is within "upto" */
    unsigned shown_panes;    /* UI_PANE_BIT of the side panes to place */
    const char *stats_line;  /* vLLM's periodic stats line as the app logs it (app_stats.h), "" none yet;
                                NULL: the frame's (one per interval of engine time) */
    const char *stats_hits;  /* V0's prefix-cache line beside it, or NULL as stats_line */

    /* Memory view: a second plan drawn above the frame's, term by term (v
     * keeps the plan of the moment; kvlab --log: the log's own figures), or
     * NULL; the terms whose figures it states (UI_MEM_T_* bits, and
     * UI_MEM_VS_TOKENS for its KV tokens: ui_mem.h; the others are drawn in
     * its bar but not quoted); the labels of its bar and of the frame's. */
    const kv_plan *mem_vs;
    unsigned mem_vs_stated;
    const char *mem_vs_label;
    const char *mem_label;

    /* Classroom (app_room.h). */
    const char *room_label;  /* "presenting to 3", ... "" without a room */
    int room_footer;         /* 1 following, 2 broken away, 0 otherwise */
    int room_followers;      /* a presenter's followers now (the quit question names them) */
    int room_drives;         /* a follower that follows: the presenter answers */
    int presenter_left;
    const char *room_idle;   /* the text view's words while a follower has no lesson, or NULL */

    /* Rewind (app_rewind.h): replaying a past step of the history. The
     * header's timeline: rw_ncells cells (ui_chrome_timeline_cells at cols)
     * and in rw_marks[c] the KV_MARK_* kinds (kv_history.h) of the steps
     * cell c covers (ui_chrome_timeline_span), OR-ed. */
    int rw_active;
    int64_t rw_pos;          /* the step shown */
    int64_t rw_first, rw_present; /* kv_history_first, kv_history_present */
    int rw_ncells;
    uint32_t rw_marks[UI_RW_MAX_CELLS];
    const char *rw_kind;     /* what { } jump to ("event", "preemption", ...) */
} ui_model;

/* Current flash kind of a block (UI_FL_NONE when out of range or over). */
int ui_model_flash(const ui_model *m, int32_t block_id);

/* Plan log line i is within what the log view may show. */
int ui_model_log_visible(const ui_model *m, int i);

#endif
