/* room_path: where classroom rooms live, what they are called, and whether a
 * room's folder is safe to use.
 *
 * A room is a Unix domain socket <folder>/<name>.sock, guarded by an flock'ed
 * <folder>/<name>.lock that its one presenter holds. Folders, one audience
 * each, so the file system already refuses whoever may not follow:
 *   presenter only:  $XDG_RUNTIME_DIR/kvlab          (mode 0700), when
 *                    XDG_RUNTIME_DIR is set; else <shared>/kvlab-<uid> (0700)
 *   a Unix group:    <shared>/kvlab-<uid>-g<gid>     (mode 0750, group gid)
 * <shared> is /tmp, or $KVLAB_ROOMS_DIR (tests point it at a private folder).
 * A folder is used only when it is a real folder (not a symlink) owned by the
 * presenter with exactly that mode (and group); one's own folder that is not
 * is refused with a message saying how to fix it. A predictable name that
 * another user took first (anyone may create in /tmp) does not block the
 * presenter: its rooms go to a second folder of its own, <name>.XXXXXX
 * (mkdtemp), and the presenter is told why. Followers find folders of
 * either form by name and trust them only when owned by the uid they name.
 *
 * Names: a room name is 1-32 of [A-Za-z0-9._-], not starting with '.' or '-';
 * the default room is named after the presenter's user. A follower names a
 * room as NAME (its own, else the only room of that name on the machine) or
 * USER/NAME. */
#ifndef ROOM_PATH_H
#define ROOM_PATH_H

#include <stddef.h>
#include <sys/types.h>

#include "room_msg.h"

#define ROOM_NO_GROUP ((gid_t)-1)
#define ROOM_ROOMNAME_MAX 33      /* bytes incl. NUL */
#define ROOM_PATH_MAX 108         /* sun_path: a socket path longer than this cannot be bound */

/* Is name a valid room name (see above)? */
int room_name_ok(const char *name);

/* The name of user uid (from the password database), else "uid<N>". */
void room_user_name(uid_t uid, char *out, size_t len);

/* The name of group gid, else "gid<N>". */
void room_group_name(gid_t gid, char *out, size_t len);

/* The lock file beside socket path sock: "<room>.lock" for "<room>.sock". */
void room_lock_path(const char *sock, char *out, size_t len);

/* Is the room whose socket is sock presented now (its lock is held)? */
int room_is_live(const char *sock);

/* This user's default room name: the user name, cut to 32 bytes, with any
 * byte a room name cannot hold replaced by '_'. */
void room_default_name(char *out, size_t len);

/* The shared root: $KVLAB_ROOMS_DIR when set and not empty, else "/tmp". */
const char *room_shared_root(void);

/* The folder for uid's rooms open to gid (ROOM_NO_GROUP: presenter only)
 * into out[len]. With create, the folder is made when missing (and
 * XDG_RUNTIME_DIR, when used, must itself be safe: owned by uid, mode 0700).
 * When the predictable folder belongs to another user, uid's second folder
 * (<folder>.XXXXXX) is used, made with create, and notice (may be NULL) gets
 * one line saying so; else notice is "". The folder is checked as
 * room_dir_check does. Returns 0, or -1 with one line in err (unsafe folder
 * of uid's own, path too long for a socket, cannot create; without create,
 * no second folder yet: out is then the predictable path). */
int room_dir(uid_t uid, gid_t gid, int create, char *out, size_t len, char *notice, size_t noticelen, char *err,
             size_t errlen);

/* Is dir a folder that uid's rooms for gid may use: not a symlink, a
 * folder, owned by uid, mode 0700 (ROOM_NO_GROUP) or 0750 with group gid?
 * Returns 0, or -1 with one line in err naming what is wrong and how to fix it. */
int room_dir_check(const char *dir, uid_t uid, gid_t gid, char *err, size_t errlen);

/* One room found on this machine. */
typedef struct room_entry {
    char name[ROOM_ROOMNAME_MAX];
    char owner[ROOM_NAME_MAX];    /* presenter's user name */
    uid_t uid;                    /* presenter's uid */
    gid_t gid;                    /* group it is open to, ROOM_NO_GROUP = presenter only */
    char group[ROOM_NAME_MAX];    /* that group's name, "" when none */
    char sock[ROOM_PATH_MAX];     /* socket path */
    int closed;                   /* room_find, not found: USER (for a bare NAME: some
                                     other user) has room folders this process may not
                                     read (rooms not open to it) */
} room_entry;

#define ROOM_SCAN_MAX 4096       /* rooms kvlab rooms lists */
#define ROOM_SCAN_PER_FOLDER 64   /* ... from one folder (left-over sockets cannot crowd out others) */
#define ROOM_FIND_MAX 256         /* rooms of one name (one per folder) */

/* Every room socket this process can see: its own private folder and each
 * safe <shared>/kvlab-<uid>[-g<gid>] folder it can read. A socket file is
 * listed whether or not a presenter is behind it (a crashed presenter's
 * socket stays until the next one of that name starts). Folders that are not
 * safe are skipped and counted in *unsafe (may be NULL). Returns the number
 * of entries written (at most max). */
int room_scan(room_entry *out, int max, int *unsafe);

/* The rooms named name only: one lstat per folder, so no number of other
 * sockets anywhere hides one. Returns the number written (at most max). */
int room_scan_named(const char *name, room_entry *out, int max);

/* Users with room folders under the shared root that this process may not
 * read (their rooms are not open to it): their names, comma-separated, each
 * with "(group G)" when the folder is for a group, into out[len]. Returns
 * how many. */
int room_closed_owners(char *out, size_t len);

/* Resolve a room as a follower names it (NULL or "" = this user's default
 * room). Returns 1 with *out, 0 when no such room exists yet (*out still has
 * the name and, for one's own room, the expected socket path, so a follower
 * can wait for it; for a USER/ room, out->closed says whether USER has room
 * folders this process may not read), -1 when the name is invalid, when
 * USER is no user of this machine (nor the "uidN" form room_user_name gives
 * a uid without a name), or when NAME matches rooms of several users (err
 * says to write USER/NAME). */
int room_find(const char *spec, room_entry *out, char *err, size_t errlen);

#endif
