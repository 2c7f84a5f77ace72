/* ui_mem: see ui_mem.h. */
#include "ui_mem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_util.h"
#include "ui_style.h"
#include "ui_text.h"

typedef struct term_def {
    const char *name;      /* legend */
    const char *target;    /* highlight target name (lessons/API.md) */
    wchar_t letter;        /* its glyph, in its colour where there is colour */
    ui_role role;
} term_def;

static const term_def terms[UI_MEM_NT] = {
    [UI_MEM_T_CONTEXT]    = { "CUDA context", "cuda_context", L'C', UI_R_TERM3 },
    [UI_MEM_T_WEIGHTS]    = { "weights", "weights", L'W', UI_R_TERM0 },
    [UI_MEM_T_ACTIVATION] = { "activation", "activation", L'A', UI_R_TERM1 },
    [UI_MEM_T_CUDAGRAPH]  = { "CUDA graphs", "cudagraph", L'G', UI_R_TERM2 },
    [UI_MEM_T_NCCL]       = { "NCCL", "nccl", L'N', UI_R_TERM4 },
    [UI_MEM_T_NON_TORCH]  = { "non-torch", "non_torch", L'T', UI_R_TERM4 },
    [UI_MEM_T_KV]         = { "KV cache", "kv", L'K', UI_R_TERM5 },
};

/* Does the plan's accounting take term t off the budget (kv_plan_term.counted)?
 * vLLM 0.9.1+ measures from a snapshot taken after the CUDA context exists,
 * so the context is used but not subtracted. */
static int term_counted(const kv_plan *p, int t)
{
    static const int plan_term[UI_MEM_NT] = {
        [UI_MEM_T_CONTEXT] = KV_PLAN_TERM_CUDA_CONTEXT, [UI_MEM_T_WEIGHTS] = KV_PLAN_TERM_WEIGHTS,
        [UI_MEM_T_ACTIVATION] = KV_PLAN_TERM_ACTIVATION, [UI_MEM_T_CUDAGRAPH] = KV_PLAN_TERM_CUDAGRAPH,
        [UI_MEM_T_NCCL] = KV_PLAN_TERM_NCCL, [UI_MEM_T_NON_TORCH] = KV_PLAN_TERM_NON_TORCH,
        [UI_MEM_T_KV] = KV_PLAN_TERM_KV_CACHE,
    };
    const kv_plan_term *pt = &p->terms[plan_term[t]];
    return !pt->name[0] || pt->counted;
}

static double term_bytes(const kv_plan *p, int t)
{
    switch (t) {
    case UI_MEM_T_CONTEXT:    return p->cuda_context_bytes;
    case UI_MEM_T_WEIGHTS:    return p->weights_bytes;
    case UI_MEM_T_ACTIVATION: return p->activation_bytes;
    case UI_MEM_T_CUDAGRAPH:  return p->cudagraph_bytes;
    case UI_MEM_T_NCCL:       return p->nccl_bytes;
    case UI_MEM_T_NON_TORCH:  return p->non_torch_bytes;
    case UI_MEM_T_KV:         return p->available_kv_bytes;
    default:                  return 0;
    }
}

/* What a failed start had measured when it stopped: the terms of the phases
 * it reached (kv_plan.c meets them in this order; the CUDA context exists
 * from the first touch of the GPU, NCCL is set up before the free-memory
 * check). A server that died loading its weights has no activation peak and
 * no pool to draw. */
#define T(x) (1u << UI_MEM_T_##x)
static const struct { kv_plan_error kind; unsigned terms; } reached[] = {
    { KV_PLAN_ERR_FREE_MEMORY, T(CONTEXT) | T(NCCL) },
    { KV_PLAN_ERR_WEIGHTS_OOM, T(CONTEXT) | T(NCCL) | T(WEIGHTS) },
    { KV_PLAN_ERR_PROFILE_OOM, T(CONTEXT) | T(NCCL) | T(WEIGHTS) | T(ACTIVATION) },
};
#undef T

unsigned ui_mem_reached(const kv_plan *p)
{
    if (!p || p->starts) return ~0u;
    for (size_t i = 0; i < sizeof reached / sizeof reached[0]; i++)
        if (reached[i].kind == p->error_kind) return reached[i].terms;
    return ~0u;
}

/* A utilization as short as it stays exact: 0.9 -> "0.90", 0.925 -> "0.925". */
static void util_text(double u, char *out, size_t len)
{
    for (int d = 2; d <= 4; d++) {
        snprintf(out, len, "%.*f", d, u);
        if (fabs(strtod(out, NULL) - u) < 1e-9) return;
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
        wchar_t c = terms[t].letter; /* a block of the term's colour with its letter (ui_letter_attr) */
        int start = col;
        for (; col < end; col++) {
            wchar_t cc = c;
            /* The KV segment: used blocks full, free ones the pool bar's free glyph (lower case without colour). */
            if (t == UI_MEM_T_KV && kv_used >= 0 && col - start >= (int)lround(kv_used * (end - start)))
                cc = mono ? L'k' : g->kv_free;
            ui_put(win, y, x + col, cc, cc == c ? ui_letter_attr(terms[t].role) : ui_attr(terms[t].role));
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

/* The second plan's figure for term t (ui_model.mem_vs), or < 0 where there
 * is none to quote: no second plan, a term it does not state or never
 * reached, or one within 0.005 GiB of the frame plan's figure b. */
static double vs_bytes(const ui_model *m, int t, double b)
{
    const kv_plan *vs = m ? m->mem_vs : NULL;
    if (!vs || !(m->mem_vs_stated & (1u << t)) || !(ui_mem_reached(vs) & (1u << t))) return -1;
    double v = term_bytes(vs, t);
    return fabs(v - b) < 0.005 * KV_GIB ? -1 : v;
}

/* A second plan's figure after the frame plan's: " (log 2.89)". */
static void vs_quote(const ui_model *m, double v, int tokens, char *out, size_t len)
{
    char n[32];
    if (tokens) kv_fmt_thousands(n, sizeof n, (int64_t)v);
    else snprintf(n, sizeof n, "%.2f", kv_gib(v));
    snprintf(out, len, " (%s %s)", m->mem_vs_label ? m->mem_vs_label : "", n);
}

/* Legend entries laid out left to right, wrapping; returns rows used. */
static int legend(const ui_view_ctx *c, WINDOW *win, int y, int x, int width, int maxrows, const kv_plan *p,
                  unsigned mask, int draw)
{
    int row = 0, col = 0;
    unsigned got = ui_mem_reached(p);
    /* The terms the lesson highlights first, so a short pane still shows them. */
    int order[UI_MEM_NT], no = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int t = 0; t < UI_MEM_NT; t++)
            if (highlighted(c, t) == !pass) order[no++] = t;
    for (int oi = 0; oi < no; oi++) {
        int t = order[oi];
        double b = term_bytes(p, t);
        if (!(got & (1u << t))) continue; /* never measured: the start stopped before */
        if ((t == UI_MEM_T_NCCL || t == UI_MEM_T_NON_TORCH) && b <= 0) continue;
        if (t == UI_MEM_T_CUDAGRAPH && b <= 0 && !p->enforce_eager) continue;
        char s[96], q[48] = "";
        double v = vs_bytes(c->m, t, b);
        if (v >= 0 && (mask & (1u << t))) vs_quote(c->m, v, 0, q, sizeof q);
        if (!(mask & (1u << t))) snprintf(s, sizeof s, "%s ...", terms[t].name);
        else snprintf(s, sizeof s, "%s %.2f%s", terms[t].name, kv_gib(b), q);
        int len = (int)strlen(s) + 3;
        if (col > 0 && col + len > width) { row++; col = 0; }
        if (row >= maxrows) break;
        if (draw) {
            ui_put(win, y + row, x + col, terms[t].letter, ui_letter_attr(terms[t].role));
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
    return 2 + 4 + (c->m->mem_vs != NULL) + legend(c, NULL, 0, 0, w - 4, 8, &c->f->plan, ~0u, 0);
}

/* A highlighted term: the bar, its legend entry (first in the legend) and
 * the summary line under it (vLLM's "Available KV cache memory"). */
static int mem_must_h(const ui_view_ctx *c, int w)
{
    (void)w;
    if (!c->f->has_plan) return 0;
    for (int t = 0; t < UI_MEM_NT; t++)
        if (highlighted(c, t)) return 2 + 1 + (c->m->mem_vs != NULL) + 1 + 2;
    return 0;
}

/* Rows of wrapped text from row y on, at most n (error colour). */
typedef struct mem_rows {
    WINDOW *win;
    int y, n;
} mem_rows;

static void mem_row(void *ctx, const wchar_t *s, int n)
{
    mem_rows *r = ctx;
    if (r->n <= 0) return;
    for (int i = 0, x = 2; i < n; i++) {
        ui_put(r->win, r->y, x, s[i], ui_attr(UI_R_ERROR));
        x += ui_wcwidth(s[i]);
    }
    r->y++;
    r->n--;
}

/* vLLM's "GPU KV cache size" figure of plan p, as its start-up log prints
 * it (kv_plan.h kv_cache_tokens_logged: from 0.21 whole max_model_len
 * requests across the KV cache groups, which a sliding-window model's pool
 * holds a little fewer of than its blocks x block_size / groups). */
static int64_t shown_tokens(const kv_plan *p)
{
    return p->kv_cache_tokens_logged;
}

/* The second plan's bar above the frame plan's, each labelled, both on one
 * scale (the larger card's total: a smaller card's bar ends short).
 * Returns the row after them. */
static int vs_bars(const ui_model *a, WINDOW *win, int y, int iw, const kv_plan *p, unsigned mask)
{
    const kv_plan *vs = a->mem_vs;
    const char *l1 = a->mem_vs_label ? a->mem_vs_label : "", *l2 = a->mem_label ? a->mem_label : "";
    int lw = (int)(strlen(l1) > strlen(l2) ? strlen(l1) : strlen(l2)) + 1;
    if (iw - lw < 8) lw = 0;
    int bw = iw - lw;
    double top = fmax(p->gpu_total_bytes, vs->gpu_total_bytes);
    const kv_plan *two[2] = { vs, p };
    const char *lab[2] = { l1, l2 };
    unsigned masks[2] = { ui_mem_reached(vs), mask };
    for (int i = 0; i < 2; i++, y++) {
        int w = top > 0 ? (int)lround(bw * two[i]->gpu_total_bytes / top) : bw;
        if (lw) ui_puts(win, y, 2, lw, lab[i], ui_attr(i ? UI_R_NORMAL : UI_R_DIM));
        ui_mem_bar(win, y, 2 + lw, w > 0 ? w : 1, two[i], masks[i], -1.0);
    }
    return y;
}

static void mem_draw(const ui_view_ctx *c, WINDOW *win)
{
    const ui_model *a = c->m;
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
        const char *refused = c->s->server_error;
        if (refused && refused[0]) {
            /* refused before it touched the GPU: nothing to draw but that */
            mem_rows r = { win, 1, ih };
            ui_text_wrap("Nothing allocated: the server stopped before start-up (the start-up log says why).", iw,
                         mem_row, &r);
        } else {
            ui_puts(win, 1, 2, iw, "No server started yet.", ui_attr(UI_R_DIM));
        }
        return;
    }
    unsigned mask = a->mem_terms & ui_mem_reached(p);
    unsigned all = (1u << UI_MEM_NT) - 1;
    int nleg = legend(c, NULL, 0, 0, iw, 8, p, mask, 0);
    int nbars = 1 + (a->mem_vs != NULL);
    /* Rows: budget line, bar (two with a second plan), legend, summary (2).
     * On a short pane the bars and the legend come first, then the summary,
     * then the budget line. */
    int want_head = 1, want_sum = 2;
    int spare = ih - nbars - nleg;
    if (spare < want_sum + want_head) want_head = 0;
    if (spare < want_sum) want_sum = spare > 0 ? spare : 0;
    int y = 1;
    if (want_head) {
        /* Figures that multiply out as printed: 23.50 x 0.90 = 21.15. */
        char head[256], u[16];
        util_text(p->gpu_memory_utilization, u, sizeof u);
        snprintf(head, sizeof head, "%s: %.2f GiB x %s = budget %.2f GiB",
                 p->gpu_name[0] ? p->gpu_name : p->gpu_id, kv_gib(p->gpu_total_bytes), u, kv_gib(p->budget_bytes));
        if ((int)strlen(head) > iw)
            snprintf(head, sizeof head, "%s %.2f GiB x %s = %.2f GiB", p->gpu_id, kv_gib(p->gpu_total_bytes), u,
                     kv_gib(p->budget_bytes));
        if ((int)strlen(head) > iw)
            snprintf(head, sizeof head, "%.2f GiB x %s = budget %.2f GiB", kv_gib(p->gpu_total_bytes), u,
                     kv_gib(p->budget_bytes));
        ui_puts(win, y++, 2, iw, head, ui_attr(UI_R_NORMAL));
    }
    if (a->mem_vs) {
        y = vs_bars(a, win, y, iw, p, mask);
    } else {
        ui_mem_bar(win, y++, 2, iw, p, mask, -1.0);
    }
    if (y - 1 >= ih) return;
    int rows_left = ih - (y - 1);
    y += legend(c, win, y, 2, iw, rows_left, p, mask, 1);
    if (y - 1 >= ih || want_sum == 0) return;
    /* A start that failed before the pool, with all it reached drawn: its
     * summary, not a running subtraction. */
    unsigned reached = ui_mem_reached(p) & all;
    int stopped = !p->starts && reached != all && (mask & all) == reached;
    if ((mask & all) != all && !stopped) {
        /* The subtraction so far: what is left of the budget for the KV
         * cache, less only the terms this accounting takes off it (the page's
         * table leaves the others in parentheses). */
        double left = p->budget_bytes;
        for (int t = 0; t < UI_MEM_NT; t++)
            if (t != UI_MEM_T_KV && (mask & (1u << t)) && term_counted(p, t)) left -= term_bytes(p, t);
        ui_printf(win, y, 2, iw, ui_attr(UI_R_DIM), "left of the budget so far: %.2f GiB", kv_gib(left));
    } else if (!p->starts && p->error_kind != KV_PLAN_ERR_MAX_MODEL_LEN && p->error_kind != KV_PLAN_ERR_NO_KV_MEMORY) {
        /* Stopped before the pool was sized: say where, in a few words. */
        const char *why = p->error_kind == KV_PLAN_ERR_FREE_MEMORY ? "Stopped at start: too little free memory"
                        : p->error_kind == KV_PLAN_ERR_WEIGHTS_OOM ? "Out of memory loading the weights"
                        : p->error_kind == KV_PLAN_ERR_PROFILE_OOM ? "Out of memory in the profile run"
                        : p->error_kind == KV_PLAN_ERR_SAMPLER_OOM ? "Out of memory warming up the sampler"
                        : p->error_kind == KV_PLAN_ERR_POOL_OOM    ? "Out of memory allocating the pool"
                                                                   : "Did not start (see the log)";
        ui_puts(win, y, 2, iw, why, ui_attr(UI_R_ERROR));
    } else if (p->available_kv_bytes <= 0) {
        ui_printf(win, y, 2, iw, ui_attr(UI_R_ERROR), "No memory left for the KV cache (%.2f GiB)",
                  kv_gib(p->available_kv_bytes));
    } else if (!p->starts) {
        char t1[32];
        /* the KV figure is in the legend above; this says what it fell short of */
        ui_printf(win, y, 2, iw, ui_attr(UI_R_ERROR), "one %s-token request: %.2f GiB",
                  kv_fmt_thousands(t1, sizeof t1, p->max_model_len), kv_gib((double)p->needed_bytes));
    } else {
        /* vLLM's own wording, so the learner recognises it in a real log. */
        char t1[32], t2[32];
        /* the second plan's figure only where vLLM's words still fit whole */
        char line[160], q[48] = "";
        double v = vs_bytes(a, UI_MEM_T_KV, p->available_kv_bytes);
        snprintf(line, sizeof line, "Available KV cache memory: %.2f GiB", kv_gib(p->available_kv_bytes));
        if (v >= 0) vs_quote(a, v, 0, q, sizeof q);
        if (strlen(line) + strlen(q) <= (size_t)iw) strcat(line, q);
        ui_puts(win, y++, 2, iw, line, ui_attr(UI_R_OK));
        int64_t toks = shown_tokens(p);
        char groups[32] = "";
        if (p->num_kv_groups > 1) snprintf(groups, sizeof groups, ", %d groups", (int)p->num_kv_groups);
        if (y - 1 < ih) {
            /* vLLM's words whole; the second plan's count, then the block
             * count, only where they fit too */
            char more[64];
            snprintf(line, sizeof line, "GPU KV cache size: %s tokens", kv_fmt_thousands(t1, sizeof t1, toks));
            const kv_plan *vs = a->mem_vs;
            if (vs && (a->mem_vs_stated & UI_MEM_VS_TOKENS) && vs->starts && shown_tokens(vs) != toks) {
                vs_quote(a, (double)shown_tokens(vs), 1, more, sizeof more);
                if (strlen(line) + strlen(more) <= (size_t)iw) strcat(line, more);
            }
            snprintf(more, sizeof more, " (%s blocks%s)", kv_fmt_thousands(t2, sizeof t2, p->num_blocks), groups);
            if (strlen(line) + strlen(more) <= (size_t)iw) strcat(line, more);
            ui_puts(win, y, 2, iw, line, ui_attr(UI_R_NORMAL));
        }
    }
}

const ui_view_class ui_view_memory = {
    .pane = UI_PANE_MEMORY, .name = "memory", .focusable = 1,
    .want_h = mem_want_h, .must_h = mem_must_h, .draw = mem_draw, .on_mouse = NULL,
};
