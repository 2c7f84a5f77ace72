/* room_pres: the presenter's side of a room. It listens on the room's
 * socket, admits followers (room_access.h), and sends each the state its
 * app publishes. Nothing here blocks: sockets are non-blocking and the app
 * calls room_pres_poll from its main loop (or when room_pres_pollfds says a
 * socket is ready).
 *
 * Admission: the presenter's user, and with a group its members (checked by
 * SO_PEERCRED, room_access.h); a user other than the presenter's holds at
 * most ROOM_MAX_PER_MEMBER connections, so one student cannot fill the room.
 *
 * What a follower sends never reaches the presenter's state: the presenter
 * reads one HELLO (at most ROOM_HELLO_MAX bytes, within ROOM_HELLO_TIMEOUT_S)
 * and after it reads and discards, only to notice a follower that left.
 *
 * A follower that falls behind never makes the presenter wait or queue:
 * each follower holds at most one frame not yet taken by its socket; while
 * that frame waits, newer messages are not queued for it, and once its
 * socket drains it is sent the latest full STATE instead (skip to the
 * present). */
#ifndef ROOM_PRES_H
#define ROOM_PRES_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "room_msg.h"

#define ROOM_MAX_FOLLOWERS 256
#define ROOM_MAX_PER_MEMBER 4     /* connections one user other than the presenter's may hold */
#define ROOM_HELLO_MAX 4096
#define ROOM_HELLO_TIMEOUT_S 3.0

typedef struct room_pres room_pres;

/* Open room `name` (NULL or "" = this user's default room) for followers of
 * this user, and of group allow_group when not NULL: make and check the
 * folder (room_path.h), take the room's lock (another live presenter of the
 * same room is refused, naming its pid), replace a stale socket, bind and
 * listen (socket mode 0600, or 0660 with the group). Returns NULL with one
 * line in err on any failure. */
room_pres *room_pres_open(const char *name, const char *allow_group, char *err, size_t errlen);

/* Say goodbye to every follower (a BYE with `why`, e.g. "the presenter
 * quit"; NULL = that), remove the socket, release the lock, free. A
 * follower in the middle of a frame gets its rest before the goodbye: this
 * waits for followers' sockets 500 ms at most in all. NULL is allowed. */
void room_pres_close(room_pres *p, const char *why);

const char *room_pres_name(const room_pres *p);   /* the room's name */
const char *room_pres_path(const room_pres *p);   /* its socket path */
const char *room_pres_group(const room_pres *p);  /* the group it is open to, "" = none */
/* One line the presenter should see about where the room lives (its
 * predictable folder was another user's: room_dir), "" when none. */
const char *room_pres_notice(const room_pres *p);

/* Followers admitted and following now (probes from `kvlab rooms` and
 * followers still saying hello are not counted). */
int room_pres_followers(const room_pres *p);

/* Connections accepted that have not said hello yet (at most
 * ROOM_MAX_PER_MEMBER per user besides the presenter's; each is dropped
 * after ROOM_HELLO_TIMEOUT_S). */
int room_pres_joining(const room_pres *p);

/* Accept new connections (refusing who may not follow, with a REFUSE that
 * says why), read hellos, discard what followers send, drop those that left
 * or never said hello, and send what waits. `now` is monotonic seconds.
 * Returns 1 when the follower count changed, else 0. */
int room_pres_poll(room_pres *p, double now);

/* The sockets worth waking for: the listening socket and every follower
 * (POLLIN; POLLOUT where a frame waits). Writes up to max entries and
 * returns how many. */
int room_pres_pollfds(const room_pres *p, struct pollfd *fds, int max);

/* Publish the presenter's state (all of ROOM_H_FULL meaningful; its events
 * are what happened since the last publish). The room numbers messages,
 * sets followers, and sends a full STATE when the lesson, step, inputs,
 * flags or server start changed, else a DELTA of what did change (engine
 * step, view, followers) and the events; nothing when nothing changed.
 * Returns the number of followers a message was sent to or queued for. */
int room_pres_publish(room_pres *p, const room_state *st);

/* Engine images for joining followers (ROOM_T_IMAGE, room_msg.h): when on,
 * a follower that says hello is sent no STATE until the app has handed the
 * room an image (room_pres_send_image), so that it joins from the
 * presenter's engine as it is instead of replaying every engine step. Off
 * by default (a follower's first STATE goes out at its hello). */
void room_pres_set_images(room_pres *p, int on);

/* Followers waiting for an image (images on): the app should take one now
 * and call room_pres_send_image. */
int room_pres_wants_image(const room_pres *p);

/* Send image[len] (taken at the latest published state: its run_id,
 * server_gen and engine_step are the image's) to every follower waiting for
 * one, in parts, then that state as a STATE. image NULL or len 0 (no engine
 * to image, or it could not be taken) just sends the STATE: the follower
 * replays. An image over ROOM_IMAGE_MAX is not sent either. Returns the
 * followers it was sent to. */
int room_pres_send_image(room_pres *p, const uint8_t *image, size_t len);

/* The number of the last message published (0 before the first). */
uint64_t room_pres_seq(const room_pres *p);

/* Figures for the benchmark and tests. */
typedef struct room_pres_stats {
    uint64_t bytes_sent;       /* to all followers, frames as encoded */
    uint64_t states_sent;      /* full STATE frames */
    uint64_t deltas_sent;      /* DELTA frames */
    uint64_t skipped;          /* messages not queued for a follower that was behind */
    uint64_t images_sent;      /* engine images sent to joining followers (each counted once) */
    uint64_t image_bytes;      /* their bytes, frames as encoded */
    uint64_t refused;          /* connections refused (access, room full, bad hello) */
    size_t pending_max;        /* most bytes ever waiting for one follower */
} room_pres_stats;

void room_pres_get_stats(const room_pres *p, room_pres_stats *out);

/* For tests: open on an explicit socket path (its folder is not checked or
 * made; the lock is <path>.lock), owner uid, open to gid (ROOM_NO_GROUP =
 * owner only). */
room_pres *room_pres_open_at(const char *sock_path, const char *name, uid_t owner, gid_t gid, char *err,
                             size_t errlen);

#endif
