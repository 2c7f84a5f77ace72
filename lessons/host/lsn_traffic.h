/* lsn_traffic: the request generator a lesson starts with lab.traffic{...}
 * (lessons/API.md, "Traffic and time"). The table form is the engine's own
 * trace generator (engine/kv_trace.h, the `kvlab simulate --trace gen:...`
 * one), read a chunk of requests at a time; the function form is a Lua
 * function the runner calls each engine step (lsn_vm.h). Plain C.
 *
 * Bounds that hold whatever the lesson asks: the rate is at most
 * LSN_TRAFFIC_MAX_RATE, one engine step takes at most
 * LSN_TRAFFIC_MAX_PER_STEP new requests, and none is added while
 * LSN_MAX_LIVE_REQUESTS are waiting or running (arrivals then wait). */
#ifndef LSN_TRAFFIC_H
#define LSN_TRAFFIC_H

#include <stddef.h>
#include <stdint.h>

#include "kv_engine.h"
#include "kv_trace.h"

#define LSN_TRAFFIC_MAX_RATE 1e6          /* requests per virtual second */
#define LSN_TRAFFIC_MAX_PER_STEP 4096     /* requests added before one engine step */
/* Waiting + running, for lab.submit too. An overloaded server's waiting
 * requests each hold their block table and block hashes for the whole
 * prompt and output (about 2.7 KiB for the classroom bench's 200-2,000
 * token prompts): 10,000 of them were 28 MiB in every follower of a busy
 * room (bench/room_bench.py --busy-seconds); 2,048 keep it under 6 MiB,
 * and no lesson comes near (the course's busiest queue is under 100). */
#define LSN_MAX_LIVE_REQUESTS 2048
#define LSN_TRAFFIC_CHUNK 1024            /* requests generated at a time */

/* A length as lab.traffic takes it: a number, {min=, max=} or {mean=, p99=}. */
typedef struct lsn_length {
    enum { LSN_LEN_FIXED, LSN_LEN_RANGE, LSN_LEN_MEAN_P99 } kind;
    double a, b;             /* FIXED: a; RANGE: min a, max b; MEAN_P99: mean a, p99 b */
} lsn_length;

typedef struct lsn_traffic_spec {
    double rate;             /* requests per virtual second, (0, LSN_TRAFFIC_MAX_RATE] */
    lsn_length prompt, output;
    const char *prefix_id;   /* every request shares this prefix, or NULL */
    int32_t prefix_tokens;
    int64_t count;           /* requests in all, 0 = no end */
    uint64_t seed;
} lsn_traffic_spec;

typedef struct lsn_traffic {
    int active;              /* a generator of either form is on */
    int fn;                  /* the function form (the Lua side holds it) */
    char gen[400];           /* the kv_trace "gen:" spec without requests= and seed= */
    uint64_t seed;
    int64_t count, sent;
    char prefix_id[64];
    int32_t prefix_tokens;
    kv_trace chunk;          /* generated requests, arrivals from the chunk's start */
    int64_t next;            /* next request of chunk to send */
    int64_t chunk_no;
    double chunk_start_s;    /* engine clock where this chunk's arrivals start */
    double start_s;          /* engine clock where the generator started */
} lsn_traffic;

/* Start the table form at engine clock clock_s (replacing any generator).
 * Returns 0, or -1 with one line in err (a bad rate or length: the message
 * names the field). */
int lsn_traffic_start(lsn_traffic *t, const lsn_traffic_spec *spec, double clock_s, char *err, size_t errlen);

/* The function form is on (the Lua side holds the function). */
void lsn_traffic_start_fn(lsn_traffic *t);

/* Stop generating (either form) and free what the table form holds. */
void lsn_traffic_stop(lsn_traffic *t);

/* The server restarted (a new engine, its clock back at clock_s): the
 * table form sends its requests again from the first, as a new run. */
void lsn_traffic_rewind(lsn_traffic *t, double clock_s);

/* Where the table form is: what a second generator of the same spec needs
 * to go on from the same request (a classroom follower joining from the
 * presenter's engine image, lsn_engine_image). */
typedef struct lsn_traffic_pos {
    int64_t chunk_no, next, sent;
    double chunk_start_s, start_s;
} lsn_traffic_pos;

void lsn_traffic_get_pos(const lsn_traffic *t, lsn_traffic_pos *out);

/* Move the table form (started with the same spec) to pos: the chunk is
 * generated again from its own seed, so no earlier chunk is needed. 0; -1
 * with one line in err when t is not the table form or pos cannot be one of
 * its places (a chunk or request it does not have, a count past its end,
 * a clock that is not finite): t is then at a valid place of its own (the
 * caller should rebuild the run, e.g. by a replay). */
int lsn_traffic_set_pos(lsn_traffic *t, const lsn_traffic_pos *pos, char *err, size_t errlen);

/* Table form: submit what has arrived by clock_s, within the bounds above. */
void lsn_traffic_feed(lsn_traffic *t, kv_engine *e, double clock_s);

/* Table form: more requests are still to come. */
int lsn_traffic_pending(const lsn_traffic *t);

/* Table form: engine clock of the next arrival (when pending). */
double lsn_traffic_next_s(const lsn_traffic *t);

/* The lesson's deterministic generator (xorshift64*): a replay sees the
 * same numbers. [0, 1). */
double lsn_rng_next(uint64_t *state);

#endif
