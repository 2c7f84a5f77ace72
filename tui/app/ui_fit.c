/* ui_fit: see ui_fit.h. */
#include "ui_fit.h"

#include <stdio.h>
#include <string.h>

#include "lsn_server.h"
#include "ui_layout.h"
#include "ui_model.h"
#include "ui_views.h"

const int ui_fit_sizes[UI_FIT_NSIZES][2] = { { UI_MIN_COLS, UI_MIN_ROWS }, { 100, 30 }, { 140, 45 }, { 200, 50 } };

/* Start-up phases in order (lessons/API.md, lab.log); a line's phase comes
 * from the runner's reading of vLLM's wording (lsn_server_log_phase). */
static const char *const phases[] = { "init", "load", "profile", "cudagraph", "kv", "check", "allocate", "ready" };
#define NPHASES UI_FIT_NPHASES
_Static_assert(sizeof phases / sizeof phases[0] == NPHASES, "one name per phase");

int ui_fit_phase_rank(const char *phase)
{
    for (int i = 0; phase && i < NPHASES; i++)
        if (!strcmp(phase, phases[i])) return i;
    return NPHASES - 1;
}

static const lsn_view *scene_view(const lsn_scene *s, const char *name)
{
    if (!s || !s->views) return NULL;
    for (int i = 0; i < LSN_NVIEWS; i++)
        if (s->views[i].name && !strcmp(s->views[i].name, name)) return &s->views[i];
    return NULL;
}

static const char *scene_option(const lsn_scene *s, const char *view, const char *key)
{
    const lsn_view *v = scene_view(s, view);
    for (int i = 0; v && i < v->noptions; i++)
        if (v->option_keys[i] && !strcmp(v->option_keys[i], key)) return v->option_values[i];
    return NULL;
}

int ui_fit_log_visible(const lsn_scene *s, const kv_plan *p, const char *view, int i)
{
    if (!p || i < 0 || i >= p->num_log) return 0;
    const char *upto = scene_option(s, view, "upto");
    int lim = upto ? ui_fit_phase_rank(upto) : NPHASES - 1;
    return ui_fit_phase_rank(lsn_server_log_phase(p->log[i])) <= lim;
}

unsigned ui_fit_shown(const lsn_scene *s, int *focus)
{
    unsigned m = 0;
    *focus = -1;
    for (int p = UI_PANE_MEMORY; p < UI_PANE_COUNT; p++) {
        const lsn_view *v = scene_view(s, ui_layout_pane_name((ui_pane)p));
        if (v && v->shown) m |= UI_PANE_BIT(p);
        if (v && v->focus) *focus = p;
    }
    return m;
}

/* Highlighted flags that are in the scene's list (a highlight of a flag the
 * lesson does not offer shows nothing). Counted here, not taken from the
 * flags view's must_h, so the rule does not trust the layout's own input. */
static int flags_highlighted(const lsn_scene *s)
{
    const lsn_view *v = scene_view(s, "flags");
    int n = 0;
    for (int i = 0; v && i < s->nflags; i++)
        for (int k = 0; k < v->nhighlights; k++)
            if (v->highlights[k].target && s->flags[i].name && !strcmp(v->highlights[k].target, s->flags[i].name)) {
                n++;
                break;
            }
    return n;
}

/* What the page points at in pane p, for the message ("highlights
 * gpu-memory-utilization", "focuses it"); "" when nothing. */
static void claim_of(const lsn_scene *s, ui_pane p, int focus, char *out, size_t len)
{
    const lsn_view *v = scene_view(s, ui_layout_pane_name(p));
    out[0] = '\0';
    if (v && v->nhighlights > 0 && v->highlights[0].target)
        snprintf(out, len, "highlights %s%s", v->highlights[0].target, v->nhighlights > 1 ? ", ..." : "");
    else if ((int)p == focus)
        snprintf(out, len, "focuses it");
}

/* "pool 14, metrics 4": the side panes placed and their rows. */
static void placed_list(const ui_layout *lay, char *out, size_t len)
{
    size_t n = 0;
    out[0] = '\0';
    for (int p = UI_PANE_MEMORY; p < UI_PANE_COUNT && n < len; p++)
        if (lay->placed & UI_PANE_BIT(p))
            n += (size_t)snprintf(out + n, len - n, "%s%s %d", n ? ", " : "", ui_layout_pane_name((ui_pane)p),
                                  lay->r[p].h);
}

int ui_fit_page_at(const lsn_scene *s, const kv_frame *f, int cols, int rows, char *msg, size_t msglen)
{
    static ui_view_state st;
    memset(&st, 0, sizeof st);
    st.sel_block = -1;
    ui_layout lay;
    memset(&lay, 0, sizeof lay);
    ui_model m;
    memset(&m, 0, sizeof m);
    m.frame = f;
    m.scene = s;
    m.st = &st;
    m.rows = rows;
    m.cols = cols;
    m.lay = &lay;
    m.view_focus = m.key_focus = -1;
    m.sel_req = m.victim = -1;
    m.speed = 1;
    m.verdict_kind = -1;
    m.status = m.notice = "";
    /* the start-up replay finished: every line the views' options reveal */
    const kv_plan *p = f->has_plan ? &f->plan : NULL;
    for (int i = 0; p && i < p->num_log && i < KV_PLAN_MAX_LOG; i++)
        if (ui_fit_log_visible(s, p, "log", i)) {
            m.log_visible[i / 64] |= (uint64_t)1 << (i % 64);
            m.log_target++;
        }
    m.startup_shown = m.log_target;
    const char *upto = scene_option(s, "log", "upto");
    m.engine_log_visible = (upto ? ui_fit_phase_rank(upto) : NPHASES - 1) >= ui_fit_phase_rank("allocate");
    m.mem_terms = ~0u;

    ui_layout_req req;
    memset(&req, 0, sizeof req);
    int focus;
    req.shown = ui_fit_shown(s, &focus);
    req.focus = focus;
    m.shown_panes = req.shown;
    /* the width a side pane gets, as app_relayout computes it */
    int side_w = cols - cols / 2;
    if (side_w < 30) side_w = 30;
    ui_views_want(&m, side_w, &req);
    ui_layout_compute(rows, cols, &req, &lay);
    if (lay.too_small) {
        snprintf(msg, msglen, "at %dx%d the app shows only 'enlarge the terminal'", cols, rows);
        return -1;
    }
    for (int pi = UI_PANE_MEMORY; pi < UI_PANE_COUNT; pi++) {
        ui_pane pn = (ui_pane)pi;
        const lsn_view *v = scene_view(s, ui_layout_pane_name(pn));
        /* A view that sizes its highlight (must_h) claims rows only while the
         * highlighted thing is there to show (a request still live, a line
         * in the log, a flag the lesson offers); the others (pool, plot, tp)
         * claim the view itself. */
        const ui_view_class *k = ui_view_class_of(pn);
        int sized = k && k->must_h;
        int nflags = pn == UI_PANE_FLAGS ? flags_highlighted(s) : 0;
        int claims = pi == focus || nflags > 0 ||
                     (pn != UI_PANE_FLAGS && v && v->nhighlights > 0 && (!sized || req.must_h[pn] > 0));
        if (!claims) continue;
        char what[160];
        claim_of(s, pn, focus, what, sizeof what);
        const char *name = ui_layout_pane_name(pn);
        if (!(req.shown & UI_PANE_BIT(pn))) {
            snprintf(msg, msglen, "the page %s in the %s view, which it does not show (lab.show)", what, name);
            return -1;
        }
        if (!(lay.placed & UI_PANE_BIT(pn))) {
            char placed[160];
            placed_list(&lay, placed, sizeof placed);
            snprintf(msg, msglen, "at %dx%d the %s view (the page %s) is not on screen: no room for its %d rows "
                     "(placed: %s)", cols, rows, name, what,
                     req.must_h[pn] > ui_layout_min_h(pn) ? req.must_h[pn] : ui_layout_min_h(pn), placed);
            return -1;
        }
        int need = ui_layout_min_h(pn);
        if (req.must_h[pn] > need) need = req.must_h[pn];
        /* flags: a row per highlighted flag, the hint under them, the border */
        if (nflags + 3 > need) need = nflags + 3;
        if (lay.r[pn].h < need) {
            snprintf(msg, msglen, "at %dx%d the %s view (the page %s) has %d rows, %d needed to show it whole",
                     cols, rows, name, what, lay.r[pn].h, need);
            return -1;
        }
    }
    return 0;
}
