/* ui_flags: the flags view: the vLLM flags the lesson lets the learner
 * change, with their values. With the keys (f) the learner picks a flag
 * (up/down or a click), steps it (left/right, +/-) or types a value (Enter
 * or any digit); app_main applies the change through lsn_set_flag, which
 * restarts the server the way rerunning `vllm serve` would. */
#ifndef UI_FLAGS_H
#define UI_FLAGS_H

#include <stddef.h>

#include "ui_views.h"

extern const ui_view_class ui_view_flags;

/* The value one step up (dir > 0) or down from value (f's current one): the
 * next choice, on/off toggled, a fraction by 0.01, an integer doubled or
 * halved. Returns 1 with the text in out, 0 when it cannot step (no
 * current value: the learner types one). */
int ui_flags_step(const char *value, const lsn_flag *f, int dir, char *out, size_t len);

/* f's value as the server of frame fr runs with it: the value the learner
 * set, else the default the start-up plan resolved ("1024" for
 * max-num-seqs on an H100), else "". Returns 1 when it is such a resolved
 * default. */
int ui_flags_effective(const kv_frame *fr, const lsn_flag *f, char *out, size_t len);

#endif
