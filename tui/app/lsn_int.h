/* lsn_int: the runner's insides, shared by lsn_runner.c (the host: Lua
 * state, coroutine, waits, progress, checks) and lsn_lab.c (the `lab` API).
 * Not for the app: the app uses lsn.h. */
#ifndef LSN_INT_H
#define LSN_INT_H

#include <limits.h>
#include <lua.h>
#include <stdint.h>
#include <stdio.h>

#include "lsn.h"
#include "lsn_answer.h"
#include "lsn_course.h"
#include "lsn_progress.h"
#include "lsn_server.h"

/* What the coroutine waits for. */
typedef enum lsn_wait {
    W_NONE = 0,    /* running Lua, or nothing loaded */
    W_STEPS,       /* lab.step(n) */
    W_RUN_UNTIL,   /* lab.run_until(cond, max) */
    W_COND,        /* lab.wait_until(cond, max) */
    W_NEXT,        /* lab.pause() */
    W_ANSWER,      /* lab.ask{} */
    W_GOAL,        /* lab.goal{} */
    W_DONE,
    W_ERROR,
} lsn_wait;

typedef struct lsn_strbuf {
    char *s;
    size_t len, cap;
} lsn_strbuf;

void lsn_sb_clear(lsn_strbuf *b);
void lsn_sb_add(lsn_strbuf *b, const char *s, size_t n);
void lsn_sb_free(lsn_strbuf *b);

#define LSN_NVIEWS 9
extern const char *const lsn_view_names[LSN_NVIEWS];

typedef struct lsn_view_int {
    lsn_view pub;
    lsn_highlight *hl;
    int nhl, caphl;
    char **keys, **vals;
    int nopt;
} lsn_view_int;

typedef struct lsn_series_int {
    char *name;
    double *x, *y;
    int n, cap;
} lsn_series_int;

typedef struct lsn_question_int {
    int active;
    lsn_question pub;
    char *prompt, *unit;
    char **choices;          /* nchoices */
    char **why;              /* nchoices entries, may be NULL */
    int nchoices, correct;
    double answer, rel, abs;
    lsn_near *near;          /* why strings owned */
    int nnear;
    char **hints;
    int nhints, hints_shown;
    char *script;            /* what kvlab check types */
    char **wrong;
    int nwrong;
    char *explain;
    int tries, revealed;
    char reveal_text[128];
} lsn_question_int;

typedef struct lsn_goal_int {
    int active;
    lsn_goal pub;
    char *text;
    int check_ref;           /* Lua function in the registry */
    char **hints;
    int nhints, hints_shown;
    char **script_names, **script_values;
    int nscript;
    int64_t steps;           /* engine steps to run after a change before checking (headless) */
    int changes;
    int met;
} lsn_goal_int;

typedef struct lsn_traffic {
    int active;
    int fn_ref;              /* Lua generator function, or LUA_NOREF */
    double rate;             /* requests per virtual second (table form) */
    int32_t prompt_min, prompt_max, output_min, output_max;
    char prefix_id[64];
    int32_t prefix_tokens;
    int64_t count, sent;     /* count 0 = unlimited */
    double next_s;           /* next arrival (virtual clock) */
} lsn_traffic;

struct lsn_runner {
    char lessons_dir[PATH_MAX];
    char assets_dir[PATH_MAX];
    char progress_path[PATH_MAX];
    int save;                /* progress_path is usable */
    int headless;
    kv_device *device;
    lsn_course course;
    lsn_progress progress;
    char notice[768];

    /* The loaded lesson. */
    int number;
    char path[PATH_MAX];     /* full path of its file */
    char shown_path[PATH_MAX]; /* "lessons/01-x.lua" for messages */
    char title[256];
    lua_State *L;
    lua_State *co;
    int co_ref, lab_ref;
    lsn_wait wait;
    int step;                /* steps completed */
    int replaying;           /* feeding recorded inputs: no animation, no saving, no recording */
    int checking;            /* inside lsn_check */
    long hook_ticks;         /* instruction-count hook calls since the last entry into Lua */
    size_t mem_used;

    /* Waits that step the engine. */
    int64_t steps_left, steps_done, max_steps;
    int cond_ref;
    double accum;
    double speed;            /* lesson's steps per second */
    double speed_factor;     /* app's multiplier */
    int autorun;

    /* What the app shows. */
    lsn_strbuf text;
    char page_title[256];
    int page_no;
    lsn_strbuf error;
    int has_error;
    lsn_view_int views[LSN_NVIEWS];
    lsn_view pub_views[LSN_NVIEWS];
    int plot_on;
    char *plot_title, *plot_xlabel, *plot_ylabel;
    int plot_logy;
    lsn_series_int *series;
    int nseries;
    lsn_series *pub_series;
    lsn_plot pub_plot;
    lsn_question_int q;
    lsn_goal_int g;
    char **allowed;          /* lesson's flags, NULL + allow_all for "*" */
    int nallowed, allow_all;
    lsn_flag *pub_flags;
    char **flag_values;
    int npub_flags;
    int on_flag_ref;
    int on_step_ref;         /* lab.on_step callback, or LUA_NOREF */

    lsn_server *server;
    int server_started;      /* lab.start was called in this lesson */
    char server_err[1024];
    int has_server_err;
    lsn_traffic traffic;
    uint64_t rng;
    kv_step_result last_step; /* what the last engine step did */
    unsigned changes;        /* LSN_CH_* since the last public call returned */

    /* Inputs of the steps the learner went back over (lsn_back). Moving
     * forward onto such a question or goal again applies them, so an answer
     * given once is not asked for again. Not saved; dropped by lsn_load. */
    lsn_input *ahead;
    int nahead, capahead;
    int from_before;         /* lsn_answer is applying a remembered answer */

    /* kvlab check */
    FILE *log;
    int check_failed;
    int n_questions, n_goals;
};

/* lsn_lab.c: push the lab table for r onto L's stack. */
void lsn_lab_push(lua_State *L, lsn_runner *r);

/* lsn_runner.c, for lsn_lab.c. */
lsn_runner *lsn_from_L(lua_State *L);
/* Set or clear the plot; add a point. */
void lsn_plot_reset(lsn_runner *r);
int lsn_plot_series(lsn_runner *r, const char *name);  /* index, adding it if new; -1 on no memory */
void lsn_plot_add(lsn_runner *r, int series, double x, double y);
lsn_view_int *lsn_view_get(lsn_runner *r, const char *name); /* NULL if not a view name */
void lsn_view_set_option(lsn_view_int *v, const char *k, const char *val);
void lsn_view_add_highlight(lsn_view_int *v, const char *target, const int64_t *ids, int nids, const char *note);
void lsn_view_clear_highlights(lsn_view_int *v);
void lsn_question_clear(lsn_question_int *q);
void lsn_goal_clear(lsn_runner *r);
/* Start the server with the current args; sets server_err. Returns lsn_server_start's code. */
int lsn_start_server(lsn_runner *r);
/* One engine step (feeding the traffic generator first). Returns scheduled tokens, or < 0 on error
 * (a Lua error in a generator puts the runner in W_ERROR). */
int lsn_engine_step(lsn_runner *r);
/* Print to the check log (kvlab check -v / print()). */
void lsn_logf(lsn_runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double lsn_random(lsn_runner *r);  /* [0, 1) */
/* lsn_lab.c: submit the request described by the Lua table at idx. Returns
 * its id (>= 0) or a negative code with one line in err. */
int64_t lsn_lab_submit_table(lsn_runner *r, lua_State *L, int idx, char *err, size_t errlen);

#endif
