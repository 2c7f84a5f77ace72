/* Following a lesson by state (classroom mode): a second runner re-derives
 * the first one's scene from (lesson, step, inputs, engine step) alone:
 * lsn_replay to the step (stopping inside an engine animation), then
 * lsn_tick_steps to the engine step, and lands on the same page, engine
 * figures and flags, without writing any progress; lsn_inputs gives what the
 * replay needs, and lsn_save_to starts saving only when asked. A late
 * joiner starts from the first runner's engine image instead of running
 * every engine step (lsn_engine_image / lsn_engine_load_image) and goes on
 * in step with it; an image it cannot take now or a damaged one is said. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "kv_engine.h"
#include "kv_snapshot.h"
#include "lsn.h"

static char dir[256], lessons[300], state_a[300], state_b[300], state_c[300];

static const char *manifest =
    "{\"format_version\": 1, \"chapters\": [{\"number\": 1, \"title\": \"Test\"}],\n"
    " \"lessons\": [\n"
    "  {\"number\": 1, \"chapter\": 1, \"file\": \"01-follow.lua\", \"title\": \"Follow\"}]}\n";

/* An animation (lab.step), traffic from the lesson's random stream, a
 * question, a flag change at a pause, autorun, and run_until. */
static const char *lesson1 =
    "return {\n"
    "  id = 1, title = \"Follow\", flags = { \"max-model-len\", \"gpu-memory-utilization\" },\n"
    "  run = function(lab)\n"
    "    assert(lab.start{ model = \"meta-llama/Llama-3.1-8B-Instruct\", gpu = \"h100-80gb\",\n"
    "                      [\"max-model-len\"] = 8192 })\n"
    "    lab.page(\"one\")\n"
    "    lab.speed(20)\n"
    "    lab.traffic{ rate = 40, prompt_tokens = { min = 100, max = 900 }, output_tokens = { min = 20, max = 80 } }\n"
    "    lab.step(60)\n"
    "    lab.say(\"after the first run\")\n"
    "    lab.pause()\n"
    "    local v = lab.ask{ prompt = \"2+2?\", answer = 4 }\n"
    "    lab.page(\"two\")\n"
    "    lab.say(\"answered %g\", v)\n"
    "    lab.pause()\n"
    "    lab.page(\"three\")\n"
    "    lab.step(80)\n"
    "    lab.run_until(function() return lab.metrics().step >= 200 end, 500)\n"
    "    lab.autorun(true)\n"
    "    lab.pause()\n"
    "    lab.page(\"four\")\n"
    "    lab.pause()\n"
    "  end,\n"
    "}\n";

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **st)
{
    (void)st;
    snprintf(dir, sizeof dir, "/tmp/kvlab-replay-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(lessons, sizeof lessons, "%s/lessons", dir);
    snprintf(state_a, sizeof state_a, "%s/a", dir);
    snprintf(state_b, sizeof state_b, "%s/b", dir);
    snprintf(state_c, sizeof state_c, "%s/c", dir);
    mkdir(lessons, 0700);
    char p[400];
    snprintf(p, sizeof p, "%s/manifest.json", lessons);
    write_file(p, manifest);
    snprintf(p, sizeof p, "%s/01-follow.lua", lessons);
    write_file(p, lesson1);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static lsn_runner *open_runner(const char *state)
{
    lsn_config cfg = {.lessons_dir = lessons, .assets_dir = KVLAB_SOURCE_DIR "/assets", .state_dir = state};
    char err[512];
    lsn_runner *r = lsn_new(&cfg, err, sizeof err);
    if (!r)
        fail_msg("lsn_new: %s", err);
    return r;
}

static int64_t engine_step(lsn_runner *r) { return lsn_engine_ticks(r); }

/* The two runners show the same thing. */
static void assert_same(lsn_runner *a, lsn_runner *b)
{
    assert_int_equal(lsn_current(a), lsn_current(b));
    assert_int_equal(lsn_step(a), lsn_step(b));
    assert_int_equal(lsn_get_state(a), lsn_get_state(b));
    assert_int_equal(lsn_page_number(a), lsn_page_number(b));
    assert_string_equal(lsn_page_title(a), lsn_page_title(b));
    assert_string_equal(lsn_text(a), lsn_text(b));
    kv_engine_info x, y;
    kv_engine_get_info(lsn_engine(a), &x);
    kv_engine_get_info(lsn_engine(b), &y);
    assert_int_equal(x.step, y.step);
    assert_int_equal(x.num_running, y.num_running);
    assert_int_equal(x.num_waiting, y.num_waiting);
    assert_int_equal(x.num_free_blocks, y.num_free_blocks);
    assert_int_equal(x.num_cached_blocks, y.num_cached_blocks);
    assert_int_equal(x.num_submitted, y.num_submitted);
    assert_true(x.clock_s == y.clock_s);
    assert_int_equal(lsn_flag_count(a), lsn_flag_count(b));
    for (int i = 0; i < lsn_flag_count(a); i++)
        assert_string_equal(lsn_flag_at(a, i)->value, lsn_flag_at(b, i)->value);
}

/* b follows a: replay to a's step with a's inputs, stopping inside an
 * animation, then run the engine to a's engine step. */
static void follow(lsn_runner *a, lsn_runner *b)
{
    int n;
    const lsn_input *in = lsn_inputs(a, &n);
    assert_int_equal(lsn_replay(b, lsn_current(a), lsn_step(a), in, n, 1), 0);
    int64_t ea = engine_step(a), eb = engine_step(b);
    assert_true(eb <= ea);
    lsn_tick_steps(b, ea - eb);
    assert_same(a, b);
}

static void test_follow_through_a_lesson(void **st)
{
    (void)st;
    lsn_runner *a = open_runner(state_a), *b = open_runner("");
    assert_int_equal(lsn_load(a, 1, 0), 0);
    /* In the middle of the first animation. */
    assert_int_equal(lsn_get_state(a), LSN_RUNNING);
    lsn_tick(a, 0.5); /* 10 of the 60 steps */
    assert_true(engine_step(a) > 0 && engine_step(a) < 60);
    follow(a, b);
    assert_int_equal(lsn_get_state(b), LSN_RUNNING);
    /* The animation goes on in both, step by step. */
    for (int i = 0; i < 5; i++) {
        int64_t before = engine_step(a);
        lsn_tick(a, 0.3);
        lsn_tick_steps(b, engine_step(a) - before);
        assert_same(a, b);
    }
    /* n finishes it, n again to the question; the question answered. */
    lsn_next(a);
    assert_int_equal(lsn_get_state(a), LSN_WAIT_NEXT);
    follow(a, b);
    lsn_next(a);
    assert_int_equal(lsn_get_state(a), LSN_WAIT_ANSWER);
    lsn_verdict v;
    lsn_answer(a, "5", &v);
    assert_int_equal(v.kind, LSN_V_WRONG);
    lsn_answer(a, "4", &v);
    assert_int_equal(v.kind, LSN_V_CORRECT);
    assert_string_equal(lsn_page_title(a), "two");
    /* A flag changed at the pause (the server restarts). */
    char err[256];
    assert_true(lsn_set_flag(a, "max-model-len", "4096", err, sizeof err) != 0);
    follow(a, b);
    assert_string_equal(lsn_page_title(b), "two");
    int n;
    const lsn_input *in = lsn_inputs(a, &n);
    assert_int_equal(n, 2); /* the right answer and the flag; a wrong try is not an input */
    assert_int_equal(in[0].kind, LSN_IN_ANSWER);
    assert_int_equal(in[1].kind, LSN_IN_FLAG);
    /* Page three: lab.step then run_until, then autorun at the pause. */
    lsn_next(a);
    lsn_tick(a, 1.0);
    follow(a, b);
    for (int i = 0; i < 40 && lsn_get_state(a) == LSN_RUNNING; i++) {
        int64_t before = engine_step(a);
        lsn_tick(a, 0.25);
        lsn_tick_steps(b, engine_step(a) - before);
    }
    assert_int_equal(lsn_get_state(a), LSN_WAIT_NEXT);
    assert_same(a, b);
    /* autorun keeps the engine going at the pause; b catches up by steps. */
    int64_t before = engine_step(a);
    lsn_tick(a, 0.5);
    assert_true(engine_step(a) > before);
    lsn_tick_steps(b, engine_step(a) - engine_step(b));
    assert_same(a, b);
    /* A late joiner gets there in one go. */
    lsn_runner *c = open_runner("");
    follow(a, c);
    lsn_free(c);
    lsn_free(a);
    lsn_free(b);
}

/* Replaying never writes progress; lsn_save_to starts saving there. */
static void test_no_progress_until_saved(void **st)
{
    (void)st;
    lsn_runner *a = open_runner(state_a);
    lsn_load(a, 1, 0);
    lsn_next(a);
    lsn_next(a);
    lsn_verdict v;
    lsn_answer(a, "4", &v);
    assert_int_equal(v.kind, LSN_V_CORRECT);
    int n;
    const lsn_input *in = lsn_inputs(a, &n);
    lsn_runner *b = open_runner(state_b);
    assert_int_equal(lsn_replay(b, 1, lsn_step(a), in, n, 0), 0);
    assert_string_equal(lsn_page_title(b), "two");
    char p[400];
    struct stat sst;
    snprintf(p, sizeof p, "%s/progress.json", state_b);
    assert_int_equal(stat(p, &sst), -1); /* nothing written */
    /* The follower breaks away: from now on it keeps its own progress. */
    char err[256];
    assert_int_equal(lsn_save_to(b, state_c, err, sizeof err), 0);
    lsn_next(b);
    /* It rejoins: saving stops again (the page it moves on to is not kept). */
    assert_int_equal(lsn_save_to(b, "", err, sizeof err), 0);
    lsn_tick_steps(b, 1000);
    lsn_next(b);
    assert_string_equal(lsn_page_title(b), "four");
    lsn_free(b);
    snprintf(p, sizeof p, "%s/progress.json", state_c);
    assert_int_equal(stat(p, &sst), 0);
    /* What was saved resumes where b was. */
    lsn_runner *c = open_runner(state_c);
    assert_int_equal(lsn_load(c, 1, 1), 0);
    assert_int_equal(lsn_step(c), lsn_step(a) + 1);
    assert_string_equal(lsn_page_title(c), "three");
    lsn_free(c);
    lsn_free(a);
}

/* a at page three's autorun pause after `ticks` more engine steps there. */
static lsn_runner *runner_in_autorun(int64_t ticks)
{
    lsn_runner *a = open_runner("");
    assert_int_equal(lsn_load(a, 1, 0), 0);
    lsn_next(a);
    lsn_next(a);
    lsn_verdict v;
    lsn_answer(a, "4", &v);
    assert_int_equal(v.kind, LSN_V_CORRECT);
    lsn_next(a);
    for (int i = 0; i < 400 && lsn_get_state(a) == LSN_RUNNING; i++)
        lsn_tick_steps(a, 10);
    assert_int_equal(lsn_get_state(a), LSN_WAIT_NEXT);
    lsn_tick_steps(a, ticks);
    return a;
}

static void test_join_from_image(void **st)
{
    (void)st;
    /* Far enough in that the traffic is past its first chunk of 1,024
     * requests (a follower whose generator started over would differ). */
    lsn_runner *a = runner_in_autorun(6000);
    kv_engine_info ia;
    kv_engine_get_info(lsn_engine(a), &ia);
    assert_true(ia.num_submitted > 1100);
    kv_snapshot img;
    kv_snapshot_init(&img);
    char err[256];
    assert_int_equal(lsn_engine_image(a, &img, err, sizeof err), 0);
    /* b replays the lesson to a's step (it stops inside page three's
     * lab.step, which the load runs on to its end, then lab.run_until),
     * then takes the image instead of running 6,000 engine steps. */
    lsn_runner *b = open_runner("");
    int n;
    const lsn_input *in = lsn_inputs(a, &n);
    assert_int_equal(lsn_replay(b, lsn_current(a), lsn_step(a), in, n, 1), 0);
    assert_true(engine_step(b) < engine_step(a));
    unsigned ch = 0;
    /* (a debug build reads every step's K/V back: the image brings none,
     * so the load must stop that, else b's lesson stops on "K/V values
     * differ"; the sanitizer build runs this test that way) */
    assert_int_equal(lsn_engine_load_image(b, img.data, img.len, &ch, err, sizeof err), 0);
    assert_true(ch & LSN_CH_ENGINE);
    assert_int_equal(engine_step(b), engine_step(a));
    assert_same(a, b);
    /* Both go on in step: the traffic goes on from the same request. */
    lsn_tick_steps(a, 2500);
    lsn_tick_steps(b, 2500);
    assert_same(a, b);
    /* An image behind this engine, or a runner whose engine stands still
     * (the question, autorun off): 1, nothing changed. */
    assert_int_equal(lsn_engine_load_image(b, img.data, img.len, &ch, err, sizeof err), 1);
    assert_int_equal(engine_step(b), engine_step(a));
    lsn_runner *c = open_runner("");
    assert_int_equal(lsn_replay(c, 1, 1, NULL, 0, 1), 0);
    assert_false(lsn_engine_runs(c)); /* the question: the engine stands still */
    int64_t c0 = engine_step(c);
    assert_int_equal(lsn_engine_load_image(c, img.data, img.len, &ch, err, sizeof err), 1);
    assert_int_equal(engine_step(c), c0);
    lsn_free(c);
    /* Damaged images are refused with a reason. */
    lsn_runner *d = open_runner("");
    assert_int_equal(lsn_replay(d, lsn_current(a), lsn_step(a), in, n, 1), 0);
    err[0] = '\0';
    assert_int_equal(lsn_engine_load_image(d, img.data, 10, &ch, err, sizeof err), -1);
    assert_true(err[0] != '\0');
    img.data[0] ^= 0xff; /* not our magic */
    err[0] = '\0';
    assert_int_equal(lsn_engine_load_image(d, img.data, img.len, &ch, err, sizeof err), -1);
    assert_true(err[0] != '\0');
    img.data[0] ^= 0xff;
    err[0] = '\0';
    assert_int_equal(lsn_engine_load_image(d, img.data, img.len - 40, &ch, err, sizeof err), -1); /* cut short */
    assert_true(err[0] != '\0');
    lsn_free(d);
    kv_snapshot_free(&img);
    lsn_free(a);
    lsn_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_follow_through_a_lesson),
        cmocka_unit_test(test_no_progress_until_saved),
        cmocka_unit_test(test_join_from_image),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
