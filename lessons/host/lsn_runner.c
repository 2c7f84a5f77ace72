/* lsn_runner: the lesson runner as a plain-C state machine. The lesson's
 * Lua side (lsn_vm.h) says what it waits for; the runner steps the engine,
 * checks conditions and goals, takes the learner's answers and flag
 * changes, saves progress after every step and replays a lesson to its
 * saved step. What the lesson shows is the scene (lsn_scene.h). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kv_args.h"
#include "kv_release.h"
#include "kv_snapshot.h"
#include "lsn_lever.h"
#include "lsn_runner_int.h"

#define DEFAULT_SPEED 20.0                 /* engine steps per second while animating */
#define MAX_STEPS_PER_TICK 1000

/* ---- small helpers ------------------------------------------------------ */

void lsn_run_logf(lsn_runner *r, const char *fmt, ...)
{
    if (!r->chk.log)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->chk.log, fmt, ap);
    va_end(ap);
}

void lsn_run_error(lsn_runner *r, const char *fmt, ...)
{
    char tmp[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    lsn_sb_clear(&r->error);
    lsn_sb_add(&r->error, tmp, strlen(tmp));
    r->has_error = 1;
    r->pace.wait = W_ERROR;
    r->q.active = 0;
    r->g.active = 0;
    r->changes |= LSN_CH_STATE | LSN_CH_TEXT | LSN_CH_QUESTION | LSN_CH_GOAL;
}

static void vm_error(lsn_runner *r)
{
    lsn_run_error(r, "%s", lsn_vm_error(r->vm));
}

static void say_line(lsn_runner *r, const char *s)
{
    lsn_stage_say(&r->stage, s, strlen(s));
    r->changes |= LSN_CH_TEXT;
}

static void clear_question(lsn_runner *r)
{
    lsn_ask_clear(&r->q);
}

static void clear_goal(lsn_runner *r)
{
    lsn_goal_spec_clear(&r->g);
    lsn_vm_drop(r->vm, LSN_FN_GOAL);
}

static void ahead_clear(lsn_runner *r);

/* ---- progress -------------------------------------------------------------- */

static void sync_infos(lsn_runner *r)
{
    for (int i = 0; i < r->course.nlessons; i++) {
        lsn_info *l = &r->course.lessons[i];
        if (l->number <= LSN_MAX_LESSONS) {
            l->done = r->saving.progress.lessons[l->number].done;
            l->step = r->saving.progress.lessons[l->number].step;
        }
    }
}

static void save_progress(lsn_runner *r)
{
    sync_infos(r);
    if (!r->saving.save || r->chk.on || r->pace.replaying)
        return;
    lsn_saving *sv = &r->saving;
    char err[sizeof sv->failed];
    if (lsn_progress_save(&sv->progress, sv->path, err, sizeof err) < 0) {
        /* say it when it starts failing or fails another way, not at every
         * step; keep trying at every step (the disk may have room again) */
        if (strcmp(err, sv->failed))
            snprintf(sv->notice, sizeof sv->notice, "Progress not saved: %s. kvlab tries again after every step.",
                     err);
        snprintf(sv->failed, sizeof sv->failed, "%s", err);
    } else if (sv->failed[0]) {
        sv->failed[0] = '\0';
        snprintf(sv->notice, sizeof sv->notice, "Progress saved again (%s).", sv->path);
    }
}

static void record(lsn_runner *r, lsn_input_kind kind, const char *name, const char *value)
{
    if (r->pace.replaying || r->chk.on || !r->les.number)
        return;
    lsn_progress_add_input(&r->saving.progress, r->les.number, r->pace.step, kind, name, value);
}

static void complete_step(lsn_runner *r)
{
    if (r->chk.on && r->verbose) /* kvlab check -v: show the page as the learner would see it */
        lsn_run_logf(r, "    --- step %d, page %d \"%s\":\n%s\n", r->pace.step + 1, r->stage.page_no,
                     r->stage.page_title, r->stage.text.s ? r->stage.text.s : "");
    r->pace.step++;
    r->srv.step_starts = 0;
    if (r->pace.replaying || r->chk.on)
        return;
    lsn_lesson_progress *p = &r->saving.progress.lessons[r->les.number];
    p->step = r->pace.step;
    r->saving.progress.current = r->les.number;
    save_progress(r);
}

/* ---- the server, for the lab API ------------------------------------------- */

static void sync_flags(lsn_runner *r)
{
    if (lsn_offer_sync(&r->offer, r->srv.server))
        r->changes |= LSN_CH_FLAGS;
    /* the release row is the learner's choice, whatever the server holds */
    const char *rel = strcmp(lsn_release_accounting(r), "textbook") ? lsn_release_version(r) : "textbook";
    if (lsn_offer_set_value(&r->offer, "vllm-version", rel) |
        lsn_offer_set_value(&r->offer, "accounting", lsn_release_accounting(r)))
        r->changes |= LSN_CH_FLAGS;
}

static int start_server(lsn_runner *r)
{
    r->srv.started = 1;
    r->srv.ticks = 0;
    r->srv.step_starts++;
    int rc = lsn_server_start(r->srv.server, r->srv.err, sizeof r->srv.err);
    r->srv.has_err = rc != 1;
    if (rc == 1) /* a new engine, its clock at 0: the traffic starts its run again */
        lsn_traffic_rewind(&r->traffic, 0);
    r->changes |= LSN_CH_SERVER | LSN_CH_ENGINE | LSN_CH_FLAGS;
    sync_flags(r);
    if (rc == 1) /* before any step: the run is seekable from its start */
        lsn_runs_record(&r->runs, lsn_server_engine(r->srv.server), lsn_server_plan(r->srv.server), &r->offer);
    return rc;
}

static void save_progress(lsn_runner *r);

static int env_score(void *host, const lsn_score *s, lsn_score *before)
{
    lsn_runner *r = host;
    if (s->changes < 0) { /* a look-up (lab.best) */
        const lsn_score *k;
        int n = lsn_scores(r, r->les.number, &k);
        memset(before, 0, sizeof *before);
        for (int i = 0; i < n; i++)
            if (!strcmp(k[i].key, s->key))
                *before = k[i];
        return 0;
    }
    int rc = lsn_progress_score(&r->saving.progress, r->les.number, s, before);
    if (rc > 0)
        save_progress(r);
    return rc;
}

int lsn_scores(const lsn_runner *r, int number, const lsn_score **scores)
{
    if (number < 1 || number > LSN_MAX_LESSONS) {
        *scores = NULL;
        return 0;
    }
    *scores = r->saving.progress.lessons[number].scores;
    return r->saving.progress.lessons[number].nscores;
}

static int env_start_server(void *host, char *err, size_t errlen)
{
    lsn_runner *r = host;
    int rc = start_server(r);
    snprintf(err, errlen, "%s", r->srv.err);
    return rc;
}

static void env_stop_server(void *host)
{
    lsn_runner *r = host;
    lsn_server_stop(r->srv.server);
    r->srv.started = 0;
    r->changes |= LSN_CH_SERVER;
}

/* ---- creation -------------------------------------------------------------- */

lsn_runner *lsn_new(const lsn_config *cfg, char *err, size_t errlen)
{
    if (!cfg || !cfg->lessons_dir || !cfg->assets_dir) {
        snprintf(err, errlen, "no lessons or assets folder given");
        return NULL;
    }
    lsn_runner *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(r->lessons_dir, sizeof r->lessons_dir, "%s", cfg->lessons_dir);
    size_t n = strlen(r->lessons_dir);
    while (n > 1 && r->lessons_dir[n - 1] == '/')
        r->lessons_dir[--n] = '\0';
    const char *base = strrchr(r->lessons_dir, '/');
    snprintf(r->lessons_name, sizeof r->lessons_name, "%.255s", base && base[1] ? base + 1 : r->lessons_dir);
    snprintf(r->assets_dir, sizeof r->assets_dir, "%s", cfg->assets_dir);
    r->headless = cfg->headless;
    r->verbose = cfg->verbose;
    r->device = cfg->device;
    r->limits = cfg->limits;
    r->chk.max_waits = cfg->limits.check_waits > 0 ? cfg->limits.check_waits : 100000;
    r->chk.max_engine_steps = cfg->limits.check_engine_steps > 0 ? cfg->limits.check_engine_steps : 10000000;
    r->interrupt = cfg->interrupt;
    r->pace.speed = DEFAULT_SPEED;
    r->pace.speed_factor = 1;
    lsn_runs_init(&r->runs, cfg->history_bytes);
    lsn_stage_reset(&r->stage);
    if (lsn_course_load(&r->course, r->lessons_dir, err, errlen) < 0) {
        lsn_stage_free(&r->stage);
        free(r);
        return NULL;
    }
    r->srv.server = lsn_server_new(r->assets_dir, r->device, r->headless, err, errlen);
    if (!r->srv.server) {
        lsn_course_free(&r->course);
        lsn_stage_free(&r->stage);
        free(r);
        return NULL;
    }
    lsn_saving *sv = &r->saving;
    lsn_progress_init(&sv->progress);
    const char *sd = cfg->state_dir;
    if (sd && !sd[0]) {
        sv->save = 0;
    } else if (lsn_progress_path(sd, sv->path, sizeof sv->path) == 0) {
        sv->save = 1;
        int rc = lsn_progress_load(&sv->progress, sv->path, sv->notice, sizeof sv->notice);
        if (rc < 0)
            sv->save = 0;
    } else {
        snprintf(sv->notice, sizeof sv->notice, "Neither XDG_STATE_HOME nor HOME is set: progress will not be saved.");
    }
    /* a release the progress file names that this kvlab does not know: the newest, said once */
    char why[256];
    if (sv->progress.vllm_version[0] && !kv_release_find(sv->progress.vllm_version, why, sizeof why)) {
        snprintf(sv->notice, sizeof sv->notice, "The progress file's vLLM release %s is not one kvlab knows (%s): "
                 "the lessons follow the newest, %s.", sv->progress.vllm_version, why, kv_release_newest()->first);
        sv->progress.vllm_version[0] = '\0';
    }
    if ((cfg->vllm_version || cfg->accounting) &&
        lsn_set_release(r, cfg->vllm_version, cfg->accounting, err, errlen) < 0) {
        lsn_free(r);
        return NULL;
    }
    sync_infos(r);
    return r;
}

void lsn_run_unload(lsn_runner *r)
{
    clear_question(r);
    clear_goal(r);
    lsn_vm_free(r->vm);
    r->vm = NULL;
    lsn_traffic_stop(&r->traffic);
    lsn_pace *p = &r->pace;
    p->wait = W_NONE;
    p->step = 0;
    r->srv.step_starts = 0;
    p->autorun = 0;
    p->speed = DEFAULT_SPEED;
    p->accum = 0;
    p->steps_left = p->steps_done = p->max_steps = 0;
    r->les.number = 0;
    r->les.title[0] = '\0';
    lsn_sb_clear(&r->error);
    r->has_error = 0;
    lsn_stage_reset(&r->stage);
    lsn_offer_clear(&r->offer);
    lsn_server_stop(r->srv.server);
    lsn_server_reset_args(r->srv.server);
    r->srv.started = 0;
    r->srv.has_err = 0;
    r->srv.err[0] = '\0';
}

void lsn_free(lsn_runner *r)
{
    if (!r)
        return;
    lsn_run_unload(r);
    lsn_runs_free(&r->runs);
    ahead_clear(r);
    lsn_stage_free(&r->stage);
    lsn_sb_free(&r->error);
    lsn_server_free(r->srv.server);
    lsn_course_free(&r->course);
    lsn_progress_clear(&r->saving.progress);
    free(r);
}

const char *lsn_notice(const lsn_runner *r) { return r->saving.notice[0] ? r->saving.notice : NULL; }
void lsn_notice_clear(lsn_runner *r) { r->saving.notice[0] = '\0'; }

int lsn_count(const lsn_runner *r) { return r->course.nlessons; }

const lsn_info *lsn_info_at(const lsn_runner *r, int index)
{
    return index >= 0 && index < r->course.nlessons ? &r->course.lessons[index] : NULL;
}

const lsn_info *lsn_info_of(const lsn_runner *r, int number) { return lsn_info_at(r, number - 1); }

int lsn_resume_lesson(const lsn_runner *r)
{
    const lsn_info *cur = lsn_info_of(r, r->saving.progress.current);
    if (cur && cur->available)
        return cur->number;
    for (int i = 0; i < r->course.nlessons; i++)
        if (r->course.lessons[i].available && !r->course.lessons[i].done)
            return r->course.lessons[i].number;
    return 1;
}

/* ---- the coroutine ---------------------------------------------------------- */

static void lesson_done(lsn_runner *r)
{
    clear_question(r);
    clear_goal(r);
    if (r->pace.replaying || r->chk.on)
        return;
    lsn_lesson_progress *p = &r->saving.progress.lessons[r->les.number];
    p->done = 1;
    p->step = r->pace.step;
    r->saving.progress.current = r->les.number;
    save_progress(r);
}

static int apply_remembered(lsn_runner *r);

/* Resume the lesson with these values as the results of its wait. */
static void resume(lsn_runner *r, int nvals, const lsn_val *vals)
{
    if (!r->vm || r->pace.wait == W_ERROR || r->pace.wait == W_DONE)
        return;
    r->pace.wait = W_NONE;
    lsn_wait_req req;
    lsn_wait w = lsn_vm_resume(r->vm, nvals, vals, &req);
    r->changes |= LSN_CH_STATE;
    if (w == W_ERROR) {
        vm_error(r);
        return;
    }
    r->pace.wait = w;
    if (w == W_DONE) {
        lesson_done(r);
        return;
    }
    if (w == W_STEPS)
        r->pace.steps_left = req.steps;
    if (w == W_RUN_UNTIL || w == W_COND) {
        r->pace.max_steps = req.max_steps;
        r->pace.steps_done = 0;
    }
    apply_remembered(r); /* forward again onto a step answered before */
}

static void resume0(lsn_runner *r)
{
    resume(r, 0, NULL);
}

static void resume_bool(lsn_runner *r, int v)
{
    lsn_vm_drop(r->vm, LSN_FN_COND);
    lsn_val val = {.kind = LSN_VAL_BOOL, .i = v};
    resume(r, 1, &val);
}

/* The answer's value (a number, or the picked choice) and the tries. */
static void resume_answer(lsn_runner *r, int picked, double value, int tries)
{
    lsn_val v[2] = {{.kind = LSN_VAL_NUM, .num = value}, {.kind = LSN_VAL_INT, .i = tries}};
    if (picked) {
        v[0].kind = LSN_VAL_INT;
        v[0].i = picked;
    }
    resume(r, 2, v);
}

/* A condition or goal check: 1, 0, or -1 after an error (runner in W_ERROR). */
static int test_fn(lsn_runner *r, lsn_fn which)
{
    int v = lsn_vm_test(r->vm, which);
    if (v < 0)
        vm_error(r);
    return v;
}

void lsn_run_finish_goal(lsn_runner *r)
{
    int changes = r->g.changes;
    clear_goal(r);
    r->changes |= LSN_CH_GOAL;
    complete_step(r);
    lsn_val v = {.kind = LSN_VAL_INT, .i = changes};
    resume(r, 1, &v);
}

int lsn_run_goal_uncounted(lsn_runner *r)
{
    lsn_goal_spec *g = &r->g;
    for (int i = 0; i < g->noff; i++) {
        char now[512];
        if (lsn_server_get(r->srv.server, g->off_names[i], now, sizeof now) < 0)
            now[0] = '\0';
        if (strcmp(now, g->off_values[i]))
            return 1;
    }
    return 0;
}

/* Before flag `canon` changes while a goal is pending: a lever the goal does
 * not count gets its value from before (once). Returns 1 when it counts. */
static int goal_note_lever(lsn_runner *r, const char *canon)
{
    lsn_goal_spec *g = &r->g;
    if (r->pace.wait != W_GOAL || !g->active || lsn_lever_counts(canon, g->levers, g->nlevers))
        return 1;
    for (int i = 0; i < g->noff; i++)
        if (!strcmp(g->off_names[i], canon))
            return 0;
    char was[512];
    if (lsn_server_get(r->srv.server, canon, was, sizeof was) < 0)
        was[0] = '\0';
    char **nn = realloc(g->off_names, (size_t)(g->noff + 1) * sizeof *nn);
    if (nn)
        g->off_names = nn;
    char **nv = nn ? realloc(g->off_values, (size_t)(g->noff + 1) * sizeof *nv) : NULL;
    if (nv)
        g->off_values = nv;
    char *a = nv ? strdup(canon) : NULL, *b = a ? strdup(was) : NULL;
    if (!b) {
        free(a);
        return 0; /* out of memory: the lever is still not counted, only not remembered */
    }
    g->off_names[g->noff] = a;
    g->off_values[g->noff++] = b;
    return 0;
}

void lsn_run_check_goal(lsn_runner *r)
{
    if (r->pace.wait != W_GOAL || !r->g.active || r->g.met)
        return;
    if (lsn_run_goal_uncounted(r))
        return;
    if (test_fn(r, LSN_FN_GOAL) > 0) {
        r->g.met = 1;
        r->g.pub.met = 1;
        r->changes |= LSN_CH_GOAL;
    }
}

int lsn_run_engine_step(lsn_runner *r)
{
    kv_engine *e = lsn_server_engine(r->srv.server);
    if (!e)
        return 0;
    kv_engine_info info;
    kv_engine_get_info(e, &info);
    lsn_traffic *t = &r->traffic;
    if (r->chk.on && ++r->chk.engine_steps > r->chk.max_engine_steps) {
        lsn_run_error(r, "%s: kvlab check: the lesson ran more than %ld engine steps (an endless run?)",
                      r->les.shown_path, r->chk.max_engine_steps);
        return -1;
    }
    if (t->active && t->fn) {
        if (lsn_vm_traffic(r->vm, e, info.step, info.clock_s) < 0) {
            vm_error(r);
            return -1;
        }
        r->changes |= LSN_CH_ENGINE;
    } else if (t->active) {
        lsn_traffic_feed(t, e, info.clock_s);
    }
    char err[512];
    kv_step_result res;
    r->srv.ticks++;
    int n = kv_engine_step(e, &res, err, sizeof err);
    if (n < 0) {
        lsn_run_error(r, "the engine stopped: %s", err);
        return -1;
    }
    r->srv.last_step = res;
    if (n == 0 && lsn_traffic_pending(t)) {
        /* idle: jump to the next arrival */
        double next = lsn_traffic_next_s(t);
        kv_engine_advance_clock(e, next > info.clock_s ? next : info.clock_s + 1e-3);
    } else if (n == 0 && t->active && t->fn) {
        /* idle with a function generator: let time pass (10 ms a step) so a
         * generator that sends by the clock gets to its next arrival */
        kv_engine_advance_clock(e, info.clock_s + 0.01);
    }
    r->changes |= LSN_CH_ENGINE;
    if (lsn_vm_on_step(r->vm, n) < 0) {
        vm_error(r);
        return -1;
    }
    return n;
}

/* Finish a step wait at once (headless, replay, or "next" while animating). */
/* Wall-clock seconds, monotonic. */
static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Has more than budget_s passed since t0 (checked every 16 calls)? 0 = no budget. */
static int over_time(double t0, double budget_s, long i)
{
    return budget_s > 0 && (i & 15) == 15 && mono_s() - t0 > budget_s;
}

/* In the app, "next" finishes an animation at once, but never takes longer
 * than this: what is left goes on animating (lsn_tick), keys stay live. */
#define FINISH_BUDGET_S 0.25
#define TICK_BUDGET_S 0.05

static double finish_budget(const lsn_runner *r)
{
    return r->headless || r->pace.replaying || r->chk.on ? 0 : FINISH_BUDGET_S;
}

static void finish_steps(lsn_runner *r)
{
    double t0 = mono_s(), budget = finish_budget(r);
    for (long i = 0; r->pace.wait == W_STEPS && r->pace.steps_left > 0; i++) {
        if (over_time(t0, budget, i))
            return;
        if (lsn_run_engine_step(r) < 0)
            return;
        r->pace.steps_left--;
    }
    if (r->pace.wait == W_STEPS)
        resume0(r);
}

/* One step of lab.run_until: 1 when the wait ended (or failed). */
static int run_until_step(lsn_runner *r)
{
    if (lsn_run_engine_step(r) < 0)
        return 1;
    r->pace.steps_done++;
    int c = test_fn(r, LSN_FN_COND);
    if (c < 0)
        return 1;
    if (c || r->pace.steps_done >= r->pace.max_steps) {
        resume_bool(r, c);
        return 1;
    }
    return 0;
}

static void finish_run_until(lsn_runner *r)
{
    double t0 = mono_s(), budget = finish_budget(r);
    for (long i = 0; r->pace.wait == W_RUN_UNTIL && !over_time(t0, budget, i) && !run_until_step(r); i++) {
    }
}

static void finish_cond_headless(lsn_runner *r)
{
    int c = test_fn(r, LSN_FN_COND);
    for (int64_t i = 0; c == 0 && i < r->pace.max_steps && lsn_server_engine(r->srv.server); i++) {
        if (lsn_run_engine_step(r) < 0)
            return;
        c = test_fn(r, LSN_FN_COND);
    }
    if (c < 0)
        return;
    if (c)
        resume_bool(r, 1);
    else
        lsn_run_error(r, "%s: lab.wait_until: the condition never held within %lld engine steps in headless mode "
                         "(for something the learner must do, use lab.goal with a script)",
                      r->les.shown_path, (long long)r->pace.max_steps);
}

/* ---- loading ---------------------------------------------------------------- */

static int start_lesson(lsn_runner *r, int number)
{
    const lsn_info *info = lsn_info_of(r, number);
    if (!info) {
        r->les.number = 0;
        lsn_run_error(r, "There is no lesson %d (the course has %d).", number, r->course.nlessons);
        return -1;
    }
    lsn_lesson *les = &r->les;
    les->number = number;
    lsn_runs_lesson(&r->runs, number);
    snprintf(les->title, sizeof les->title, "%s", info->title);
    lsn_course_path(&r->course, number, les->path, sizeof les->path);
    snprintf(les->shown_path, sizeof les->shown_path, "%.255s/%.1024s", r->lessons_name, info->file);
    r->rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)number * 0xBF58476D1CE4E5B9ull;
    if (!info->available) {
        lsn_run_error(r, "Lesson %d (%s) is not written yet: %s is missing.", number, info->title, les->shown_path);
        return -1;
    }
    lsn_lab_env env = {
        .stage = &r->stage, .ask = &r->q, .goal = &r->g, .server = r->srv.server, .traffic = &r->traffic,
        .rng = &r->rng, .speed = &r->pace.speed, .autorun = &r->pace.autorun, .last_step = &r->srv.last_step,
        .changes = &r->changes, .log = &r->chk.log, .headless = r->headless, .verbose = r->verbose,
        .lessons_dir = r->lessons_dir, .lessons_name = r->lessons_name, .number = number,
        .title = les->title, .shown_path = les->shown_path, .limits = r->limits, .interrupt = r->interrupt,
        .start_server = env_start_server, .stop_server = env_stop_server, .score = env_score, .host = r,
        .voice = r->voice, .vllm_version = lsn_release_version(r), .accounting = lsn_release_accounting(r),
    };
    char err[512];
    r->vm = lsn_vm_new(&env, err, sizeof err);
    if (!r->vm) {
        lsn_run_error(r, "Could not start lesson %d: %s", number, err);
        return -1;
    }
    if (lsn_vm_load(r->vm, les->path, &r->offer, les->title, sizeof les->title) < 0) {
        vm_error(r);
        return -1;
    }
    lsn_text_clean(les->title, strlen(les->title), 0); /* the lesson file's own title, too */
    lsn_offer_build(&r->offer, r->srv.server);
    sync_flags(r);
    r->changes |= LSN_CH_TEXT | LSN_CH_VIEWS | LSN_CH_STATE | LSN_CH_FLAGS | LSN_CH_SERVER;
    resume0(r);
    return r->pace.wait == W_ERROR ? -1 : 0;
}

/* Apply the recorded flag changes made at wait w (replay). */
static void replay_flags(lsn_runner *r, int w)
{
    const lsn_lesson_progress *p = &r->saving.progress.lessons[r->les.number];
    for (int i = 0; i < p->ninputs && r->pace.wait != W_ERROR; i++) {
        const lsn_input *in = &p->inputs[i];
        if (in->wait == w && in->kind == LSN_IN_FLAG) {
            char err[256];
            lsn_set_flag(r, in->name, in->value, err, sizeof err);
        }
    }
}

static const lsn_input *recorded_answer(lsn_runner *r, int w)
{
    const lsn_lesson_progress *p = &r->saving.progress.lessons[r->les.number];
    const lsn_input *found = NULL;
    for (int i = 0; i < p->ninputs; i++)
        if (p->inputs[i].wait == w && p->inputs[i].kind != LSN_IN_FLAG)
            found = &p->inputs[i];
    return found;
}

void lsn_run_drive(lsn_runner *r, int target)
{
    lsn_pace *p = &r->pace;
    for (long guard = 0; guard < 1000000; guard++) {
        if (r->chk.on && p->wait != W_DONE && p->wait != W_ERROR && ++r->chk.waits > r->chk.max_waits) {
            lsn_run_error(r, "%s: kvlab check: the lesson waited more than %ld times (an endless loop of waits?)",
                          r->les.shown_path, r->chk.max_waits);
            return;
        }
        if (p->replaying && p->stop_early && p->step >= target && r->srv.step_starts >= p->stop_early - 1 &&
            (p->wait == W_STEPS || p->wait == W_RUN_UNTIL || p->wait == W_COND))
            return; /* lsn_replay: the follower runs the engine from here */
        /* kvlab check: the page as the learner would see it while it waits */
        if (r->chk.on && r->chk.page && (p->wait == W_NEXT || p->wait == W_ANSWER || p->wait == W_GOAL)) {
            r->chk.page(r);
            if (r->chk.failed)
                return;
        }
        switch (p->wait) {
        case W_STEPS:
            finish_steps(r);
            break;
        case W_RUN_UNTIL:
            finish_run_until(r);
            break;
        case W_COND:
            finish_cond_headless(r);
            break;
        case W_NEXT:
            if (p->replaying) {
                replay_flags(r, p->step);
                if (p->step >= target)
                    return;
            }
            complete_step(r);
            resume0(r);
            break;
        case W_ANSWER:
            if (r->chk.on) {
                r->chk.question(r);
                if (r->chk.failed)
                    return;
            } else {
                replay_flags(r, p->step);
                if (p->step >= target)
                    return;
                const lsn_input *in = recorded_answer(r, p->step);
                lsn_verdict v;
                if (!in)
                    return;
                if (in->kind == LSN_IN_REVEAL)
                    lsn_reveal(r);
                else if (lsn_answer(r, in->value, &v), v.kind != LSN_V_CORRECT)
                    return;
            }
            break;
        case W_GOAL:
            if (r->chk.on) {
                r->chk.goal(r);
                if (r->chk.failed)
                    return;
            } else {
                replay_flags(r, p->step);
                if (p->step >= target)
                    return;
                lsn_run_check_goal(r);
                /* a goal reached by running a while (lab.goal{steps=}) */
                for (int64_t k = 0; k < r->g.steps && !r->g.met && p->wait == W_GOAL; k++) {
                    if (lsn_run_engine_step(r) < 0)
                        return;
                    if (k % 8 == 7 || k == r->g.steps - 1)
                        lsn_run_check_goal(r);
                }
                if (p->wait != W_GOAL || !r->g.met)
                    return;
                lsn_run_finish_goal(r);
            }
            break;
        default:
            return;
        }
    }
}

int lsn_load(lsn_runner *r, int number, int resume_saved)
{
    lsn_run_unload(r);
    ahead_clear(r); /* lsn_back hands its own over after loading */
    r->changes = 0;
    if (start_lesson(r, number) < 0)
        return -1;
    if (resume_saved && !r->chk.on && number <= LSN_MAX_LESSONS) {
        int target = r->saving.progress.lessons[number].step;
        if (target > 0) {
            r->pace.replaying = 1;
            lsn_run_drive(r, target);
            r->pace.replaying = 0;
        }
    }
    if (!r->chk.on) {
        r->saving.progress.current = number;
        save_progress(r);
    }
    return r->pace.wait == W_ERROR ? -1 : 0;
}

int lsn_replay(lsn_runner *r, int number, int step, const lsn_input *in, int nin, int stop_early)
{
    if (number < 1 || number > LSN_MAX_LESSONS || step < 0 || nin < 0)
        return lsn_load(r, number, 0); /* sets the error for a bad number */
    lsn_progress *pg = &r->saving.progress;
    lsn_progress_truncate(pg, number, 0);
    for (int i = 0; i < nin; i++)
        if (lsn_progress_add_input(pg, number, in[i].wait, in[i].kind, in[i].name, in[i].value) < 0)
            break;
    pg->lessons[number].step = step;
    int save = r->saving.save;
    r->saving.save = 0; /* what is replayed is someone else's: never written */
    r->pace.stop_early = stop_early;
    int rc = lsn_load(r, number, 1);
    r->pace.stop_early = 0;
    r->saving.save = save;
    return rc;
}

int64_t lsn_engine_ticks(const lsn_runner *r) { return r->srv.ticks; }

int lsn_engine_starts(const lsn_runner *r) { return r->srv.server ? lsn_server_starts(r->srv.server) : 0; }

int lsn_step_starts(const lsn_runner *r) { return r->srv.step_starts; }

struct kv_history *lsn_history(const lsn_runner *r) { return r->runs.h; }

const struct kv_plan *lsn_history_plan(const lsn_runner *r, int64_t pos) { return lsn_runs_plan(&r->runs, pos); }

const char *lsn_history_flag(const lsn_runner *r, int64_t pos, const char *name)
{
    return lsn_runs_flag(&r->runs, pos, name);
}

void lsn_set_history_bytes(lsn_runner *r, uint64_t bytes) { r->runs.bytes = bytes; }

const char *lsn_history_error(const lsn_runner *r) { return r->runs.err[0] ? r->runs.err : NULL; }

int lsn_engine_runs(const lsn_runner *r)
{
    const lsn_pace *p = &r->pace;
    if (!r->vm || !lsn_server_engine(r->srv.server))
        return 0;
    return p->wait == W_STEPS || p->wait == W_RUN_UNTIL || p->autorun;
}

const lsn_input *lsn_inputs(const lsn_runner *r, int *n)
{
    int num = r->les.number;
    if (num < 1 || num > LSN_MAX_LESSONS) {
        *n = 0;
        return NULL;
    }
    *n = r->saving.progress.lessons[num].ninputs;
    return r->saving.progress.lessons[num].inputs;
}

void lsn_set_voice(lsn_runner *r, const char *who)
{
    snprintf(r->voice, sizeof r->voice, "%s", who ? who : "");
}

int lsn_save_to(lsn_runner *r, const char *state_dir, char *err, size_t errlen)
{
    lsn_saving *sv = &r->saving;
    char path[PATH_MAX], notice[768] = "";
    if (state_dir && !state_dir[0]) {
        sv->save = 0; /* a follower back with its presenter keeps nothing */
        return 0;
    }
    if (lsn_progress_path(state_dir, path, sizeof path) < 0) {
        snprintf(err, errlen, "no folder to save progress in (set XDG_STATE_HOME or HOME)");
        return -1;
    }
    /* What was saved there before, with the loaded lesson as it is now. */
    lsn_progress old;
    lsn_progress_init(&old);
    if (lsn_progress_load(&old, path, notice, sizeof notice) < 0) {
        snprintf(err, errlen, "%s", notice);
        lsn_progress_clear(&old);
        return -1;
    }
    int num = r->les.number;
    if (num >= 1 && num <= LSN_MAX_LESSONS) {
        lsn_lesson_progress *cur = &sv->progress.lessons[num];
        lsn_progress_truncate(&old, num, 0);
        old.lessons[num].step = r->pace.step;
        old.lessons[num].done |= cur->done;
        for (int i = 0; i < cur->ninputs; i++)
            lsn_progress_add_input(&old, num, cur->inputs[i].wait, cur->inputs[i].kind, cur->inputs[i].name,
                                   cur->inputs[i].value);
        old.current = num;
    }
    lsn_progress_clear(&sv->progress);
    sv->progress = old;
    snprintf(sv->path, sizeof sv->path, "%s", path);
    sv->save = 1;
    if (notice[0])
        snprintf(sv->notice, sizeof sv->notice, "%s", notice);
    save_progress(r);
    if (sv->failed[0]) {
        snprintf(err, errlen, "%s", sv->failed);
        return -1;
    }
    return 0;
}

int lsn_current(const lsn_runner *r) { return r->les.number; }
const char *lsn_title(const lsn_runner *r) { return r->les.number ? r->les.title : ""; }

lsn_state lsn_get_state(const lsn_runner *r)
{
    switch (r->pace.wait) {
    case W_NONE: return r->vm ? LSN_RUNNING : (r->has_error ? LSN_ERROR : LSN_IDLE);
    case W_STEPS:
    case W_RUN_UNTIL: return LSN_RUNNING;
    case W_COND: return LSN_WAIT_COND;
    case W_NEXT: return LSN_WAIT_NEXT;
    case W_ANSWER: return LSN_WAIT_ANSWER;
    case W_GOAL: return LSN_WAIT_GOAL;
    case W_DONE: return LSN_DONE;
    case W_ERROR: return LSN_ERROR;
    }
    return LSN_IDLE;
}

const char *lsn_state_name(lsn_state s)
{
    static const char *const names[] = {"idle", "running", "wait-cond", "wait-next",
                                        "wait-answer", "wait-goal", "done", "error"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

/* One engine step for the wait that runs the engine (lab.step, lab.run_until,
 * lab.autorun): 0 when no wait steps it, 1 after a step, 2 after a step that
 * ended the wait (the lesson resumed), -1 after an error. */
static int step_wait(lsn_runner *r)
{
    lsn_pace *p = &r->pace;
    if (p->wait == W_STEPS) {
        if (lsn_run_engine_step(r) < 0)
            return -1;
        if (--p->steps_left <= 0) {
            resume0(r);
            return 2;
        }
        return 1;
    }
    if (p->wait == W_RUN_UNTIL)
        return run_until_step(r) ? 2 : 1;
    if (p->autorun && lsn_server_engine(r->srv.server))
        return lsn_run_engine_step(r) < 0 ? -1 : 1;
    return 0;
}

/* After the engine moved: a wait condition or a goal may hold now. */
static void recheck(lsn_runner *r)
{
    lsn_pace *p = &r->pace;
    if (p->wait == W_COND) {
        int c = test_fn(r, LSN_FN_COND);
        if (c > 0)
            resume_bool(r, 1);
    }
    if (p->wait == W_GOAL && r->g.active && !r->g.met)
        lsn_run_check_goal(r);
}

unsigned lsn_tick(lsn_runner *r, double dt)
{
    r->changes = 0;
    lsn_pace *p = &r->pace;
    if (!r->vm || p->wait == W_ERROR)
        return 0;
    if (p->wait == W_GOAL && r->g.met) {
        lsn_run_finish_goal(r);
        return r->changes;
    }
    int animating = p->wait == W_STEPS || p->wait == W_RUN_UNTIL;
    if ((animating || (p->autorun && lsn_server_engine(r->srv.server))) && dt > 0) {
        p->accum += dt * p->speed * p->speed_factor;
        long k = (long)p->accum;
        p->accum -= (double)k;
        if (k > MAX_STEPS_PER_TICK)
            k = MAX_STEPS_PER_TICK;
        double t0 = mono_s();
        for (long i = 0; i < k && p->wait != W_ERROR && !over_time(t0, TICK_BUDGET_S, i); i++)
            if (step_wait(r) != 1)
                break;
    }
    recheck(r);
    return r->changes;
}

unsigned lsn_tick_steps(lsn_runner *r, int64_t k)
{
    r->changes = 0;
    lsn_pace *p = &r->pace;
    if (!r->vm || p->wait == W_ERROR)
        return 0;
    if (p->wait == W_GOAL && r->g.met) {
        lsn_run_finish_goal(r);
        return r->changes;
    }
    unsigned ch = 0;
    for (int64_t i = 0; i < k && p->wait != W_ERROR; i++) {
        int s = step_wait(r);
        if (s <= 0)
            break;
        if (s == 2) { /* the lesson moved on: its next wait may check at once */
            ch |= r->changes;
            recheck(r);
        }
    }
    recheck(r);
    return r->changes | ch;
}

/* ---- engine images (a late joiner's start) ---------------------------------------- */

#define IMAGE_MAGIC 0x494c564bu   /* "KVLI" */
#define IMAGE_VERSION 1u

/* What an image holds before the engine's own bytes (kv_snapshot): raw
 * little-endian fields of this build, read back field by field. */
typedef struct image_head {
    uint32_t magic, version;
    int64_t ticks;                /* lsn_engine_ticks */
    int32_t traffic;              /* 0 none, 1 the table form (fn traffic is never imaged) */
    int32_t pad;
    lsn_traffic_pos pos;
} image_head;

int lsn_engine_image(const lsn_runner *r, kv_snapshot *img, char *err, size_t errlen)
{
    kv_engine *e = lsn_server_engine(r->srv.server);
    if (!e || !r->vm) {
        snprintf(err, errlen, "no engine runs");
        return -1;
    }
    const lsn_traffic *t = &r->traffic;
    if (t->active && t->fn) {
        snprintf(err, errlen, "the lesson's traffic is a function (its state is the lesson's own)");
        return -1;
    }
    if (kv_snapshot_save(e, img, err, errlen) != 0)
        return -1;
    image_head h;
    memset(&h, 0, sizeof h);
    h.magic = IMAGE_MAGIC;
    h.version = IMAGE_VERSION;
    h.ticks = r->srv.ticks;
    h.traffic = t->active ? 1 : 0;
    lsn_traffic_get_pos(t, &h.pos);
    /* the head goes first: grow, move the engine's bytes up, write it */
    if (img->len + sizeof h > img->cap) {
        uint8_t *nb = realloc(img->data, img->len + sizeof h);
        if (!nb) {
            snprintf(err, errlen, "out of memory imaging the engine");
            return -1;
        }
        img->data = nb;
        img->cap = img->len + sizeof h;
    }
    memmove(img->data + sizeof h, img->data, img->len);
    memcpy(img->data, &h, sizeof h);
    img->len += sizeof h;
    return 0;
}

int lsn_engine_load_image(lsn_runner *r, const uint8_t *image, size_t len, unsigned *changes, char *err,
                          size_t errlen)
{
    lsn_pace *p = &r->pace;
    kv_engine *e = lsn_server_engine(r->srv.server);
    lsn_traffic *t = &r->traffic;
    image_head h;
    *changes = 0;
    if (len < sizeof h) {
        snprintf(err, errlen, "not an engine image (%zu bytes)", len);
        return -1;
    }
    memcpy(&h, image, sizeof h);
    if (h.magic != IMAGE_MAGIC || h.version != IMAGE_VERSION || h.ticks < 0 || (h.traffic != 0 && h.traffic != 1)) {
        snprintf(err, errlen, "not an engine image of this kvlab");
        return -1;
    }
    /* An engine wait that ends before the image's tick (lab.step) or tests
     * the lesson's condition every step (lab.run_until) runs on first, as
     * ticking would, never past that tick. */
    while (r->vm && e == lsn_server_engine(r->srv.server) && r->srv.ticks < h.ticks &&
           (p->wait == W_RUN_UNTIL || (p->wait == W_STEPS && p->steps_left <= h.ticks - r->srv.ticks))) {
        int64_t before = r->srv.ticks;
        *changes |= lsn_tick_steps(r, p->wait == W_STEPS ? p->steps_left : 1);
        if (r->srv.ticks == before)
            break;
    }
    e = lsn_server_engine(r->srv.server);
    /* Where ticking would run lesson code per step, or could not go on to
     * the image's tick, the image is not taken: the caller ticks. */
    if (!r->vm || !e || p->wait == W_ERROR || p->wait == W_RUN_UNTIL || !lsn_engine_runs(r) ||
        h.ticks <= r->srv.ticks || (p->wait == W_STEPS && p->steps_left <= h.ticks - r->srv.ticks) ||
        lsn_vm_has(r->vm, LSN_FN_ON_STEP) || (t->active && t->fn))
        return 1;
    if (h.traffic != (t->active ? 1 : 0)) {
        snprintf(err, errlen, "the image's traffic is not this lesson's");
        return -1;
    }
    if (h.traffic && lsn_traffic_set_pos(t, &h.pos, err, errlen) < 0)
        return -1;
    kv_snapshot s = {(uint8_t *)(uintptr_t)(image + sizeof h), len - sizeof h, len - sizeof h, 0};
    /* The run recorded so far ends where the engine was (its journal must
     * not see the load: the history would count the jump as steps). */
    if (r->runs.h && kv_history_live(r->runs.h) == e)
        kv_history_detach(r->runs.h);
    if (kv_snapshot_load(e, &s, err, errlen) != 0)
        return -1;
    /* The image holds no K/V: blocks written before it hold none on this
     * device, so reading them back would report them as corrupted. */
    kv_engine_set_verify(e, 0);
    if (p->wait == W_STEPS)
        p->steps_left -= h.ticks - r->srv.ticks;
    r->srv.ticks = h.ticks;
    memset(&r->srv.last_step, 0, sizeof r->srv.last_step);
    /* The history cannot replay into the image: a new run starts here. */
    lsn_runs_record(&r->runs, e, lsn_server_plan(r->srv.server), &r->offer);
    r->changes = LSN_CH_ENGINE;
    recheck(r);
    *changes |= r->changes;
    return 0;
}

/* ---- back and forward ----------------------------------------------------------- */

static void inputs_free(lsn_input *v, int n)
{
    for (int i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].value);
    }
    free(v);
}

static void ahead_clear(lsn_runner *r)
{
    inputs_free(r->ahead.v, r->ahead.n);
    r->ahead.v = NULL;
    r->ahead.n = r->ahead.cap = 0;
}

/* Append a copy of `in`; an input that cannot be copied (out of memory) is
 * just not remembered: the learner is asked again. */
static void ahead_add(lsn_ahead *a, const lsn_input *in)
{
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 8;
        lsn_input *nv = realloc(a->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return;
        a->v = nv;
        a->cap = cap;
    }
    lsn_input *d = &a->v[a->n];
    d->wait = in->wait;
    d->kind = in->kind;
    d->name = in->name ? strdup(in->name) : NULL;
    d->value = in->value ? strdup(in->value) : NULL;
    if ((in->name && !d->name) || (in->value && !d->value)) {
        free(d->name);
        free(d->value);
        return;
    }
    a->n++;
}

/* The learner is (again) at a question or goal they went back over: feed the
 * answer or the flag changes remembered for this step, as a replay does. A
 * remembered answer that no longer checks (flags changed since) leaves the
 * question asked; a reveal is not repeated. Returns 1 when something was
 * applied. The remembered inputs of the step are used up either way. */
static int apply_remembered(lsn_runner *r)
{
    lsn_ahead *a = &r->ahead;
    if (r->pace.replaying || r->chk.on || a->n == 0 || !r->vm)
        return 0;
    if (!(r->pace.wait == W_ANSWER && r->q.active) && !(r->pace.wait == W_GOAL && r->g.active))
        return 0;
    int w = r->pace.step, k = 0, nmine = 0;
    lsn_input *mine = malloc((size_t)a->n * sizeof *mine);
    if (!mine)
        return 0;
    for (int i = 0; i < a->n; i++) {
        if (a->v[i].wait == w)
            mine[nmine++] = a->v[i];
        else
            a->v[k++] = a->v[i];
    }
    a->n = k;
    unsigned saved = r->changes; /* lsn_answer / lsn_set_flag start from 0 */
    int did = 0;
    if (r->pace.wait == W_ANSWER) {
        const lsn_input *ans = NULL;
        for (int i = 0; i < nmine; i++)
            if (mine[i].kind != LSN_IN_FLAG)
                ans = &mine[i];
        if (ans && ans->kind == LSN_IN_ANSWER && ans->value) {
            lsn_verdict v;
            int tries = r->q.tries, hints = r->q.hints_shown;
            a->from_before = 1;
            lsn_answer(r, ans->value, &v);
            a->from_before = 0;
            did = v.kind == LSN_V_CORRECT;
            if (!did && r->pace.wait == W_ANSWER && r->q.active) {
                /* not the learner's try: no count, no hint used up */
                r->q.tries = tries;
                r->q.hints_shown = hints;
            }
            if (did && !r->saving.notice[0]) { /* the lesson may turn the page at once */
                if (r->voice[0])
                    snprintf(r->saving.notice, sizeof r->saving.notice, "%s's answer: %.700s.", r->voice, ans->value);
                else
                    snprintf(r->saving.notice, sizeof r->saving.notice, "Your answer: %.700s (from before).",
                             ans->value);
            }
        }
    } else {
        for (int i = 0; i < nmine && r->pace.wait == W_GOAL; i++) {
            if (mine[i].kind != LSN_IN_FLAG)
                continue;
            char err[256];
            if (lsn_set_flag(r, mine[i].name, mine[i].value, err, sizeof err))
                did = 1;
        }
        if (did && r->pace.wait == W_GOAL && r->g.met) {
            char line[256];
            if (r->voice[0])
                snprintf(line, sizeof line, "%s reached this goal with these flag changes.", r->voice);
            else
                snprintf(line, sizeof line, "You reached this goal before: your flag changes were made again.");
            say_line(r, line);
        }
    }
    inputs_free(mine, nmine);
    r->changes |= saved;
    return did;
}

unsigned lsn_next(lsn_runner *r)
{
    r->changes = 0;
    switch (r->pace.wait) {
    case W_ANSWER:
    case W_GOAL:
        /* back onto a step answered before: n takes the answer from then */
        apply_remembered(r);
        break;
    case W_NEXT:
        complete_step(r);
        resume0(r);
        break;
    case W_STEPS:
        finish_steps(r);
        break;
    case W_RUN_UNTIL:
        finish_run_until(r);
        break;
    default:
        break;
    }
    return r->changes;
}

unsigned lsn_back(lsn_runner *r)
{
    if (!r->les.number || r->pace.step == 0)
        return 0;
    int n = r->les.number, target = r->pace.step - 1, from = r->pace.step;
    /* Remember what is about to be forgotten: what was remembered from an
     * earlier back for the step the learner is at and beyond (the steps
     * before it were lived again), then the inputs of the steps gone back
     * over. Within one step the older inputs come first: replay order. */
    lsn_ahead old = r->ahead;
    memset(&r->ahead, 0, sizeof r->ahead);
    for (int i = 0; i < old.n; i++)
        if (old.v[i].wait >= from)
            ahead_add(&r->ahead, &old.v[i]);
    inputs_free(old.v, old.n);
    const lsn_lesson_progress *p = &r->saving.progress.lessons[n];
    for (int i = 0; i < p->ninputs; i++)
        if (p->inputs[i].wait >= target)
            ahead_add(&r->ahead, &p->inputs[i]);
    lsn_ahead keep = r->ahead;
    memset(&r->ahead, 0, sizeof r->ahead);
    lsn_progress_truncate(&r->saving.progress, n, target);
    r->saving.progress.lessons[n].step = target;
    save_progress(r);
    lsn_load(r, n, 1);
    ahead_clear(r);
    r->ahead = keep;
    return r->changes | LSN_CH_TEXT | LSN_CH_VIEWS | LSN_CH_STATE | LSN_CH_SERVER;
}

unsigned lsn_reset(lsn_runner *r)
{
    int n = r->les.number;
    if (!n)
        return 0;
    lsn_progress_truncate(&r->saving.progress, n, 0);
    r->saving.progress.lessons[n].step = 0;
    save_progress(r);
    lsn_load(r, n, 0);
    return r->changes | LSN_CH_TEXT | LSN_CH_VIEWS | LSN_CH_STATE | LSN_CH_SERVER | LSN_CH_PLOT;
}

void lsn_set_speed(lsn_runner *r, double factor)
{
    r->pace.speed_factor = factor > 0 ? factor : 1;
}

int lsn_step(const lsn_runner *r) { return r->pace.step; }

/* ---- what the app shows -------------------------------------------------------- */

const char *lsn_text(const lsn_runner *r) { return r->stage.text.s ? r->stage.text.s : ""; }
const char *lsn_page_title(const lsn_runner *r) { return r->stage.page_title; }
int lsn_page_number(const lsn_runner *r) { return r->stage.page_no; }
const char *lsn_error(const lsn_runner *r)
{
    return r->pace.wait == W_ERROR && r->has_error ? r->error.s : NULL;
}

int lsn_view_count(const lsn_runner *r)
{
    (void)r;
    return LSN_NVIEWS;
}

const lsn_view *lsn_view_at(const lsn_runner *r, int index)
{
    return index >= 0 && index < LSN_NVIEWS ? &r->stage.views[index].pub : NULL;
}

const lsn_view *lsn_view_find(const lsn_runner *r, const char *name)
{
    const lsn_stage_view *v = lsn_stage_view_find(&r->stage, name);
    return v ? &v->pub : NULL;
}

const char *lsn_view_option(const lsn_runner *r, const char *view, const char *key)
{
    const lsn_view *v = lsn_view_find(r, view);
    if (!v)
        return NULL;
    for (int i = 0; i < v->noptions; i++)
        if (!strcmp(v->option_keys[i], key))
            return v->option_values[i];
    return NULL;
}

const lsn_plot *lsn_get_plot(const lsn_runner *r)
{
    return lsn_stage_get_plot((lsn_stage *)&r->stage); /* refreshes the public copy */
}

const lsn_question *lsn_get_question(const lsn_runner *r)
{
    if (r->pace.wait != W_ANSWER || !r->q.active)
        return NULL;
    return lsn_ask_public((lsn_ask *)&r->q);
}

const lsn_goal *lsn_get_goal(const lsn_runner *r)
{
    if (r->pace.wait != W_GOAL || !r->g.active)
        return NULL;
    return lsn_goal_spec_public((lsn_goal_spec *)&r->g);
}

const lsn_scene *lsn_scene_get(lsn_runner *r)
{
    lsn_scene *s = &r->scene;
    s->lesson = r->les.number;
    s->title = lsn_title(r);
    s->state = lsn_get_state(r);
    s->step = r->pace.step;
    s->text = lsn_text(r);
    s->page_title = r->stage.page_title;
    s->page_no = r->stage.page_no;
    s->error = lsn_error(r);
    s->views = lsn_stage_views(&r->stage);
    s->plot = lsn_get_plot(r);
    s->split = lsn_stage_get_split(&r->stage);
    s->question = lsn_get_question(r);
    s->goal = lsn_get_goal(r);
    s->nflags = r->offer.nflags;
    s->flags = r->offer.flags;
    s->server_error = lsn_server_error(r);
    s->serve_cmd = r->srv.server ? lsn_server_command(r->srv.server) : "";
    return s;
}

/* ---- answers ------------------------------------------------------------------- */

unsigned lsn_answer(lsn_runner *r, const char *text, lsn_verdict *v)
{
    r->changes = 0;
    lsn_verdict dummy;
    if (!v)
        v = &dummy;
    v->message[0] = '\0';
    if (r->pace.wait != W_ANSWER || !r->q.active) {
        v->kind = LSN_V_NO_QUESTION;
        snprintf(v->message, sizeof v->message, "Nothing is being asked right now.");
        return 0;
    }
    lsn_ask *q = &r->q;
    double value;
    int picked;
    lsn_check_result res = lsn_ask_check(q, text, &value, &picked, v->message, sizeof v->message);
    v->kind = res == LSN_CHECK_CORRECT ? LSN_V_CORRECT
            : res == LSN_CHECK_NEAR_MISS ? LSN_V_NEAR_MISS
            : res == LSN_CHECK_WRONG ? LSN_V_WRONG : LSN_V_UNREADABLE;
    r->changes |= LSN_CH_QUESTION;
    if (res == LSN_CHECK_CORRECT) {
        record(r, LSN_IN_ANSWER, NULL, text);
        char line[1024], picked_text[600];
        /* a choice reads back as the choice, not its letter alone */
        if (q->nchoices > 0 && picked >= 1 && picked <= q->nchoices && q->choices[picked - 1]) {
            snprintf(picked_text, sizeof picked_text, "%c) %s", 'a' + picked - 1, q->choices[picked - 1]);
            text = picked_text;
        }
        if (r->voice[0] && q->predict) /* a follower: the presenter's move, not the reader's */
            snprintf(line, sizeof line, "%s predicted %s.%s", r->voice, text,
                     r->ahead.from_before ? "" : " Now the engine runs.");
        else if (r->voice[0])
            snprintf(line, sizeof line, "%s's answer: %s. That's right.", r->voice, text);
        else if (q->predict)
            snprintf(line, sizeof line, r->ahead.from_before ? "Your prediction: %s (from before)."
                                                             : "Your prediction: %s. Now the engine runs.", text);
        else
            snprintf(line, sizeof line, r->ahead.from_before ? "Your answer: %s (from before). That's right."
                                                             : "Your answer: %s. That's right.", text);
        say_line(r, line);
        if (q->explain && q->explain[0]) {
            say_line(r, q->explain);
            size_t l = strlen(v->message);
            snprintf(v->message + l, sizeof v->message - l, " %s", q->explain);
        }
        int tries = q->tries;
        clear_question(r);
        complete_step(r);
        resume_answer(r, picked, value, tries);
        return r->changes;
    }
    if (res != LSN_CHECK_UNREADABLE) {
        q->tries++;
        if (q->hints_shown < q->nhints) {
            size_t l = strlen(v->message);
            snprintf(v->message + l, sizeof v->message - l, " Hint: %s", q->hints[q->hints_shown++]);
        }
    }
    return r->changes;
}

const char *lsn_hint(lsn_runner *r)
{
    if (r->pace.wait == W_ANSWER && r->q.active && r->q.hints_shown < r->q.nhints) {
        r->changes |= LSN_CH_QUESTION;
        return r->q.hints[r->q.hints_shown++];
    }
    if (r->pace.wait == W_GOAL && r->g.active && r->g.hints_shown < r->g.nhints) {
        r->g.pub.hints_shown = r->g.hints_shown + 1;
        r->changes |= LSN_CH_GOAL;
        return r->g.hints[r->g.hints_shown++];
    }
    return NULL;
}

static char reveal_buf[512];

const char *lsn_reveal(lsn_runner *r)
{
    if (r->pace.wait != W_ANSWER || !r->q.active)
        return NULL;
    lsn_ask *q = &r->q;
    double value = q->answer;
    int picked = q->nchoices ? q->correct : 0;
    lsn_ask_answer_text(q, reveal_buf, sizeof reveal_buf);
    record(r, LSN_IN_REVEAL, NULL, NULL);
    char line[1024];
    snprintf(line, sizeof line, "The answer: %s.", reveal_buf);
    say_line(r, line);
    if (q->explain && q->explain[0])
        say_line(r, q->explain);
    int tries = q->tries;
    clear_question(r);
    complete_step(r);
    r->changes |= LSN_CH_QUESTION;
    resume_answer(r, picked, value, tries);
    return reveal_buf;
}

/* ---- flags and goals -------------------------------------------------------- */

int lsn_flag_count(const lsn_runner *r) { return r->offer.nflags; }

const lsn_flag *lsn_flag_at(const lsn_runner *r, int index)
{
    return index >= 0 && index < r->offer.nflags ? &r->offer.flags[index] : NULL;
}

static unsigned change_release(lsn_runner *r, const char *canon, const char *value, char *err, size_t errlen);

unsigned lsn_set_flag(lsn_runner *r, const char *name, const char *value, char *err, size_t errlen)
{
    r->changes = 0;
    if (!r->vm || r->pace.wait == W_ERROR) {
        snprintf(err, errlen, "no lesson is running");
        return 0;
    }
    if (!lsn_offer_allows(&r->offer, name)) {
        const char *canon = NULL;
        if (!lsn_server_flag_info(name, &canon, NULL, NULL))
            snprintf(err, errlen, "unknown flag --%s", name);
        else
            snprintf(err, errlen, "this lesson does not let you change --%s", canon);
        return 0;
    }
    const char *canon = name;
    lsn_server_flag_info(name, &canon, NULL, NULL);
    if (!strcmp(canon, "vllm-version") || !strcmp(canon, "accounting"))
        return change_release(r, canon, value ? value : "", err, errlen);
    int counted = goal_note_lever(r, canon);
    if (lsn_server_set(r->srv.server, name, value ? value : "", err, errlen) < 0)
        return 0;
    record(r, LSN_IN_FLAG, canon, value ? value : "");
    save_progress(r);
    r->changes |= LSN_CH_FLAGS;
    if (r->srv.started)
        start_server(r);
    sync_flags(r);
    if (lsn_vm_on_flag(r->vm, canon, value ? value : "") < 0) {
        vm_error(r);
        return r->changes;
    }
    if (r->pace.wait == W_GOAL && r->g.active) {
        r->g.last_uncounted = 0;
        if (counted) {
            r->g.changes++;
        } else if (lsn_run_goal_uncounted(r)) {
            r->g.last_uncounted = 1;
            char line[512];
            say_line(r, lsn_lever_not_counted(canon, line, sizeof line));
        }
        lsn_run_check_goal(r);
    }
    return r->changes ? r->changes : LSN_CH_FLAGS;
}

const char *lsn_release_version(const lsn_runner *r)
{
    const char *v = r->saving.progress.vllm_version;
    return v[0] ? v : kv_release_newest()->first;
}

/* The accounting when the learner chose none: the newest release (README
 * "Which release the lessons follow"). */
#define LSN_DEFAULT_ACCOUNTING "release"

const char *lsn_release_accounting(const lsn_runner *r)
{
    const char *a = r->saving.progress.accounting;
    return a[0] ? a : LSN_DEFAULT_ACCOUNTING;
}

int lsn_set_release(lsn_runner *r, const char *version, const char *accounting, char *err, size_t errlen)
{
    lsn_progress *p = &r->saving.progress;
    if (accounting && strcmp(accounting, "release") && strcmp(accounting, "textbook")) {
        snprintf(err, errlen, "--accounting takes release or textbook, not '%.40s'", accounting);
        return -1;
    }
    if (version && !strcmp(version, "textbook")) { /* the flags view's row offers the textbook as a release */
        version = NULL;
        accounting = "textbook";
    }
    if (version) {
        char why[256];
        if (!kv_release_find(version, why, sizeof why)) {
            snprintf(err, errlen, "%s", why);
            return -1;
        }
        if (strlen(version) >= sizeof p->vllm_version) {
            snprintf(err, errlen, "--vllm-version %.40s: too long for a release number", version);
            return -1;
        }
        snprintf(p->vllm_version, sizeof p->vllm_version, "%s", version);
        if (!accounting)
            accounting = "release"; /* choosing a release means following it */
    }
    if (accounting)
        snprintf(p->accounting, sizeof p->accounting, "%s", accounting);
    save_progress(r);
    return 0;
}

/* The learner chose another release (the flags view's vllm-version row, or
 * lesson 21's accounting): every figure follows it, so the lesson starts
 * again under it and replays to where the learner was. */
static unsigned change_release(lsn_runner *r, const char *canon, const char *value, char *err, size_t errlen)
{
    char was_v[LSN_RELEASE_TEXT], was_a[LSN_RELEASE_TEXT];
    snprintf(was_v, sizeof was_v, "%s", lsn_release_version(r));
    snprintf(was_a, sizeof was_a, "%s", lsn_release_accounting(r));
    int rc = !strcmp(canon, "accounting") ? lsn_set_release(r, NULL, value, err, errlen)
                                          : lsn_set_release(r, value, NULL, err, errlen);
    if (rc < 0)
        return 0;
    /* the same release again (a follower handed the presenter's rows): nothing to redo */
    if (!strcmp(was_v, lsn_release_version(r)) && !strcmp(was_a, lsn_release_accounting(r)))
        return LSN_CH_FLAGS;
    int number = r->les.number;
    lsn_load(r, number, 1);
    return r->changes | LSN_CH_FLAGS | LSN_CH_SERVER | LSN_CH_TEXT | LSN_CH_VIEWS | LSN_CH_STATE;
}

struct kv_engine *lsn_engine(const lsn_runner *r) { return lsn_server_engine(r->srv.server); }

const struct kv_plan *lsn_plan(const lsn_runner *r) { return lsn_server_plan(r->srv.server); }

const char *lsn_server_error(const lsn_runner *r) { return r->srv.has_err ? r->srv.err : NULL; }

int lsn_goal_not_counted(const lsn_runner *r)
{
    return r && r->pace.wait == W_GOAL && r->g.active && r->g.last_uncounted;
}

int lsn_catalog_step(const lsn_runner *r, const char *flag, const char *cur, int dir, char *out, size_t len)
{
    if (!r || !r->srv.server || !flag || !out || len == 0)
        return 0;
    const char *v = cur ? cur : "";
    if (!strcmp(flag, "gpu")) {
        const kv_gpu_catalog *c = lsn_server_catalog(r->srv.server);
        if (!c || c->count <= 0)
            return 0;
        int at = -1;
        for (int i = 0; i < c->count; i++)
            if (!strcmp(c->gpus[i].id, v))
                at = i;
        int next = at < 0 ? (dir > 0 ? 0 : c->count - 1) : (at + (dir > 0 ? 1 : c->count - 1)) % c->count;
        snprintf(out, len, "%s", c->gpus[next].id);
        return 1;
    }
    if (!strcmp(flag, "model")) {
        char **ids = NULL;
        char err[256];
        int n = kv_model_catalog_list(lsn_server_assets(r->srv.server), &ids, err, sizeof err);
        if (n <= 0)
            return 0;
        int at = -1;
        for (int i = 0; i < n; i++)
            if (!strcmp(ids[i], v))
                at = i;
        int next = at < 0 ? (dir > 0 ? 0 : n - 1) : (at + (dir > 0 ? 1 : n - 1)) % n;
        snprintf(out, len, "%s", ids[next]);
        kv_model_catalog_free(ids, n);
        return 1;
    }
    return 0;
}
