/* ui_pool: see ui_pool.h. */
#include "ui_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_util.h"
#include "ui_split.h"
#include "ui_style.h"

/* Geometry of the last draw, for hit-testing and the next frame's prefix. */
static int32_t g_per_cell = 1, g_cols = 1, g_rows = 0, g_range = 0;
static uint8_t *g_mark;      /* per block: 1 = highlighted, 2 = selected request's table */
static int32_t g_cap;

int32_t ui_pool_blocks_wanted(const ui_rect *r)
{
    /* Zoomed into the start of a large pool: that start, plus room to
     * notice it grew (kv_frame widens it when a block past it is used). */
    int64_t cells = (int64_t)(r->w - 2) * (r->h - 3);
    if (g_range <= 0 || cells <= 0) return 0;
    int64_t w = (int64_t)g_range * 2 + cells;
    return w < INT32_MAX ? (int32_t)w : 0;
}

static int32_t block_at(int y, int x)
{
    int gy = y - 1, gx = x - 1;
    if (gy < 0 || gx < 0 || gy >= g_rows || gx >= g_cols) return -1;
    int64_t b = ((int64_t)gy * g_cols + gx) * g_per_cell;
    return b < g_range ? (int32_t)b : -1;
}

static uint8_t *g_empty;     /* per block: 1 = reserved for a request but holding no token yet */

static int ensure_marks(int32_t n)
{
    if (n <= g_cap) return 1;
    uint8_t *m = realloc(g_mark, (size_t)n);
    if (!m) return 0;
    g_mark = m;
    uint8_t *e = realloc(g_empty, (size_t)n);
    if (!e) return 0;
    g_empty = e;
    g_cap = n;
    return 1;
}

/* A request's blocks past the tokens it holds are reserved but empty: in
 * contiguous mode most of a slab (the waste lesson 12 is about). Paged mode
 * hands a block out only when a token needs it, so there none is. */
static int32_t mark_empty(const kv_frame *f, int32_t n)
{
    memset(g_empty, 0, (size_t)n);
    int32_t count = 0, bs = f->info.block_size > 0 ? f->info.block_size : 1;
    for (int32_t i = 0; i < f->nrunning; i++) {
        const kv_frame_req *r = &f->reqs[i];
        const int32_t *t = kv_frame_table(f, r);
        int32_t held = (r->req.num_computed_tokens + bs - 1) / bs;
        for (int32_t k = held; k < r->req.num_blocks; k++)
            if (t[k] >= 0 && t[k] < n && !g_empty[t[k]]) { g_empty[t[k]] = 1; count++; }
    }
    return count;
}

static void mark_request(const kv_frame *f, int64_t id, uint8_t v, int32_t n)
{
    const kv_frame_req *r = kv_frame_find_req(f, id);
    if (!r) return;
    const int32_t *t = kv_frame_table(f, r);
    for (int32_t i = 0; i < r->req.num_blocks; i++)
        if (t[i] >= 0 && t[i] < n) g_mark[t[i]] |= v;
}

static void mark_highlights(const ui_view_ctx *c, int32_t n)
{
    const kv_frame *f = c->f;
    memset(g_mark, 0, (size_t)n);
    const lsn_view *v = ui_view_lesson(c, "pool");
    if (v) {
        for (int i = 0; i < v->nhighlights; i++) {
            const lsn_highlight *h = &v->highlights[i];
            if (!h->target) continue;
            if (!strcmp(h->target, "request") || !strcmp(h->target, "requests")) {
                for (int k = 0; k < h->nids; k++) mark_request(f, h->ids[k], 1, n);
            } else if (!strcmp(h->target, "blocks")) {
                for (int k = 0; k < h->nids; k++)
                    if (h->ids[k] >= 0 && h->ids[k] < n) g_mark[h->ids[k]] |= 1;
            } else if (!strcmp(h->target, "layers")) {
                for (int32_t b = 0; b < n; b++)
                    if (!f->blocks[b].is_free && !f->blocks[b].is_null) g_mark[b] |= 1;
            }
        }
    }
    if (c->m->sel_req >= 0) mark_request(f, c->m->sel_req, 2, n);
}

static ui_role flash_role(int f)
{
    switch (f) {
    case UI_FL_HIT:     return UI_R_FLASH_HIT;
    case UI_FL_EVICT:   return UI_R_FLASH_EVICT;
    case UI_FL_PREEMPT: return UI_R_FLASH_PREEMPT;
    case UI_FL_ALLOC:   return UI_R_FLASH_ALLOC;
    default:             return UI_R_NORMAL;
    }
}

/* Glyph and attributes of one block drawn alone. */
static void one_block(const ui_model *a, const kv_block_view *b, wchar_t *c, attr_t *at)
{
    const ui_glyphs *g = ui_gl();
    int f = ui_model_flash(a, b->block_id);
    if (b->is_null) { *c = g->null_blk; *at = ui_attr(UI_R_NULL); return; }
    if (f == UI_FL_HIT) { *c = g->hit; *at = ui_attr(UI_R_FLASH_HIT); return; }
    if (f == UI_FL_EVICT) { *c = g->evict; *at = ui_attr(UI_R_FLASH_EVICT); return; }
    if (f == UI_FL_PREEMPT) { *c = g->preempt; *at = ui_attr(UI_R_FLASH_PREEMPT); return; }
    if (b->is_free) {
        *c = b->cached_free ? g->cached_blk : g->free_blk;
        *at = ui_attr(b->cached_free ? UI_R_CACHED : UI_R_FREE);
        return;
    }
    attr_t ra = ui_attr(ui_req_role(b->owner));
    if (b->ref_cnt > 1) {
        *c = b->ref_cnt > 9 ? g->more_refs : (wchar_t)(L'0' + b->ref_cnt);
        *at = ra | A_REVERSE | A_BOLD;
    } else {
        *c = ui_req_letter(b->owner); /* its request's letter, a block of its colour (ui_letter_attr) */
        *at = ui_letter_attr(ui_req_role(b->owner));
    }
    if (f == UI_FL_ALLOC) *at |= A_BOLD;
}

/* The host (CPU) tier of --kv-offloading-size as a second pool under the
 * GPU one (rows y and y + 1): a caption with its counters, then one row of
 * cells in recency order, least recently used at the left; what the last
 * step stored or loaded lands at the right end and flashes there. */
static void host_draw(const ui_view_ctx *c, WINDOW *win, int y, int w)
{
    const ui_glyphs *g = ui_gl();
    const kv_engine_metrics *m = &c->f->metrics;
    int64_t cap = m->offload_capacity_blocks, used = m->offload_used_blocks;
    /* the caption: as many of its parts as fit whole */
    char part[4][64], st[256], a1[32], a2[32];
    snprintf(part[0], sizeof part[0], "CPU tier %s/%s", kv_fmt_thousands(a1, sizeof a1, used),
             kv_fmt_thousands(a2, sizeof a2, cap));
    /* stored (down, out of HBM), loaded (up, back in), evicted: the bar's own glyphs */
    int u8 = g->utf8;
    snprintf(part[1], sizeof part[1], "%s%s", u8 ? "\u2193" : "v",
             kv_fmt_thousands(a1, sizeof a1, m->offload_stored_blocks));
    snprintf(part[2], sizeof part[2], "%s%s", u8 ? "\u2191" : "^",
             kv_fmt_thousands(a1, sizeof a1, m->offload_loaded_blocks));
    snprintf(part[3], sizeof part[3], "%s%s", u8 ? "\u00d7" : "x",
             kv_fmt_thousands(a1, sizeof a1, m->offload_evicted_blocks));
    size_t l = 0;
    st[0] = '\0';
    for (int i = 0; i < 4; i++) {
        size_t pl = strlen(part[i]);
        if (l + (l ? 1 : 0) + pl > (size_t)(w - 4)) continue;
        l += (size_t)snprintf(st + l, sizeof st - l, "%s%s", l ? " " : "", part[i]);
    }
    ui_puts(win, y, 2, w - 4, st, ui_attr(UI_R_HOST));
    int cols = w - 2;
    int64_t per = (cap + cols - 1) / cols;
    if (per < 1) per = 1;
    int64_t ncells = (cap + per - 1) / per, nused = (used + per - 1) / per;
    int fl = c->m->host_flash_until > c->m->now ? c->m->host_flash : UI_FL_NONE;
    int64_t nfl = fl ? (c->m->host_flash_blocks + per - 1) / per : 0;
    if (nfl > nused) nfl = nused;
    for (int64_t k = 0; k < ncells; k++) {
        wchar_t ch = g->free_blk;
        attr_t at = ui_attr(UI_R_FREE);
        if (k < nused) {
            ch = g->host_blk;
            at = ui_attr(UI_R_HOST);
            if (k >= nused - nfl) {
                ch = fl == UI_FL_LOAD ? g->arrow_up : g->arrow_down;
                at = ui_attr(fl == UI_FL_LOAD ? UI_R_FLASH_LOAD : UI_R_FLASH_STORE);
            }
        }
        ui_put(win, y + 1, 1 + (int)k, ch, at);
    }
}

static void pool_draw(const ui_view_ctx *c, WINDOW *win)
{
    const ui_glyphs *g = ui_gl();
    const kv_frame *f = c->f;
    const ui_model *a = c->m;
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    g_rows = 0;
    if (ui_split_active(c)) { /* lab.split{show = true}: its two pools instead */
        ui_split_draw(c, win);
        return;
    }
    if (!f->has_engine) {
        ui_box(win, "block pool", "", 0);
        ui_puts(win, 1, 2, w - 4, "No server is running.", ui_attr(UI_R_DIM));
        return;
    }
    const kv_engine_info *info = &f->info;
    int32_t n = info->num_blocks;
    char right[96], t1[32];
    snprintf(right, sizeof right, "%s blocks x %d tokens", kv_fmt_thousands(t1, sizeof t1, n), info->block_size);
    ui_box(win, info->mode == KV_MODE_CONTIGUOUS ? "block pool (contiguous slabs)" : "block pool", right, c->focused);
    int host = f->metrics.offload_capacity_blocks > 0 && h >= 7; /* the CPU tier's two rows */
    int cols = w - 2, rows = h - 3 - 2 * host;
    if (cols < 4 || rows < 1 || n <= 0 || !ensure_marks(n)) return;
    if (host) host_draw(c, win, h - 4, w);
    int64_t cells = (int64_t)cols * rows;
    const kv_block_view *blk = f->blocks;
    /* The frame holds a prefix of the pool when only its start is in use
     * (every block past it is free and unhashed). */
    int32_t snap = f->nblocks;
    mark_highlights(c, snap);
    int32_t nempty = info->mode == KV_MODE_CONTIGUOUS ? mark_empty(f, snap) : (memset(g_empty, 0, (size_t)snap), 0);
    /* Zoom: the free queue hands out low block ids first, so while only the
     * start of a large pool is in use, show that part larger (the range
     * doubles as use grows); the status line says which blocks are shown. */
    int32_t active = 0;
    for (int32_t i = snap - 1; i >= 0; i--)
        if (!blk[i].is_null && (!blk[i].is_free || blk[i].cached_free || ui_model_flash(a, i))) { active = i + 1; break; }
    /* An empty pool is shown whole: its size is the point then. */
    int64_t range = active > 0 ? cells : n;
    while (range < n && range < (int64_t)active + active / 4 + 1) range *= 2;
    if (range > n) range = n;
    if (range > snap) range = snap == n ? n : snap;
    g_range = (int32_t)range;
    int32_t per = (int32_t)((range + cells - 1) / cells);
    if (per < 1) per = 1;
    g_per_cell = per;
    g_cols = cols;
    int64_t used_cells = (range + per - 1) / per;
    g_rows = (int)((used_cells + cols - 1) / cols);
    int32_t nused = 0, ncached = 0, nshared = 0;
    for (int32_t i = 0; i < snap; i++) {
        if (blk[i].is_null) continue;
        if (!blk[i].is_free) nused++;
        if (blk[i].cached_free) ncached++;
        if (blk[i].ref_cnt > 1) nshared++;
    }
    for (int64_t cell = 0; cell < used_cells; cell++) {
        int y = 1 + (int)(cell / cols), x = 1 + (int)(cell % cols);
        int32_t b0 = (int32_t)(cell * per), b1 = b0 + per;
        if (b1 > (int32_t)range) b1 = (int32_t)range;
        wchar_t ch;
        attr_t at;
        int mark = 0;
        for (int32_t b = b0; b < b1; b++) mark |= g_mark[b];
        if (per == 1) {
            one_block(a, &blk[b0], &ch, &at);
            /* reserved for its slab, nothing in it: its own glyph (not the free one), in the owner's colour */
            if (g_empty[b0] && !ui_model_flash(a, b0)) { ch = g->empty_blk; at = ui_attr(ui_req_role(blk[b0].owner)); }
        } else {
            int32_t u = 0, cached = 0, fl = 0, owner_b = -1, nul = 0, maxref = 0, empty_in = 0;
            for (int32_t b = b0; b < b1; b++) {
                const kv_block_view *bv = &blk[b];
                if (bv->is_null) { nul = 1; continue; }
                int fk = ui_model_flash(a, b);
                if (fk == UI_FL_PREEMPT || (fk == UI_FL_HIT && fl != UI_FL_PREEMPT) ||
                    (fk == UI_FL_EVICT && !fl))
                    fl = fk;
                if (!bv->is_free) {
                    if (owner_b < 0) owner_b = b;
                    if (!g_empty[b]) u++;        /* an empty slab block fills no part of the cell */
                    else empty_in++;
                }
                if (bv->ref_cnt > maxref) maxref = bv->ref_cnt;
                else if (bv->cached_free) cached++;
            }
            int32_t real = b1 - b0 - nul;
            if (fl) {
                ch = fl == UI_FL_HIT ? g->hit : fl == UI_FL_EVICT ? g->evict : g->preempt;
                at = ui_attr(flash_role(fl));
            } else if (maxref > 1) {
                /* Shared blocks in the cell: the highest reference count. */
                ch = maxref > 9 ? g->more_refs : (wchar_t)(L'0' + maxref);
                at = ui_attr(ui_req_role(blk[owner_b].owner)) | A_REVERSE | A_BOLD;
            } else if (empty_in > 0 && empty_in >= u) {
                /* reserved, mostly empty: a zoomed slab shows what most of
                 * it is (lesson 12's waste), by glyph, not by colour or a
                 * low fill level alone */
                ch = g->empty_blk;
                at = ui_attr(ui_req_role(blk[owner_b].owner));
            } else if (u == 0) {
                ch = cached ? g->cached_blk : (nul ? g->null_blk : g->free_blk);
                at = ui_attr(cached ? UI_R_CACHED : nul ? UI_R_NULL : UI_R_FREE);
            } else {
                int lvl = real > 0 ? (int)((u * 4 + real - 1) / real) : 4;
                if (lvl < 1) lvl = 1;
                if (lvl > 4) lvl = 4;
                ch = g->level[lvl];
                at = ui_attr(ui_req_role(blk[owner_b].owner));
                /* A full cell shows its first request's letter, as a block does. */
                if (lvl == 4 && blk[owner_b].owner >= 0) {
                    ch = ui_req_letter(blk[owner_b].owner);
                    at = ui_letter_attr(ui_req_role(blk[owner_b].owner));
                }
            }
        }
        if (mark & 1) at = (at & ~A_COLOR) | ui_attr(UI_R_HILITE);
        else if (mark & 2) at |= A_UNDERLINE | A_BOLD;
        ui_put(win, y, x, ch, at);
    }
    /* Status line: the selected block, else the counts. */
    char st[256], a1[32], a2[32], a3[32];
    int sy = h - 2;
    if (a->st->sel_block >= 0 && a->st->sel_block < snap) {
        const kv_block_view *b = &blk[a->st->sel_block];
        int64_t owners[8];
        int32_t no = kv_frame_block_owners(f, b->block_id, owners, 8);
        char ob[96] = "";
        size_t ol = 0;
        for (int i = 0; i < no && i < 8; i++)
            ol += (size_t)snprintf(ob + ol, sizeof ob - ol, "%s#%lld", i ? "," : "", (long long)owners[i]);
        snprintf(st, sizeof st, "block %d: %s ref %d%s%s%s", b->block_id,
                 b->is_null ? "null" : b->is_free ? (b->cached_free ? "free, cached" : "free") : "used",
                 b->ref_cnt, no ? " req " : "", ob, b->has_hash ? " hashed" : "");
        ui_puts(win, sy, 2, w - 4, st, ui_attr(UI_R_HILITE));
    } else {
        /* The counts, most telling first, as many as fit whole. */
        char part[6][64];
        int np = 0;
        snprintf(part[np++], sizeof part[0], "used %s (%.0f%%)", kv_fmt_thousands(a1, sizeof a1, nused),
                 info->kv_usage * 100.0);
        if (nempty > 0)
            snprintf(part[np++], sizeof part[0], "%s empty", kv_fmt_thousands(a3, sizeof a3, nempty));
        if (nshared > 0) snprintf(part[np++], sizeof part[0], "shared %s", kv_fmt_thousands(a3, sizeof a3, nshared));
        if (ncached > 0) snprintf(part[np++], sizeof part[0], "cached %s", kv_fmt_thousands(a2, sizeof a2, ncached));
        if (range < n) snprintf(part[np++], sizeof part[0], "0-%s shown", kv_fmt_thousands(t1, sizeof t1, (long long)range - 1));
        else if (per > 1) snprintf(part[np++], sizeof part[0], "%s/cell", kv_fmt_thousands(t1, sizeof t1, per));
        size_t l = 0;
        st[0] = 0;
        for (int i = 0; i < np; i++) {
            size_t pl = strlen(part[i]);
            if (l + (l ? 2 : 0) + pl > (size_t)(w - 4)) continue;
            l += (size_t)snprintf(st + l, sizeof st - l, "%s%s", l ? "  " : "", part[i]);
        }
        ui_puts(win, sy, 2, w - 4, st, ui_attr(UI_R_DIM));
    }
}

static int pool_want_h(const ui_view_ctx *c, int w)
{
    /* One cell per block, up to half the screen; no server: grows. */
    if (ui_split_active(c)) return ui_split_want_h(c, w);
    if (!c->f->has_engine) return 0;
    int cols = w - 2 > 1 ? w - 2 : 1;
    int host = c->f->metrics.offload_capacity_blocks > 0 ? 2 : 0;
    int need = (c->f->info.num_blocks + cols - 1) / cols + 3 + host;
    int cap = (c->m->rows / 2 > 5 ? c->m->rows / 2 : 5) + host;
    return need < cap ? need : cap;
}

static unsigned pool_mouse(const ui_view_ctx *c, int y, int x, ui_mouse m)
{
    ui_view_state *st = c->st;
    if (m != UI_MOUSE_CLICK || !c->f->has_engine) return 0;
    int32_t b = block_at(y, x);
    st->sel_block = b == st->sel_block ? -1 : b;
    if (st->sel_block >= 0) {
        const kv_block_view *bv = kv_frame_block(c->f, st->sel_block);
        if (bv && bv->owner >= 0 && c->req) c->req->sel_req = bv->owner;
    }
    if (c->req) c->req->relayout = 1;
    return UI_PANE_BIT(UI_PANE_POOL) | UI_PANE_BIT(UI_PANE_REQUESTS);
}

const ui_view_class ui_view_pool = {
    .pane = UI_PANE_POOL, .name = "pool", .focusable = 1,
    .want_h = pool_want_h, .draw = pool_draw, .on_mouse = pool_mouse,
};
