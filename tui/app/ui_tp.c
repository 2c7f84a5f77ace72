/* ui_tp: see ui_tp.h. */
#include "ui_tp.h"

#include <stdio.h>
#include <string.h>

#include "kv_util.h"
#include "ui_mem.h"
#include "ui_style.h"

static void tp_draw(const ui_view_ctx *c, WINDOW *win)
{
    const kv_frame *f = c->f;
    const app *a = c->a;
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    const kv_plan *p = f->has_plan ? &f->plan : NULL;
    int tp = f->has_engine ? f->tensor_parallel_size : p ? p->tensor_parallel_size : 1;
    int kvh = f->has_engine ? f->num_kv_heads : 0;
    char right[64];
    snprintf(right, sizeof right, "tp=%d, %d KV heads", tp, kvh);
    ui_box(win, "tensor parallel ranks", kvh ? right : "", c->focused);
    int iw = w - 4, ih = h - 2;
    if (iw < 16 || ih < 1) return;
    if (!f->has_engine) {
        ui_puts(win, 1, 2, iw, p ? "The server did not start." : "No server is running.", ui_attr(UI_R_DIM));
        return;
    }
    const kv_engine_info info = f->info;
    const ui_glyphs *g = ui_gl();
    int groups = kvh > 0 && tp > kvh ? kvh : tp;
    int lines_per = ih >= 2 * groups + 1 ? 2 : 1;
    int shown_ranks = tp;
    int target = app_log_target(a);
    if (p && target > 0 && a->startup_shown < target) {
        /* The heads deal out rank by rank while the server starts. */
        shown_ranks = (a->startup_shown * tp + target - 1) / target;
        if (shown_ranks < 1) shown_ranks = 1;
    }
    int y = 1;
    for (int r = 0; r < tp && y <= ih; r++) {
        if (r >= f->nranks) break;
        const kv_rank_view rv = f->ranks[r];
        /* Ranks holding copies of the same heads share one row. */
        int last = r;
        while (rv.replicated && last + 1 < tp) {
            if (last + 1 >= f->nranks || f->ranks[last + 1].first_kv_head != rv.first_kv_head) break;
            last++;
        }
        int x = 2;
        char lab[32];
        if (last > r) snprintf(lab, sizeof lab, "GPU%d-%d ", r, last);
        else snprintf(lab, sizeof lab, "GPU%-2d ", r);
        x += ui_puts(win, y, x, iw, lab, ui_attr(UI_R_TITLE));
        if (r < shown_ranks) {
            for (int k = 0; k < rv.num_kv_heads && x < 2 + iw - 4; k++) {
                int head = rv.first_kv_head + k;
                ui_put(win, y, x++, g->head, ui_attr(ui_req_role(head)) | A_BOLD);
                x += ui_printf(win, y, x, 3, ui_attr(UI_R_NORMAL), "%d ", head);
            }
            if (rv.replicated) x += ui_printf(win, y, x, 2 + iw - x, ui_attr(UI_R_WARN), "x%d copies ", last - r + 1);
            char kvb[48];
            snprintf(kvb, sizeof kvb, "KV %.1f GiB, %.0f%% in use", kv_gib((double)rv.pool_bytes),
                     info.kv_usage * 100.0);
            if (lines_per == 1) {
                int bw = 2 + iw - x - 1;
                if (bw > 6 && p) ui_mem_bar(win, y, x, bw, p, app_mem_terms(a), info.kv_usage);
            } else {
                ui_puts(win, y, x, 2 + iw - x, kvb, ui_attr(UI_R_DIM));
            }
        } else {
            ui_puts(win, y, x, 2 + iw - x, "...", ui_attr(UI_R_DIM));
        }
        y++;
        if (lines_per == 2 && y <= ih) {
            if (p) ui_mem_bar(win, y, 8, iw - 6, p, r < shown_ranks ? app_mem_terms(a) : 0, info.kv_usage);
            y++;
        }
        r = last;
    }
    if (y <= ih && kvh > 0) {
        const char *note = tp > kvh ? "More ranks than KV heads: heads are copied, KV per GPU stops shrinking."
                                    : "Each rank holds its own heads' K/V for every token.";
        ui_puts(win, y, 2, iw, note, ui_attr(tp > kvh ? UI_R_WARN : UI_R_DIM));
    }
}

static int tp_want_h(const ui_view_ctx *c, int w)
{
    (void)w;
    /* A row and a bar per group of ranks (ranks holding copies of the same
     * heads share one), the border and the note. */
    const kv_frame *f = c->f;
    int tp = f->has_plan ? f->plan.tensor_parallel_size : 1;
    int kvh = f->has_engine ? f->num_kv_heads : 0;
    int groups = kvh > 0 && tp > kvh ? kvh : (tp > 0 ? tp : 1);
    return 2 * groups + 3;
}

const ui_view_class ui_view_tp = {
    .pane = UI_PANE_TP, .name = "tp", .focusable = 1,
    .want_h = tp_want_h, .draw = tp_draw, .on_mouse = NULL,
};
