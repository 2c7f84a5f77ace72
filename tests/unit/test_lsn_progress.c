/* The learner's progress file (lessons/host/lsn_progress.c): round trip, the XDG
 * path rules, atomic writes, and a corrupt file moved aside. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "lsn_progress.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "/tmp/kvlab-progress-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (!strncmp(de->d_name, prefix, strlen(prefix)))
            n++;
    if (d)
        closedir(d);
    return n;
}

static void test_path_rules(void **state)
{
    (void)state;
    char buf[512];
    setenv("XDG_STATE_HOME", "/x/state", 1);
    setenv("HOME", "/home/u", 1);
    assert_int_equal(lsn_progress_path(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "/x/state/kvlab/progress.json");
    /* a relative XDG path is invalid per the spec and ignored */
    setenv("XDG_STATE_HOME", "rel/state", 1);
    assert_int_equal(lsn_progress_path(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "/home/u/.local/state/kvlab/progress.json");
    unsetenv("XDG_STATE_HOME");
    assert_int_equal(lsn_progress_path(NULL, buf, sizeof buf), 0);
    assert_string_equal(buf, "/home/u/.local/state/kvlab/progress.json");
    assert_int_equal(lsn_progress_path("/given", buf, sizeof buf), 0);
    assert_string_equal(buf, "/given/progress.json");
    unsetenv("HOME");
    assert_int_equal(lsn_progress_path(NULL, buf, sizeof buf), -1);
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[512], err[256], notice[512];
    /* folders that do not exist yet are created */
    snprintf(path, sizeof path, "%s/a/b/kvlab/progress.json", tmpdir);
    static lsn_progress p, q;
    lsn_progress_init(&p);
    p.current = 2;
    p.lessons[1].step = 9;
    p.lessons[1].done = 1;
    p.lessons[2].step = 3;
    snprintf(p.vllm_version, sizeof p.vllm_version, "0.11.0");
    snprintf(p.accounting, sizeof p.accounting, "release");
    assert_int_equal(lsn_progress_add_input(&p, 2, 1, LSN_IN_ANSWER, NULL, "433,888 tokens"), 0);
    assert_int_equal(lsn_progress_add_input(&p, 2, 2, LSN_IN_FLAG, "max-model-len", "8192"), 0);
    assert_int_equal(lsn_progress_add_input(&p, 2, 3, LSN_IN_REVEAL, NULL, NULL), 0);
    assert_int_equal(lsn_progress_save(&p, path, err, sizeof err), 0);
    /* no temp file is left behind */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/a/b/kvlab", tmpdir);
    assert_int_equal(count_entries(dir, "progress.json.tmp"), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);

    lsn_progress_init(&q);
    assert_int_equal(lsn_progress_load(&q, path, notice, sizeof notice), 0);
    assert_int_equal(q.current, 2);
    assert_string_equal(q.vllm_version, "0.11.0"); /* the learner's release is remembered */
    assert_string_equal(q.accounting, "release");
    assert_int_equal(q.lessons[1].step, 9);
    assert_true(q.lessons[1].done);
    assert_int_equal(q.lessons[2].step, 3);
    assert_false(q.lessons[2].done);
    assert_int_equal(q.lessons[2].ninputs, 3);
    assert_int_equal(q.lessons[2].inputs[0].kind, LSN_IN_ANSWER);
    assert_string_equal(q.lessons[2].inputs[0].value, "433,888 tokens");
    assert_int_equal(q.lessons[2].inputs[1].kind, LSN_IN_FLAG);
    assert_string_equal(q.lessons[2].inputs[1].name, "max-model-len");
    assert_string_equal(q.lessons[2].inputs[1].value, "8192");
    assert_int_equal(q.lessons[2].inputs[2].kind, LSN_IN_REVEAL);
    assert_int_equal(q.lessons[2].inputs[2].wait, 3);

    /* going back drops what was fed from that step on */
    lsn_progress_truncate(&q, 2, 2);
    assert_int_equal(q.lessons[2].ninputs, 1);
    lsn_progress_clear(&p);
    lsn_progress_clear(&q);
}

static void test_missing_file_is_fresh(void **state)
{
    (void)state;
    char path[512], notice[512];
    snprintf(path, sizeof path, "%s/none/progress.json", tmpdir);
    static lsn_progress p;
    lsn_progress_init(&p);
    assert_int_equal(lsn_progress_load(&p, path, notice, sizeof notice), 0);
    assert_int_equal(p.current, 0);
    assert_string_equal(notice, "");
}

static void check_corrupt(const char *text, const char *reason)
{
    char path[512], notice[512];
    snprintf(path, sizeof path, "%s/progress.json", tmpdir);
    write_file(path, text);
    int before = count_entries(tmpdir, "progress.json.corrupt-");
    static lsn_progress p;
    lsn_progress_init(&p);
    p.current = 5; /* must be cleared */
    assert_int_equal(lsn_progress_load(&p, path, notice, sizeof notice), 1);
    assert_int_equal(p.current, 0);
    assert_int_equal(p.lessons[1].step, 0);
    assert_non_null(strstr(notice, reason));
    assert_non_null(strstr(notice, "moved it to"));
    assert_non_null(strstr(notice, "starting fresh"));
    /* moved aside, not deleted, and the path is free for a fresh file */
    assert_int_equal(access(path, F_OK), -1);
    assert_true(count_entries(tmpdir, "progress.json.corrupt-") >= before);
    char err[256];
    assert_int_equal(lsn_progress_save(&p, path, err, sizeof err), 0);
    unlink(path);
    lsn_progress_clear(&p);
}

static void test_corrupt_files(void **state)
{
    (void)state;
    check_corrupt("{\"format_version\": 1, \"lessons\": {", "not valid JSON");
    check_corrupt("[1, 2, 3]", "not a JSON object");
    check_corrupt("{\"format_version\": 7}", "format_version 1");
    check_corrupt("{\"format_version\": 1, \"lessons\": {\"1\": {\"step\": \"three\"}}}", "wrong type");
    check_corrupt("{\"format_version\": 1, \"lessons\": {\"x\": {}}}", "malformed");
    check_corrupt("{\"format_version\": 1, \"lessons\": {\"1\": {\"inputs\": [{\"answer\": \"4\"}]}}}", "wait");
    /* values this program never writes: out of range, not whole, too long */
    check_corrupt("{\"format_version\": 1, \"lessons\": {\"1\": {\"step\": 1e300}}}", "step is out of range");
    check_corrupt("{\"format_version\": 1, \"lessons\": {\"1\": {\"step\": 2.5}}}", "step is out of range");
    check_corrupt("{\"format_version\": 1, \"lessons\": {\"1\": {\"step\": -1}}}", "step is out of range");
    check_corrupt("{\"format_version\": 1, \"current\": 500}", "not a lesson number");
    check_corrupt("{\"format_version\": 1, \"lessons\": {\"1\": {\"inputs\": [{\"wait\": 1e12, \"reveal\": true}]}}}",
                  "wait is out of range");
    check_corrupt("{\"format_version\": 1, \"accounting\": \"guess\"}", "not release or textbook");
    check_corrupt("{\"format_version\": 1, \"vllm_version\": 11}", "not a release");
    /* every bad file was kept, none overwrote another */
    assert_int_equal(count_entries(tmpdir, "progress.json.corrupt-"), 13);
}

/* A big value read back is refused, so nothing like 2147483647 is ever
 * written back; the largest value allowed round-trips unchanged. */
/* Golf scores (lab.score): the best is kept (fewer changes, then a lower
 * rank), survives a save and load, and a malformed score makes the file
 * corrupt, moved aside like any other. */
static void test_scores(void **state)
{
    (void)state;
    char path[512], notice[512], err[256];
    snprintf(path, sizeof path, "%s/progress.json", tmpdir);
    lsn_progress p;
    lsn_progress_init(&p);
    lsn_score a = {"challenge 1", 3, 5, "gpu + max-model-len", "another card"}, before;
    assert_int_equal(lsn_progress_score(&p, 21, &a, &before), 1);
    assert_string_equal(before.key, "");
    lsn_score worse = {"challenge 1", 4, 1, "quantization", "quality risked"};
    assert_int_equal(lsn_progress_score(&p, 21, &worse, &before), 0);
    assert_int_equal(before.changes, 3);
    lsn_score cheaper = {"challenge 1", 3, 2, "max-model-len", "context given up"};
    assert_int_equal(lsn_progress_score(&p, 21, &cheaper, &before), 1);
    lsn_score fewer = {"challenge 1", 1, 8, "gpu", "another card"};
    assert_int_equal(lsn_progress_score(&p, 21, &fewer, NULL), 1);
    lsn_score other = {"challenge 2", 2, 0, "a \"quoted\" lever", "nothing"};
    assert_int_equal(lsn_progress_score(&p, 21, &other, NULL), 1);
    lsn_score bad = {"", 1, 1, "", ""};
    assert_int_equal(lsn_progress_score(&p, 21, &bad, NULL), -1);
    assert_int_equal(lsn_progress_score(&p, 0, &fewer, NULL), -1);
    assert_int_equal(lsn_progress_save(&p, path, err, sizeof err), 0);
    lsn_progress_clear(&p);
    /* a restart: read back */
    lsn_progress q;
    lsn_progress_init(&q);
    assert_int_equal(lsn_progress_load(&q, path, notice, sizeof notice), 0);
    assert_int_equal(q.lessons[21].nscores, 2);
    assert_string_equal(q.lessons[21].scores[0].key, "challenge 1");
    assert_int_equal(q.lessons[21].scores[0].changes, 1);
    assert_int_equal(q.lessons[21].scores[0].rank, 8);
    assert_string_equal(q.lessons[21].scores[0].lever, "gpu");
    assert_string_equal(q.lessons[21].scores[1].lever, "a \"quoted\" lever");
    lsn_progress_clear(&q);
    /* malformed scores: the file is moved aside, progress starts empty */
    static const char *const broken[] = {
        "{\"format_version\": 1, \"lessons\": {\"21\": {\"scores\": [1]}}}",
        "{\"format_version\": 1, \"lessons\": {\"21\": {\"scores\": {\"c\": {\"changes\": -1, \"rank\": 1, "
        "\"lever\": \"x\", \"cost\": \"y\"}}}}}",
        "{\"format_version\": 1, \"lessons\": {\"21\": {\"scores\": {\"c\": {\"changes\": 1, \"rank\": 1000, "
        "\"lever\": \"x\", \"cost\": \"y\"}}}}}",
        "{\"format_version\": 1, \"lessons\": {\"21\": {\"scores\": {\"c\": {\"changes\": 1, \"rank\": 1}}}}}",
    };
    for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
        write_file(path, broken[i]);
        lsn_progress_init(&q);
        notice[0] = 0;
        assert_int_equal(lsn_progress_load(&q, path, notice, sizeof notice), 1);
        assert_non_null(strstr(notice, "score"));
        assert_int_equal(q.lessons[21].nscores, 0);
        lsn_progress_clear(&q);
    }
    assert_int_equal(count_entries(tmpdir, "progress.json.corrupt-"), (int)(sizeof broken / sizeof broken[0]));
}

static void test_range_round_trip(void **state)
{
    (void)state;
    char path[512], notice[512], err[256];
    snprintf(path, sizeof path, "%s/progress.json", tmpdir);
    write_file(path, "{\"format_version\": 1, \"current\": 99, \"lessons\": {\"99\": {\"step\": 100000, "
                     "\"inputs\": [{\"wait\": 100000, \"answer\": \"4\"}]}}}");
    static lsn_progress p;
    lsn_progress_init(&p);
    assert_int_equal(lsn_progress_load(&p, path, notice, sizeof notice), 0);
    assert_int_equal(p.current, 99);
    assert_int_equal(p.lessons[99].step, 100000);
    assert_int_equal(lsn_progress_save(&p, path, err, sizeof err), 0);
    FILE *f = fopen(path, "r");
    char buf[4096] = "";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    assert_null(strstr(buf, "2147483647"));
    assert_non_null(strstr(buf, "100000"));
    lsn_progress_clear(&p);
}

/* A killed save leaves "<path>.tmp-<pid>": the next load removes those of
 * dead processes and keeps those of live ones (a save may be under way). */
static void test_stale_temps(void **state)
{
    (void)state;
    char path[512], dead[600], live[600], own[600], other[600], notice[512];
    snprintf(path, sizeof path, "%s/progress.json", tmpdir);
    snprintf(dead, sizeof dead, "%s.tmp-2147483646", path); /* beyond any pid_max */
    snprintf(live, sizeof live, "%s.tmp-1", path);            /* init: always alive */
    snprintf(own, sizeof own, "%s.tmp-%ld", path, (long)getpid());
    snprintf(other, sizeof other, "%s/notes.tmp-2147483646", tmpdir);
    write_file(dead, "{");
    write_file(live, "{");
    write_file(own, "{");
    write_file(other, "{");
    static lsn_progress p;
    lsn_progress_init(&p);
    assert_int_equal(lsn_progress_load(&p, path, notice, sizeof notice), 0);
    assert_int_equal(access(dead, F_OK), -1);
    assert_int_equal(access(live, F_OK), 0);
    assert_int_equal(access(own, F_OK), 0);
    assert_int_equal(access(other, F_OK), 0);
}

/* Only regular files are read: a FIFO in the file's place is refused at
 * once (no waiting for a writer), a huge file is moved aside unread. */
static void test_special_files(void **state)
{
    (void)state;
    char path[512], notice[1024];
    snprintf(path, sizeof path, "%s/progress.json", tmpdir);
    assert_int_equal(mkfifo(path, 0600), 0);
    static lsn_progress p;
    lsn_progress_init(&p);
    assert_int_equal(lsn_progress_load(&p, path, notice, sizeof notice), -1);
    assert_non_null(strstr(notice, "pipe"));
    assert_non_null(strstr(notice, "will not be saved"));
    unlink(path);
    FILE *f = fopen(path, "w");
    for (int i = 0; i < (5 << 20) / 64; i++)
        fputs("                                                               \n", f);
    fclose(f);
    assert_int_equal(lsn_progress_load(&p, path, notice, sizeof notice), 1);
    assert_non_null(strstr(notice, "far too large"));
}

static void test_save_error(void **state)
{
    (void)state;
    char path[512], err[256];
    /* a folder where the file should be: saving fails with a message, nothing crashes */
    snprintf(path, sizeof path, "%s/isdir", tmpdir);
    mkdir(path, 0700);
    static lsn_progress p;
    lsn_progress_init(&p);
    assert_int_equal(lsn_progress_save(&p, path, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot save progress"));
}

/* Two kvlab processes of one user: each keeps the other's lessons. */
static void test_two_processes_merge(void **state)
{
    (void)state;
    char path[512], err[256], notice[512];
    snprintf(path, sizeof path, "%s/kvlab/progress.json", tmpdir);
    static lsn_progress a, b, q;
    lsn_progress_init(&a);
    lsn_progress_init(&b);
    lsn_progress_init(&q);
    assert_int_equal(lsn_progress_load(&a, path, notice, sizeof notice), 0);
    assert_int_equal(lsn_progress_load(&b, path, notice, sizeof notice), 0);
    a.lessons[1].step = 3;
    assert_int_equal(lsn_progress_add_input(&a, 1, 1, LSN_IN_ANSWER, NULL, "42"), 0);
    assert_int_equal(lsn_progress_save(&a, path, err, sizeof err), 0);
    b.lessons[2].step = 5;
    assert_int_equal(lsn_progress_save(&b, path, err, sizeof err), 0); /* used to erase a's lesson 1 */
    assert_int_equal(lsn_progress_load(&q, path, notice, sizeof notice), 0);
    assert_int_equal(q.lessons[1].step, 3);
    assert_int_equal(q.lessons[1].ninputs, 1);
    assert_string_equal(q.lessons[1].inputs[0].value, "42");
    assert_int_equal(q.lessons[2].step, 5);
    /* b brought lesson 1 up to date in its memory; a saving again keeps b's lesson 2 */
    assert_int_equal(b.lessons[1].step, 3);
    a.lessons[1].step = 4;
    assert_int_equal(lsn_progress_save(&a, path, err, sizeof err), 0);
    assert_int_equal(lsn_progress_load(&q, path, notice, sizeof notice), 0);
    assert_int_equal(q.lessons[1].step, 4);
    assert_int_equal(q.lessons[2].step, 5);

    /* both change lesson 3: the furthest step wins, done if either is, the best score of each challenge */
    a.lessons[3].step = 2;
    a.lessons[3].done = 1;
    lsn_score s1 = {.key = "challenge 1", .changes = 2, .rank = 1, .lever = "gpu", .cost = "a card"};
    lsn_score s2 = {.key = "challenge 1", .changes = 1, .rank = 3, .lever = "len", .cost = "context"};
    lsn_score s3 = {.key = "challenge 2", .changes = 1, .rank = 1, .lever = "fp8", .cost = "accuracy"};
    assert_int_equal(lsn_progress_score(&a, 3, &s1, NULL), 1);
    assert_int_equal(lsn_progress_score(&a, 3, &s3, NULL), 1);
    b.lessons[3].step = 6;
    assert_int_equal(lsn_progress_score(&b, 3, &s2, NULL), 1);
    assert_int_equal(lsn_progress_save(&a, path, err, sizeof err), 0);
    assert_int_equal(lsn_progress_save(&b, path, err, sizeof err), 0);
    assert_int_equal(lsn_progress_load(&q, path, notice, sizeof notice), 0);
    assert_int_equal(q.lessons[3].step, 6);
    assert_true(q.lessons[3].done);
    assert_int_equal(q.lessons[3].nscores, 2);
    for (int i = 0; i < 2; i++) {
        if (!strcmp(q.lessons[3].scores[i].key, "challenge 1"))
            assert_string_equal(q.lessons[3].scores[i].lever, "len"); /* 1 change beats 2 */
        else
            assert_string_equal(q.lessons[3].scores[i].lever, "fp8");
    }

    /* a reset only this process made is not undone by the merge */
    lsn_progress_truncate(&a, 1, 0);
    a.lessons[1].step = 0;
    assert_int_equal(lsn_progress_save(&a, path, err, sizeof err), 0);
    assert_int_equal(lsn_progress_load(&q, path, notice, sizeof notice), 0);
    assert_int_equal(q.lessons[1].step, 0);
    assert_int_equal(q.lessons[2].step, 5);
    lsn_progress_clear(&a);
    lsn_progress_clear(&b);
    lsn_progress_clear(&q);
}

/* Two real processes saving at once, each its own lesson, many times: the
 * lock makes every read-merge-write whole, so the last of each stays. */
static void test_two_processes_locked(void **state)
{
    (void)state;
    char path[512], err[256], notice[512];
    snprintf(path, sizeof path, "%s/progress.json", tmpdir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    int lesson = pid == 0 ? 2 : 1, bad = 0;
    static lsn_progress p;
    lsn_progress_init(&p);
    lsn_progress_load(&p, path, notice, sizeof notice);
    for (int step = 1; step <= 150; step++) {
        p.lessons[lesson].step = step;
        bad |= lsn_progress_save(&p, path, err, sizeof err) != 0;
    }
    lsn_progress_clear(&p);
    if (pid == 0)
        _exit(bad);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(bad, 0);
    assert_int_equal(lsn_progress_load(&p, path, notice, sizeof notice), 0);
    assert_int_equal(p.lessons[1].step, 150);
    assert_int_equal(p.lessons[2].step, 150);
    lsn_progress_clear(&p);
}

/* A symlinked progress.json is followed (the link stays a link); one that
 * points nowhere usable is refused, never replaced by a file. */
static void test_symlink(void **state)
{
    (void)state;
    char path[512], real[512], err[512], notice[512];
    snprintf(real, sizeof real, "%s/dotfiles", tmpdir);
    mkdir(real, 0700);
    snprintf(real, sizeof real, "%s/dotfiles/progress.json", tmpdir);
    snprintf(path, sizeof path, "%s/progress.json", tmpdir);
    assert_int_equal(symlink(real, path), 0);
    static lsn_progress p;
    lsn_progress_init(&p);
    p.lessons[4].step = 7;
    assert_int_equal(lsn_progress_save(&p, path, err, sizeof err), 0);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(lstat(real, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(lsn_progress_load(&p, path, notice, sizeof notice), 0);
    assert_int_equal(p.lessons[4].step, 7);
    /* a link into a folder that is gone */
    char dangling[512];
    snprintf(dangling, sizeof dangling, "%s/p2.json", tmpdir);
    assert_int_equal(symlink("/nonexistent-kvlab/x/progress.json", dangling), 0);
    assert_int_equal(lsn_progress_save(&p, dangling, err, sizeof err), -1);
    assert_non_null(strstr(err, "symlink"));
    assert_int_equal(lstat(dangling, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    lsn_progress_clear(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_rules),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_file_is_fresh, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_save_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scores, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_temps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_special_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_processes_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_two_processes_locked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
