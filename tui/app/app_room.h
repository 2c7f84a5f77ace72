/* app_room: classroom mode in the lesson app (the sockets and the wire
 * format are tui/room/).
 *
 * `kvlab --present [ROOM]` runs the app as usual and, once per loop turn,
 * publishes where its lesson is (lesson, step, page, the inputs its replay
 * needs, flags, view focus, engine ticks) to the room's followers.
 *
 * `kvlab --follow [ROOM]` runs its own lesson runtime and engine (with no
 * progress file) and re-derives the presenter's scene from that state: a
 * small change is applied as the presenter made it (n, an answer, a flag),
 * anything else by replaying the lesson to the presenter's step with the
 * presenter's inputs (lsn_replay), then running the engine to the
 * presenter's engine tick (lsn_tick_steps). A follower that joins starts
 * its engine from the presenter's engine image instead (room_pres_send_image
 * before its first state, lsn_engine_load_image), so joining at 100,000
 * engine steps costs no more than joining at the start. A new run of the presenter's
 * engine (room_state.server_gen: a restart inside a step, a flag change, a
 * reset, b), another presenter process (run_id) or a follower engine past
 * the presenter's tick is rebuilt by a replay at once. The presenter's
 * screen beyond the lesson (room_screen: its rewind as (run counted back
 * from the newest, engine step), answer box, verdict, hints, flags view)
 * is applied as the presenter's (a follower's keys never type into them:
 * they scroll and quit as on any page). It draws at its own terminal
 * size, colours and glyphs. While following, keys that would move the
 * lesson are refused with a hint; `x` breaks away (its own flags and
 * engine from the presenter's page on, progress kept in its own state
 * folder) and `x` again rejoins.
 *
 * KVLAB_ROOM_TRACE=FILE (bench/room_bench.py) appends one line per event:
 * "key SEQ T" (presenter: a key, and the message that carried its effect),
 * "drawn SEQ T" (follower: the first frame drawn with message SEQ applied),
 * "stats T BYTES STATES DELTAS SKIPPED FOLLOWERS TICKS" (presenter, each
 * second; TICKS: its engine's steps since the server started);
 * T is CLOCK_MONOTONIC seconds, the same clock in every process. */
#ifndef APP_ROOM_H
#define APP_ROOM_H

#include <stddef.h>

struct app;

enum { APP_ROOM_OFF = 0, APP_ROOM_PRESENT, APP_ROOM_FOLLOW };

/* Open the room before the terminal is set up: a presenter binds its socket
 * (refused with one line in err: unsafe folder, unknown group, room taken),
 * a follower only checks the room's name. mode APP_ROOM_OFF does nothing.
 * Returns 0 or -1. */
int app_room_open(struct app *a, int mode, const char *name, const char *group, char *err, size_t errlen);

/* Say goodbye to followers / hang up; frees the room. */
void app_room_close(struct app *a);

/* Wait up to timeout_ms for a key or for the room's sockets; returns at
 * once when either is ready. Without a room it just sleeps in poll(). */
void app_room_wait(struct app *a, int timeout_ms);

/* Once per loop turn: the presenter serves followers and publishes; the
 * follower reads and, unless broken away, brings its lesson to the
 * presenter's state. */
void app_room_tick(struct app *a);

/* A key, before the app sees it: 1 when the room took it (x, or a key a
 * follower may not use while following), 0 to let the app handle it. */
int app_room_key(struct app *a, int ch);

/* The follower is following (not broken away): the app must not run the
 * lesson itself (no lsn_tick), the room drives it. */
int app_room_drives(const struct app *a);

/* A follower (not broken away) whose presenter was there and is not now
 * (quit, killed, restarting): the page stays as the presenter left it. */
int app_room_presenter_left(const struct app *a);

/* Followers attached to this presenter (0 for a follower or without a
 * room): q asks before ending the class when there are any. */
int app_room_followers(const struct app *a);

/* 1 following, 2 broken away, 0 otherwise (which keys the footer shows). */
int app_room_footer_mode(const struct app *a);

/* A few words for the header ("presenting to 3", "following",
 * "on your own", "waiting for presenter"), "" without a room. */
const char *app_room_label(const struct app *a);

/* The app drew a frame (for KVLAB_ROOM_TRACE: when a follower's screen
 * showed a presenter's message). */
void app_room_drawn(struct app *a);

/* What the text view says while a follower has no lesson yet, or NULL. */
const char *app_room_idle_text(const struct app *a);

#endif
