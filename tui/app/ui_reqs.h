/* ui_reqs: the requests view: running requests in scheduler order (the last
 * is the next preemption victim), then the waiting queue (preempted ones
 * marked "!"), each with its tokens and its block table. t picks a request
 * whose whole block table is listed and whose blocks are underlined in the
 * pool; one that has finished since shows as "done". */
#ifndef UI_REQS_H
#define UI_REQS_H

#include "ui_views.h"

extern const ui_view_class ui_view_requests;

/* The live request after sel in frame f (running first, then waiting), the
 * first when sel is -1 or gone, or -1 after the last or when none (t cycles
 * through them, then off). */
int64_t ui_reqs_next(const kv_frame *f, int64_t sel);

#endif
