/* lsn: the lesson runner (DESIGN.md "Lessons"; the Lua API is lessons/API.md).
 *
 * A runner owns the course (lessons/manifest.json), one Lua state per loaded
 * lesson, the lesson's engine (the "server" the lesson started) and the
 * learner's progress file. The lesson's run(lab) is a coroutine: whenever it
 * waits (lab.pause, lab.ask, lab.goal, lab.step, lab.run_until,
 * lab.wait_until) it yields back here and the host resumes it from
 * lsn_tick(), lsn_next(), lsn_answer() or lsn_set_flag(). Nothing in this
 * interface blocks, prints or touches the terminal; every call into Lua is
 * protected, and a lesson error (syntax, runtime, undeclared global, running
 * too long without yielding) puts the runner in LSN_ERROR with a message that
 * names file:line plus a traceback, while the app keeps running.
 *
 * Lifetimes: strings and arrays returned by accessors belong to the runner and
 * stay valid until the next call that can resume the lesson or load another
 * (lsn_tick, lsn_next, lsn_back, lsn_answer, lsn_set_flag, lsn_reset,
 * lsn_load, lsn_free). Copy what you keep longer.
 *
 * Typical app loop:
 *     lsn_runner *r = lsn_new(&cfg, err, sizeof err);
 *     lsn_load(r, lsn_resume_lesson(r), 1);
 *     for (;;) {
 *         unsigned ch = lsn_tick(r, dt);        // engine steps + wait checks
 *         if (ch & LSN_CH_TEXT) redraw text from lsn_text(r) ...
 *         key 'n' -> lsn_next(r); 'b' -> lsn_back(r); Enter in the answer box ->
 *         lsn_answer(r, line, &v); 'h' -> lsn_hint(r); flag edit -> lsn_set_flag(...)
 *     }
 */
#ifndef LSN_H
#define LSN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct kv_engine;   /* engine/kv_engine.h: the running "server" */
struct kv_device;   /* engine/kv_device.h: device backend */

typedef struct lsn_runner lsn_runner;

/* ---- creation ---------------------------------------------------------- */

typedef struct lsn_config {
    const char *lessons_dir;   /* holds manifest.json, NN-slug.lua and lib/;
                                  NULL = $KVLAB_LESSONS_DIR, else kvlab_lessons_dir() */
    const char *assets_dir;    /* model and GPU catalogue; NULL = kvlab_assets_dir() */
    const char *state_dir;     /* where progress.json lives; NULL = $XDG_STATE_HOME/kvlab,
                                  else ~/.local/state/kvlab; "" = never save (tests) */
    struct kv_device *device;  /* backend for lesson engines; NULL = host backend.
                                  Not owned: must outlive the runner. */
    int headless;              /* 1 for `kvlab check`: pauses continue at once, engine
                                  steps run without animation, scripted answers used */
} lsn_config;

/* Read the manifest and the progress file. Returns NULL and fills err with one
 * line if the manifest is missing or invalid. A corrupt progress file is not
 * an error: it is moved aside (progress.json.corrupt-<time>), progress starts
 * fresh and lsn_notice() says so. */
lsn_runner *lsn_new(const lsn_config *cfg, char *err, size_t errlen);
void lsn_free(lsn_runner *r);

/* One line for the learner about something the runner did on its own (progress
 * file moved aside, saving failed, ...), or NULL. Cleared by lsn_notice_clear. */
const char *lsn_notice(const lsn_runner *r);
void lsn_notice_clear(lsn_runner *r);

/* ---- the course -------------------------------------------------------- */

typedef struct lsn_info {
    int number;                /* 1..21, the lesson's place in the course */
    int chapter;               /* 1..7 */
    const char *chapter_title;
    const char *title;
    const char *file;          /* file name inside lessons_dir, e.g. "01-coding-assistant.lua" */
    int available;             /* the file exists (lessons are written over time) */
    int done;                  /* progress: the lesson was completed */
    int step;                  /* progress: last saved step (0 = not started) */
} lsn_info;

int lsn_count(const lsn_runner *r);                          /* lessons in the manifest */
const lsn_info *lsn_info_at(const lsn_runner *r, int index); /* 0-based; NULL if out of range */
const lsn_info *lsn_info_of(const lsn_runner *r, int number);/* by lesson number; NULL if none */

/* The lesson to open when the app starts: the one saved as current, else the
 * first available lesson not done, else 1. */
int lsn_resume_lesson(const lsn_runner *r);

/* ---- loading and moving through a lesson -------------------------------- */

/* Load lesson `number` in a fresh Lua state and start run(lab). With resume
 * = 1 the lesson is replayed without animation to its saved step (answers and
 * flag changes recorded in the progress file are fed again). Returns 0, or -1
 * with lsn_error() set (unknown number, missing file, lesson error). A lesson
 * that fails still counts as loaded: the app shows lsn_error() in its text
 * view and the learner may lsn_reset() or load another. */
int lsn_load(lsn_runner *r, int number, int resume);
int lsn_current(const lsn_runner *r);        /* loaded lesson number, 0 if none */
const char *lsn_title(const lsn_runner *r);  /* loaded lesson's title, "" if none */

/* What the lesson is doing now. */
typedef enum lsn_state {
    LSN_IDLE = 0,     /* nothing loaded */
    LSN_RUNNING,      /* engine steps in progress (lab.step/run_until): lsn_tick drives them */
    LSN_WAIT_COND,    /* lab.wait_until: lsn_tick re-checks the condition */
    LSN_WAIT_NEXT,    /* lab.pause: waits for lsn_next() */
    LSN_WAIT_ANSWER,  /* lab.ask: waits for a correct lsn_answer() (or lsn_reveal) */
    LSN_WAIT_GOAL,    /* lab.goal: waits for the learner to reach it with lsn_set_flag() */
    LSN_DONE,         /* run(lab) returned: the lesson is complete */
    LSN_ERROR,        /* a Lua error stopped the lesson: see lsn_error() */
} lsn_state;

lsn_state lsn_get_state(const lsn_runner *r);
const char *lsn_state_name(lsn_state s);     /* "running", "wait-next", ... */

/* Bits returned by calls that can change what the app shows. */
enum {
    LSN_CH_TEXT     = 1u << 0,  /* narration (lsn_text) changed */
    LSN_CH_VIEWS    = 1u << 1,  /* views shown/highlighted changed */
    LSN_CH_PLOT     = 1u << 2,  /* plot series got points or were reset */
    LSN_CH_QUESTION = 1u << 3,  /* a question appeared, was answered or went away */
    LSN_CH_GOAL     = 1u << 4,  /* a goal appeared, was met or went away */
    LSN_CH_ENGINE   = 1u << 5,  /* engine stepped (redraw pool, metrics, memory) */
    LSN_CH_SERVER   = 1u << 6,  /* the engine was (re)started or stopped: re-read lsn_engine() */
    LSN_CH_STATE    = 1u << 7,  /* lsn_get_state changed (includes DONE and ERROR) */
    LSN_CH_FLAGS    = 1u << 8,  /* flag values changed */
};

/* Advance time by dt seconds of wall clock: run the engine steps the lesson
 * asked for at the animation rate (lsn_set_speed), re-check a wait condition
 * or a goal, and resume the coroutine when it holds. Cheap when nothing is
 * waiting. Returns LSN_CH_* bits. */
unsigned lsn_tick(lsn_runner *r, double dt);

/* The learner pressed "next": in LSN_WAIT_NEXT resume the lesson (and save
 * progress); while engine steps are animating, finish them at once. Returns
 * LSN_CH_* bits (0 if there was nothing to do). */
unsigned lsn_next(lsn_runner *r);

/* Go back one step: the lesson is reloaded and replayed without animation to
 * the previous step. Returns LSN_CH_* bits. */
unsigned lsn_back(lsn_runner *r);

/* Start the loaded lesson again from step 0 (clears its saved step and
 * recorded answers, keeps "done"). Also the way out of LSN_ERROR. */
unsigned lsn_reset(lsn_runner *r);

/* Engine steps per second while animating (default 20; the lesson may change it
 * with lab.speed). factor multiplies the lesson's rate (1 = as written). */
void lsn_set_speed(lsn_runner *r, double factor);

/* Step counter: steps are counted at each pause, question and goal passed. */
int lsn_step(const lsn_runner *r);

/* ---- narration --------------------------------------------------------- */

/* The current page of narration: UTF-8 paragraphs separated by "\n\n", with no
 * markup other than a line starting with "  " (keep as is: code, commands, the
 * start-up log). lab.page() starts a new page; lab.say() appends. "" if none. */
const char *lsn_text(const lsn_runner *r);
const char *lsn_page_title(const lsn_runner *r);  /* from lab.page(title), "" if none */
int lsn_page_number(const lsn_runner *r);         /* 1-based, for "page 3" in a footer */

/* Error text when lsn_get_state() == LSN_ERROR: "lessons/02-....lua:41: attempt
 * to ...\nstack traceback:\n..." ; NULL otherwise. */
const char *lsn_error(const lsn_runner *r);

/* ---- views ------------------------------------------------------------- */

/* View names a lesson can show (API.md lists what each draws):
 * "text" (always shown), "pool", "memory", "flags", "metrics", "log",
 * "tp", "plot", "requests". */
typedef struct lsn_highlight {
    const char *target;        /* what to highlight: a plan term ("kv", "weights"), a
                                  flag name, a metric name, a log substring, "request",
                                  "blocks", "layers" ... (per view, see API.md) */
    const int64_t *ids;        /* request ids / block ids / rank ids, may be NULL */
    int nids;
    const char *note;          /* short label to draw beside it, may be "" */
} lsn_highlight;

typedef struct lsn_view {
    const char *name;          /* one of the names above */
    int shown;                 /* lesson asked for it (lab.show / lab.hide) */
    int focus;                 /* lab.focus(name): give it the most room */
    int nhighlights;
    const lsn_highlight *highlights;
    /* lab.show(name, {k=v,...}) options as "k" -> "v" strings, e.g. for
     * "memory": upto="profile" (reveal the plan up to this start-up phase). */
    int noptions;
    const char *const *option_keys;
    const char *const *option_values;
} lsn_view;

int lsn_view_count(const lsn_runner *r);
const lsn_view *lsn_view_at(const lsn_runner *r, int index);
const lsn_view *lsn_view_find(const lsn_runner *r, const char *name); /* NULL if never mentioned */
/* Option value of a view, or NULL. */
const char *lsn_view_option(const lsn_runner *r, const char *view, const char *key);

/* ---- the line plot ------------------------------------------------------ */

typedef struct lsn_series {
    const char *name;          /* legend label */
    int npoints;
    const double *x, *y;
} lsn_series;

typedef struct lsn_plot {
    const char *title, *xlabel, *ylabel;   /* "" if unset */
    int logy;                              /* 1 = log scale on y */
    int nseries;
    const lsn_series *series;
} lsn_plot;

/* The plot the lesson set up with lab.plot{...}/lab.plot_add; NULL if none. */
const lsn_plot *lsn_get_plot(const lsn_runner *r);

/* ---- questions ---------------------------------------------------------- */

typedef enum lsn_qkind {
    LSN_Q_NUMBER = 0,          /* a number with optional unit, checked with a tolerance */
    LSN_Q_CHOICE,              /* pick one of choices[] (by letter, number or text) */
} lsn_qkind;

typedef struct lsn_question {
    lsn_qkind kind;
    const char *prompt;
    const char *unit;          /* NUMBER: unit assumed when the learner types none
                                  ("tokens", "GiB", "bytes", ""); shown beside the box */
    int nchoices;              /* CHOICE */
    const char *const *choices;
    int tries;                 /* wrong answers so far */
    int hints_total;           /* hints the lesson provides */
    int hints_shown;           /* hints given so far (lsn_hint) */
} lsn_question;

/* The question waiting for an answer, or NULL. */
const lsn_question *lsn_get_question(const lsn_runner *r);

typedef enum lsn_verdict_kind {
    LSN_V_CORRECT = 0,         /* accepted: the lesson resumes */
    LSN_V_WRONG,               /* not accepted */
    LSN_V_NEAR_MISS,           /* not accepted, and a known mistake: message explains it */
    LSN_V_UNREADABLE,          /* could not read a number/unit/choice from the text */
    LSN_V_NO_QUESTION,         /* nothing is being asked */
} lsn_verdict_kind;

typedef struct lsn_verdict {
    lsn_verdict_kind kind;
    char message[512];         /* one or two sentences for the learner */
} lsn_verdict;

/* Check the learner's answer text (e.g. "407,000 tokens", "2.83 GiB", "b").
 * Correct answers resume the lesson and save progress. Returns LSN_CH_* bits. */
unsigned lsn_answer(lsn_runner *r, const char *text, lsn_verdict *v);

/* The next hint for the pending question (or goal), or NULL when none is left. */
const char *lsn_hint(lsn_runner *r);

/* Give up on the pending question: returns the answer text to show and
 * resumes the lesson (the question is recorded as revealed). NULL if no
 * question is pending. */
const char *lsn_reveal(lsn_runner *r);

/* ---- flags and goals ---------------------------------------------------- */

/* The flags the loaded lesson lets the learner change (the lesson's `flags`
 * list; the playground allows all), with their current values as the
 * lesson's server was started. Names are vLLM's dashed form
 * ("max-model-len", "gpu-memory-utilization") plus kvlab's own ("gpu",
 * "model", "kv-cache" on/off, "contiguous"). */
typedef struct lsn_flag {
    const char *name;
    const char *value;         /* current value as text ("" = the default) */
    const char *help;          /* one line: what it changes */
    int nchoices;              /* enumerated values, 0 = free text */
    const char *const *choices;
} lsn_flag;

/* Left/Right on the model or gpu flag: the catalogue id after (dir > 0) or
 * before `cur` (the first/last when cur is not in the catalogue), written to
 * out. Returns 1, or 0 for another flag or an empty catalogue. */
int lsn_catalog_step(const lsn_runner *r, const char *flag, const char *cur, int dir, char *out, size_t len);

int lsn_flag_count(const lsn_runner *r);
const lsn_flag *lsn_flag_at(const lsn_runner *r, int index);

/* The learner changed a flag: validate the name and value, restart the
 * lesson's server with the new arguments (vLLM flags are start-up flags),
 * record the change for replay, let the lesson react (lab.on_flag) and
 * re-check a pending goal. value "" restores the default. Returns LSN_CH_*
 * bits; on a bad name or value (or a flag this lesson does not offer) returns
 * 0 and fills err with one line. A server that fails to start is not an
 * error here: lsn_server_error() has vLLM's message. */
unsigned lsn_set_flag(lsn_runner *r, const char *name, const char *value,
                      char *err, size_t errlen);

typedef struct lsn_goal {
    const char *text;          /* what the learner must make happen */
    int met;                   /* reached (the lesson resumes on the next tick) */
    int hints_total, hints_shown;
} lsn_goal;

/* The goal being worked on (lab.goal), or NULL. */
const lsn_goal *lsn_get_goal(const lsn_runner *r);

/* ---- the engine --------------------------------------------------------- */

/* The lesson's running server, or NULL when none is started (never started,
 * or the last start failed: lsn_server_error says why). Owned by the runner;
 * replaced when a flag changes (LSN_CH_SERVER). Views read it directly. */
struct kv_engine *lsn_engine(const lsn_runner *r);

/* The start-up memory plan of the last start (also of one vLLM would refuse:
 * the memory bar and the start-up log draw it), or NULL if none. */
struct kv_plan;
const struct kv_plan *lsn_plan(const lsn_runner *r);

/* vLLM's error line from the last failed start ("ValueError: To serve at least
 * one request ..."), or NULL if the last start succeeded. */
const char *lsn_server_error(const lsn_runner *r);

/* ---- headless checking (kvlab check) ------------------------------------ */

/* Run lesson `number` headless start to end: every pause continues, every
 * question is first given the lesson's wrong answers (each must be rejected)
 * and then its scripted answer (must be accepted), every goal gets its scripted
 * flag changes (it must not be met before them, and must be met after). Writes
 * one line per question/goal and a final PASS/FAIL line to `log` (may be
 * NULL). Returns 0 when the lesson passes, 1 when a check fails or the
 * lesson errors (the reason, with file:line, is in the log). Unloads the
 * lesson afterwards and never touches the progress file. */
int lsn_check(lsn_runner *r, int number, FILE *log);

#endif
