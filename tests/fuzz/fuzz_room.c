/* libFuzzer target for the classroom socket: any bytes, on either side,
 * must never crash, hang or break an invariant.
 *  1. The decoder over the bytes as a stream: each frame it accepts must
 *     encode again and decode to the same message (nothing accepted that the
 *     encoder could not have written), and a DELTA merges into a state
 *     without going past a bound.
 *  2. A follower fed the bytes as if from a presenter: its state stays
 *     within bounds and its message is printable.
 *  3. A presenter given the bytes by a connecting client over a real socket:
 *     it answers or drops the client, keeps serving, and what it publishes
 *     is never touched by them.
 *  4. A hostile presenter: the bytes pick a sequence of well-formed frames
 *     (welcomes, states and deltas with any seq, base_seq, run_id, counts
 *     at their bounds, any engine step), so every one gets past the
 *     decoder; a follower fed them merges a DELTA only into the state it
 *     follows (same run, base_seq = the state's seq), keeps every other
 *     delta out, and takes each STATE whole. */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "room_follow.h"
#include "room_msg.h"
#include "room_path.h"
#include "room_pres.h"

#define CAP (ROOM_HEADER_LEN + ROOM_MSG_MAX_PAYLOAD)

static room_msg m, again;
static room_state st;
static uint8_t enc[CAP];

static void check_state(const room_state *s)
{
    if (s->ninputs < 0 || s->ninputs > ROOM_MAX_INPUTS || s->nflags < 0 || s->nflags > ROOM_MAX_FLAGS ||
        s->nevents < 0 || s->nevents > ROOM_MAX_EVENTS || s->lesson < 0 || s->lesson > 99)
        abort();
    if (strlen(s->lesson_title) >= sizeof s->lesson_title)
        abort();
}

static void same(const room_msg *a, const room_msg *b)
{
    if (a->type != b->type || a->have != b->have || a->mode != b->mode || a->pid != b->pid ||
        strcmp(a->user, b->user) || strcmp(a->room, b->room) || strcmp(a->text, b->text) ||
        strcmp(a->presenter, b->presenter) || strcmp(a->group, b->group))
        abort();
    const room_state *x = &a->st, *y = &b->st;
    if (x->seq != y->seq || x->lesson != y->lesson || x->step != y->step || x->page != y->page ||
        x->engine_step != y->engine_step || x->ninputs != y->ninputs || x->nflags != y->nflags ||
        x->nevents != y->nevents || strcmp(x->lesson_title, y->lesson_title))
        abort();
    for (int i = 0; i < x->ninputs; i++)
        if (x->inputs[i].wait != y->inputs[i].wait || x->inputs[i].kind != y->inputs[i].kind ||
            strcmp(x->inputs[i].value, y->inputs[i].value) || strcmp(x->inputs[i].name, y->inputs[i].name))
            abort();
    for (int i = 0; i < x->nevents; i++)
        if (x->events[i].kind != y->events[i].kind || x->events[i].arg != y->events[i].arg)
            abort();
}

static void decoder(const uint8_t *data, size_t size)
{
    size_t off = 0;
    memset(&st, 0, sizeof st);
    while (off < size) {
        size_t used = 0;
        char err[256];
        int rc = room_msg_decode(data + off, size - off, &m, &used, err, sizeof err);
        if (rc < 0) {
            if (!err[0])
                abort(); /* every refusal says why */
            return;
        }
        if (rc == 0)
            return;
        if (used < ROOM_HEADER_LEN || used > size - off)
            abort();
        off += used;
        if (m.type == ROOM_T_STATE || m.type == ROOM_T_DELTA)
            check_state(&m.st);
        size_t n = room_msg_encode(&m, enc, sizeof enc);
        if (!n)
            abort(); /* what was accepted can be written */
        size_t used2;
        if (room_msg_decode(enc, n, &again, &used2, err, sizeof err) != 1 || used2 != n)
            abort();
        same(&m, &again);
        if (m.type == ROOM_T_STATE) {
            st = m.st;
        } else if (m.type == ROOM_T_DELTA) {
            room_state_apply_delta(&st, &m);
            check_state(&st);
        }
    }
}

static room_follow *g_follow;

static void follower(const uint8_t *data, size_t size)
{
    if (!g_follow)
        g_follow = room_follow_new_at("/nonexistent/kvlab-fuzz.sock", "fuzz");
    if (!g_follow)
        abort();
    room_follow_feed(g_follow, data, size, 1.0);
    const room_state *s = room_follow_state(g_follow);
    if (s)
        check_state(s);
    const char *msg = room_follow_message(g_follow);
    if (!room_text_ok(msg, strlen(msg), 4096))
        abort(); /* the follower prints it */
    room_follow_clear_events(g_follow);
}

static room_pres *g_pres;
static room_state *g_pub;
static double g_now = 1000.0;

static void presenter(const uint8_t *data, size_t size)
{
    if (!g_pres) {
        static char dir[] = "/tmp/kvlab-fuzz-XXXXXX";
        if (!mkdtemp(dir))
            abort();
        char path[128], err[512];
        snprintf(path, sizeof path, "%s/fuzz.sock", dir);
        g_pres = room_pres_open_at(path, "fuzz", geteuid(), ROOM_NO_GROUP, err, sizeof err);
        if (!g_pres)
            abort();
        g_pub = calloc(1, sizeof *g_pub);
        g_pub->lesson = 4;
        g_pub->step = 2;
        g_pub->speed = 1.0;
        g_pub->view_focus = -1;
        room_pres_publish(g_pres, g_pub);
    }
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", room_pres_path(g_pres));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        abort(); /* the presenter must keep listening */
    room_pres_poll(g_pres, g_now);
    ssize_t w = size ? send(fd, data, size, MSG_NOSIGNAL) : 0;
    (void)w;
    for (int i = 0; i < 3; i++)
        room_pres_poll(g_pres, g_now += 0.001);
    /* Its state moves on; the client's bytes never enter it. */
    g_pub->engine_step++;
    room_pres_publish(g_pres, g_pub);
    char junk[4096];
    while (recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0) {
    }
    close(fd);
    g_now += ROOM_HELLO_TIMEOUT_S + 1; /* every client gone by the next input */
    room_pres_poll(g_pres, g_now);
    if (room_pres_followers(g_pres) != 0)
        abort();
}

/* Bytes as numbers: the next byte (0 at the end). */
typedef struct cursor { const uint8_t *p; size_t n; } cursor;
static unsigned take(cursor *c)
{
    if (!c->n)
        return 0;
    c->n--;
    return *c->p++;
}

static room_msg g_hm;
static uint8_t g_hbuf[CAP];

static void hostile_presenter(const uint8_t *data, size_t size)
{
    room_follow *f = room_follow_new_at("/nonexistent/kvlab-fuzz2.sock", "fuzz");
    if (!f)
        abort();
    cursor c = {data, size};
    uint32_t img_next = 0; /* where an in-order next part of the image would go */
    for (int k = 0; k < 64 && c.n; k++) {
        unsigned kind = take(&c) % 4;
        if (kind == 3) {
            /* A part of an engine image: in order, out of order, of another
             * run; a whole image is as long as its parts said, never more
             * than ROOM_IMAGE_MAX. */
            room_msg_init(&g_hm, ROOM_T_IMAGE);
            g_hm.st.run_id = take(&c) % 2;
            g_hm.st.server_gen = take(&c) % 2;
            g_hm.st.engine_step = take(&c) % 2;
            g_hm.img_total = 1 + take(&c) * 997u;
            unsigned where = take(&c) % 3;
            g_hm.img_off = where == 0 ? 0 : where == 1 ? img_next : take(&c) * 991u;
            if (g_hm.img_off >= g_hm.img_total)
                g_hm.img_off = 0;
            uint32_t room = g_hm.img_total - g_hm.img_off;
            g_hm.img_len = 1 + (take(&c) * 509u) % (room < ROOM_IMAGE_CHUNK ? room : ROOM_IMAGE_CHUNK);
            memset(g_hm.img_data, (int)k, g_hm.img_len);
            img_next = g_hm.img_off + g_hm.img_len;
            size_t n = room_msg_encode(&g_hm, g_hbuf, sizeof g_hbuf);
            if (!n)
                abort(); /* every part made here is valid */
            room_follow_feed(f, g_hbuf, n, 1.0);
            size_t len;
            uint64_t run, step;
            uint32_t gen;
            const uint8_t *img = room_follow_image(f, &len, &run, &gen, &step);
            if (img && (len != g_hm.img_total || len > ROOM_IMAGE_MAX || run != g_hm.st.run_id))
                abort();
            if (img && take(&c) % 2)
                room_follow_drop_image(f);
            continue;
        }
        room_msg_init(&g_hm, kind == 0 ? ROOM_T_WELCOME : kind == 1 ? ROOM_T_STATE : ROOM_T_DELTA);
        room_state *x = &g_hm.st;
        x->seq = take(&c) % 8;            /* small ranges: chains that match and chains that do not */
        x->base_seq = take(&c) % 8;
        x->run_id = take(&c) % 3;
        if (kind == 2)
            x->seq = x->base_seq + 1 + take(&c) % 3; /* a delta's base is before its seq (else malformed) */
        x->lesson = (int32_t)(take(&c) % 100);
        x->step = (int32_t)(take(&c) * 3900u); /* within the decoder's range */
        x->page = (int32_t)(take(&c) % 50);
        x->engine_step = (uint64_t)take(&c) << (take(&c) % 57);
        x->server_gen = take(&c);
        x->followers = (int32_t)take(&c);
        x->ninputs = take(&c) % 4 == 0 ? ROOM_MAX_INPUTS : (int)(take(&c) % 4);
        for (int i = 0; i < x->ninputs; i++) {
            x->inputs[i].wait = i;
            x->inputs[i].kind = (uint8_t)(take(&c) % 3);
            snprintf(x->inputs[i].name, sizeof x->inputs[i].name, "%s",
                     x->inputs[i].kind == ROOM_IN_FLAG ? "max-num-seqs" : "");
            unsigned v = take(&c);
            if (x->inputs[i].kind == ROOM_IN_REVEAL)
                x->inputs[i].value[0] = '\0';
            else
                snprintf(x->inputs[i].value, sizeof x->inputs[i].value, "%u", v);
        }
        x->nevents = (int)(take(&c) % (ROOM_MAX_EVENTS + 1));
        for (int i = 0; i < x->nevents; i++) {
            x->events[i].kind = (uint8_t)(1 + take(&c) % (ROOM_EV_COUNT - 1));
            x->events[i].arg = (int64_t)take(&c) - 128;
        }
        g_hm.have = kind == 2 ? (take(&c) & 0x7f) : ROOM_H_FULL;
        if (kind == 0) {
            snprintf(g_hm.room, sizeof g_hm.room, "fuzz");
            snprintf(g_hm.presenter, sizeof g_hm.presenter, "root");
            g_hm.pid = 1;
        }
        size_t n = room_msg_encode(&g_hm, g_hbuf, sizeof g_hbuf);
        if (!n)
            continue;
        const room_state *before = room_follow_state(f);
        int had = before != NULL;
        uint64_t seq0 = had ? before->seq : 0, run0 = had ? before->run_id : 0;
        room_follow_feed(f, g_hbuf, n, 1.0);
        const room_state *after = room_follow_state(f);
        if (after)
            check_state(after);
        if (kind == 1 && (!after || after->seq != x->seq || after->run_id != x->run_id))
            abort(); /* a STATE is taken whole */
        if (kind == 2) {
            int follows = had && x->base_seq == seq0 && x->run_id == run0;
            if (!had && after)
                abort(); /* a delta alone is no state */
            if (had && follows && after->seq != x->seq) {
                fprintf(stderr, "delta seq %llu base %llu run %llu have %x onto seq %llu: now %llu (%s)\n",
                        (unsigned long long)x->seq, (unsigned long long)x->base_seq, (unsigned long long)x->run_id,
                        g_hm.have, (unsigned long long)seq0, (unsigned long long)after->seq, room_follow_message(f));
                abort(); /* a delta that follows is merged */
            }
            if (had && !follows && (after->seq != seq0 || after->run_id != run0))
                abort(); /* one that does not is kept out */
        }
        room_follow_clear_events(f);
    }
    room_follow_free(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    decoder(data, size);
    follower(data, size);
    presenter(data, size);
    hostile_presenter(data, size);
    return 0;
}
