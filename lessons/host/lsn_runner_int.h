/* lsn_runner_int: the runner's struct, made of the pieces each module owns
 * (the stage, the question and goal, the offered flags, the traffic, the
 * Lua side). For lsn_runner.c and lsn_check.c only; the app uses lsn.h. */
#ifndef LSN_RUNNER_INT_H
#define LSN_RUNNER_INT_H

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "lsn.h"
#include "lsn_ask.h"
#include "lsn_course.h"
#include "lsn_offer.h"
#include "lsn_progress.h"
#include "lsn_server.h"
#include "lsn_stage.h"
#include "lsn_runs.h"
#include "lsn_traffic.h"
#include "lsn_vm.h"

/* The learner's saved progress and where it goes. */
typedef struct lsn_saving {
    lsn_progress progress;
    char path[PATH_MAX];
    int save;                /* path is usable */
    char failed[PATH_MAX + 256]; /* why the last save failed, "" = it worked (saving goes on trying) */
    char notice[PATH_MAX + 512]; /* one message for the learner, "" = none */
} lsn_saving;

/* The loaded lesson's file. */
typedef struct lsn_lesson {
    int number;              /* 0 = none */
    char path[PATH_MAX];     /* full path of its file */
    char shown_path[PATH_MAX]; /* "lessons/01-x.lua" for messages */
    char title[256];
} lsn_lesson;

/* Where the lesson's coroutine is and the waits that step the engine. */
typedef struct lsn_pace {
    lsn_wait wait;
    int step;                /* steps completed */
    int replaying;           /* feeding recorded inputs: no animation, no saving, no recording */
    int stop_early;          /* lsn_replay: stop at the target step's first wait, engine waits too */
    int64_t steps_left;      /* W_STEPS */
    int64_t steps_done, max_steps; /* W_RUN_UNTIL, W_COND */
    double accum;            /* fraction of a step owed to the animation */
    double speed;            /* lesson's steps per second (lab.speed) */
    double speed_factor;     /* app's multiplier */
    int autorun;             /* lab.autorun */
} lsn_pace;

/* The lesson's server as the runner keeps it. */
typedef struct lsn_serving {
    lsn_server *server;
    int started;             /* lab.start was called in this lesson */
    char err[1024];          /* vLLM's refusal or kvlab's message of the last start */
    int has_err;
    kv_step_result last_step; /* what the last engine step did */
    int64_t ticks;           /* engine steps run since the server started, idle ones too */
    int step_starts;         /* server starts since the lesson's current step began (lsn_step_starts) */
} lsn_serving;

/* Inputs of the steps the learner went back over (lsn_back). Moving forward
 * onto such a question or goal again applies them, so an answer given once
 * is not asked for again. Not saved; dropped by lsn_load. */
typedef struct lsn_ahead {
    lsn_input *v;
    int n, cap;
    int from_before;         /* lsn_answer is applying a remembered answer */
} lsn_ahead;

/* kvlab check's state while it drives a lesson. */
typedef struct lsn_checking {
    int on;                  /* inside lsn_check */
    FILE *log;
    int failed;
    int n_questions, n_goals, n_predictions;
    long waits, max_waits;   /* waits passed, and the cap (a lesson that pauses forever) */
    long engine_steps, max_engine_steps;
    /* kvlab check's handlers (lsn_check.c sets them while it drives a lesson,
     * so the runner calls nothing in lsn_check.c: calls go one way). */
    void (*question)(lsn_runner *r);  /* a question waits: give wrong answers, then the scripted one */
    void (*goal)(lsn_runner *r);      /* a goal waits: try the wrong levers, then the scripted changes */
    void (*page)(lsn_runner *r);      /* any wait for the learner: the page rule (page_rule) on the screen */
    lsn_page_rule page_rule;          /* lsn_check_set_page_rule, NULL none */
    void *page_ctx;
} lsn_checking;

struct lsn_runner {
    char lessons_dir[PATH_MAX];
    char lessons_name[256];  /* the folder's base name, for messages */
    char assets_dir[PATH_MAX];
    int headless, verbose;
    kv_device *device;
    lsn_limits limits;
    const volatile sig_atomic_t *interrupt;
    lsn_course course;
    lsn_saving saving;

    lsn_lesson les;
    lsn_vm *vm;              /* NULL when nothing is loaded */
    lsn_pace pace;
    lsn_stage stage;
    lsn_ask q;
    lsn_goal_spec g;
    lsn_offer offer;
    lsn_serving srv;
    lsn_runs runs;           /* every run of the loaded lesson, for rewinding (lsn_history) */
    lsn_traffic traffic;
    uint64_t rng;            /* lab.random and the traffic generator */
    lsn_strbuf error;        /* text of LSN_ERROR */
    int has_error;
    lsn_ahead ahead;
    lsn_checking chk;
    unsigned changes;        /* LSN_CH_* since the last public call returned */
    lsn_scene scene;
    char voice[64];          /* who answers ("" = the learner; lsn_set_voice) */
};

/* ---- lsn_runner.c, for lsn_check.c ---- */

void lsn_run_error(lsn_runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lsn_run_logf(lsn_runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Run the lesson without the learner, to step `target` (replay) or to its
 * end (check, where questions and goals go to the check's handlers). */
void lsn_run_drive(lsn_runner *r, int target);
void lsn_run_unload(lsn_runner *r);
/* One engine step, feeding the traffic first. Returns the scheduled tokens,
 * or < 0 after an error (the runner is then in W_ERROR). */
int lsn_run_engine_step(lsn_runner *r);
/* 1 while a lever the pending goal does not count (lsn_lever.h) is off the
 * value it had when the goal began: the goal is then not met, whatever its
 * check says. */
int lsn_run_goal_uncounted(lsn_runner *r);
/* Re-check a pending goal; sets g.met. */
void lsn_run_check_goal(lsn_runner *r);
/* The goal is reached: count the step and resume the lesson. */
void lsn_run_finish_goal(lsn_runner *r);

#endif
