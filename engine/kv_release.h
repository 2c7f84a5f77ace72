/* kv_release: what changes from one vLLM release to the next, as data.
 *
 * One table, one row per range of releases in which nothing kvlab models
 * changed (0.6.4 up to 0.33.0, the newest). Each row names where its rules
 * come from (the vLLM file of that release, or the PR that changed it) and
 * holds three sections:
 *
 *   mem    the start-up memory accounting: which terms vLLM subtracts from
 *          total x gpu_memory_utilization, whether the CUDA context is inside
 *          that budget, whether a CUDA-graph estimate is taken before the KV
 *          pool is sized, how the profile run's activation peak arises (V0
 *          forward, V1 forward plus the dummy sampler, model runner V2), the
 *          default gpu_memory_utilization and the scheduler defaults per card
 *          class (vllm/engine/arg_utils.py _set_default_args);
 *   text   the wording of each start-up line and error in that release, as
 *          templates for kv_release_format;
 *   sched  the scheduler's admission and preemption rules for that release
 *          (filled and read by the scheduler, kv_sched.c).
 *
 * Besides the releases there is one more row, the course's "textbook"
 * accounting (the source document's arithmetic: a fixed CUDA context, CUDA
 * graphs and NCCL all subtracted from the budget), returned by
 * kv_release_textbook(). It is not a vLLM release and kv_release_find never
 * returns it.
 *
 * The rows and what each term means in which release are documented in
 * README.md ("Which vLLM release"). */
#ifndef KV_RELEASE_H
#define KV_RELEASE_H

#include <stddef.h>
#include <stdint.h>

#include "kv_sched_rules.h"

/* How vLLM turns the profile into "available KV cache memory". */
typedef enum kv_release_budget {
    /* The course: budget - weights - activation - CUDA graphs - CUDA context
     * - NCCL, each a fixed or fitted figure (kv_plan.c). */
    KV_BUDGET_TEXTBOOK = 0,
    /* total x util - (torch peak allocation + every non-torch allocation):
     * the CUDA context and NCCL are inside the budget (vllm/worker/worker.py
     * determine_num_available_blocks <= 0.6.4; vllm/v1/worker/gpu_worker.py
     * determine_available_memory 0.8.0 - 0.9.0). */
    KV_BUDGET_PEAK,
    /* total x util - (weights + torch peak increase + non-torch increase),
     * each measured against a snapshot taken after the CUDA context (and, on
     * V1, NCCL) exist, so those are outside the budget (memory_profiling in
     * vllm/utils.py or vllm/utils/mem_utils.py; V0 0.6.5 - 0.7.x, V1 0.9.1 on). */
    KV_BUDGET_PROFILED,
} kv_release_budget;

/* Which model runner's profile_run makes the activation peak. */
typedef enum kv_release_runner {
    KV_RUNNER_TEXTBOOK = 0, /* the course's fitted formula (kv_plan_activation_bytes) */
    KV_RUNNER_V0,           /* vllm/worker/model_runner.py: max_num_seqs sequences, top-k/top-p sampler */
    KV_RUNNER_V1,           /* vllm/v1/worker/gpu_model_runner.py: forward + _dummy_sampler_run (top-k/top-p) */
} kv_release_runner;

/* Which models the release runs on model runner V2 by default
 * (vllm/config/vllm.py use_v2_model_runner, _is_default_v2_model_runner_model). */
typedef enum kv_release_v2 {
    KV_V2_NEVER = 0,
    KV_V2_LISTED_PLAIN,     /* an architecture of v2_arches, not MoE, not quantized */
    KV_V2_LISTED,           /* an architecture of v2_arches */
    KV_V2_LISTED_OR_DENSE,  /* an architecture of v2_arches, or any dense (non-MoE) model */
    KV_V2_ALL,              /* every generative model */
} kv_release_v2;

/* Scheduler defaults for one class of card (first match wins; the last entry
 * of a row matches every card). */
typedef struct kv_release_card_class {
    double min_total_gib;          /* the card's reported total is at least this (0: any) */
    const char *name_has;          /* NULL, or the card's name contains this (case ignored) */
    const char *name_lacks;        /* NULL, or the card's name does not contain this */
    int64_t max_num_seqs;          /* `vllm serve` defaults (UsageContext.OPENAI_API_SERVER) */
    int64_t max_num_batched_tokens;/* 0: V0's rule, see kv_release_memory.v0_* */
} kv_release_card_class;

/* Which batch sizes CUDA graphs are captured for (the compilation config's
 * default cudagraph_capture_sizes), capped by max_num_batched_tokens. */
typedef enum kv_release_cg_sizes {
    KV_CG_NONE = 0,        /* the textbook: a fixed estimate */
    KV_CG_V0,              /* V0 _BATCH_SIZES_TO_CAPTURE: 1, 2, 4, 8..256 step 8, up to max_num_seqs
                              rounded up to 8; one graph of the whole model per size */
    KV_CG_STEP8_512,       /* V1: 1, 2, 4, 8..512 step 8 (SchedulerConfig.cuda_graph_sizes [512]) */
    KV_CG_STEP8_2SEQS,     /* 1, 2, 4, 8..min(2 x max_num_seqs, 512) step 8 (0.10.1) */
    KV_CG_STEP16_2SEQS,    /* 1, 2, 4, 8..248 step 8, 256..min(2 x max_num_seqs, 512) step 16 (0.11.1) */
} kv_release_cg_sizes;

/* What -O N (--optimization-level N) does to the CUDA graphs. */
typedef enum kv_release_opt_levels {
    KV_OPT_UNMODELLED = 0, /* kvlab does not follow it in this release (noted) */
    KV_OPT_COMPILE_LEVEL,  /* -O N is the compilation level; V1 captures graphs only at 3, the default
                              (v1/worker/gpu_model_runner.py use_cuda_graph, 0.8.0 - 0.10.0) */
    KV_OPT_LEVELS,         /* --optimization-level: 0 no graphs, 1 PIECEWISE only, 2 and 3 (the default 2)
                              the release's graphs (config/vllm.py OPTIMIZATION_LEVEL_00..03, 0.12 on) */
} kv_release_opt_levels;

#define KV_RELEASE_MAX_CARD_CLASSES 4
#define KV_RELEASE_MAX_V2_ARCHES 8

/* (a) The memory accounting. All GiB figures are per GPU. */
typedef struct kv_release_memory {
    int engine_v1;                 /* 0: V0 engine, 1: V1 engine */
    kv_release_budget budget;
    kv_release_runner runner;
    double default_gpu_memory_utilization; /* CacheConfig.gpu_memory_utilization */
    /* The CUDA context (and cuBLAS/NCCL state made at init). Under
     * KV_BUDGET_PEAK it is part of the non-torch allocations and so inside the
     * budget; under KV_BUDGET_PROFILED it only lowers the free memory the
     * start-up check sees. Measured, not in vLLM's source: the 0.6.4 log of
     * an RTX 3090 shows non_torch_memory=0.35GiB, the 0.11 logs of an H100
     * 0.61 GiB in use before the engine starts. */
    double cuda_context_gib[2];   /* [0] cards under 40 GiB, [1] 40 GiB and more */
    /* Non-torch memory vLLM sees grow during the profile run (the "non-torch
     * increase" of memory_profiling): workspaces at tp 1; NCCL and custom
     * all-reduce buffers on top when tp > 1 (NVLink / PCIe cards). Measured
     * across the logs of tests/vectors/real-logs.json. */
    double non_torch_gib;
    double non_torch_tp_nvlink_gib;
    double non_torch_tp_pcie_gib;
    /* FlashInfer's all-reduce + RMSNorm fusion (config/vllm.py
     * enable_allreduce_rms_fusion, 0.17): at tp > 1 on compute capability 9.0
     * or 10.x with FlashInfer installed its workspace replaces the NVLink
     * figure above (0: the release has no such fusion). */
    double non_torch_tp_fusion_gib;
    /* 1: that workspace comes from the compile pass alone (0.17-0.28:
     * compilation/passes/pass_manager.py builds AllReduceFusionPass when
     * pass_config.fuse_allreduce_rms, which config/vllm.py sets only at -O2/-O3
     * and --enforce-eager never compiles), so eager, -O0 and -O1 make none;
     * 0 from 0.29, where the standalone FlashInfer all-reduce
     * (device_communicators/flashinfer_all_reduce.py, VLLM_ALLREDUCE_USE_FLASHINFER=1
     * by default) allocates the same workspace in eager mode too. */
    int fusion_needs_compile;
    /* CUDA graphs: 1 if vLLM subtracts an estimate before it sizes the pool
     * (profile_cudagraph_memory with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
     * on by default). Model runner V2 returns 0 before 0.29. */
    int cudagraph_estimate;
    int cudagraph_estimate_v2;     /* 1: the V2 runner's estimate is real too */
    /* 1: runner V1 takes (and logs) the estimate before the pool is sized
     * whenever graphs are captured, subtracted or not
     * (v1/worker/gpu_worker.py determine_available_memory calls
     * profile_cudagraph_memory from 0.18; cudagraph_estimate says whether it
     * is subtracted). */
    int cudagraph_profiled;
    double cudagraph_gib;          /* the textbook's fixed estimate (0 for releases: modelled, below) */
    /* CUDA graph memory (kv_plan_cudagraph_bytes): which sizes are captured,
     * whether decode also gets FULL graphs (cudagraph_mode FULL_AND_PIECEWISE,
     * config/__init__.py 0.11.0); V1 splits each graph into one piece per
     * attention layer (PIECEWISE). */
    kv_release_cg_sizes cg_sizes;
    int cg_full_decode;
    kv_release_opt_levels opt_levels;
    /* An architecture that raises the largest capture size
     * (model_executor/models/config.py: gpt-oss to 1024 from 0.10.1, 992 in
     * 0.11.0), with step-16 sizes above 256, regardless of max_num_seqs. */
    const char *cg_big_arch;
    int64_t cg_big_max;
    /* The profile run's sampler pass: bytes per element of the [S, vocab]
     * logits at its peak (0: no sampler term). S = min(max_num_seqs,
     * max_num_batched_tokens) on V1; max_num_seqs on V0. */
    double sampler_bytes_per_elem;    /* the native top-k/top-p: PyTorch's sort, from 0.17 a Triton kernel */
    double sampler_fi_bytes_per_elem; /* FlashInfer's top-k/top-p kernel */
    int sampler_flashinfer;           /* FlashInfer's sampler in a PyPI install of the release
                                         (VLLM_USE_FLASHINFER_SAMPLER, v1/sample/ops/topk_topp_sampler.py) */
    /* FlashInfer's sampler runs only on compute capability [min, max] (x10;
     * FlashInferBackend.supports_compute_capability, v1/attention/backends/
     * flashinfer.py): outside it the default-on sampler of 0.21 on falls back
     * to PyTorch's (v1/sample/ops/topk_topp_sampler.py); {0, 0}: any card. */
    int sampler_fi_cc[2];
    double sampler_v2_bytes_per_elem; /* model runner V2's dummy pass (no top-k/top-p) */
    int v2_profiles_warmup;           /* V2's profile also runs the warm-up's sampling parameters (0.33) */
    /* The card class takes torch's total when NVML has no memory figure for
     * the card (platforms/cuda.py NvmlCudaPlatform.get_device_total_memory,
     * 0.33); before, engine/arg_utils.py catches NVML's error and uses the
     * defaults of a card of 0 GiB (kv_gpu.nvml_memory_info). */
    int card_total_from_torch;
    kv_release_v2 v2_runner;
    const char *v2_arches[KV_RELEASE_MAX_V2_ARCHES]; /* NULL-terminated */
    /* V0's max_num_batched_tokens when not given: with chunked prefill
     * (turned on for max_model_len > v0_long_context) v0_chunked_tokens,
     * else max(max_model_len, 2048) (SchedulerConfig). */
    int64_t v0_chunked_tokens;
    int64_t v0_long_context;
    /* The length check plans against usable blocks: one block per layer
     * (the null block the block pool holds back) is taken off the available
     * memory first (kv_cache_utils.py check_enough_kv_cache_memory, 0.29 on). */
    int check_reserves_null_block;
    /* The "GPU KV cache size: N tokens" figure: 0 num_blocks // groups x
     * block_size (v1/core/kv_cache_utils.py _report_kv_cache_config up to
     * 0.20), 1 int(max_concurrency x max_model_len), which counts a
     * sliding-window group's blocks only up to its window (get_kv_cache_capacity,
     * 0.21 on). Equal for a model with one KV cache group. */
    int kv_size_by_concurrency;
    int supports_auto_fit;         /* --max-model-len auto / -1 exists */
    /* mxfp4 MoE (gpt-oss): the Marlin kernel, which pads the experts, on
     * every card (a PyPI install before 0.12 lacks the triton_kernels
     * package) or only before Hopper (quantization/mxfp4.py
     * get_mxfp4_backend); --mxfp4-backend overrides it. */
    int mxfp4_marlin_everywhere;
    /* V1 falls back to the V0 engine on cards below this compute capability
     * (x10: 80 = 8.0; engine/arg_utils.py _is_v1_supported_oracle, 0.8.0 to
     * 0.10.1.x); 0: no fallback. */
    int v0_fallback_below_cc;
    /* V1 falls back to V0 when --cpu-offload-gb is given ("No CPU offloading
     * yet": engine/arg_utils.py _is_v1_supported_oracle, 0.8.0 to 0.8.2). */
    int v0_fallback_cpu_offload;
    /* How the OffloadingConnector's kv_connector_extra_config sizes the host
     * tier: 0 = num_cpu_blocks, a block count (vllm/v1/kv_offload/cpu.py
     * CPUOffloadingSpec, 0.11.0 to 0.13.x); 1 = cpu_bytes_to_use, bytes
     * divided by the bytes of one chunk (cpu.py 0.14.0 on, cpu/spec.py from
     * 0.19; config/vllm.py fills it from --kv-offloading-size). */
    int offload_cpu_bytes;
    /* The OffloadingConnector's LRU keeps the keys of an offer from being
     * evicted to make room for it (vllm/v1/kv_offload/lru_manager.py
     * prepare_store "protected", 0.18.0 on; cpu/policies/lru.py from 0.19). */
    int offload_protects_offer;
    /* How the OffloadingConnector's LRU ranks its keys, a kv_offload_lru
     * (kv_offload.h): 0 the scheduler touches an OrderedDict (to 0.30.x);
     * 1 ranks given on store and when a request finishes, the scheduler
     * touching nothing (cpu/policies/lru.py and cpu/manager.py
     * on_request_finished, 0.31.0 - 0.32.x); 2 and a running request's
     * provisional rank (lru.py _RequestRank, 0.33.0 on). */
    int offload_lru;
    /* What the warm-up after the pool needs beyond the profiled activation:
     * vLLM's own "memory profiling may slightly underestimate" buffer
     * (gpu_worker.py redundancy_buffer_memory, 150 MiB, 0.10.2 on). */
    double warmup_margin_gib;
    /* A cold torch.compile cache (--compile-cache cold: the first start, or
     * any start of a container whose ~/.cache/vllm is not kept). The profile
     * run's first forward is where vLLM compiles the model
     * (v1/worker/gpu_worker.py determine_available_memory: "a profile run
     * which compiles the model"; compilation/backends.py "Compiling a graph
     * for compile range"), inside memory_profiling's window: Inductor's
     * compile-time benchmarking (config/compilation.py combo_kernels with
     * benchmark_combo_kernel) and Triton's autotuning, whose results a warm
     * start reads back (env_override.py TRITON_CACHE_AUTOTUNING, 0.19 on),
     * allocate beside the forward's live tensors. Modelled as bytes per
     * element of the [T, hidden] activation (every rank holds it whole) on top of the forward
     * (the peak is max(forward + this, sampler)), T = max_num_batched_tokens
     * up to compile_cold_max_tokens (the logs of larger profiles show no
     * more); 0: no visible cost. From 0.27, memory_profiling counts the free memory lost
     * since the worker's snapshot (utils/mem_utils.py total_consumed), so
     * what the compile leaves in the allocator and the loaded kernels is
     * subtracted too: compile_cold_non_torch_frac of the transient figure.
     * Neither applies under --enforce-eager or -O0 (no torch.compile). */
    double compile_cold_bytes_per_elem;
    /* The multimodal encoder-cache profile: V1's profile_run (and V2's,
     * v1/worker/gpu/model_runner.py) runs the vision tower on a dummy batch
     * of the modality with the most tokens per item, as many items as the
     * encoder budget holds (v1/core/encoder_cache_manager.py
     * compute_mm_encoder_budget, multimodal/encoder_budget.py _get_max_items,
     * v1/worker/gpu_model_runner.py _get_mm_dummy_batch), inside the
     * profiled peak; --skip-mm-profiling (0.10.1 on) leaves it out.
     * mm_video_max_frames: the frames of the dummy video Qwen2-VL's
     * processing info allows (model_executor/models/qwen2_vl.py
     * _MAX_FRAMES_PER_VIDEO: 16 up to 0.10, 14 from 0.11). 0: no encoder
     * profile modelled (V0). */
    int mm_encoder_profile;
    int mm_video_max_frames;
    int64_t compile_cold_max_tokens;
    double compile_cold_non_torch_frac;
    kv_release_card_class card_classes[KV_RELEASE_MAX_CARD_CLASSES];
} kv_release_memory;

/* (b) The wording of each line, as templates. A template holds literal text
 * and {name:fmt} fields filled by kv_release_format. fmt is one of
 *   .2f .4f   printf with that precision
 *   gib       Python's str(round(x, 2)) (vLLM's format_gib): 16.0, 2.83
 *   ,         a whole number with thousands separators: 23,184
 *   d         a whole number
 *   g         Python's str() of a float (0.9, 0.92)
 *   .1f       printf with one decimal (the stats line's rates and percentages)
 * Field names used: weights, total, util, budget, initial, peak, post,
 * non_torch, activation, kv, tokens, blocks, cpu_blocks, max_model_len,
 * concurrency, needed, estimated, estimated_clause (text), free, requested,
 * num_reqs, cudagraph, gpu_name, cc, equiv_util, suggested_util
 * (gpu_worker.py's round(util -/+ estimate / total, 4), the latter capped
 * at 1.0).
 * NULL: the release has no such line. */
typedef struct kv_release_text {
    const char *weights;          /* after load_model (model runner V1) */
    const char *weights_v2;       /* the same on model runner V2 (v1/worker/gpu/model_runner.py);
                                     NULL: as weights (a row where no model runs V2) */
    const char *profile;          /* V0's memory profiling summary */
    const char *cudagraph_estimate; /* before the pool is sized, by runner V1 (gpu_model_runner.py) */
    const char *cudagraph_estimate_v2; /* the same by runner V2 (NULL in every release: its
                                          cudagraph_utils.py logs no estimate) */
    const char *available_kv;     /* "Available KV cache memory: ..." */
    const char *cudagraph_util;   /* after it, when an estimate was taken: the --gpu-memory-utilization
                                     that allows for it (gpu_worker.py, 0.18 on; the wording of the
                                     release's default VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS) */
    const char *cudagraph_util_flipped; /* the same when the environment sets the variable against the
                                           release's default (0.18-0.19: =1 subtracts; 0.20 on: =0 does not) */
    const char *cudagraph_util_flipped_level; /* "INFO" or "WARNING" for that line */
    const char *gpu_blocks;       /* V0: "# GPU blocks: ..., # CPU blocks: ..." */
    const char *kv_cache_size;    /* V1: "GPU KV cache size: N tokens" (with concurrency when one line) */
    const char *concurrency;      /* V1: a line of its own before 0.28, else NULL */
    const char *graphs;           /* after capture */
    const char *err_free_memory;  /* start-up free-memory check */
    const char *err_no_kv_memory; /* available <= 0 */
    const char *err_max_model_len;/* one request of max_model_len does not fit */
    const char *estimated_clause; /* appended inside err_max_model_len when an estimate exists */
    const char *err_sampler_oom;  /* V1 sampler warm-up after the pool */
    const char *warn_fi_sampler;  /* runner V1's default FlashInfer sampler falls back on a card outside
                                     mem->sampler_fi_cc (topk_topp_sampler.py; field cc) */
    /* bfloat16 on a card below compute capability 8.0 (fields gpu_name, cc):
     * worker/worker.py _check_if_gpu_supports_dtype, later
     * platforms/cuda.py check_if_supports_dtype (every release). */
    const char *err_bf16;
    /* --dtype auto on such a card with a bfloat16 checkpoint: the warning of
     * config _resolve_auto_dtype, which falls back to float16 (0.9.1 on);
     * NULL: auto keeps bfloat16 and err_bf16 stops the start. */
    const char *warn_bf16_fallback;
} kv_release_text;

/* (c) The scheduler: the rules that changed between releases, as
 * kv_sched_rules (engine/kv_sched_rules.h), filled from each release's
 * vllm/v1/core/sched/scheduler.py, kv_cache_manager.py, block_pool.py and
 * config/scheduler.py, and read by the engine (kv_engine_config_from_plan). */
typedef kv_sched_rules kv_release_sched;

typedef struct kv_release {
    const char *first;             /* first release of the range, "0.6.5" */
    const char *last;              /* last release of the range, "0.7.3" */
    const char *source;            /* where the row's rules come from (vLLM files / PRs) */
    const kv_release_memory *mem;
    const kv_release_text *text;
    const kv_release_sched *sched;
} kv_release;

/* Number of release rows and row i (0 = oldest). */
int kv_release_count(void);
const kv_release *kv_release_at(int i);

/* The newest release (the default of --vllm-version). */
const kv_release *kv_release_newest(void);

/* The course's textbook accounting (not a release). */
const kv_release *kv_release_textbook(void);

/* The row for a version string: "0.11", "0.11.2", "v0.6.4.post1",
 * "0.10.1.1", "0.6.4.dev26+g92d86da2" (a dev build counts as its release);
 * NULL or "" gives the newest. X.Y means X.Y.0. Returns NULL with one line
 * in err for a malformed version or one outside 0.6.4 ... 0.33.x. */
const kv_release *kv_release_find(const char *version, char *err, size_t errlen);

/* Compare two version strings as vLLM numbers them (-1, 0, 1); a malformed
 * string sorts first. */
int kv_release_compare(const char *a, const char *b);

/* A short label for a row: "vLLM 0.9.1-0.19.x (V1)", "textbook". */
const char *kv_release_label(const kv_release *r, char *buf, size_t buflen);

/* Scheduler defaults for a card: the first card class of r matching a card
 * of total_gib GiB named name (NULL: no name). *max_num_batched_tokens is 0
 * where V0's rule applies (kv_release_memory.v0_*). */
void kv_release_card_defaults(const kv_release *r, double total_gib, const char *name, int64_t *max_num_seqs,
                              int64_t *max_num_batched_tokens);

/* The rules a V1 release r applies on a card of compute capability cc
 * (x10, 0 = unknown): r itself, or the V0 engine it falls back to below
 * r->mem->v0_fallback_below_cc (then the V0 row of that era, whose sched
 * section is r's). */
const kv_release *kv_release_for_card(const kv_release *r, int cc);

/* The V0 engine a V1 row of 0.8.0 - 0.10.1.x falls back to (the V0 row of
 * its era, whose sched section is r's); r itself for any other row. */
const kv_release *kv_release_v0_fallback(const kv_release *r);

/* Whether release r reads the vLLM environment variable name (its envs.py
 * has it): VLLM_USE_V2_MODEL_RUNNER from 0.12.0, VLLM_MEMORY_PROFILER_
 * ESTIMATE_CUDAGRAPHS from 0.18.0 (the table ENV_VARS in kv_release.c). 0 for
 * a name the table does not hold, and for the textbook. */
int kv_release_reads_env(const kv_release *r, const char *name);

/* FlashInfer's all-reduce size limit in MiB for a card of compute
 * capability cc (x10) at tp ranks: the largest [tokens, hidden] input its
 * fusion pass and its standalone all-reduce take (0.17-0.33:
 * compilation/passes/fusion/allreduce_rms_fusion.py FI_ALLREDUCE_FUSION_MAX_SIZE_MB).
 * 0 where the table has no entry (FlashInfer's all-reduce is off there). */
double kv_release_fi_allreduce_max_mib(int cc, int tp);

/* Whether r runs a model of this architecture on model runner V2 by default. */
int kv_release_uses_v2_runner(const kv_release *r, const char *architecture, int is_moe, int is_quantized);

/* (d) What the release's metrics are called and how its periodic stats line
 * reads: one row per range of releases (and engine, V0 or V1) in which
 * neither changed, from vllm/engine/metrics.py (V0) and
 * vllm/v1/metrics/loggers.py (V1) of each release. */
typedef struct kv_release_metrics {
    const char *first, *last;      /* releases of the row */
    int engine_v1;                 /* 0: the V0 engine (0.6.4 on, and the V0 fallback to 0.10.1.x), 1: V1 */
    const char *ttft, *itl, *queue; /* the Prometheus histograms: time to first token, inter-token
                                      latency (vllm:time_per_output_token_seconds before 0.10.2),
                                      time in the waiting queue */
    const char *usage;             /* the KV usage gauge: vllm:gpu_cache_usage_perc (V0, V1 to 0.9.1),
                                      vllm:kv_cache_usage_perc (V1 0.9.2 on) */
    double interval_s;             /* seconds between stats lines: V0's _LOCAL_LOGGING_INTERVAL_SEC (5),
                                      V1's api_server loop (10; VLLM_LOG_STATS_INTERVAL from 0.11) */
    int quiet_when_idle;           /* the line goes to debug while this and the last interval had
                                      no throughput ("Avoid log noise on an idle production system") */
    int prompt_computed;           /* prompt throughput counts computed tokens only, not prefix-cache
                                      hits (prompt_token_stats.computed, 0.16 on); else whole prompts */
    int preemptions_part;          /* "Preemptions: N, " before the KV usage when N > 0 in the interval (0.11.1 on) */
    /* The line as a template for kv_release_format; fields prompt, gen
     * (tokens/s), running, waiting, usage, hit_rate (percent), preemptions
     * (text: the part above or ""). */
    const char *stats;
    const char *stats_hits;        /* V0: the prefix-cache line after it (prefix caching on); NULL in V1 */
    const char *source;
} kv_release_metrics;

/* The metrics row of release row r run on the V1 engine (engine_v1 1) or
 * the V0 engine (0: a V0 row, or a V1 row's fallback on an old card); the
 * textbook row reads as the newest release. Never NULL. */
const kv_release_metrics *kv_release_metrics_of(const kv_release *r, int engine_v1);

/* One field for kv_release_format: a number (v) or, if s is non-NULL, text. */
typedef struct kv_release_arg {
    const char *name;
    double v;
    const char *s;
} kv_release_arg;

/* Fill template tpl with args into out (at most outlen bytes, NUL
 * included); when a name appears twice in args the first wins. An unknown field name or format is written as "{name?}" so a
 * wrong template shows in tests. Returns the length written. */
size_t kv_release_format(char *out, size_t outlen, const char *tpl, const kv_release_arg *args, int nargs);

#endif
