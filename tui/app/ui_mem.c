/* ui_mem: see ui_mem.h. */
#include "ui_mem.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kv_util.h"
#include "ui_style.h"

typedef struct term_def {
    const char *name;      /* legend */
    const char *target;    /* highlight target name (lessons/API.md) */
    wchar_t letter;        /* mono glyph */
    ui_role role;
} term_def;

static const term_def terms[UI_MEM_NT] = {
    [UI_MEM_T_CONTEXT]    = { "CUDA context", "cuda_context", L'C', UI_R_TERM3 },
    [UI_MEM_T_WEIGHTS]    = { "weights", "weights", L'W', UI_R_TERM0 },
    [UI_MEM_T_ACTIVATION] = { "activation", "activation", L'A', UI_R_TERM1 },
    [UI_MEM_T_CUDAGRAPH]  = { "CUDA graphs", "cudagraph", L'G', UI_R_TERM2 },
    [UI_MEM_T_NCCL]       = { "NCCL", "nccl", L'N', UI_R_TERM4 },
    [UI_MEM_T_KV]         = { "KV cache", "kv", L'K', UI_R_TERM5 },
};

static double term_bytes(const kv_plan *p, int t)
{
    switch (t) {
    case UI_MEM_T_CONTEXT:    return p->cuda_context_bytes;
    case UI_MEM_T_WEIGHTS:    return p->weights_bytes;
    case UI_MEM_T_ACTIVATION: return p->activation_bytes;
    case UI_MEM_T_CUDAGRAPH:  return p->cudagraph_bytes;
    case UI_MEM_T_NCCL:       return p->nccl_bytes;
    case UI_MEM_T_KV:         return p->available_kv_bytes;
    default:                  return 0;
    }
}

static int highlighted(const ui_view_ctx *c, int t)
{
    const lsn_view *v = ui_view_lesson(c, "memory");
    if (!v) return 0;
    for (int i = 0; i < v->nhighlights; i++) {
        const char *tg = v->highlights[i].target;
        if (tg && (!strcasecmp(tg, terms[t].target) || !strcasecmp(tg, terms[t].name) ||
                   (t == UI_MEM_T_KV && !strcasecmp(tg, "kv_cache"))))
            return 1;
    }
    return 0;
}

void ui_mem_bar(WINDOW *win, int y, int x, int width, const kv_plan *p, unsigned mask, double kv_used)
{
    const ui_glyphs *g = ui_gl();
    int mono = ui_style_mode() == UI_COLOR_NONE;
    if (width < 1) return;
    double total = p && p->gpu_total_bytes > 0 ? p->gpu_total_bytes : 0;
    if (total <= 0) {
        for (int i = 0; i < width; i++) ui_put(win, y, x + i, g->bar_unused, ui_attr(UI_R_UNUSED));
        return;
    }
    double cum = 0;
    int col = 0;
    for (int t = 0; t < UI_MEM_NT; t++) {
        double b = term_bytes(p, t);
        if (b <= 0 || !(mask & (1u << t))) continue;
        cum += b;
        int end = (int)lround(cum / total * width);
        if (end > width) end = width;
        if (end <= col && col < width) end = col + 1; /* a nonzero term shows at least one cell */
        wchar_t c = mono ? terms[t].letter : g->bar_full;
        int start = col;
        for (; col < end; col++) {
            wchar_t cc = c;
            /* The KV segment: used blocks full, free blocks shaded (lower case without colour). */
            if (t == UI_MEM_T_KV && kv_used >= 0 && col - start >= (int)lround(kv_used * (end - start)))
                cc = mono ? L'k' : g->cached_blk;
            ui_put(win, y, x + col, cc, ui_attr(terms[t].role));
        }
    }
    int budget_end = (int)lround(p->budget_bytes / total * width);
    if (budget_end > width) budget_end = width;
    /* Inside the budget but not (yet) assigned: blank; outside: the unused glyph. */
    for (; col < width; col++) {
        if (col < budget_end) ui_put(win, y, x + col, L' ', ui_attr(UI_R_NORMAL));
        else ui_put(win, y, x + col, g->bar_unused, ui_attr(UI_R_UNUSED));
    }
    if (budget_end > 0 && budget_end < width)
        ui_put(win, y, x + budget_end, g->vline, ui_attr(UI_R_KEY));
}

/* Legend entries laid out left to right, wrapping; returns rows used. */
static int legend(const ui_view_ctx *c, WINDOW *win, int y, int x, int width, int maxrows, const kv_plan *p,
                  unsigned mask, int draw)
{
    const ui_glyphs *g = ui_gl();
    int mono = ui_style_mode() == UI_COLOR_NONE;
    int row = 0, col = 0;
    for (int t = 0; t < UI_MEM_NT; t++) {
        double b = term_bytes(p, t);
        if (t == UI_MEM_T_NCCL && b <= 0) continue;
        if (t == UI_MEM_T_CUDAGRAPH && b <= 0 && !p->enforce_eager) continue;
        char s[64];
        if (!(mask & (1u << t))) snprintf(s, sizeof s, "%s ...", terms[t].name);
        else snprintf(s, sizeof s, "%s %.2f", terms[t].name, kv_gib(b));
        int len = (int)strlen(s) + 3;
        if (col > 0 && col + len > width) { row++; col = 0; }
        if (row >= maxrows) break;
        if (draw) {
            wchar_t gc = mono ? terms[t].letter : g->bar_full;
            ui_put(win, y + row, x + col, gc, ui_attr(terms[t].role));
            ui_role r = !(mask & (1u << t)) ? UI_R_DIM : (b < 0 ? UI_R_ERROR : UI_R_NORMAL);
            if (highlighted(c, t)) r = UI_R_HILITE;
            ui_puts(win, y + row, x + col + 2, width - col - 2, s, ui_attr(r));
        }
        col += len + 1;
    }
    return row + 1;
}

static int mem_want_h(const ui_view_ctx *c, int w)
{
    if (!c->f->has_plan) return 5;
    return 2 + 4 + legend(c, NULL, 0, 0, w - 4, 8, &c->f->plan, ~0u, 0);
}

static void mem_draw(const ui_view_ctx *c, WINDOW *win)
{
    const app *a = c->a;
    int h, w;
    getmaxyx(win, h, w);
    werase(win);
    const kv_plan *p = c->f->has_plan ? &c->f->plan : NULL;
    char right[64] = "";
    if (p && p->tensor_parallel_size > 1) snprintf(right, sizeof right, "per GPU, %d GPUs", p->tensor_parallel_size);
    ui_box(win, "GPU memory", right, c->focused);
    int iw = w - 4, ih = h - 2;
    if (iw < 8 || ih < 1) return;
    if (!p) {
        ui_puts(win, 1, 2, iw, "No server started yet.", ui_attr(UI_R_DIM));
        return;
    }
    unsigned mask = app_mem_terms(a);
    unsigned all = (1u << UI_MEM_NT) - 1;
    int nleg = legend(c, NULL, 0, 0, iw, 8, p, mask, 0);
    /* Rows: budget line, bar, legend, summary (2). On a short pane the bar
     * and its legend come first, then the summary, then the budget line. */
    int want_head = 1, want_sum = 2;
    int spare = ih - 1 - nleg;
    if (spare < want_sum + want_head) want_head = 0;
    if (spare < want_sum) want_sum = spare > 0 ? spare : 0;
    int y = 1;
    if (want_head) {
        char head[256];
        snprintf(head, sizeof head, "%s: %.1f GiB x %.2f = budget %.2f GiB",
                 p->gpu_name[0] ? p->gpu_name : p->gpu_id, kv_gib(p->gpu_total_bytes),
                 p->gpu_memory_utilization, kv_gib(p->budget_bytes));
        if ((int)strlen(head) > iw)
            snprintf(head, sizeof head, "%s %.1f GiB x %.2f = %.2f GiB", p->gpu_id, kv_gib(p->gpu_total_bytes),
                     p->gpu_memory_utilization, kv_gib(p->budget_bytes));
        if ((int)strlen(head) > iw)
            snprintf(head, sizeof head, "%.1f GiB x %.2f = budget %.2f GiB", kv_gib(p->gpu_total_bytes),
                     p->gpu_memory_utilization, kv_gib(p->budget_bytes));
        ui_puts(win, y++, 2, iw, head, ui_attr(UI_R_NORMAL));
    }
    ui_mem_bar(win, y++, 2, iw, p, mask, -1.0);
    if (y - 1 >= ih) return;
    int rows_left = ih - (y - 1);
    y += legend(c, win, y, 2, iw, rows_left, p, mask, 1);
    if (y - 1 >= ih || want_sum == 0) return;
    if ((mask & all) != all) {
        /* The subtraction so far: what is left of the budget for the KV cache. */
        double left = p->budget_bytes;
        for (int t = 0; t < UI_MEM_NT; t++)
            if (t != UI_MEM_T_KV && (mask & (1u << t))) left -= term_bytes(p, t);
        ui_printf(win, y, 2, iw, ui_attr(UI_R_DIM), "left of the budget so far: %.2f GiB", kv_gib(left));
    } else if (p->available_kv_bytes <= 0) {
        ui_printf(win, y, 2, iw, ui_attr(UI_R_ERROR), "No memory left for the KV cache (%.2f GiB)",
                  kv_gib(p->available_kv_bytes));
    } else if (!p->starts) {
        ui_printf(win, y, 2, iw, ui_attr(UI_R_ERROR), "KV %.2f GiB, but one %lld-token request needs %.2f",
                  kv_gib(p->available_kv_bytes), (long long)p->max_model_len, kv_gib((double)p->needed_bytes));
    } else {
        /* vLLM's own wording, so the learner recognises it in a real log. */
        char t1[32], t2[32];
        ui_printf(win, y++, 2, iw, ui_attr(UI_R_OK), "Available KV cache memory: %.2f GiB",
                  kv_gib(p->available_kv_bytes));
        if (y - 1 < ih)
            ui_printf(win, y, 2, iw, ui_attr(UI_R_NORMAL), "GPU KV cache size: %s tokens (%s blocks)",
                      kv_fmt_thousands(t1, sizeof t1, p->kv_cache_tokens), kv_fmt_thousands(t2, sizeof t2, p->num_blocks));
    }
}

const ui_view_class ui_view_memory = {
    .pane = UI_PANE_MEMORY, .name = "memory", .focusable = 1,
    .want_h = mem_want_h, .draw = mem_draw, .on_mouse = NULL,
};
