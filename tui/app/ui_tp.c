/* ui_tp: see ui_tp.h. */
#include "ui_tp.h"

#include <stdio.h>
#include <string.h>

#include "kv_util.h"
#include "ui_mem.h"
#include "ui_style.h"

/* Ranks that hold copies of the same heads (tp > KV heads) share a row. */
typedef struct tp_group {
    int first, last;        /* ranks */
    kv_rank_view rv;        /* the first rank's view */
} tp_group;

static int groups_of(const kv_frame *f, int tp, tp_group *out, int max)
{
    int n = 0;
    for (int r = 0; r < tp && r < f->nranks && n < max; r++) {
        tp_group g = { r, r, f->ranks[r] };
        while (g.rv.replicated && g.last + 1 < tp && g.last + 1 < f->nranks &&
               f->ranks[g.last + 1].first_kv_head == g.rv.first_kv_head)
            g.last++;
        out[n++] = g;
        r = g.last;
    }
    return n;
}

/* "GPU3" or "GPU2-3". */
static void label_of(const tp_group *g, char *out, size_t len)
{
    if (g->last > g->first) snprintf(out, len, "GPU%d-%d", g->first, g->last);
    else snprintf(out, len, "GPU%d", g->first);
}

/* The group's heads: one coloured glyph each (at most 8), then KV3 or
 * KV2-3, then xN when N ranks hold the same copy. Returns columns used. */
static int draw_heads(WINDOW *win, int y, int x, int room, const tp_group *g)
{
    const ui_glyphs *gl = ui_gl();
    int used = 0, n = g->rv.num_kv_heads;
    for (int k = 0; k < n && k < 8 && used < room; k++, used++)
        ui_put(win, y, x + used, gl->head, ui_attr(ui_req_role(g->rv.first_kv_head + k)) | A_BOLD);
    char s[48];
    if (n > 1) snprintf(s, sizeof s, " KV%d-%d", g->rv.first_kv_head, g->rv.first_kv_head + n - 1);
    else snprintf(s, sizeof s, " KV%d", g->rv.first_kv_head);
    if (used < room) used += ui_puts(win, y, x + used, room - used, s, ui_attr(UI_R_NORMAL));
    if (g->last > g->first && used < room) {
        snprintf(s, sizeof s, " x%d", g->last - g->first + 1);
        used += ui_puts(win, y, x + used, room - used, s, ui_attr(UI_R_WARN) | A_BOLD);
    }
    return used;
}

/* The rank's own KV pool: blocks in use full, free ones shaded, then the
 * share. Every rank holds its heads' share of the same blocks, so all fill
 * alike as traffic runs. */
static void draw_pool(WINDOW *win, int y, int x, int width, double usage, int revealed)
{
    const ui_glyphs *g = ui_gl();
    char pc[8];
    snprintf(pc, sizeof pc, " %3.0f%%", usage * 100.0);
    int bw = width - (int)strlen(pc);
    if (bw < 3) return;
    int full = revealed ? (int)(usage * bw + 0.5) : 0;
    if (revealed && usage > 0 && full == 0) full = 1;
    for (int i = 0; i < bw; i++)
        ui_put(win, y, x + i, i < full ? g->bar_full : g->kv_free,
               ui_attr(revealed ? UI_R_TERM5 : UI_R_UNUSED));
    if (revealed) ui_puts(win, y, x + bw, width - bw, pc, ui_attr(UI_R_NORMAL));
}

static void tp_draw(const ui_view_ctx *c, WINDOW *win)
{
    const kv_frame *f = c->f;
    const ui_model *a = c->m;
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
    tp_group gs[KV_ENGINE_MAX_RANKS];
    int ng = groups_of(f, tp, gs, KV_ENGINE_MAX_RANKS);
    int rep = ng > 0 && gs[0].rv.replicated;
    /* Rows: the groups (two rows each when there is room: the pool gets a
     * line of its own), then the legend, then the note. */
    int legend_rows = iw >= 44 ? 1 : 2;
    int lines_per = ih >= 2 * ng + legend_rows + 1 ? 2 : 1;
    int shown = tp;
    int target = a->log_target;
    if (p && target > 0 && a->startup_shown < target) {
        /* The heads deal out rank by rank while the server starts. */
        shown = (a->startup_shown * tp + target - 1) / target;
        if (shown < 1) shown = 1;
    }
    int labw = 0;
    for (int i = 0; i < ng; i++) {
        char lab[32];
        label_of(&gs[i], lab, sizeof lab);
        if ((int)strlen(lab) > labw) labw = (int)strlen(lab);
    }
    int y = 1;
    double usage = f->info.kv_usage;
    for (int i = 0; i < ng && y <= ih; i++) {
        const tp_group *g = &gs[i];
        char lab[32];
        label_of(g, lab, sizeof lab);
        ui_puts(win, y, 2, labw, lab, ui_attr(UI_R_TITLE));
        int x = 2 + labw + 1, room = iw - labw - 1;
        int revealed = g->first < shown;
        if (!revealed) {
            ui_puts(win, y, x, room, "...", ui_attr(UI_R_DIM));
        } else if (lines_per == 2) {
            int used = draw_heads(win, y, x, room, g);
            char pool[48];
            snprintf(pool, sizeof pool, "  %.1f GiB pool", kv_gib((double)g->rv.pool_bytes));
            ui_puts(win, y, x + used, room - used, pool, ui_attr(UI_R_DIM));
        } else {
            int used = draw_heads(win, y, x, room < 16 ? room : 16, g);
            draw_pool(win, y, x + used + 1, room - used - 1, usage, 1);
        }
        y++;
        if (lines_per == 2 && y <= ih) {
            draw_pool(win, y, 2 + labw + 1, iw - labw - 1, usage, revealed);
            y++;
        }
    }
    /* What the marks mean, then what the picture says. */
    const ui_glyphs *gl = ui_gl();
    if (y <= ih) {
        char leg[160];
        snprintf(leg, sizeof leg, "%lc KV head  %lc in use  %lc free", (wint_t)gl->head, (wint_t)gl->bar_full,
                 (wint_t)gl->kv_free);
        ui_puts(win, y++, 2, iw, leg, ui_attr(UI_R_DIM));
        if (rep && y <= ih) ui_puts(win, y++, 2, iw, "xN: N GPUs hold copies of that head", ui_attr(UI_R_WARN));
    }
    if (y <= ih && kvh > 0) {
        const char *note = rep ? "Copies: KV per GPU no longer shrinks" : "Each rank caches its own heads' K/V";
        ui_puts(win, y, 2, iw, note, ui_attr(rep ? UI_R_WARN : UI_R_DIM));
    }
}

static int tp_want_h(const ui_view_ctx *c, int w)
{
    /* Two rows per group of ranks (ranks holding copies of the same heads
     * share one), the legend, the note and the border. */
    const kv_frame *f = c->f;
    int tp = f->has_plan ? f->plan.tensor_parallel_size : 1;
    int kvh = f->has_engine ? f->num_kv_heads : 0;
    int groups = kvh > 0 && tp > kvh ? kvh : (tp > 0 ? tp : 1);
    int legend = w - 4 >= 44 ? 1 : 2;
    return 2 * groups + legend + 1 + 2;
}

const ui_view_class ui_view_tp = {
    .pane = UI_PANE_TP, .name = "tp", .focusable = 1,
    .want_h = tp_want_h, .draw = tp_draw, .on_mouse = NULL,
};
