/* kv_plan: the start-up memory plan vLLM works out on each GPU, in vLLM's
 * order and terms, for one vLLM release (kv_release.h) or for the course's
 * textbook arithmetic:
 *
 *   budget    = reported total x gpu_memory_utilization
 *   available = budget - the terms that release subtracts
 *   num_blocks = available // (page_size x layers)       (block 0 is the null block)
 *   tokens     = num_blocks x block_size
 *
 * Textbook (--accounting textbook): weights, the activation peak, CUDA graphs
 * (0.60 GiB), the CUDA context (0.60 GiB) and NCCL (1 GiB at tp > 1) are all
 * subtracted. A release (--accounting release, the default) subtracts what
 * that release measures: V0 and V1 up to 0.9.0 the peak torch allocation
 * plus every non-torch byte (context included); from V0 0.6.5 / V1 0.9.1 the
 * weights, activation peak and non-torch growth over a snapshot taken after
 * the context exists (context outside); from 0.20 also a CUDA-graph estimate
 * (vllm/worker/worker.py, vllm/v1/worker/gpu_worker.py of each release).
 *
 * then vLLM's checks: free memory at start-up, "No available memory for the
 * cache blocks", and "To serve at least one request with the model's max seq
 * len ..." with the estimated maximum model length (binary search).
 *
 * With tensor parallelism every rank runs the same plan on its own card; the
 * ranks are identical here, so the plan holds one rank's figures and
 * num_ranks. All byte figures are per GPU. */
#ifndef KV_PLAN_H
#define KV_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "kv_args.h"
#include "kv_gpu.h"
#include "kv_model.h"
#include "kv_release.h"

struct cJSON;

/* kv_plan_compute return codes (a plan that would not start is still OK). */
enum {
    KV_PLAN_OK = 0,
    KV_PLAN_EINVAL = -1,   /* impossible input; err holds vLLM's message where vLLM has one */
};

/* Why vLLM would not start (plan.error_kind). */
typedef enum kv_plan_error {
    KV_PLAN_STARTS = 0,
    KV_PLAN_ERR_FREE_MEMORY,      /* "Free memory on device ... on startup is less than desired ..." */
    KV_PLAN_ERR_NO_KV_MEMORY,     /* "No available memory for the cache blocks ..." */
    KV_PLAN_ERR_MAX_MODEL_LEN,    /* "To serve at least one request with the model's max seq len ..." */
    KV_PLAN_ERR_AUTO_FIT,         /* "Cannot auto-fit max_model_len ..." */
    KV_PLAN_ERR_WEIGHTS_OOM,      /* weights alone exceed the free memory: torch OOM while loading */
    KV_PLAN_ERR_PROFILE_OOM,      /* weights + activation peak exceed it: torch OOM in the profile run */
    KV_PLAN_ERR_SAMPLER_OOM,      /* V1: the sampler warm-up after the pool finds too little left */
    KV_PLAN_ERR_QUANT_CAPABILITY, /* "The quantization method X is not supported for the current GPU. ..." */
    KV_PLAN_ERR_LOAD_CHECK,       /* a weight shape the loader refuses at this tp (FP8 blocks, AWQ/GPTQ groups) */
    KV_PLAN_ERR_POOL_OOM,         /* a pool given by size (num_gpu_blocks_override, kv_cache_memory_bytes) larger than
                                     the card has free after the profile: torch OOM allocating it */
} kv_plan_error;

/* Short machine names for kv_plan_error: "", "free_memory",
 * "no_memory_for_cache_blocks", "max_model_len", "auto_fit", "weights_oom",
 * "profile_oom", "sampler_oom", "quantization_capability", "load_check",
 * "pool_oom". */
const char *kv_plan_error_name(kv_plan_error e);

/* One subtracted term of the plan. */
typedef struct kv_plan_term {
    char name[24];      /* "budget", "weights", "activation", "cudagraph", "cuda_context", "nccl", "non_torch", "kv_cache" */
    char how[160];      /* how it was obtained, e.g. "8.03e9 params x 2 bytes / tp 1" or "--activation-gib" */
    double bytes;       /* per GPU; the kv_cache term may be negative */
    int overridden;     /* 1: typed in by the user */
    int counted;        /* 1: subtracted from the budget in this accounting (budget and kv_cache: 1) */
} kv_plan_term;

enum { KV_PLAN_TERM_BUDGET, KV_PLAN_TERM_WEIGHTS, KV_PLAN_TERM_ACTIVATION, KV_PLAN_TERM_CUDAGRAPH,
       KV_PLAN_TERM_CUDA_CONTEXT, KV_PLAN_TERM_NCCL, KV_PLAN_TERM_NON_TORCH, KV_PLAN_TERM_KV_CACHE,
       KV_PLAN_NUM_TERMS };

/* A fix for a plan that would not start: a flag change and what it gives.
 * A change that would fail only vLLM's max_model_len check is paired with
 * the longest max_model_len that then fits (flags end in "--max-model-len N",
 * lowers_max_model_len = 1), so every fix that can start says with what. */
typedef struct kv_plan_fix {
    char flags[96];     /* what to add/change, e.g. "--kv-cache-dtype fp8 --max-model-len 46400" */
    char what[96];      /* "lower max_model_len", "fp8 KV cache", ... */
    int starts;         /* 1 if the plan with this change would start */
    int lowers_max_model_len; /* 1: the change starts only with the lower --max-model-len in flags */
    kv_plan_error error_kind; /* why it still fails (KV_PLAN_STARTS when it starts) */
    double kv_cache_bytes;      /* available KV memory per GPU with the change */
    int64_t kv_cache_tokens;    /* pool size in tokens with the change */
    int64_t max_model_len;      /* max_model_len with the change */
    double max_concurrency;     /* with the change */
} kv_plan_fix;

#define KV_PLAN_MAX_LOG 16
#define KV_PLAN_MAX_FIXES 8
#define KV_PLAN_MAX_NOTES 8

typedef struct kv_plan {
    /* Which rules: the release row (kv_release_textbook() under textbook). */
    const kv_release *release;
    int32_t accounting;          /* KV_ACCOUNTING_RELEASE or KV_ACCOUNTING_TEXTBOOK (kv_args.h) */
    char vllm_version[32];       /* the version asked for ("0.11.0"), or the newest; "" under textbook */
    int32_t engine_v1;           /* 0: V0 engine, 1: V1 */
    int32_t model_runner_v2;     /* 1: the release runs this model on model runner V2 */
    int32_t chunked_prefill;     /* chunked prefill in effect (V0: on for max_model_len > 32K) */
    int32_t flashinfer_sampler;  /* V1: the profile's sampler is FlashInfer's (else PyTorch's sort) */

    /* Outcome. */
    int starts;                  /* 1: vLLM would start */
    kv_plan_error error_kind;
    char error[1024];            /* vLLM's error text ("" when it starts) */

    /* Card and parallelism. */
    char gpu_id[48];
    char gpu_name[128];          /* the catalogue's long name */
    char device_name[64];        /* as torch.cuda.get_device_name() returns it (kv_gpu.device_name) */
    double gpu_total_bytes;      /* reported total per GPU */
    double gpu_used_bytes;       /* other processes at start-up (--gpu-used-gib) */
    double free_at_start_bytes;  /* total - used - CUDA context - NCCL (tp > 1), what vLLM's start-up check sees */
    double gpu_memory_utilization;
    int32_t tensor_parallel_size;
    int32_t num_ranks;           /* = tensor_parallel_size; every rank's figures are the ones below */

    /* The subtraction, per GPU (bytes). available_kv = budget - the five terms. */
    double budget_bytes;
    double weights_bytes;
    double activation_bytes;
    double cudagraph_bytes;
    double cuda_context_bytes;
    double nccl_bytes;
    double non_torch_bytes;      /* release accounting: non-torch growth in the profile (workspaces; tp > 1 NCCL) */
    double cpu_offload_bytes;    /* --cpu-offload-gb: weights kept in CPU memory (weights_bytes is what stays) */
    double cpu_offload_layer_bytes; /* the most of one layer offloaded (V0 copies it back for each forward) */
    double forward_bytes;        /* the activation peak's forward pass part (a cold compile's part included) */
    int32_t compile_cache_warm;  /* --compile-cache warm: the figures are a later start's */
    double compile_cold_bytes;   /* what a cold compile adds beside the forward (0 when warm, eager or none) */
    double compile_cold_non_torch_bytes; /* ... and leaves as non-torch memory (0.27 on) */
    /* The multimodal encoder-cache profile (kv_plan_mm_encoder): the dummy
     * batch's modality ("image"/"video", "" when none runs), items, tokens
     * after the patch merge, and the tower's peak with the outputs held
     * (bytes; 0 when none runs). mm_encoder_budget: vLLM's "Encoder cache
     * will be initialized with a budget of N tokens". */
    char mm_encoder_modality[8];
    int64_t mm_encoder_budget;
    int64_t mm_encoder_items;
    int64_t mm_encoder_tokens;
    double mm_encoder_bytes;
    double mm_encoder_output_bytes;
    /* The same plan under the other compile-cache state (kv_plan_compute
     * fills it when the two differ; other_valid 0 otherwise). */
    int32_t other_valid;
    int32_t other_starts;
    double other_available_kv_bytes;
    int64_t other_kv_cache_tokens;
    double other_max_concurrency;
    double sampler_bytes;        /* its dummy-sampler part (V1; 0 elsewhere) */
    double warmup_need_bytes;    /* V1: what the sampler warm-up after the pool allocates */
    double warmup_free_bytes;    /* V1: what is free for it then */
    double available_kv_bytes;   /* "Available KV cache memory"; may be <= 0 */
    double kv_pool_bytes;        /* what the pool really takes: num_blocks x page_size x layers */
    kv_plan_term terms[KV_PLAN_NUM_TERMS];
    int kv_cache_memory_bytes_set; /* --kv-cache-memory-bytes: available = that, utilization ignored */

    /* KV geometry per GPU. */
    int32_t num_layers;          /* attention layers holding KV */
    int32_t num_sliding_layers;  /* of which use a sliding window */
    int32_t sliding_window;
    int32_t kv_heads_per_gpu;    /* max(1, kv_heads // tp); 1 for MLA */
    int32_t head_size;           /* MLA: kv_lora_rank + qk_rope_head_dim */
    int32_t kv_factor;           /* 2 (K and V), 1 for MLA */
    int32_t kv_dtype_bytes;      /* 2 for bf16/fp16, 1 for fp8/int8, 4 for a float32 model with auto */
    int32_t block_size;
    int64_t page_size_bytes;     /* one block of one layer: kv_factor x block_size x heads x head_size x bytes */
    int64_t kv_bytes_per_token;  /* over all KV layers on this GPU */
    int32_t num_kv_groups;       /* vLLM KV cache groups (1 unless hybrid full/sliding) */
    int32_t group_size;          /* layers sharing one block id (= num_layers when 1 group) */

    /* Pool and requests. */
    int64_t num_blocks;          /* includes the null block 0; 0 when it would not start */
    int64_t num_blocks_computed; /* before --num-gpu-blocks-override */
    int64_t kv_cache_tokens;     /* num_blocks // groups x block_size: what each KV cache group's blocks hold */
    int64_t kv_cache_tokens_logged; /* vLLM's "GPU KV cache size: N tokens": kv_cache_tokens, or from 0.21
                                       int(max_concurrency x max_model_len) (kv_release_memory.kv_size_by_concurrency) */
    int64_t kv_cache_tokens_unrounded; /* floor(available / kv_bytes_per_token): no block rounding */
    int64_t max_model_len;       /* the length the check used (after auto-fit) */
    int64_t model_max_model_len; /* the model's own maximum (derived from config.json) */
    int max_model_len_auto;      /* 1: --max-model-len auto / -1 */
    int max_model_len_default;   /* 1: no --max-model-len: the model's own maximum was used */
    int64_t needed_bytes;        /* KV memory one max_model_len request needs (all layers) */
    int64_t estimated_max_model_len; /* largest length that fits (binary search); 0 if none */
    int64_t blocks_per_request;  /* blocks one max_model_len request needs */
    double max_concurrency;      /* num_blocks / blocks_per_request */
    int64_t max_num_batched_tokens; /* used for the profile run */
    int64_t max_num_seqs;
    int32_t enforce_eager;
    int32_t enable_prefix_caching;
    char weights_dtype[40];      /* "bfloat16", "fp8", "awq 4-bit", ... */
    char kv_cache_dtype[24];     /* "bfloat16"/"fp8"/"int8_per_token_head"... as used */

    /* What vLLM would log, in order (INFO / WARNING / ERROR lines, prefixed). */
    int num_log;
    char log[KV_PLAN_MAX_LOG][1024];

    /* Fixes, cheapest first, filled when it would not start. */
    int num_fixes;
    kv_plan_fix fixes[KV_PLAN_MAX_FIXES];

    /* Notes kvlab adds (a weight it could not size, flags ignored, ...). */
    int num_notes;
    char notes[KV_PLAN_MAX_NOTES][256];
} kv_plan;

/* Compute the plan for model m on card gpu (NULL: args->gpu_memory_gib must
 * be set, a custom card) with engine args a. Never fails because the
 * configuration would not start: that is plan.starts = 0, error_kind and
 * vLLM's error text, plus ranked fixes. Returns KV_PLAN_EINVAL only for
 * impossible input, with err e.g. "Total number of attention heads (64) must
 * be divisible by tensor parallel size (3)." (vllm/config/parallel.py). */
int kv_plan_compute(const kv_model *m, const kv_gpu *gpu, const kv_args *a, kv_plan *out,
                    char *err, size_t errlen);

/* The same without computing fixes (what fixes use internally; cheaper). */
int kv_plan_compute_nofix(const kv_model *m, const kv_gpu *gpu, const kv_args *a, kv_plan *out,
                          char *err, size_t errlen);

/* KV memory one request of `len` tokens needs on one GPU, summed over the
 * layers (FullAttentionSpec / SlidingWindowSpec max_memory_usage_bytes). */
int64_t kv_plan_request_bytes(const kv_plan *p, int64_t len);

/* vLLM's estimate_max_model_len: largest L in [1, max_len] whose request
 * bytes fit in available_bytes (binary search); 0 if even 1 token does not. */
int64_t kv_plan_estimate_max_model_len(const kv_plan *p, double available_bytes, int64_t max_len);

/* The textbook activation peak of the profile run (bytes per GPU) for a
 * model, tp and max_num_batched_tokens (the source document's fitted
 * formula, documented in kv_plan.c). */
double kv_plan_activation_bytes(const kv_model *m, int32_t tp, int64_t max_num_batched_tokens);

/* The forward pass's activation peak as vLLM's profile run allocates it for
 * T batched tokens: the hidden state, residual and norm output (3 x hidden,
 * replicated on every rank) and the MLP's gate_up output and activation (3 x
 * width / tp), 2 bytes each in 16-bit (4 in float32). Bytes per GPU. */
double kv_plan_forward_bytes(const kv_model *m, int32_t tp, int64_t tokens, int act_bytes);

/* The encoder-cache profile of a multimodal model whose tower kvlab models
 * (m->vision_depth > 0): fills p->mm_encoder_* from the budget vLLM computes
 * (v1/core/encoder_cache_manager.py compute_mm_encoder_budget: max of
 * max_num_batched_tokens and the largest item; multimodal/encoder_budget.py
 * _get_max_items: items = min(budget / item, max_num_seqs x items per
 * prompt)), the largest item per modality (model_executor/models/qwen2_vl.py
 * get_max_image_tokens = max_pixels / (patch x merge)^2, get_max_video_tokens:
 * the frames that fit max_model_len, up to video_max_frames, two per
 * temporal patch) and the tower's live tensors per patch at its MLP
 * (qwen2_5_vl.py Qwen2_5_VisionBlock: residual, norm, gate_up, activation
 * and down outputs, act_bytes x (3 hidden + 3 intermediate / tp)) plus the
 * fp32 pixels and rotary tables; the outputs ([tokens, out_hidden]) stay
 * for the text profile. limit_image / limit_video: items per prompt (-1 =
 * vLLM's 999; 0 leaves the modality out); max_pixels 0 = the model's.
 * Nothing runs when both limits are 0 or skip is set. */
void kv_plan_mm_encoder(const kv_model *m, int32_t tp, int act_bytes, int64_t max_num_batched_tokens,
                        int64_t max_num_seqs, int64_t max_model_len, int chunked_prefill, int video_max_frames,
                        int limit_image, int limit_video, int64_t max_pixels, kv_plan *p);

/* CUDA-graph memory (bytes per GPU) that release r's captures hold, the way
 * vLLM's profile_cudagraph_memory (v1/worker/gpu_model_runner.py, 0.18 on)
 * estimates it: the first capture of each mode holds the largest graph's
 * activations (a forward of that many tokens), and every further graph adds
 * its own nodes, one piece per attention layer for PIECEWISE graphs (V1
 * splits the model at attention) and the whole model for FULL or V0 graphs.
 * The sizes follow r->mem->cg_sizes and cg_full_decode (FULL graphs for
 * decode batches up to max_num_seqs), capped by max_num_batched_tokens;
 * at tp > 1 each graph also holds its all-reduce nodes (custom all-reduce
 * when nvlink is set, NCCL otherwise). *pw and *full (may be NULL) get the
 * number of graphs of each mode. */
double kv_plan_cudagraph_bytes(const kv_release *r, const kv_model *m, int32_t tp, int nvlink, int64_t max_num_seqs,
                               int64_t max_num_batched_tokens, int act_bytes, int *pw, int *full);

/* Weight bytes per GPU for a model with engine args (quantization, dtype,
 * tp); sets *how (if non-NULL, howlen bytes) to how it was sized. Returns < 0
 * when the weight format cannot be sized (how says why). This is the
 * parameter tally the course uses; kv_plan_loaded_weights_bytes adds what
 * vLLM's loader holds besides. */
double kv_plan_weights_bytes(const kv_model *m, const kv_args *a, char *how, size_t howlen);

/* The LoRA slots vLLM allocates when it loads the model with --enable-lora
 * (create_lora_weights of vllm/lora/layers/ in 0.33): per GPU, bytes, for
 * max_loras slots of max_lora_rank on every attention and MLP projection,
 * the embeddings and lm_head, in dtype_bytes per value; 0 without
 * --enable-lora. "Model loading took" includes them. how (may be NULL) gets a
 * short description. The routed experts of an MoE model are not counted. */
double kv_plan_lora_bytes(const kv_model *m, const kv_args *a, int tp, int dtype_bytes, char *how, size_t howlen);

/* --cpu-offload-gb: the weight bytes per GPU vLLM keeps in CPU memory. Each
 * decoder layer, as make_layers builds it, goes through maybe_offload_to_cpu
 * (model_executor/models/utils.py up to 0.16; from 0.17
 * model_executor/offloader/uva.py): its parameters, in order (attention
 * projections, then the MLP or the router and expert tensors, then the
 * norms), move to the CPU one whole parameter at a time while the running
 * total is below int(cpu_offload_gb x 2^30); the embeddings and lm_head
 * stay. So the total may pass the limit by up to one parameter, and never
 * exceeds the decoder layers' bytes. Bytes per parameter are the linear
 * layers' as kv_plan_weights_bytes sizes them (tp-sharded). *layer_max (may
 * be NULL) gets the most bytes offloaded from one layer. */
double kv_plan_cpu_offload_bytes(const kv_model *m, const kv_args *a, double *layer_max);

/* Weights as vLLM loads them, per GPU: kv_plan_weights_bytes plus the RoPE
 * cos_sin_cache buffer ([max_position, rotary_dim] in the model dtype,
 * vllm/model_executor/layers/rotary_embedding.py), the tensors every rank
 * keeps whole (MoE router gates, ReplicatedLinear; KV projections when tp
 * exceeds the KV heads, QKVParallelLinear num_kv_head_replicas). Returns < 0
 * as kv_plan_weights_bytes does. */
double kv_plan_loaded_weights_bytes(const kv_model *m, const kv_args *a, char *how, size_t howlen);

/* The version of the JSON that `kvlab serve --json` and `kvlab simulate
 * --json` print (docs/json-schema.md): raised when a field changes meaning
 * or goes away (1: before schema_version existed). */
#define KV_JSON_SCHEMA_VERSION 2

/* The `serve --json` object (engine/kv_plan_fields.h lists its fields;
 * docs/json-schema.md documents it), schema_version first. Caller frees
 * with cJSON_Delete. */
struct cJSON *kv_plan_to_json(const kv_plan *p);

/* The same, printed (malloc'd string; caller frees). */
char *kv_plan_json_string(const kv_plan *p);

#endif
