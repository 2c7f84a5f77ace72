/* lsn_quote: a page that quotes a vLLM log line or error must quote it in the
 * words of the release the server follows (issue 21: "every quoted log line or
 * error matches the chosen release's wording from the release table"). A quote
 * is found by the opening words of any release's template
 * (engine/kv_release.h, kv_release_text) or of torch's out-of-memory error;
 * from there the page must follow the template of an accepted row, field by
 * field, as far as the quote goes (a quote may stop early, at "..." or the end
 * of its paragraph). Accepted rows: the server's own release (or the textbook
 * row under --accounting textbook), and any release the page names ("vLLM
 * 0.33.0"). Plain C; `kvlab check` runs it on every lab.say. */
#ifndef LSN_QUOTE_H
#define LSN_QUOTE_H

#include <stddef.h>

#include "kv_release.h"

/* Check every quote in `page` (the whole page's text). chosen: the server's
 * row. Returns 0, or -1 with one line in msg naming the quote and the
 * chosen row's wording. */
int lsn_quote_check(const char *page, const kv_release *chosen, char *msg, size_t msglen);

#endif
