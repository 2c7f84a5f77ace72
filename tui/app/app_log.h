/* app_log: `kvlab --log FILE`, the app on a vLLM log. */
#ifndef APP_LOG_H
#define APP_LOG_H

#include <stddef.h>

#include "kv_plan.h"

/* Read FILE as `kvlab explain` does and write a one-lesson course for it
 * into a private folder under $TMPDIR (removed when the program exits):
 * kvlab's server started with the log's release, flags and card, the memory
 * bar, the start-up log and the flags view, and a page of the log's figures
 * beside the plan's that follows every flag change. Returns the folder (use
 * it as the lessons folder, lesson 1, without progress), or NULL with one
 * line in err (not a vLLM log, a file that cannot be read). argv (argc
 * items): what the log does not say, as for `kvlab explain` (--model NAME). */
const char *app_log_course(const char *file, int argc, char **argv, char *err, size_t errlen);

/* The log's own plan (explain_logged_plan: the figures the log states in
 * kvlab's plan for it), which the memory view draws beside kvlab's plan,
 * with *stated the UI_MEM_T_* bits (ui_mem.h) of the terms the log states,
 * UI_MEM_VS_TOKENS when it states the KV tokens; NULL without --log or when
 * the log states no memory figure. Valid until the program exits. */
const kv_plan *app_log_plan(unsigned *stated);

#endif
