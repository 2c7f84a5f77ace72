/* ui_pool: see ui_pool.h. */
#include "ui_pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_util.h"
#include "ui_style.h"

static kv_block_view *g_blk;
static int32_t g_cap;
static uint8_t *g_mark;      /* per block: 1 = highlighted, 2 = selected request's table */
static int32_t g_per_cell = 1, g_cols = 1, g_rows = 0, g_nblocks = 0, g_range = 0;
/* The last snapshot: which engine, at which event and step, how many blocks. */
static const kv_engine *g_snap_eng;
static uint64_t g_snap_seq;
static int64_t g_snap_step = -1;
static int32_t g_snap_n, g_snap_total;

int32_t ui_pool_block_at(const app *a, int y, int x)
{
    (void)a;
    int gy = y - 1, gx = x - 1;
    if (gy < 0 || gx < 0 || gy >= g_rows || gx >= g_cols) return -1;
    int64_t b = ((int64_t)gy * g_cols + gx) * g_per_cell;
    return b < g_range ? (int32_t)b : -1;
}

static int ensure(int32_t n)
{
    if (n <= g_cap) return 1;
    kv_block_view *b = realloc(g_blk, (size_t)n * sizeof *b);
    if (!b) return 0;
    g_blk = b;
    uint8_t *m = realloc(g_mark, (size_t)n);
    if (!m) return 0;
    g_mark = m;
    g_cap = n;
    return 1;
}

static void mark_request(const app *a, int64_t id, uint8_t v, int32_t n)
{
    static int32_t table[65536];
    int32_t len = kv_engine_block_table(a->eng, id, table, 65536);
    for (int32_t i = 0; i < len && i < 65536; i++)
        if (table[i] >= 0 && table[i] < n) g_mark[table[i]] |= v;
}

static void mark_highlights(const app *a, int32_t n)
{
    memset(g_mark, 0, (size_t)n);
    const lsn_view *v = app_view(a, "pool");
    if (v) {
        for (int i = 0; i < v->nhighlights; i++) {
            const lsn_highlight *h = &v->highlights[i];
            if (!h->target) continue;
            if (!strcmp(h->target, "request") || !strcmp(h->target, "requests")) {
                for (int k = 0; k < h->nids; k++) mark_request(a, h->ids[k], 1, n);
            } else if (!strcmp(h->target, "blocks")) {
                for (int k = 0; k < h->nids; k++)
                    if (h->ids[k] >= 0 && h->ids[k] < n) g_mark[h->ids[k]] |= 1;
            } else if (!strcmp(h->target, "layers")) {
                for (int32_t b = 0; b < n; b++)
                    if (!g_blk[b].is_free && !g_blk[b].is_null) g_mark[b] |= 1;
            }
        }
    }
    if (a->sel_req >= 0) mark_request(a, a->sel_req, 2, n);
}

static ui_role flash_role(int f)
{
    switch (f) {
    case APP_FL_HIT:     return UI_R_FLASH_HIT;
    case APP_FL_EVICT:   return UI_R_FLASH_EVICT;
    case APP_FL_PREEMPT: return UI_R_FLASH_PREEMPT;
    case APP_FL_ALLOC:   return UI_R_FLASH_ALLOC;
    default:             return UI_R_NORMAL;
    }
}

/* Glyph and attributes of one block drawn alone. */
static void one_block(const app *a, const kv_block_view *b, wchar_t *c, attr_t *at)
{
    const ui_glyphs *g = ui_gl();
    int mono = ui_style_mode() == UI_COLOR_NONE;
    int f = app_flash(a, b->block_id);
    if (b->is_null) { *c = g->null_blk; *at = ui_attr(UI_R_NULL); return; }
    if (f == APP_FL_HIT) { *c = g->hit; *at = ui_attr(UI_R_FLASH_HIT); return; }
    if (f == APP_FL_EVICT) { *c = g->evict; *at = ui_attr(UI_R_FLASH_EVICT); return; }
    if (f == APP_FL_PREEMPT) { *c = g->preempt; *at = ui_attr(UI_R_FLASH_PREEMPT); return; }
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
        *c = mono ? ui_req_letter(b->owner) : g->used_blk;
        *at = ra;
    }
    if (f == APP_FL_ALLOC) *at |= A_BOLD;
}

void ui_pool_draw(app *a, WINDOW *win)
{
    const ui_glyphs *g = ui_gl();
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    g_rows = 0;
    if (!a->eng) {
        ui_box(win, "block pool", "", 0);
        ui_puts(win, 1, 2, w - 4, "No server is running.", ui_attr(UI_R_DIM));
        return;
    }
    kv_engine_info info;
    kv_engine_get_info(a->eng, &info);
    int32_t n = info.num_blocks;
    char right[96], t1[32];
    snprintf(right, sizeof right, "%s blocks x %d tokens", kv_fmt_thousands(t1, sizeof t1, n), info.block_size);
    ui_box(win, info.mode == KV_MODE_CONTIGUOUS ? "block pool (contiguous slabs)" : "block pool", right, a->view_focus == UI_PANE_POOL);
    int cols = w - 2, rows = h - 3;
    if (cols < 4 || rows < 1 || n <= 0 || !ensure(n)) return;
    int64_t cells = (int64_t)cols * rows;
    /* Snapshot only when the engine moved (flashes alone reuse it), and
     * while the view is zoomed into the start of the pool only that start
     * (plus room to notice it grew). */
    uint64_t seq = kv_engine_last_event_seq(a->eng);
    int32_t want = n;
    if (g_range > 0 && (int64_t)g_range * 2 < n) {
        int64_t w2 = (int64_t)g_range * 2 + cells;
        if (w2 < n) want = (int32_t)w2;
    }
    if (a->eng != g_snap_eng || seq != g_snap_seq || info.step != g_snap_step || want > g_snap_n ||
        n != g_snap_total) {
        g_snap_n = kv_engine_blocks_brief(a->eng, g_blk, want);
        g_snap_eng = a->eng;
        g_snap_seq = seq;
        g_snap_step = info.step;
        g_snap_total = n;
        if (g_snap_n < n) {
            /* The prefix must hold every used and every cached block (the
             * engine's counts say how many there are), with room to spare. */
            int32_t act = 0, used = 0, hashed = 0;
            for (int32_t i = 0; i < g_snap_n; i++) {
                if (g_blk[i].is_null) continue;
                if (!g_blk[i].is_free) used++;
                if (g_blk[i].has_hash) hashed++;
                if (!g_blk[i].is_free || g_blk[i].cached_free) act = i + 1; /* null is skipped above */
            }
            if ((int64_t)act + act / 4 + 1 >= g_snap_n || used != n - 1 - info.num_free_blocks ||
                hashed != info.num_cached_blocks)
                g_snap_n = kv_engine_blocks_brief(a->eng, g_blk, n);
        }
    }
    int32_t snap = g_snap_n;
    mark_highlights(a, snap);
    /* Zoom: the free queue hands out low block ids first, so while only the
     * start of a large pool is in use, show that part larger (the range
     * doubles as use grows); the status line says which blocks are shown. */
    int32_t active = 0;
    for (int32_t i = snap - 1; i >= 0; i--)
        if (!g_blk[i].is_null && (!g_blk[i].is_free || g_blk[i].cached_free || app_flash(a, i))) { active = i + 1; break; }
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
    g_nblocks = n;
    int64_t used_cells = (range + per - 1) / per;
    g_rows = (int)((used_cells + cols - 1) / cols);
    int32_t nused = 0, ncached = 0, nshared = 0;
    for (int32_t i = 0; i < snap; i++) {
        if (g_blk[i].is_null) continue;
        if (!g_blk[i].is_free) nused++;
        if (g_blk[i].cached_free) ncached++;
        if (g_blk[i].ref_cnt > 1) nshared++;
    }
    for (int64_t cell = 0; cell < used_cells; cell++) {
        int y = 1 + (int)(cell / cols), x = 1 + (int)(cell % cols);
        int32_t b0 = (int32_t)(cell * per), b1 = b0 + per;
        if (b1 > (int32_t)range) b1 = (int32_t)range;
        wchar_t c;
        attr_t at;
        int mark = 0;
        for (int32_t b = b0; b < b1; b++) mark |= g_mark[b];
        if (per == 1) {
            one_block(a, &g_blk[b0], &c, &at);
        } else {
            int32_t u = 0, cached = 0, fl = 0, owner_b = -1, nul = 0, maxref = 0;
            for (int32_t b = b0; b < b1; b++) {
                const kv_block_view *bv = &g_blk[b];
                if (bv->is_null) { nul = 1; continue; }
                int f = app_flash(a, b);
                if (f == APP_FL_PREEMPT || (f == APP_FL_HIT && fl != APP_FL_PREEMPT) ||
                    (f == APP_FL_EVICT && !fl))
                    fl = f;
                if (!bv->is_free) { u++; if (owner_b < 0) owner_b = b; }
                if (bv->ref_cnt > maxref) maxref = bv->ref_cnt;
                else if (bv->cached_free) cached++;
            }
            int32_t real = b1 - b0 - nul;
            if (fl) {
                c = fl == APP_FL_HIT ? g->hit : fl == APP_FL_EVICT ? g->evict : g->preempt;
                at = ui_attr(flash_role(fl));
            } else if (maxref > 1) {
                /* Shared blocks in the cell: the highest reference count. */
                c = maxref > 9 ? g->more_refs : (wchar_t)(L'0' + maxref);
                at = ui_attr(ui_req_role(g_blk[owner_b].owner)) | A_REVERSE | A_BOLD;
            } else if (u == 0) {
                c = cached ? g->cached_blk : (nul ? g->null_blk : g->free_blk);
                at = ui_attr(cached ? UI_R_CACHED : nul ? UI_R_NULL : UI_R_FREE);
            } else {
                int lvl = real > 0 ? (int)((u * 4 + real - 1) / real) : 4;
                if (lvl < 1) lvl = 1;
                if (lvl > 4) lvl = 4;
                c = g->level[lvl];
                /* Without colour a full cell shows its first request's letter. */
                if (lvl == 4 && ui_style_mode() == UI_COLOR_NONE && g_blk[owner_b].owner >= 0)
                    c = ui_req_letter(g_blk[owner_b].owner);
                at = ui_attr(ui_req_role(g_blk[owner_b].owner));
            }
        }
        if (mark & 1) at = (at & ~A_COLOR) | ui_attr(UI_R_HILITE);
        else if (mark & 2) at |= A_UNDERLINE | A_BOLD;
        ui_put(win, y, x, c, at);
    }
    /* Status line: the selected block, else the counts. */
    char st[256], a1[32], a2[32], a3[32];
    int sy = h - 2;
    if (a->sel_block >= 0 && a->sel_block < snap) {
        const kv_block_view *b = &g_blk[a->sel_block];
        int64_t owners[8];
        int32_t no = kv_engine_block_owners(a->eng, b->block_id, owners, 8);
        char ob[96] = "";
        size_t ol = 0;
        for (int i = 0; i < no && i < 8; i++)
            ol += (size_t)snprintf(ob + ol, sizeof ob - ol, "%s#%lld", i ? "," : "", (long long)owners[i]);
        snprintf(st, sizeof st, "block %d: %s ref %d%s%s%s", b->block_id,
                 b->is_null ? "null" : b->is_free ? (b->cached_free ? "free, cached" : "free") : "used",
                 b->ref_cnt, no ? " req " : "", ob, b->has_hash ? " hashed" : "");
        ui_puts(win, sy, 2, w - 4, st, ui_attr(UI_R_HILITE));
    } else {
        char pc[64] = "";
        if (range < n) snprintf(pc, sizeof pc, "blocks 0-%s shown  ", kv_fmt_thousands(t1, sizeof t1, (long long)range - 1));
        else if (per > 1) snprintf(pc, sizeof pc, "%s blocks/cell  ", kv_fmt_thousands(t1, sizeof t1, per));
        snprintf(st, sizeof st, "%sused %s  cached %s  shared %s  %.0f%%", pc,
                 kv_fmt_thousands(a1, sizeof a1, nused), kv_fmt_thousands(a2, sizeof a2, ncached),
                 kv_fmt_thousands(a3, sizeof a3, nshared), info.kv_usage * 100.0);
        ui_puts(win, sy, 2, w - 4, st, ui_attr(UI_R_DIM));
    }
}
