/* Classroom rooms over real Unix sockets: folders and their safety checks,
 * the presenter and its followers in one process (both sides non-blocking),
 * a slow follower skipping to the present, reconnection, probes, and the
 * peer-credential check against a second uid (when run as root). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "room_access.h"
#include "room_follow.h"
#include "room_msg.h"
#include "room_path.h"
#include "room_pres.h"
#include "room_test_env.h"

static int setup(void **state)
{
    (void)state;
    return room_test_env_setup("kvroom");
}

static int teardown(void **state)
{
    (void)state;
    return room_test_env_teardown();
}

static room_state *new_state(int lesson, int step)
{
    room_state *s = calloc(1, sizeof *s);
    s->lesson = lesson;
    snprintf(s->lesson_title, sizeof s->lesson_title, "Lesson %d", lesson);
    s->step = step;
    s->page = step + 1;
    s->view_focus = -1;
    s->speed = 1.0;
    s->engine_seed = 7;
    return s;
}

/* Poll both sides until the follower reports `want` status (or give up). */
static int pump(room_pres *p, room_follow *f, room_follow_status want, double *t)
{
    for (int i = 0; i < 2000; i++) {
        *t += 0.001;
        if (p)
            room_pres_poll(p, *t);
        if (f)
            room_follow_poll(f, *t);
        if (f && room_follow_get_status(f) == want)
            return 1;
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return 0;
}

/* A forked child (a probe, another uid) runs on the real clock: its own
 * deadline is real time, and so is the presenter's hello timeout it must
 * beat. The in-process loops step a clock faster than real time (pump:
 * 1 ms a turn), which would let the hello timeout fire on a child that the
 * scheduler stalls for a second between connect and hello; here the
 * presenter's clock never runs ahead of real time, and both sides get the
 * same generous deadline. */
#define CHILD_WAIT_S 20

/* Serve p until child kid exits; returns its exit status (-1 on a signal,
 * -2 after CHILD_WAIT_S). *t: the presenter's clock, kept monotonic. */
static int serve_child(room_pres *p, pid_t kid, double *t)
{
    double end = now_s() + CHILD_WAIT_S + 5;
    while (now_s() < end) {
        double n = now_s();
        if (n > *t)
            *t = n;
        room_pres_poll(p, *t);
        int st;
        if (waitpid(kid, &st, WNOHANG) == kid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        struct pollfd fds[8];
        poll(fds, (nfds_t)room_pres_pollfds(p, fds, 8), 1);
    }
    kill(kid, 9);
    waitpid(kid, NULL, 0);
    return -2;
}

/* ---- names and folders ---------------------------------------------------- */

static void test_names(void **state)
{
    (void)state;
    assert_true(room_name_ok("alice"));
    assert_true(room_name_ok("ml-101_a.b"));
    assert_false(room_name_ok(""));
    assert_false(room_name_ok(".hidden"));
    assert_false(room_name_ok("-x"));
    assert_false(room_name_ok("a/b"));
    assert_false(room_name_ok("a b"));
    assert_false(room_name_ok("0123456789012345678901234567890123")); /* 34 > 32 */
    char d[ROOM_ROOMNAME_MAX];
    room_default_name(d, sizeof d);
    assert_true(room_name_ok(d));
    room_entry e;
    char err[256];
    assert_int_equal(room_find("bad name", &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a room name"));
    assert_int_equal(room_find("a/b/c", &e, err, sizeof err), -1);
    /* Not there yet: 0, with where one's own would appear. */
    assert_int_equal(room_find("nobody-here", &e, err, sizeof err), 0);
    assert_non_null(strstr(e.sock, g_xdg));
    /* USER/NAME with no such user: nobody will ever present it, so refused
     * (a follower would wait forever); the "uidN" form of a uid without a
     * name, and one's own name, are waited for. */
    assert_int_equal(room_find("nosuchuser-kvlab/x", &e, err, sizeof err), -1);
    assert_non_null(strstr(err, "no user 'nosuchuser-kvlab' on this machine"));
    assert_int_equal(room_find("uid4000000/x", &e, err, sizeof err), 0);
    assert_int_equal(e.uid, 4000000);
    char me[ROOM_NAME_MAX], spec[ROOM_NAME_MAX + 8];
    room_user_name(geteuid(), me, sizeof me);
    snprintf(spec, sizeof spec, "%s/x", me);
    assert_int_equal(room_find(spec, &e, err, sizeof err), 0);
    room_follow *f = room_follow_new("nosuchuser-kvlab/x", err, sizeof err);
    assert_null(f);
    assert_non_null(strstr(err, "no user 'nosuchuser-kvlab'"));
    /* The waiting text names the room as the follower wrote it. */
    f = room_follow_new(spec, err, sizeof err);
    assert_non_null(f);
    char want[ROOM_NAME_MAX + 40];
    snprintf(want, sizeof want, "room '%s'", spec);
    assert_non_null(strstr(room_follow_message(f), want));
    room_follow_poll(f, now_s()); /* no presenter: still waiting, still named so */
    assert_non_null(strstr(room_follow_message(f), want));
    room_follow_free(f);
    f = room_follow_new("x", err, sizeof err);
    assert_non_null(f);
    assert_non_null(strstr(room_follow_message(f), "room 'x'"));
    room_follow_free(f);
}

static void test_private_dir(void **state)
{
    (void)state;
    char dir[ROOM_PATH_MAX], err[512];
    uid_t me = geteuid();
    assert_int_equal(room_dir(me, ROOM_NO_GROUP, 1, dir, sizeof dir, NULL, 0, err, sizeof err), 0);
    char want[300];
    snprintf(want, sizeof want, "%s/kvlab", g_xdg);
    assert_string_equal(dir, want);
    struct stat st;
    assert_int_equal(lstat(dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    /* Too open: refused with the fix. */
    chmod(dir, 0755);
    assert_int_equal(room_dir(me, ROOM_NO_GROUP, 1, dir, sizeof dir, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "mode 0755"));
    assert_non_null(strstr(err, "chmod 0700"));
    chmod(dir, 0700);
    /* An unsafe XDG_RUNTIME_DIR is refused, not used. */
    chmod(g_xdg, 0755);
    assert_int_equal(room_dir(me, ROOM_NO_GROUP, 1, dir, sizeof dir, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "XDG_RUNTIME_DIR"));
    chmod(g_xdg, 0700);
    /* Without XDG_RUNTIME_DIR: <shared>/kvlab-<uid>. */
    unsetenv("XDG_RUNTIME_DIR");
    assert_int_equal(room_dir(me, ROOM_NO_GROUP, 1, dir, sizeof dir, NULL, 0, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s/kvlab-%u", g_tmp, (unsigned)me);
    assert_string_equal(dir, want);
    setenv("XDG_RUNTIME_DIR", g_xdg, 1);
}

static void test_unsafe_dirs(void **state)
{
    (void)state;
    char dir[ROOM_PATH_MAX], err[512], path[300];
    uid_t me = geteuid();
    /* A symlink planted where a group folder goes. */
    gid_t g = getegid();
    snprintf(path, sizeof path, "%s/kvlab-%u-g%u", g_tmp, (unsigned)me, (unsigned)g);
    assert_int_equal(symlink(g_xdg, path), 0);
    assert_int_equal(room_dir(me, g, 1, dir, sizeof dir, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "symlink"));
    unlink(path);
    /* A plain file. */
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    close(fd);
    assert_int_equal(room_dir(me, g, 1, dir, sizeof dir, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a folder"));
    unlink(path);
    /* Made right: 0750 with the group. */
    assert_int_equal(room_dir(me, g, 1, dir, sizeof dir, NULL, 0, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(lstat(dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0750);
    assert_int_equal(st.st_gid, g);
    /* Someone else's folder (only root can make one here) does not block
     * the presenter: a second folder of its own, and a notice saying why. */
    if (me == 0) {
        char squat[ROOM_PATH_MAX], notice[512], second[ROOM_PATH_MAX];
        snprintf(squat, sizeof squat, "%s", dir);
        assert_int_equal(chown(squat, 65534, (gid_t)-1), 0);
        assert_int_equal(room_dir(me, g, 1, dir, sizeof dir, notice, sizeof notice, err, sizeof err), 0);
        assert_non_null(strstr(notice, "belongs to"));
        assert_string_not_equal(dir, squat);
        assert_int_equal(strncmp(dir, squat, strlen(squat)), 0);
        assert_int_equal(lstat(dir, &st), 0);
        assert_int_equal(st.st_uid, 0);
        assert_int_equal(st.st_mode & 07777, 0750);
        /* The same second folder next time. */
        snprintf(second, sizeof second, "%s", dir);
        assert_int_equal(room_dir(me, g, 1, dir, sizeof dir, notice, sizeof notice, err, sizeof err), 0);
        assert_string_equal(dir, second);
        rmdir(second);
        assert_int_equal(chown(squat, 0, (gid_t)-1), 0);
        snprintf(dir, sizeof dir, "%s", squat);
    }
    rmdir(dir);
}

/* ---- presenter and followers ------------------------------------------------ */

static void test_follow_state_and_deltas(void **state)
{
    (void)state;
    char err[512];
    room_pres *p = room_pres_open("class1", NULL, err, sizeof err);
    assert_non_null(p);
    struct stat st;
    assert_int_equal(lstat(room_pres_path(p), &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    /* A second presenter of the same room is refused, naming the first. */
    char err2[512];
    assert_null(room_pres_open("class1", NULL, err2, sizeof err2));
    assert_non_null(strstr(err2, "already being presented"));

    room_state *s = new_state(3, 2);
    s->ninputs = 1;
    s->inputs[0] = (room_input){.wait = 1, .kind = ROOM_IN_ANSWER};
    snprintf(s->inputs[0].value, sizeof s->inputs[0].value, "16 tokens");
    assert_int_equal(room_pres_publish(p, s), 0); /* nobody follows yet */

    room_follow *f = room_follow_new("class1", err, sizeof err);
    assert_non_null(f);
    double t = now_s();
    assert_true(pump(p, f, ROOM_FS_FOLLOWING, &t));
    assert_int_equal(room_pres_followers(p), 1);
    const room_state *fs = room_follow_state(f);
    assert_non_null(fs);
    assert_int_equal(fs->lesson, 3);
    assert_int_equal(fs->step, 2);
    assert_string_equal(fs->inputs[0].value, "16 tokens");
    const room_msg *w = room_follow_welcome(f);
    assert_non_null(w);
    assert_string_equal(w->room, "class1");

    /* The engine moves: a delta, merged into the follower's state. */
    s->engine_step = 40;
    assert_int_equal(room_pres_publish(p, s), 1);
    room_pres_stats ps;
    room_pres_get_stats(p, &ps);
    assert_true(ps.deltas_sent >= 1);
    for (int i = 0; i < 200 && room_follow_state(f)->engine_step != 40; i++)
        pump(p, f, ROOM_FS_FOLLOWING, &t);
    fs = room_follow_state(f);
    assert_int_equal(fs->engine_step, 40);
    assert_int_equal(fs->followers, 1);
    /* Whatever the app hands over, what goes out decodes: bad bytes become
     * '?', numbers come back within range. */
    room_state *bad = new_state(3, 2);
    *bad = *s;
    bad->engine_step = 40;
    snprintf(bad->lesson_title, sizeof bad->lesson_title, "tab\there \x1b[2J \xff end");
    bad->speed = -1;
    bad->view_focus = 99;
    bad->nevents = ROOM_MAX_EVENTS + 5;
    for (int i = 0; i < ROOM_MAX_EVENTS; i++)
        bad->events[i] = (room_event){.kind = 200};
    assert_int_equal(room_pres_publish(p, bad), 1);
    for (int i = 0; i < 200 && !strcmp(room_follow_state(f)->lesson_title, "Lesson 3"); i++)
        pump(p, f, ROOM_FS_FOLLOWING, &t);
    fs = room_follow_state(f);
    assert_string_equal(fs->lesson_title, "tab?here ?[2J ? end");
    assert_true(fs->speed == 1.0);
    assert_int_equal(fs->view_focus, -1);
    room_follow_stats fst0;
    room_follow_get_stats(f, &fst0);
    assert_int_equal(fst0.malformed, 0);
    assert_int_equal(room_pres_publish(p, s), 1); /* back to the real title */
    for (int i = 0; i < 200 && strcmp(room_follow_state(f)->lesson_title, "Lesson 3"); i++)
        pump(p, f, ROOM_FS_FOLLOWING, &t);
    free(bad);
    room_follow_clear_events(f);
    /* Nothing changed: nothing sent. */
    assert_int_equal(room_pres_publish(p, s), 0);
    /* n: the step changes, a full state with the event. */
    s->step = 3;
    s->nevents = 1;
    s->events[0] = (room_event){.kind = ROOM_EV_NEXT, .arg = 3};
    uint64_t states_before = ps.states_sent;
    room_follow_clear_events(f);
    assert_int_equal(room_pres_publish(p, s), 1);
    for (int i = 0; i < 200 && room_follow_state(f)->step != 3; i++)
        pump(p, f, ROOM_FS_FOLLOWING, &t);
    fs = room_follow_state(f);
    assert_int_equal(fs->step, 3);
    assert_int_equal(fs->nevents, 1);
    assert_int_equal(fs->events[0].kind, ROOM_EV_NEXT);
    room_pres_get_stats(p, &ps);
    assert_true(ps.states_sent > states_before);

    /* A probe (kvlab rooms) is answered and not counted as a follower. */
    room_msg *pm = malloc(sizeof *pm);
    pid_t kid = fork();
    if (kid == 0) {
        int rc = room_probe(room_pres_path(p), CHILD_WAIT_S * 1000, pm, err, sizeof err);
        _exit(rc == 0 && pm->st.lesson == 3 && pm->st.followers == 1 && !strcmp(pm->room, "class1") ? 0 : 1);
    }
    assert_int_equal(serve_child(p, kid, &t), 0);
    room_pres_poll(p, t += 0.001);
    assert_int_equal(room_pres_followers(p), 1);
    free(pm);

    /* The room is listed. */
    room_entry rooms[16];
    int n = room_scan(rooms, 16, NULL), found = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(rooms[i].name, "class1"))
            found++;
    assert_int_equal(found, 1);

    /* The presenter quits: the follower says so and keeps its state; the
     * socket is gone. */
    char sock[ROOM_PATH_MAX];
    snprintf(sock, sizeof sock, "%s", room_pres_path(p));
    room_pres_close(p, "the presenter quit");
    assert_int_equal(lstat(sock, &st), -1);
    assert_true(pump(NULL, f, ROOM_FS_WAITING, &t));
    assert_non_null(strstr(room_follow_message(f), "quit"));
    assert_non_null(room_follow_state(f));

    /* It comes back (a new run): the follower re-attaches and gets its state. */
    p = room_pres_open("class1", NULL, err, sizeof err);
    assert_non_null(p);
    room_state *s2 = new_state(4, 0);
    room_pres_publish(p, s2);
    t += 1.0; /* past the retry delay */
    assert_true(pump(p, f, ROOM_FS_FOLLOWING, &t));
    for (int i = 0; i < 200 && room_follow_state(f)->lesson != 4; i++)
        pump(p, f, ROOM_FS_FOLLOWING, &t);
    assert_int_equal(room_follow_state(f)->lesson, 4);
    room_follow_stats fst;
    room_follow_get_stats(f, &fst);
    assert_int_equal(fst.connects, 2);
    assert_int_equal(fst.malformed, 0);

    /* The presenter dies without a goodbye (its socket just closes). */
    room_pres_close(p, NULL);
    room_follow_free(f);
    free(s);
    free(s2);
}

/* A raw client: connect to path, optionally send bytes. */
static int raw_connect(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

static void send_hello(int fd)
{
    room_msg *m = malloc(sizeof *m);
    room_msg_init(m, ROOM_T_HELLO);
    m->mode = ROOM_MODE_FOLLOW;
    snprintf(m->user, sizeof m->user, "raw");
    uint8_t b[256];
    size_t n = room_msg_encode(m, b, sizeof b);
    assert_int_equal(write(fd, b, n), (ssize_t)n);
    free(m);
}

/* Read every frame available on fd (non-blocking after the first wait);
 * returns the count and the last frame's type and seq. */
static int g_last_step;

static int drain_frames(int fd, uint8_t *buf, size_t cap, size_t *have, int *last_type, uint64_t *last_seq)
{
    static room_msg m;
    int count = 0;
    for (;;) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 200) <= 0)
            break;
        ssize_t n = recv(fd, buf + *have, cap - *have, MSG_DONTWAIT);
        if (n <= 0)
            break;
        *have += (size_t)n;
        size_t off = 0, used;
        char err[256];
        while (room_msg_decode(buf + off, *have - off, &m, &used, err, sizeof err) == 1) {
            off += used;
            count++;
            *last_type = m.type;
            if (m.type == ROOM_T_STATE || m.type == ROOM_T_DELTA)
                *last_seq = m.st.seq;
            if (m.type == ROOM_T_STATE)
                g_last_step = m.st.step;
        }
        memmove(buf, buf + off, *have - off);
        *have -= off;
    }
    return count;
}

static void test_hostile_followers(void **state)
{
    (void)state;
    char err[512];
    room_pres *p = room_pres_open("class2", NULL, err, sizeof err);
    assert_non_null(p);
    room_state *s = new_state(2, 1);
    room_pres_publish(p, s);
    double t = now_s();
    /* Garbage first: refused with a message, dropped. */
    int g = raw_connect(room_pres_path(p));
    assert_true(g >= 0);
    assert_int_equal(write(g, "GET / HTTP/1.0\r\n\r\n", 18), 18);
    for (int i = 0; i < 50; i++)
        room_pres_poll(p, t += 0.01);
    uint8_t *buf = malloc(1 << 20);
    size_t have = 0;
    int lt = 0;
    uint64_t ls = 0;
    assert_int_equal(drain_frames(g, buf, 1 << 20, &have, &lt, &ls), 1);
    assert_int_equal(lt, ROOM_T_REFUSE);
    close(g);
    /* Silent: dropped after the hello timeout. */
    int q = raw_connect(room_pres_path(p));
    assert_true(q >= 0);
    room_pres_poll(p, t);
    room_pres_poll(p, t + ROOM_HELLO_TIMEOUT_S + 0.1);
    char c;
    struct pollfd pfd = {q, POLLIN, 0};
    assert_int_equal(poll(&pfd, 1, 1000), 1);
    assert_int_equal(read(q, &c, 1), 0); /* closed */
    close(q);
    t += ROOM_HELLO_TIMEOUT_S + 0.2;
    /* A follower that says hello and then sends a forged state and a flood:
     * it is still a follower, the presenter's state is what it publishes. */
    int h = raw_connect(room_pres_path(p));
    send_hello(h);
    room_msg *forged = malloc(sizeof *forged);
    room_msg_init(forged, ROOM_T_STATE);
    forged->st.lesson = 9;
    forged->st.step = 99;
    uint8_t *fb = malloc(1 << 16);
    size_t fn = room_msg_encode(forged, fb, 1 << 16);
    assert_true(fn > 0);
    int fl = fcntl(h, F_GETFL);
    fcntl(h, F_SETFL, fl | O_NONBLOCK);
    for (int i = 0; i < 200; i++) {
        if (write(h, fb, fn) < 0)
            break;
        room_pres_poll(p, t += 0.001);
    }
    fcntl(h, F_SETFL, fl);
    for (int i = 0; i < 20; i++)
        room_pres_poll(p, t += 0.001);
    assert_int_equal(room_pres_followers(p), 1);
    have = 0;
    ls = 0;
    int frames = drain_frames(h, buf, 1 << 20, &have, &lt, &ls);
    assert_true(frames >= 2);               /* welcome, state */
    s->step = 2;
    room_pres_publish(p, s);
    frames = drain_frames(h, buf, 1 << 20, &have, &lt, &ls);
    assert_int_equal(frames, 1);
    assert_int_equal(lt, ROOM_T_STATE);
    /* What the follower got is the presenter's step, never the forged one. */
    assert_int_equal(g_last_step, 2);
    room_pres_stats ps;
    room_pres_get_stats(p, &ps);
    assert_true(ps.refused >= 2);
    close(h);
    free(forged);
    free(fb);
    free(buf);
    free(s);
    room_pres_close(p, NULL);
}

/* A big state (300 inputs with long values): it fills socket buffers fast. */
static room_state *big_state(void)
{
    room_state *s = new_state(5, 0);
    s->ninputs = 300;
    for (int i = 0; i < s->ninputs; i++) {
        s->inputs[i] = (room_input){.wait = i, .kind = ROOM_IN_ANSWER};
        memset(s->inputs[i].value, 'x', 200);
    }
    return s;
}

/* A follower that stops reading: the presenter queues at most one frame for
 * it, and when it reads again it gets the latest state, not every message. */
static void test_slow_follower_skips(void **state)
{
    (void)state;
    char err[512];
    room_pres *p = room_pres_open("class3", NULL, err, sizeof err);
    assert_non_null(p);
    room_state *s = big_state();
    room_pres_publish(p, s);
    int h = raw_connect(room_pres_path(p));
    send_hello(h);
    double t = now_s();
    for (int i = 0; i < 20; i++)
        room_pres_poll(p, t += 0.001);
    assert_int_equal(room_pres_followers(p), 1);
    const int published = 400;
    for (int i = 1; i <= published; i++) {
        s->step = i;
        room_pres_publish(p, s);
        room_pres_poll(p, t += 0.001);
    }
    room_pres_stats ps;
    room_pres_get_stats(p, &ps);
    assert_true(ps.skipped > 0);
    size_t frame = 300 * 210;
    assert_true(ps.pending_max < 3 * frame); /* a frame or two, never a queue */
    /* Now it reads: the stream ends at the latest state. */
    uint8_t *buf = malloc(1 << 20);
    size_t have = 0;
    int lt = 0, got = 0;
    uint64_t ls = 0;
    for (int k = 0; k < 200; k++) {
        got += drain_frames(h, buf, 1 << 20, &have, &lt, &ls);
        room_pres_poll(p, t += 0.001);
        if (ls == (uint64_t)published + 1 && have == 0)
            break;
    }
    assert_int_equal(ls, (uint64_t)published + 1); /* seq of the last publish */
    assert_int_equal(lt, ROOM_T_STATE);
    assert_true(got < published / 2);
    close(h);
    free(buf);
    free(s);
    room_pres_close(p, NULL);
}

/* A follower that is behind when the presenter quits (its socket full, a
 * frame half sent) still gets the goodbye, after the rest of that frame:
 * it must say the presenter quit, not that it is gone. The follower is a
 * child that starts reading only as the presenter closes. */
static void test_goodbye_after_backlog(void **state)
{
    (void)state;
    char err[512];
    room_pres *p = room_pres_open("class5", NULL, err, sizeof err);
    assert_non_null(p);
    room_state *s = big_state();
    room_pres_publish(p, s);
    int h = raw_connect(room_pres_path(p));
    assert_true(h >= 0);
    send_hello(h);
    double t = now_s();
    for (int i = 0; i < 20; i++)
        room_pres_poll(p, t += 0.001);
    assert_int_equal(room_pres_followers(p), 1);
    /* publish until a frame waits half sent */
    room_pres_stats ps = {0};
    for (int i = 1; i <= 400 && ps.skipped == 0; i++) {
        s->step = i;
        room_pres_publish(p, s);
        room_pres_poll(p, t += 0.001);
        room_pres_get_stats(p, &ps);
    }
    assert_true(ps.skipped > 0);
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t kid = fork();
    if (kid == 0) {
        /* the presenter's end of the connection came along with the fork:
         * only the follower's end and the pipe stay open here */
        for (int fd = 3; fd < 1024; fd++)
            if (fd != h && fd != go[0])
                close(fd);
        char c;
        if (read(go[0], &c, 1) != 1)
            _exit(3);
        /* read to the end of the stream: the last frame must be the goodbye */
        uint8_t *buf = malloc(1 << 20);
        size_t have = 0;
        int lt = 0;
        uint64_t ls = 0;
        double end = now_s() + CHILD_WAIT_S;
        for (;;) {
            struct pollfd pfd = {h, POLLIN, 0};
            if (now_s() > end)
                _exit(4);
            if (poll(&pfd, 1, 100) <= 0)
                continue;
            if (pfd.revents & POLLHUP && !(pfd.revents & POLLIN))
                break;
            int got = drain_frames(h, buf, 1 << 20, &have, &lt, &ls);
            char peek;
            if (got == 0 && recv(h, &peek, 1, MSG_PEEK | MSG_DONTWAIT) == 0)
                break; /* end of stream */
        }
        _exit(lt == ROOM_T_BYE && have == 0 ? 0 : 5);
    }
    close(go[0]);
    close(h); /* the child holds the follower's end now */
    assert_int_equal(write(go[1], "g", 1), 1);
    close(go[1]);
    room_pres_close(p, "the presenter quit");
    int st;
    assert_int_equal(waitpid(kid, &st, 0), kid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 5)
        fail_msg("the follower's stream did not end with the goodbye");
    assert_int_equal(WEXITSTATUS(st), 0);
    free(s);
}

/* ---- access ---------------------------------------------------------------- */

static void test_access_rule(void **state)
{
    (void)state;
    room_peer peer = {.uid = 1000, .gid = 1000, .ngroups = 2, .groups = {27, 100}};
    assert_true(room_access_allowed(1000, ROOM_NO_GROUP, &peer));   /* the presenter's own user */
    peer.uid = 1001;
    assert_false(room_access_allowed(1000, ROOM_NO_GROUP, &peer));  /* another user, no group */
    assert_true(room_access_allowed(1000, 100, &peer));             /* supplementary group */
    assert_false(room_access_allowed(1000, 50, &peer));             /* not in the group */
    peer.gid = 50;
    assert_true(room_access_allowed(1000, 50, &peer));              /* effective gid */
    peer.uid = 0;
    peer.gid = 0;
    peer.ngroups = 0;
    assert_false(room_access_allowed(1000, 50, &peer));             /* root is not let in unasked */
    char msg[512];
    room_access_refusal(msg, sizeof msg, "ml101", 0, ROOM_NO_GROUP, 65534);
    assert_non_null(strstr(msg, "open to"));
    assert_non_null(strstr(msg, "ml101"));
    char e[256];
    gid_t g;
    assert_int_equal(room_group_lookup("no-such-group-kvlab", &g, e, sizeof e), -1);
    assert_non_null(strstr(e, "no group"));
}

/* In a child: become uid 65534 with the given groups, connect, say hello,
 * and exit 0 when the first answer has the wanted type.
 * A refusal comes at accept, before the hello is read, and the presenter
 * closes at once: a hello written after that meets a closed socket. That
 * ordering is a matter of scheduling (it made this test fail now and then,
 * the child killed by SIGPIPE), so a child that expects a refusal waits
 * for it before saying hello, and the hello must not kill it. */
static void child_follow(const char *path, int want_type, gid_t extra)
{
    become(65534, extra);
    int fd = raw_connect(path);
    if (fd < 0)
        _exit(4);
    struct pollfd pfd = {fd, POLLIN, 0};
    if (want_type == ROOM_T_REFUSE && poll(&pfd, 1, CHILD_WAIT_S * 1000) != 1)
        _exit(7);
    static room_msg hello;
    room_msg_init(&hello, ROOM_T_HELLO);
    hello.mode = ROOM_MODE_FOLLOW;
    snprintf(hello.user, sizeof hello.user, "raw");
    uint8_t hb[256];
    size_t hn = room_msg_encode(&hello, hb, sizeof hb);
    if (send(fd, hb, hn, MSG_NOSIGNAL) != (ssize_t)hn && want_type != ROOM_T_REFUSE)
        _exit(8);
    static uint8_t buf[1 << 16];
    static room_msg m;
    size_t have = 0, used;
    char err[256];
    while (poll(&pfd, 1, CHILD_WAIT_S * 1000) == 1) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n <= 0)
            break;
        have += (size_t)n;
        if (room_msg_decode(buf, have, &m, &used, err, sizeof err) == 1)
            _exit(m.type == want_type && (want_type != ROOM_T_REFUSE || strstr(m.text, "open to")) ? 0 : 5);
    }
    _exit(6);
}

static int run_child(room_pres *p, const char *path, int want_type, gid_t extra)
{
    pid_t kid = fork();
    if (kid == 0)
        child_follow(path, want_type, extra);
    double t = now_s();
    return serve_child(p, kid, &t);
}

/* The SO_PEERCRED check itself, with a second uid: the socket and folder
 * are opened to everyone by hand, so only the presenter's check stands
 * between another user and the room. */
static void test_peer_credentials(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        skip(); /* needs root to act as a second user */
        return;
    }
    char err[512], dir[200], path[240];
    snprintf(dir, sizeof dir, "%s/open", g_tmp);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/peer.sock", dir);
    /* Owner only. */
    room_pres *p = room_pres_open_at(path, "peer", 0, ROOM_NO_GROUP, err, sizeof err);
    assert_non_null(p);
    chmod(path, 0666);
    room_state *s = new_state(1, 0);
    room_pres_publish(p, s);
    assert_int_equal(run_child(p, path, ROOM_T_REFUSE, ROOM_NO_GROUP), 0);
    assert_int_equal(room_pres_followers(p), 0);
    room_pres_close(p, NULL);
    /* Open to group 4242: a member gets in, a non-member is refused. */
    p = room_pres_open_at(path, "peer", 0, 4242, err, sizeof err);
    assert_non_null(p);
    chmod(path, 0666);
    room_pres_publish(p, s);
    assert_int_equal(run_child(p, path, ROOM_T_WELCOME, 4242), 0);
    assert_int_equal(run_child(p, path, ROOM_T_REFUSE, 4243), 0);
    room_pres_close(p, NULL);
    free(s);
}

/* The presenter refuses at accept, writes its REFUSE and closes before the
 * follower's hello is sent (forced here by the before-hello seam): the hello
 * meets a closed socket (EPIPE), and the follower and kvlab rooms' probe
 * must still read the refusal rather than show "waiting". */
static int g_race_listener;

static void refuse_then_close(void *ctx)
{
    (void)ctx;
    int fd = accept(g_race_listener, NULL, NULL);
    assert_true(fd >= 0);
    room_msg m;
    room_msg_init(&m, ROOM_T_REFUSE);
    snprintf(m.text, sizeof m.text, "room 'race' is open to its owner only");
    uint8_t buf[512];
    size_t n = room_msg_encode(&m, buf, sizeof buf);
    assert_true(n > 0);
    assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), (ssize_t)n);
    close(fd);
}

static void test_refusal_before_hello(void **state)
{
    (void)state;
    char path[240];
    snprintf(path, sizeof path, "%s/race.sock", g_tmp);
    unlink(path);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t plen = strlen(path);
    assert_true(plen < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, plen + 1);
    g_race_listener = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(g_race_listener >= 0);
    assert_int_equal(bind(g_race_listener, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(g_race_listener, 4), 0);
    room_follow_set_before_hello(refuse_then_close, NULL);
    room_follow *f = room_follow_new_at(path, "race");
    assert_non_null(f);
    room_follow_poll(f, now_s());
    assert_int_equal(room_follow_get_status(f), ROOM_FS_REFUSED);
    assert_non_null(strstr(room_follow_message(f), "open to its owner only"));
    room_follow_free(f);
    room_msg w;
    char err[512];
    assert_int_equal(room_probe(path, 2000, &w, err, sizeof err), 1);
    assert_int_equal(w.type, ROOM_T_REFUSE);
    room_follow_set_before_hello(NULL, NULL);
    close(g_race_listener);
    unlink(path);
}

/* A group room: folder 0750 and socket 0660, both with the group. */
static void test_group_room(void **state)
{
    (void)state;
    char err[512], gname[64];
    struct group *gr = getgrgid(getegid());
    if (!gr) {
        skip();
        return;
    }
    snprintf(gname, sizeof gname, "%s", gr->gr_name);
    room_pres *p = room_pres_open("class4", gname, err, sizeof err);
    assert_non_null(p);
    struct stat st;
    assert_int_equal(lstat(room_pres_path(p), &st), 0);
    assert_int_equal(st.st_mode & 0777, 0660);
    assert_int_equal(st.st_gid, getegid());
    assert_non_null(strstr(room_pres_path(p), "-g"));
    assert_string_equal(room_pres_group(p), gname);
    /* The same name privately as well: refused (followers could not choose). */
    char err2[512];
    assert_null(room_pres_open("class4", NULL, err2, sizeof err2));
    assert_non_null(strstr(err2, "already present"));
    room_pres_close(p, NULL);
}

/* Images on (the app's presenter): a follower that joins is sent no state
 * until the presenter hands the room an engine image; then the image, whole
 * and before the state, and the state of the same run and engine step.
 * Without an image to give (NULL) the state goes out alone. */
static void test_join_with_image(void **state)
{
    (void)state;
    char err[512];
    room_pres *p = room_pres_open("imgroom", NULL, err, sizeof err);
    assert_non_null(p);
    room_pres_set_images(p, 1);
    room_state *s = new_state(2, 1);
    s->engine_step = 100610;
    s->server_gen = 5;
    room_pres_publish(p, s);
    room_follow *f = room_follow_new("imgroom", err, sizeof err);
    assert_non_null(f);
    double t = now_s();
    for (int i = 0; i < 4000 && !room_pres_wants_image(p); i++) {
        t += 0.001;
        room_pres_poll(p, t);
        room_follow_poll(f, t);
        nap_ms(0);
    }
    assert_true(room_pres_wants_image(p));
    assert_false(pump(p, f, ROOM_FS_FOLLOWING, &t)); /* no state before the image */
    assert_null(room_follow_state(f));
    static uint8_t image[150000];
    for (size_t i = 0; i < sizeof image; i++)
        image[i] = (uint8_t)(i * 7);
    assert_int_equal(room_pres_send_image(p, image, sizeof image), 1);
    assert_false(room_pres_wants_image(p));
    assert_true(pump(p, f, ROOM_FS_FOLLOWING, &t));
    size_t len;
    uint64_t run, step;
    uint32_t gen;
    const uint8_t *got = room_follow_image(f, &len, &run, &gen, &step); /* whole when the state came */
    assert_non_null(got);
    assert_int_equal(len, sizeof image);
    assert_memory_equal(got, image, sizeof image);
    const room_state *fs = room_follow_state(f);
    assert_non_null(fs);
    assert_int_equal(run, fs->run_id);
    assert_int_equal(gen, 5);
    assert_int_equal(step, fs->engine_step);
    assert_int_equal(step, 100610);
    room_pres_stats ps;
    room_pres_get_stats(p, &ps);
    assert_int_equal(ps.images_sent, 1);
    assert_true(ps.image_bytes > sizeof image);
    /* A second follower, and nothing to image: the state alone. */
    room_follow *g = room_follow_new("imgroom", err, sizeof err);
    assert_non_null(g);
    for (int i = 0; i < 4000 && !room_pres_wants_image(p); i++) {
        t += 0.001;
        room_pres_poll(p, t);
        room_follow_poll(g, t);
        nap_ms(0);
    }
    assert_true(room_pres_wants_image(p));
    assert_int_equal(room_pres_send_image(p, NULL, 0), 1);
    assert_true(pump(p, g, ROOM_FS_FOLLOWING, &t));
    assert_null(room_follow_image(g, &len, &run, &gen, &step));
    room_follow_free(f);
    room_follow_free(g);
    room_pres_close(p, NULL);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_join_with_image),
        cmocka_unit_test(test_private_dir),
        cmocka_unit_test(test_unsafe_dirs),
        cmocka_unit_test(test_follow_state_and_deltas),
        cmocka_unit_test(test_hostile_followers),
        cmocka_unit_test(test_slow_follower_skips),
        cmocka_unit_test(test_goodbye_after_backlog),
        cmocka_unit_test(test_access_rule),
        cmocka_unit_test(test_peer_credentials),
        cmocka_unit_test(test_refusal_before_hello),
        cmocka_unit_test(test_group_room),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
