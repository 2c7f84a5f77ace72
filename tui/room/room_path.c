/* room_path: room names, folders and their safety checks (see room_path.h). */
#include "room_path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kv_util.h"

int room_name_ok(const char *name)
{
    if (!name)
        return 0;
    size_t n = strlen(name);
    if (n < 1 || n >= ROOM_ROOMNAME_MAX || name[0] == '.' || name[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

void room_user_name(uid_t uid, char *out, size_t len)
{
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) == 0 && res && res->pw_name && res->pw_name[0] &&
        room_text_ok(res->pw_name, strlen(res->pw_name), len))
        snprintf(out, len, "%s", res->pw_name);
    else
        snprintf(out, len, "uid%u", (unsigned)uid);
}

void room_group_name(gid_t gid, char *out, size_t len)
{
    struct group gr, *res = NULL;
    char buf[8192];
    if (getgrgid_r(gid, &gr, buf, sizeof buf, &res) == 0 && res && res->gr_name &&
        room_text_ok(res->gr_name, strlen(res->gr_name), len))
        snprintf(out, len, "%s", res->gr_name);
    else
        snprintf(out, len, "gid%u", (unsigned)gid);
}

void room_default_name(char *out, size_t len)
{
    char user[ROOM_NAME_MAX];
    room_user_name(geteuid(), user, sizeof user);
    size_t n = 0;
    for (size_t i = 0; user[i] && n + 1 < len && n + 1 < ROOM_ROOMNAME_MAX; i++) {
        char c = user[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '_' || c == '-';
        out[n++] = ok ? c : '_';
    }
    if (len)
        out[n] = '\0';
    if (n > 0 && (out[0] == '.' || out[0] == '-'))
        out[0] = '_';
    if (n == 0 && len > 5)
        snprintf(out, len, "room");
}

const char *room_shared_root(void)
{
    const char *e = getenv("KVLAB_ROOMS_DIR");
    return e && *e ? e : "/tmp";
}

int room_dir_check(const char *dir, uid_t uid, gid_t gid, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(dir, &st) < 0)
        return kv_errf(err, errlen, -1, "cannot use the room folder %s: %s", dir, strerror(errno));
    if (S_ISLNK(st.st_mode))
        return kv_errf(err, errlen, -1,
                       "the room folder %s is a symlink, not a folder: someone may be trying to catch the room; "
                       "remove it and start again",
                       dir);
    if (!S_ISDIR(st.st_mode))
        return kv_errf(err, errlen, -1, "the room folder %s is not a folder: remove it and start again", dir);
    if (st.st_uid != uid) {
        char who[ROOM_NAME_MAX], want[ROOM_NAME_MAX];
        room_user_name(st.st_uid, who, sizeof who);
        room_user_name(uid, want, sizeof want);
        return kv_errf(err, errlen, -1,
                       "the room folder %s belongs to %s, not %s: it is not safe to use; have it removed "
                       "(or set KVLAB_ROOMS_DIR to a folder of your own)",
                       dir, who, want);
    }
    unsigned mode = st.st_mode & 07777, want = gid == ROOM_NO_GROUP ? 0700u : 0750u;
    if (mode != want)
        return kv_errf(err, errlen, -1,
                       "the room folder %s has mode %04o, not %04o: others could see or replace rooms; "
                       "fix it with chmod %04o %s",
                       dir, mode, want, want, dir);
    if (gid != ROOM_NO_GROUP && st.st_gid != gid) {
        char have[ROOM_NAME_MAX], need[ROOM_NAME_MAX];
        room_group_name(st.st_gid, have, sizeof have);
        room_group_name(gid, need, sizeof need);
        return kv_errf(err, errlen, -1, "the room folder %s has group %s, not %s: fix it with chgrp %s %s", dir,
                       have, need, need, dir);
    }
    return 0;
}

/* Make dir with the mode and group room_dir_check wants (it is new: nobody
 * else can have touched it between mkdir and the fixes below, since the
 * parent is sticky or ours). */
static int make_dir(const char *dir, gid_t gid, char *err, size_t errlen)
{
    if (mkdir(dir, 0700) < 0) {
        if (errno == EEXIST)
            return 0;
        return kv_errf(err, errlen, -1, "cannot create the room folder %s: %s", dir, strerror(errno));
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return kv_errf(err, errlen, -1, "cannot open the room folder %s: %s", dir, strerror(errno));
    int rc = 0;
    if (gid != ROOM_NO_GROUP) {
        if (fchown(fd, (uid_t)-1, gid) < 0) {
            char g[ROOM_NAME_MAX];
            room_group_name(gid, g, sizeof g);
            rc = kv_errf(err, errlen, -1, "cannot give the room folder %s to group %s: %s (are you in that group?)",
                         dir, g, strerror(errno));
        } else if (fchmod(fd, 0750) < 0) {
            rc = kv_errf(err, errlen, -1, "cannot set the mode of %s: %s", dir, strerror(errno));
        }
    } else if (fchmod(fd, 0700) < 0) {
        rc = kv_errf(err, errlen, -1, "cannot set the mode of %s: %s", dir, strerror(errno));
    }
    close(fd);
    if (rc < 0)
        rmdir(dir);
    return rc;
}

/* The XDG runtime folder when set (and safe), else NULL; *bad when it is set
 * but unsafe (the message is in err). */
static const char *xdg_runtime(uid_t uid, int *bad, char *err, size_t errlen)
{
    *bad = 0;
    const char *x = getenv("XDG_RUNTIME_DIR");
    if (!x || !*x || uid != geteuid())
        return NULL;
    struct stat st;
    if (lstat(x, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077)) {
        *bad = 1;
        kv_errf(err, errlen, -1,
                "XDG_RUNTIME_DIR=%s is not a folder of yours with mode 0700, so rooms cannot live there "
                "(fix it, or unset XDG_RUNTIME_DIR to use %s)",
                x, room_shared_root());
        return NULL;
    }
    return x;
}

static int parse_folder(const char *name, uid_t *uid, gid_t *gid);

/* Is the entry at path someone else's (a folder, file or symlink that uid
 * did not make)? Only then is it worked around: one's own mistakes are
 * reported with their fix. */
static int squatted(const char *path, uid_t uid)
{
    struct stat st;
    return lstat(path, &st) == 0 && st.st_uid != uid;
}

/* An earlier second folder of uid for gid (<base>.XXXXXX, safe), or a new
 * one, into out. Returns 0, or -1 with one line in err. */
static int second_dir(const char *base, uid_t uid, gid_t gid, int create, char *out, size_t len, char *err,
                      size_t errlen)
{
    const char *root = room_shared_root();
    const char *leaf = strrchr(base, '/') ? strrchr(base, '/') + 1 : base;
    size_t ll = strlen(leaf);
    DIR *d = opendir(root);
    struct dirent *de;
    char e2[512];
    while (d && (de = readdir(d))) {
        uid_t u;
        gid_t g;
        if (strncmp(de->d_name, leaf, ll) || de->d_name[ll] != '.' || !parse_folder(de->d_name, &u, &g) ||
            u != uid || g != gid)
            continue;
        snprintf(out, len, "%s/%s", root, de->d_name);
        if (room_dir_check(out, uid, gid, e2, sizeof e2) == 0) {
            closedir(d);
            return 0;
        }
    }
    if (d)
        closedir(d);
    out[0] = '\0';
    if (!create)
        return kv_errf(err, errlen, -1, "no room folder of yours yet");
    char tmpl[ROOM_PATH_MAX + 8];
    snprintf(tmpl, sizeof tmpl, "%s.XXXXXX", base);
    if (!mkdtemp(tmpl))
        return kv_errf(err, errlen, -1, "cannot create a room folder beside %s: %s", base, strerror(errno));
    if (gid != ROOM_NO_GROUP && (chown(tmpl, (uid_t)-1, gid) < 0 || chmod(tmpl, 0750) < 0)) {
        char g[ROOM_NAME_MAX];
        room_group_name(gid, g, sizeof g);
        int e = errno;
        rmdir(tmpl);
        return kv_errf(err, errlen, -1, "cannot give the room folder %s to group %s: %s", tmpl, g, strerror(e));
    }
    snprintf(out, len, "%s", tmpl);
    return 0;
}

int room_dir(uid_t uid, gid_t gid, int create, char *out, size_t len, char *notice, size_t noticelen, char *err,
             size_t errlen)
{
    int n, bad = 0;
    if (notice && noticelen)
        notice[0] = '\0';
    const char *x = gid == ROOM_NO_GROUP ? xdg_runtime(uid, &bad, err, errlen) : NULL;
    if (bad)
        return -1;
    if (x)
        n = snprintf(out, len, "%s/kvlab", x);
    else if (gid == ROOM_NO_GROUP)
        n = snprintf(out, len, "%s/kvlab-%u", room_shared_root(), (unsigned)uid);
    else
        n = snprintf(out, len, "%s/kvlab-%u-g%u", room_shared_root(), (unsigned)uid, (unsigned)gid);
    /* <dir>.XXXXXX/<32-byte name>.lock must fit a socket address. */
    if (n < 0 || (size_t)n >= len || (size_t)n + 7 + 1 + (ROOM_ROOMNAME_MAX - 1) + 5 >= ROOM_PATH_MAX)
        return kv_errf(err, errlen, -1, "the room folder path %s is too long for a socket (at most %d bytes)", out,
                       ROOM_PATH_MAX - 47);
    if (!x && squatted(out, uid)) {
        /* Another user made the predictable name first (anyone may create
         * in /tmp): it cannot hold our rooms, and it must not block them.
         * A second folder <name>.XXXXXX of our own instead; followers find
         * it by its owner. */
        char base[ROOM_PATH_MAX], who[ROOM_NAME_MAX];
        struct stat st;
        snprintf(base, sizeof base, "%s", out);
        who[0] = '\0';
        if (lstat(base, &st) == 0)
            room_user_name(st.st_uid, who, sizeof who);
        if (second_dir(base, uid, gid, create, out, len, err, errlen) < 0)
            return -1;
        if (notice && noticelen)
            snprintf(notice, noticelen,
                     "%s belongs to %s (made before you, so not safe for rooms): rooms are in %s instead; "
                     "have it removed",
                     base, who, out);
        return room_dir_check(out, uid, gid, err, errlen);
    }
    if (create && make_dir(out, gid, err, errlen) < 0)
        return -1;
    return room_dir_check(out, uid, gid, err, errlen);
}

void room_lock_path(const char *sock, char *out, size_t len)
{
    size_t n = strlen(sock);
    if (n > 5 && !strcmp(sock + n - 5, ".sock"))
        n -= 5;
    snprintf(out, len, "%.*s.lock", (int)n, sock);
}

int room_is_live(const char *sock)
{
    char lock[ROOM_PATH_MAX + 8];
    room_lock_path(sock, lock, sizeof lock);
    int fd = open(lock, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return 0;
    int live = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
    close(fd);
    return live;
}

/* ---- finding rooms ------------------------------------------------------ */

/* "kvlab-<uid>" or "kvlab-<uid>-g<gid>", each optionally followed by
 * ".XXXXXX" (6 letters or digits: the folder a presenter made when the
 * predictable one was taken by someone else, room_dir). */
static int parse_folder(const char *name, uid_t *uid, gid_t *gid)
{
    unsigned long u, g;
    char tail;
    if (strncmp(name, "kvlab-", 6))
        return 0;
    const char *p = name + 6;
    if (*p < '0' || *p > '9')
        return 0;
    char base[64];
    size_t bl = strcspn(name, ".");
    if (bl >= sizeof base)
        return 0;
    if (name[bl]) {
        const char *sfx = name + bl + 1;
        if (strlen(sfx) != 6)
            return 0;
        for (int i = 0; i < 6; i++)
            if (!((sfx[i] >= 'a' && sfx[i] <= 'z') || (sfx[i] >= 'A' && sfx[i] <= 'Z') ||
                  (sfx[i] >= '0' && sfx[i] <= '9')))
                return 0;
    }
    memcpy(base, name, bl);
    base[bl] = '\0';
    if (sscanf(p, "%lu-g%lu%c", &u, &g, &tail) >= 2) {
        char canon[64];
        snprintf(canon, sizeof canon, "kvlab-%lu-g%lu", u, g);
        if (strcmp(canon, base) || u > 0xfffffffeul || g > 0xfffffffeul)
            return 0;
        *uid = (uid_t)u;
        *gid = (gid_t)g;
        return 1;
    }
    if (sscanf(p, "%lu%c", &u, &tail) >= 1) {
        char canon[64];
        snprintf(canon, sizeof canon, "kvlab-%lu", u);
        if (strcmp(canon, base) || u > 0xfffffffeul)
            return 0;
        *uid = (uid_t)u;
        *gid = ROOM_NO_GROUP;
        return 1;
    }
    return 0;
}

/* Fill e for socket <dir>/<name>.sock of uid when it is one (a socket
 * file owned by uid). Returns 1 or 0. */
static int entry_at(const char *dir, const char *name, uid_t uid, gid_t gid, room_entry *e)
{
    memset(e, 0, sizeof *e);
    int pl = snprintf(e->sock, sizeof e->sock, "%s/%s.sock", dir, name);
    if (pl < 0 || (size_t)pl >= sizeof e->sock)
        return 0;
    struct stat st;
    if (lstat(e->sock, &st) < 0 || !S_ISSOCK(st.st_mode) || st.st_uid != uid)
        return 0;
    snprintf(e->name, sizeof e->name, "%s", name);
    e->uid = uid;
    e->gid = gid;
    room_user_name(uid, e->owner, sizeof e->owner);
    if (gid != ROOM_NO_GROUP)
        room_group_name(gid, e->group, sizeof e->group);
    return 1;
}

/* Add the sockets of one (checked) folder: only <only>.sock when only is
 * not NULL (one lstat, however many sockets the folder holds), else at most
 * ROOM_SCAN_PER_FOLDER of them, so one folder full of left-over sockets
 * cannot crowd out everyone else's rooms. */
static int scan_folder(const char *dir, uid_t uid, gid_t gid, const char *only, room_entry *out, int n, int max)
{
    if (only) {
        if (n < max && entry_at(dir, only, uid, gid, &out[n]))
            n++;
        return n;
    }
    DIR *d = opendir(dir);
    if (!d)
        return n;
    struct dirent *de;
    int here = 0;
    while (n < max && here < ROOM_SCAN_PER_FOLDER && (de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l < 6 || strcmp(de->d_name + l - 5, ".sock"))
            continue;
        char name[ROOM_ROOMNAME_MAX];
        if (l - 5 >= sizeof name)
            continue;
        memcpy(name, de->d_name, l - 5);
        name[l - 5] = '\0';
        if (!room_name_ok(name) || !entry_at(dir, name, uid, gid, &out[n]))
            continue;
        n++;
        here++;
    }
    closedir(d);
    return n;
}

static int cmp_entry(const void *a, const void *b)
{
    const room_entry *x = a, *y = b;
    int c = strcmp(x->owner, y->owner);
    return c ? c : strcmp(x->name, y->name);
}

/* room_scan, or only the rooms named `only`. */
static int scan(room_entry *out, int max, int *unsafe, const char *only)
{
    int n = 0, bad = 0;
    char dir[ROOM_PATH_MAX], err[512], xdir[ROOM_PATH_MAX] = "";
    uid_t me = geteuid();
    if (unsafe)
        *unsafe = 0;
    int xbad;
    const char *x = xdg_runtime(me, &xbad, err, sizeof err);
    if (x) {
        snprintf(xdir, sizeof xdir, "%s/kvlab", x);
        if (access(xdir, F_OK) == 0) {
            if (room_dir_check(xdir, me, ROOM_NO_GROUP, err, sizeof err) == 0)
                n = scan_folder(xdir, me, ROOM_NO_GROUP, only, out, n, max);
            else
                bad++;
        }
    }
    DIR *d = opendir(room_shared_root());
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            uid_t uid;
            gid_t gid;
            if (!parse_folder(de->d_name, &uid, &gid))
                continue;
            int l = snprintf(dir, sizeof dir, "%s/%s", room_shared_root(), de->d_name);
            if (l < 0 || (size_t)l >= sizeof dir || !strcmp(dir, xdir))
                continue;
            if (room_dir_check(dir, uid, gid, err, sizeof err) < 0) {
                bad++;
                continue;
            }
            n = scan_folder(dir, uid, gid, only, out, n, max);
        }
        closedir(d);
    }
    qsort(out, (size_t)n, sizeof *out, cmp_entry);
    if (unsafe)
        *unsafe = bad;
    return n;
}

int room_scan(room_entry *out, int max, int *unsafe) { return scan(out, max, unsafe, NULL); }

int room_scan_named(const char *name, room_entry *out, int max) { return scan(out, max, NULL, name); }

int room_closed_owners(char *out, size_t len)
{
    /* Group folders first ("alice (group students)": the reason a member
     * of no such group is kept out), then owners with private folders only. */
    uid_t seen[64];
    int n = 0;
    if (len)
        out[0] = '\0';
    for (int pass = 0; pass < 2; pass++) {
        DIR *d = opendir(room_shared_root());
        struct dirent *de;
        while (d && (de = readdir(d))) {
            uid_t u;
            gid_t g;
            if (!parse_folder(de->d_name, &u, &g) || u == geteuid() || (pass == 0) != (g != ROOM_NO_GROUP))
                continue;
            char dir[ROOM_PATH_MAX];
            snprintf(dir, sizeof dir, "%.80s/%.26s", room_shared_root(), de->d_name);
            DIR *x = opendir(dir);
            if (x) {
                closedir(x);
                continue;
            }
            if (errno != EACCES)
                continue;
            int dup = 0;
            for (int i = 0; i < n; i++)
                dup |= seen[i] == u;
            if (dup || n == 64)
                continue;
            seen[n++] = u;
            char name[ROOM_NAME_MAX], grp[ROOM_NAME_MAX];
            room_user_name(u, name, sizeof name);
            size_t l = strlen(out);
            if (g != ROOM_NO_GROUP) {
                room_group_name(g, grp, sizeof grp);
                snprintf(out + l, len - l, "%s%s (group %s)", l ? ", " : "", name, grp);
            } else {
                snprintf(out + l, len - l, "%s%s", l ? ", " : "", name);
            }
        }
        if (d)
            closedir(d);
    }
    return n;
}

int room_find(const char *spec, room_entry *out, char *err, size_t errlen)
{
    char user[ROOM_NAME_MAX] = "", name[ROOM_ROOMNAME_MAX];
    memset(out, 0, sizeof *out);
    out->gid = ROOM_NO_GROUP;
    if (!spec || !*spec) {
        room_default_name(name, sizeof name);
    } else {
        const char *slash = strchr(spec, '/');
        if (slash) {
            size_t ul = (size_t)(slash - spec);
            if (ul == 0 || ul >= sizeof user || !room_text_ok(spec, ul, sizeof user))
                return kv_errf(err, errlen, -1, "'%s' is not a room: write NAME or USER/NAME", spec);
            memcpy(user, spec, ul);
            user[ul] = '\0';
            spec = slash + 1;
        }
        if (!room_name_ok(spec))
            return kv_errf(err, errlen, -1,
                           "'%s' is not a room name: 1 to 32 letters, digits, '.', '_' or '-', not starting "
                           "with '.' or '-'",
                           spec);
        snprintf(name, sizeof name, "%s", spec);
    }
    snprintf(out->name, sizeof out->name, "%s", name);
    static room_entry all[ROOM_FIND_MAX];
    int n = room_scan_named(name, all, ROOM_FIND_MAX);
    uid_t me = geteuid();
    char myname[ROOM_NAME_MAX];
    room_user_name(me, myname, sizeof myname);
    /* One's own room first: NAME alone means mine when I have one. */
    const char *want_user = user[0] ? user : NULL;
    for (int pass = 0; pass < 2; pass++) {
        int found = 0, first = -1, first_live = -1;
        char owners[256] = "";
        for (int i = 0; i < n; i++) {
            if (strcmp(all[i].name, name))
                continue;
            if (pass == 0 && !want_user && all[i].uid != me)
                continue;
            if (want_user && strcmp(all[i].owner, want_user))
                continue;
            /* A presenter's own rooms: one is live, others are sockets a
             * killed presenter left (only their owner can read the lock). */
            if (first_live < 0 && all[i].uid == me && room_is_live(all[i].sock))
                first_live = i;
            if (first < 0 || strcmp(all[first].owner, all[i].owner)) {
                size_t ol = strlen(owners);
                snprintf(owners + ol, sizeof owners - ol, "%s%s", ol ? ", " : "", all[i].owner);
            }
            if (first < 0)
                first = i;
            found++;
        }
        if (found == 1 || (found > 1 && pass == 0)) {
            /* Several of one's own (private and a group's): the first, all
             * are one presenter's; another user's name never shadows it. */
            *out = all[first_live >= 0 ? first_live : first];
            return 1;
        }
        if (found > 1)
            return kv_errf(err, errlen, -1, "room '%s' is presented by %s: write USER/%s to choose", name, owners,
                           name);
        if (want_user)
            break;
    }
    /* Not there yet: say where one's own would appear, so a follower can wait. */
    if (!want_user || !strcmp(want_user, myname)) {
        char dir[ROOM_PATH_MAX], e2[256];
        if (!want_user) {
            /* A bare name: rooms in folders we may not read could be it; a
             * follower says so rather than wait in silence. */
            char owners[8];
            out->closed = room_closed_owners(owners, sizeof owners) > 0;
        }
        if (room_dir(me, ROOM_NO_GROUP, 0, dir, sizeof dir, NULL, 0, e2, sizeof e2) == 0 || dir[0]) {
            snprintf(out->sock, sizeof out->sock, "%.69s/%s.sock", dir, name);
            out->uid = me;
            snprintf(out->owner, sizeof out->owner, "%s", myname);
        }
    } else {
        snprintf(out->owner, sizeof out->owner, "%s", want_user);
        struct passwd pw, *res = NULL;
        char pbuf[4096];
        int prc = getpwnam_r(want_user, &pw, pbuf, sizeof pbuf, &res);
        char *nend = NULL;
        unsigned long nuid = 0;
        if (res)
            out->uid = res->pw_uid;
        else if (!strncmp(want_user, "uid", 3) && want_user[3] >= '0' && want_user[3] <= '9' &&
                 (nuid = strtoul(want_user + 3, &nend, 10), !*nend))
            out->uid = (uid_t)nuid; /* room_user_name's form for a uid without a name */
        else if (prc == 0 || prc == ENOENT || prc == ESRCH)
            /* Nobody to wait for: a follower would wait forever. */
            return kv_errf(err, errlen, -1, "no user '%s' on this machine (kvlab rooms lists the rooms you can "
                           "follow)", want_user);
        else
            return 0; /* the user database did not answer: wait, and ask again on the next try */
        /* The user's folders we may not read: rooms that are not open to us. */
        DIR *d = opendir(room_shared_root());
        struct dirent *de;
        while (d && (de = readdir(d))) {
            uid_t u;
            gid_t g;
            if (!parse_folder(de->d_name, &u, &g) || u != out->uid)
                continue;
            char dir[ROOM_PATH_MAX];
            snprintf(dir, sizeof dir, "%.80s/%.26s", room_shared_root(), de->d_name);
            DIR *x = opendir(dir);
            if (x)
                closedir(x);
            else if (errno == EACCES)
                out->closed = 1;
        }
        if (d)
            closedir(d);
    }
    return 0;
}
