/* lsn_offer: the flags a lesson lets the learner change (the lesson table's
 * `flags`: a list of names, or "*" for all of them), with their current
 * values read from the lesson's server (lsn_server.h). Plain C. */
#ifndef LSN_OFFER_H
#define LSN_OFFER_H

#include "lsn_scene.h"
#include "lsn_server.h"

typedef struct lsn_offer {
    char **allowed;          /* canonical names, in the lesson's order */
    int nallowed, allow_all;
    lsn_flag *flags;         /* what the flags view lists */
    char **values;
    int nflags;
} lsn_offer;

void lsn_offer_clear(lsn_offer *o);
/* Allow one more flag by any name lsn_server_flag_info knows. Returns 0, or
 * -1 for a name kvlab does not know (or no memory). "*" allows all. */
int lsn_offer_allow(lsn_offer *o, const char *name);
/* Is this flag (any spelling) offered? */
int lsn_offer_allows(const lsn_offer *o, const char *name);
/* Build the list the flags view shows (after the last lsn_offer_allow). */
void lsn_offer_build(lsn_offer *o, const lsn_server *s);
/* Set the shown value of flag `name` (the runner's own rows: vllm-version).
 * Returns 1 when it changed. */
int lsn_offer_set_value(lsn_offer *o, const char *name, const char *value);
/* Re-read the values from the server. Returns 1 when one changed. */
int lsn_offer_sync(lsn_offer *o, const lsn_server *s);

#endif
