/* ui_split: a prefill/decode split played in the pool view (lesson 19's
 * "Split prefill from decode"): the prefill instances' pool and the decode
 * instances' pool side by side, the link between them with each transfer
 * on it drawn where it has got to, and under them the bytes moved, the
 * requests that crossed and the time to first token against one GPU. It
 * draws frame m->split_frame of the scene's recorded split
 * (lsn_scene.split, lab.split{show = true}); the app picks the frame as the
 * recording plays. Glyphs tell the parts apart without colour. */
#ifndef UI_SPLIT_H
#define UI_SPLIT_H

#include "ui_views.h"

/* The split is to be drawn (a recording and a frame of it). */
int ui_split_active(const ui_view_ctx *c);

/* Draw it over the whole window (the pool view's). */
void ui_split_draw(const ui_view_ctx *c, WINDOW *win);

/* Rows it would like, border included. */
int ui_split_want_h(const ui_view_ctx *c, int w);

#endif
