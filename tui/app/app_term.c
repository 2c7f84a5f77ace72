#include "app_term.h"

#include <curses.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <term.h>
#include <termios.h>
#include <unistd.h>

static SCREEN *g_screen;
static struct termios g_tio;      /* the modes before the screen opened */
static int g_tio_ok;
static char g_leave[256];         /* what puts the terminal back, as bytes to write */
static size_t g_leave_len;

static const int crash_signals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};

/* Only async-signal-safe calls: tcsetattr, write, sigaction, raise. */
static void on_crash(int sig)
{
    if (g_leave_len)
        (void)!write(STDOUT_FILENO, g_leave, g_leave_len);
    if (g_tio_ok)
        tcsetattr(STDIN_FILENO, TCSANOW, &g_tio);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    raise(sig);
}

/* A terminfo string capability, or NULL when absent. */
static const char *cap(const char *name)
{
    char *s = tigetstr(name);
    return s && s != (char *)-1 ? s : NULL;
}

static void leave_add(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n && g_leave_len + n < sizeof g_leave) {
        memcpy(g_leave + g_leave_len, s, n);
        g_leave_len += n;
    }
}

int app_term_open(char *err, size_t errlen)
{
    const char *term = getenv("TERM");
    if (!term || !term[0]) {
        snprintf(err, errlen, "TERM is not set: the lesson app needs to know the terminal (try TERM=xterm-256color)");
        return -1;
    }
    /* Look the terminal up first, writing nothing: refuse one we do not
     * know or that cannot address the cursor before touching the screen. */
    int errret = 0;
    if (setupterm(NULL, STDOUT_FILENO, &errret) != OK) {
        snprintf(err, errlen, "this terminal type is not known (TERM=%.64s): install its terminfo entry "
                 "(ncurses-term) or try TERM=xterm-256color", term);
        return -1;
    }
    int usable = cap("cup") && tigetflag("hc") <= 0;
    del_curterm(cur_term);
    cur_term = NULL;
    if (!usable) {
        snprintf(err, errlen, "this terminal (TERM=%.64s) cannot move the cursor, which the lesson app needs; "
                 "use a full terminal (kvlab check, serve and simulate work here)", term);
        return -1;
    }
    /* The app reads keys from stdin and draws on stdout: both must be the
     * terminal (kvlab < /dev/null would read end of input forever, and
     * kvlab > file would draw escape sequences into the file). */
    int in_tty = isatty(STDIN_FILENO), out_tty = isatty(STDOUT_FILENO);
    if (!in_tty || !out_tty) {
        snprintf(err, errlen, "the lesson app needs a terminal, and %s not one (%s); kvlab check, serve and "
                 "simulate work without one", !in_tty && !out_tty ? "stdin and stdout are" : !in_tty ? "stdin is"
                 : "stdout is", !in_tty ? "input from a file or a pipe" : "output redirected");
        return -1;
    }
    g_tio_ok = tcgetattr(STDIN_FILENO, &g_tio) == 0;
    g_screen = newterm(NULL, stdout, stdin);
    if (!g_screen) {
        snprintf(err, errlen, "cannot open the terminal (TERM=%.64s)", term);
        return -1;
    }
    set_term(g_screen);
    /* what endwin would send: attributes off, cursor shown, keypad and
     * mouse reports off, the alternate screen left */
    g_leave_len = 0;
    leave_add(cap("sgr0"));
    leave_add(cap("cnorm"));
    leave_add(cap("rmkx"));
    const char *kmous = cap("kmous");
    if (kmous && !strcmp(kmous, "\033[M"))
        leave_add("\033[?1000l");
    leave_add(cap("rmcup"));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        sigaction(crash_signals[i], &sa, NULL);
    return 0;
}

void app_term_close(void)
{
    if (!g_screen)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        sigaction(crash_signals[i], &sa, NULL);
    /* endwin only, as initscr's programs do: the screen (and the panel
     * library's own panel of it) stay until exit */
    endwin();
    g_screen = NULL;
    g_leave_len = 0;
}

int app_term_gone(void)
{
    struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN}, {.fd = STDOUT_FILENO, .events = POLLOUT}};
    if (poll(p, 2, 0) < 0)
        return 0;
    for (int i = 0; i < 2; i++)
        if (p[i].revents & (POLLHUP | POLLERR | POLLNVAL))
            return 1;
    return 0;
}

int app_term_readable(void)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

void app_term_keys(void)
{
    static const struct { const char *seq; int key; } seqs[] = {
        { "\033[1~", KEY_HOME }, { "\033[4~", KEY_END }, { "\033[7~", KEY_HOME }, { "\033[8~", KEY_END },
        { "\033[H", KEY_HOME },  { "\033[F", KEY_END },  { "\033OH", KEY_HOME },  { "\033OF", KEY_END },
    };
    for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++)
        if (key_defined(seqs[i].seq) == 0) /* unknown to terminfo; a code it has is mapped by app_term_key */
            define_key(seqs[i].seq, seqs[i].key);
}

int app_term_key(int ch)
{
    if (ch == KEY_FIND || ch == KEY_A1) return KEY_HOME;
    if (ch == KEY_SELECT || ch == KEY_C1) return KEY_END;
    return ch;
}
