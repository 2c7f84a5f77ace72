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
            kvlab_usage(stdout);
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
    if (argc < 2)
        fprintf(stderr, "kvlab: this build has no lesson app; give a command (try kvlab --help)\n");
    else
        fprintf(stderr, "kvlab: unknown option '%s' (try kvlab --help)\n", argv[1]);
    return 2;
#endif
}
