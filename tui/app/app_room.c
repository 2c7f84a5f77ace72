/* app_room: presenting and following in the app (see app_room.h). */
#include "app_room.h"

#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"
#include "app_rewind.h"
#include "kv_history.h"
#include "kv_snapshot.h"
#include "kv_util.h"
#include "room_follow.h"
#include "room_pres.h"

#define MAX_CATCHUP_TICKS 200000  /* engine ticks a follower runs in one turn */
#define HINT_EVERY_S 4.0          /* "press x ..." at most this often */
#define FOLLOWER_HISTORY_BYTES (2ull << 20) /* kv_history bound for a follower */

typedef struct app_room {
    int mode;
    char name[ROOM_ROOMNAME_MAX];
    char shown[ROOM_NAME_MAX + ROOM_ROOMNAME_MAX + 2]; /* the room as --follow named it (USER/NAME) */
    char label[96];
    char idle[ROOM_TEXT_MAX + 400];

    /* presenter */
    room_pres *pres;
    room_state *st;             /* built each turn */
    int prev_lesson, prev_step, prev_ninputs, prev_focus, prev_paused, prev_followers;
    double prev_speed;
    int64_t prev_ticks;
    uint32_t server_gen;
    int prev_starts;
    const kv_engine *prev_engine; /* compared only */
    int notice_shown;           /* room_pres_notice said once */
    kv_snapshot img;            /* the engine image a joining follower starts from (freed once sent) */

    /* follower */
    room_follow *fol;
    int exploring;              /* broken away */
    int x_idle;                 /* x was pressed with no lesson to explore */
    int force_replay;           /* rejoining: rebuild from the presenter's state */
    uint64_t applied_run;       /* the presenter run (room_state.run_id) and server generation */
    uint32_t applied_gen;       /* the follower's lesson was last brought to */
    int applied_any;
    int ahead_seen;             /* the last replay ended past the presenter's tick */
    int rewind_missing;         /* the presenter's rewound step is not in this follower's history (said once) */
    char presenter[ROOM_NAME_MAX];
    double hint_at;
    char state_dir[PATH_MAX];   /* where a follower that breaks away keeps its progress */
    lsn_input conv[ROOM_MAX_INPUTS];

    /* KVLAB_ROOM_TRACE */
    FILE *trace;
    double key_t, stats_t;
    int key_seen;
    uint64_t applied_seq;
    int draw_pending;
} app_room;

static app_room *R(const app *a) { return a->room; }

/* ---- opening ------------------------------------------------------------------ */

static void follower_state_dir(app_room *m)
{
    const char *x = getenv("XDG_STATE_HOME"), *h = getenv("HOME");
    if (x && x[0] == '/')
        snprintf(m->state_dir, sizeof m->state_dir, "%s/kvlab/rooms/%s", x, m->name);
    else if (h && *h)
        snprintf(m->state_dir, sizeof m->state_dir, "%s/.local/state/kvlab/rooms/%s", h, m->name);
    else
        m->state_dir[0] = '\0';
}

int app_room_open(app *a, int mode, const char *name, const char *group, char *err, size_t errlen)
{
    a->room = NULL;
    if (mode == APP_ROOM_OFF)
        return 0;
    app_room *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    m->mode = mode;
    if (mode == APP_ROOM_PRESENT) {
        m->st = calloc(1, sizeof *m->st);
        m->pres = m->st ? room_pres_open(name, group, err, errlen) : NULL;
        if (!m->pres) {
            free(m->st);
            free(m);
            return -1;
        }
        snprintf(m->name, sizeof m->name, "%s", room_pres_name(m->pres));
        /* A joining follower starts from an image of this engine, not by
         * running every engine step to it. */
        room_pres_set_images(m->pres, 1);
        kv_snapshot_init(&m->img);
        m->prev_lesson = -1;
        m->prev_focus = -1;
        m->prev_speed = 1;
    } else {
        m->fol = room_follow_new(name, err, errlen);
        if (!m->fol) {
            free(m);
            return -1;
        }
        room_entry e;
        char e2[256];
        room_find(name, &e, e2, sizeof e2);
        snprintf(m->name, sizeof m->name, "%s", e.name[0] ? e.name : "room");
        const char *slash = name ? strchr(name, '/') : NULL;
        snprintf(m->shown, sizeof m->shown, "%.*s%s", slash ? (int)(slash - name + 1) : 0, slash ? name : "",
                 m->name);
        follower_state_dir(m);
        /* A follower keeps a short history (it rewinds only on its own,
         * after x): its memory stays flat however long the class runs. */
        a->history_bytes = FOLLOWER_HISTORY_BYTES;
    }
    const char *tr = getenv("KVLAB_ROOM_TRACE");
    if (tr && *tr) {
        char terr[300];
        m->trace = kv_open_output(tr, "a", NULL, 0, terr, sizeof terr); /* a FIFO or device: refused, not waited on */
        if (m->trace)
            setvbuf(m->trace, NULL, _IOLBF, 0);
    }
    a->room = m;
    return 0;
}

void app_room_close(app *a)
{
    app_room *m = R(a);
    if (!m)
        return;
    room_pres_close(m->pres, "the presenter quit");
    room_follow_free(m->fol);
    kv_snapshot_free(&m->img);
    if (m->trace)
        fclose(m->trace);
    free(m->st);
    free(m);
    a->room = NULL;
}

void app_room_wait(app *a, int timeout_ms)
{
    struct pollfd fds[ROOM_MAX_FOLLOWERS + 2];
    int n = 0;
    fds[n].fd = 0;
    fds[n].events = POLLIN;
    fds[n++].revents = 0;
    app_room *m = R(a);
    if (m && m->pres)
        n += room_pres_pollfds(m->pres, fds + n, ROOM_MAX_FOLLOWERS + 1);
    if (m && m->fol) {
        int fd = room_follow_fd(m->fol);
        if (fd >= 0) {
            fds[n].fd = fd;
            fds[n].events = POLLIN;
            fds[n++].revents = 0;
        } else if (timeout_ms > (int)(ROOM_RETRY_S * 1000)) {
            timeout_ms = (int)(ROOM_RETRY_S * 1000); /* time to try connecting again */
        }
    }
    poll(fds, (nfds_t)n, timeout_ms);
}

/* ---- presenter ------------------------------------------------------------------- */

static void add_event(room_state *s, int kind, int64_t arg, const char *name, const char *value)
{
    if (s->nevents >= ROOM_MAX_EVENTS)
        return;
    room_event *e = &s->events[s->nevents++];
    e->kind = (uint8_t)kind;
    e->arg = arg;
    snprintf(e->name, sizeof e->name, "%s", name ? name : "");
    snprintf(e->value, sizeof e->value, "%s", value ? value : "");
}

static void present(app *a, app_room *m)
{
    if (!m->notice_shown) {
        m->notice_shown = 1;
        if (room_pres_notice(m->pres)[0])
            app_status(a, UI_R_WARN, "%s", room_pres_notice(m->pres));
    }
    if (room_pres_poll(m->pres, a->now))
        a->dirty |= UI_PANE_BIT(UI_PANE_HEADER);
    room_state *s = m->st;
    lsn_runner *r = a->lsn;
    s->nevents = 0;
    s->lesson = lsn_current(r);
    snprintf(s->lesson_title, sizeof s->lesson_title, "%s", lsn_title(r));
    s->step = lsn_step(r);
    s->page = lsn_page_number(r);
    s->run_state = (uint8_t)lsn_get_state(r);
    s->view_focus = a->view_focus;
    s->paused = (uint8_t)(a->paused != 0);
    s->speed = a->speed;
    kv_engine *e = lsn_engine(r);
    s->engine_seed = e ? kv_engine_get_config(e)->seed : 0;
    /* A new run of the engine, however it came: a restart inside one step
     * (ticks may end higher than before), a flag change, a reset, b, or
     * another lesson. Followers replay at once on a new server_gen. */
    int64_t ticks = lsn_engine_ticks(r);
    int starts = lsn_engine_starts(r);
    if (ticks < m->prev_ticks || s->lesson != m->prev_lesson || starts != m->prev_starts || e != m->prev_engine)
        m->server_gen++;
    m->prev_ticks = ticks;
    m->prev_starts = starts;
    m->prev_engine = e;
    s->engine_step = (uint64_t)ticks;
    s->server_gen = m->server_gen;
    s->step_starts = (uint32_t)lsn_step_starts(r);
    int n = 0;
    const lsn_input *in = lsn_inputs(r, &n);
    if (n > ROOM_MAX_INPUTS)
        n = ROOM_MAX_INPUTS; /* a replay past them would stop where they end */
    s->ninputs = n;
    for (int i = 0; i < n; i++) {
        room_input *d = &s->inputs[i];
        d->wait = in[i].wait;
        d->kind = (uint8_t)in[i].kind;
        snprintf(d->name, sizeof d->name, "%s", in[i].name ? in[i].name : "");
        snprintf(d->value, sizeof d->value, "%s", in[i].value ? in[i].value : "");
    }
    /* What the presenter's screen shows beyond the lesson: followers show
     * it as the presenter's. */
    room_screen *c = &s->scr;
    int64_t rw_run = -1, rw_step = 0;
    const kv_history *h = lsn_history(r);
    if (h && app_rewind_where(a, &rw_run, &rw_step) && rw_run >= 0) {
        c->rewind_back = (int32_t)(kv_history_runs(h) - 1 - rw_run);
        c->rewind_step = rw_step;
    } else {
        c->rewind_back = -1;
        c->rewind_step = 0;
    }
    c->input_active = (uint8_t)(a->input_active != 0);
    snprintf(c->typed, sizeof c->typed, "%.*s", a->input_len, a->input);
    c->verdict_kind = (int8_t)(a->verdict[0] ? a->verdict_kind : -1);
    snprintf(c->verdict, sizeof c->verdict, "%s", a->verdict);
    c->nhints = a->nhints < ROOM_MAX_HINTS ? a->nhints : ROOM_MAX_HINTS;
    for (int i = 0; i < c->nhints; i++)
        snprintf(c->hints[i], sizeof c->hints[i], "%s", a->hints[i]);
    c->flag_editing = (uint8_t)(a->key_focus == UI_PANE_FLAGS ? (a->flag_editing ? 2 : 1) : 0);
    c->flag_sel = c->flag_editing ? a->vst.flag_sel : 0;
    snprintf(c->flag_typed, sizeof c->flag_typed, "%.*s", c->flag_editing == 2 ? a->flag_len : 0, a->flag_buf);
    int nf = lsn_flag_count(r);
    if (nf > ROOM_MAX_FLAGS)
        nf = ROOM_MAX_FLAGS;
    s->nflags = nf;
    for (int i = 0; i < nf; i++) {
        const lsn_flag *f = lsn_flag_at(r, i);
        snprintf(s->flags[i].name, sizeof s->flags[i].name, "%s", f ? f->name : "?");
        snprintf(s->flags[i].value, sizeof s->flags[i].value, "%s", f && f->value ? f->value : "");
    }
    /* What happened since the last turn, for the followers' status line. */
    if (s->lesson != m->prev_lesson && m->prev_lesson >= 0) {
        add_event(s, ROOM_EV_LOAD, s->lesson, NULL, NULL);
    } else if (m->prev_lesson >= 0) {
        if (s->step > m->prev_step)
            add_event(s, ROOM_EV_NEXT, s->step, NULL, NULL);
        else if (s->step < m->prev_step)
            add_event(s, s->step == 0 && n == 0 ? ROOM_EV_RESET : ROOM_EV_BACK, s->step, NULL, NULL);
        for (int i = m->prev_ninputs; i < n; i++) {
            const room_input *d = &s->inputs[i];
            add_event(s, d->kind == ROOM_IN_FLAG ? ROOM_EV_FLAG : d->kind == ROOM_IN_REVEAL ? ROOM_EV_REVEAL
                                                                                              : ROOM_EV_ANSWER,
                      d->wait, d->name, d->value);
        }
        if (s->view_focus != m->prev_focus)
            add_event(s, ROOM_EV_FOCUS, s->view_focus, NULL, NULL);
        if (s->paused != m->prev_paused)
            add_event(s, ROOM_EV_PAUSE, s->paused, NULL, NULL);
        if (s->speed != m->prev_speed)
            add_event(s, ROOM_EV_SPEED, (int64_t)(s->speed * 1000), NULL, NULL);
    }
    m->prev_lesson = s->lesson;
    m->prev_step = s->step;
    m->prev_ninputs = n;
    m->prev_focus = s->view_focus;
    m->prev_paused = s->paused;
    m->prev_speed = s->speed;
    uint64_t seq0 = room_pres_seq(m->pres);
    room_pres_publish(m->pres, s);
    if (room_pres_wants_image(m->pres)) {
        /* Followers that just joined: the engine as it is at this state's
         * tick, then the state. Without an engine (or one whose traffic is
         * a lesson function) they replay. */
        char err[256];
        int ok = e && lsn_engine_image(r, &m->img, err, sizeof err) == 0;
        room_pres_send_image(m->pres, ok ? m->img.data : NULL, ok ? m->img.len : 0);
        kv_snapshot_free(&m->img);
    }
    if (m->trace) {
        uint64_t seq = room_pres_seq(m->pres);
        if (m->key_seen && seq != seq0) {
            fprintf(m->trace, "key %llu %.6f\n", (unsigned long long)seq, m->key_t);
            m->key_seen = 0;
        }
        if (a->now - m->stats_t >= 1.0) {
            room_pres_stats ps;
            room_pres_get_stats(m->pres, &ps);
            fprintf(m->trace, "stats %.6f %llu %llu %llu %llu %d %lld\n", a->now, (unsigned long long)ps.bytes_sent,
                    (unsigned long long)ps.states_sent, (unsigned long long)ps.deltas_sent,
                    (unsigned long long)ps.skipped, room_pres_followers(m->pres), (long long)ticks);
            m->stats_t = a->now;
        }
    }
    int nfol = room_pres_followers(m->pres);
    if (nfol != m->prev_followers) {
        m->prev_followers = nfol;
        a->dirty |= UI_PANE_BIT(UI_PANE_HEADER);
    }
}

/* ---- follower ---------------------------------------------------------------------- */

static int inputs_prefix(const lsn_input *mine, int n, const room_state *t)
{
    if (n > t->ninputs)
        return 0;
    for (int i = 0; i < n; i++) {
        const room_input *x = &t->inputs[i];
        if (mine[i].wait != x->wait || (int)mine[i].kind != x->kind ||
            strcmp(mine[i].name ? mine[i].name : "", x->name) || strcmp(mine[i].value ? mine[i].value : "", x->value))
            return 0;
    }
    return 1;
}

/* Apply one of the presenter's inputs as the presenter made it. Returns 1
 * when the runner took it. */
static int apply_input(app *a, const room_input *in)
{
    lsn_runner *r = a->lsn;
    unsigned ch = 0;
    int before = 0;
    lsn_inputs(r, &before);
    if (in->kind == ROOM_IN_FLAG) {
        char err[256];
        ch = lsn_set_flag(r, in->name, in->value, err, sizeof err);
    } else if (in->kind == ROOM_IN_REVEAL) {
        if (lsn_get_state(r) != LSN_WAIT_ANSWER)
            return 0;
        lsn_reveal(r);
        ch = LSN_CH_TEXT | LSN_CH_QUESTION | LSN_CH_STATE | LSN_CH_VIEWS;
    } else {
        if (lsn_get_state(r) != LSN_WAIT_ANSWER)
            return 0;
        lsn_verdict v;
        ch = lsn_answer(r, in->value, &v);
    }
    app_lesson_changed(a, ch);
    int after = 0;
    lsn_inputs(r, &after);
    return after == before + 1;
}

/* Bring the lesson to the presenter's state the cheap way (the presenter's
 * own moves, in order). Returns 0 when it got there, -1 when only a replay
 * can. */
static int follow_steps(app *a, const room_state *t)
{
    lsn_runner *r = a->lsn;
    if (lsn_current(r) != t->lesson || lsn_get_state(r) == LSN_ERROR)
        return -1;
    for (int guard = 0; guard < 64; guard++) {
        int n = 0;
        const lsn_input *mine = lsn_inputs(r, &n);
        if (!inputs_prefix(mine, n, t) || lsn_step(r) > t->step)
            return -1;
        if (n < t->ninputs && t->inputs[n].wait == lsn_step(r)) {
            if (!apply_input(a, &t->inputs[n]))
                return -1;
            continue;
        }
        if (lsn_step(r) == t->step)
            return n == t->ninputs ? 0 : -1;
        /* The presenter is further on: n (a pause), or the end of an
         * animation then n, or a goal already met. */
        lsn_state s = lsn_get_state(r);
        int step0 = lsn_step(r);
        if (s == LSN_WAIT_NEXT || s == LSN_RUNNING) {
            app_lesson_changed(a, lsn_next(r));
        } else if (s == LSN_WAIT_GOAL || s == LSN_WAIT_COND) {
            app_lesson_changed(a, lsn_tick_steps(r, 0));
        } else {
            return -1;
        }
        if (lsn_step(r) == step0 && lsn_get_state(r) == s)
            return -1; /* no move possible */
    }
    return -1;
}

static void replay(app *a, app_room *m, const room_state *t)
{
    int n = t->ninputs < ROOM_MAX_INPUTS ? t->ninputs : ROOM_MAX_INPUTS;
    for (int i = 0; i < n; i++) {
        m->conv[i].wait = t->inputs[i].wait;
        m->conv[i].kind = (lsn_input_kind)t->inputs[i].kind;
        m->conv[i].name = t->inputs[i].kind == ROOM_IN_FLAG ? (char *)t->inputs[i].name : NULL;
        m->conv[i].value = t->inputs[i].kind == ROOM_IN_REVEAL ? NULL : (char *)t->inputs[i].value;
    }
    app_replay_lesson(a, t->lesson, t->step, m->conv, n, (int)t->step_starts);
}

/* Load the presenter's engine image when it belongs to the run t names and
 * is ahead of this engine; it is used once either way. */
static void take_image(app *a, app_room *m, const room_state *t)
{
    size_t len = 0;
    uint64_t run = 0, step = 0;
    uint32_t gen = 0;
    const uint8_t *img = room_follow_image(m->fol, &len, &run, &gen, &step);
    if (!img)
        return;
    lsn_runner *r = a->lsn;
    if (run == t->run_id && gen == t->server_gen && step <= t->engine_step &&
        (int64_t)step > lsn_engine_ticks(r)) {
        unsigned ch = 0;
        char err[256];
        int rc = lsn_engine_load_image(r, img, len, &ch, err, sizeof err);
        if (rc == 0) {
            app_lesson_changed(a, ch | LSN_CH_ENGINE);
        } else if (rc < 0) {
            app_status(a, UI_R_WARN, "The presenter's engine image was refused (%s): replaying instead", err);
            replay(a, m, t);
        }
    }
    room_follow_drop_image(m->fol);
}

static void sync_to(app *a, app_room *m, const room_state *t)
{
    lsn_runner *r = a->lsn;
    if (t->lesson <= 0 || !lsn_info_of(r, t->lesson))
        return; /* nothing to show yet (or a lesson this kvlab does not have) */
    /* the page says whose answers these are ("root predicted 20") */
    lsn_set_voice(r, m->presenter[0] ? m->presenter : "the presenter");
    /* A room syncs runs: another presenter process (run_id), another run
     * of its engine (server_gen: a restart inside a step, a reset, b) or a
     * follower engine past the presenter's tick is rebuilt at once, never
     * stepped on from a run that is over. */
    int new_run = !m->applied_any || t->run_id != m->applied_run || t->server_gen != m->applied_gen;
    if (new_run)
        m->ahead_seen = 0;
    if (m->force_replay || (new_run && m->applied_any) || follow_steps(a, t) < 0 ||
        (lsn_engine_ticks(r) > (int64_t)t->engine_step && !m->ahead_seen))
        replay(a, m, t);
    m->force_replay = 0;
    /* A replay that still ends ahead (it cannot stop sooner) is not
     * repeated for every message of the same run. */
    m->ahead_seen = lsn_engine_ticks(r) > (int64_t)t->engine_step;
    m->applied_run = t->run_id;
    m->applied_gen = t->server_gen;
    m->applied_any = 1;
    /* A joiner's start: the presenter's engine image of this run, taken at
     * or before its tick, instead of running every step to it. */
    take_image(a, m, t);
    /* The engine: run on to the presenter's tick. */
    int64_t mine = lsn_engine_ticks(r);
    if ((int64_t)t->engine_step > mine) {
        int64_t k = (int64_t)t->engine_step - mine;
        if (k > MAX_CATCHUP_TICKS)
            k = MAX_CATCHUP_TICKS;
        app_lesson_changed(a, lsn_tick_steps(r, k));
    }
    if (t->view_focus != a->view_focus) {
        a->view_focus = t->view_focus;
        app_relayout(a, 0);
        a->dirty = ~0u;
    }
    if ((t->paused != 0) != (a->paused != 0) || t->speed != a->speed) {
        a->paused = t->paused;
        a->speed = t->speed;
        a->dirty |= UI_PANE_BIT(UI_PANE_HEADER);
    }
}

/* Show what the presenter's screen shows beyond the lesson: the step it
 * rewound to, its answer box and verdict, the hints it was given, its flags
 * view and the value being typed there. */
static void apply_screen(app *a, app_room *m, const room_state *t)
{
    const room_screen *c = &t->scr;
    const char *who = m->presenter[0] ? m->presenter : "the presenter";
    if (c->rewind_back < 0) {
        if (app_rewind_active(a))
            app_rewind_live(a);
        m->rewind_missing = 0;
    } else {
        /* (run, step) named from the newest run: this follower's history
         * holds the presenter's latest runs under other numbers */
        const kv_history *h = lsn_history(a->lsn);
        int64_t run = h ? kv_history_runs(h) - 1 - c->rewind_back : -1, at_run = -1, at_step = -1;
        int here = app_rewind_where(a, &at_run, &at_step) && at_run == run && at_step == c->rewind_step;
        if (!here && (run < 0 || app_rewind_goto(a, run, c->rewind_step) < 0)) {
            if (!m->rewind_missing)
                app_status(a, UI_R_WARN, "%s shows engine step %lld of a run this screen does not keep", who,
                           (long long)c->rewind_step);
            m->rewind_missing = 1;
        } else if (!here) {
            m->rewind_missing = 0;
        }
    }
    unsigned text = UI_PANE_BIT(UI_PANE_TEXT) | UI_PANE_BIT(UI_PANE_FOOTER);
    a->input_active = c->input_active;
    snprintf(a->input, sizeof a->input, "%.*s", (int)sizeof a->input - 1, c->typed);
    a->input_len = (int)strlen(a->input);
    a->verdict_kind = c->verdict_kind;
    snprintf(a->verdict, sizeof a->verdict, "%s", c->verdict_kind >= 0 ? c->verdict : "");
    a->nhints = c->nhints < APP_MAX_HINTS ? c->nhints : APP_MAX_HINTS;
    for (int i = 0; i < a->nhints; i++)
        snprintf(a->hints[i], sizeof a->hints[i], "%s", c->hints[i]);
    int focus = c->flag_editing ? UI_PANE_FLAGS : -1;
    if (c->flag_editing) {
        a->vst.flag_sel = c->flag_sel < lsn_flag_count(a->lsn) ? c->flag_sel : 0;
        a->flag_editing = c->flag_editing == 2;
        a->flag_selall = 0;
        snprintf(a->flag_buf, sizeof a->flag_buf, "%.*s", (int)sizeof a->flag_buf - 1, c->flag_typed);
        a->flag_len = (int)strlen(a->flag_buf);
    } else {
        a->flag_editing = 0;
    }
    if (a->key_focus != focus) {
        a->key_focus = focus;
        app_relayout(a, 0);
        a->dirty = ~0u;
    }
    a->dirty |= text | UI_PANE_BIT(UI_PANE_FLAGS) | UI_PANE_BIT(UI_PANE_HEADER);
}

static void event_status(app *a, app_room *m, const room_state *t)
{
    const char *who = m->presenter[0] ? m->presenter : "the presenter";
    for (int i = 0; i < t->nevents; i++) {
        const room_event *e = &t->events[i];
        switch (e->kind) {
        case ROOM_EV_ANSWER: app_status(a, UI_R_NORMAL, "%s answered: %s", who, e->value); break;
        case ROOM_EV_REVEAL: app_status(a, UI_R_NORMAL, "%s revealed the answer", who); break;
        case ROOM_EV_FLAG:
            if (e->value[0]) app_status(a, UI_R_NORMAL, "%s set --%s %s", who, e->name, e->value);
            else app_status(a, UI_R_NORMAL, "%s put --%s back to its default", who, e->name);
            break;
        case ROOM_EV_LOAD: app_status(a, UI_R_NORMAL, "%s opened lesson %lld", who, (long long)e->arg); break;
        case ROOM_EV_BACK: app_status(a, UI_R_NORMAL, "%s went back a step", who); break;
        case ROOM_EV_RESET: app_status(a, UI_R_NORMAL, "%s started the lesson again", who); break;
        default: break;
        }
    }
}

static void follow(app *a, app_room *m)
{
    unsigned ch = room_follow_poll(m->fol, a->now);
    /* Who presents: the socket's owner (SO_PEERCRED), not a claimed name. */
    const char *who = room_follow_presenter(m->fol);
    if (who[0])
        snprintf(m->presenter, sizeof m->presenter, "%s", who);
    if (ch & ROOM_FC_STATUS) {
        room_follow_status s = room_follow_get_status(m->fol);
        const char *msg = room_follow_message(m->fol);
        if (s == ROOM_FS_FOLLOWING)
            app_status(a, UI_R_OK, "Following %s in room '%s'%s", m->presenter[0] ? m->presenter : "the presenter",
                       m->name, m->exploring ? "" : ": x explores on your own");
        else if (msg[0])
            app_status(a, s == ROOM_FS_REFUSED ? UI_R_ERROR : UI_R_WARN, "%s", msg);
        a->dirty = ~0u;
    }
    const room_state *t = room_follow_state(m->fol);
    if (!t || m->exploring)
        return;
    if ((ch & ROOM_FC_STATE) || m->force_replay) {
        sync_to(a, m, t);
        if (lsn_current(a->lsn) == t->lesson)
            apply_screen(a, m, t);
        m->applied_seq = t->seq;
        m->draw_pending = 1;
        event_status(a, m, t);
        room_follow_clear_events(m->fol);
    }
}

void app_room_tick(app *a)
{
    app_room *m = R(a);
    if (!m)
        return;
    if (m->pres)
        present(a, m);
    else if (m->fol)
        follow(a, m);
}

/* ---- keys and chrome -------------------------------------------------------------- */

static int follower_may(int ch)
{
    switch (ch) {
    case 'q': case 'Q': case '?': case KEY_UP: case KEY_DOWN: case 'j': case 'k': case KEY_PPAGE:
    case KEY_NPAGE: case KEY_RESIZE: case KEY_MOUSE: case 't': case 27:
        return 1;
    default:
        return 0;
    }
}

int app_room_key(app *a, int ch)
{
    app_room *m = R(a);
    if (m && m->pres && m->trace && ch != KEY_RESIZE && ch != KEY_MOUSE) {
        m->key_t = a->now;
        m->key_seen = 1;
    }
    if (!m || !m->fol)
        return 0;
    if (a->overlay != APP_OV_NONE)
        return 0; /* help and the quit question work as usual */
    /* (while following, the answer box and the flags view are the
     * presenter's: what shows there is not this learner's typing) */
    int typing = m->exploring && (a->flag_editing || (a->input_active && a->input_len > 0));
    if ((ch == 'x' || ch == 'X') && !typing) {
        char err[256];
        if (!m->exploring && !lsn_current(a->lsn)) {
            /* No lesson yet (no presenter, or one on the lesson list): breaking
             * away would leave an empty screen with the presenter's keys off. */
            app_status(a, UI_R_WARN, "Nothing to explore until the presenter opens a lesson");
            m->x_idle = 1; /* the text view says it too: a narrow header drops the status */
        } else if (!m->exploring) {
            m->exploring = 1;
            /* the presenter's screen is not this learner's: its own from here */
            app_rewind_live(a);
            a->key_focus = -1;
            a->flag_editing = 0;
            a->input_len = 0;
            a->input[0] = 0;
            a->verdict[0] = 0;
            a->verdict_kind = -1;
            a->nhints = 0;
            app_relayout(a, 0);
            lsn_set_voice(a->lsn, NULL); /* the learner's own answers from here */
            a->paused = 0;
            a->speed = 1.0;
            lsn_set_speed(a->lsn, a->speed);
            if (m->state_dir[0] && lsn_save_to(a->lsn, m->state_dir, err, sizeof err) < 0)
                app_status(a, UI_R_WARN, "On your own (progress not kept: %s); x rejoins", err);
            else
                app_status(a, UI_R_OK, "On your own from here: your flags and engine; x rejoins %s",
                           m->presenter[0] ? m->presenter : "the presenter");
        } else {
            m->exploring = 0;
            m->force_replay = 1;
            lsn_save_to(a->lsn, "", err, sizeof err);
            a->key_focus = -1;
            a->flag_editing = 0;
            a->input_active = 0;
            app_status(a, UI_R_OK, "Back with %s", m->presenter[0] ? m->presenter : "the presenter");
            follow(a, m);
        }
        a->dirty = ~0u;
        return 1;
    }
    if (m->exploring || follower_may(ch))
        return 0;
    if (a->now - m->hint_at > HINT_EVERY_S || ch == 'n') {
        m->hint_at = a->now;
        app_status(a, UI_R_NORMAL, "The presenter leads: x to explore");
    }
    return 1;
}

int app_room_drives(const app *a)
{
    const app_room *m = R(a);
    return m && m->fol && !m->exploring;
}

int app_room_presenter_left(const app *a)
{
    const app_room *m = R(a);
    return m && m->fol && !m->exploring && room_follow_get_status(m->fol) != ROOM_FS_FOLLOWING &&
           room_follow_state(m->fol) != NULL;
}

int app_room_followers(const app *a)
{
    const app_room *m = R(a);
    return m && m->pres ? room_pres_followers(m->pres) : 0;
}

int app_room_footer_mode(const app *a)
{
    const app_room *m = R(a);
    if (!m || !m->fol)
        return 0;
    return m->exploring ? 2 : 1;
}

const char *app_room_label(const app *a)
{
    app_room *m = R(a);
    if (!m)
        return "";
    if (m->pres) {
        int n = room_pres_followers(m->pres);
        snprintf(m->label, sizeof m->label, "presenting to %d", n);
    } else if (m->exploring) {
        snprintf(m->label, sizeof m->label, "on your own");
    } else if (app_room_presenter_left(a)) {
        snprintf(m->label, sizeof m->label, "presenter left");
    } else if (room_follow_get_status(m->fol) == ROOM_FS_FOLLOWING) {
        snprintf(m->label, sizeof m->label, "following");
    } else if (room_follow_get_status(m->fol) == ROOM_FS_REFUSED) {
        snprintf(m->label, sizeof m->label, "refused");
    } else {
        snprintf(m->label, sizeof m->label, "waiting for presenter");
    }
    return m->label;
}

void app_room_drawn(app *a)
{
    app_room *m = R(a);
    if (!m || !m->trace || !m->draw_pending)
        return;
    fprintf(m->trace, "drawn %llu %.6f\n", (unsigned long long)m->applied_seq, app_now());
    m->draw_pending = 0;
}

const char *app_room_idle_text(const app *a)
{
    app_room *m = R(a);
    if (!m || !m->fol)
        return NULL;
    const char *msg = room_follow_message(m->fol);
    if (room_follow_get_status(m->fol) == ROOM_FS_REFUSED)
        snprintf(m->idle, sizeof m->idle, "%s.\n\nkvlab tries again every few seconds. q quits.", msg);
    else
        snprintf(m->idle, sizeof m->idle, "%s%s\n\nThe lesson appears here as soon as the presenter of room '%s' "
                 "has one open. q quits.%s", msg[0] ? msg : "Joining", msg[0] ? "." : " ...", m->shown,
                 m->x_idle ? "\n\nNothing to explore until the presenter opens a lesson: x breaks away from "
                             "the presenter's lesson, once there is one." : "");
    return m->idle;
}
