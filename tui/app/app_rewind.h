/* app_rewind: moving back and forth through the engine's run in the lesson
 * app, on the engine's history (engine/kv_history.h).
 *
 * Every engine the lesson starts is recorded (a restart is a new segment of
 * one history per lesson). `[` / `]` step one engine step back / forward,
 * `{` / `}` jump to the previous / next notable step (a preemption, an
 * eviction, a prefix-cache hit, a request finishing, a restart), Home to the
 * oldest step kept, End to the present. While replaying, every view draws
 * the replay engine at that step (the frame is captured from it, with the
 * start-up plan of its segment), the flashes show what that step did and
 * stay until the next move, the header shows "replay, step N of M" and a
 * timeline with the marks, and the lesson and the live engine stand still.
 * Keys that only look (Tab, t, scrolling, ?, the mouse) keep the replay;
 * any other key returns to the present first and then acts. */
#ifndef APP_REWIND_H
#define APP_REWIND_H

#include "app.h"
#include "kv_history.h"

/* Set up (a->rw) and free. */
void app_rewind_init(app *a);
void app_rewind_free(app *a);

/* The lesson's server changed (app.c's server_changed): record the new
 * engine; a new lesson starts a new history. Leaves the replay. */
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

/* What the header's replay line draws (ui_model.h): the history and the
 * step shown; *h NULL while live. */
void app_rewind_view(const app *a, const kv_history **h, int64_t *pos);

#endif
