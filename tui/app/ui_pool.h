/* ui_pool: the block pool grid. One cell per block while the pool fits,
 * else several blocks per cell (the cell shows how full its blocks are).
 * Used blocks take their request's colour (without colour: its letter);
 * shared blocks show their reference count; cached-but-free blocks are
 * dimmed with their own glyph; the null block 0 has its own glyph. Engine
 * events make blocks flash for a moment: a prefix-cache hit, an eviction,
 * a preemption victim's blocks. */
#ifndef UI_POOL_H
#define UI_POOL_H

#include "app.h"

void ui_pool_draw(app *a, WINDOW *win);

/* The block under window cell (y, x) of the pool pane at its last draw, or -1. */
int32_t ui_pool_block_at(const app *a, int y, int x);

#endif
