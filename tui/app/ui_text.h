/* ui_text: the lesson text view: the page's narration (wrapped, scrollable),
 * then pinned at the bottom whatever waits for the learner: a goal, a
 * question with its answer box and verdict, the hints shown so far, lesson
 * and server errors, and what key moves on. */
#ifndef UI_TEXT_H
#define UI_TEXT_H

#include "ui_views.h"

/* The text view (the wheel scrolls it; its draw records the scroll limits). */
extern const ui_view_class ui_view_text;

/* Scroll by delta lines (negative = up), clamped. */
void ui_text_scroll(ui_view_state *st, int delta);

/* Wrap UTF-8 text to width cells and call line(ctx, s, n) for each line
 * (paragraphs split on blank lines; lines starting with two spaces kept as
 * they are and cut at width). Returns the number of lines. Exposed so the
 * help and error screens wrap the same way. */
int ui_text_wrap(const char *utf8, int width,
                 void (*line)(void *ctx, const wchar_t *s, int n), void *ctx);

#endif
