/* ui_reqs: the requests view: running requests in scheduler order (the last
 * is the next preemption victim), then the waiting queue (preempted ones
 * marked "!"), each with its tokens and its block table. t picks a request
 * whose whole block table is listed and whose blocks are underlined in the
 * pool. */
#ifndef UI_REQS_H
#define UI_REQS_H

#include "app.h"

void ui_reqs_draw(app *a, WINDOW *win);

/* The next live request after a->sel_req (running first, then waiting),
 * or -1 when none (t cycles through them, then off). */
int64_t ui_reqs_next(const app *a);

#endif
