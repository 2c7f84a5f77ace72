/* kv_events: the engine's event stream, a ring buffer of block and request
 * events plus log lines, each with a sequence number that only grows, so a
 * view can ask for "events since N" and see gaps when the ring wrapped.
 * Pushing never allocates. Event types and fields: kv_event in kv_engine.h. */
#ifndef KV_EVENTS_H
#define KV_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "kv_engine.h"

typedef struct kv_events kv_events;

/* Ring of at least capacity events (rounded up to a power of two, min 64)
 * and 256 log lines of up to 255 bytes. NULL on out of memory. */
kv_events *kv_events_create(uint32_t capacity);
void kv_events_destroy(kv_events *ev);

/* Record one event; returns its seq. */
uint64_t kv_events_push(kv_events *ev, kv_event_type type, int32_t block_id, int64_t req_id, int64_t value,
                        int64_t step, double clock_s);

/* Record a log line (truncated to 255 bytes); returns its seq. */
uint64_t kv_events_log(kv_events *ev, int level, const char *text, int64_t step, double clock_s);

/* Events with seq > since, oldest first, into out[0..max); returns the count. */
int32_t kv_events_since(const kv_events *ev, uint64_t since, kv_event *out, int32_t max);

/* Newest seq (0 = none). */
uint64_t kv_events_last(const kv_events *ev);

/* Turn recording of block-level events (alloc/free/hit/evict/store) off (0)
 * or on (1); request events and logs are always kept. Saves time in long
 * headless simulations. */
void kv_events_set_block_events(kv_events *ev, int on);

/* ---- Restoring a saved stream (engine snapshots, kv_snapshot.c) ----- */

/* Log lines recorded so far (the next line's number); the newest 256
 * keep their text. */
uint64_t kv_events_num_logs(const kv_events *ev);

/* Seq of the event of log line log_no while the ring still holds it and
 * its text is kept (one of the newest 256 lines), else 0. */
uint64_t kv_events_log_seq(const kv_events *ev, uint64_t log_no);

/* Empty the ring: the next event gets seq next_seq, the next log line
 * number next_log. Block-event recording is left as it was. */
void kv_events_clear(kv_events *ev, uint64_t next_seq, uint64_t next_log);

/* Put one saved event back in its ring slot (e->seq < the next seq, within
 * the ring). A KV_EV_LOG event takes e->text as line number log_no (a line
 * older than the newest 256 reads "(log line dropped)"). Slots nobody put
 * back are skipped by kv_events_since, as if the ring had dropped them. */
void kv_events_put(kv_events *ev, const kv_event *e, uint64_t log_no);

#endif
