/* lsn_ask: what a lesson asks of the learner. A question (lab.ask{},
 * lessons/API.md "Questions"): what the learner sees (lsn_question) and what
 * only the runner and `kvlab check` use (the answer, tolerance, near-misses,
 * wrong answers to try, the script, and the formula the answer must agree
 * with). A goal (lab.goal{}, "Goals"): its text, hints and the flag changes
 * `kvlab check` makes. Plain C; lsn_answer.c reads and checks typed text,
 * the goal's check function stays in the Lua state (lsn_vm.h). */
#ifndef LSN_ASK_H
#define LSN_ASK_H

#include <stddef.h>
#include <stdint.h>

#include "lsn_answer.h"
#include "lsn_scene.h"

#define LSN_ASK_MAX_LIST 64           /* entries in choices, near, hints, wrong, given */

typedef struct lsn_ask {
    int active;
    int predict;             /* lab.predict: a prediction, any readable entry is taken (nothing is wrong) */
    lsn_question pub;
    char *prompt, *unit;
    char **choices;          /* nchoices */
    char **why;              /* nchoices entries, may be NULL */
    int nchoices, correct;   /* correct: 1-based */
    double answer, rel, abs; /* NUMBER: the lesson's answer (in unit) and tolerance */
    lsn_near *near;          /* why strings owned */
    int nnear;
    char **hints;
    int nhints, hints_shown;
    char *script;            /* what kvlab check types (NULL: the answer) */
    char **wrong;            /* more wrong answers kvlab check tries */
    int nwrong;
    char *explain;
    /* NUMBER: the formula kvlab check re-derives the answer from (a Lua
     * expression over engine figures, lessons/API.md "Questions"), and the
     * premises the prompt states, by name. */
    char *expect;
    char **given_names;
    double *given_values;
    int ngiven;
    int tries;
} lsn_ask;

/* Free everything and mark the question inactive. */
void lsn_ask_clear(lsn_ask *q);

/* The learner's view, refreshed. */
const lsn_question *lsn_ask_public(lsn_ask *q);

/* Check typed text against the question. *value gets the number read (in
 * the question's unit; NAN if none), *picked the 1-based choice (0 if
 * none); msg one or two sentences for the learner. */
lsn_check_result lsn_ask_check(const lsn_ask *q, const char *text, double *value, int *picked, char *msg,
                               size_t msglen);

/* The right answer as the learner would type it ("131,072 bytes", "b) GQA
 * (8 KV heads)"). Returns buf. */
char *lsn_ask_answer_text(const lsn_ask *q, char *buf, size_t buflen);

/* A wrong lever of a goal (lab.goal{wrong = ...}): flag changes the lesson
 * warns against, which must leave the goal unmet, and a phrase the page
 * must show after them (the lesson's "why not"). */
typedef struct lsn_goal_wrong {
    char **names, **values;
    int n;
    char *says;
} lsn_goal_wrong;

/* A goal being worked on. */
typedef struct lsn_goal_spec {
    int active;
    lsn_goal pub;
    char *text;
    char **hints;
    int nhints, hints_shown;
    char **script_names, **script_values; /* what kvlab check changes, in order */
    int nscript;
    lsn_goal_wrong *wrong;   /* what kvlab check tries first, each must fail */
    int nwrong;
    int64_t steps;           /* engine steps to run after each change before checking (check) */
    int changes;             /* counted flag changes the learner made while it was pending */
    int met;
    /* The levers it counts besides vllm serve flags and the card (lab.goal{levers = ...}:
     * flag or class names, lsn_lever.h), and the uncounted flags changed while it is
     * pending, with their values when it began: it is met only while each is back there. */
    char **levers;
    int nlevers;
    char **off_names, **off_values;
    int noff;
    int last_uncounted;      /* the last flag change was such a lever, left off its start */
} lsn_goal_spec;

void lsn_goal_spec_clear(lsn_goal_spec *g);
const lsn_goal *lsn_goal_spec_public(lsn_goal_spec *g);

#endif
