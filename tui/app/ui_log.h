/* ui_log: the start-up log, in vLLM's words (INFO lines plain, warnings in
 * yellow, errors in red and marked with "!" so they stand out without
 * colour), revealed line by line during the start-up replay, then the
 * engine's own log lines as they come. The newest lines stay in view. */
#ifndef UI_LOG_H
#define UI_LOG_H

#include "ui_views.h"

extern const ui_view_class ui_view_log;

/* Level of a log line from its text: 0 info, 1 warning, 2 error. */
int ui_log_level(const char *line);

#endif
