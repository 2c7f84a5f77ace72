/* app_rewind: moving back and forth through the lesson's runs in the lesson
 * app, on the history the lesson runtime keeps (lsn_history: every engine
 * the lesson started, flag changes, lab.restart, resets and replays
 * included, one timeline; engine/kv_history.h).
 *
 * `[` / `]` step one engine step back / forward, `{` / `}` jump to the
 * previous / next mark of the chosen kind, `m` chooses the kind (any event
 * but a finish, a preemption, a prefix-cache hit, the start of evictions, a
 * restart, a request finishing; the footer names it), Home to the oldest
 * step kept, End to the present. While replaying, every view draws the
 * replay engine at that step, in the run that was live then (the frame is
 * captured from it, with that run's start-up plan), the flashes show what
 * that step did and stay until the next move, the header shows "replay,
 * step N of M" and a timeline with the marks, and the lesson and the live
 * engine stand still. Keys that only look (Tab, t, scrolling, ?, the mouse)
 * keep the replay; any other key returns to the present first and then
 * acts.
 *
 * For the classroom (tui/app/app_room.c): a step is named across processes
 * as (run, engine step of that run), kv_history_runs / kv_history_run_at /
 * kv_history_position_of; app_rewind_where says what the presenter shows,
 * app_rewind_goto shows the same in a follower whose lesson recorded the
 * same runs, and kv_history_runs growing says a restart happened. */
#ifndef APP_REWIND_H
#define APP_REWIND_H

#include "app.h"
#include "kv_history.h"

/* Set up (a->rw) and free. */
void app_rewind_init(app *a);
void app_rewind_free(app *a);

/* The lesson's server changed (app_main.c's server_changed; the runtime
 * has recorded the new engine): leaves the replay, says when the new run
 * could not be recorded. */
void app_rewind_server(app *a);

/* A key for the history: 1 when it was one (handled), 0 otherwise (any
 * key that changes something has returned to the present first). */
int app_rewind_key(app *a, int ch);

/* Replaying a past step (the lesson and the live engine stand still). */
int app_rewind_active(const app *a);

/* What the frame is captured from: the replay engine and its segment's
 * plan while replaying, else a->eng and a->plan. */
void app_rewind_source(const app *a, const kv_engine **eng, const kv_plan **plan);

/* Back to the present (no-op when live). */
void app_rewind_live(app *a);

/* Replaying: 1 with the run (kv_history_run_at) and that run's engine step
 * shown (either pointer may be NULL); 0 when live. */
int app_rewind_where(const app *a, int64_t *run, int64_t *step);

/* Show engine step `step` of run `run` (as app_rewind_where names them) as
 * if the learner had moved there; run < 0: back to the present. 0, or -1
 * when that step is not in this lesson's history (nothing changes). */
int app_rewind_goto(app *a, int64_t run, int64_t step);

/* The scene the views draw: live itself, or while replaying a copy whose
 * flags hold the values of the replayed run (lsn_history_flag), so the
 * flags view shows the run that was live then. Valid until the next call. */
const lsn_scene *app_rewind_scene(app *a, const lsn_scene *live);

/* The footer's word for what { } jump to now ("event", "preemption", ...). */
const char *app_rewind_kind_name(const app *a);

/* What the header's replay line draws (ui_model.h): the history and the
 * step shown; *h NULL while live. */
void app_rewind_view(const app *a, const kv_history **h, int64_t *pos);

#endif
