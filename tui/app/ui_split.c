/* ui_split: see ui_split.h. */
#include "ui_split.h"

#include <stdio.h>
#include <string.h>

#include "kv_util.h"
#include "ui_style.h"

int ui_split_active(const ui_view_ctx *c)
{
    const lsn_split *sp = c->s ? c->s->split : NULL;
    return sp && sp->nframes > 0 && c->m->split_frame >= 0;
}

static const lsn_split_frame *frame_of(const ui_view_ctx *c)
{
    const lsn_split *sp = c->s->split;
    int k = c->m->split_frame < sp->nframes ? c->m->split_frame : sp->nframes - 1;
    return &sp->frames[k];
}

/* One pool as a grid of rows x cols cells at (y, x): used blocks first
 * (glyph used_blk, role), then cached-but-free ones, then free. */
static void pool_grid(WINDOW *win, int y, int x, int rows, int cols, int32_t cap, int32_t used, int32_t cached,
                      ui_role role)
{
    const ui_glyphs *g = ui_gl();
    int64_t cells = (int64_t)rows * cols;
    if (cells <= 0 || cap <= 0) return;
    int64_t per = (cap + cells - 1) / cells;
    if (per < 1) per = 1;
    int64_t n = (cap + per - 1) / per, nu = (used + per - 1) / per, nc = (used + cached + per - 1) / per;
    for (int64_t k = 0; k < n; k++) {
        wchar_t ch = g->free_blk;
        attr_t at = ui_attr(UI_R_FREE);
        if (k < nu) {
            ch = g->used_blk;
            at = ui_attr(role);
        } else if (k < nc) {
            ch = g->cached_blk;
            at = ui_attr(UI_R_CACHED);
        }
        ui_put(win, y + (int)(k / cols), x + (int)(k % cols), ch, at);
    }
}

static void fmt_ms(char *b, size_t n, double s)
{
    if (s <= 0) snprintf(b, n, "-");
    else if (s < 10) snprintf(b, n, "%.0f ms", s * 1e3);
    else snprintf(b, n, "%.1f s", s);
}

static void fmt_bytes(char *b, size_t n, double v)
{
    if (v >= 1073741824.0) snprintf(b, n, "%.2f GiB", v / 1073741824.0);
    else if (v >= 1048576.0) snprintf(b, n, "%.0f MiB", v / 1048576.0);
    else snprintf(b, n, "%.0f KiB", v / 1024.0);
}

/* The summary parts packed greedily into rows of width w (at most max
 * rows; a part that fits no row is left out). Returns the rows used. */
static int pack(char part[][128], int nparts, int w, char rowbuf[][560], int max)
{
    int nrow = 0;
    size_t len[4] = {0, 0, 0, 0};
    for (int r = 0; r < max && r < 4; r++) rowbuf[r][0] = '\0';
    for (int i = 0; i < nparts; i++) {
        size_t pl = strlen(part[i]);
        if (pl > (size_t)w) continue;
        int r = 0;
        while (r < nrow && len[r] + 2 + pl > (size_t)w) r++;
        if (r >= max) continue;
        if (r == nrow) nrow++;
        len[r] += (size_t)snprintf(rowbuf[r] + len[r], 560 - len[r], "%s%s", len[r] ? "  " : "", part[i]);
    }
    return nrow;
}

void ui_split_draw(const ui_view_ctx *c, WINDOW *win)
{
    const ui_glyphs *g = ui_gl();
    const lsn_split *sp = c->s->split;
    const lsn_split_frame *f = frame_of(c);
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    char t1[48], t2[48];
    snprintf(t1, sizeof t1, "%d:%d", sp->num_prefill, sp->num_decode);
    ui_box(win, "prefill / decode split", t1, c->focused);
    int inner = w - 2;
    if (inner < 20 || h < 5) return;
    /* the summary under the pools: as many rows as its parts need (up to 3) */
    char part[4][128], rowbuf[4][560], a1[48], a2[48];
    fmt_bytes(a1, sizeof a1, (double)f->kv_transfer_bytes);
    snprintf(part[0], sizeof part[0], "kv_transfer_bytes %s", a1);
    snprintf(part[1], sizeof part[1], "crossed %d/%d", f->transfers, sp->requests);
    fmt_ms(a1, sizeof a1, f->ttft_mean_s);
    fmt_ms(a2, sizeof a2, sp->one_ttft_mean_s);
    snprintf(part[2], sizeof part[2], "TTFT %s (one GPU %s)", a1, a2);
    snprintf(part[3], sizeof part[3], "done %d/%d", f->finished, sp->requests);
    int nsum = pack(part, 4, w - 4, rowbuf, h >= 8 ? 3 : 1);
    int rows = h - 3 - nsum; /* the label row, the summary, the borders */
    if (rows < 1) rows = 1;
    for (int r = 0; r < nsum; r++) ui_puts(win, h - 1 - nsum + r, 2, w - 4, rowbuf[r], ui_attr(UI_R_NORMAL));
    /* columns: prefill pool | link | decode pool */
    int lk = inner / 5 < 8 ? 8 : inner / 5;
    int pw = (inner - lk - 2) / 2;
    int px = 1, lx = px + pw + 1, dx = lx + lk + 1;
    int pct_p = sp->prefill_blocks > 0 ? (int)(100.0 * f->prefill_used / sp->prefill_blocks + 0.5) : 0;
    int pct_d = sp->decode_blocks > 0 ? (int)(100.0 * f->decode_used / sp->decode_blocks + 0.5) : 0;
    snprintf(t1, sizeof t1, "prefill %d%%", pct_p);
    snprintf(t2, sizeof t2, "decode %d%%", pct_d);
    ui_puts(win, 1, px, pw, t1, ui_attr(UI_R_TITLE));
    ui_puts(win, 1, dx, pw, t2, ui_attr(UI_R_TITLE));
    pool_grid(win, 2, px, rows, pw, sp->prefill_blocks, f->prefill_used, f->prefill_cached, UI_R_REQ0);
    pool_grid(win, 2, dx, rows, pw, sp->decode_blocks, f->decode_used, f->decode_cached, UI_R_REQ1);
    /* the link: its name and speed, a line with each transfer on it where
     * it has got to, how many are on it */
    int ly = 2 + (rows - 1) / 2;
    snprintf(t1, sizeof t1, "%s", sp->link);
    snprintf(t2, sizeof t2, "%.0f GB/s", sp->link_bytes_per_s / 1e9);
    ui_puts(win, 1, lx, lk, t1, ui_attr(UI_R_DIM));
    if (ly - 1 >= 2) ui_puts(win, ly - 1, lx, lk, t2, ui_attr(UI_R_DIM));
    for (int x = 0; x < lk; x++) ui_put(win, ly, lx + x, g->hline, ui_attr(UI_R_DIM));
    int nf = f->nflights < LSN_SPLIT_FLIGHTS ? f->nflights : LSN_SPLIT_FLIGHTS;
    for (int k = 0; k < nf; k++) {
        int x = (int)(f->flight_done[k] * (float)(lk - 1) + 0.5f);
        ui_put(win, ly, lx + x, g->arrow_right, ui_attr(UI_R_FLASH_LOAD) | A_BOLD);
    }
    if (ly + 1 < 2 + rows) {
        snprintf(t1, sizeof t1, "%d on it", f->nflights);
        ui_puts(win, ly + 1, lx, lk, t1, ui_attr(f->nflights ? UI_R_FLASH_LOAD : UI_R_DIM));
    }
}

int ui_split_want_h(const ui_view_ctx *c, int w)
{
    (void)w;
    int cap = c->m->rows / 2 > 8 ? c->m->rows / 2 : 8;
    return cap < 12 ? cap : 12;
}
