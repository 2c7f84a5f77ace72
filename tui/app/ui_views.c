/* ui_views: see ui_views.h. The table, indexed by pane; each class lives
 * in its own ui_*.c file. */
#include "ui_views.h"

#include <stddef.h>
#include <string.h>

#include "ui_chrome.h"
#include "ui_flags.h"
#include "ui_log.h"
#include "ui_mem.h"
#include "ui_metrics.h"
#include "ui_plot.h"
#include "ui_pool.h"
#include "ui_reqs.h"
#include "ui_text.h"
#include "ui_tp.h"

static const ui_view_class *const classes[UI_PANE_COUNT] = {
    [UI_PANE_HEADER] = &ui_view_header,
    [UI_PANE_FOOTER] = &ui_view_footer,
    [UI_PANE_TEXT] = &ui_view_text,
    [UI_PANE_MEMORY] = &ui_view_memory,
    [UI_PANE_POOL] = &ui_view_pool,
    [UI_PANE_REQUESTS] = &ui_view_requests,
    [UI_PANE_TP] = &ui_view_tp,
    [UI_PANE_PLOT] = &ui_view_plot,
    [UI_PANE_FLAGS] = &ui_view_flags,
    [UI_PANE_METRICS] = &ui_view_metrics,
    [UI_PANE_LOG] = &ui_view_log,
};

const ui_view_class *ui_view_class_of(ui_pane p)
{
    return p >= 0 && p < UI_PANE_COUNT ? classes[p] : NULL;
}

ui_view_ctx ui_view_ctx_of(const ui_model *m, ui_pane p)
{
    ui_view_ctx c = { .f = m->frame, .s = m->scene, .m = m, .st = m->st, .req = NULL, .pane = p,
                      .focused = m->view_focus == (int)p };
    return c;
}

int ui_model_flash(const ui_model *m, int32_t b)
{
    if (!m->flashing || !m->flash_kind || b < 0 || b >= m->nflash) return UI_FL_NONE;
    return m->flash_until[b] > m->now ? m->flash_kind[b] : UI_FL_NONE;
}

int ui_model_log_visible(const ui_model *m, int i)
{
    if (i < 0 || i >= KV_PLAN_MAX_LOG) return 0;
    return (int)((m->log_visible[i / 64] >> (i % 64)) & 1u);
}

const lsn_view *ui_view_lesson(const ui_view_ctx *c, const char *name)
{
    if (!c->s->views || !name) return NULL;
    for (int i = 0; i < LSN_NVIEWS; i++)
        if (!strcmp(lsn_view_names[i], name)) return &c->s->views[i];
    return NULL;
}

int ui_view_req_highlighted(const ui_view_ctx *c, const char *name, int64_t req_id)
{
    const lsn_view *v = ui_view_lesson(c, name);
    if (!v) return 0;
    for (int i = 0; i < v->nhighlights; i++) {
        const lsn_highlight *h = &v->highlights[i];
        if (!h->target || strncmp(h->target, "request", 7)) continue;
        for (int k = 0; k < h->nids; k++)
            if (h->ids[k] == req_id) return 1;
    }
    return 0;
}

void ui_views_want(const ui_model *a, int side_w, ui_layout_req *req)
{
    for (int p = UI_PANE_MEMORY; p < UI_PANE_COUNT; p++) {
        const ui_view_class *k = classes[p];
        ui_view_ctx c = ui_view_ctx_of(a, (ui_pane)p);
        req->want_h[p] = k && k->want_h ? k->want_h(&c, side_w) : 0;
        req->must_h[p] = k && k->must_h ? k->must_h(&c, side_w) : 0;
    }
}

void ui_views_draw(const ui_model *a, ui_pane p, WINDOW *win)
{
    const ui_view_class *k = ui_view_class_of(p);
    if (!k || !k->draw || !win) return;
    ui_view_ctx c = ui_view_ctx_of(a, p);
    k->draw(&c, win);
}

unsigned ui_views_mouse(const ui_model *a, int sy, int sx, ui_mouse m, ui_mouse_req *out)
{
    out->sel_req = -2;
    out->flags_keys = out->relayout = 0;
    if (a->lay->too_small) return 0;
    for (int p = 0; p < UI_PANE_COUNT; p++) {
        if (!(a->lay->placed & UI_PANE_BIT(p))) continue;
        ui_rect r = a->lay->r[p];
        if (sy < r.y || sy >= r.y + r.h || sx < r.x || sx >= r.x + r.w) continue;
        const ui_view_class *k = classes[p];
        if (!k || !k->on_mouse) return 0;
        ui_view_ctx c = ui_view_ctx_of(a, (ui_pane)p);
        c.req = out;
        return k->on_mouse(&c, sy - r.y, sx - r.x, m);
    }
    return 0;
}
