/* ui_reqs: see ui_reqs.h. */
#include "ui_reqs.h"

#include <stdio.h>
#include <string.h>

#include "ui_style.h"

#define MAXR 256

int64_t ui_reqs_next(const app *a)
{
    static int64_t ids[2 * MAXR];
    if (!a->eng) return -1;
    int32_t nr = kv_engine_running(a->eng, ids, MAXR);
    if (nr > MAXR) nr = MAXR;
    int32_t nw = kv_engine_waiting(a->eng, ids + nr, MAXR);
    if (nw > MAXR) nw = MAXR;
    int n = nr + nw;
    if (n == 0) return -1;
    if (a->sel_req < 0) return ids[0];
    for (int i = 0; i < n; i++)
        if (ids[i] == a->sel_req) return i + 1 < n ? ids[i + 1] : -1;
    return ids[0];
}

static int row(app *a, WINDOW *win, int y, int iw, int64_t id, int is_victim_next)
{
    kv_request_view rv;
    if (kv_engine_request(a->eng, id, &rv) != 0) return 0;
    const ui_glyphs *g = ui_gl();
    int32_t table[64];
    int32_t nt = kv_engine_block_table(a->eng, id, table, 64);
    char line[512];
    size_t l = 0;
    const char *st = rv.status == KV_REQ_RUNNING ? "run " : rv.status == KV_REQ_PREEMPTED ? "wait!" : "wait";
    l += (size_t)snprintf(line + l, sizeof line - l, " #%-3lld %-5s %5d/%-5d tok  ", (long long)id, st,
                          rv.num_computed_tokens, rv.prompt_tokens + rv.output_tokens);
    for (int i = 0; i < nt && i < 64 && l < sizeof line - 16; i++)
        l += (size_t)snprintf(line + l, sizeof line - l, "%d ", table[i]);
    if (nt > 64) snprintf(line + l, sizeof line - l, "...");
    attr_t at = ui_attr(UI_R_NORMAL);
    if (app_req_highlighted(a, "requests", id)) at = ui_attr(UI_R_HILITE);
    if (id == a->sel_req) at |= A_BOLD | A_UNDERLINE;
    if (id == a->victim && a->victim_until > a->now) at = ui_attr(UI_R_FLASH_PREEMPT);
    wchar_t letter = ui_req_letter(id);
    ui_put(win, y, 2, ui_style_mode() == UI_COLOR_NONE ? letter : g->used_blk, ui_attr(ui_req_role(id)));
    ui_puts(win, y, 3, iw - 1, line, at);
    if (is_victim_next) ui_puts(win, y, 2 + iw - 1, 1, "<", ui_attr(UI_R_WARN));
    return 1;
}

void ui_reqs_draw(app *a, WINDOW *win)
{
    static int64_t run[MAXR], wait[MAXR];
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    int iw = w - 4, ih = h - 2;
    if (!a->eng) {
        ui_box(win, "requests", "", 0);
        if (iw > 4 && ih > 0) ui_puts(win, 1, 2, iw, "No server is running.", ui_attr(UI_R_DIM));
        return;
    }
    int32_t nr = kv_engine_running(a->eng, run, MAXR);
    int32_t nw = kv_engine_waiting(a->eng, wait, MAXR);
    char right[64];
    snprintf(right, sizeof right, "%d running, %d waiting", nr, nw);
    ui_box(win, "requests and block tables", right, a->view_focus == UI_PANE_REQUESTS);
    if (iw < 10 || ih < 1) return;
    int y = 1;
    if (nr > MAXR) nr = MAXR;
    if (nw > MAXR) nw = MAXR;
    /* The selected request first when its table is asked for. */
    if (a->sel_req >= 0 && y <= ih) y += row(a, win, y, iw, a->sel_req, 0);
    for (int i = 0; i < nr && y <= ih; i++)
        if (run[i] != a->sel_req) y += row(a, win, y, iw, run[i], i == nr - 1 && nr > 1);
    for (int i = 0; i < nw && y <= ih; i++)
        if (wait[i] != a->sel_req) y += row(a, win, y, iw, wait[i], 0);
    if (y == 1) ui_puts(win, 1, 2, iw, "No requests.", ui_attr(UI_R_DIM));
}
