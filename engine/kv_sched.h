/* kv_sched: the scheduler (vllm/v1/core/sched/scheduler.py) and its waiting
 * queue (vllm/v1/core/sched/request_queue.py).
 *
 * One step = schedule() then update(): running requests first, in order,
 * each asking for the tokens it lacks (one per decode, a chunk of a prefill),
 * within a token budget (max_num_batched_tokens); when allocate_slots fails
 * the scheduler preempts by recompute (FCFS: the last running request;
 * priority: the running request with the largest (priority, arrival)), frees
 * its blocks, zeroes its computed tokens and puts it at the front of the
 * waiting queue. Only when nothing was preempted does it admit waiting
 * requests, in queue order, until the budget, max_num_seqs or the pool runs
 * out (waiting requests never preempt). update() samples one token for each
 * request whose tokens are all computed and finishes requests at their
 * output length or at max_model_len, freeing their blocks. The rules that
 * changed between vLLM releases (full-prompt admission, watermark, priority
 * preemption details, ...) come from cfg->rules (kv_sched_rules.h). No heap
 * allocation per step: arrays are sized at creation (the waiting queue grows
 * only when more requests wait than ever before). */
#ifndef KV_SCHED_H
#define KV_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "kv_kvcm.h"
#include "kv_pool.h"
#include "kv_req.h"
#include "kv_sched_rules.h"

typedef struct kv_sched_config {
    int32_t max_num_seqs;
    int32_t max_num_batched_tokens;
    int32_t max_model_len;
    int32_t long_prefill_token_threshold; /* 0 = off */
    int enable_chunked_prefill;
    int policy;                           /* kv_sched_policy */
    int mode;                             /* kv_engine_mode */
    int32_t num_blocks;                   /* pool size incl. the null block (the watermark's base) */
    kv_sched_rules rules;
} kv_sched_config;

typedef struct kv_sched kv_sched;

/* What one schedule() + update() did. Arrays point into the scheduler and
 * stay valid until the next step. */
typedef struct kv_sched_output {
    kv_req **scheduled;        /* requests that ran, in schedule order */
    int32_t num_scheduled;     /* each one's token count is req->scheduled */
    int32_t num_tokens;        /* total scheduled tokens */
    int32_t num_prefill_tokens;
    int32_t num_decode_tokens;
    int32_t num_new;           /* admitted from waiting: the last num_new of scheduled[] */
    int32_t num_preempted;
    kv_req **preempted;        /* the requests preempted, in order */
    kv_req **finished;         /* finished in update(); their blocks are freed */
    int32_t num_finished;
} kv_sched_output;

/* Create a scheduler over kvcm (borrowed). ev receives KV_EV_ADMIT,
 * KV_EV_RESUME, KV_EV_PREEMPT and KV_EV_FINISH (block_id -1). cfg->rules
 * all zero means the oldest behaviour of every rule: fill it with
 * kv_sched_rules_default first. NULL on bad config or out of memory
 * (message in err). */
kv_sched *kv_sched_create(const kv_sched_config *cfg, kv_kvcm *kvcm, int32_t num_blocks,
                          kv_pool_event_fn ev, void *ev_ctx, char *err, size_t errlen);
void kv_sched_destroy(kv_sched *s);

/* Add a request to the waiting queue (status WAITING). -1 on out of memory. */
int kv_sched_add(kv_sched *s, kv_req *r);

/* schedule(): fill out (scheduled requests, preemptions); each scheduled
 * request's num_computed already includes its scheduled tokens
 * (_update_after_schedule); req->scheduled holds the count, so the KV to
 * write covers positions [num_computed - scheduled, num_computed). */
void kv_sched_schedule(kv_sched *s, kv_sched_output *out);

/* update_from_output(): sample one token for each scheduled request whose
 * tokens are all computed, at virtual time now_s; finish and free requests
 * that reached their output length or max_model_len. Fills out->finished. */
void kv_sched_update(kv_sched *s, kv_sched_output *out, double now_s);

/* Append one sampled output token to r at now_s (hashes of newly full
 * blocks, first/last token times; no-cache mode drops the computed KV).
 * Returns 1 when r has reached its output length or max_model_len. Used by
 * update(); tests call it to replay vLLM's pipelined schedule/update order. */
int kv_sched_append_token(kv_sched *s, kv_req *r, double now_s);

/* Remove a live request (waiting or running), free its blocks, status
 * ABORTED. -1 if it is not in the scheduler. */
int kv_sched_abort(kv_sched *s, kv_req *r);

int32_t kv_sched_num_running(const kv_sched *s);
int32_t kv_sched_num_waiting(const kv_sched *s);
/* i-th running request (scheduler order), NULL when out of range. */
kv_req *kv_sched_running_at(const kv_sched *s, int32_t i);
/* i-th waiting request in storage order (queue order for FCFS, heap order
 * for priority), NULL when out of range; O(1), for checks. */
kv_req *kv_sched_waiting_at(const kv_sched *s, int32_t i);
/* Waiting requests in admission order into out[0..max); returns the count. */
int32_t kv_sched_waiting(const kv_sched *s, kv_req **out, int32_t max);
/* Total preemptions so far. */
int64_t kv_sched_num_preemptions(const kv_sched *s);
/* Prompt tokens admitted as loaded from a prefill instance so far
 * (kv_request_spec.remote_prefill; not kept in snapshots). */
int64_t kv_sched_remote_tokens(const kv_sched *s);
/* Set that count (engine images, kv_snapshot.c). */
void kv_sched_set_remote_tokens(kv_sched *s, int64_t n);

/* Restore a saved state between steps (engine snapshots, kv_snapshot.c):
 * running[0..nrun) in scheduler order, waiting[0..nwait) in the storage
 * order kv_sched_waiting_at gives (so a priority heap comes back as it was),
 * and the preemption count. The requests' own fields are the caller's.
 * -1 when nrun exceeds max_num_seqs or the waiting queue cannot grow
 * (out of memory); the scheduler is then empty. */
int kv_sched_restore(kv_sched *s, kv_req *const *running, int32_t nrun, kv_req *const *waiting, int32_t nwait,
                     int64_t num_preemptions);

#endif
