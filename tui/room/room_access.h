/* room_access: who may follow a room. By default only the presenter's own
 * user; with --allow-group GROUP also the members of that Unix group. The
 * folder and socket modes (room_path.h) already keep others out; the
 * presenter checks every connecting follower's credentials again with
 * SO_PEERCRED (unix(7)), so a folder made too open by hand does not let
 * anyone in either. */
#ifndef ROOM_ACCESS_H
#define ROOM_ACCESS_H

#include <stddef.h>
#include <sys/types.h>

#define ROOM_MAX_PEER_GROUPS 256

/* Credentials of the process at the other end of a Unix socket. */
typedef struct room_peer {
    pid_t pid;
    uid_t uid;
    gid_t gid;                              /* effective gid */
    int ngroups;                            /* supplementary groups (from /proc/<pid>/status) */
    gid_t groups[ROOM_MAX_PEER_GROUPS];
} room_peer;

/* May peer follow a room of `owner` open to `group` (ROOM_NO_GROUP: owner
 * only)? The owner's own uid always may; with a group, a peer whose
 * effective or supplementary groups include it may. Nobody else, root
 * included (root can read the socket anyway, but is not let in unasked). */
int room_access_allowed(uid_t owner, gid_t group, const room_peer *peer);

/* Fill *out for the peer of connected socket fd: SO_PEERCRED gives pid, uid
 * and gid; the supplementary groups are read from /proc/<pid>/status (the
 * process's own, as the kernel checks file access), else from the group
 * database for the uid. Returns 0, or -1 with one line in err. */
int room_peer_get(int fd, room_peer *out, char *err, size_t errlen);

/* The line a refused follower sees: who the room is open to and that the
 * peer is not among them, e.g. "room 'alice' is open to alice and group
 * students only; you (bob) are not in group students". */
void room_access_refusal(char *out, size_t len, const char *room, uid_t owner, gid_t group, uid_t peer_uid);

/* Look up a group by name (or number) for --allow-group: 0 with *gid, or -1
 * with one line in err when it does not exist or the caller is not in it
 * (the room folder is given to the group, which needs membership). */
int room_group_lookup(const char *name, gid_t *gid, char *err, size_t errlen);

#endif
