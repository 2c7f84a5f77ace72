/* The engine's event stream as JSON lines (`kvlab simulate --events FILE`,
 * docs/events.md): one object per event, oldest first, so a run can be
 * inspected or plotted outside the app. */
#ifndef KVLAB_EVENTS_OUT_H
#define KVLAB_EVENTS_OUT_H

#include <stdint.h>
#include <stdio.h>

#include "kv_engine.h"

typedef struct kvlab_events_out {
    FILE *f;
    uint64_t last_seq;    /* newest event written */
    uint64_t lost;        /* events the ring dropped before they were written */
    int64_t written;
} kvlab_events_out;

/* Event ring size an engine needs so that draining after every step loses
 * nothing: room for every block of the pool to be allocated, hit, freed and
 * evicted in one step, and more (at least 65,536). */
uint32_t kvlab_events_capacity(int32_t num_blocks, int32_t max_num_seqs);

/* Write every event of e newer than the last one written. A gap (the ring
 * wrapped first) is written as one {"type":"gap",...} line. */
void kvlab_events_drain(kvlab_events_out *o, const kv_engine *e);

#endif
