#include "lsn_ask.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_strv(char **v, int n)
{
    if (!v)
        return;
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void lsn_ask_clear(lsn_ask *q)
{
    free(q->prompt);
    free(q->unit);
    free_strv(q->choices, q->nchoices);
    free_strv(q->why, q->nchoices);
    for (int i = 0; i < q->nnear; i++)
        free((char *)q->near[i].why);
    free(q->near);
    free_strv(q->hints, q->nhints);
    free(q->script);
    free_strv(q->wrong, q->nwrong);
    free(q->explain);
    free(q->expect);
    free_strv(q->given_names, q->ngiven);
    free(q->given_values);
    memset(q, 0, sizeof *q);
}

const lsn_question *lsn_ask_public(lsn_ask *q)
{
    q->pub.prompt = q->prompt ? q->prompt : "";
    q->pub.unit = q->unit ? q->unit : "";
    q->pub.kind = q->nchoices ? LSN_Q_CHOICE : LSN_Q_NUMBER;
    q->pub.nchoices = q->nchoices;
    q->pub.choices = (const char *const *)q->choices;
    q->pub.tries = q->tries;
    q->pub.hints_total = q->nhints;
    q->pub.hints_shown = q->hints_shown;
    q->pub.predict = q->predict;
    return &q->pub;
}

lsn_check_result lsn_ask_check(const lsn_ask *q, const char *text, double *value, int *picked, char *msg,
                               size_t msglen)
{
    *value = NAN;
    *picked = 0;
    if (q->predict) { /* a prediction: whatever can be read, in the right kind of unit */
        lsn_check_result r;
        if (q->nchoices) {
            r = lsn_answer_check_choice(q->nchoices, (const char *const *)q->choices, 1, NULL, text, picked, msg,
                                        msglen);
            if (*picked < 1)
                return LSN_CHECK_UNREADABLE;
            snprintf(msg, msglen, "Noted: %c) %s.", 'a' + *picked - 1, q->choices[*picked - 1]);
            return LSN_CHECK_CORRECT;
        }
        lsn_numq any = {0, q->unit, 0, INFINITY, 0, NULL};
        r = lsn_answer_check_number(&any, text, value, msg, msglen);
        if (r != LSN_CHECK_CORRECT || !isfinite(*value))
            return LSN_CHECK_UNREADABLE;
        char got[64];
        snprintf(msg, msglen, "Noted: %s.", lsn_answer_format(*value, q->unit, got, sizeof got));
        return LSN_CHECK_CORRECT;
    }
    if (q->nchoices)
        return lsn_answer_check_choice(q->nchoices, (const char *const *)q->choices, q->correct,
                                       (const char *const *)q->why, text, picked, msg, msglen);
    lsn_numq nq = {q->answer, q->unit, q->rel, q->abs, q->nnear, q->near};
    return lsn_answer_check_number(&nq, text, value, msg, msglen);
}

char *lsn_ask_answer_text(const lsn_ask *q, char *buf, size_t buflen)
{
    if (q->nchoices && q->correct >= 1 && q->correct <= q->nchoices)
        snprintf(buf, buflen, "%c) %s", 'a' + q->correct - 1, q->choices[q->correct - 1]);
    else
        lsn_answer_format(q->answer, q->unit, buf, buflen);
    return buf;
}

void lsn_goal_spec_clear(lsn_goal_spec *g)
{
    free(g->text);
    free_strv(g->hints, g->nhints);
    free_strv(g->script_names, g->nscript);
    free_strv(g->script_values, g->nscript);
    for (int i = 0; i < g->nwrong; i++) {
        free_strv(g->wrong[i].names, g->wrong[i].n);
        free_strv(g->wrong[i].values, g->wrong[i].n);
        free(g->wrong[i].says);
    }
    free(g->wrong);
    free_strv(g->levers, g->nlevers);
    free_strv(g->off_names, g->noff);
    free_strv(g->off_values, g->noff);
    memset(g, 0, sizeof *g);
}

const lsn_goal *lsn_goal_spec_public(lsn_goal_spec *g)
{
    g->pub.text = g->text ? g->text : "";
    g->pub.met = g->met;
    g->pub.hints_total = g->nhints;
    g->pub.hints_shown = g->hints_shown;
    return &g->pub;
}
