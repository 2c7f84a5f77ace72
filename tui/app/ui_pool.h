/* ui_pool: the block pool grid. One cell per block while the pool fits,
 * else several blocks per cell (the cell shows how full its blocks are).
 * Used blocks take their request's colour (without colour: its letter);
 * shared blocks show their reference count; cached-but-free blocks are
 * dimmed with their own glyph; the null block 0 has its own glyph. Engine
 * events make blocks flash for a moment: a prefix-cache hit, an eviction,
 * a preemption victim's blocks. A click picks a block (and its request). */
#ifndef UI_POOL_H
#define UI_POOL_H

#include "ui_views.h"

extern const ui_view_class ui_view_pool;

/* The blocks (from id 0) the next frame should hold for the pool view in
 * rectangle r, given how far it is zoomed (kv_frame_opts.blocks_prefix; 0 =
 * the whole pool). */
int32_t ui_pool_blocks_wanted(const ui_rect *r);

#endif
