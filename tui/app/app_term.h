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
 * unknown, a terminal that cannot move the cursor such as TERM=dumb, stdin
 * or stdout not a terminal): the caller prints it and exits 2. Nothing is
 * left changed on failure. */
int app_term_open(char *err, size_t errlen);

/* The terminal is gone: stdin or stdout hung up or in error (a pty whose
 * other end closed, a terminal gone without SIGHUP after setsid or nohup).
 * Does not block. */
int app_term_gone(void);

/* stdin has input (or end of input) waiting. Does not block. */
int app_term_readable(void);

/* Home and End in every common encoding (after keypad): ESC [ 1 ~ and
 * ESC [ 4 ~ (tmux, screen, PuTTY, the Linux console), ESC [ 7 ~ / 8 ~
 * (rxvt), ESC [ H / F and ESC O H / F (xterm's normal and application
 * cursor modes) are defined as KEY_HOME / KEY_END where the terminfo entry
 * lacks them. */
void app_term_keys(void);

/* The key as the app handles it: what terminfo names "find" / "select" or
 * the keypad's upper left / lower left (ESC [ 1 ~ and ESC [ 4 ~ under
 * TERM=xterm, ka1 / kc1) is Home / End; any other key as it is. */
int app_term_key(int ch);

/* endwin; the crash handlers go back to the defaults. */
void app_term_close(void);

#endif
