/* lsn_vm: a lesson's Lua side as the runner sees it, in plain C. Only
 * lsn_lua.c knows the Lua C API: the sandbox and its limits, the lesson's
 * coroutine, the Lua functions it hands over (conditions, callbacks) and the
 * whole `lab` table of lessons/API.md.
 *
 * The lab API works directly on the runner's pieces listed in lsn_lab_env
 * (the stage, the question or goal being set, the server, the traffic);
 * what needs the runner itself goes through its callbacks. Every call in
 * here is protected: a Lua error or a limit makes it return an error code
 * and lsn_vm_error() holds "file:line: message" plus a traceback. */
#ifndef LSN_VM_H
#define LSN_VM_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kv_engine.h"
#include "lsn.h"
#include "lsn_ask.h"
#include "lsn_offer.h"
#include "lsn_server.h"
#include "lsn_stage.h"
#include "lsn_traffic.h"

#define LSN_MAX_WAIT_STEPS 1000000   /* engine steps one wait may ask for (lab.step, run_until, goal steps) */

/* What the lesson's coroutine waits for (the runner's state machine). */
typedef enum lsn_wait {
    W_NONE = 0,    /* running Lua, or nothing loaded */
    W_STEPS,       /* lab.step(n) */
    W_RUN_UNTIL,   /* lab.run_until(cond, max) */
    W_COND,        /* lab.wait_until(cond, max) */
    W_NEXT,        /* lab.pause() */
    W_ANSWER,      /* lab.ask{}: the question is in lsn_lab_env.ask */
    W_GOAL,        /* lab.goal{}: the goal is in lsn_lab_env.goal */
    W_DONE,        /* run(lab) returned */
    W_ERROR,       /* a Lua error or a limit: lsn_vm_error() */
} lsn_wait;

/* A wait and its numbers, as the lesson asked for it. */
typedef struct lsn_wait_req {
    lsn_wait wait;
    int64_t steps;           /* W_STEPS: engine steps */
    int64_t max_steps;       /* W_RUN_UNTIL, W_COND: give up after this many */
} lsn_wait_req;

/* The Lua functions a lesson hands over, one of each at a time. */
typedef enum lsn_fn {
    LSN_FN_COND = 0,         /* lab.run_until / lab.wait_until condition */
    LSN_FN_GOAL,             /* lab.goal's check */
    LSN_FN_ON_FLAG,          /* lab.on_flag(fn) */
    LSN_FN_ON_STEP,          /* lab.on_step(fn) */
    LSN_FN_TRAFFIC,          /* lab.traffic(fn) */
    LSN_FN_COUNT
} lsn_fn;

/* The runner's pieces the lab API reads and writes (all borrowed). */
typedef struct lsn_lab_env {
    lsn_stage *stage;
    lsn_ask *ask;
    lsn_goal_spec *goal;
    lsn_server *server;
    lsn_traffic *traffic;
    uint64_t *rng;           /* lab.random and the traffic generator */
    double *speed;           /* lab.speed: engine steps per second while animating */
    int *autorun;            /* lab.autorun */
    const kv_step_result *last_step; /* what the last engine step did */
    unsigned *changes;       /* LSN_CH_* bits for the app */
    FILE *const *log;        /* kvlab check's log, or NULL: where print() goes */
    int headless, verbose;
    const char *vllm_version; /* lab.release: the learner's release and accounting (lsn.h) */
    const char *accounting;
    const char *lessons_dir; /* require("lib.x") reads <lessons_dir>/lib/x.lua */
    const char *lessons_name; /* its base name, for "lessons/01-x.lua" in messages */
    int number;              /* the lesson */
    const char *title;
    const char *shown_path;  /* "lessons/01-x.lua" */
    lsn_limits limits;       /* 0 fields = defaults (lsn.h) */
    const volatile sig_atomic_t *interrupt;
    /* Start (or restart) the server with its current flags. Returns
     * lsn_server_start's code; err gets vLLM's or kvlab's message. */
    int (*start_server)(void *host, char *err, size_t errlen);
    void (*stop_server)(void *host);
    /* lab.score: keep the best solution of a challenge in the progress
     * (lsn_progress_score); *before gets the one kept before. 1 new best, 0
     * not, -1 refused. s->changes < 0: only look the kept one up. */
    int (*score)(void *host, const lsn_score *s, lsn_score *before);
    void *host;
    const char *voice;       /* who makes the answers: "" the learner ("You predicted"),
                                else a name ("root predicted"); lsn_set_voice */
} lsn_lab_env;

typedef struct lsn_vm lsn_vm;

/* A fresh sandboxed Lua state for one lesson. NULL with err on no memory. */
lsn_vm *lsn_vm_new(const lsn_lab_env *env, char *err, size_t errlen);
void lsn_vm_free(lsn_vm *vm);

/* Run the lesson file at path: it must return {id = <env number>, title =,
 * flags =, run = function(lab) ... end}. Fills *offer with its flags and
 * title with its title (if it gives one). Returns 0, or -1 (lsn_vm_error). */
int lsn_vm_load(lsn_vm *vm, const char *path, lsn_offer *offer, char *title, size_t titlelen);

/* A value handed back to the lesson when its wait ends. */
typedef struct lsn_val {
    enum { LSN_VAL_NUM, LSN_VAL_INT, LSN_VAL_BOOL } kind;
    double num;
    int64_t i;               /* INT and BOOL */
} lsn_val;

/* Start run(lab) (first call) or resume it with the wait's results. Returns
 * what it waits for next: W_DONE when run returned, W_ERROR on an error. */
lsn_wait lsn_vm_resume(lsn_vm *vm, int nvals, const lsn_val *vals, lsn_wait_req *req);

/* Is a function of this kind held? Drop it (unreference). */
int lsn_vm_has(const lsn_vm *vm, lsn_fn which);
void lsn_vm_drop(lsn_vm *vm, lsn_fn which);

/* Call a condition (LSN_FN_COND) or goal check (LSN_FN_GOAL): 1 true, 0
 * false, -1 error. A missing function counts as true. */
int lsn_vm_test(lsn_vm *vm, lsn_fn which);
/* lab.on_flag(name, value). 0, or -1 on error. */
int lsn_vm_on_flag(lsn_vm *vm, const char *name, const char *value);
/* lab.on_step(tokens). 0, or -1 on error. */
int lsn_vm_on_step(lsn_vm *vm, int64_t tokens);
/* lab.traffic(fn): call fn(step, time_s) and submit the requests it
 * returns to e. 0, or -1 on error. */
int lsn_vm_traffic(lsn_vm *vm, kv_engine *e, int64_t step, double clock_s);

/* kvlab check: evaluate the question's expect formula (a Lua expression
 * over the question's given numbers and the engine's figures, read fresh:
 * lessons/API.md "Questions"). *value gets the result, *figures how many
 * engine figures it read. 0, or -1 (lsn_vm_error says why). */
int lsn_vm_expect(lsn_vm *vm, const lsn_ask *q, double *value, int *figures);

/* The message of the last error: "file:line: message\nstack traceback: ..." */
const char *lsn_vm_error(const lsn_vm *vm);

#endif
