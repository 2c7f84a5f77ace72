/* The sandbox's wall time is watched from outside the Lua VM (lsn_lua.c's
 * watchdog thread pokes a one-instruction hook at the deadline): with the
 * count hook made too rare to matter (hook_every ~2^31 instructions, many
 * seconds of Lua) and no instruction budget to speak of, an endless loop
 * still ends at the wall time, with the limit's message, and the next call
 * into the lesson still gets a fresh deadline. A stop request (the program's
 * SIGTERM flag) ends it the same way long before the deadline. Without the
 * watchdog each of these runs until the rare hook, seconds later. */
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "lsn.h"

static char dir[256], lessons[300];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int setup(void **st)
{
    (void)st;
    snprintf(dir, sizeof dir, "/tmp/kvlab-wd-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(lessons, sizeof lessons, "%s/lessons", dir);
    char p[400];
    snprintf(p, sizeof p, "mkdir -p '%s'", lessons);
    if (system(p) != 0) return -1;
    snprintf(p, sizeof p, "%s/manifest.json", lessons);
    write_file(p, "{\"format_version\": 1, \"chapters\": [{\"number\": 1, \"title\": \"T\"}],\n"
                  " \"lessons\": [{\"number\": 1, \"chapter\": 1, \"file\": \"01-loop.lua\", \"title\": \"Loop\"},\n"
                  "  {\"number\": 2, \"chapter\": 1, \"file\": \"02-twice.lua\", \"title\": \"Twice\"}]}\n");
    snprintf(p, sizeof p, "%s/01-loop.lua", lessons);
    write_file(p, "return { id = 1, run = function(lab) while true do end end }\n");
    /* a condition that loops: a second call into the lesson after the first ended */
    snprintf(p, sizeof p, "%s/02-twice.lua", lessons);
    write_file(p, "return { id = 2, run = function(lab)\n"
                  "  local n = 0\n"
                  "  for _ = 1, 3 do n = n + 1 end\n"
                  "  lab.pause()\n"
                  "  while true do end\n"
                  "end }\n");
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static volatile sig_atomic_t stop_flag;

static lsn_runner *open_runner(double seconds)
{
    lsn_config cfg = {.lessons_dir = lessons, .assets_dir = KVLAB_SOURCE_DIR "/assets", .state_dir = "",
                      .headless = 1, .interrupt = &stop_flag};
    cfg.limits.seconds = seconds;
    cfg.limits.instructions = LONG_MAX / 2;
    cfg.limits.hook_every = INT_MAX;
    char err[512];
    lsn_runner *r = lsn_new(&cfg, err, sizeof err);
    if (!r) fail_msg("lsn_new: %s", err);
    return r;
}

/* kvlab check's run of lesson n; its transcript in out. Returns seconds. */
static double check(lsn_runner *r, int n, char *out, size_t outl)
{
    FILE *log = fmemopen(out, outl, "w");
    assert_non_null(log);
    double t0 = now_s();
    assert_int_equal(lsn_check(r, n, log), 1);
    double t = now_s() - t0;
    fclose(log);
    return t;
}

static void test_wall_time_from_outside(void **st)
{
    (void)st;
    lsn_runner *r = open_runner(0.3);
    char out[8192];
    double t = check(r, 1, out, sizeof out);
    printf("endless loop, hook every 2^31 instructions: ended after %.2f s\n", t);
    assert_non_null(strstr(out, "01-loop.lua:1: the lesson ran too long without waiting (an endless loop?): more than 0.3 s"));
    assert_true(t >= 0.29);
    assert_true(t < 2.5); /* the rare hook alone: many seconds */
    lsn_free(r);
}

static void test_each_call_its_deadline(void **st)
{
    (void)st;
    lsn_runner *r = open_runner(0.3);
    char out[8192];
    /* the lesson's first call ends at its pause; the second loops: 0.3 s from its own start */
    double t = check(r, 2, out, sizeof out);
    printf("second call: ended after %.2f s\n", t);
    assert_non_null(strstr(out, "02-twice.lua:5: the lesson ran too long"));
    assert_true(t < 2.5);
    /* and the runner is usable again: the first lesson, a fresh deadline */
    t = check(r, 1, out, sizeof out);
    assert_non_null(strstr(out, "more than 0.3 s"));
    assert_true(t >= 0.29 && t < 2.5);
    lsn_free(r);
}

static void test_stop_request(void **st)
{
    (void)st;
    lsn_runner *r = open_runner(60);
    char out[8192];
    stop_flag = 1; /* SIGTERM arrived: the watchdog pokes the hook without waiting for the deadline */
    double t = check(r, 1, out, sizeof out);
    stop_flag = 0;
    printf("stop request: ended after %.2f s\n", t);
    assert_non_null(strstr(out, "stopped: the program is closing"));
    assert_true(t < 2.5);
    lsn_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_wall_time_from_outside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_each_call_its_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_request, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
