/* ui_mem: the memory view: one GPU's memory as a stacked bar, the
 * subtraction of the plan term by term (weights, activation peak, CUDA
 * graphs, CUDA context, NCCL, non-torch memory, and what is left for the KV
 * cache), filling
 * in during the start-up replay. Every term has its own colour and, without
 * colour, its own letter. */
#ifndef UI_MEM_H
#define UI_MEM_H

#include "ui_views.h"

/* The memory view (its want_h: bar, legend and summary at that width). */
extern const ui_view_class ui_view_memory;

/* Draw only the bar for plan p into win at (y, x), width cells, with the
 * terms in mask (bit UI_MEM_T_*) revealed (the tp view draws one per rank).
 * kv_used in [0, 1] splits the KV segment into blocks in use (full cells)
 * and free ones (shaded); < 0 draws it whole. */
void ui_mem_bar(WINDOW *win, int y, int x, int width, const kv_plan *p, unsigned mask, double kv_used);

/* Terms in the order the bar reveals them. */
enum { UI_MEM_T_CONTEXT = 0, UI_MEM_T_WEIGHTS, UI_MEM_T_ACTIVATION, UI_MEM_T_CUDAGRAPH,
       UI_MEM_T_NCCL, UI_MEM_T_NON_TORCH, UI_MEM_T_KV, UI_MEM_NT };

/* ui_model.mem_vs_stated: the second plan states its KV token count. */
#define UI_MEM_VS_TOKENS (1u << UI_MEM_NT)

/* The terms (bit UI_MEM_T_*) a start measured before it stopped: all of
 * them for a server that started or failed a check after sizing the pool;
 * only the context, NCCL and the weights for one that died loading them
 * (nothing it never reached is drawn). */
unsigned ui_mem_reached(const kv_plan *p);

#endif
