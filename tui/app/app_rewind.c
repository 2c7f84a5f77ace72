/* app_rewind: see app_rewind.h. */
#include "app_rewind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_history.h"
#include "ui_style.h"

/* What { and } jump to: m goes round these (any event but a finish first). */
static const struct {
    uint32_t kinds;
    const char *name;    /* the footer's word for { } */
    const char *plural;  /* "no earlier ..." */
} jump_kinds[] = {
    { KV_MARK_ALL & ~KV_MARK_FINISH, "event", "event" },
    { KV_MARK_PREEMPT, "preemption", "preemption" },
    { KV_MARK_HIT, "prefix hit", "prefix-cache hit" },
    { KV_MARK_EVICT, "eviction", "eviction" },
    { KV_MARK_RESTART, "restart", "restart" },
    { KV_MARK_FINISH, "finish", "request finishing" },
};
#define NKINDS ((int)(sizeof jump_kinds / sizeof jump_kinds[0]))

typedef struct app_rewind {
    int active;
    int64_t pos;
    int kind;          /* index into jump_kinds */
    lsn_scene scene;   /* the lesson's scene with the replayed run's flags (app_rewind_scene) */
    lsn_flag *flags;
    int cap_flags;
} app_rewind;

void app_rewind_init(app *a) { a->rw = calloc(1, sizeof *a->rw); }

void app_rewind_free(app *a)
{
    if (a->rw) free(a->rw->flags);
    free(a->rw);
    a->rw = NULL;
}

/* The lesson's history of runs (lsn_history), or NULL. */
static kv_history *hist(const app *a) { return a->lsn ? lsn_history(a->lsn) : NULL; }

int app_rewind_active(const app *a) { return a->rw && a->rw->active && hist(a); }

void app_rewind_view(const app *a, const kv_history **h, int64_t *pos)
{
    int on = app_rewind_active(a);
    *h = on ? hist(a) : NULL;
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
    if (!a->rw) return;
    app_rewind_live(a);
    const char *why = a->lsn ? lsn_history_error(a->lsn) : NULL;
    if (why) app_status(a, UI_R_ERROR, "no history of this server: %s", why);
}

void app_rewind_source(const app *a, const kv_engine **eng, const kv_plan **plan)
{
    *eng = a->eng;
    *plan = a->plan;
    if (!app_rewind_active(a)) return;
    *eng = kv_history_engine(hist(a));
    *plan = lsn_history_plan(a->lsn, a->rw->pos);
}

const lsn_scene *app_rewind_scene(app *a, const lsn_scene *live)
{
    app_rewind *r = a->rw;
    if (!app_rewind_active(a) || !live->nflags) return live;
    if (live->nflags > r->cap_flags) {
        lsn_flag *n = realloc(r->flags, (size_t)live->nflags * sizeof *n);
        if (!n) return live;
        r->flags = n;
        r->cap_flags = live->nflags;
    }
    r->scene = *live;
    for (int i = 0; i < live->nflags; i++) {
        r->flags[i] = live->flags[i];
        const char *v = lsn_history_flag(a->lsn, r->pos, live->flags[i].name);
        if (v) r->flags[i].value = v; /* a flag the run's lesson did not offer then keeps today's value */
    }
    r->scene.flags = r->flags;
    return &r->scene;
}

const char *app_rewind_kind_name(const app *a) { return a->rw ? jump_kinds[a->rw->kind].name : "event"; }

int app_rewind_where(const app *a, int64_t *run, int64_t *step)
{
    if (!app_rewind_active(a)) return 0;
    const kv_history *h = hist(a);
    int64_t st = -1;
    kv_history_locate(h, a->rw->pos, NULL, &st);
    if (run) *run = kv_history_run_at(h, a->rw->pos);
    if (step) *step = st;
    return 1;
}

/* Put the replay at pos (clamped); past the newest step means the present. */
static void go(app *a, int64_t pos)
{
    app_rewind *r = a->rw;
    kv_history *h = hist(a);
    kv_history_sync(h);
    int64_t first = kv_history_first(h), present = kv_history_present(h);
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
    if (kv_history_seek(h, pos, err, sizeof err) != 0) {
        app_status(a, UI_R_ERROR, "cannot go to step %lld: %s", (long long)pos, err);
        return;
    }
    r->active = 1;
    r->pos = pos;
    /* what this step did, held on the pool until the next move */
    app_reset_flashes(a);
    const kv_engine *e = kv_history_engine(h);
    kv_engine_info in;
    kv_engine_get_info(e, &in);
    uint64_t last = kv_engine_last_event_seq(e);
    app_feed_from(a, e, last > 4096 ? last - 4096 : 0, in.step - 1, 1e9);
    a->dirty = ~0u;
}

int app_rewind_goto(app *a, int64_t run, int64_t step)
{
    kv_history *h = hist(a);
    if (!a->rw || !h) return -1;
    if (run < 0) {
        app_rewind_live(a);
        return 0;
    }
    kv_history_sync(h);
    int64_t pos = kv_history_position_of(h, run, step);
    if (pos < 0) return -1;
    go(a, pos);
    return app_rewind_active(a) && a->rw->pos == pos ? 0 : -1;
}

static int64_t here(const app *a) { return a->rw->active ? a->rw->pos : kv_history_present(hist(a)); }

/* { and }: the step just before the next mark of the chosen kind, so the
 * pool shows the blocks as they were and ] plays what happened. */
static void jump_mark(app *a, int dir)
{
    app_rewind *r = a->rw;
    kv_history *h = hist(a);
    kv_history_sync(h);
    int64_t cur = r->active ? r->pos : kv_history_present(h) + 1;
    uint32_t kinds = jump_kinds[r->kind].kinds;
    kv_history_mark m;
    /* a mark at position p is shown from p - 1: backward, marks with p <= cur;
     * forward, marks with p > cur + 1 */
    if (kv_history_next_mark(h, cur + 1, dir < 0 ? -1 : 1, kinds, &m) != 0) {
        if (dir > 0 && r->active) {
            app_rewind_live(a);
            app_status(a, UI_R_DIM, "No later %s: back to the present", jump_kinds[r->kind].plural);
        } else {
            app_status(a, UI_R_DIM, "No %s %s recorded (m: another kind)", dir < 0 ? "earlier" : "later",
                       jump_kinds[r->kind].plural);
        }
        return;
    }
    go(a, m.pos - 1 >= kv_history_first(h) ? m.pos - 1 : m.pos);
    if (!r->active) return;
    static const struct { uint32_t k; const char *what; } names[] = {
        {KV_MARK_RESTART, "the server restarts"}, {KV_MARK_PREEMPT, "request #%lld is preempted"},
        {KV_MARK_EVICT, "cached blocks are evicted"}, {KV_MARK_HIT, "request #%lld hits the prefix cache"},
        {KV_MARK_FINISH, "request #%lld finishes"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (m.kinds & kinds & names[i].k) {
            char what[96];
            /* the mark's request is its first kind's: name it only for that kind */
            int64_t id = m.req_id;
            if ((names[i].k == KV_MARK_FINISH && (m.kinds & KV_MARK_PREEMPT)) ||
                (names[i].k == KV_MARK_HIT && (m.kinds & (KV_MARK_PREEMPT | KV_MARK_FINISH))))
                id = -1;
            if (id < 0 && strstr(names[i].what, "%lld"))
                snprintf(what, sizeof what, "%s", names[i].k == KV_MARK_FINISH ? "a request finishes"
                                                                               : "a request hits the prefix cache");
            else
                snprintf(what, sizeof what, names[i].what, (long long)id);
            app_status(a, (m.kinds & kinds & KV_MARK_PREEMPT) ? UI_R_WARN : UI_R_DIM, "Step %lld: next, %s (])",
                       (long long)r->pos, what);
            break;
        }
}

/* m: the next kind of mark { and } jump to. */
static void next_kind(app *a)
{
    app_rewind *r = a->rw;
    r->kind = (r->kind + 1) % NKINDS;
    app_status(a, UI_R_DIM, "{ } now go to the previous / next %s (m: another kind)", jump_kinds[r->kind].plural);
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
    /* m chooses what { } jump to: while replaying, or when no answer or
     * flag is being typed */
    int kind_key = ch == 'm' && (app_rewind_active(a) || (!a->input_active && a->key_focus != UI_PANE_FLAGS));
    int ours = ch == '[' || ch == ']' || ch == '{' || ch == '}' || ch == KEY_HOME || ch == KEY_END || kind_key;
    if (!ours) {
        if (app_rewind_active(a) && !looks_only(ch)) app_rewind_live(a);
        return 0;
    }
    if (!r) return 0;
    if (kind_key) {
        next_kind(a);
        a->dirty = ~0u;
        return 1;
    }
    kv_history *h = hist(a);
    if (!h) {
        app_status(a, UI_R_DIM, "Nothing recorded: no server has run in this lesson");
        return 1;
    }
    switch (ch) {
    case '[': go(a, here(a) - 1); break;
    case ']':
        if (!r->active) app_status(a, UI_R_DIM, "This is the present: [ goes back a step");
        else if (r->pos >= kv_history_present(h)) {
            app_rewind_live(a);
            app_status(a, UI_R_DIM, "Back to the present");
        } else go(a, r->pos + 1);
        break;
    case '{': jump_mark(a, -1); break;
    case '}':
        if (!r->active) app_status(a, UI_R_DIM, "This is the present: { goes back to the last %s", jump_kinds[r->kind].plural);
        else jump_mark(a, 1);
        break;
    case KEY_HOME: go(a, kv_history_first(h)); break;
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
