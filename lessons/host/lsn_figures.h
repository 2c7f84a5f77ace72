/* lsn_figures: one quantity, one figure on a page (issue 21: "that two
 * figures for one quantity on one page agree"). kvlab check reads every
 * figure with a unit on a page ("2.83 GiB", "25,184 tokens", "3.26x",
 * "95.8%") and fails two of the same unit that read as one quantity but
 * differ: the same value to the shorter one's digits (2.8 GiB and 2.83 GiB:
 * one figure shown twice, or a need and a pool that read as equal), or whole
 * numbers of 1,000 or more within 0.2% of each other (25,184 and 25,173
 * tokens: one quantity computed two ways). What the learner typed ("Your
 * answer: ...", "You predicted ...") is not the page's. A move from a
 * figure to itself ("went from 2.53 to 2.53 GiB") fails too: it claims a
 * change its own figures deny. kvlab check applies it to every page and to
 * every reply a refused answer gets. A figure set against itself
 * ("427,776, not 427,776") fails too. Plain C. */
#ifndef LSN_FIGURES_H
#define LSN_FIGURES_H

#include <stddef.h>

/* Returns 0, or -1 with one line in msg naming the two figures. */
int lsn_figures_check(const char *page, char *msg, size_t msglen);

#endif
