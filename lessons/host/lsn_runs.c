/* lsn_runs: see lsn_runs.h. */
#include "lsn_runs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A run's note: this head, then each offered flag as "name\0value\0". */
typedef struct run_note {
    int32_t has_plan;
    kv_plan plan;            /* as it is in memory (its pointers are to static tables) */
} run_note;

void lsn_runs_init(lsn_runs *x, uint64_t bytes)
{
    memset(x, 0, sizeof *x);
    x->bytes = bytes;
}

void lsn_runs_free(lsn_runs *x)
{
    kv_history_destroy(x->h);
    x->h = NULL;
    x->lesson = 0;
}

void lsn_runs_lesson(lsn_runs *x, int number)
{
    if (x->h && x->lesson != number) {
        kv_history_destroy(x->h);
        x->h = NULL;
    }
    x->lesson = number;
}

void lsn_runs_record(lsn_runs *x, kv_engine *e, const kv_plan *plan, const lsn_offer *offer)
{
    x->err[0] = '\0';
    if (!x->bytes || !e)
        return;
    if (!x->h) {
        kv_history_opts o = {x->bytes, 0};
        x->h = kv_history_create(&o, x->err, sizeof x->err);
        if (!x->h)
            return;
    }
    if (kv_history_attach(x->h, e, x->err, sizeof x->err) != 0)
        return;
    size_t len = sizeof(run_note);
    for (int i = 0; offer && i < offer->nflags; i++)
        len += strlen(offer->flags[i].name) + 1 + strlen(offer->flags[i].value ? offer->flags[i].value : "") + 1;
    uint8_t *note = calloc(1, len);
    if (!note) {
        snprintf(x->err, sizeof x->err, "out of memory for the run's plan and flags");
        return;
    }
    run_note *head = (run_note *)note;
    head->has_plan = plan != NULL;
    if (plan)
        head->plan = *plan;
    size_t off = sizeof(run_note);
    for (int i = 0; offer && i < offer->nflags; i++) {
        const char *n = offer->flags[i].name, *v = offer->flags[i].value ? offer->flags[i].value : "";
        memcpy(note + off, n, strlen(n) + 1);
        off += strlen(n) + 1;
        memcpy(note + off, v, strlen(v) + 1);
        off += strlen(v) + 1;
    }
    kv_history_set_note(x->h, note, len, x->err, sizeof x->err);
    free(note);
}

const kv_plan *lsn_runs_plan(const lsn_runs *x, int64_t pos)
{
    size_t len;
    const run_note *n = x->h ? kv_history_note(x->h, pos, &len) : NULL;
    return n && len >= sizeof *n && n->has_plan ? &n->plan : NULL;
}

const char *lsn_runs_flag(const lsn_runs *x, int64_t pos, const char *name)
{
    size_t len;
    const uint8_t *n = x->h ? kv_history_note(x->h, pos, &len) : NULL;
    if (!n || len < sizeof(run_note))
        return NULL;
    const char *p = (const char *)n + sizeof(run_note), *end = (const char *)n + len;
    while (p < end) {
        const char *v = p + strlen(p) + 1;
        if (v >= end)
            break;
        if (!strcmp(p, name))
            return v;
        p = v + strlen(v) + 1;
    }
    return NULL;
}
