/* Who may reach whose room, with real second and third users (forked
 * children that become uid 65534 and 65533; the tests skip unless run as
 * root): a bare room name is resolved once and never moves to a classmate's
 * room of the same name; the presenter shown is the socket's owner
 * (SO_PEERCRED), not the name a welcome claims; a room folder someone else
 * made first does not block the presenter; one member cannot fill the
 * room; left-over sockets do not hide a room; kvlab rooms probes silent
 * rooms in parallel; a non-member naming a group room is refused with the
 * reason. */
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
#include <signal.h>
#include <sys/prctl.h>
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

#define INSTRUCTOR 65534
#define CLASSMATE 65533
#define STUDENT 65532
static gid_t GROUP = ROOM_NO_GROUP; /* a group of this machine none of them is in (setup) */
#define WAIT_S 20.0  /* deadlines: generous, the machine may be busy */

static int setup(void **state)
{
    (void)state;
    if (room_test_env_setup("kvacc") < 0)
        return -1;
    /* --allow-group needs a group that exists: any but root's and the
     * test users' own. */
    struct group *gr;
    setgrent();
    while ((gr = getgrent()))
        if (gr->gr_gid > 0 && gr->gr_gid < 60000) {
            GROUP = gr->gr_gid;
            break;
        }
    endgrent();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return room_test_env_teardown();
}

/* A presenter process of uid presenting room `name` (open to group when
 * not ROOM_NO_GROUP) until killed. Returns its pid once its socket is
 * there (or -1). */
static pid_t spawn_presenter(uid_t uid, const char *name, gid_t group)
{
    int pfd[2];
    if (pipe(pfd) < 0)
        return -1;
    pid_t kid = fork();
    if (kid == 0) {
        close(pfd[0]);
        become(uid, group);
        char err[512], gname[32];
        snprintf(gname, sizeof gname, "%u", (unsigned)group);
        room_pres *p = room_pres_open(name, group == ROOM_NO_GROUP ? NULL : gname, err, sizeof err);
        if (!p) {
            fprintf(stderr, "presenter %u: %s\n", (unsigned)uid, err);
            _exit(4);
        }
        room_state *s = calloc(1, sizeof *s);
        s->lesson = 3;
        snprintf(s->lesson_title, sizeof s->lesson_title, "Lesson of %u", (unsigned)uid);
        s->view_focus = -1;
        s->speed = 1;
        s->engine_seed = uid;
        if (write(pfd[1], "k", 1) != 1)
            _exit(5);
        close(pfd[1]);
        double end = now_s() + 120;
        while (now_s() < end) {
            room_pres_poll(p, now_s());
            s->engine_step++;
            room_pres_publish(p, s);
            struct pollfd fds[64];
            poll(fds, (nfds_t)room_pres_pollfds(p, fds, 64), 10);
        }
        _exit(0);
    }
    close(pfd[1]);
    char c;
    struct pollfd w = {pfd[0], POLLIN, 0};
    int ok = poll(&w, 1, (int)(WAIT_S * 1000)) == 1 && read(pfd[0], &c, 1) == 1;
    close(pfd[0]);
    if (!ok) {
        kill(kid, SIGKILL);
        waitpid(kid, NULL, 0);
        return -1;
    }
    return kid;
}

static void set_sun(struct sockaddr_un *sa, const char *path)
{
    size_t n = strlen(path);
    assert_true(n < sizeof sa->sun_path);
    memcpy(sa->sun_path, path, n + 1);
}

static void end_child(pid_t kid)
{
    kill(kid, SIGKILL); /* as kill -9: the socket is left behind */
    waitpid(kid, NULL, 0);
}

/* Poll f for up to s seconds until its status is want (and, when who is
 * not NULL, its presenter is who). */
static int follow_until(room_follow *f, room_follow_status want, const char *who, double s)
{
    double end = now_s() + s;
    while (now_s() < end) {
        room_follow_poll(f, now_s());
        if (room_follow_get_status(f) == want && (!who || !strcmp(room_follow_presenter(f), who)))
            return 1;
        nap_ms(5);
    }
    fprintf(stderr, "follower (uid %u): status %d, presenter '%s': %s\n", (unsigned)geteuid(),
            room_follow_get_status(f), room_follow_presenter(f), room_follow_message(f));
    return 0;
}

#define NEED_ROOT()                                                                                               \
    do {                                                                                                          \
        if (geteuid() != 0 || GROUP == ROOM_NO_GROUP) {                                                          \
            skip();                                                                                               \
            return;                                                                                               \
        }                                                                                                         \
    } while (0)

/* Wait for one byte from fd (up to WAIT_S); returns it or -1. */
static int wait_byte(int fd)
{
    struct pollfd w = {fd, POLLIN, 0};
    char c;
    if (poll(&w, 1, (int)(WAIT_S * 1000)) != 1 || read(fd, &c, 1) != 1)
        return -1;
    return c;
}

/* The instructor's room goes away and a classmate's room of the same bare
 * name appears: the student (a member of the group both rooms are open to)
 * waits for the instructor and never follows the classmate; the
 * instructor's return is followed again. */
static void test_bare_name_resolved_once(void **state)
{
    (void)state;
    NEED_ROOT();
    char inst[ROOM_NAME_MAX], mate[ROOM_NAME_MAX];
    room_user_name(INSTRUCTOR, inst, sizeof inst);
    room_user_name(CLASSMATE, mate, sizeof mate);
    pid_t a = spawn_presenter(INSTRUCTOR, "ml101", GROUP);
    assert_true(a > 0);
    int pfd[2], go[2]; /* child -> parent: where it is; parent -> child: the classmate's room is up */
    assert_int_equal(pipe(pfd), 0);
    assert_int_equal(pipe(go), 0);
    pid_t kid = fork();
    if (kid == 0) {
        close(pfd[0]);
        close(go[1]);
        become(STUDENT, GROUP);
        char err[512], want[ROOM_NAME_MAX + 40];
        room_follow *f = room_follow_new("ml101", err, sizeof err);
        if (!f || !follow_until(f, ROOM_FS_FOLLOWING, inst, WAIT_S) ||
            room_follow_state(f)->engine_seed != INSTRUCTOR)
            _exit(4);
        if (write(pfd[1], "1", 1) != 1)
            _exit(5);
        /* The instructor is gone and the classmate presents ml101: several
         * retries' worth from the moment its room is up (the parent says
         * when: a watch started before it could end before the classmate's
         * room exists on a busy machine and prove nothing), never the
         * classmate. */
        if (wait_byte(go[0]) != 'c')
            _exit(9);
        double end = now_s() + 4.0;
        while (now_s() < end) {
            room_follow_poll(f, now_s());
            /* (still "following" until the instructor's socket is seen
             * closed: only the classmate's room is a failure) */
            const room_state *st = room_follow_state(f);
            if (!strcmp(room_follow_presenter(f), mate) ||
                (room_follow_get_status(f) == ROOM_FS_FOLLOWING && st && st->engine_seed == CLASSMATE))
                _exit(6);
            nap_ms(5);
        }
        snprintf(want, sizeof want, "%s/ml101", inst);
        if (strcmp(room_follow_spec(f), want))
            _exit(7);
        if (write(pfd[1], "2", 1) != 1)
            _exit(5);
        if (!follow_until(f, ROOM_FS_FOLLOWING, inst, WAIT_S) || room_follow_state(f)->engine_seed != INSTRUCTOR)
            _exit(8);
        _exit(0);
    }
    close(pfd[1]);
    close(go[0]);
    assert_int_equal(wait_byte(pfd[0]), '1');
    end_child(a);
    pid_t b = spawn_presenter(CLASSMATE, "ml101", GROUP);
    assert_true(b > 0);
    assert_int_equal(write(go[1], "c", 1), 1);
    close(go[1]);
    assert_int_equal(wait_byte(pfd[0]), '2');
    a = spawn_presenter(INSTRUCTOR, "ml101", GROUP);
    assert_true(a > 0);
    assert_int_equal(child_status(kid), 0);
    close(pfd[0]);
    end_child(a);
    end_child(b);
}

/* A hostile presenter claims another name in its welcome: the follower and
 * the probe show the socket's owner. A socket in one user's folder served
 * by another user's process is not followed. */
static void test_presenter_name_from_credentials(void **state)
{
    (void)state;
    NEED_ROOT();
    char dir[200], path[260], err[512], who[ROOM_NAME_MAX];
    room_user_name(INSTRUCTOR, who, sizeof who);
    snprintf(dir, sizeof dir, "%s/open", g_tmp);
    mkdir(dir, 0777);
    chmod(dir, 0777);
    snprintf(path, sizeof path, "%s/claim.sock", dir);
    pid_t kid = fork();
    if (kid == 0) {
        become(INSTRUCTOR, ROOM_NO_GROUP);
        int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        set_sun(&sa, path);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 8) < 0)
            _exit(4);
        chmod(path, 0666);
        static room_msg w;
        room_msg_init(&w, ROOM_T_WELCOME);
        snprintf(w.room, sizeof w.room, "claim");
        snprintf(w.presenter, sizeof w.presenter, "root"); /* the lie */
        w.pid = 1;
        uint8_t buf[1024];
        size_t n = room_msg_encode(&w, buf, sizeof buf);
        for (;;) {
            int fd = accept(lfd, NULL, NULL);
            if (fd < 0)
                _exit(5);
            if (send(fd, buf, n, MSG_NOSIGNAL) < 0) {
                /* the follower left */
            }
            nap_ms(50);
            close(fd);
        }
    }
    double end = now_s() + WAIT_S;
    while (access(path, F_OK) != 0 && now_s() < end)
        nap_ms(5);
    room_follow *f = room_follow_new_at(path, "claim");
    end = now_s() + WAIT_S;
    while (!room_follow_welcome(f) && now_s() < end) {
        room_follow_poll(f, now_s());
        nap_ms(2);
    }
    if (!room_follow_welcome(f))
        fprintf(stderr, "status %d: %s\n", room_follow_get_status(f), room_follow_message(f));
    assert_non_null(room_follow_welcome(f));
    assert_string_equal(room_follow_welcome(f)->presenter, who);
    assert_string_equal(room_follow_presenter(f), who);
    room_follow_free(f);
    room_msg w;
    assert_int_equal(room_probe(path, 5000, &w, err, sizeof err), 0);
    assert_string_equal(w.presenter, who);
    end_child(kid);
    unlink(path);

    /* root serves a socket in the instructor's folder, owned by the
     * instructor: found as the instructor's room, but not followed. */
    char idir[200], ipath[260];
    snprintf(idir, sizeof idir, "%s/kvlab-%u", g_tmp, INSTRUCTOR);
    mkdir(idir, 0700);
    assert_int_equal(chown(idir, INSTRUCTOR, INSTRUCTOR), 0);
    chmod(idir, 0700);
    snprintf(ipath, sizeof ipath, "%s/imp.sock", idir);
    room_pres *p = room_pres_open_at(ipath, "imp", INSTRUCTOR, ROOM_NO_GROUP, err, sizeof err);
    assert_non_null(p);
    assert_int_equal(chown(ipath, INSTRUCTOR, INSTRUCTOR), 0);
    char spec[ROOM_NAME_MAX + 8];
    snprintf(spec, sizeof spec, "%s/imp", who);
    f = room_follow_new(spec, err, sizeof err);
    assert_non_null(f);
    end = now_s() + WAIT_S;
    while (room_follow_get_status(f) != ROOM_FS_REFUSED && now_s() < end) {
        room_pres_poll(p, now_s());
        room_follow_poll(f, now_s());
        nap_ms(2);
    }
    assert_int_equal(room_follow_get_status(f), ROOM_FS_REFUSED);
    assert_non_null(strstr(room_follow_message(f), "answers on its socket"));
    assert_int_equal(room_pres_followers(p), 0);
    room_follow_free(f);
    room_pres_close(p, NULL);
}

/* Another user made the predictable folder first: the presenter still
 * opens its room (in a second folder of its own, and says so), and a
 * follower naming the room finds it there. */
static void test_squatted_folder(void **state)
{
    (void)state;
    NEED_ROOT();
    unsetenv("XDG_RUNTIME_DIR");
    char squat[200], err[512];
    snprintf(squat, sizeof squat, "%s/kvlab-0", g_tmp);
    assert_int_equal(mkdir(squat, 0700), 0);
    assert_int_equal(chown(squat, CLASSMATE, CLASSMATE), 0);
    room_pres *p = room_pres_open("squat", NULL, err, sizeof err);
    assert_non_null(p);
    assert_non_null(strstr(room_pres_notice(p), "belongs to"));
    assert_null(strstr(room_pres_path(p), "/kvlab-0/"));
    assert_non_null(strstr(room_pres_path(p), "/kvlab-0."));
    room_state *s = calloc(1, sizeof *s);
    s->lesson = 2;
    s->speed = 1;
    s->view_focus = -1;
    room_pres_publish(p, s);
    room_entry e;
    assert_int_equal(room_find("squat", &e, err, sizeof err), 1);
    assert_string_equal(e.sock, room_pres_path(p));
    room_follow *f = room_follow_new("squat", err, sizeof err);
    double end = now_s() + WAIT_S;
    while (room_follow_get_status(f) != ROOM_FS_FOLLOWING && now_s() < end) {
        room_pres_poll(p, now_s());
        room_follow_poll(f, now_s());
        nap_ms(2);
    }
    assert_int_equal(room_follow_get_status(f), ROOM_FS_FOLLOWING);
    room_follow_free(f);
    room_pres_close(p, NULL);
    free(s);
    rmdir(squat);
    setenv("XDG_RUNTIME_DIR", g_xdg, 1);
}

/* One member holds connections open without a hello (and reconnects): the
 * presenter refuses it past ROOM_MAX_PER_MEMBER, and another member still
 * gets in. */
static void test_member_limit(void **state)
{
    (void)state;
    NEED_ROOT();
    char dir[200], path[260], err[512];
    snprintf(dir, sizeof dir, "%s/grp", g_tmp);
    mkdir(dir, 0777);
    chmod(dir, 0777);
    snprintf(path, sizeof path, "%s/full.sock", dir);
    room_pres *p = room_pres_open_at(path, "full", 0, GROUP, err, sizeof err);
    assert_non_null(p);
    chmod(path, 0666);
    room_state *s = calloc(1, sizeof *s);
    s->lesson = 1;
    s->speed = 1;
    s->view_focus = -1;
    room_pres_publish(p, s);
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t hog = fork();
    if (hog == 0) {
        close(pfd[0]);
        become(CLASSMATE, GROUP);
        int n = 0;
        for (int i = 0; i < 40; i++) {
            struct sockaddr_un sa = {.sun_family = AF_UNIX};
            set_sun(&sa, path);
            int fd = socket(AF_UNIX, SOCK_STREAM, 0);
            if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
                n++; /* held open, no hello */
            else if (fd >= 0)
                close(fd);
        }
        if (write(pfd[1], "k", 1) != 1)
            _exit(5);
        pause();
        _exit(0);
    }
    close(pfd[1]);
    char c;
    double t = now_s();
    struct pollfd w = {pfd[0], POLLIN, 0};
    while (poll(&w, 1, 1) == 0 && now_s() - t < WAIT_S)
        room_pres_poll(p, now_s());
    assert_int_equal(read(pfd[0], &c, 1), 1);
    close(pfd[0]);
    for (int i = 0; i < 50; i++) {
        room_pres_poll(p, now_s());
        nap_ms(1);
    }
    assert_true(room_pres_joining(p) <= ROOM_MAX_PER_MEMBER);
    room_pres_stats ps;
    room_pres_get_stats(p, &ps);
    assert_true(ps.refused >= 20);
    /* Another member follows. */
    pid_t kid = fork();
    if (kid == 0) {
        become(INSTRUCTOR, GROUP);
        room_follow *f = room_follow_new_at(path, "full");
        _exit(f && follow_until(f, ROOM_FS_FOLLOWING, NULL, WAIT_S) ? 0 : 6);
    }
    int st = -1;
    double end = now_s() + WAIT_S + 5;
    while (now_s() < end) {
        room_pres_poll(p, now_s());
        if (waitpid(kid, &st, WNOHANG) == kid)
            break;
        nap_ms(1);
    }
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    end_child(hog);
    room_pres_close(p, NULL);
    free(s);
}

/* A classmate's folder full of sockets left by killed presenters: the
 * instructor's room is still found by name and listed. */
static void test_leftover_sockets(void **state)
{
    (void)state;
    NEED_ROOT();
    char dir[200], err[512], inst[ROOM_NAME_MAX];
    room_user_name(INSTRUCTOR, inst, sizeof inst);
    snprintf(dir, sizeof dir, "%s/kvlab-%u", g_tmp, CLASSMATE);
    pid_t kid = fork();
    if (kid == 0) {
        become(CLASSMATE, ROOM_NO_GROUP);
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            _exit(4);
        for (int i = 0; i < 300; i++) {
            struct sockaddr_un sa = {.sun_family = AF_UNIX};
                char op[300];
            snprintf(op, sizeof op, "%s/old%03d.sock", dir, i);
            set_sun(&sa, op);
            int fd = socket(AF_UNIX, SOCK_STREAM, 0);
            if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
                _exit(5);
            close(fd); /* left over */
        }
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(kid, &st, 0), kid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pid_t a = spawn_presenter(INSTRUCTOR, "zz-class", GROUP);
    assert_true(a > 0);
    room_entry e;
    assert_int_equal(room_find("zz-class", &e, err, sizeof err), 1);
    assert_int_equal(e.uid, INSTRUCTOR);
    room_entry *all = calloc(ROOM_SCAN_MAX, sizeof *all);
    int n = room_scan(all, ROOM_SCAN_MAX, NULL), found = 0, mates = 0;
    for (int i = 0; i < n; i++) {
        found += all[i].uid == INSTRUCTOR && !strcmp(all[i].name, "zz-class");
        mates += all[i].uid == CLASSMATE && all[i].gid == ROOM_NO_GROUP;
    }
    assert_int_equal(found, 1);
    assert_true(mates <= ROOM_SCAN_PER_FOLDER);
    free(all);
    kid = fork();
    if (kid == 0) {
        become(STUDENT, GROUP);
        room_follow *f = room_follow_new("zz-class", err, sizeof err);
        _exit(f && follow_until(f, ROOM_FS_FOLLOWING, inst, WAIT_S) ? 0 : 4);
    }
    assert_int_equal(child_status(kid), 0);
    end_child(a);
}

/* 200 rooms whose presenter never answers: probed together, about one
 * deadline in all (probed one by one at 300 ms each: 60 s). */
static void test_probe_parallel(void **state)
{
    (void)state;
    enum { N = 200 };
    static char paths[N][160];
    const char *pp[N];
    int fds[N];
    for (int i = 0; i < N; i++) {
        snprintf(paths[i], sizeof paths[i], "%s/silent%03d.sock", g_tmp, i);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        set_sun(&sa, paths[i]);
        fds[i] = socket(AF_UNIX, SOCK_STREAM, 0);
        assert_true(fds[i] >= 0);
        assert_int_equal(bind(fds[i], (struct sockaddr *)&sa, sizeof sa), 0);
        assert_int_equal(listen(fds[i], 4), 0); /* never accepted */
        pp[i] = paths[i];
    }
    room_probe_result *r = calloc(N, sizeof *r);
    double t0 = now_s();
    room_probe_many(pp, N, 300, r);
    double took = now_s() - t0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(r[i].rc, -1);
        assert_non_null(strstr(r[i].err, "no answer within 300 ms"));
    }
    printf("# 200 silent rooms probed in %.2f s\n", took);
    assert_true(took < 6.0); /* 2 rounds of 300 ms, with room for a busy machine */
    for (int i = 0; i < N; i++) {
        close(fds[i]);
        unlink(paths[i]);
    }
    free(r);
}

/* A user outside the room's group names it bare: refused, and told why,
 * instead of waiting in silence. */
static void test_nonmember_refused(void **state)
{
    (void)state;
    NEED_ROOT();
    pid_t a = spawn_presenter(INSTRUCTOR, "grp101", GROUP);
    assert_true(a > 0);
    pid_t kid = fork();
    if (kid == 0) {
        become(CLASSMATE, ROOM_NO_GROUP);
        char err[512];
        room_follow *f = room_follow_new("grp101", err, sizeof err);
        if (!f)
            _exit(4);
        if (!follow_until(f, ROOM_FS_REFUSED, NULL, WAIT_S))
            _exit(5);
        const char *m = room_follow_message(f);
        char want[ROOM_NAME_MAX + 16], gname[ROOM_NAME_MAX];
        room_group_name(GROUP, gname, sizeof gname);
        snprintf(want, sizeof want, "(group %s)", gname);
        if (!strstr(m, "not open to you") || !strstr(m, want)) {
            fprintf(stderr, "refusal without the reason: %s\n", m);
            _exit(6);
        }
        _exit(0);
    }
    int st;
    assert_int_equal(waitpid(kid, &st, 0), kid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* A member is let in. */
    kid = fork();
    if (kid == 0) {
        become(CLASSMATE, GROUP);
        char err[512];
        room_follow *f = room_follow_new("grp101", err, sizeof err);
        _exit(f && follow_until(f, ROOM_FS_FOLLOWING, NULL, WAIT_S) ? 0 : 5);
    }
    assert_int_equal(waitpid(kid, &st, 0), kid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    end_child(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bare_name_resolved_once),
        cmocka_unit_test(test_presenter_name_from_credentials),
        cmocka_unit_test(test_squatted_folder),
        cmocka_unit_test(test_member_limit),
        cmocka_unit_test(test_leftover_sockets),
        cmocka_unit_test(test_probe_parallel),
        cmocka_unit_test(test_nonmember_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
