/* kvlab command-line commands. Each returns the process exit code:
 * 0 success (serve: the server would start), 1 a negative answer (serve: it
 * would not start; check: a lesson check failed), 2 bad input (one clear line
 * on stderr). main.c dispatches on argv[1]; argv here starts at the command
 * name (argv[0] = "serve", ...). */
#ifndef KVLAB_COMMANDS_H
#define KVLAB_COMMANDS_H

#include <stdio.h>

/* kvlab's usage text (tui/cli/usage.c): `kvlab --help` and the app's --help
 * print it; an unknown option gets one line pointing at it. */
void kvlab_usage(FILE *f);

int cmd_serve(int argc, char **argv);     /* tui/cli/cmd_serve.c */
int cmd_serve_vs(int argc, char **argv);  /* tui/cli/serve_vs.c: serve ... --vs ... */
int cmd_models(int argc, char **argv);    /* tui/cli/cmd_catalog.c */
int cmd_gpus(int argc, char **argv);      /* tui/cli/cmd_catalog.c */
int cmd_simulate(int argc, char **argv);  /* tui/cli/cmd_simulate.c */
int cmd_probe(int argc, char **argv);     /* tui/cli/cmd_probe.c */
int cmd_rooms(int argc, char **argv);     /* tui/cli/cmd_rooms.c */
int cmd_explain(int argc, char **argv);   /* tui/cli/cmd_explain.c */
int cmd_fit(int argc, char **argv);       /* tui/cli/cmd_fit.c */

#ifdef KVLAB_HAVE_LESSONS
int cmd_lessons(int argc, char **argv);   /* tui/cli/cmd_lessons.c */
int cmd_check(int argc, char **argv);     /* tui/cli/cmd_lessons.c */
#endif

#ifdef KVLAB_HAVE_TUI
/* The lesson app. argv is the full argv (app flags like --lesson N, --ascii). */
int app_main(int argc, char **argv);      /* tui/app/ */
#endif

#endif
