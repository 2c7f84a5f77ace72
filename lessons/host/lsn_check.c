/* lsn_check: `kvlab check`, the runner driven headless. Every question is
 * given wrong answers (each must be refused) and then its script (must be
 * accepted); every goal must not hold before its scripted flag changes and
 * must hold after them. One line per question and goal goes to the log. */
#include <stdarg.h>
#include <string.h>
#include <time.h>

#include "lsn_runner_int.h"

static void check_fail(lsn_runner *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void check_fail(lsn_runner *r, const char *fmt, ...)
{
    char tmp[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    r->chk.failed = 1;
    lsn_run_logf(r, "  FAIL %s\n", tmp);
}

/* The first line of s, at most 90 bytes, for the log. */
static void one_line(const char *s, char *out, size_t outl)
{
    snprintf(out, outl, "%.90s", s ? s : "");
    for (char *p = out; *p; p++)
        if (*p == '\n')
            *p = ' ';
}

void lsn_check_question(lsn_runner *r)
{
    lsn_ask *q = &r->q;
    int nq = ++r->chk.n_questions;
    char prompt[96];
    one_line(q->prompt, prompt, sizeof prompt);
    /* Wrong answers: the lesson's, every near-miss, ten times the answer,
     * every wrong choice. Each must be refused. */
    int nw = 0;
    char wrong[64][128];
    for (int i = 0; i < q->nwrong && nw < 64; i++)
        snprintf(wrong[nw++], sizeof wrong[0], "%s", q->wrong[i]);
    if (q->nchoices) {
        for (int i = 1; i <= q->nchoices && nw < 64; i++)
            if (i != q->correct)
                snprintf(wrong[nw++], sizeof wrong[0], "%d", i);
    } else {
        for (int i = 0; i < q->nnear && nw < 64; i++)
            lsn_answer_format(q->near[i].value, q->unit, wrong[nw++], sizeof wrong[0]);
        /* a check that takes half, double or ten times the answer is too lax */
        static const double factors[] = {0.5, 2, 10};
        for (int i = 0; i < 3 && q->answer != 0 && nw < 64; i++)
            lsn_answer_format(q->answer * factors[i], q->unit, wrong[nw++], sizeof wrong[0]);
    }
    char script[256];
    if (q->script)
        snprintf(script, sizeof script, "%s", q->script);
    else if (q->nchoices)
        snprintf(script, sizeof script, "%c", 'a' + q->correct - 1);
    else
        lsn_answer_format(q->answer, q->unit, script, sizeof script);
    lsn_run_logf(r, "  question %d: %s\n", nq, prompt);
    for (int i = 0; i < nw; i++) {
        lsn_verdict v;
        lsn_answer(r, wrong[i], &v);
        if (v.kind == LSN_V_CORRECT) {
            check_fail(r, "question %d (\"%s\") accepted the wrong answer '%s'", nq, prompt, wrong[i]);
            return;
        }
        lsn_run_logf(r, "    refused '%s': %s\n", wrong[i], v.message);
    }
    lsn_verdict v;
    lsn_answer(r, script, &v);
    if (v.kind != LSN_V_CORRECT) {
        check_fail(r, "question %d (\"%s\") refused the scripted answer '%s': %s", nq, prompt, script, v.message);
        return;
    }
    lsn_run_logf(r, "    accepted '%s'\n", script);
}

void lsn_check_goal(lsn_runner *r)
{
    lsn_goal_spec *g = &r->g;
    int ng = ++r->chk.n_goals;
    char text[96];
    one_line(g->text, text, sizeof text);
    lsn_run_logf(r, "  goal %d: %s\n", ng, text);
    int v = lsn_vm_test(r->vm, LSN_FN_GOAL);
    if (v < 0) {
        lsn_run_error(r, "%s", lsn_vm_error(r->vm));
        return;
    }
    if (v) {
        check_fail(r, "goal %d (\"%s\") already holds before any flag change", ng, text);
        return;
    }
    if (g->nscript == 0) {
        check_fail(r, "goal %d (\"%s\") has no script for kvlab check", ng, text);
        return;
    }
    int n = g->nscript;
    char **names = g->script_names, **values = g->script_values;
    int64_t steps = g->steps;
    for (int i = 0; i < n && r->pace.wait == W_GOAL; i++) {
        char err[512];
        if (!lsn_set_flag(r, names[i], values[i], err, sizeof err)) {
            check_fail(r, "goal %d: the scripted change --%s %s was refused: %s", ng, names[i], values[i], err);
            return;
        }
        if (r->pace.wait != W_GOAL)
            return;
        lsn_run_logf(r, "    set --%s %s%s%s\n", names[i], values[i], r->srv.has_err ? ": " : "",
                     r->srv.has_err ? r->srv.err : "");
        for (int64_t k = 0; k < steps && !g->met && r->pace.wait == W_GOAL; k++) {
            if (lsn_run_engine_step(r) < 0)
                return;
            if (k % 8 == 7 || k == steps - 1)
                lsn_run_check_goal(r);
        }
        if (g->met) {
            lsn_run_logf(r, "    reached after %d change%s\n", i + 1, i ? "s" : "");
            lsn_run_finish_goal(r);
            return;
        }
    }
    if (r->pace.wait == W_GOAL)
        check_fail(r, "goal %d (\"%s\") not reached after its scripted changes", ng, text);
}

int lsn_check(lsn_runner *r, int number, FILE *log)
{
    FILE *old = r->chk.log;
    r->chk.log = log;
    r->chk.on = 1;
    r->chk.failed = 0;
    r->chk.n_questions = r->chk.n_goals = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const lsn_info *info = lsn_info_of(r, number);
    lsn_run_logf(r, "lesson %d: %s\n", number, info ? info->title : "?");
    int starts0 = lsn_server_starts(r->srv.server);
    lsn_load(r, number, 0);
    lsn_run_drive(r, 1 << 30);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    int ok = 0;
    if (r->pace.wait == W_ERROR) {
        lsn_run_logf(r, "  ERROR %s\n", r->error.s ? r->error.s : "");
    } else if (r->chk.failed) {
        /* logged already */
    } else if (r->pace.wait != W_DONE) {
        lsn_run_logf(r, "  FAIL the lesson stopped while %s\n", lsn_state_name(lsn_get_state(r)));
    } else {
        ok = 1;
    }
    int starts = lsn_server_starts(r->srv.server) - starts0;
    lsn_run_logf(r, "%s lesson %d (%d steps, %d question%s, %d goal%s, %d server start%s, %.2f s)\n",
                 ok ? "PASS" : "FAIL", number, r->pace.step, r->chk.n_questions, r->chk.n_questions == 1 ? "" : "s",
                 r->chk.n_goals, r->chk.n_goals == 1 ? "" : "s", starts, starts == 1 ? "" : "s", secs);
    lsn_run_unload(r);
    r->chk.on = 0;
    r->chk.log = old;
    return ok ? 0 : 1;
}
