/* lsn_runs: the history of one lesson's runs (engine/kv_history.h) for the
 * app's rewind keys: every engine the lesson's server starts while that
 * lesson is loaded -- lab.start, lab.restart, a flag change, a reset, the
 * replay of a back step or of a resumed lesson -- is recorded from its
 * first input on, in one timeline, with the run's start-up plan and the
 * values of the flags the lesson offered then (the run's note), so a past
 * step draws with the memory bar, start-up log and flags of its own run.
 * Loading another lesson starts a new history; the same lesson again (back,
 * reset, resume) keeps it and adds runs. Off (nothing recorded) when made
 * with 0 bytes. Plain C; no Lua. */
#ifndef LSN_RUNS_H
#define LSN_RUNS_H

#include <stdint.h>

#include "kv_history.h"
#include "kv_plan.h"
#include "lsn_offer.h"

typedef struct lsn_runs {
    uint64_t bytes;          /* the history's bound; 0 = off */
    kv_history *h;           /* NULL until a run is recorded */
    int lesson;              /* the lesson h belongs to */
    char err[160];           /* why the last run was not recorded, "" if it was */
} lsn_runs;

/* Off when bytes is 0. */
void lsn_runs_init(lsn_runs *x, uint64_t bytes);
void lsn_runs_free(lsn_runs *x);

/* Lesson `number` is being loaded: a different lesson drops the history. */
void lsn_runs_lesson(lsn_runs *x, int number);

/* Record engine e, just started for the loaded lesson with start-up plan
 * `plan` (may be NULL) and the flags `offer` lists (their values now), as
 * a new run. Nothing to do when off. A failure leaves e unrecorded and says
 * why in x->err (the app shows it; the lesson runs on). */
void lsn_runs_record(lsn_runs *x, kv_engine *e, const kv_plan *plan, const lsn_offer *offer);

/* The start-up plan of the run holding global position pos, or NULL. */
const kv_plan *lsn_runs_plan(const lsn_runs *x, int64_t pos);

/* The value (as lsn_flag.value: "" = the default) flag `name` (canonical,
 * as the flags view lists it) had in the run holding pos, or NULL when the
 * lesson did not offer it then or pos is not kept. */
const char *lsn_runs_flag(const lsn_runs *x, int64_t pos, const char *name);

#endif
