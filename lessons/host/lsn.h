/* lsn: the lesson runner (docs/DESIGN.md "The lesson runtime"; the Lua API is
 * lessons/API.md).
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

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lsn_progress.h"
#include "lsn_scene.h"

struct kv_engine;   /* engine/kv_engine.h: the running "server" */
struct kv_device;   /* engine/kv_device.h: device backend */

typedef struct lsn_runner lsn_runner;

/* ---- creation ---------------------------------------------------------- */

/* Hard limits on a lesson's Lua code (each ends the lesson with a message
 * that names the limit and file:line; 0 = the default in brackets). */
typedef struct lsn_limits {
    size_t heap_bytes;         /* Lua heap per lesson [256 MiB] */
    long instructions;         /* Lua instructions per call into the lesson [200 million] */
    double seconds;            /* wall time per call into the lesson [3 s] */
    double pattern_work;       /* string pattern matching work per call [1e8 steps] */
    long check_waits;          /* kvlab check: waits one lesson may pass [100,000] */
    long check_engine_steps;   /* kvlab check: engine steps one lesson may run [10 million] */
    int hook_every;            /* Lua instructions between two checks of the limits by the count hook [1000]
                                  (the wall time is also watched from outside, lsn_lua.c's watchdog) */
} lsn_limits;

typedef struct lsn_config {
    const char *lessons_dir;   /* holds manifest.json, NN-slug.lua and lib/ (required) */
    const char *assets_dir;    /* model and GPU catalogue (required) */
    const char *state_dir;     /* where progress.json lives; NULL = $XDG_STATE_HOME/kvlab,
                                  else ~/.local/state/kvlab; "" = never save (tests) */
    struct kv_device *device;  /* backend for lesson engines; NULL = host backend.
                                  Not owned: must outlive the runner. */
    int headless;              /* 1 for `kvlab check`: pauses continue at once, engine
                                  steps run without animation, scripted answers used */
    int verbose;               /* kvlab check -v: log every page and what lessons print() */
    lsn_limits limits;
    /* The learner's vLLM release (kvlab --vllm-version V) and accounting
     * ("release" or "textbook": kvlab --accounting textbook); NULL = what the
     * progress file keeps (else the newest release). Given ones are checked
     * (lsn_new fails with one line for a release kvlab does not know) and
     * kept in the progress file. */
    const char *vllm_version;
    const char *accounting;
    /* Set (from a signal handler) to stop the running lesson code at once;
     * may be NULL. */
    const volatile sig_atomic_t *interrupt;
    /* Bound of the history of the loaded lesson's runs (lsn_history), bytes;
     * 0 = keep none (kvlab check). The app passes KV_HISTORY_DEFAULT_BYTES. */
    uint64_t history_bytes;
} lsn_config;

/* Read the manifest and the progress file. Returns NULL and fills err with one
 * line if the manifest is missing or invalid. A corrupt progress file is not
 * an error: it is moved aside (progress.json.corrupt-<time>), progress starts
 * fresh and lsn_notice() says so. */
lsn_runner *lsn_new(const lsn_config *cfg, char *err, size_t errlen);
void lsn_free(lsn_runner *r);

/* A message for the learner about something the runner did on its own
 * (progress file moved aside, saving failed and why, saving works again ...),
 * or NULL. It may be longer than a line (it names paths): show it whole.
 * A failed save is said once per reason; saving is tried again after every
 * step. Cleared by lsn_notice_clear. */
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

/* The best scores kept for lesson `number`'s challenges (lab.score, lesson
 * 21's golf): *scores points into the progress, valid until the next call
 * that changes it. Returns how many. */
int lsn_scores(const lsn_runner *r, int number, const lsn_score **scores);

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

/* ---- following someone else's lesson (classroom mode) -------------------- */

/* Load lesson `number` and replay it without animation to `step` with the
 * inputs `in` (answers, reveals and flag changes by wait, as lsn_progress.h
 * records them) instead of the saved progress; nothing is written to the
 * progress file. With stop_early the replay stops at the first wait reached
 * once `step` steps are done, also when that wait runs the engine (lab.step,
 * lab.run_until, lab.wait_until), so the caller can run the engine on with
 * lsn_tick_steps; stop_early = 1 + N stops only at such a wait after N
 * server starts in that step (lsn_step_starts: a presenter that finished an
 * engine wait early went on to a restart without a new step). Returns as
 * lsn_load does. */
int lsn_replay(lsn_runner *r, int number, int step, const lsn_input *in, int nin, int stop_early);

/* The loaded lesson's inputs so far (what a replay of it needs); *n = 0 and
 * NULL when nothing is loaded. Valid until the next call that can resume
 * the lesson or load another. */
const lsn_input *lsn_inputs(const lsn_runner *r, int *n);

/* Engine steps the lesson has run since its server last started, counting
 * the idle ones (a step with nothing to schedule moves the clock to the next
 * arrival but not the engine's own step count): two runners that ran the
 * same lesson the same number of ticks are in the same state. */
int64_t lsn_engine_ticks(const lsn_runner *r);

/* Server starts (lsn_server_start calls, failed ones too) since the runner
 * made its server object: changes whenever the lesson's engine is replaced,
 * also by a restart inside one step that leaves lsn_engine_ticks higher than
 * before (a classroom presenter sends it so followers replay at once). */
int lsn_engine_starts(const lsn_runner *r);

/* Server starts (lab.start, lab.restart, a flag change) since the lesson's
 * current step began (0 on a step's first wait before any). Two runners at
 * the same step and the same count run the same engine: a classroom
 * follower whose replay stopped inside an engine wait before a restart the
 * presenter has passed (n during an animation finishes it: the lesson goes
 * on to its restart without a new step) finishes the same waits until the
 * counts agree. */
int lsn_step_starts(const lsn_runner *r);

/* The history of the loaded lesson's runs (engine/kv_history.h; lessons/
 * host/lsn_runs.h): every engine its server started while this lesson was
 * loaded -- lab.start, lab.restart, flag changes, lsn_reset, the replays of
 * lsn_back, lsn_load's resume and lsn_replay -- recorded from its start, in
 * one timeline with a KV_MARK_RESTART mark where each run begins. NULL when
 * lsn_config.history_bytes is 0 or no server has started in this lesson.
 * The runner attaches and detaches engines; the caller seeks and reads
 * (kv_history_seek, kv_history_engine, marks). Valid until another lesson
 * is loaded or lsn_free. */
struct kv_history;
struct kv_history *lsn_history(const lsn_runner *r);

/* The start-up plan of the run holding history position pos (what the
 * memory bar and the start-up log draw for a past step), or NULL. */
const struct kv_plan *lsn_history_plan(const lsn_runner *r, int64_t pos);

/* The value flag `name` (as lsn_flag.name) had in the run holding pos ("" =
 * the default), or NULL when the lesson did not offer it then. */
const char *lsn_history_flag(const lsn_runner *r, int64_t pos, const char *name);

/* Bound the history of the next lesson loaded to `bytes` (0: keep none);
 * the one being recorded keeps its own. */
void lsn_set_history_bytes(lsn_runner *r, uint64_t bytes);

/* Why the newest run could not be recorded (out of memory), or NULL. */
const char *lsn_history_error(const lsn_runner *r);

/* 1 when the engine moves on a tick (lab.step or lab.run_until in progress,
 * or lab.autorun on with a server up); 0 when the lesson holds it still
 * while the learner reads, answers or changes flags (the app says so). */
int lsn_engine_runs(const lsn_runner *r);

/* Advance exactly k engine steps (ticks, as lsn_engine_ticks counts them) the way lsn_tick does while animating
 * (lab.step counts down and resumes, lab.run_until tests its condition,
 * lab.autorun runs on), without a clock, then re-check a wait condition or
 * a goal. Stops early when nothing waits on the engine. Returns LSN_CH_*. */
unsigned lsn_tick_steps(lsn_runner *r, int64_t k);

/* Engine images (a classroom follower that joins late starts from the
 * presenter's engine instead of running every engine step to it):
 *
 * lsn_engine_image: the loaded lesson's engine as it is now
 * (engine/kv_snapshot.h) with what a runner beside it needs to run on from
 * there (the engine ticks, the table-form traffic generator's place), as
 * one image in *img (its buffer reused). 0; -1 with one line in err when no
 * engine runs or it cannot be imaged (out of memory).
 *
 * lsn_engine_load_image: put this runner's engine at such an image, taken
 * by a runner of the same lesson at the same step and run (the same inputs
 * and engine config), further on than this one: the engine's state, its
 * tick count and the traffic's place are replaced, as lsn_tick_steps of
 * the difference would have left them (*changes: the LSN_CH_* bits), and
 * the history records a new run from here. Only where those ticks would
 * run no lesson code per step (no lab.on_step, no function traffic) and
 * only to a later tick: a lab.step that ends before it and a lab.run_until
 * (its condition is tested every step) are run on first, as ticking would,
 * never past the image's tick. Returns 0 (a wait condition or goal was
 * re-checked as after ticks); 1 when this runner cannot take the image
 * (tick instead; *changes says what the waits run on changed); -1 when
 * the image was refused (damaged, another config or traffic), with one
 * line in err: the engine is then empty and the caller must rebuild the
 * run (lsn_replay). The image is read as hostile bytes. */
struct kv_snapshot;
int lsn_engine_image(const lsn_runner *r, struct kv_snapshot *img, char *err, size_t errlen);
int lsn_engine_load_image(lsn_runner *r, const uint8_t *image, size_t len, unsigned *changes, char *err,
                          size_t errlen);

/* Save progress from now on in state_dir (its progress.json: what it held,
 * with the loaded lesson as it is now), also for a runner made with
 * state_dir ""; state_dir "" stops saving. Returns 0, or -1 with one line
 * in err. */
int lsn_save_to(lsn_runner *r, const char *state_dir, char *err, size_t errlen);

/* Who makes the answers, predictions and flag changes the page reports:
 * NULL or "" the learner ("Your prediction: 20."), else a name that the
 * page uses instead ("root predicted 20."): a follower replaying its
 * presenter's moves. Affects lines said from now on. */
void lsn_set_voice(lsn_runner *r, const char *who);

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

/* The views in lsn_view_names order (lsn_scene.h). */
int lsn_view_count(const lsn_runner *r);
const lsn_view *lsn_view_at(const lsn_runner *r, int index);
const lsn_view *lsn_view_find(const lsn_runner *r, const char *name); /* NULL if never mentioned */
/* Option value of a view, or NULL. */
const char *lsn_view_option(const lsn_runner *r, const char *view, const char *key);

/* ---- the line plot ------------------------------------------------------ */

/* The plot the lesson set up with lab.plot{...}/lab.plot_add; NULL if none. */
const lsn_plot *lsn_get_plot(const lsn_runner *r);

/* ---- questions ---------------------------------------------------------- */

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

/* The flags the loaded lesson lets the learner change (lsn_flag in
 * lsn_scene.h). */
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
 * error here: lsn_server_error() has vLLM's message.
 * vllm-version (every lesson's last flags row; "textbook" picks the
 * textbook accounting) and accounting are the learner's release, not the
 * lesson's: they go through lsn_set_release and the lesson is loaded again
 * and replayed to its step under the new release (not recorded as inputs). */
unsigned lsn_set_flag(lsn_runner *r, const char *name, const char *value,
                      char *err, size_t errlen);

/* The learner's release: the vLLM version every lesson's server follows
 * ("0.33.0" when none was chosen: the newest) and the accounting ("release",
 * or "textbook": the course's simplified arithmetic). */
const char *lsn_release_version(const lsn_runner *r);
const char *lsn_release_accounting(const lsn_runner *r);
/* Choose the release (version NULL: keep; accounting NULL: "release" when a
 * version is given, else keep) and keep it in the progress file. It takes
 * effect at the next lsn_load. Returns 0, or -1 with one line in err for a
 * release kvlab does not know or an accounting other than release/textbook. */
int lsn_set_release(lsn_runner *r, const char *version, const char *accounting, char *err, size_t errlen);

/* The goal being worked on (lab.goal), or NULL. */
const lsn_goal *lsn_get_goal(const lsn_runner *r);

/* 1 when the last lsn_set_flag changed a lever the pending goal does not
 * count (a model or debug override, a what-if switch, the traffic:
 * lessons/host/lsn_lever.c) and left it off the value the goal began with;
 * the page then says why in one line (lessons/API.md "Goals"). */
int lsn_goal_not_counted(const lsn_runner *r);

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

/* ---- the scene ------------------------------------------------------------ */

/* Everything the lesson asks to show, in one struct (lsn_scene.h); the
 * accessors above read the same data. Valid until the next call that can
 * resume the lesson or load another. */
const lsn_scene *lsn_scene_get(lsn_runner *r);

/* "Lua 5.4.x", for --version (the app includes no Lua header). */
const char *lsn_lua_version(void);

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

/* A rule on what the learner sees, for kvlab check to apply at every wait
 * for the learner (a pause, a question, a goal): the program hands one in
 * (tui/app/ui_fit.h: the views a page highlights or focuses are on screen
 * at every terminal size the app supports), since the runtime knows no
 * terminal. It reads the runner (lsn_scene_get, lsn_engine, lsn_plan) and
 * returns 0, or -1 with one line in msg; kvlab check then fails the lesson
 * with that line. NULL: no such rule (builds without the app). */
typedef int (*lsn_page_rule)(lsn_runner *r, void *ctx, char *msg, size_t msglen);
void lsn_check_set_page_rule(lsn_runner *r, lsn_page_rule rule, void *ctx);

#endif
