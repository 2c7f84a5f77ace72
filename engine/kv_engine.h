/* kv_engine: the live mini serving engine, as one facade (docs/DESIGN.md, "The
 * engine"). It owns the block pool, the KV cache manager, the scheduler,
 * the tensor-parallel ranks' device pools, the virtual clock, the metrics and
 * the event stream. Lessons, views and `kvlab simulate` all drive it through
 * these functions only; views read state through the accessors and
 * snapshots below and never change the engine otherwise.
 *
 * Behaviour mirrors vLLM v1 (docs/engine-runtime.md explains how):
 *   vllm/v1/core/block_pool.py, kv_cache_manager.py, sched/scheduler.py.
 *
 * Conventions: sizes in tokens / blocks / bytes as named; times in seconds of
 * the virtual clock; functions returning int give 0 (or a count) on success
 * and a negative KV_ENGINE_E* code on failure, writing one line into err
 * (when err is non-NULL). The engine never prints and never exits.
 * Not thread-safe: one thread drives an engine. */
#ifndef KV_ENGINE_H
#define KV_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "kv_args.h"
#include "kv_device.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_plan.h"
#include "kv_sched_rules.h"

enum {
    KV_ENGINE_OK = 0,
    KV_ENGINE_EINVAL = -1,   /* bad argument or configuration */
    KV_ENGINE_ENOMEM = -2,   /* host allocation failed, or the device reported OOM */
    KV_ENGINE_ETOOLONG = -3, /* request longer than max_model_len (vLLM's message) */
    KV_ENGINE_ENOFIT = -4,   /* request can never fit the pool (too few blocks) */
    KV_ENGINE_ENOTFOUND = -5,/* no such request (or it already finished) */
    KV_ENGINE_EBUSY = -6,    /* needs an idle engine (no live requests) */
    KV_ENGINE_EVERIFY = -7,  /* a device read-back did not match (a bug: sharing/eviction wrong) */
    KV_ENGINE_EDEVICE = -8,  /* device backend error */
    KV_ENGINE_ERANGE = -9,   /* an input beyond what the engine holds (a limit below, or the host
                                memory a pool would take): refused, never cut to fit */
};

/* Engine limits. A config or plan past one is refused with ERANGE and the
 * limit in the message, never truncated to fit the engine's int32 fields. */
#define KV_ENGINE_MAX_NUM_SEQS (1 << 20)      /* running requests (max_num_seqs) */
#define KV_ENGINE_MAX_TOKENS (1 << 30)        /* max_model_len, max_num_batched_tokens */
#define KV_ENGINE_MAX_BLOCKS (INT32_MAX - 2)  /* num_blocks (block ids are int32; two sentinels) */

/* Teaching modes on the same requests. */
typedef enum kv_engine_mode {
    KV_MODE_PAGED = 0,      /* vLLM: blocks on demand through a block table */
    KV_MODE_CONTIGUOUS = 1, /* each request reserves a max_model_len slab of
                               consecutive blocks at admission */
    KV_MODE_NO_CACHE = 2,   /* no KV kept: every new token recomputes the whole sequence */
} kv_engine_mode;

/* --scheduling-policy (vllm/config/scheduler.py). */
typedef enum kv_sched_policy { KV_POLICY_FCFS = 0, KV_POLICY_PRIORITY = 1 } kv_sched_policy;

/* Request status (vllm/v1/request.py RequestStatus, reduced). */
typedef enum kv_req_status {
    KV_REQ_WAITING = 0,
    KV_REQ_RUNNING = 1,
    KV_REQ_PREEMPTED = 2,          /* back in the waiting queue after preemption */
    KV_REQ_FINISHED = 3,           /* reached its output_tokens (or max_model_len) */
    KV_REQ_ABORTED = 4,
} kv_req_status;

/* Per-rank plan terms, bytes on that rank's GPU (the memory plan of
 * docs/DESIGN.md). Index with KV_TERM_*. */
enum {
    KV_TERM_WEIGHTS = 0, KV_TERM_ACTIVATION, KV_TERM_CUDAGRAPH, KV_TERM_CUDA_CONTEXT,
    KV_TERM_NCCL, KV_TERM_KV_CACHE, KV_TERM_COUNT
};
/* Name of a KV_TERM_* ("weights", "activation", "cudagraph", "cuda_context",
 * "nccl", "kv_cache"), or "?" when out of range. */
const char *kv_engine_term_name(int term);

#define KV_ENGINE_MAX_RANKS 64

/* Everything an engine needs, as plain numbers. kv_engine_config_default()
 * fills vLLM's defaults for a Llama-3.1-8B-shaped model on one H100 so a test
 * can change only what it cares about. The memory plan (kv_plan.h) produces
 * one of these through kv_engine_config_from_plan() once that header lands. */
typedef struct kv_engine_config {
    /* Block pool (vllm/v1/core/block_pool.py). */
    int32_t num_blocks;             /* blocks incl. the null block 0 (min over ranks) */
    int32_t block_size;             /* tokens per block (16) */
    /* Scheduler, vLLM names and defaults (vllm/config/scheduler.py). */
    int32_t max_model_len;          /* tokens; prompts longer are rejected */
    int32_t max_num_seqs;           /* running requests at most */
    int32_t max_num_batched_tokens; /* token budget per step */
    int32_t long_prefill_token_threshold; /* 0 = off */
    int enable_prefix_caching;      /* 1 = on (vLLM default for generative models) */
    int enable_chunked_prefill;     /* 1 = on (default) */
    kv_sched_policy scheduling_policy;
    kv_sched_rules sched_rules;     /* release-dependent rules (kv_sched_rules.h); default: newest */
    /* Model geometry (whole model; per-rank figures are derived). */
    int32_t num_layers;             /* attention layers holding KV */
    int32_t num_kv_heads;           /* total KV heads (1 for MLA) */
    int32_t head_size;              /* values per head */
    int32_t kv_factor;              /* 2 = K and V; 1 = MLA latent */
    int32_t cache_dtype;            /* KV_DTYPE_* */
    int32_t hidden_size;            /* for the TP all-reduce term of the time model */
    int32_t vocab_size;             /* token ids generated below this */
    int32_t tensor_parallel_size;   /* ranks (1..KV_ENGINE_MAX_RANKS) */
    /* Time model inputs (kv_timemodel.h), per rank. */
    double active_params;           /* parameters used per token, whole model (MoE: active only) */
    double weight_bytes;            /* bytes of weights on one rank (read once per step) */
    double peak_flops;              /* dense FLOP/s of one GPU in the compute dtype */
    double hbm_bytes_per_s;         /* HBM bandwidth of one GPU, bytes/s */
    double link_bytes_per_s;        /* per-GPU interconnect for TP all-reduce (NVLink, else PCIe); 0 = free */
    double gpu_total_bytes;         /* memory of one GPU as the device reports it (host backend
                                       simulates a card of this size; 0 = unlimited) */
    /* Per-rank plan terms (bytes) reserved on the device at start; rank r
     * uses terms[r] (all zero = reserve nothing). */
    double terms[KV_ENGINE_MAX_RANKS][KV_TERM_COUNT];
    /* Engine. */
    kv_engine_mode mode;
    uint64_t seed;                  /* token ids of length-only prompts and outputs */
    int verify;                     /* -1: on in debug builds, off with NDEBUG; 0 off; 1 on:
                                       write K/V to the device and, after each step, read
                                       back what changed in it: every running request's
                                       new tokens and the tokens in blocks written that step */
    int write_kv;                   /* -1: same as verify; 1: write K/V even without verifying */
    uint32_t event_capacity;        /* ring size, rounded up to a power of two (default 65536) */
    uint32_t timeline_capacity;     /* sparkline samples kept (default 4096) */
    kv_device *device;              /* backend to use (borrowed: the engine frees what it
                                       allocated there, never the device); NULL = the
                                       engine creates and owns a host backend */
    int fit_device;                 /* KV_FIT_* flags (kv_device.h) for a borrowed device:
                                       default KV_FIT_SHARED, so ranks that share one card
                                       split it (every term and num_blocks scaled, logged);
                                       0 = hold the plan as it is */
    int block_events;               /* 1 (default): record alloc/free/hit/evict/store events;
                                       0: only request events and logs (long headless runs) */
    uint64_t host_memory_bytes;     /* host memory the engine may take: 0 (default) = what this
                                       machine has available now (MemAvailable, cgroup limit) */
    /* Host (CPU) KV tier, vLLM's OffloadingConnector (kv_offload.h): off by default. */
    int64_t offload_num_blocks;     /* blocks the tier holds (0 = no tier; kv_offload_num_blocks
                                       of --kv-offloading-size) */
    int offload_protect_offer;      /* the release's eviction never takes a key of the offer itself
                                       (kv_release_memory.offload_protects_offer, 0.18 on) */
    int offload_lru;                /* how the tier ranks its keys: a kv_offload_lru
                                       (kv_release_memory.offload_lru; 0 = touched, to 0.30) */
    double offload_link_bytes_per_s;/* host link of one GPU, one direction (PCIe), bytes/s: a
                                       load of n blocks adds n x block bytes per rank / this to
                                       the step; 0 = free */
} kv_engine_config;

/* Fill cfg with vLLM defaults and a Llama-3.1-8B / H100-80GB shape:
 * block_size 16, max_model_len 8192, max_num_seqs 256,
 * max_num_batched_tokens 8192, prefix caching and chunked prefill on, FCFS,
 * 32 layers x 8 KV heads x 128, bf16, tp 1, num_blocks 1024 (small; set it
 * from the plan), mode paged, verify -1. */
void kv_engine_config_default(kv_engine_config *cfg);

typedef struct kv_engine kv_engine;

/* Host bytes an engine with cfg would allocate at creation (block pool and
 * its hash map, scheduler and scratch arrays, event ring, timeline, and the
 * host backend's per-slot K/V fingerprints when it writes K/V). Requests
 * add their block tables later (~20 bytes per block they can hold). */
uint64_t kv_engine_host_bytes(const kv_engine_config *cfg);

/* Check cfg against the engine limits above and the host memory it would
 * take against cfg->host_memory_bytes (or this machine's available memory),
 * before anything is allocated. 0, or ERANGE with one line in err naming the
 * figure and the limit. kv_engine_create runs it too. */
int kv_engine_config_check(const kv_engine_config *cfg, char *err, size_t errlen);

/* Fill *out from a finished start-up plan (kv_plan.h) of model m on gpu
 * with args a: num_blocks (min over ranks: the ranks are identical),
 * block_size, max_model_len, max_num_seqs, max_num_batched_tokens, prefix
 * caching, chunked prefill, geometry, tp, each rank's plan terms, and the
 * time-model inputs (active parameters from the model shape, weights per
 * rank, the card's bf16 dense TFLOP/s, HBM bandwidth and one direction of
 * its NVLink (else PCIe) bandwidth; when the catalogue
 * lacks a figure, a stand-in is used and *note says so). A model with
 * sliding-window layers is run as full attention (vLLM's
 * --disable-hybrid-kv-cache-manager): num_blocks is re-derived from the
 * plan's available KV memory with every layer in a block, and *note says so.
 * The scheduling policy comes from a->scheduling_policy, the scheduling rules
 * (sched_rules) from the release row of a->vllm_version (kv_release.h; the
 * plan's row when none is given, the newest under textbook). Everything else
 * keeps kv_engine_config_default(). EINVAL when the plan would not start
 * (err = vLLM's error); ERANGE when a figure of the plan (num_blocks,
 * max_model_len, max_num_seqs, max_num_batched_tokens) is past an engine
 * limit. note may be NULL. */
int kv_engine_config_from_plan(const kv_plan *p, const kv_model *m, const kv_gpu *gpu, const kv_args *a,
                               kv_engine_config *out, char *note, size_t notelen, char *err, size_t errlen);

/* Plan and start an engine the way `vllm serve` would: kv_plan_compute for
 * (m, gpu, a) (gpu NULL: a custom card from a->gpu_memory_gib), then
 * kv_engine_config_from_plan, then kv_engine_create with device (NULL =
 * host backend). The plan's log lines become the first events. *plan_out
 * (may be NULL) receives the plan, also when it would not start. NULL on
 * error: the plan's vLLM error when it would not start, else the create
 * error. */
kv_engine *kv_engine_create_vllm(const kv_model *m, const kv_gpu *gpu, const kv_args *a, kv_device *device,
                                 kv_plan *plan_out, char *err, size_t errlen);

/* Create an engine from cfg: builds the block pool (num_blocks incl. null),
 * opens the device (host backend unless cfg->device), reserves each rank's
 * plan terms and allocates each rank's KV pool, and logs vLLM-style start-up
 * lines as events. NULL on error (message in err): EINVAL for a bad config
 * (num_blocks < 2, block_size < 1, tp out of range, ...), ENOMEM/EDEVICE from
 * the device (an allocation failure is reported as the OOM it is). */
kv_engine *kv_engine_create(const kv_engine_config *cfg, char *err, size_t errlen);

/* Free the engine and everything it owns. On a borrowed device it frees only
 * its own allocations (placeholders and pools); the device stays open and
 * keeps what others hold. NULL is allowed. */
void kv_engine_destroy(kv_engine *e);

/* The config the engine runs with (after defaults were resolved). */
const kv_engine_config *kv_engine_get_config(const kv_engine *e);

/* ---- Driving ---------------------------------------------------------- */

/* One request to submit. Exactly one of prompt_tokens (a length) or
 * prompt_token_ids is used (ids win when non-NULL). */
typedef struct kv_request_spec {
    int32_t prompt_tokens;            /* prompt length, tokens (>= 1 with the prefix) */
    const int32_t *prompt_token_ids;  /* explicit ids (copied), or NULL */
    int32_t num_prompt_token_ids;
    int32_t output_tokens;            /* tokens to generate (>= 1) */
    const char *prefix_id;            /* shared prefix name, or NULL */
    int32_t prefix_tokens;            /* its length; identical ids for every request naming it */
    int32_t priority;                 /* smaller = more important (vLLM); 0 default */
    const char *cache_salt;           /* extra hash key of the first block, or NULL */
    double arrival_s;                 /* virtual arrival time; < 0 = now. Only recorded (latencies
                                         count from it): the request is queued when submitted */
    int32_t remote_prefill;           /* 1: the prompt's KV was computed by a prefill instance and
                                         is loaded at the first admission (a decode instance of a
                                         prefill/decode split, kv_disagg.h; NixlConnector's
                                         do_remote_prefill): every prompt token beyond the GPU hit
                                         but the last counts as loaded */
} kv_request_spec;

/* Submit a request; it joins the waiting queue (status WAITING). Returns its
 * id (>= 0, increasing from 0) or a negative code: ETOOLONG when the prompt
 * (prefix + prompt) is max_model_len tokens or longer (no room left for the
 * first output token), with vLLM's message
 * ("The decoder prompt (length N) is longer than the maximum model length of
 * M. ..." from vllm/v1/engine/processor.py); ENOFIT when the prompt needs
 * more blocks than the pool has usable (num_blocks - 1), so it could never be
 * scheduled; EINVAL for bad lengths. Rejections are also logged as events. */
int64_t kv_engine_submit(kv_engine *e, const kv_request_spec *spec, char *err, size_t errlen);

/* What one step did. */
typedef struct kv_step_result {
    int64_t step;                 /* index of this step (from 0) */
    int32_t num_scheduled_reqs;   /* requests that ran */
    int32_t num_scheduled_tokens; /* tokens computed (<= max_num_batched_tokens) */
    int32_t num_prefill_tokens;   /* of which prompt (or recompute) tokens */
    int32_t num_decode_tokens;    /* of which one-per-request decode tokens */
    int32_t num_new_reqs;         /* admitted from waiting (new or resumed) */
    int32_t num_preempted;        /* preemptions in this step */
    int32_t num_finished;         /* requests that finished */
    double duration_s;            /* virtual time the step took (time model) */
    double clock_s;               /* virtual clock after the step */
} kv_step_result;

/* Run one scheduler step (vllm/v1/core/sched/scheduler.py schedule() then
 * update_from_output()): running requests first, then waiting ones if no
 * preemption happened; each scheduled request gets its tokens computed, a
 * request whose prompt is fully computed samples one token, finished requests
 * free their blocks; the clock advances by the time model's estimate. With
 * verify on, every running request is read back from every rank. Returns the
 * number of scheduled tokens (0 = nothing ran: the engine is idle, or the step
 * only preempted (out->num_preempted > 0); the clock does not move) or
 * EVERIFY / EDEVICE, or EINVAL when requests exist but none can make progress
 * (a state the submit checks are meant to rule out; reported rather than
 * spinning). out may be NULL. */
int kv_engine_step(kv_engine *e, kv_step_result *out, char *err, size_t errlen);

/* What the last kv_engine_step decided, request by request (for
 * `kvlab simulate --steps-out` and the differential test against vLLM's own
 * scheduler, tests/vllm/). Arrays point into the engine and stay valid
 * until the next step; all counts are 0 before the first step. */
typedef struct kv_step_detail {
    int64_t step;                 /* index of that step */
    int32_t num_scheduled;        /* requests given tokens, in schedule order: running ones, then admitted */
    const int64_t *ids;           /* [num_scheduled] request ids */
    const int32_t *num_tokens;    /* [num_scheduled] tokens scheduled for each */
    int32_t first_admitted;       /* ids[first_admitted..] came from the waiting queue this step */
    const int32_t *hit_tokens;    /* [num_scheduled] prefix-cache hit at admission (admitted ones; else 0) */
    const uint8_t *resumed;       /* [num_scheduled] 1: admitted after a preemption */
    int32_t num_preempted;
    const int64_t *preempted;     /* [num_preempted] in preemption order */
    int32_t num_finished;
    const int64_t *finished;      /* [num_finished] in finish order */
} kv_step_detail;

/* Fill *out with the last step's decisions. */
void kv_engine_last_step(const kv_engine *e, kv_step_detail *out);

/* Token id at position pos of request req_id, also for output positions
 * not generated yet (0 <= pos < prompt + output_tokens, capped at
 * max_model_len): the ids the engine will sample, so a replay elsewhere can
 * feed the same ones. -1 when unknown or out of range. */
int32_t kv_engine_future_token(const kv_engine *e, int64_t req_id, int32_t pos);

/* Move the virtual clock forward to t (seconds; no-op if t <= now), e.g. to
 * the next arrival when the engine is idle. */
void kv_engine_advance_clock(kv_engine *e, double t);

/* Abort a waiting or running request: its blocks are freed (cached full
 * blocks stay in the prefix cache). ENOTFOUND if unknown or already done. */
int kv_engine_abort(kv_engine *e, int64_t req_id, char *err, size_t errlen);

/* Abort every live request. Returns how many were aborted. */
int kv_engine_abort_all(kv_engine *e);

/* Drop every cached block hash (vllm BlockPool.reset_prefix_cache): succeeds
 * only when no request holds a block. Returns 1 on success, 0 when some
 * blocks are still held (logged with vLLM's message). */
int kv_engine_reset_prefix_cache(kv_engine *e);

/* Switch the teaching mode. Needs an idle engine (EBUSY otherwise: abort or
 * finish the requests first). Switching resets the prefix cache. */
int kv_engine_set_mode(kv_engine *e, kv_engine_mode mode, char *err, size_t errlen);

/* Turn the per-step device read-back on (1) or off (0). */
void kv_engine_set_verify(kv_engine *e, int on);

/* ---- Journal: every input, for a history that replays them ----------- */

/* The inputs that change an engine, as kv_engine_set_journal reports them. */
typedef enum kv_input_type {
    KV_IN_SUBMIT = 0,          /* kv_engine_submit: spec (also one the engine will refuse) */
    KV_IN_STEP,                /* kv_engine_step with requests to run (an idle call is not reported) */
    KV_IN_ABORT,               /* kv_engine_abort: req_id (kv_engine_abort_all reports each) */
    KV_IN_RESET_PREFIX_CACHE,  /* kv_engine_reset_prefix_cache */
    KV_IN_SET_MODE,            /* kv_engine_set_mode: mode */
    KV_IN_ADVANCE_CLOCK,       /* kv_engine_advance_clock: t (only when t is later than the clock) */
    KV_IN_LOG,                 /* kv_engine_log: level, text (the formatted line) */
    KV_IN_DESTROY,             /* kv_engine_destroy: the engine is about to go */
    KV_IN_COUNT
} kv_input_type;

typedef struct kv_engine_input {
    kv_input_type type;
    const kv_request_spec *spec; /* SUBMIT (valid during the call only) */
    int64_t req_id;              /* ABORT */
    kv_engine_mode mode;         /* SET_MODE */
    double t;                    /* ADVANCE_CLOCK, seconds */
    int level;                   /* LOG */
    const char *text;            /* LOG (valid during the call only) */
} kv_engine_input;

typedef void (*kv_engine_journal_fn)(void *ctx, const kv_engine *e, const kv_engine_input *in);

/* Call fn(ctx, e, input) once for every input above, before it acts, so
 * the engine's state at the call is the state the input applies to; NULL
 * turns it off. The engine is deterministic: an engine created with the same
 * config and fed the same inputs in the same order reaches the same state
 * (lines the engine logs itself, start-up, refusals, mode switches, are not
 * inputs; kv_engine_set_verify is not one either: it changes no figure). fn
 * must not call back into e except through const accessors. One journal per
 * engine. This is how kv_history.h records a run. */
void kv_engine_set_journal(kv_engine *e, kv_engine_journal_fn fn, void *ctx);

/* ---- Reading state (for views and tests) ------------------------------ */

typedef struct kv_engine_info {
    kv_engine_mode mode;
    int32_t num_blocks;          /* incl. null block */
    int32_t block_size;
    int32_t tensor_parallel_size;
    int32_t num_free_blocks;     /* free queue length (incl. cached-but-free blocks) */
    int32_t num_cached_blocks;   /* blocks carrying a hash (in use or free) */
    int32_t num_running;
    int32_t num_waiting;         /* incl. preempted ones */
    int64_t num_submitted;       /* ids handed out so far */
    int64_t num_finished;        /* finished + aborted */
    int64_t step;                /* steps run */
    double clock_s;              /* virtual clock */
    double kv_usage;             /* 1 - free / (num_blocks - 1), 0..1 */
} kv_engine_info;

/* Fill *out with the engine summary. */
void kv_engine_get_info(const kv_engine *e, kv_engine_info *out);

/* One block, as a view draws it. */
typedef struct kv_block_view {
    int32_t block_id;
    int32_t ref_cnt;             /* requests holding it (null block: 0) */
    uint8_t is_null;             /* block 0 */
    uint8_t has_hash;            /* full block registered in the prefix cache */
    uint8_t is_free;             /* in the free queue (ref_cnt 0, not null) */
    uint8_t cached_free;         /* is_free && has_hash: evictable, still hit-able */
    int32_t free_pos;            /* position in the free queue from the head, -1 if not free */
    int64_t owner;               /* lowest request id holding it, -1 if none */
    int32_t num_owners;          /* == ref_cnt in paged mode */
    uint64_t hash_lo;            /* low 64 bits of its block hash (0 if none), for drawing */
} kv_block_view;

/* Snapshot of all num_blocks blocks into out[0..max) in id order. O(blocks +
 * total block-table length). Returns the number written. */
int32_t kv_engine_blocks(const kv_engine *e, kv_block_view *out, int32_t max);

/* The same without the free-queue positions (free_pos is -1 for every
 * block): the queue walk is the costly part on a large pool, and the app
 * redraws the pool every frame. O(blocks + total block-table length). */
int32_t kv_engine_blocks_brief(const kv_engine *e, kv_block_view *out, int32_t max);

/* One block (id in [0, num_blocks)); EINVAL when out of range. */
int kv_engine_block(const kv_engine *e, int32_t block_id, kv_block_view *out);

/* Ids of the requests holding block_id, ascending, into out[0..max).
 * Returns how many hold it (may exceed max). */
int32_t kv_engine_block_owners(const kv_engine *e, int32_t block_id, int64_t *out, int32_t max);

/* Free block queue, head (next to be reused / evicted) to tail, into
 * out[0..max). Returns the queue length (may exceed max). */
int32_t kv_engine_free_queue(const kv_engine *e, int32_t *out, int32_t max);

typedef struct kv_request_view {
    int64_t id;
    kv_req_status status;
    int32_t prefix_tokens;       /* shared-prefix part of the prompt */
    int32_t prompt_tokens;       /* whole prompt incl. prefix */
    int32_t output_tokens;       /* target output length */
    int32_t num_output_tokens;   /* generated so far */
    int32_t num_tokens;          /* prompt + generated */
    int32_t num_computed_tokens; /* tokens whose KV is in the cache */
    int32_t num_cached_tokens;   /* prefix-cache hit at first admission, tokens */
    int32_t num_blocks;          /* block table length */
    int32_t num_preemptions;
    int32_t priority;
    double arrival_s;
    double first_token_s;        /* virtual time of the first output token, -1 if none */
    double finish_s;             /* -1 until finished */
    int32_t reserved_tokens;     /* contiguous mode: slab size (max_model_len rounded to blocks); else blocks x block_size */
} kv_request_view;

/* State of a live request (waiting, running, preempted) or of one that
 * finished or was aborted recently (the last 256 stay readable, then their
 * slots are recycled). ENOTFOUND otherwise. */
int kv_engine_request(const kv_engine *e, int64_t req_id, kv_request_view *out);

/* A request's block table (block ids, in token order) into out[0..max).
 * Returns its length (may exceed max) or ENOTFOUND. */
int32_t kv_engine_block_table(const kv_engine *e, int64_t req_id, int32_t *out, int32_t max);

/* Running requests in scheduler order (the FCFS preemption victim is the
 * last), into out[0..max). Returns how many run (may exceed max). */
int32_t kv_engine_running(const kv_engine *e, int64_t *out, int32_t max);

/* Waiting requests in the order they will be admitted (FCFS: queue order;
 * priority: (priority, arrival) order). Returns the count (may exceed max). */
int32_t kv_engine_waiting(const kv_engine *e, int64_t *out, int32_t max);

/* Token id at position pos of a live request (prefix, prompt, then output),
 * or -1. Lets a view show what a block holds. */
int32_t kv_engine_token(const kv_engine *e, int64_t req_id, int32_t pos);

/* One tensor-parallel rank: the heads it holds and its own plan terms. */
typedef struct kv_rank_view {
    int32_t rank;
    int32_t num_kv_heads;        /* heads on this rank: max(1, kv_heads // tp) */
    int32_t first_kv_head;       /* global index of its first head */
    int32_t replicated;          /* 1 when tp > kv_heads (heads copied across ranks) */
    uint64_t bytes_per_block;    /* all layers, K and V, this rank */
    uint64_t pool_bytes;         /* num_blocks x bytes_per_block */
    double terms[KV_TERM_COUNT]; /* plan terms in bytes (kv_cache = pool_bytes) */
    uint64_t device_free_bytes, device_total_bytes; /* what the backend reports */
} kv_rank_view;

/* Fill *out for rank r (0..tp-1); EINVAL when out of range. */
int kv_engine_rank(const kv_engine *e, int32_t rank, kv_rank_view *out);

/* Name of the device backend ("host", "cuda"). */
const char *kv_engine_device_name(const kv_engine *e);

/* The scale the engine applied to fit a borrowed device (kv_engine_config.
 * fit_device): 1 = the plan as it is; < 1 = every term and num_blocks
 * multiplied by it (also logged). */
double kv_engine_device_scale(const kv_engine *e);

/* ---- Metrics (vLLM names: vllm/v1/metrics/loggers.py) ----------------- */

typedef struct kv_latency_stats {
    int64_t count;
    double sum, mean, min, max, p50, p90, p99; /* seconds; percentiles estimated from fine buckets */
} kv_latency_stats;

typedef struct kv_engine_metrics {
    double kv_cache_usage_perc;      /* vllm:kv_cache_usage_perc, 0..1 */
    int32_t num_requests_running;    /* vllm:num_requests_running */
    int32_t num_requests_waiting;    /* vllm:num_requests_waiting */
    int64_t num_preemptions_total;   /* vllm:num_preemptions_total */
    int64_t prefix_cache_queries;    /* vllm:prefix_cache_queries_total (tokens; excludes resumed) */
    int64_t prefix_cache_hits;       /* vllm:prefix_cache_hits_total (tokens) */
    int64_t preempted_prefix_cache_queries; /* same for resumed requests (not exported by vLLM) */
    int64_t preempted_prefix_cache_hits;
    /* host tier (kv_offload.h; all 0 without one) */
    int64_t external_prefix_cache_queries; /* vllm:external_prefix_cache_queries (tokens beyond the GPU hit) */
    int64_t external_prefix_cache_hits;    /* vllm:external_prefix_cache_hits (tokens loaded from the tier) */
    int64_t offload_stored_blocks;   /* blocks copied GPU -> host */
    int64_t offload_loaded_blocks;   /* blocks copied host -> GPU */
    int64_t offload_evicted_blocks;  /* blocks dropped from the tier */
    int64_t offload_capacity_blocks; /* the tier's size in blocks */
    double offload_load_s;           /* seconds of loads charged to steps */
    int64_t offload_used_blocks;     /* blocks the tier holds now */
    int64_t offload_skipped_stores;  /* offers skipped whole: no room (vllm:kv_offload_allocation_failure) */
    int64_t offload_load_bytes;      /* loaded bytes, every rank (vllm:kv_offload_load_bytes) */
    int64_t offload_store_bytes;     /* stored bytes, every rank (vllm:kv_offload_store_bytes) */
    int64_t remote_prefill_tokens;   /* prompt tokens loaded from a prefill instance (kv_disagg.h) */
    int64_t prompt_tokens_total;     /* vllm:prompt_tokens_total (per finished/admitted prompt) */
    int64_t prompt_computed_total;   /* of those, the tokens computed, not hit in the prefix cache */
    int64_t generation_tokens_total; /* vllm:generation_tokens_total */
    int64_t request_success_total;   /* vllm:request_success_total (finished) */
    int64_t requests_aborted;
    int64_t requests_rejected;       /* submit refused (too long / never fits) */
    int64_t block_allocations;       /* blocks popped from the free queue */
    int64_t block_frees;             /* blocks returned to the free queue */
    int64_t block_evictions;         /* cached blocks evicted when popped */
    int64_t computed_tokens;         /* tokens actually run through the model (incl. recompute) */
    int64_t recomputed_tokens;       /* of which redone after a preemption */
    /* Work per output token both ways (no-cache lesson): forward-pass tokens
     * with a KV cache (1 per token) vs without (the whole sequence). */
    int64_t work_tokens_with_cache;
    int64_t work_tokens_without_cache;
    /* Contiguous mode: slab reservation vs use, summed over running requests now. */
    int64_t reserved_tokens;         /* tokens reserved by running requests */
    int64_t used_tokens;             /* tokens actually held */
    double internal_fragmentation;   /* 1 - used/reserved (0 when nothing reserved) */
    /* Running figures for the summary. */
    double peak_kv_usage;            /* max over steps */
    double mean_kv_usage;            /* time-weighted mean over the virtual clock */
    double mean_num_requests_waiting;/* time-weighted */
    double mean_num_requests_running;/* time-weighted */
    double busy_s;                   /* virtual time spent in steps */
    kv_latency_stats ttft;           /* vllm:time_to_first_token_seconds */
    kv_latency_stats itl;            /* vllm:inter_token_latency_seconds */
    kv_latency_stats e2e;            /* vllm:e2e_request_latency_seconds */
    kv_latency_stats queue;          /* vllm:request_queue_time_seconds */
} kv_engine_metrics;

/* Copy the current metrics into *out. */
void kv_engine_get_metrics(const kv_engine *e, kv_engine_metrics *out);

/* Write the metrics in Prometheus text format (counters with _total,
 * histograms with vLLM's buckets, label model_name="<model_name>") into
 * buf[len]. Returns the length needed (like snprintf). */
size_t kv_engine_prometheus(const kv_engine *e, const char *model_name, char *buf, size_t len);

/* One timeline sample per step, for sparklines. */
typedef struct kv_timeline_sample {
    int64_t step;
    double clock_s;
    double kv_usage;             /* 0..1 */
    int32_t num_running;
    int32_t num_waiting;
    int32_t num_scheduled_tokens;
    int32_t num_preempted;       /* in this step */
    int64_t num_preemptions_total;
    double prefix_hit_rate;      /* cumulative hits/queries, 0..1 */
    double external_hit_rate;    /* the host tier's: cumulative vllm:external_prefix_cache_hits /
                                    _queries, 0..1 (0 without a tier) */
    double tokens_per_s;         /* scheduled tokens / step duration */
    int64_t work_with_cache;     /* cumulative, see kv_engine_metrics */
    int64_t work_without_cache;
    int64_t generation_tokens_total; /* vllm:generation_tokens_total after the step */
    /* Prompt tokens of the requests whose first token came by the end of
     * the step (vllm:prompt_tokens_total), and of those the ones computed
     * rather than found in the prefix cache (vLLM 0.16's
     * prompt_token_stats.computed): what the periodic stats line's prompt
     * throughput counts (kv_metrics_stats_line). */
    int64_t prompt_tokens_total;
    int64_t prompt_computed_total;
} kv_timeline_sample;

/* The last samples, oldest first, into out[0..max). Returns how many. */
int32_t kv_engine_timeline(const kv_engine *e, kv_timeline_sample *out, int32_t max);

/* ---- Events ------------------------------------------------------------ */

typedef enum kv_event_type {
    KV_EV_ALLOC = 0,     /* block popped from the free queue for req (value: 1) */
    KV_EV_FREE,          /* req dropped its reference (value: ref_cnt after) */
    KV_EV_CACHE_HIT,     /* req reuses a cached block (value: ref_cnt after) */
    KV_EV_EVICT,         /* cached block's hash dropped when popped for reuse */
    KV_EV_CACHE_STORE,   /* full block got its hash (registered in the prefix cache) */
    KV_EV_ADMIT,         /* req scheduled from waiting for the first time (value: hit tokens) */
    KV_EV_PREEMPT,       /* req preempted (value: its num_preemptions) */
    KV_EV_RESUME,        /* preempted req scheduled again (value: hit tokens) */
    KV_EV_FINISH,        /* req finished (value: output tokens) */
    KV_EV_ABORT,         /* req aborted */
    KV_EV_REJECT,        /* submit refused */
    KV_EV_LOG,           /* a log line (text) */
    KV_EV_COUNT
} kv_event_type;

typedef struct kv_event {
    uint64_t seq;        /* 1, 2, 3 ... never reused */
    kv_event_type type;
    int32_t block_id;    /* -1 when not about a block */
    int64_t req_id;      /* -1 when not about a request */
    int64_t value;       /* see kv_event_type */
    int64_t step;        /* step during which it happened */
    double clock_s;
    const char *text;    /* KV_EV_LOG: the line (valid until ~256 more log lines); else NULL */
    int level;           /* KV_EV_LOG: 0 info, 1 warning, 2 error */
} kv_event;

/* Short name of an event type ("alloc", "free", "cache_hit", ...). */
const char *kv_event_type_name(kv_event_type t);

/* Events with seq > since_seq, oldest first, into out[0..max). If the ring
 * has overwritten some of them, the first returned seq is > since_seq + 1
 * (the caller can see the gap). Returns how many were written. */
int32_t kv_engine_events_since(const kv_engine *e, uint64_t since_seq, kv_event *out, int32_t max);

/* Sequence number of the newest event (0 = none yet). */
uint64_t kv_engine_last_event_seq(const kv_engine *e);

/* Add a log line (level 0 info, 1 warning, 2 error) to the event stream,
 * e.g. a lesson narrating or the plan's start-up lines. */
void kv_engine_log(kv_engine *e, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Check the engine's invariants (free + used + null = num_blocks; ref counts
 * equal block-table membership; every hashed block in the map exactly once;
 * the free queue well linked). Returns 0, or EINVAL with the first broken one
 * in err. O(blocks + block tables); for tests and debug builds. */
int kv_engine_check(const kv_engine *e, char *err, size_t errlen);

/* Read every running request back through its block table on every rank and
 * compare with its own tokens (needs write_kv on). Returns 0, EVERIFY with
 * the first mismatch in err, or EDEVICE. */
int kv_engine_verify(kv_engine *e, char *err, size_t errlen);

/* A bounded read-back for callers that run every frame (the lesson app on a
 * GPU box): up to max_tokens tokens of running requests on every rank, going
 * round the requests from where the previous call stopped, so repeated calls
 * cover every request. *checked (may be NULL) = tokens read. Returns as
 * kv_engine_verify. */
int kv_engine_verify_sample(kv_engine *e, int32_t max_tokens, int64_t *checked, char *err, size_t errlen);

#endif
