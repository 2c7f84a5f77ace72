/* kv_snapshot: an engine's whole state as one compact byte image, taken
 * between steps and loaded back into another engine of the same config, for
 * the history (kv_history.h): checkpoints, then the same inputs replayed.
 *
 * What an image holds: the block pool (each block's ref_cnt, hash, map
 * chaining, and the free block queue's order), the host tier when there is
 * one (kv_offload.h: its keys by rank, the running requests' records, its
 * counters), every request still readable (waiting, running, and the last
 * finished ones) with its block table and scheduling state (a decode
 * instance's remote prefill still to load, the blocks offered to the tier), the scheduler's queues in their storage order, the KV
 * cache manager's prefix-cache counters, the metrics and latency histograms,
 * the clock and step, the last step's decisions, the newest 512 timeline
 * samples, and the newest 256 events plus the newest 256 log lines of the
 * event ring. Block hashes of requests are not stored: loading recomputes
 * them from the request's tokens (the engine derives tokens from seeds).
 *
 * After a load, every accessor of kv_engine.h reads as it read on the saved
 * engine when the image was taken, except that kv_engine_timeline holds at
 * most the 512 newest samples from before the image, kv_engine_events_since
 * at most the 256 newest events and 256 newest log lines from before it, and
 * kv_engine_rank's device figures are the loading engine's own backend's.
 * Stepping both engines on from there with the same inputs keeps them equal.
 *
 * Images live in memory, in the process that made them (raw doubles and
 * structs; no file format). Sizes: about 2 bytes per block plus 16 per
 * hashed block and 1 to 3 per free block, plus ~60 bytes and ~1 per
 * block-table entry per request. Not thread-safe per engine. */
#ifndef KV_SNAPSHOT_H
#define KV_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "kv_engine.h"

#define KV_SNAPSHOT_TIMELINE 512  /* timeline samples an image keeps */
#define KV_SNAPSHOT_EVENTS 256    /* newest events of the ring an image keeps (log lines: 256 more) */

/* One image; data is the caller's (kv_snapshot_free). */
typedef struct kv_snapshot {
    uint8_t *data;
    size_t len, cap;    /* bytes used, bytes allocated */
    int64_t step;       /* the engine's step when taken */
} kv_snapshot;

void kv_snapshot_init(kv_snapshot *s);
void kv_snapshot_free(kv_snapshot *s);

/* Save e's state into s (its buffer reused, grown when needed). Call it
 * between steps (not from inside a step's event callback). 0, or
 * KV_ENGINE_ENOMEM with one line in err. */
int kv_snapshot_save(const kv_engine *e, kv_snapshot *s, char *err, size_t errlen);

/* Load s into e, which must have been created with the config of the saved
 * engine (num_blocks, block_size, max_num_seqs, max_model_len, tensor
 * parallel size, policy, seed; the mode may differ: it is switched); the
 * device, verify and write_kv may differ (K/V is not restored on the device:
 * a loading engine should not verify). Everything e held is replaced.
 * 0; EINVAL with one line in err when the config differs or the image is
 * damaged (e is then an empty engine of its config); ENOMEM. */
int kv_snapshot_load(kv_engine *e, const kv_snapshot *s, char *err, size_t errlen);

#endif
