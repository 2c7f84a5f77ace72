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

/* Rows a highlighted request's block table takes at width iw: the first
 * row holds the summary, the rest the table (at most REQ_TABLE_ROWS). */
#define REQ_TABLE_ROWS 4

static int table_rows(const ui_view_ctx *c, int iw, const kv_frame_req *r)
{
    const int32_t *t = kv_frame_table(c->f, r);
    int rows = 1, col = 30; /* the summary's width */
    for (int i = 0; i < r->req.num_blocks; i++) {
        char b[16];
        int l = snprintf(b, sizeof b, "%d ", t[i]);
        if (col + l > iw - 1) { rows++; col = 4; }
        col += l;
        if (rows > REQ_TABLE_ROWS) return REQ_TABLE_ROWS;
    }
    return rows;
}

/* One request: its summary and block table on one row (cut at the edge),
 * or, for the request the lesson highlights or the learner selected, the
 * whole table wrapped over up to REQ_TABLE_ROWS rows. Returns rows used. */
static int row(const ui_view_ctx *c, WINDOW *win, int y, int iw, const kv_frame_req *r, int is_victim_next,
               int max_rows)
{
    const ui_model *a = c->m;
    const kv_request_view *rv = &r->req;
    const int32_t *table = kv_frame_table(c->f, r);
    int64_t id = rv->id;
    int32_t nt = rv->num_blocks;
    char line[512];
    size_t l = 0;
    l += (size_t)snprintf(line + l, sizeof line - l, " #%-3lld %-5s %5d/%-5d tok  ", (long long)id,
                          status_word(rv->status), rv->num_computed_tokens, rv->prompt_tokens + rv->output_tokens);
    if (max_rows > REQ_TABLE_ROWS) max_rows = REQ_TABLE_ROWS;
    int whole = (ui_view_req_highlighted(c, "requests", id) || id == a->sel_req) && max_rows > 1;
    int used = 1;
    if (whole) {
        /* the table on the rows below, every entry, as far as the rows go */
        attr_t ta = ui_attr(UI_R_HILITE);
        int col = (int)l, yy = y;
        for (int i = 0; i < nt; i++) {
            char b[16];
            int bl = snprintf(b, sizeof b, "%d ", table[i]);
            if (col + bl > iw - 1) {
                if (used >= max_rows) { ui_puts(win, yy, 3 + col, iw - col - 1, "...", ta); break; }
                used++; yy++; col = 4;
            }
            if (yy == y) { if (l + (size_t)bl < sizeof line) { memcpy(line + l, b, (size_t)bl + 1); l += (size_t)bl; } }
            else ui_puts(win, yy, 3 + col, iw - col - 1, b, ta);
            col += bl;
        }
    } else {
        for (int i = 0; i < nt && i < 64 && l < sizeof line - 16; i++)
            l += (size_t)snprintf(line + l, sizeof line - l, "%d ", table[i]);
        if (nt > 64) snprintf(line + l, sizeof line - l, "...");
    }
    attr_t at = ui_attr(UI_R_NORMAL);
    if (ui_view_req_highlighted(c, "requests", id)) at = ui_attr(UI_R_HILITE);
    if (id == a->sel_req) at |= A_BOLD | A_UNDERLINE;
    if (id == a->victim && a->victim_until > a->now) at = ui_attr(UI_R_FLASH_PREEMPT);
    wchar_t letter = ui_req_letter(id);
    ui_put(win, y, 2, letter, ui_letter_attr(ui_req_role(id))); /* as its blocks are drawn */
    ui_puts(win, y, 3, iw - 1, line, at);
    if (is_victim_next) ui_puts(win, y, 2 + iw - 1, 1, "<", ui_attr(UI_R_WARN));
    return used;
}

static void reqs_draw(const ui_view_ctx *c, WINDOW *win)
{
    const kv_frame *f = c->f;
    int64_t sel = c->m->sel_req;
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
    /* The selected request first when its table is asked for, then the
     * ones the lesson highlights (the page is about them), then the rest. */
    const kv_frame_req *s = sel >= 0 ? kv_frame_find_req(f, sel) : NULL;
    if (s && y <= ih) y += row(c, win, y, iw, s, 0, ih - y + 1);
    nr = f->nrunning;
    int nall = f->nrunning + f->nwaiting;
    for (int i = 0; i < nall && y <= ih; i++)
        if (f->reqs[i].req.id != sel && ui_view_req_highlighted(c, "requests", f->reqs[i].req.id))
            y += row(c, win, y, iw, &f->reqs[i], 0, ih - y + 1);
    for (int i = 0; i < nr && y <= ih; i++)
        if (run[i].req.id != sel && !ui_view_req_highlighted(c, "requests", run[i].req.id))
            y += row(c, win, y, iw, &run[i], i == nr - 1 && nr > 1, 1);
    for (int i = 0; i < f->nwaiting && y <= ih; i++)
        if (wait[i].req.id != sel && !ui_view_req_highlighted(c, "requests", wait[i].req.id))
            y += row(c, win, y, iw, &wait[i], 0, 1);
    if (y == 1) ui_puts(win, 1, 2, iw, "No requests.", ui_attr(UI_R_DIM));
}

static int reqs_must_h(const ui_view_ctx *c, int w)
{
    int rows = 0;
    for (int i = 0; i < c->f->nrunning + c->f->nwaiting; i++)
        if (ui_view_req_highlighted(c, "requests", c->f->reqs[i].req.id)) rows += table_rows(c, w - 4, &c->f->reqs[i]);
    return rows ? rows + 2 : 0;
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
    .want_h = reqs_want_h, .must_h = reqs_must_h, .draw = reqs_draw, .on_mouse = NULL,
};
