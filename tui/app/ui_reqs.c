/* ui_reqs: see ui_reqs.h. */
#include "ui_reqs.h"

#include <stdio.h>
#include <string.h>

#include "ui_style.h"

int64_t ui_reqs_next(const kv_frame *f, int64_t sel)
{
    int n = f->nrunning + f->nwaiting;
    if (n == 0) return -1;
    if (sel < 0) return f->reqs[0].req.id;
    for (int i = 0; i < n; i++)
        if (f->reqs[i].req.id == sel) return i + 1 < n ? f->reqs[i + 1].req.id : -1;
    return f->reqs[0].req.id;
}

static const char *status_word(kv_req_status s)
{
    switch (s) {
    case KV_REQ_RUNNING:   return "run ";
    case KV_REQ_PREEMPTED: return "wait!";
    case KV_REQ_WAITING:   return "wait";
    default:               return "done";
    }
}

static int row(const ui_view_ctx *c, WINDOW *win, int y, int iw, const kv_frame_req *r, int is_victim_next)
{
    const app *a = c->a;
    const ui_glyphs *g = ui_gl();
    const kv_request_view *rv = &r->req;
    const int32_t *table = kv_frame_table(c->f, r);
    int64_t id = rv->id;
    int32_t nt = rv->num_blocks;
    char line[512];
    size_t l = 0;
    l += (size_t)snprintf(line + l, sizeof line - l, " #%-3lld %-5s %5d/%-5d tok  ", (long long)id,
                          status_word(rv->status), rv->num_computed_tokens, rv->prompt_tokens + rv->output_tokens);
    for (int i = 0; i < nt && i < 64 && l < sizeof line - 16; i++)
        l += (size_t)snprintf(line + l, sizeof line - l, "%d ", table[i]);
    if (nt > 64) snprintf(line + l, sizeof line - l, "...");
    attr_t at = ui_attr(UI_R_NORMAL);
    if (ui_view_req_highlighted(c, "requests", id)) at = ui_attr(UI_R_HILITE);
    if (id == a->sel_req) at |= A_BOLD | A_UNDERLINE;
    if (id == a->victim && a->victim_until > a->now) at = ui_attr(UI_R_FLASH_PREEMPT);
    wchar_t letter = ui_req_letter(id);
    ui_put(win, y, 2, ui_style_mode() == UI_COLOR_NONE ? letter : g->used_blk, ui_attr(ui_req_role(id)));
    ui_puts(win, y, 3, iw - 1, line, at);
    if (is_victim_next) ui_puts(win, y, 2 + iw - 1, 1, "<", ui_attr(UI_R_WARN));
    return 1;
}

static void reqs_draw(const ui_view_ctx *c, WINDOW *win)
{
    const kv_frame *f = c->f;
    int64_t sel = c->a->sel_req;
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    int iw = w - 4, ih = h - 2;
    if (!f->has_engine) {
        ui_box(win, "requests", "", 0);
        if (iw > 4 && ih > 0) ui_puts(win, 1, 2, iw, "No server is running.", ui_attr(UI_R_DIM));
        return;
    }
    int32_t nr = f->info.num_running, nw = f->info.num_waiting;
    char right[64];
    snprintf(right, sizeof right, "%d running, %d waiting", nr, nw);
    ui_box(win, "requests and block tables", right, c->focused);
    if (iw < 10 || ih < 1) return;
    int y = 1;
    const kv_frame_req *run = f->reqs, *wait = f->reqs + f->nrunning;
    /* The selected request first when its table is asked for. */
    const kv_frame_req *s = sel >= 0 ? kv_frame_find_req(f, sel) : NULL;
    if (s && y <= ih) y += row(c, win, y, iw, s, 0);
    nr = f->nrunning;
    for (int i = 0; i < nr && y <= ih; i++)
        if (run[i].req.id != sel) y += row(c, win, y, iw, &run[i], i == nr - 1 && nr > 1);
    for (int i = 0; i < f->nwaiting && y <= ih; i++)
        if (wait[i].req.id != sel) y += row(c, win, y, iw, &wait[i], 0);
    if (y == 1) ui_puts(win, 1, 2, iw, "No requests.", ui_attr(UI_R_DIM));
}

static int reqs_want_h(const ui_view_ctx *c, int w)
{
    (void)w;
    if (!c->f->has_engine) return 4;
    /* Room for the live requests, in steps so the layout does not change
     * with every admission. */
    int live = c->f->info.num_running + c->f->info.num_waiting;
    int rows = live <= 2 ? 2 : live <= 4 ? 4 : live <= 8 ? 8 : 12;
    return 2 + rows;
}

const ui_view_class ui_view_requests = {
    .pane = UI_PANE_REQUESTS, .name = "requests", .focusable = 1,
    .want_h = reqs_want_h, .draw = reqs_draw, .on_mouse = NULL,
};
