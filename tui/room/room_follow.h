/* room_follow: the follower's side of a room. It finds the room
 * (room_path.h), connects, says hello, and keeps the presenter's latest
 * state: each STATE replaces it, each DELTA is merged into it. When the
 * presenter quits, restarts or is not there yet, it says so and tries again
 * every ROOM_RETRY_S; a follower the presenter refuses is told why and tries
 * again every ROOM_RETRY_REFUSED_S (the presenter may open the room to a
 * group meanwhile). Nothing blocks: the app calls room_follow_poll from its
 * main loop (or when room_follow_fd is readable). The only thing a follower
 * ever sends is its hello. */
#ifndef ROOM_FOLLOW_H
#define ROOM_FOLLOW_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "room_msg.h"
#include "room_path.h"

#define ROOM_RETRY_S 0.5
#define ROOM_RETRY_REFUSED_S 3.0

typedef enum room_follow_status {
    ROOM_FS_WAITING = 0,   /* no presenter (not started, quit, or restarting) */
    ROOM_FS_JOINING,       /* connected, waiting for the first state */
    ROOM_FS_FOLLOWING,     /* has the presenter's state */
    ROOM_FS_REFUSED,       /* the presenter (or the socket's mode) will not let us in */
} room_follow_status;

/* What room_follow_poll saw. */
enum {
    ROOM_FC_STATE = 1u << 0,   /* the state changed: read room_follow_state */
    ROOM_FC_STATUS = 1u << 1,  /* status or message changed */
    ROOM_FC_IMAGE = 1u << 2,   /* a whole engine image arrived: read room_follow_image */
};

typedef struct room_follow room_follow;

/* A follower of the room named spec (NULL or "" = this user's default room;
 * NAME or USER/NAME, see room_path.h). Connects on the first poll. Returns
 * NULL with one line in err when spec is not a valid room name or names a
 * user this machine does not have. room_follow_message names the room as
 * spec wrote it ("bob/class" stays "bob/class"). */
room_follow *room_follow_new(const char *spec, char *err, size_t errlen);
void room_follow_free(room_follow *f);

/* Connect or reconnect when due, read what arrived and decode it. now is
 * monotonic seconds. Returns ROOM_FC_* bits. Reading is bounded per call
 * (a presenter flooding the socket cannot keep the follower here). */
unsigned room_follow_poll(room_follow *f, double now);

/* The socket to wait on (readable), or -1 while not connected. */
int room_follow_fd(const room_follow *f);

room_follow_status room_follow_get_status(const room_follow *f);

/* One line for the follower's screen: "waiting for the presenter of room
 * 'alice'", "the presenter quit: ...", "refused: room 'alice' is open to
 * alice only; ...", "" while following. */
const char *room_follow_message(const room_follow *f);

/* The presenter's latest state, or NULL before the first STATE of this
 * connection. Its events are those received since room_follow_clear_events. */
const room_state *room_follow_state(const room_follow *f);
void room_follow_clear_events(room_follow *f);

/* The presenter's engine image (ROOM_T_IMAGE, room_msg.h) last received
 * whole on this connection, or NULL: *len its bytes, *run_id, *server_gen
 * and *engine_step the run and engine step it was taken at (the STATE that
 * follows it names the same). Parts are put together in order as they
 * come (a part out of order drops the image being assembled); the buffer
 * grows with the parts received, never to more than ROOM_IMAGE_MAX. Valid
 * until the next poll or room_follow_drop_image. */
const uint8_t *room_follow_image(const room_follow *f, size_t *len, uint64_t *run_id, uint32_t *server_gen,
                                 uint64_t *engine_step);

/* Free the image (taken, or of no use): the follower holds none until the
 * next one arrives. */
void room_follow_drop_image(room_follow *f);

/* The presenter's welcome (room, presenter, group), or NULL before one.
 * Its presenter is the name of the user serving the socket (SO_PEERCRED),
 * whatever name the welcome claimed. */
const room_msg *room_follow_welcome(const room_follow *f);

/* The user serving the socket at the last connect (SO_PEERCRED), "" before
 * one. A follower of room NAME checks it is the owner of the folder and
 * socket it found, and keeps following that user's NAME only (resolved
 * once: room_follow_spec turns to USER/NAME). */
const char *room_follow_presenter(const room_follow *f);
const char *room_follow_spec(const room_follow *f);

/* Figures: bytes and messages received, malformed streams seen. */
typedef struct room_follow_stats {
    uint64_t bytes_read, states, deltas, stale_deltas, malformed, connects;
    uint64_t images, image_parts_dropped; /* whole images received; parts that did not fit the one assembled */
} room_follow_stats;
void room_follow_get_stats(const room_follow *f, room_follow_stats *out);

/* For tests and the fuzzer: handle bytes as if they had come from the
 * presenter (connected or not). Returns ROOM_FC_* bits. */
unsigned room_follow_feed(room_follow *f, const uint8_t *bytes, size_t n, double now);

/* For tests: fn(ctx) runs after each connect, just before the hello is
 * sent (NULL: nothing), so a test can make the presenter refuse and close
 * first: the follower must still read the refusal. */
void room_follow_set_before_hello(void (*fn)(void *ctx), void *ctx);

/* For tests: follow the socket at an explicit path. */
room_follow *room_follow_new_at(const char *sock_path, const char *name);

/* Ask the room at sock who presents what (for `kvlab rooms`): connect, send
 * a probe hello, wait up to timeout_ms for the answer. Returns 0 with
 * *welcome filled (presenter: the socket's owner by SO_PEERCRED, not what
 * the welcome claims); 1 when refused (welcome->text says why); -1 when no
 * presenter answers (err: "no presenter (the socket is left over)", "not
 * open to you", "no answer within N ms", ...). */
int room_probe(const char *sock_path, int timeout_ms, room_msg *welcome, char *err, size_t errlen);

#define ROOM_PROBE_PARALLEL 128   /* probes room_probe_many keeps in flight */

/* What one probe found. */
typedef struct room_probe_result {
    int rc;                          /* as room_probe returns */
    int lesson, followers;
    char lesson_title[ROOM_TITLE_MAX];
    char room[ROOM_NAME_MAX], group[ROOM_NAME_MAX];
    char presenter[ROOM_NAME_MAX];   /* the socket owner's name (SO_PEERCRED), "" when unknown */
    uid_t presenter_uid;
    char text[ROOM_TEXT_MAX];        /* rc 1: why refused */
    char err[256];                   /* rc -1: why no answer */
} room_probe_result;

/* room_probe for n sockets at once, ROOM_PROBE_PARALLEL in flight, each
 * given timeout_ms from its start: n silent rooms take about
 * ceil(n / ROOM_PROBE_PARALLEL) * timeout_ms, not n * timeout_ms. */
void room_probe_many(const char *const *paths, int n, int timeout_ms, room_probe_result *out);

#endif
