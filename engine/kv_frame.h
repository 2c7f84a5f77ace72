/* kv_frame: one snapshot of a running engine, taken once per drawn frame,
 * from which every view of the lesson app draws. It copies what the views
 * show (the engine summary, a few config figures, the metrics and their
 * per-step timeline, the block pool, the running and waiting requests with
 * their block tables, the tensor-parallel ranks, the engine's recent log
 * lines and the start-up plan), so a frame holds no pointer into the engine:
 * it stays readable after the engine moved on or was destroyed, which is
 * what lets a view draw a past step or another machine's engine from a frame
 * alone.
 *
 * Built only on the public accessors of kv_engine.h. The caller owns the
 * struct; its buffers are allocated at the first capture and grow only when
 * the pool, the live requests or their block tables outgrow every earlier
 * frame, so steady frames make no heap call (the one exception is inside
 * kv_engine_waiting, which sorts a copy of the queue).
 *
 * Units as in kv_engine.h: tokens, blocks, bytes, seconds of the virtual
 * clock. Pure C11; the engine never prints. Not thread-safe: one frame per
 * thread. */
#ifndef KV_FRAME_H
#define KV_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "kv_engine.h"
#include "kv_plan.h"

#define KV_FRAME_TIMELINE 512    /* newest timeline samples kept (one per step) */
#define KV_FRAME_LOG_LINES 64    /* newest engine log lines kept */
#define KV_FRAME_LOG_LEN 200     /* bytes per kept line, incl. the NUL (longer lines are cut) */
#define KV_FRAME_PLAN_CUT 255    /* an engine log line this long may be a plan line cut (kv_engine_log) */
#define KV_FRAME_MAX_WAITING 4096 /* waiting requests copied (the count is exact beyond) */
#define KV_FRAME_STATS_LEN 400   /* bytes of the stats line, incl. the NUL */

/* One request of the frame: the engine's view of it and where its block
 * table lies in kv_frame.tables (req.num_blocks entries from table_off). */
typedef struct kv_frame_req {
    kv_request_view req;
    int32_t table_off;
} kv_frame_req;

/* What kv_frame_capture should take beyond the always-taken summary. */
typedef struct kv_frame_opts {
    /* Blocks to copy from id 0 (0 = the whole pool, < 0 = none: no view
     * draws the pool, nblocks is 0). On a large pool whose
     * use sits at its low ids (the free queue hands them out first) a view
     * zoomed there needs only a prefix; the capture widens it to the whole
     * pool when a block past it is in use or cached, so blocks
     * [nblocks, info.num_blocks) are always free, unhashed and unowned. */
    int32_t blocks_prefix;
    /* A request to copy even when it is no longer live (finished or aborted
     * recently, see kv_engine_request), e.g. one the learner selected; -1 none. */
    int64_t extra_req;
} kv_frame_opts;

typedef struct kv_frame {
    /* ---- Always filled by kv_frame_capture. */
    int has_engine;                 /* 0: no engine (no server, or it failed to start) */
    int has_plan;                   /* plan below is a copy of the caller's start-up plan */
    kv_engine_info info;            /* zero without an engine */
    kv_engine_metrics metrics;
    /* Config figures views show (from kv_engine_get_config). */
    int32_t num_kv_heads;           /* total KV heads (1 for MLA) */
    int32_t tensor_parallel_size;   /* ranks */
    int32_t max_model_len;          /* tokens */
    int32_t max_num_seqs;
    int32_t max_num_batched_tokens; /* tokens per step */
    int enable_prefix_caching;
    char device_name[16];           /* "host", "cuda" */
    uint64_t last_event_seq;        /* engine's newest event when captured */
    kv_plan plan;                   /* valid when has_plan */

    /* ---- Timeline: the newest samples, oldest first. */
    int32_t ntimeline;
    kv_timeline_sample timeline[KV_FRAME_TIMELINE];

    /* ---- Block pool: blocks[0..nblocks) in id order (see blocks_prefix).
     * kv_block_view.free_pos is -1: the queue walk is left out (costly on a
     * large pool; kv_engine_free_queue has it). */
    int32_t nblocks;
    kv_block_view *blocks;

    /* ---- Requests: reqs[0..nrunning) running in scheduler order (the FCFS
     * preemption victim last), then reqs[nrunning..nrunning+nwaiting) waiting
     * in admission order (preempted ones included), then the extra request
     * when it was asked for and is not live (nextra 0 or 1). Exact queue
     * lengths: info.num_running, info.num_waiting. */
    int32_t nrunning, nwaiting, nextra;
    kv_frame_req *reqs;
    int32_t *tables;                /* every copied request's block table, back to back */
    int32_t ntables;                /* entries used in tables */

    /* ---- Tensor-parallel ranks: ranks[0..nranks), nranks == tensor_parallel_size. */
    int32_t nranks;
    kv_rank_view ranks[KV_ENGINE_MAX_RANKS];

    /* ---- Engine log lines after start-up (the plan's own lines are left
     * out: the plan holds them), oldest first, level 0 info 1 warning 2 error.
     * Kept across captures of the same engine, so a line stays after the
     * engine's event ring dropped it. */
    int32_t nlog;
    char log[KV_FRAME_LOG_LINES][KV_FRAME_LOG_LEN];
    uint8_t log_level[KV_FRAME_LOG_LINES];

    /* ---- vLLM's periodic stats line as the plan's release words it, for
     * the newest logging interval the engine's whole timeline holds
     * (kv_metrics_stats_line; worked out again only when another interval
     * ended), and V0's prefix-cache line after it; "" without a plan or
     * before the first interval ends. */
    char stats_line[KV_FRAME_STATS_LEN];
    char stats_hits[KV_FRAME_STATS_LEN / 2];

    /* ---- Private: buffer sizes and what the last capture came from. */
    int captured;                   /* a capture filled it since init/forget */
    kv_frame_opts opts;             /* the opts of that capture */
    int32_t cap_blocks, cap_reqs, cap_tables, cap_ids;
    int64_t *ids;                   /* scratch: request ids */
    kv_event *events;               /* scratch: events read per call */
    const kv_engine *src;           /* engine of the last capture (compared, never read through) */
    uint64_t log_seq;               /* newest event scanned for log lines */
    uint64_t blocks_seq;            /* event seq and step the block copy is of */
    int64_t blocks_step;
    int32_t blocks_total;
    int64_t stats_k;                /* the interval stats_line is of (-1: none worked out) */
    const void *stats_rm;           /* and the metrics row (kv_release_metrics) it was worked out for */
    kv_timeline_sample *tl_all;     /* scratch: the engine's whole timeline */
    int32_t cap_tl_all;
} kv_frame;

/* An empty frame (no engine); allocates nothing. */
void kv_frame_init(kv_frame *f);

/* Release the frame's buffers; it is an empty frame again. */
void kv_frame_free(kv_frame *f);

/* Forget what earlier captures kept (log lines, the cached block copy):
 * call it when the engine was replaced, since a new engine may get the old
 * one's address. Keeps the buffers. */
void kv_frame_forget(kv_frame *f);

/* Fill f from engine e (NULL: no engine; has_engine 0 and every list empty)
 * and plan (NULL: has_plan 0; copied, so it may change afterwards), with
 * opts (NULL: whole pool, no extra request). The block copy is redone only
 * when the engine moved since the last capture (a new event or step, another
 * pool size, a wider prefix asked for); everything else is copied every
 * time. O(requests + their block tables + ranks + timeline) per call, plus
 * O(blocks) when the pool changed. Returns 0, or KV_ENGINE_ENOMEM with one
 * line in err (the frame is then an empty frame, buffers kept). */
int kv_frame_capture(kv_frame *f, const kv_engine *e, const kv_plan *plan, const kv_frame_opts *opts,
                     char *err, size_t errlen);

/* 1 when a capture of (e, plan, opts) now would give this frame again: the
 * same engine (or none again), which has not moved since (no new event,
 * step, request, finished request, clock advance, block freed or cached,
 * mode switch), an equal plan (compared by content) and equal opts. One
 * kv_engine_get_info; lets a caller that asks several times a frame (the
 * layout, then the drawing) capture only once. */
int kv_frame_current(const kv_frame *f, const kv_engine *e, const kv_plan *plan, const kv_frame_opts *opts);

/* The frame's copy of request id (running, waiting or extra), or NULL. */
const kv_frame_req *kv_frame_find_req(const kv_frame *f, int64_t id);

/* The block table of r (r->req.num_blocks block ids in token order). */
const int32_t *kv_frame_table(const kv_frame *f, const kv_frame_req *r);

/* Ids of the running requests whose block table holds block_id, ascending,
 * into out[0..max) (kv_engine_block_owners from the frame). Returns how many
 * hold it (may exceed max). */
int32_t kv_frame_block_owners(const kv_frame *f, int32_t block_id, int64_t *out, int32_t max);

/* The block with this id, or NULL when it is past the copied prefix or out
 * of range (a block past the prefix is free and unhashed). */
const kv_block_view *kv_frame_block(const kv_frame *f, int32_t block_id);

#endif
