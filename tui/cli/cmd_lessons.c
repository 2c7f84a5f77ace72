/* `kvlab check [N ...]` and `kvlab lessons`: the lesson runner from the
 * command line (tui/cli/commands.h). Built wherever the lesson runtime is
 * (lessons/host/, Lua), with or without the ncurses app. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "lsn.h"
#include "lsn_course.h"
#include "paths.h"
#ifdef KVLAB_HAVE_TUI
#include "ui_fit.h" /* the page rule: what a page points at is on screen */
#endif

#ifdef KVLAB_HAVE_TUI
/* lsn_page_rule for kvlab check (lsn_check_set_page_rule): ui_fit_page_at
 * at every size of ui_fit_sizes, on r's scene, engine and plan. Here, on
 * the check's side, so the app's ui_* files query no runner or engine
 * (docs/DESIGN.md). ctx: a kv_frame made with kv_frame_init, reused
 * between pages. */
static int fit_rule(lsn_runner *r, void *ctx, char *msg, size_t msglen)
{
    kv_frame *f = ctx;
    const lsn_scene *s = lsn_scene_get(r);
    char err[160];
    if (kv_frame_capture(f, lsn_engine(r), lsn_plan(r), NULL, err, sizeof err) != 0) {
        snprintf(msg, msglen, "could not capture the engine: %s", err);
        return -1;
    }
    for (int i = 0; i < UI_FIT_NSIZES; i++)
        if (ui_fit_page_at(s, f, ui_fit_sizes[i][0], ui_fit_sizes[i][1], msg, msglen) < 0) return -1;
    return 0;
}
#endif

static void check_usage(FILE *f)
{
    fprintf(f, "usage: kvlab check [N ...] [--vllm-version V] [--accounting textbook] [--lessons DIR]\n"
               "                   [--seconds S] [-v]\n"
               "  runs lessons headless with their scripted answers (all written lessons when no N);\n"
               "  every lesson's server follows vLLM release V (default the newest), or the textbook\n"
               "  arithmetic with --accounting textbook (the set CI checks, each with its golden\n"
               "  transcripts: tests/golden/lessons/RELEASES, 0.8.5 0.11.0 0.19.0 0.33.0 and textbook);\n"
               "  every question must refuse its wrong answers and accept its script; every goal\n"
               "  must be reached by its scripted flag changes; every view a page focuses or highlights\n"
               "  must be on screen whole at 80x24, 100x30, 140x45 and 200x50. Exit 0 when all pass, 1 otherwise,\n"
               "  2 for a number the course does not have.\n"
               "  --seconds S: wall time one call into a lesson may take (default 3, as in the app); the\n"
               "  other limits (instructions, memory) do not depend on how busy the machine is.\n"
               "  -v also shows each page's text and what lessons print(). KVLAB_LESSONS_DIR also sets the folder.\n");
}

int cmd_check(int argc, char **argv)
{
    const char *dir = NULL, *version = NULL, *accounting = NULL;
    int verbose = 0;
    double seconds = 0;
    int nums[128], n = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            check_usage(stdout);
            return 0;
        } else if ((!strcmp(a, "--vllm-version") || !strcmp(a, "--accounting")) && i + 1 >= argc) {
            fprintf(stderr, "kvlab check: %s needs a value (see kvlab check --help)\n", a);
            return 2;
        } else if (!strcmp(a, "--vllm-version")) {
            version = argv[++i];
        } else if (!strncmp(a, "--vllm-version=", 15)) {
            version = a + 15;
        } else if (!strcmp(a, "--accounting")) {
            accounting = argv[++i];
        } else if (!strncmp(a, "--accounting=", 13)) {
            accounting = a + 13;
        } else if (!strcmp(a, "--lessons") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strncmp(a, "--lessons=", 10)) {
            dir = a + 10;
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            verbose = 1;
        } else if (!strcmp(a, "--seconds") || !strncmp(a, "--seconds=", 10)) {
            const char *v = a[9] == '=' ? a + 10 : i + 1 < argc ? argv[++i] : "";
            char *end;
            seconds = strtod(v, &end);
            if (!*v || *end || !(seconds > 0 && seconds <= 3600)) {
                fprintf(stderr, "kvlab check: --seconds wants a number of seconds in (0, 3600], not '%s'\n", v);
                return 2;
            }
        } else {
            char *end;
            long v = strtol(a, &end, 10);
            if (*end || v < 1 || v > 99 || n == 128) {
                fprintf(stderr, "kvlab check: '%s' is not a lesson number (see kvlab check --help)\n", a);
                return 2;
            }
            nums[n++] = (int)v;
        }
    }
    char err[1024];
    dir = kvlab_lessons_dir_for(dir);
    lsn_config cfg = {.lessons_dir = dir, .assets_dir = kvlab_assets_dir(), .state_dir = "", .headless = 1,
                      .verbose = verbose, .limits = {.seconds = seconds}, .vllm_version = version,
                      .accounting = accounting};
    lsn_runner *r = lsn_new(&cfg, err, sizeof err);
    if (!r) {
        fprintf(stderr, "kvlab check: %s\n", err);
        return 2;
    }
    /* A number the course does not have is bad input (exit 2, one line),
     * told before any lesson runs; a listed lesson whose file is missing is
     * the course's failure (exit 1, below). */
    for (int i = 0; i < n; i++) {
        if (!lsn_info_of(r, nums[i])) {
            int c = lsn_count(r);
            if (c > 0)
                fprintf(stderr, "kvlab check: no lesson %d: the course has lessons %d to %d\n", nums[i],
                        lsn_info_at(r, 0)->number, lsn_info_at(r, c - 1)->number);
            else
                fprintf(stderr, "kvlab check: no lesson %d: the course in %s has no lessons\n", nums[i], dir);
            lsn_free(r);
            return 2;
        }
    }
    int failed = 0, passed = 0, skipped = 0;
    if (n == 0) {
        for (int i = 0; i < lsn_count(r); i++) {
            const lsn_info *l = lsn_info_at(r, i);
            if (l->available)
                nums[n++] = l->number;
            else
                skipped++;
        }
        /* The whole course also means: no stray lesson files. */
        lsn_course c;
        if (lsn_course_load(&c, dir, err, sizeof err) == 0) {
            char report[4096];
            if (lsn_course_unlisted(&c, report, sizeof report) > 0) {
                fputs(report, stdout);
                failed++;
            }
            lsn_course_free(&c);
        }
    }
#ifdef KVLAB_HAVE_TUI
    static kv_frame fit_frame;
    kv_frame_init(&fit_frame);
    lsn_check_set_page_rule(r, fit_rule, &fit_frame);
#endif
    for (int i = 0; i < n; i++) {
        const lsn_info *l = lsn_info_of(r, nums[i]);
        if (!l->available) {
            printf("FAIL lesson %d (%s): %s is missing\n", l->number, l->title, l->file);
            failed++;
            continue;
        }
        if (lsn_check(r, nums[i], stdout) == 0)
            passed++;
        else
            failed++;
        fflush(stdout);
    }
    printf("kvlab check: %d passed, %d failed", passed, failed);
    if (strcmp(lsn_release_accounting(r), "textbook"))
        printf(" under vLLM %s", lsn_release_version(r));
    else
        printf(" under the textbook accounting");
    if (skipped)
        printf(" (%d lesson%s not written yet)", skipped, skipped == 1 ? "" : "s");
    printf("\n");
    lsn_free(r);
#ifdef KVLAB_HAVE_TUI
    kv_frame_free(&fit_frame);
#endif
    return failed ? 1 : 0;
}

int cmd_lessons(int argc, char **argv)
{
    const char *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--lessons") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: kvlab lessons [--lessons DIR]\n  lists the course with your progress\n");
            return 0;
        } else {
            fprintf(stderr, "kvlab lessons: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    char err[1024];
    lsn_config cfg = {.lessons_dir = kvlab_lessons_dir_for(dir), .assets_dir = kvlab_assets_dir(), .headless = 1};
    lsn_runner *r = lsn_new(&cfg, err, sizeof err);
    if (!r) {
        fprintf(stderr, "kvlab lessons: %s\n", err);
        return 2;
    }
    if (lsn_notice(r))
        fprintf(stderr, "kvlab: %s\n", lsn_notice(r));
    int chapter = 0, done = 0, avail = 0;
    int resume = lsn_resume_lesson(r);
    for (int i = 0; i < lsn_count(r); i++) {
        const lsn_info *l = lsn_info_at(r, i);
        if (l->chapter != chapter) {
            chapter = l->chapter;
            printf("%s%d. %s\n", i ? "\n" : "", chapter, l->chapter_title);
        }
        char status[64];
        if (!l->available)
            snprintf(status, sizeof status, "not written yet");
        else if (l->done)
            snprintf(status, sizeof status, "done");
        else if (l->step > 0)
            snprintf(status, sizeof status, "at step %d", l->step);
        else
            snprintf(status, sizeof status, "-");
        done += l->done;
        avail += l->available;
        printf(" %c%2d  %-44s %s\n", l->number == resume ? '>' : ' ', l->number, l->title, status);
        const lsn_score *sc;
        int nsc = lsn_scores(r, l->number, &sc);
        for (int k = 0; k < nsc; k++) { /* golf: the best way each challenge was solved */
            char rank[48] = "";
            if (sc[k].rank > 0)
                snprintf(rank, sizeof rank, "#%d on the cheapest-first list: ", sc[k].rank);
            printf("       %s: best %d change%s, %s (%s%s)\n", sc[k].key, sc[k].changes, sc[k].changes == 1 ? "" : "s",
                   sc[k].lever, rank, sc[k].cost);
        }
    }
    printf("\n%d of %d lessons done (%d written). `kvlab` resumes at lesson %d; `kvlab --lesson N` opens another.\n",
           done, lsn_count(r), avail, resume);
    lsn_free(r);
    return 0;
}
