/* kvlab: CLI dispatch. With no command (or only app flags) it opens the
 * lesson app; otherwise it runs one command and exits with its code. */
#include <errno.h>
#include <locale.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"

#ifndef KVLAB_VERSION
#define KVLAB_VERSION "0.0.0"
#endif

static void usage(FILE *f)
{
    fprintf(f,
        "usage: kvlab [--lesson N] [--lessons DIR] [--ascii] [--no-color] [--fps N]\n"
        "             [--vllm-version V] [--accounting textbook]\n"
        "                                 the lesson app (resumes where you left off), following\n"
        "                                 vLLM release V (default the newest; remembered)\n"
        "       kvlab --log FILE           the app on a vLLM log: memory bar, start-up log and flags\n"
        "                                 beside what the log says (kvlab explain in the app)\n"
        "       kvlab --present [ROOM] [--allow-group GROUP] | --follow [ROOM]\n"
        "                                 teach a class: present the app to a room, or follow one\n"
        "       kvlab serve MODEL [vLLM flags] [--gpu NAME] [--json]\n"
        "                                 will this `vllm serve` start, and with how many KV tokens?\n"
        "       kvlab simulate MODEL --trace FILE|gen:... [vLLM flags] [--gpu NAME] [--json] [--metrics]\n"
        "                                 run the engine on a request trace, headless\n"
        "       kvlab explain [FILE|-] [--json] [--model NAME] [--gpu NAME] [vLLM flags]\n"
        "                                 read a vLLM log: what it states beside kvlab's plan, and why\n"
        "       kvlab fit MODEL [--context N] [--concurrency C] [--gpus LIST] [--tp LIST] [--json]\n"
        "                                 which cards and tensor-parallel sizes serve this workload\n"
        "       kvlab models | gpus | lessons\n"
        "       kvlab check [N ...] [--vllm-version V]\n"
        "                                 run lessons headless; non-zero exit on a failed check\n"
        "       kvlab probe                what the CUDA backend measures on this machine\n"
        "       kvlab rooms                classroom rooms on this machine (who presents, who may join)\n"
        "       kvlab --version | --help\n");
}

/* The locale lessons run under, the same in the app and in kvlab check (so
 * the check sees what the app would): the user's character set (LC_CTYPE:
 * UTF-8 glyphs, what Lua's patterns call a letter), but string order and
 * numbers as in C. Under en_US.UTF-8, strcoll (Lua's `<` on strings) takes
 * about a second per 64 MB and cannot be interrupted; in C it is strcmp.
 * A decimal comma would change every number a lesson formats. */
static void lesson_locale(void)
{
    setlocale(LC_ALL, "");
    setlocale(LC_COLLATE, "C");
    setlocale(LC_NUMERIC, "C");
}

static int run_command(int argc, char **argv);

/* A command's output that could not be written (a full disk, /dev/full, a
 * closed pipe's EIO) is a failure, not exit 0: say so once. */
static int finish_output(int rc)
{
    int bad = fflush(stdout) != 0 || ferror(stdout);
    int e = errno;
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    if (bad) {
        fprintf(stderr, "kvlab: could not write the output: %s\n", strerror(e ? e : EIO));
        return rc ? rc : 1;
    }
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && argv[1][0] != '-')
        return finish_output(run_command(argc, argv));
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")))
        return finish_output(run_command(argc, argv));
    return run_command(argc, argv);
}

static int run_command(int argc, char **argv)
{
    if (argc >= 2) {
        const char *c = argv[1];
        if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(c, "serve"))    return cmd_serve(argc - 1, argv + 1);
        if (!strcmp(c, "models"))   return cmd_models(argc - 1, argv + 1);
        if (!strcmp(c, "gpus"))     return cmd_gpus(argc - 1, argv + 1);
        if (!strcmp(c, "simulate")) return cmd_simulate(argc - 1, argv + 1);
        if (!strcmp(c, "probe"))    return cmd_probe(argc - 1, argv + 1);
        if (!strcmp(c, "rooms"))    return cmd_rooms(argc - 1, argv + 1);
        if (!strcmp(c, "explain"))  return cmd_explain(argc - 1, argv + 1);
        if (!strcmp(c, "fit"))      return cmd_fit(argc - 1, argv + 1);
#ifdef KVLAB_HAVE_LESSONS
        if (!strcmp(c, "lessons"))  return lesson_locale(), cmd_lessons(argc - 1, argv + 1);
        if (!strcmp(c, "check"))    return lesson_locale(), cmd_check(argc - 1, argv + 1);
#else
        if (!strcmp(c, "lessons") || !strcmp(c, "check")) {
            fprintf(stderr, "kvlab: this build has no lesson runtime (Lua 5.4 was not found at configure time)\n");
            return 2;
        }
#endif
        if (c[0] != '-') {
            fprintf(stderr, "kvlab: unknown command '%s' (try kvlab --help)\n", c);
            return 2;
        }
    }
#ifdef KVLAB_HAVE_TUI
    lesson_locale();
    return app_main(argc, argv);
#else
    if (argc >= 2 && !strcmp(argv[1], "--version")) {
        printf("kvlab %s (no lesson app in this build)\n", KVLAB_VERSION);
        return 0;
    }
    usage(stderr);
    return 2;
#endif
}
