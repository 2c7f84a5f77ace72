/* lsn_traffic: the request generator a lesson starts with lab.traffic{...}
 * (lessons/API.md, "Traffic and time"). The table form lives here; the
 * function form is a Lua function the runner calls each engine step
 * (lsn_vm.h). Plain C. */
#ifndef LSN_TRAFFIC_H
#define LSN_TRAFFIC_H

#include <stdint.h>

#include "kv_engine.h"

typedef struct lsn_traffic {
    int active;              /* a generator of either form is on */
    int fn;                  /* the function form (the Lua side holds it) */
    double rate;             /* requests per virtual second (table form) */
    int32_t prompt_min, prompt_max, output_min, output_max;
    char prefix_id[64];
    int32_t prefix_tokens;
    int64_t count, sent;     /* count 0 = unlimited */
    double next_s;           /* next arrival (virtual clock) */
    uint64_t *rng;           /* the lesson's generator state (borrowed) */
} lsn_traffic;

/* Stop generating (either form). */
void lsn_traffic_stop(lsn_traffic *t);

/* Table form: submit every request that has arrived by the engine's clock. */
void lsn_traffic_feed(lsn_traffic *t, kv_engine *e, double clock_s);

/* Table form: more requests are still to come. */
int lsn_traffic_pending(const lsn_traffic *t);

/* The lesson's deterministic generator (xorshift64*): a replay sees the
 * same numbers. [0, 1). */
double lsn_rng_next(uint64_t *state);

#endif
