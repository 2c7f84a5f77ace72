/* The rooms tests' shared harness (test_room_net.c, test_room_access.c;
 * header-only): a private rooms root in /tmp (KVLAB_ROOMS_DIR, with an
 * XDG_RUNTIME_DIR under it) made by setup and removed by teardown, the
 * monotonic clock, naps, and what a forked child needs to act as another
 * user (become) and what its parent needs to read how it ended. */
#ifndef KVLAB_ROOM_TEST_ENV_H
#define KVLAB_ROOM_TEST_ENV_H

#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "room_path.h"

static char g_tmp[128];      /* KVLAB_ROOMS_DIR */
static char g_xdg[160];      /* XDG_RUNTIME_DIR */

/* Make /tmp/PREFIX-XXXXXX (sticky, open to all: the test users' folders go
 * there) and its xdg/ folder, and point the rooms at them. 0 or -1. */
static inline int room_test_env_setup(const char *prefix)
{
    snprintf(g_tmp, sizeof g_tmp, "/tmp/%s-XXXXXX", prefix);
    if (!mkdtemp(g_tmp))
        return -1;
    chmod(g_tmp, 01777);
    snprintf(g_xdg, sizeof g_xdg, "%s/xdg", g_tmp);
    if (mkdir(g_xdg, 0700) < 0)
        return -1;
    setenv("KVLAB_ROOMS_DIR", g_tmp, 1);
    setenv("XDG_RUNTIME_DIR", g_xdg, 1);
    return 0;
}

static inline int room_test_env_teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void nap_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* In a forked child: become uid (its gid the same number) with one
 * supplementary group, or none for ROOM_NO_GROUP; exits 3 when it cannot.
 * Root's XDG_RUNTIME_DIR is dropped (rooms go to the shared root) and the
 * child dies with its parent (no child outlives a failed test). */
static inline void become(uid_t uid, gid_t extra)
{
    gid_t gl[1] = {extra};
    unsetenv("XDG_RUNTIME_DIR");
    if (setgroups(extra == ROOM_NO_GROUP ? 0 : 1, gl) < 0 || setgid((gid_t)uid) < 0 || setuid(uid) < 0)
        _exit(3);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* setuid cleared it */
    if (getppid() == 1)
        _exit(3);
}

/* The exit status of child kid once it ends, -1 when a signal ended it. */
static inline int child_status(pid_t kid)
{
    int st;
    if (waitpid(kid, &st, 0) != kid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

#endif
