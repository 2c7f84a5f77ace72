/* room_follow: connecting to a room, reconnecting, and keeping the
 * presenter's state (see room_follow.h). */
/* struct ucred and SO_PEERCRED are Linux extensions. */
#define _GNU_SOURCE
#include "room_follow.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kv_util.h"
#include "room_access.h"

#define INBUF_CAP (ROOM_HEADER_LEN + ROOM_MSG_MAX_PAYLOAD)
#define READ_PER_POLL (1024 * 1024)

struct room_follow {
    char spec[ROOM_NAME_MAX + ROOM_ROOMNAME_MAX + 2];
    char fixed_path[ROOM_PATH_MAX]; /* room_follow_new_at */
    char name[ROOM_ROOMNAME_MAX];
    char shown[ROOM_NAME_MAX + ROOM_ROOMNAME_MAX + 2]; /* as the follower named it: NAME or USER/NAME */
    int fd;
    room_follow_status status;
    char message[ROOM_TEXT_MAX + 128];
    double next_try;
    int ever_followed;             /* for "the presenter quit" rather than "waiting" */
    uint8_t *in;
    size_t inlen;
    room_msg *msg;                 /* scratch */
    room_state *st;
    int have_state;
    room_msg welcome;
    int have_welcome;
    uid_t presenter_uid;           /* from SO_PEERCRED at the last connect */
    char presenter[ROOM_NAME_MAX]; /* its user name: what the follower shows */
    int pinned;                    /* spec was rewritten to USER/NAME (the first presenter found) */
    uint8_t *img;                  /* the engine image being put together, or whole (img_have == img_total) */
    size_t img_have, img_cap;
    uint32_t img_total, img_gen;
    uint64_t img_run, img_step;
    room_follow_stats stats;
};

static room_follow *alloc_follow(void)
{
    room_follow *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->fd = -1;
    f->in = malloc(INBUF_CAP);
    f->msg = malloc(sizeof *f->msg);
    f->st = malloc(sizeof *f->st);
    if (!f->in || !f->msg || !f->st) {
        room_follow_free(f);
        return NULL;
    }
    return f;
}

room_follow *room_follow_new(const char *spec, char *err, size_t errlen)
{
    room_entry e;
    if (room_find(spec, &e, err, errlen) < 0)
        return NULL;
    room_follow *f = alloc_follow();
    if (!f) {
        kv_errf(err, errlen, -1, "out of memory");
        return NULL;
    }
    snprintf(f->spec, sizeof f->spec, "%s", spec ? spec : "");
    snprintf(f->name, sizeof f->name, "%s", e.name);
    const char *slash = spec ? strchr(spec, '/') : NULL;
    snprintf(f->shown, sizeof f->shown, "%.*s%s", slash ? (int)(slash - spec + 1) : 0, slash ? spec : "", e.name);
    snprintf(f->message, sizeof f->message, "waiting for the presenter of room '%s'", f->shown);
    return f;
}

room_follow *room_follow_new_at(const char *sock_path, const char *name)
{
    room_follow *f = alloc_follow();
    if (!f)
        return NULL;
    snprintf(f->fixed_path, sizeof f->fixed_path, "%s", sock_path);
    snprintf(f->name, sizeof f->name, "%s", name ? name : "room");
    snprintf(f->shown, sizeof f->shown, "%s", f->name);
    snprintf(f->message, sizeof f->message, "waiting for the presenter of room '%s'", f->shown);
    return f;
}

void room_follow_free(room_follow *f)
{
    if (!f)
        return;
    if (f->fd >= 0)
        close(f->fd);
    free(f->in);
    free(f->msg);
    free(f->st);
    free(f->img);
    free(f);
}

void room_follow_drop_image(room_follow *f)
{
    free(f->img);
    f->img = NULL;
    f->img_have = f->img_cap = 0;
    f->img_total = 0;
}

const uint8_t *room_follow_image(const room_follow *f, size_t *len, uint64_t *run_id, uint32_t *server_gen,
                                 uint64_t *engine_step)
{
    if (!f->img || !f->img_total || f->img_have != f->img_total)
        return NULL;
    *len = f->img_have;
    *run_id = f->img_run;
    *server_gen = f->img_gen;
    *engine_step = f->img_step;
    return f->img;
}

/* One part of an image (decoded, so within its stated length). */
static void image_part(room_follow *f, const room_msg *m, unsigned *ch)
{
    const room_state *s = &m->st;
    if (m->img_off == 0) {
        room_follow_drop_image(f); /* a new image starts */
        f->img_total = m->img_total;
        f->img_run = s->run_id;
        f->img_gen = s->server_gen;
        f->img_step = s->engine_step;
    } else if (!f->img_total || f->img_have == f->img_total || m->img_off != f->img_have ||
               m->img_total != f->img_total || s->run_id != f->img_run || s->server_gen != f->img_gen ||
               s->engine_step != f->img_step) {
        f->stats.image_parts_dropped++;
        room_follow_drop_image(f);
        return;
    }
    if (f->img_have + m->img_len > f->img_cap) {
        size_t cap = f->img_cap ? f->img_cap : 256 * 1024;
        while (cap < f->img_have + m->img_len)
            cap *= 2;
        if (cap > f->img_total)
            cap = f->img_total;
        uint8_t *nb = realloc(f->img, cap);
        if (!nb) {
            room_follow_drop_image(f);
            return;
        }
        f->img = nb;
        f->img_cap = cap;
    }
    memcpy(f->img + f->img_have, m->img_data, m->img_len);
    f->img_have += m->img_len;
    if (f->img_have == f->img_total) {
        f->stats.images++;
        *ch |= ROOM_FC_IMAGE;
    }
}

static void set_status(room_follow *f, room_follow_status s, unsigned *ch, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_status(room_follow *f, room_follow_status s, unsigned *ch, const char *fmt, ...)
{
    char buf[sizeof f->message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (s != f->status || strcmp(buf, f->message)) {
        f->status = s;
        memcpy(f->message, buf, sizeof buf);
        *ch |= ROOM_FC_STATUS;
    }
}

/* Lose the connection; state is kept (the screen stays) until a new one. */
static void disconnect(room_follow *f, double now, double retry)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
    f->inlen = 0;
    f->have_welcome = 0;
    f->next_try = now + retry;
    room_follow_drop_image(f); /* an image belongs to its connection */
}

/* Connect to path; returns the fd or -1 with errno. */
static int connect_path(const char *path)
{
    struct sockaddr_un sa;
    size_t n = strlen(path);
    if (n >= sizeof sa.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, n + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    /* A Unix socket connect does not wait on the peer: it succeeds, or fails
     * at once (ECONNREFUSED, ENOENT, EACCES, EAGAIN when its backlog is full). */
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void (*before_hello)(void *ctx);
static void *before_hello_ctx;

void room_follow_set_before_hello(void (*fn)(void *ctx), void *ctx)
{
    before_hello = fn;
    before_hello_ctx = ctx;
}

/* A presenter that refuses at accept writes its REFUSE and closes before
 * reading anything, so our hello may meet a closed socket: EPIPE or
 * ECONNRESET then still leaves the refusal to read. */
static int hello_lost_to_close(void)
{
    return errno == EPIPE || errno == ECONNRESET;
}

static int send_hello(int fd, int mode)
{
    if (before_hello)
        before_hello(before_hello_ctx);
    room_msg m;
    room_msg_init(&m, ROOM_T_HELLO);
    m.mode = (uint8_t)mode;
    room_user_name(geteuid(), m.user, sizeof m.user);
    uint8_t buf[256];
    size_t n = room_msg_encode(&m, buf, sizeof buf);
    if (!n) {
        errno = EINVAL; /* not a closed socket: hello_lost_to_close must not keep it */
        return -1;
    }
    return send(fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)n ? 0 : -1;
}

/* The uid serving connected socket fd (SO_PEERCRED: who called listen),
 * or -1 with errno. */
static int peer_uid(int fd, uid_t *uid)
{
    struct ucred cr;
    socklen_t l = sizeof cr;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) < 0 || l != sizeof cr)
        return -1;
    *uid = cr.uid;
    return 0;
}

static void try_connect(room_follow *f, double now, unsigned *ch)
{
    char path[ROOM_PATH_MAX], err[512];
    int have_owner = 0;
    uid_t owner = 0;
    if (f->fixed_path[0]) {
        snprintf(path, sizeof path, "%s", f->fixed_path);
    } else {
        room_entry e;
        int rc = room_find(f->spec, &e, err, sizeof err);
        if (rc <= 0 || !e.sock[0]) {
            char closed[400];
            if (rc < 0)
                set_status(f, ROOM_FS_WAITING, ch, "%s", err);
            else if (e.closed && !strchr(f->spec, '/') && room_closed_owners(closed, sizeof closed) > 0)
                set_status(f, ROOM_FS_REFUSED, ch,
                           "refused: no room '%s' is open to you; the rooms of %s are not open to you (a "
                           "presenter opens a room to a group you are in with --allow-group GROUP)",
                           f->shown, closed);
            else if (e.closed)
                set_status(f, ROOM_FS_REFUSED, ch,
                           "refused: %s's rooms are not open to you (the presenter can open one to a group "
                           "you are in with --allow-group GROUP)",
                           e.owner);
            else if (f->ever_followed)
                set_status(f, ROOM_FS_WAITING, ch, "presenter gone: waiting for room '%s' to come back", f->shown);
            else if (e.owner[0] && e.uid != geteuid())
                set_status(f, ROOM_FS_WAITING, ch,
                           "waiting for %s's room '%s' (a room %s opens to no group stays invisible to you: "
                           "it needs --allow-group GROUP with a group you are in)",
                           e.owner, f->name, e.owner);
            else
                set_status(f, ROOM_FS_WAITING, ch, "waiting for the presenter of room '%s'", f->shown);
            f->next_try = now + (f->status == ROOM_FS_REFUSED ? ROOM_RETRY_REFUSED_S : ROOM_RETRY_S);
            return;
        }
        snprintf(path, sizeof path, "%s", e.sock);
        have_owner = 1;
        owner = e.uid;
    }
    int fd = connect_path(path);
    if (fd < 0) {
        int e = errno;
        if (e == EACCES || e == EPERM) {
            set_status(f, ROOM_FS_REFUSED, ch,
                       "refused: room '%s' is not open to you (permission denied); ask the presenter to open it "
                       "to your group with --allow-group",
                       f->shown);
            f->next_try = now + ROOM_RETRY_REFUSED_S;
        } else {
            if (f->ever_followed)
                set_status(f, ROOM_FS_WAITING, ch, "presenter gone: waiting for room '%s' to come back", f->shown);
            else
                set_status(f, ROOM_FS_WAITING, ch, "waiting for the presenter of room '%s'", f->shown);
            f->next_try = now + ROOM_RETRY_S;
        }
        return;
    }
    /* Who answers: the kernel's word, not a name the presenter claims. */
    uid_t pu;
    if (peer_uid(fd, &pu) < 0) {
        close(fd);
        set_status(f, ROOM_FS_WAITING, ch, "cannot tell who presents room '%s' (%s); trying again", f->shown,
                   strerror(errno));
        f->next_try = now + ROOM_RETRY_S;
        return;
    }
    if (have_owner && pu != owner) {
        char who[ROOM_NAME_MAX], want[ROOM_NAME_MAX];
        room_user_name(pu, who, sizeof who);
        room_user_name(owner, want, sizeof want);
        close(fd);
        set_status(f, ROOM_FS_REFUSED, ch,
                   "not following: room '%s' is %s's, but %s answers on its socket", f->shown, want, who);
        f->next_try = now + ROOM_RETRY_REFUSED_S;
        return;
    }
    f->presenter_uid = pu;
    room_user_name(pu, f->presenter, sizeof f->presenter);
    if (have_owner && !f->pinned) {
        /* A bare NAME is resolved once: from now on only this user's room
         * of that name, never another user's that appears later. */
        char pin[sizeof f->spec];
        snprintf(pin, sizeof pin, "%s/%s", f->presenter, f->name);
        if (strlen(pin) < sizeof f->spec - 1) {
            memcpy(f->spec, pin, sizeof pin);
            f->pinned = 1;
        }
    }
    if (send_hello(fd, ROOM_MODE_FOLLOW) < 0 && !hello_lost_to_close()) {
        close(fd);
        f->next_try = now + ROOM_RETRY_S;
        return;
    }
    f->fd = fd;
    f->inlen = 0;
    f->stats.connects++;
    set_status(f, ROOM_FS_JOINING, ch, "joining room '%s'", f->shown);
}

/* Act on one decoded message. Returns -1 when the connection must end. */
static int handle(room_follow *f, const room_msg *m, double now, unsigned *ch)
{
    switch (m->type) {
    case ROOM_T_WELCOME:
        f->welcome = *m;
        /* The name shown is the socket's owner, whatever the welcome says. */
        if (f->presenter[0])
            snprintf(f->welcome.presenter, sizeof f->welcome.presenter, "%s", f->presenter);
        f->have_welcome = 1;
        return 0;
    case ROOM_T_REFUSE:
        set_status(f, ROOM_FS_REFUSED, ch, "refused: %s", m->text);
        disconnect(f, now, ROOM_RETRY_REFUSED_S);
        return -1;
    case ROOM_T_BYE:
        set_status(f, ROOM_FS_WAITING, ch, "%s; waiting for the presenter to come back", m->text);
        disconnect(f, now, ROOM_RETRY_S);
        return -1;
    case ROOM_T_STATE: {
        /* Events received but not yet taken stay (a STATE may follow a
         * DELTA before the app looked). */
        int nev = f->have_state ? f->st->nevents : 0;
        room_event keep[ROOM_MAX_EVENTS];
        if (nev)
            memcpy(keep, f->st->events, (size_t)nev * sizeof keep[0]);
        *f->st = m->st;
        if (nev) {
            int total = nev + f->st->nevents;
            int drop = total > ROOM_MAX_EVENTS ? total - ROOM_MAX_EVENTS : 0;
            room_event merged[ROOM_MAX_EVENTS];
            int k = 0;
            for (int i = drop; i < nev; i++)
                merged[k++] = keep[i];
            for (int i = drop > nev ? drop - nev : 0; i < f->st->nevents; i++)
                merged[k++] = f->st->events[i];
            memcpy(f->st->events, merged, (size_t)k * sizeof merged[0]);
            f->st->nevents = k;
        }
        f->have_state = 1;
        f->ever_followed = 1;
        f->stats.states++;
        *ch |= ROOM_FC_STATE;
        set_status(f, ROOM_FS_FOLLOWING, ch, "%s", "");
        return 0;
    }
    case ROOM_T_IMAGE:
        image_part(f, m, ch);
        return 0;
    case ROOM_T_DELTA:
        if (!f->have_state || room_state_apply_delta(f->st, m) < 0) {
            f->stats.stale_deltas++; /* the presenter sends a full state next */
            return 0;
        }
        f->stats.deltas++;
        *ch |= ROOM_FC_STATE;
        return 0;
    default:
        return 0; /* a HELLO from the "presenter": ignore */
    }
}

/* Decode and handle the whole frames in f->in. Returns -1 when the
 * connection ended (malformed stream, refusal, goodbye). */
static int consume(room_follow *f, double now, unsigned *ch)
{
    size_t off = 0;
    for (;;) {
        size_t used;
        char err[256];
        int rc = room_msg_decode(f->in + off, f->inlen - off, f->msg, &used, err, sizeof err);
        if (rc == 0)
            break;
        if (rc < 0) {
            f->stats.malformed++;
            set_status(f, ROOM_FS_WAITING, ch, "the presenter sent a malformed message (%s); reconnecting", err);
            disconnect(f, now, ROOM_RETRY_S);
            return -1;
        }
        off += used;
        if (handle(f, f->msg, now, ch) < 0)
            return -1;
    }
    if (off) {
        memmove(f->in, f->in + off, f->inlen - off);
        f->inlen -= off;
    }
    return 0;
}

unsigned room_follow_feed(room_follow *f, const uint8_t *bytes, size_t n, double now)
{
    unsigned ch = 0;
    while (n > 0) {
        size_t room = INBUF_CAP - f->inlen;
        if (room == 0) {
            f->stats.malformed++;
            f->inlen = 0;
            return ch;
        }
        size_t k = n < room ? n : room;
        memcpy(f->in + f->inlen, bytes, k);
        f->inlen += k;
        bytes += k;
        n -= k;
        if (consume(f, now, &ch) < 0) {
            f->inlen = 0;
            return ch;
        }
    }
    return ch;
}

unsigned room_follow_poll(room_follow *f, double now)
{
    unsigned ch = 0;
    if (f->fd < 0) {
        if (now >= f->next_try)
            try_connect(f, now, &ch);
        if (f->fd < 0)
            return ch;
    }
    size_t got = 0;
    while (got < READ_PER_POLL && f->fd >= 0) {
        if (f->inlen == INBUF_CAP) {
            /* cannot happen with a valid stream: a frame fits INBUF_CAP */
            f->stats.malformed++;
            set_status(f, ROOM_FS_WAITING, &ch, "the presenter sent too much at once; reconnecting");
            disconnect(f, now, ROOM_RETRY_S);
            return ch;
        }
        ssize_t n = recv(f->fd, f->in + f->inlen, INBUF_CAP - f->inlen, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (n <= 0) {
            if (f->ever_followed)
                set_status(f, ROOM_FS_WAITING, &ch,
                           "presenter gone: waiting for room '%s' to come back", f->shown);
            else
                set_status(f, ROOM_FS_WAITING, &ch, "waiting for the presenter of room '%s'", f->shown);
            disconnect(f, now, ROOM_RETRY_S);
            return ch;
        }
        f->inlen += (size_t)n;
        got += (size_t)n;
        f->stats.bytes_read += (uint64_t)n;
        if (consume(f, now, &ch) < 0)
            return ch;
    }
    return ch;
}

int room_follow_fd(const room_follow *f) { return f->fd; }
room_follow_status room_follow_get_status(const room_follow *f) { return f->status; }
const char *room_follow_message(const room_follow *f) { return f->message; }
const room_state *room_follow_state(const room_follow *f) { return f->have_state ? f->st : NULL; }
const room_msg *room_follow_welcome(const room_follow *f) { return f->have_welcome ? &f->welcome : NULL; }
const char *room_follow_presenter(const room_follow *f) { return f->presenter; }
const char *room_follow_spec(const room_follow *f) { return f->spec; }
void room_follow_get_stats(const room_follow *f, room_follow_stats *out) { *out = f->stats; }

void room_follow_clear_events(room_follow *f)
{
    if (f->have_state)
        f->st->nevents = 0;
}

/* ---- probe ----------------------------------------------------------------- */

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* One probe in flight. */
typedef struct probe_slot {
    int fd, idx;
    double end;
    size_t len;
    uint8_t buf[2048];
} probe_slot;

static void probe_done(room_probe_result *r, int rc) { r->rc = rc; }

/* Decode what slot s holds; 1 when the probe is over. */
static int probe_read(probe_slot *s, room_probe_result *r, room_msg *m)
{
    for (;;) {
        ssize_t n = recv(s->fd, s->buf + s->len, sizeof s->buf - s->len, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        if (n <= 0) {
            snprintf(r->err, sizeof r->err, "the presenter closed the connection");
            probe_done(r, -1);
            return 1;
        }
        s->len += (size_t)n;
        size_t used;
        int d = room_msg_decode(s->buf, s->len, m, &used, r->err, sizeof r->err);
        if (d < 0) {
            probe_done(r, -1);
            return 1;
        }
        if (d == 0) {
            if (s->len == sizeof s->buf) {
                snprintf(r->err, sizeof r->err, "the answer is too long");
                probe_done(r, -1);
                return 1;
            }
            continue;
        }
        if (m->type == ROOM_T_WELCOME || m->type == ROOM_T_REFUSE) {
            r->lesson = m->st.lesson;
            r->followers = m->st.followers;
            snprintf(r->lesson_title, sizeof r->lesson_title, "%s", m->st.lesson_title);
            snprintf(r->group, sizeof r->group, "%s", m->group);
            snprintf(r->room, sizeof r->room, "%s", m->room);
            snprintf(r->text, sizeof r->text, "%s", m->text);
            probe_done(r, m->type == ROOM_T_WELCOME ? 0 : 1);
        } else {
            snprintf(r->err, sizeof r->err, "unexpected %s message", room_msg_type_name(m->type));
            probe_done(r, -1);
        }
        return 1;
    }
}

/* Start probing paths[i] in s; 1 when it is under way, 0 when it ended at once. */
static int probe_start(probe_slot *s, const char *path, int i, double end, room_probe_result *r)
{
    memset(r, 0, sizeof *r);
    r->rc = -1;
    int fd = connect_path(path);
    if (fd < 0) {
        int e = errno;
        if (e == ECONNREFUSED || e == ENOENT)
            snprintf(r->err, sizeof r->err, "no presenter (the socket is left over)");
        else if (e == EACCES || e == EPERM)
            snprintf(r->err, sizeof r->err, "not open to you");
        else if (e == EAGAIN)
            snprintf(r->err, sizeof r->err, "the presenter does not answer (its queue is full)");
        else
            snprintf(r->err, sizeof r->err, "cannot connect: %s", strerror(e));
        return 0;
    }
    uid_t pu;
    if (peer_uid(fd, &pu) == 0) {
        r->presenter_uid = pu;
        room_user_name(pu, r->presenter, sizeof r->presenter);
    }
    if (send_hello(fd, ROOM_MODE_PROBE) < 0 && !hello_lost_to_close()) {
        snprintf(r->err, sizeof r->err, "cannot send: %s", strerror(errno));
        close(fd);
        return 0;
    }
    s->fd = fd;
    s->idx = i;
    s->end = end;
    s->len = 0;
    return 1;
}

void room_probe_many(const char *const *paths, int n, int timeout_ms, room_probe_result *out)
{
    enum { SLOTS = ROOM_PROBE_PARALLEL };
    static probe_slot slot[SLOTS];
    static room_msg m;
    struct pollfd pfd[SLOTS];
    int next = 0, busy = 0;
    int map[SLOTS];
    for (int k = 0; k < SLOTS; k++)
        slot[k].fd = -1;
    while (next < n || busy > 0) {
        double t = mono();
        for (int k = 0; k < SLOTS && next < n; k++) {
            if (slot[k].fd >= 0)
                continue;
            int i = next++;
            if (probe_start(&slot[k], paths[i], i, t + timeout_ms / 1000.0, &out[i]))
                busy++;
        }
        int np = 0;
        double first_end = t + 3600;
        for (int k = 0; k < SLOTS; k++) {
            if (slot[k].fd < 0)
                continue;
            if (slot[k].end < first_end)
                first_end = slot[k].end;
            pfd[np].fd = slot[k].fd;
            pfd[np].events = POLLIN;
            pfd[np].revents = 0;
            map[np++] = k;
        }
        if (!np)
            continue;
        int wait = (int)((first_end - t) * 1000) + 1;
        if (poll(pfd, (nfds_t)np, wait < 0 ? 0 : wait) < 0 && errno != EINTR)
            break;
        t = mono();
        for (int j = 0; j < np; j++) {
            probe_slot *s = &slot[map[j]];
            room_probe_result *r = &out[s->idx];
            int over = 0;
            if (pfd[j].revents)
                over = probe_read(s, r, &m);
            if (!over && t >= s->end) {
                snprintf(r->err, sizeof r->err, "no answer within %d ms", timeout_ms);
                probe_done(r, -1);
                over = 1;
            }
            if (over) {
                close(s->fd);
                s->fd = -1;
                busy--;
            }
        }
    }
    for (int k = 0; k < SLOTS; k++)
        if (slot[k].fd >= 0) {
            close(slot[k].fd);
            slot[k].fd = -1;
        }
}

int room_probe(const char *sock_path, int timeout_ms, room_msg *welcome, char *err, size_t errlen)
{
    static room_probe_result r;
    room_probe_many(&sock_path, 1, timeout_ms, &r);
    room_msg_init(welcome, r.rc == 1 ? ROOM_T_REFUSE : ROOM_T_WELCOME);
    welcome->st.lesson = r.lesson;
    welcome->st.followers = r.followers;
    snprintf(welcome->st.lesson_title, sizeof welcome->st.lesson_title, "%s", r.lesson_title);
    snprintf(welcome->group, sizeof welcome->group, "%s", r.group);
    snprintf(welcome->room, sizeof welcome->room, "%s", r.room);
    snprintf(welcome->presenter, sizeof welcome->presenter, "%s", r.presenter);
    snprintf(welcome->text, sizeof welcome->text, "%s", r.text);
    if (r.rc < 0)
        kv_errf(err, errlen, -1, "%s", r.err);
    return r.rc;
}
