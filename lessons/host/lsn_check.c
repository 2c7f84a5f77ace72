/* lsn_check: `kvlab check`, the runner driven headless. Every question is
 * given wrong answers (each must be refused) and then its script (must be
 * accepted); every goal must not hold before its scripted flag changes, nor
 * after the changes of each wrong lever it lists (whose reason the page must
 * show), and must hold after its script. One line per question and goal goes
 * to the log. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lsn_figures.h"
#include "lsn_lever.h"
#include "lsn_runner_int.h"
#include "lsn_server.h"

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

/* A formula on one line: runs of white space as one space, cut with "..."
 * past outl. */
static void squeeze(const char *s, char *out, size_t outl)
{
    size_t n = 0;
    int space = 1;
    for (; *s && n + 4 < outl; s++) {
        int ws = *s == ' ' || *s == '\n' || *s == '\t' || *s == '\r';
        if (ws && space)
            continue;
        out[n++] = ws ? ' ' : *s;
        space = ws;
    }
    while (n > 0 && out[n - 1] == ' ')
        n--;
    if (*s && n + 4 <= outl) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

/* v as the learner would type it, exactly enough that the checker reads
 * back v itself (lsn_answer_format rounds to 3 digits where that is not a
 * whole count). */
static void format_exact(double v, const char *unit, char *buf, size_t len)
{
    lsn_answer_format(v, unit, buf, len);
    lsn_numq nq = {v, unit, 1e-9, 0, 0, NULL};
    char msg[256];
    double got;
    if (lsn_answer_check_number(&nq, buf, &got, msg, sizeof msg) != LSN_CHECK_CORRECT)
        snprintf(buf, len, "%.10g %s", v, unit);
}

/* A numeric question's answer against the engine: the expect formula,
 * evaluated now from fresh engine figures, must agree with the lesson's
 * answer, and the question must accept the engine's figure typed in full.
 * Returns 0, or -1 after check_fail. */
static int check_expect(lsn_runner *r, int nq, const char *prompt)
{
    lsn_ask *q = &r->q;
    if (!q->expect) {
        check_fail(r, "question %d (\"%s\") has no expect: tie its answer to engine figures "
                      "(lessons/API.md, Questions)", nq, prompt);
        return -1;
    }
    double want;
    int figures;
    if (lsn_vm_expect(r->vm, q, &want, &figures) < 0) {
        check_fail(r, "question %d (\"%s\"): its expect '%s' does not evaluate: %s", nq, prompt, q->expect,
                   lsn_vm_error(r->vm));
        return -1;
    }
    if (figures == 0) {
        check_fail(r, "question %d (\"%s\"): its expect '%s' reads no engine figure, so it proves nothing", nq,
                   prompt, q->expect);
        return -1;
    }
    /* the lesson's answer, judged around the engine's figure ... */
    char ans[128], eng[128], msg[512];
    double got;
    format_exact(q->answer, q->unit, ans, sizeof ans);
    lsn_numq around = {want, q->unit, q->rel, q->abs, 0, NULL};
    if (lsn_answer_check_number(&around, ans, &got, msg, sizeof msg) != LSN_CHECK_CORRECT) {
        char shown[128];
        squeeze(q->expect, shown, sizeof shown);
        check_fail(r, "question %d (\"%s\"): the answer %.10g disagrees with the engine: %s = %.10g", nq, prompt,
                   q->answer, shown, want);
        return -1;
    }
    /* ... and the engine's figure, judged by the question as the learner is */
    format_exact(want, q->unit, eng, sizeof eng);
    int picked;
    if (lsn_ask_check(q, eng, &got, &picked, msg, sizeof msg) != LSN_CHECK_CORRECT) {
        check_fail(r, "question %d (\"%s\") refuses the engine's own figure '%s' (%s): %s", nq, prompt, eng,
                   q->expect, msg);
        return -1;
    }
    char shown[128];
    squeeze(q->expect, shown, sizeof shown);
    lsn_run_logf(r, "    engine: %s = %.10g (answer %.10g)\n", shown, want, q->answer);
    return 0;
}

typedef struct trial {
    char text[128];
    enum { T_WRONG, T_NEAR } must; /* T_NEAR: must be recognised as the known mistake */
} trial;

/* A prediction (lab.predict): nothing is wrong, but what cannot be read
 * must be refused, and the lesson's scripted prediction taken; its outcome
 * is checked against the engine when the run has played (lsn_lua.c). */
static void check_prediction(lsn_runner *r, const char *prompt)
{
    lsn_ask *q = &r->q;
    int nq = ++r->chk.n_predictions;
    lsn_run_logf(r, "  prediction %d: %s\n", nq, prompt);
    lsn_verdict v;
    lsn_answer(r, "no idea", &v);
    if (v.kind != LSN_V_UNREADABLE) {
        check_fail(r, "prediction %d (\"%s\") took 'no idea' as a prediction", nq, prompt);
        return;
    }
    char script[256];
    if (q->script)
        snprintf(script, sizeof script, "%s", q->script);
    else if (q->nchoices)
        snprintf(script, sizeof script, "a");
    else
        lsn_answer_format(0, q->unit, script, sizeof script);
    lsn_answer(r, script, &v);
    if (v.kind != LSN_V_CORRECT) {
        check_fail(r, "prediction %d (\"%s\") refused the scripted prediction '%s': %s", nq, prompt, script,
                   v.message);
        return;
    }
    lsn_run_logf(r, "    predicted '%s'\n", script);
}

static void check_question(lsn_runner *r)
{
    lsn_ask *q = &r->q;
    char prompt[96];
    one_line(q->prompt, prompt, sizeof prompt);
    if (q->predict) {
        check_prediction(r, prompt);
        return;
    }
    int nq = ++r->chk.n_questions;
    lsn_run_logf(r, "  question %d: %s\n", nq, prompt);
    if (!q->nchoices && check_expect(r, nq, prompt) < 0)
        return;
    /* Wrong answers: the lesson's, every near-miss, half, double and ten
     * times the answer, every wrong choice. Each must be refused, and read:
     * an entry the checker cannot read proves nothing. */
    int nw = 0;
    trial wrong[3 * LSN_ASK_MAX_LIST];
    for (int i = 0; i < q->nwrong; i++, nw++) {
        wrong[nw].must = T_WRONG;
        snprintf(wrong[nw].text, sizeof wrong[nw].text, "%s", q->wrong[i]);
    }
    if (q->nchoices) {
        for (int i = 1; i <= q->nchoices; i++) {
            if (i == q->correct)
                continue;
            wrong[nw].must = T_WRONG;
            snprintf(wrong[nw++].text, sizeof wrong[0].text, "%d", i);
        }
    } else {
        for (int i = 0; i < q->nnear; i++, nw++) {
            wrong[nw].must = T_NEAR;
            format_exact(q->near[i].value, q->unit, wrong[nw].text, sizeof wrong[nw].text);
        }
        /* a check that takes half, double or ten times the answer is too lax */
        static const double factors[] = {0.5, 2, 10};
        for (int i = 0; i < 3 && q->answer != 0; i++, nw++) {
            wrong[nw].must = T_WRONG;
            format_exact(q->answer * factors[i], q->unit, wrong[nw].text, sizeof wrong[nw].text);
        }
    }
    char script[256];
    if (q->script)
        snprintf(script, sizeof script, "%s", q->script);
    else if (q->nchoices)
        snprintf(script, sizeof script, "%c", 'a' + q->correct - 1);
    else
        lsn_answer_format(q->answer, q->unit, script, sizeof script);
    for (int i = 0; i < nw; i++) {
        lsn_verdict v;
        lsn_answer(r, wrong[i].text, &v);
        if (v.kind == LSN_V_CORRECT) {
            check_fail(r, "question %d (\"%s\") accepted the wrong answer '%s'", nq, prompt, wrong[i].text);
            return;
        }
        if (v.kind == LSN_V_UNREADABLE) {
            check_fail(r, "question %d (\"%s\"): the wrong answer '%s' is unreadable (%s), so refusing it proves "
                          "nothing", nq, prompt, wrong[i].text, v.message);
            return;
        }
        if (wrong[i].must == T_NEAR && v.kind != LSN_V_NEAR_MISS) {
            check_fail(r, "question %d (\"%s\"): the near-miss '%s' is not recognised as that mistake: %s", nq,
                       prompt, wrong[i].text, v.message);
            return;
        }
        /* the reply is read beside the page: its figures follow the page's rules */
        char fmsg[256];
        if (lsn_figures_check(v.message, fmsg, sizeof fmsg) < 0) {
            check_fail(r, "question %d (\"%s\"): the reply to '%s': %s", nq, prompt, wrong[i].text, fmsg);
            return;
        }
        lsn_run_logf(r, "    refused '%s' (%s): %s\n", wrong[i].text, v.kind == LSN_V_NEAR_MISS ? "near miss" : "wrong",
                     v.message);
    }
    lsn_verdict v;
    lsn_answer(r, script, &v);
    if (v.kind != LSN_V_CORRECT) {
        check_fail(r, "question %d (\"%s\") refused the scripted answer '%s': %s", nq, prompt, script, v.message);
        return;
    }
    lsn_run_logf(r, "    accepted '%s'\n", script);
}

/* One wrong lever of goal ng: make its changes (steps engine steps after
 * each, as the script gets), then the goal must still be unmet and the page
 * must say why (w->says); then put the flags back as they were. Returns 0
 * after a failure (logged) or when the lesson left its goal. */
static int check_wrong_lever(lsn_runner *r, int ng, const char *text, const lsn_goal_wrong *w, int64_t steps)
{
    lsn_goal_spec *g = &r->g;
    char (*saved)[512] = calloc((size_t)w->n, sizeof *saved);
    char err[512], line[160] = "";
    if (!saved) {
        lsn_run_error(r, "out of memory");
        return 0;
    }
    int ok = 1;
    for (int i = 0; i < w->n && ok; i++) {
        if (lsn_server_get(r->srv.server, w->names[i], saved[i], sizeof saved[i]) < 0)
            saved[i][0] = '\0';
        size_t used = strlen(line);
        snprintf(line + used, sizeof line - used, "%s--%s %s", i ? " " : "", w->names[i], w->values[i]);
        if (!lsn_set_flag(r, w->names[i], w->values[i], err, sizeof err)) {
            check_fail(r, "goal %d: the wrong lever --%s %s was refused: %s", ng, w->names[i], w->values[i], err);
            ok = 0;
        }
        for (int64_t k = 0; ok && k < steps && !g->met && r->pace.wait == W_GOAL; k++) {
            if (lsn_run_engine_step(r) < 0)
                ok = 0;
            else if (k % 8 == 7 || k == steps - 1)
                lsn_run_check_goal(r);
        }
        if (r->pace.wait != W_GOAL)
            ok = 0;
    }
    if (ok) {
        int v = lsn_vm_test(r->vm, LSN_FN_GOAL);
        if (v < 0) {
            lsn_run_error(r, "%s", lsn_vm_error(r->vm));
            ok = 0;
        } else if ((v && !lsn_run_goal_uncounted(r)) || g->met) {
            check_fail(r, "goal %d (\"%s\") is met by the wrong lever %s", ng, text, line);
            ok = 0;
        } else if (!r->stage.text.s || !strstr(r->stage.text.s, w->says)) {
            check_fail(r, "goal %d: after the wrong lever %s the page does not say \"%s\"", ng, line, w->says);
            ok = 0;
        } else {
            lsn_run_logf(r, "    wrong lever %s: not reached, the page says \"%s\"\n", line, w->says);
        }
    }
    for (int i = w->n - 1; ok && i >= 0; i--) {
        if (!lsn_set_flag(r, w->names[i], saved[i], err, sizeof err)) {
            check_fail(r, "goal %d: could not put --%s back to '%s': %s", ng, w->names[i], saved[i], err);
            ok = 0;
        }
    }
    if (ok && r->pace.wait != W_GOAL)
        ok = 0;
    g->met = g->pub.met = 0;
    g->changes = 0;
    free(saved);
    return ok;
}

static void check_goal(lsn_runner *r)
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
    /* The script is the fix the lesson teaches: only levers the goal counts
     * (vllm serve flags and the card, or what its levers list names). */
    for (int i = 0; i < n; i++) {
        const char *canon = names[i];
        lsn_server_flag_info(names[i], &canon, NULL, NULL);
        if (!lsn_lever_counts(canon, g->levers, g->nlevers)) {
            char line[512];
            check_fail(r, "goal %d (\"%s\"): its script pulls --%s, which no goal counts unless its levers name it "
                          "(%s)", ng, text, canon, lsn_lever_not_counted(canon, line, sizeof line));
            return;
        }
    }
    int64_t steps = g->steps;
    /* Without the change, the engine must not get there by itself: as many
     * engine steps as the scripted changes may take, under the lesson's own
     * flags, checked as often. */
    int64_t budget = steps * n;
    if (budget > 0 && lsn_server_engine(r->srv.server)) {
        for (int64_t k = 0; k < budget; k++) {
            if (lsn_run_engine_step(r) < 0)
                return;
            if (k % 8 == 7 || k == budget - 1) {
                v = lsn_vm_test(r->vm, LSN_FN_GOAL);
                if (v < 0) {
                    lsn_run_error(r, "%s", lsn_vm_error(r->vm));
                    return;
                }
                if (v) {
                    check_fail(r, "goal %d (\"%s\") is reached without its scripted change: after %lld engine "
                                  "steps under the lesson's own flags", ng, text, (long long)(k + 1));
                    return;
                }
            }
        }
        lsn_run_logf(r, "    not reached in %lld engine steps without a change\n", (long long)budget);
    }
    for (int w = 0; w < g->nwrong && r->pace.wait == W_GOAL; w++)
        if (!check_wrong_lever(r, ng, text, &g->wrong[w], steps))
            return;
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

/* Every wait for the learner: the program's rule on the screen (a view the
 * page points at that the terminal does not show), once per page and wait. */
static void check_page(lsn_runner *r)
{
    if (!r->chk.page_rule)
        return;
    char msg[512];
    if (r->chk.page_rule(r, r->chk.page_ctx, msg, sizeof msg) < 0)
        check_fail(r, "page %d \"%s\": %s", lsn_page_number(r), lsn_page_title(r), msg);
}

void lsn_check_set_page_rule(lsn_runner *r, lsn_page_rule rule, void *ctx)
{
    r->chk.page_rule = rule;
    r->chk.page_ctx = ctx;
}

int lsn_check(lsn_runner *r, int number, FILE *log)
{
    FILE *old = r->chk.log;
    r->chk.log = log;
    r->chk.on = 1;
    r->chk.question = check_question;
    r->chk.goal = check_goal;
    r->chk.page = check_page;
    r->chk.failed = 0;
    r->chk.n_questions = r->chk.n_goals = r->chk.n_predictions = 0;
    r->chk.waits = r->chk.engine_steps = 0;
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
    char preds[48] = "";
    if (r->chk.n_predictions)
        snprintf(preds, sizeof preds, ", %d prediction%s", r->chk.n_predictions, r->chk.n_predictions == 1 ? "" : "s");
    lsn_run_logf(r, "%s lesson %d (%d steps, %d question%s, %d goal%s%s, %d server start%s, %.2f s)\n",
                 ok ? "PASS" : "FAIL", number, r->pace.step, r->chk.n_questions, r->chk.n_questions == 1 ? "" : "s",
                 r->chk.n_goals, r->chk.n_goals == 1 ? "" : "s", preds, starts, starts == 1 ? "" : "s", secs);
    lsn_run_unload(r);
    r->chk.on = 0;
    r->chk.log = old;
    return ok ? 0 : 1;
}
