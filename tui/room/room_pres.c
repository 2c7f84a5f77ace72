/* room_pres: the presenter's socket, admission and fan-out (see room_pres.h). */
/* accept4 is a Linux extension. */
#define _GNU_SOURCE
#include "room_pres.h"

#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kv_util.h"
#include "room_access.h"
#include "room_path.h"

#define FRAME_CAP (ROOM_HEADER_LEN + ROOM_MSG_MAX_PAYLOAD)
#define ACCEPTS_PER_POLL 64
#define DISCARD_PER_POLL (64 * 1024)
#define FOLLOWER_SNDBUF (64 * 1024)   /* what the kernel may hold for a slow follower */

enum { P_HELLO = 0, P_FOLLOW, P_PROBE };

typedef struct pfollower {
    int fd;
    int phase;
    double since;              /* accepted at (monotonic s) */
    uid_t uid;
    uint8_t in[ROOM_HELLO_MAX];
    size_t inlen;
    uint8_t *out;              /* frames not yet taken by the socket */
    size_t outlen, outoff, outcap;
    int got_state;             /* has been sent a STATE (deltas may follow) */
    int need_full;             /* skipped a message: send the latest STATE once drained */
    int need_image;            /* joined with images on: no STATE before its image (room_pres_send_image) */
    int dead;
} pfollower;

struct room_pres {
    char name[ROOM_ROOMNAME_MAX];
    char path[ROOM_PATH_MAX];
    char lock_path[ROOM_PATH_MAX + 8];
    char group[ROOM_NAME_MAX];
    char owner_name[ROOM_NAME_MAX];
    char notice[ROOM_TEXT_MAX];  /* room_pres_notice */
    uid_t owner;
    gid_t gid;
    int lfd, lockfd;
    ino_t sock_ino;
    uint64_t seq, run_id;
    int have_cur;
    room_state cur;            /* the latest published state */
    room_msg msg;              /* scratch for encoding and the hellos */
    uint8_t *full;             /* cur encoded as a STATE */
    size_t full_len;
    int full_dirty;
    uint8_t *frame;            /* scratch frame */
    pfollower *fol[ROOM_MAX_FOLLOWERS];
    int nfol;
    int following;
    int images;                /* room_pres_set_images */
    room_pres_stats stats;
};

static void state_copy(room_state *d, const room_state *s);

/* ---- opening ----------------------------------------------------------- */

/* Take the room's lock: an flock'ed file holding the presenter's pid. The
 * path is checked to still be the file locked (a presenter that removed it
 * while quitting must not leave two owners). */
static int take_lock(room_pres *p, char *err, size_t errlen)
{
    for (int tries = 0; tries < 5; tries++) {
        int fd = open(p->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return kv_errf(err, errlen, -1, "cannot open the room lock %s: %s", p->lock_path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            int e = errno;
            char buf[32] = "";
            ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
            close(fd);
            if (e == EWOULDBLOCK) {
                buf[n > 0 ? n : 0] = '\0';
                long pid = strtol(buf, NULL, 10);
                if (pid > 0)
                    return kv_errf(err, errlen, -1, "room '%s' is already being presented (kvlab pid %ld); "
                                   "choose another name with --present NAME", p->name, pid);
                return kv_errf(err, errlen, -1, "room '%s' is already being presented", p->name);
            }
            return kv_errf(err, errlen, -1, "cannot lock %s: %s", p->lock_path, strerror(e));
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && lstat(p->lock_path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev &&
            S_ISREG(b.st_mode)) {
            char pid[32];
            int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
            if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
                /* the pid is only for the message above */
            }
            p->lockfd = fd;
            return 0;
        }
        close(fd);
    }
    return kv_errf(err, errlen, -1, "cannot take the room lock %s (it keeps changing)", p->lock_path);
}

room_pres *room_pres_open_at(const char *sock_path, const char *name, uid_t owner, gid_t gid, char *err,
                             size_t errlen)
{
    room_pres *p = calloc(1, sizeof *p);
    if (!p) {
        kv_errf(err, errlen, -1, "out of memory");
        return NULL;
    }
    p->lfd = p->lockfd = -1;
    p->owner = owner;
    p->gid = gid;
    snprintf(p->name, sizeof p->name, "%s", name ? name : "");
    room_user_name(owner, p->owner_name, sizeof p->owner_name);
    if (gid != ROOM_NO_GROUP)
        room_group_name(gid, p->group, sizeof p->group);
    size_t pl = strlen(sock_path);
    if (pl >= sizeof p->path || pl >= sizeof ((struct sockaddr_un *)0)->sun_path) {
        kv_errf(err, errlen, -1, "the room socket path %s is too long", sock_path);
        free(p);
        return NULL;
    }
    memcpy(p->path, sock_path, pl + 1);
    room_lock_path(p->path, p->lock_path, sizeof p->lock_path);
    p->full = malloc(FRAME_CAP);
    p->frame = malloc(FRAME_CAP);
    if (!p->full || !p->frame) {
        kv_errf(err, errlen, -1, "out of memory");
        goto fail;
    }
    if (take_lock(p, err, errlen) < 0)
        goto fail;
    /* We hold the lock, so a socket left there is a crashed presenter's. */
    struct stat st;
    if (lstat(p->path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            kv_errf(err, errlen, -1, "%s exists and is not a room socket: remove it and start again", p->path);
            goto fail;
        }
        unlink(p->path);
    }
    p->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (p->lfd < 0) {
        kv_errf(err, errlen, -1, "cannot make a socket: %s", strerror(errno));
        goto fail;
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, p->path, pl + 1);
    mode_t old = umask(0177); /* the socket is born 0600: nobody slips in before the chmod */
    int b = bind(p->lfd, (struct sockaddr *)&sa, sizeof sa);
    int be = errno;
    umask(old);
    if (b < 0) {
        kv_errf(err, errlen, -1, "cannot open room socket %s: %s", p->path, strerror(be));
        goto fail;
    }
    if (gid != ROOM_NO_GROUP && (chown(p->path, (uid_t)-1, gid) < 0 || chmod(p->path, 0660) < 0)) {
        kv_errf(err, errlen, -1, "cannot open room socket %s to group %s: %s", p->path, p->group, strerror(errno));
        unlink(p->path);
        goto fail;
    }
    if (lstat(p->path, &st) == 0)
        p->sock_ino = st.st_ino;
    if (listen(p->lfd, 64) < 0) {
        kv_errf(err, errlen, -1, "cannot listen on %s: %s", p->path, strerror(errno));
        unlink(p->path);
        goto fail;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    p->run_id = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40);
    if (!p->run_id)
        p->run_id = 1;
    return p;
fail:
    if (p->lfd >= 0)
        close(p->lfd);
    if (p->lockfd >= 0)
        close(p->lockfd);
    free(p->full);
    free(p->frame);
    free(p);
    return NULL;
}

room_pres *room_pres_open(const char *name, const char *allow_group, char *err, size_t errlen)
{
    char nm[ROOM_ROOMNAME_MAX], dir[ROOM_PATH_MAX], path[ROOM_PATH_MAX + 40];
    if (name && *name) {
        if (!room_name_ok(name)) {
            kv_errf(err, errlen, -1,
                    "'%s' is not a room name: 1 to 32 letters, digits, '.', '_' or '-', not starting with '.' or '-'",
                    name);
            return NULL;
        }
        snprintf(nm, sizeof nm, "%s", name);
    } else {
        room_default_name(nm, sizeof nm);
    }
    gid_t gid = ROOM_NO_GROUP;
    if (allow_group && room_group_lookup(allow_group, &gid, err, errlen) < 0)
        return NULL;
    uid_t me = geteuid();
    /* One room of a name per presenter, whatever its audience: a follower
     * naming it must not have to choose. */
    static room_entry all[ROOM_FIND_MAX];
    int n = room_scan_named(nm, all, ROOM_FIND_MAX);
    for (int i = 0; i < n; i++) {
        if (all[i].uid != me || strcmp(all[i].name, nm) || all[i].gid == gid)
            continue;
        if (room_is_live(all[i].sock)) {
            kv_errf(err, errlen, -1, "you already present room '%s' (open to %s): quit it first or choose another name",
                    nm, all[i].gid == ROOM_NO_GROUP ? "you only" : all[i].group);
            return NULL;
        }
        /* Left by a presenter that was killed: followers must not find it. */
        char lock[ROOM_PATH_MAX + 8];
        room_lock_path(all[i].sock, lock, sizeof lock);
        unlink(all[i].sock);
        unlink(lock);
    }
    char notice[ROOM_TEXT_MAX];
    if (room_dir(me, gid, 1, dir, sizeof dir, notice, sizeof notice, err, errlen) < 0)
        return NULL;
    snprintf(path, sizeof path, "%s/%s.sock", dir, nm);
    room_pres *p = room_pres_open_at(path, nm, me, gid, err, errlen);
    if (p)
        snprintf(p->notice, sizeof p->notice, "%s", notice);
    return p;
}

/* ---- sending ------------------------------------------------------------- */

static void drop(room_pres *p, int i)
{
    pfollower *f = p->fol[i];
    if (f->phase == P_FOLLOW)
        p->following--;
    close(f->fd);
    free(f->out);
    free(f);
    p->fol[i] = p->fol[--p->nfol];
    p->fol[p->nfol] = NULL;
}

/* Send what waits, as far as the socket takes it. */
static void flush(room_pres *p, pfollower *f)
{
    while (f->outoff < f->outlen) {
        ssize_t n = send(f->fd, f->out + f->outoff, f->outlen - f->outoff, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
            f->outoff += (size_t)n;
            p->stats.bytes_sent += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        f->dead = 1;
        return;
    }
    f->outoff = f->outlen = 0;
}

static int pending(const pfollower *f) { return f->outoff < f->outlen; }

/* Append a frame to f's output and try to send it. */
static void append(room_pres *p, pfollower *f, const uint8_t *b, size_t n)
{
    if (f->outoff == f->outlen)
        f->outoff = f->outlen = 0;
    if (f->outlen + n > f->outcap) {
        size_t cap = f->outcap ? f->outcap : 4096;
        while (cap < f->outlen + n)
            cap *= 2;
        uint8_t *nb = realloc(f->out, cap);
        if (!nb) {
            f->dead = 1;
            return;
        }
        f->out = nb;
        f->outcap = cap;
    }
    memcpy(f->out + f->outlen, b, n);
    f->outlen += n;
    flush(p, f);
    size_t w = f->outlen - f->outoff;
    if (w > p->stats.pending_max)
        p->stats.pending_max = w;
}

/* p->cur as a STATE frame in p->full. */
static int ensure_full(room_pres *p)
{
    if (!p->have_cur)
        return 0;
    if (p->full_dirty || !p->full_len) {
        room_msg_init(&p->msg, ROOM_T_STATE);
        state_copy(&p->msg.st, &p->cur);
        p->msg.have = ROOM_H_FULL | ROOM_H_FOLLOWERS | ROOM_H_SCREEN;
        p->full_len = room_msg_encode(&p->msg, p->full, FRAME_CAP);
        p->full_dirty = 0;
    }
    return p->full_len > 0;
}

static void send_full(room_pres *p, pfollower *f)
{
    if (!ensure_full(p))
        return;
    append(p, f, p->full, p->full_len);
    f->got_state = 1;
    f->need_full = 0;
    p->stats.states_sent++;
}

static void send_small(room_pres *p, pfollower *f, room_msg *m)
{
    uint8_t buf[ROOM_TEXT_MAX + 512];
    size_t n = room_msg_encode(m, buf, sizeof buf);
    if (n)
        append(p, f, buf, n);
}

static void send_text(room_pres *p, pfollower *f, int type, const char *text)
{
    room_msg_init(&p->msg, type);
    snprintf(p->msg.text, sizeof p->msg.text, "%s", text);
    send_small(p, f, &p->msg);
}

static void send_welcome(room_pres *p, pfollower *f)
{
    room_msg_init(&p->msg, ROOM_T_WELCOME);
    snprintf(p->msg.room, sizeof p->msg.room, "%s", p->name);
    snprintf(p->msg.presenter, sizeof p->msg.presenter, "%s", p->owner_name);
    snprintf(p->msg.group, sizeof p->msg.group, "%s", p->group);
    p->msg.pid = (int32_t)getpid();
    if (p->have_cur) {
        p->msg.st.lesson = p->cur.lesson;
        memcpy(p->msg.st.lesson_title, p->cur.lesson_title, sizeof p->msg.st.lesson_title);
    }
    p->msg.st.followers = p->following;
    send_small(p, f, &p->msg);
}

/* ---- polling --------------------------------------------------------------- */

static void refuse_fd(room_pres *p, int fd, const char *text)
{
    room_msg_init(&p->msg, ROOM_T_REFUSE);
    snprintf(p->msg.text, sizeof p->msg.text, "%s", text);
    uint8_t buf[ROOM_TEXT_MAX + 64];
    size_t n = room_msg_encode(&p->msg, buf, sizeof buf);
    if (n && send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
        p->stats.bytes_sent += n;
    close(fd);
    p->stats.refused++;
}

/* Connections uid holds now (saying hello, following or probing). */
static int connections_of(const room_pres *p, uid_t uid)
{
    int n = 0;
    for (int i = 0; i < p->nfol; i++)
        n += p->fol[i]->uid == uid && !p->fol[i]->dead;
    return n;
}

static void accept_new(room_pres *p, double now)
{
    for (int k = 0; k < ACCEPTS_PER_POLL; k++) {
        int fd = accept4(p->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        room_peer peer;
        char err[256], why[ROOM_TEXT_MAX];
        if (room_peer_get(fd, &peer, err, sizeof err) < 0) {
            refuse_fd(p, fd, err);
            continue;
        }
        if (!room_access_allowed(p->owner, p->gid, &peer)) {
            room_access_refusal(why, sizeof why, p->name, p->owner, p->gid, peer.uid);
            refuse_fd(p, fd, why);
            continue;
        }
        if (peer.uid != p->owner && connections_of(p, peer.uid) >= ROOM_MAX_PER_MEMBER) {
            /* One member cannot fill the room (connections it holds open
             * without a hello, or many followers): the presenter's own user
             * may open as many as the room holds. */
            char who[ROOM_NAME_MAX];
            room_user_name(peer.uid, who, sizeof who);
            snprintf(why, sizeof why, "you (%s) already have %d connections to room '%s'; close one first", who,
                     ROOM_MAX_PER_MEMBER, p->name);
            refuse_fd(p, fd, why);
            continue;
        }
        if (p->nfol >= ROOM_MAX_FOLLOWERS) {
            snprintf(why, sizeof why, "room '%s' is full (%d followers)", p->name, ROOM_MAX_FOLLOWERS);
            refuse_fd(p, fd, why);
            continue;
        }
        pfollower *f = calloc(1, sizeof *f);
        if (!f) {
            close(fd);
            continue;
        }
        int sb = FOLLOWER_SNDBUF;
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof sb);
        f->fd = fd;
        f->phase = P_HELLO;
        f->since = now;
        f->uid = peer.uid;
        p->fol[p->nfol++] = f;
    }
}

/* Read from f: its hello, or bytes to throw away. */
static void read_follower(room_pres *p, pfollower *f)
{
    if (f->phase == P_HELLO) {
        for (;;) {
            if (f->inlen == sizeof f->in) {
                f->dead = 1; /* a hello is far smaller */
                p->stats.refused++;
                return;
            }
            ssize_t n = recv(f->fd, f->in + f->inlen, sizeof f->in - f->inlen, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                f->dead = 1;
                return;
            }
            if (n < 0)
                break;
            f->inlen += (size_t)n;
            size_t used;
            char err[256];
            int rc = room_msg_decode(f->in, f->inlen, &p->msg, &used, err, sizeof err);
            if (rc == 0)
                continue;
            if (rc < 0 || p->msg.type != ROOM_T_HELLO) {
                send_text(p, f, ROOM_T_REFUSE, rc < 0 ? err : "the first message must be a hello");
                f->dead = 1;
                p->stats.refused++;
                return;
            }
            if (p->msg.mode == ROOM_MODE_PROBE) {
                f->phase = P_PROBE;
                send_welcome(p, f);
            } else {
                f->phase = P_FOLLOW;
                p->following++;
                send_welcome(p, f);
                f->need_image = p->images;
                if (p->have_cur && !f->need_image)
                    send_full(p, f);
            }
            f->inlen = 0; /* whatever came after the hello is dropped */
            break;
        }
    }
    if (f->phase == P_HELLO)
        return;
    uint8_t junk[4096];
    for (size_t got = 0; got < DISCARD_PER_POLL;) {
        ssize_t n = recv(f->fd, junk, sizeof junk, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            f->dead = 1;
            return;
        }
        if (n < 0)
            return;
        got += (size_t)n;
    }
}

int room_pres_poll(room_pres *p, double now)
{
    int before = p->following;
    accept_new(p, now);
    for (int i = 0; i < p->nfol; i++) {
        pfollower *f = p->fol[i];
        read_follower(p, f);
        if (!f->dead && pending(f))
            flush(p, f);
        if (!f->dead && !pending(f)) {
            if (f->phase == P_PROBE)
                f->dead = 1; /* answered */
            else if (f->phase == P_FOLLOW && (f->need_full || !f->got_state) && p->have_cur && !f->need_image)
                send_full(p, f);
        }
        if (!f->dead && f->phase == P_HELLO && now - f->since > ROOM_HELLO_TIMEOUT_S) {
            f->dead = 1;
            p->stats.refused++;
        }
    }
    for (int i = p->nfol - 1; i >= 0; i--)
        if (p->fol[i]->dead)
            drop(p, i);
    return p->following != before;
}

int room_pres_pollfds(const room_pres *p, struct pollfd *fds, int max)
{
    int n = 0;
    if (n < max) {
        fds[n].fd = p->lfd;
        fds[n].events = POLLIN;
        fds[n++].revents = 0;
    }
    for (int i = 0; i < p->nfol && n < max; i++) {
        fds[n].fd = p->fol[i]->fd;
        fds[n].events = (short)(POLLIN | (pending(p->fol[i]) ? POLLOUT : 0));
        fds[n++].revents = 0;
    }
    return n;
}

/* ---- publishing ------------------------------------------------------------ */

static int inputs_equal(const room_state *a, const room_state *b)
{
    if (a->ninputs != b->ninputs)
        return 0;
    for (int i = 0; i < a->ninputs; i++) {
        const room_input *x = &a->inputs[i], *y = &b->inputs[i];
        if (x->wait != y->wait || x->kind != y->kind || strcmp(x->name, y->name) || strcmp(x->value, y->value))
            return 0;
    }
    return 1;
}

static int flags_equal(const room_state *a, const room_state *b)
{
    if (a->nflags != b->nflags)
        return 0;
    for (int i = 0; i < a->nflags; i++)
        if (strcmp(a->flags[i].name, b->flags[i].name) || strcmp(a->flags[i].value, b->flags[i].value))
            return 0;
    return 1;
}

/* Copy the used part of a state (its lists hold up to ~190 KiB, rarely
 * more than a few entries: the presenter copies every frame). */
static void state_copy(room_state *d, const room_state *s)
{
    memcpy(d, s, offsetof(room_state, inputs));
    int ni = s->ninputs < 0 ? 0 : s->ninputs > ROOM_MAX_INPUTS ? ROOM_MAX_INPUTS : s->ninputs;
    int nf = s->nflags < 0 ? 0 : s->nflags > ROOM_MAX_FLAGS ? ROOM_MAX_FLAGS : s->nflags;
    int ne = s->nevents < 0 ? 0 : s->nevents > ROOM_MAX_EVENTS ? ROOM_MAX_EVENTS : s->nevents;
    memcpy(d->inputs, s->inputs, (size_t)ni * sizeof s->inputs[0]);
    d->nflags = s->nflags;
    memcpy(d->flags, s->flags, (size_t)nf * sizeof s->flags[0]);
    d->nevents = s->nevents;
    memcpy(d->events, s->events, (size_t)ne * sizeof s->events[0]);
}

/* Copy st into dst with every count within its bound and every string
 * terminated, so what is encoded is what was meant. */
static void copy_state(room_state *dst, const room_state *st)
{
    state_copy(dst, st);
    if (dst->ninputs < 0) dst->ninputs = 0;
    if (dst->ninputs > ROOM_MAX_INPUTS) dst->ninputs = ROOM_MAX_INPUTS;
    if (dst->nflags < 0) dst->nflags = 0;
    if (dst->nflags > ROOM_MAX_FLAGS) dst->nflags = ROOM_MAX_FLAGS;
    if (dst->nevents < 0) dst->nevents = 0;
    if (dst->nevents > ROOM_MAX_EVENTS) dst->nevents = ROOM_MAX_EVENTS;
    /* Numbers within the ranges the decoder accepts. */
    if (dst->lesson < 0 || dst->lesson > 99) dst->lesson = 0;
    if (dst->step < 0) dst->step = 0;
    if (dst->step > 1000000) dst->step = 1000000;
    if (dst->page < 0) dst->page = 0;
    if (dst->page > 1000000) dst->page = 1000000;
    if (dst->run_state > 7) dst->run_state = 0;
    if (dst->step_starts > 1000000) dst->step_starts = 1000000;
    if (dst->view_focus < -1 || dst->view_focus > 31) dst->view_focus = -1;
    dst->paused = dst->paused ? 1 : 0;
    if (!(dst->speed > 0 && dst->speed <= 64)) dst->speed = 1.0; /* NaN too */
    for (int i = 0; i < dst->ninputs; i++) {
        if (dst->inputs[i].wait < 0) dst->inputs[i].wait = 0;
        if (dst->inputs[i].wait > 1000000) dst->inputs[i].wait = 1000000;
    }
    for (int i = 0; i < dst->nevents; i++)
        if (dst->events[i].kind < 1 || dst->events[i].kind >= ROOM_EV_COUNT)
            dst->events[i].kind = ROOM_EV_NEXT;
    room_text_clean(dst->lesson_title, sizeof dst->lesson_title);
    for (int i = 0; i < dst->ninputs; i++) {
        room_text_clean(dst->inputs[i].name, ROOM_NAME_MAX);
        room_text_clean(dst->inputs[i].value, ROOM_VALUE_MAX);
        if (dst->inputs[i].kind > ROOM_IN_REVEAL)
            dst->inputs[i].kind = ROOM_IN_REVEAL;
        if (dst->inputs[i].kind != ROOM_IN_FLAG)
            dst->inputs[i].name[0] = '\0';
        else if (!dst->inputs[i].name[0])
            snprintf(dst->inputs[i].name, ROOM_NAME_MAX, "?");
        if (dst->inputs[i].kind == ROOM_IN_REVEAL)
            dst->inputs[i].value[0] = '\0';
    }
    for (int i = 0; i < dst->nflags; i++) {
        room_text_clean(dst->flags[i].name, ROOM_NAME_MAX);
        room_text_clean(dst->flags[i].value, ROOM_VALUE_MAX);
        if (!dst->flags[i].name[0])
            snprintf(dst->flags[i].name, ROOM_NAME_MAX, "?");
    }
    for (int i = 0; i < dst->nevents; i++) {
        room_text_clean(dst->events[i].name, ROOM_NAME_MAX);
        room_text_clean(dst->events[i].value, ROOM_VALUE_MAX);
    }
    room_screen *c = &dst->scr;
    if (c->rewind_back < -1) c->rewind_back = -1;
    if (c->rewind_step < 0) c->rewind_step = 0;
    c->input_active = c->input_active ? 1 : 0;
    if (c->verdict_kind < -1 || c->verdict_kind > 15) c->verdict_kind = -1;
    if (c->nhints < 0) c->nhints = 0;
    if (c->nhints > ROOM_MAX_HINTS) c->nhints = ROOM_MAX_HINTS;
    if (c->flag_editing > 2) c->flag_editing = 0;
    if (c->flag_sel < 0 || c->flag_sel > ROOM_MAX_FLAGS) c->flag_sel = 0;
    room_text_clean(c->typed, sizeof c->typed);
    room_text_clean(c->verdict, sizeof c->verdict);
    for (int i = 0; i < c->nhints; i++)
        room_text_clean(c->hints[i], sizeof c->hints[i]);
    room_text_clean(c->flag_typed, sizeof c->flag_typed);
}

static int screen_equal(const room_screen *a, const room_screen *b)
{
    if (a->rewind_back != b->rewind_back || a->rewind_step != b->rewind_step || a->input_active != b->input_active ||
        a->verdict_kind != b->verdict_kind || a->nhints != b->nhints || a->flag_editing != b->flag_editing ||
        a->flag_sel != b->flag_sel || strcmp(a->typed, b->typed) || strcmp(a->verdict, b->verdict) ||
        strcmp(a->flag_typed, b->flag_typed))
        return 0;
    for (int i = 0; i < a->nhints; i++)
        if (strcmp(a->hints[i], b->hints[i]))
            return 0;
    return 1;
}

int room_pres_publish(room_pres *p, const room_state *st_in)
{
    static room_state st; /* one presenter per process: no need for a big stack frame */
    copy_state(&st, st_in);
    st.followers = p->following;
    st.run_id = p->run_id;
    int full = !p->have_cur;
    unsigned have = 0;
    const room_state *c = &p->cur;
    if (!full) {
        full = c->lesson != st.lesson || strcmp(c->lesson_title, st.lesson_title) || c->step != st.step ||
               c->page != st.page || c->run_state != st.run_state || !inputs_equal(c, &st) ||
               !flags_equal(c, &st) || c->engine_seed != st.engine_seed || c->server_gen != st.server_gen ||
               c->step_starts != st.step_starts ||
               st.engine_step < c->engine_step;
        if (c->engine_step != st.engine_step) have |= ROOM_H_ENGINE;
        if (c->view_focus != st.view_focus || c->paused != st.paused || c->speed != st.speed) have |= ROOM_H_VIEW;
        if (c->followers != st.followers) have |= ROOM_H_FOLLOWERS;
        if (!screen_equal(&c->scr, &st.scr)) have |= ROOM_H_SCREEN;
    }
    if (!full && !have && st.nevents == 0)
        return 0;
    uint64_t base = p->seq;
    st.seq = ++p->seq;
    st.base_seq = 0;
    /* This message carries the events; the state kept for followers who
     * join or skip later does not (they were not there for them). */
    room_msg_init(&p->msg, full ? ROOM_T_STATE : ROOM_T_DELTA);
    state_copy(&p->msg.st, &st);
    if (full) {
        p->msg.have = ROOM_H_FULL | ROOM_H_FOLLOWERS | ROOM_H_SCREEN;
    } else {
        p->msg.st.base_seq = base;
        p->msg.have = have;
    }
    size_t flen = room_msg_encode(&p->msg, p->frame, FRAME_CAP);
    state_copy(&p->cur, &st);
    p->cur.nevents = 0;
    p->have_cur = 1;
    p->full_dirty = 1;
    if (!flen)
        return 0;
    int sent = 0;
    for (int i = 0; i < p->nfol; i++) {
        pfollower *f = p->fol[i];
        if (f->phase != P_FOLLOW || f->dead || f->need_image)
            continue;
        if (pending(f)) {
            f->need_full = 1;
            p->stats.skipped++;
            continue;
        }
        if (!f->got_state || f->need_full) {
            send_full(p, f);
        } else {
            append(p, f, p->frame, flen);
            if (full)
                p->stats.states_sent++;
            else
                p->stats.deltas_sent++;
        }
        sent++;
    }
    for (int i = p->nfol - 1; i >= 0; i--)
        if (p->fol[i]->dead)
            drop(p, i);
    return sent;
}

void room_pres_set_images(room_pres *p, int on) { p->images = on != 0; }

int room_pres_wants_image(const room_pres *p)
{
    if (!p->have_cur)
        return 0;
    for (int i = 0; i < p->nfol; i++)
        if (p->fol[i]->phase == P_FOLLOW && !p->fol[i]->dead && p->fol[i]->need_image)
            return 1;
    return 0;
}

int room_pres_send_image(room_pres *p, const uint8_t *image, size_t len)
{
    if (!image || len > ROOM_IMAGE_MAX)
        len = 0;
    int sent = 0;
    for (int i = 0; i < p->nfol; i++) {
        pfollower *f = p->fol[i];
        if (f->phase != P_FOLLOW || f->dead || !f->need_image)
            continue;
        f->need_image = 0;
        for (size_t off = 0; off < len && !f->dead;) {
            room_msg_init(&p->msg, ROOM_T_IMAGE);
            p->msg.st.run_id = p->run_id;
            p->msg.st.server_gen = p->cur.server_gen;
            p->msg.st.engine_step = p->cur.engine_step;
            size_t n = len - off < ROOM_IMAGE_CHUNK ? len - off : ROOM_IMAGE_CHUNK;
            memcpy(p->msg.img_data, image + off, n);
            p->msg.img_total = (uint32_t)len;
            p->msg.img_off = (uint32_t)off;
            p->msg.img_len = (uint32_t)n;
            size_t flen = room_msg_encode(&p->msg, p->frame, FRAME_CAP);
            if (!flen)
                break;
            append(p, f, p->frame, flen);
            p->stats.image_bytes += flen;
            off += n;
        }
        if (len)
            p->stats.images_sent++;
        send_full(p, f);
        sent++;
    }
    for (int i = p->nfol - 1; i >= 0; i--)
        if (p->fol[i]->dead)
            drop(p, i);
    return sent;
}

/* ---- the rest ------------------------------------------------------------ */

/* How long closing a room may wait, in all, for followers to take what is
 * left of their last frame and the goodbye (ms). */
#define CLOSE_FLUSH_MS 500

static double mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Flush every follower's waiting output, waiting for their sockets until
 * the monotonic time `until` (ms) at most. */
static void flush_until(room_pres *p, double until)
{
    for (;;) {
        struct pollfd fds[ROOM_MAX_FOLLOWERS];
        nfds_t n = 0;
        for (int i = 0; i < p->nfol && n < ROOM_MAX_FOLLOWERS; i++) {
            pfollower *f = p->fol[i];
            if (f->dead || !pending(f))
                continue;
            flush(p, f);
            if (!f->dead && pending(f))
                fds[n++] = (struct pollfd){f->fd, POLLOUT, 0};
        }
        double left = until - mono_ms();
        if (n == 0 || left <= 0)
            return;
        if (poll(fds, n, (int)left + 1) < 0 && errno != EINTR)
            return;
    }
}

void room_pres_close(room_pres *p, const char *why)
{
    if (!p)
        return;
    /* A follower that is behind (a busy machine, a slow terminal) is in the
     * middle of a frame: it gets the rest of it first, then the goodbye,
     * within CLOSE_FLUSH_MS in all (a follower that reads nothing for that
     * long notices the closed socket instead; a goodbye behind a half-sent
     * frame would be cut off). Without the wait such a follower said
     * "presenter gone" for a presenter that had quit. */
    double until = mono_ms() + CLOSE_FLUSH_MS;
    flush_until(p, until);
    for (int i = 0; i < p->nfol; i++) {
        pfollower *f = p->fol[i];
        if (f->phase == P_FOLLOW && !f->dead && !pending(f))
            send_text(p, f, ROOM_T_BYE, why ? why : "the presenter quit");
    }
    flush_until(p, until);
    while (p->nfol > 0)
        drop(p, p->nfol - 1);
    if (p->lfd >= 0) {
        struct stat st;
        if (lstat(p->path, &st) == 0 && st.st_ino == p->sock_ino)
            unlink(p->path);
        close(p->lfd);
    }
    if (p->lockfd >= 0) {
        unlink(p->lock_path);
        close(p->lockfd);
    }
    free(p->full);
    free(p->frame);
    free(p);
}

const char *room_pres_name(const room_pres *p) { return p->name; }
const char *room_pres_path(const room_pres *p) { return p->path; }
const char *room_pres_group(const room_pres *p) { return p->group; }
const char *room_pres_notice(const room_pres *p) { return p->notice; }

int room_pres_joining(const room_pres *p)
{
    int n = 0;
    for (int i = 0; i < p->nfol; i++)
        n += p->fol[i]->phase == P_HELLO && !p->fol[i]->dead;
    return n;
}
int room_pres_followers(const room_pres *p) { return p->following; }
uint64_t room_pres_seq(const room_pres *p) { return p->seq; }
void room_pres_get_stats(const room_pres *p, room_pres_stats *out) { *out = p->stats; }
