/* app_term: opening and always restoring the terminal. The screen is
 * opened with newterm (initscr would exit on its own for an unknown TERM),
 * a terminal that cannot address the cursor is refused with one line, and
 * the terminal is restored even when the process dies of a signal it
 * cannot survive (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL): the handler
 * resets the tty from the modes saved before the screen opened, leaves the
 * alternate screen, shows the cursor and turns mouse reports off, then dies
 * of the signal as it would have. */
#ifndef APP_TERM_H
#define APP_TERM_H

#include <stddef.h>

/* Save the terminal's modes, open the screen on stdin/stdout, install the
 * crash handlers. Returns 0, or -1 with one line in err (TERM unset or
 * unknown, a terminal that cannot move the cursor such as TERM=dumb): the
 * caller prints it and exits 2. Nothing is left changed on failure. */
int app_term_open(char *err, size_t errlen);

/* endwin; the crash handlers go back to the defaults. */
void app_term_close(void);

#endif
