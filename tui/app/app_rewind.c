/* app_rewind: see app_rewind.h. */
#include "app_rewind.h"

#include <stdlib.h>
#include <string.h>

#include "kv_history.h"
#include "ui_style.h"

#define MAX_PLANS 256 /* start-up plans kept, one per segment (the oldest go first) */

typedef struct seg_plan {
    int64_t base;      /* the segment's first global position */
    kv_plan *plan;     /* a copy, NULL when the server did not start */
} seg_plan;

typedef struct app_rewind {
    kv_history *h;
    int lesson;        /* the lesson the history belongs to */
    const kv_engine *attached;
    int active;
    int64_t pos;
    seg_plan plans[MAX_PLANS];
    int nplans;
} app_rewind;

void app_rewind_init(app *a) { a->rw = calloc(1, sizeof *a->rw); }

static void drop_history(app_rewind *r)
{
    kv_history_destroy(r->h);
    r->h = NULL;
    r->attached = NULL;
    r->active = 0;
    for (int i = 0; i < r->nplans; i++)
        free(r->plans[i].plan);
    r->nplans = 0;
}

void app_rewind_free(app *a)
{
    if (!a->rw) return;
    drop_history(a->rw);
    free(a->rw);
    a->rw = NULL;
}

int app_rewind_active(const app *a) { return a->rw && a->rw->active && a->rw->h; }

void app_rewind_view(const app *a, const kv_history **h, int64_t *pos)
{
    int on = app_rewind_active(a);
    *h = on ? a->rw->h : NULL;
    *pos = on ? a->rw->pos : 0;
}

void app_rewind_live(app *a)
{
    app_rewind *r = a->rw;
    if (!r || !r->active) return;
    r->active = 0;
    app_reset_flashes(a);
    a->dirty = ~0u;
}

void app_rewind_server(app *a)
{
    app_rewind *r = a->rw;
    if (!r) return;
    app_rewind_live(a);
    int lesson = a->lsn ? lsn_current(a->lsn) : 0;
    if (lesson != r->lesson) {
        drop_history(r);
        r->lesson = lesson;
    }
    if (!a->eng || a->eng == r->attached) return;
    if (!r->h) {
        char err[160];
        kv_history_opts ho = {.max_bytes = a->history_bytes};
        r->h = kv_history_create(&ho, err, sizeof err);
        if (!r->h) {
            app_status(a, UI_R_ERROR, "no history of the run: %s", err);
            return;
        }
    }
    char err[160];
    if (kv_history_attach(r->h, a->eng, err, sizeof err) != 0) {
        app_status(a, UI_R_ERROR, "no history of this server: %s", err);
        return;
    }
    r->attached = a->eng;
    if (r->nplans == MAX_PLANS) {
        free(r->plans[0].plan);
        memmove(r->plans, r->plans + 1, (MAX_PLANS - 1) * sizeof r->plans[0]);
        r->nplans--;
    }
    seg_plan *sp = &r->plans[r->nplans++];
    sp->base = kv_history_present(r->h);
    sp->plan = NULL;
    if (a->plan && (sp->plan = malloc(sizeof *sp->plan))) *sp->plan = *a->plan;
}

void app_rewind_source(const app *a, const kv_engine **eng, const kv_plan **plan)
{
    *eng = a->eng;
    *plan = a->plan;
    if (!app_rewind_active(a)) return;
    const app_rewind *r = a->rw;
    *eng = kv_history_engine(r->h);
    *plan = NULL;
    for (int i = r->nplans - 1; i >= 0; i--)
        if (r->plans[i].base <= r->pos) {
            *plan = r->plans[i].plan;
            break;
        }
}

/* Put the replay at pos (clamped); past the newest step means the present. */
static void go(app *a, int64_t pos)
{
    app_rewind *r = a->rw;
    kv_history_sync(r->h);
    int64_t first = kv_history_first(r->h), present = kv_history_present(r->h);
    if (present < 0 || present <= first) {
        app_status(a, UI_R_DIM, "Nothing to go back to yet: the engine has not run a step");
        return;
    }
    if (pos > present && r->active) {
        app_rewind_live(a);
        app_status(a, UI_R_DIM, "Back to the present");
        return;
    }
    if (pos < first) pos = first;
    if (pos > present) pos = present;
    char err[200];
    if (kv_history_seek(r->h, pos, err, sizeof err) != 0) {
        app_status(a, UI_R_ERROR, "cannot go to step %lld: %s", (long long)pos, err);
        return;
    }
    r->active = 1;
    r->pos = pos;
    /* what this step did, held on the pool until the next move */
    app_reset_flashes(a);
    const kv_engine *e = kv_history_engine(r->h);
    kv_engine_info in;
    kv_engine_get_info(e, &in);
    uint64_t last = kv_engine_last_event_seq(e);
    app_feed_from(a, e, last > 4096 ? last - 4096 : 0, in.step - 1, 1e9);
    a->dirty = ~0u;
}

static int64_t here(const app_rewind *r) { return r->active ? r->pos : kv_history_present(r->h); }

/* { and }: the step just before the next notable one, so the pool shows
 * the blocks as they were and ] plays what happened. */
static void jump_mark(app *a, int dir)
{
    app_rewind *r = a->rw;
    kv_history_sync(r->h);
    int64_t cur = r->active ? r->pos : kv_history_present(r->h) + 1;
    kv_history_mark m;
    /* a mark at position p is shown from p - 1: backward, marks with p <= cur;
     * forward, marks with p > cur + 1 */
    int found = dir < 0 ? kv_history_next_mark(r->h, cur + 1, -1, KV_MARK_ALL, &m)
                        : kv_history_next_mark(r->h, cur + 1, 1, KV_MARK_ALL, &m);
    if (found != 0) {
        if (dir > 0 && r->active) {
            app_rewind_live(a);
            app_status(a, UI_R_DIM, "No later event: back to the present");
        } else {
            app_status(a, UI_R_DIM, "No %s event recorded", dir < 0 ? "earlier" : "later");
        }
        return;
    }
    go(a, m.pos - 1 >= kv_history_first(r->h) ? m.pos - 1 : m.pos);
    if (!r->active) return;
    static const struct { uint32_t k; const char *what; } names[] = {
        {KV_MARK_RESTART, "the server restarts"}, {KV_MARK_PREEMPT, "request #%lld is preempted"},
        {KV_MARK_EVICT, "cached blocks are evicted"}, {KV_MARK_HIT, "request #%lld hits the prefix cache"},
        {KV_MARK_FINISH, "request #%lld finishes"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (m.kinds & names[i].k) {
            char what[96];
            snprintf(what, sizeof what, names[i].what, (long long)m.req_id);
            app_status(a, (m.kinds & KV_MARK_PREEMPT) ? UI_R_WARN : UI_R_DIM, "Step %lld: next, %s (])",
                       (long long)r->pos, what);
            break;
        }
}

/* Keys that only look at the screen: they keep the replay. */
static int looks_only(int ch)
{
    return ch == '\t' || ch == 't' || ch == KEY_UP || ch == KEY_DOWN || ch == KEY_PPAGE || ch == KEY_NPAGE ||
           ch == 'j' || ch == 'k' || ch == '?' || ch == KEY_MOUSE || ch == KEY_RESIZE || ch == 27 || ch == 'q' ||
           ch == 'Q';
}

int app_rewind_key(app *a, int ch)
{
    app_rewind *r = a->rw;
    int ours = ch == '[' || ch == ']' || ch == '{' || ch == '}' || ch == KEY_HOME || ch == KEY_END;
    if (!ours) {
        if (app_rewind_active(a) && !looks_only(ch)) app_rewind_live(a);
        return 0;
    }
    if (!r || !r->h) {
        app_status(a, UI_R_DIM, "Nothing recorded: no server has run in this lesson");
        return 1;
    }
    switch (ch) {
    case '[': go(a, here(r) - 1); break;
    case ']':
        if (!r->active) app_status(a, UI_R_DIM, "This is the present: [ goes back a step");
        else if (r->pos >= kv_history_present(r->h)) {
            app_rewind_live(a);
            app_status(a, UI_R_DIM, "Back to the present");
        } else go(a, r->pos + 1);
        break;
    case '{': jump_mark(a, -1); break;
    case '}':
        if (!r->active) app_status(a, UI_R_DIM, "This is the present: { goes back to the last event");
        else jump_mark(a, 1);
        break;
    case KEY_HOME: go(a, kv_history_first(r->h)); break;
    case KEY_END:
        if (r->active) {
            app_rewind_live(a);
            app_status(a, UI_R_DIM, "Back to the present");
        }
        break;
    }
    a->dirty = ~0u;
    return 1;
}
