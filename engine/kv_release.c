/* kv_release: the release table (see kv_release.h). Every rule below was read
 * in the named file of that release's wheel (vllm-X.Y.Z/vllm/...); where a
 * figure is measured rather than read, the comment says which logs. */
#include "kv_release.h"

#include "kv_offload.h"
#include "kv_util.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------- wording */

/* "Model loading took ..." (the "and N seconds" tail is left out: kvlab
 * does not time a load). */
#define W_V0 "Loading model weights took {weights:.4f} GB"     /* vllm/worker/model_runner.py */
#define W_080 "Model loading took {weights:.4f} GB"            /* v1/worker/gpu_model_runner.py 0.8.0 */
#define W_083 "Model loading took {weights:.4f} GiB"           /* 0.8.3 */
#define W_0111 "Model loading took {weights:.4f} GiB memory"   /* 0.11.1 */
#define W_014 "Model loading took {weights:gib} GiB memory"    /* 0.14.0: format_gib */
/* Model runner V2 (v1/worker/gpu/model_runner.py load_model) says "GiB and"
 * from 0.18 to 0.27, "GiB memory and" from 0.28. */
#define W_V2_018 "Model loading took {weights:gib} GiB"

#define PROF_V0_064                                                                                                \
    "Memory profiling results: total_gpu_memory={total:.2f}GiB initial_memory_usage={initial:.2f}GiB "               \
    "peak_torch_memory={peak:.2f}GiB memory_usage_post_profile={post:.2f}Gib non_torch_memory={non_torch:.2f}GiB " \
    "kv_cache_size={kv:.2f}GiB gpu_memory_utilization={util:.2f}"
#define PROF_V0_065                                                                                                \
    "Memory profiling takes ... seconds the current vLLM instance can use total_gpu_memory ({total:.2f}GiB) x "    \
    "gpu_memory_utilization ({util:.2f}) = {budget:.2f}GiB model weights take {weights:.2f}GiB; non_torch_memory " \
    "takes {non_torch:.2f}GiB; PyTorch activation peak memory takes {activation:.2f}GiB; the rest of the memory "  \
    "reserved for KV Cache is {kv:.2f}GiB."

#define GRAPHS "Graph capturing finished, took {cudagraph:.2f} GiB"
#define CG_EST "Estimated CUDA graph memory: {cudagraph:.2f} GiB total"
/* v1/worker/gpu_worker.py determine_available_memory, after "Available KV
 * cache memory" when the estimate is > 0, in the words of the release's
 * default VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS: off in 0.18-0.19 (the
 * "In v0.19" text is 0.19's too), on from 0.20 (whose text already says
 * "default since v0.21.0"). */
#define CG_UTIL_018                                                                                                \
    "In v0.19, CUDA graph memory profiling will be enabled by default (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1), " \
    "which more accurately accounts for CUDA graph memory during KV cache allocation. To try it now, set "         \
    "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 and increase --gpu-memory-utilization from {util:.4f} to "          \
    "{suggested_util:.4f} to maintain the same effective KV cache size."
#define CG_UTIL_020                                                                                                \
    "CUDA graph memory profiling is enabled (default since v0.21.0). The current --gpu-memory-utilization="         \
    "{util:.4f} is equivalent to --gpu-memory-utilization={equiv_util:.4f} without CUDA graph memory profiling. "  \
    "To maintain the same effective KV cache size as before, increase --gpu-memory-utilization to "                \
    "{suggested_util:.4f}. To disable, set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0."
/* The same lines with the variable set against the release's default. */
#define CG_UTIL_018_ON                                                                                             \
    "CUDA graph memory profiling is enabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1). This will become the "   \
    "default in v0.19. The current --gpu-memory-utilization={util:.4f} is equivalent to "                          \
    "--gpu-memory-utilization={equiv_util:.4f} without CUDA graph memory profiling. To maintain the same "          \
    "effective KV cache size as before, increase --gpu-memory-utilization to {suggested_util:.4f}."
#define CG_UTIL_020_OFF                                                                                            \
    "CUDA graph memory profiling is disabled (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0). Without it, CUDA graph " \
    "memory is not accounted for during KV cache allocation, which may require lowering --gpu-memory-utilization " \
    "to avoid OOM. Consider re-enabling it (the default as of v0.21.0) and increasing --gpu-memory-utilization "   \
    "from {util:.4f} to {suggested_util:.4f}."
#define AVAIL_2F "Available KV cache memory: {kv:.2f} GiB"
#define AVAIL_GIB "Available KV cache memory: {kv:gib} GiB"
#define KV_SIZE "GPU KV cache size: {tokens:,} tokens"
#define CONC "Maximum concurrency for {max_model_len:,} tokens per request: {concurrency:.2f}x"
#define KV_SIZE_CONC KV_SIZE ", " CONC /* one line from 0.28 */

#define NOKV "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
#define SEE " See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
#define NOKV_022                                                                                                   \
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the "     \
    "engine (this flag also controls CPU memory reservation on the CPU backend, despite its name)." SEE

#define FREE_2F                                                                                                    \
    "Free memory on device ({free:gib}/{total:gib} GiB) on startup is less than desired GPU memory utilization "    \
    "({util:g}, {requested:gib} GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
#define FREE_014                                                                                                   \
    "Free memory on device cuda:0 ({free:gib}/{total:gib} GiB) on startup is less than desired GPU memory "        \
    "utilization ({util:g}, {requested:gib} GiB). Decrease GPU memory utilization or reduce GPU memory used by "    \
    "other processes."

/* v1/sample/ops/topk_topp_sampler.py: the default-on FlashInfer sampler on
 * a card it does not support (0.21-0.22; reworded in 0.23). */
#define FI_FALLBACK_021                                                                                            \
    "FlashInfer top-p/top-k sampling not supported on compute capability {cc}; falling back to PyTorch-native "    \
    "sampler. Set VLLM_USE_FLASHINFER_SAMPLER=0 to silence."
#define FI_FALLBACK_023                                                                                            \
    "FlashInfer top-p/top-k sampling unavailable: unsupported compute capability {cc}; falling back. Set "         \
    "VLLM_USE_FLASHINFER_SAMPLER=0 to silence."

#define SAMPLER_OOM                                                                                                \
    "CUDA out of memory occurred when warming up sampler with {num_reqs:d} dummy requests. Please try lowering "    \
    "`max_num_seqs` or `gpu_memory_utilization` when initializing the engine."

/* V0 worker.py raise_if_cache_size_invalid. */
#define MAXLEN_V0                                                                                                  \
    "The model's max seq len ({max_model_len:d}) is larger than the maximum number of tokens that can be stored in " \
    "KV cache ({tokens:d}). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "           \
    "initializing the engine."
/* v1/core/kv_cache_utils.py check_enough_kv_cache_memory, by release. The
 * typo "models's" is vLLM's own until 0.21. */
#define MAXLEN_080                                                                                                 \
    "To serve at least one request with the models's max seq len ({max_model_len:d}), ({needed:.2f} GB KV cache is " \
    "needed, which is larger than the available KV cache memory ({kv:.2f} GB). Try increasing "                    \
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
/* 0.8.4: the estimate's f-string is a separate statement there, so the
 * message ends its clause at "memory," and never shows the number. */
#define MAXLEN_084                                                                                                 \
    "To serve at least one request with the models's max seq len ({max_model_len:d}), ({needed:.2f} GiB KV cache "  \
    "is needed, which is larger than the available KV cache memory ({kv:.2f} GiB).{estimated_clause}  Try increasing "     \
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
#define EST_084 " Based on the available memory,"
#define MAXLEN_091                                                                                                 \
    "To serve at least one request with the models's max seq len ({max_model_len:d}), ({needed:.2f} GiB KV cache "  \
    "is needed, which is larger than the available KV cache memory ({kv:.2f} GiB). {estimated_clause} Try increasing "     \
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."
#define EST_091 "Based on the available memory, the estimated maximum model length is {estimated:d}."
#define MAXLEN_014                                                                                                 \
    "To serve at least one request with the models's max seq len ({max_model_len:d}), ({needed:gib} GiB KV cache "  \
    "is needed, which is larger than the available KV cache memory ({kv:gib} GiB). {estimated_clause}Try increasing "      \
    "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine." SEE
#define EST_014 "Based on the available memory, the estimated maximum model length is {estimated:d}. "
#define MAXLEN_022                                                                                                 \
    "To serve at least one request with the model's max seq len ({max_model_len:d}), ({needed:gib} GiB KV cache "   \
    "is needed, which is larger than the available KV cache memory ({kv:gib} GiB). {estimated_clause}Try increasing "      \
    "`gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or decreasing `max_model_len` "  \
    "when initializing the engine." SEE

/* bfloat16 below compute capability 8.0; until 0.7 the message lacks a space ("the`dtype`"). */
#define BF16_V0                                                                                                    \
    "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your {gpu_name} GPU has compute " \
    "capability {cc}. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for example: "      \
    "--dtype=half."
#define BF16                                                                                                       \
    "Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your {gpu_name} GPU has compute " \
    "capability {cc}. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: "     \
    "--dtype=half."
#define BF16_FALLBACK                                                                                              \
    "Your device '{gpu_name}' (with compute capability {cc}) doesn't support torch.bfloat16. Falling back to "     \
    "torch.float16 for compatibility."

/* V0: 0.6.x names the device GPU, 0.7 the platform ("cuda"). */
static const kv_release_text T_V0_064 = {
    .weights = W_V0, .profile = PROF_V0_064, .gpu_blocks = "# GPU blocks: {blocks:d}, # CPU blocks: {cpu_blocks:d}",
    .concurrency = "Maximum concurrency for {max_model_len:d} tokens per request: {concurrency:.2f}x",
    .graphs = GRAPHS, .err_no_kv_memory = NOKV, .err_max_model_len = MAXLEN_V0,
    .err_bf16 = BF16_V0,
};
static const kv_release_text T_V0_065 = {
    .weights = W_V0, .profile = PROF_V0_065, .gpu_blocks = "# GPU blocks: {blocks:d}, # CPU blocks: {cpu_blocks:d}",
    .concurrency = "Maximum concurrency for {max_model_len:d} tokens per request: {concurrency:.2f}x",
    .graphs = GRAPHS, .err_no_kv_memory = NOKV, .err_max_model_len = MAXLEN_V0,
    .err_bf16 = BF16_V0,
};
static const kv_release_text T_V0_070 = { /* 0.7.0-0.7.2: the platform's dispatch key */
    .weights = W_V0, .profile = PROF_V0_065, .gpu_blocks = "# CUDA blocks: {blocks:d}, # CPU blocks: {cpu_blocks:d}",
    .concurrency = "Maximum concurrency for {max_model_len:d} tokens per request: {concurrency:.2f}x",
    .graphs = GRAPHS, .err_no_kv_memory = NOKV, .err_max_model_len = MAXLEN_V0,
    .err_bf16 = BF16_V0,
};
static const kv_release_text T_V0_073 = { /* 0.7.3: the platform's device name */
    .weights = W_V0, .profile = PROF_V0_065, .gpu_blocks = "# cuda blocks: {blocks:d}, # CPU blocks: {cpu_blocks:d}",
    .concurrency = "Maximum concurrency for {max_model_len:d} tokens per request: {concurrency:.2f}x",
    .graphs = GRAPHS, .err_no_kv_memory = NOKV, .err_max_model_len = MAXLEN_V0,
    .err_bf16 = BF16_V0,
};
/* V0 inside 0.8.0-0.10.1.x (the compute-capability fallback):
 * worker/model_runner.py says "Model loading took ... GB". */
static const kv_release_text T_V0_080 = {
    .weights = W_080, .profile = PROF_V0_065, .gpu_blocks = "# cuda blocks: {blocks:d}, # CPU blocks: {cpu_blocks:d}",
    .concurrency = "Maximum concurrency for {max_model_len:d} tokens per request: {concurrency:.2f}x",
    .graphs = GRAPHS, .err_no_kv_memory = NOKV, .err_max_model_len = MAXLEN_V0,
    .err_bf16 = BF16,
};
/* ... from 0.9.1, where --dtype auto falls back to float16 on such a card. */
static const kv_release_text T_V0_091 = {
    .weights = W_080, .profile = PROF_V0_065, .gpu_blocks = "# cuda blocks: {blocks:d}, # CPU blocks: {cpu_blocks:d}",
    .concurrency = "Maximum concurrency for {max_model_len:d} tokens per request: {concurrency:.2f}x",
    .graphs = GRAPHS, .err_no_kv_memory = NOKV, .err_max_model_len = MAXLEN_V0,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
static const kv_release_text T_V1_080 = {
    .weights = W_080, .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS, .err_no_kv_memory = NOKV,
    .err_max_model_len = MAXLEN_080, .err_sampler_oom = SAMPLER_OOM,
    .err_bf16 = BF16,
};
static const kv_release_text T_V1_083 = {
    .weights = W_083, .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS, .err_no_kv_memory = NOKV,
    .err_max_model_len = MAXLEN_080, .err_sampler_oom = SAMPLER_OOM,
    .err_bf16 = BF16,
};
static const kv_release_text T_V1_084 = {
    .weights = W_083, .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS, .err_no_kv_memory = NOKV,
    .err_max_model_len = MAXLEN_084, .estimated_clause = EST_084, .err_sampler_oom = SAMPLER_OOM,
    .err_bf16 = BF16,
};
static const kv_release_text T_V1_091 = {
    .weights = W_083, .available_kv = AVAIL_2F, .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS,
    .err_free_memory = FREE_2F, .err_no_kv_memory = NOKV, .err_max_model_len = MAXLEN_091,
    .estimated_clause = EST_091, .err_sampler_oom = SAMPLER_OOM,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
static const kv_release_text T_V1_0111 = {
    .weights = W_0111, .available_kv = AVAIL_2F, .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS,
    .err_free_memory = FREE_2F, .err_no_kv_memory = NOKV, .err_max_model_len = MAXLEN_091,
    .estimated_clause = EST_091, .err_sampler_oom = SAMPLER_OOM,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
static const kv_release_text T_V1_013 = {
    .weights = W_0111, .available_kv = AVAIL_2F, .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS,
    .err_free_memory = FREE_2F, .err_no_kv_memory = NOKV SEE, .err_max_model_len = MAXLEN_091 SEE,
    .estimated_clause = EST_091, .err_sampler_oom = SAMPLER_OOM,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
static const kv_release_text T_V1_014 = {
    .weights = W_014, .available_kv = AVAIL_GIB, .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS,
    .err_free_memory = FREE_014, .err_no_kv_memory = NOKV SEE, .err_max_model_len = MAXLEN_014,
    .estimated_clause = EST_014, .err_sampler_oom = SAMPLER_OOM,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
/* 0.18: runner V1 logs its graph estimate (subtracted from 0.20) and the
 * utilization that allows for it. */
static const kv_release_text T_V1_018 = {
    .weights = W_014, .weights_v2 = W_V2_018, .cudagraph_estimate = CG_EST, .available_kv = AVAIL_GIB,
    .cudagraph_util = CG_UTIL_018, .cudagraph_util_flipped = CG_UTIL_018_ON,
    .cudagraph_util_flipped_level = "INFO", .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS,
    .err_free_memory = FREE_014, .err_no_kv_memory = NOKV SEE, .err_max_model_len = MAXLEN_014,
    .estimated_clause = EST_014, .err_sampler_oom = SAMPLER_OOM,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
static const kv_release_text T_V1_020 = {
    .weights = W_014, .weights_v2 = W_V2_018, .cudagraph_estimate = CG_EST, .available_kv = AVAIL_GIB,
    .cudagraph_util = CG_UTIL_020, .cudagraph_util_flipped = CG_UTIL_020_OFF,
    .cudagraph_util_flipped_level = "WARNING", .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS,
    .err_free_memory = FREE_014, .err_no_kv_memory = NOKV SEE, .err_max_model_len = MAXLEN_014,
    .estimated_clause = EST_014, .err_sampler_oom = SAMPLER_OOM, .warn_fi_sampler = FI_FALLBACK_021,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
static const kv_release_text T_V1_022 = {
    .weights = W_014, .weights_v2 = W_V2_018, .cudagraph_estimate = CG_EST, .available_kv = AVAIL_GIB,
    .cudagraph_util = CG_UTIL_020, .cudagraph_util_flipped = CG_UTIL_020_OFF,
    .cudagraph_util_flipped_level = "WARNING", .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS,
    .err_free_memory = FREE_014, .err_no_kv_memory = NOKV_022, .err_max_model_len = MAXLEN_022,
    .estimated_clause = EST_014, .err_sampler_oom = SAMPLER_OOM, .warn_fi_sampler = FI_FALLBACK_021,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
static const kv_release_text T_V1_023 = {
    .weights = W_014, .weights_v2 = W_V2_018, .cudagraph_estimate = CG_EST, .available_kv = AVAIL_GIB,
    .cudagraph_util = CG_UTIL_020, .cudagraph_util_flipped = CG_UTIL_020_OFF,
    .cudagraph_util_flipped_level = "WARNING", .kv_cache_size = KV_SIZE, .concurrency = CONC, .graphs = GRAPHS,
    .err_free_memory = FREE_014, .err_no_kv_memory = NOKV_022, .err_max_model_len = MAXLEN_022,
    .estimated_clause = EST_014, .err_sampler_oom = SAMPLER_OOM, .warn_fi_sampler = FI_FALLBACK_023,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
/* 0.28: runner V2 says "GiB memory" too; one KV size line. */
static const kv_release_text T_V1_028 = {
    .weights = W_014, .weights_v2 = W_014, .cudagraph_estimate = CG_EST, .available_kv = AVAIL_GIB,
    .cudagraph_util = CG_UTIL_020, .cudagraph_util_flipped = CG_UTIL_020_OFF,
    .cudagraph_util_flipped_level = "WARNING", .kv_cache_size = KV_SIZE_CONC, .graphs = GRAPHS, .err_free_memory = FREE_014,
    .err_no_kv_memory = NOKV_022, .err_max_model_len = MAXLEN_022, .estimated_clause = EST_014,
    .err_sampler_oom = SAMPLER_OOM, .warn_fi_sampler = FI_FALLBACK_023,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
/* 0.29: every model on runner V2, whose graph estimate is real
 * (v1/worker/gpu/cudagraph_utils.py profile_cudagraph_memory) but logs no
 * "Estimated CUDA graph memory" line (cudagraph_estimate_v2 NULL); only
 * runner V1's gpu_model_runner.py prints it. gpu_worker.py's utilization
 * line follows any estimate. */
static const kv_release_text T_V1_029 = {
    .weights = W_014, .weights_v2 = W_014, .cudagraph_estimate = CG_EST, .available_kv = AVAIL_GIB,
    .cudagraph_util = CG_UTIL_020, .cudagraph_util_flipped = CG_UTIL_020_OFF,
    .cudagraph_util_flipped_level = "WARNING", .kv_cache_size = KV_SIZE_CONC, .graphs = GRAPHS, .err_free_memory = FREE_014,
    .err_no_kv_memory = NOKV_022, .err_max_model_len = MAXLEN_022, .estimated_clause = EST_014,
    .err_sampler_oom = SAMPLER_OOM, .warn_fi_sampler = FI_FALLBACK_023,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};
/* The course's wording: the source document's vLLM, as kvlab has always
 * printed it (the golden files under tests/golden/ pin it). */
static const kv_release_text T_TEXTBOOK = {
    .weights = "Model loading took {weights:.2f} GiB memory",
    .cudagraph_estimate = CG_EST,
    .available_kv = AVAIL_2F,
    .kv_cache_size = KV_SIZE_CONC,
    .graphs = GRAPHS,
    .err_free_memory = "Free memory on device cuda:0 ({free:.2f}/{total:.2f} GiB) on startup is less than desired GPU "
                       "memory utilization ({util:g}, {requested:.2f} GiB). Decrease GPU memory utilization or reduce "
                       "GPU memory used by other processes.",
    .err_no_kv_memory = NOKV SEE,
    .err_max_model_len =
        "To serve at least one request with the model's max seq len ({max_model_len:d}), ({needed:gib} GiB KV cache "
        "is needed, which is larger than the available KV cache memory ({kv:gib} GiB).{estimated_clause} Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine." SEE,
    .estimated_clause = " Based on the available memory, the estimated maximum model length is {estimated:d}.",
    .err_sampler_oom = SAMPLER_OOM,
    .err_bf16 = BF16, .warn_bf16_fallback = BF16_FALLBACK,
};

/* ----------------------------------------------------------- scheduler */

/* One set per range in which none of kv_sched_rules changed (fields in the
 * order of kv_sched_rules.h: reserve_full_prompt, watermark,
 * priority_self_continue, priority_unschedule_victim, free_uncached_first,
 * stats_at_admission, stats_split_preempted, skip_unchunkable,
 * long_prefill_needs_two). Read from vllm/v1/core/sched/scheduler.py,
 * kv_cache_manager.py, block_pool.py and config/scheduler.py of each release;
 * tests/vllm/ replays kvlab's steps on vLLM's own scheduler to check them.
 * The V0 releases (before 0.8) had another scheduler altogether; the engine
 * runs them with the first V1 rules. */
/* 0.8.0 - 0.9.1: FCFS only in V1 (no priority policy yet), freed blocks to the
 * tail, prefix-cache stats at every lookup, nothing split. */
static const kv_release_sched S_V1_080 = {0, 0.0, 0, 0, 0, 0, 0, 0, 0};
/* 0.9.2 - 0.11.0: priority policy (a victim already scheduled keeps its place
 * in the step); a prompt over the budget with chunked prefill off is skipped. */
static const kv_release_sched S_V1_092 = {0, 0.0, 0, 0, 0, 0, 0, 1, 0};
/* 0.11.1 - 0.11.x: a priority victim already scheduled gives its tokens back
 * (scheduler.py token_budget += ...); resumed requests counted apart
 * (PrefixCacheStats.preempted_*). */
static const kv_release_sched S_V1_0111 = {0, 0.0, 0, 1, 0, 0, 1, 1, 0};
/* 0.12.0 - 0.18.x: admission stops at an unchunkable prompt over the budget. */
static const kv_release_sched S_V1_012 = {0, 0.0, 0, 1, 0, 0, 1, 0, 0};
/* 0.19.0 - 0.23.x: scheduler_reserve_full_isl (default True): the whole prompt must fit. */
static const kv_release_sched S_V1_019 = {1, 0.0, 0, 1, 0, 0, 1, 0, 0};
/* 0.24.0 - 0.26.x: SchedulerConfig.watermark (default 0.0); block_pool.py frees
 * blocks without a hash to the head of the free queue. */
static const kv_release_sched S_V1_024 = {1, 0.0, 0, 1, 1, 0, 1, 0, 0};
/* 0.27.0 - 0.30.x: prefix-cache stats recorded once, at admission. */
static const kv_release_sched S_V1_027 = {1, 0.0, 0, 1, 1, 1, 1, 0, 0};
/* 0.31.0 - 0.32.x: long_prefill_token_threshold off for a lone request. */
static const kv_release_sched S_V1_031 = {1, 0.0, 0, 1, 1, 1, 1, 0, 1};
/* 0.33.0: a priority request that preempted itself lets the others go on. */
static const kv_release_sched S_V1_033 = {1, 0.0, 1, 1, 1, 1, 1, 0, 1};

/* ------------------------------------------------------------- memory */

/* Card classes, `vllm serve` defaults (engine/arg_utils.py). V0: 256 seqs
 * and SchedulerConfig's token rule (0 here). */
#define CARDS_V0 {{0, NULL, NULL, 256, 0}}
/* 0.8.0-0.8.3 _set_default_args_v1: H100/H200 by name get 8192 tokens; every card 1024 seqs. */
#define CARDS_080 {{0, "h100", NULL, 1024, 8192}, {0, "h200", NULL, 1024, 8192}, {0, NULL, NULL, 1024, 2048}}
/* 0.8.4: the others get 256 seqs. */
#define CARDS_084 {{0, "h100", NULL, 1024, 8192}, {0, "h200", NULL, 1024, 8192}, {0, NULL, NULL, 256, 2048}}
/* 0.8.5: by memory, >= 70 GiB. */
#define CARDS_085 {{70, NULL, NULL, 1024, 8192}, {0, NULL, NULL, 256, 2048}}
/* 0.9.0: ... except A100s (PR #17885). */
#define CARDS_090 {{70, NULL, "a100", 1024, 8192}, {0, NULL, NULL, 256, 2048}}
/* 0.28.0: >= 160 GiB (B200/B300) get 16384 tokens. */
#define CARDS_028 {{160, NULL, NULL, 1024, 16384}, {70, NULL, "a100", 1024, 8192}, {0, NULL, NULL, 256, 2048}}

/* Measured terms (GiB). Context: non_torch_memory=0.35GiB in the 0.6.4 log
 * of an RTX 3090 (vllm issue #10517); 0.61 GiB in use before start-up on
 * an H100 in the 0.11 llm-d logs (79.18 total, 78.57 free). Non-torch
 * growth during the profile run: 0.13-0.14 GiB at tp 1 and 0.54-0.55 GiB at
 * tp 2 on NVLink H100s in those logs; PCIe boxes keep smaller NCCL buffers. */
#define CTX_SMALL 0.35
#define CTX_LARGE 0.61
#define NON_TORCH 0.13
#define NON_TORCH_NVLINK 0.41
#define NON_TORCH_PCIE 0.12
/* The textbook's CUDA-graph estimate, the source document's "Estimated CUDA
 * graph memory: 0.60 GiB total" (releases model theirs:
 * kv_plan_cudagraph_bytes). */
#define CG_GIB 0.60
/* The dummy sampler pass at the peak, per element of the [S, vocab] logits:
 * the 16-bit logits (2) and their fp32 copy (4) stay alive while
 * apply_top_k_top_p sorts them: sorted values and int64 indices (12), and
 * the sort's own scratch, an int64 iota plus cub's double buffers (8 + 12).
 * 38 bytes; the llm-d logs of Llama-3.1-8B, Qwen3-0.6B, Qwen3-32B, gpt-oss
 * and Llama-3.3-70B imply 38.2-38.4. FlashInfer's kernel samples without
 * sorting: the 16-bit and fp32 logits (6), its masked logits and
 * probabilities (8) and a little scratch; the Mistral-Small-3.2 log on the
 * v0.11.0 image implies 16.3, and flashinfer issue #1180 shows the official
 * image (FlashInfer) keep 1.5 GiB more KV than one without it. Model runner
 * V2's dummy pass skips top-k/top-p (v1/worker/gpu/model_runner.py
 * _dummy_sampler_run): the 16-bit logits and the fp32 copy
 * apply_sampling_params makes, 6 bytes. */
/* Later rows restate a field of the macro they build on (data, not code):
 * that is the point of the table, so the override warning is off here. */
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Winitializer-overrides"
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverride-init"
#endif
#define SAMPLER_TOPK 38.0
#define SAMPLER_FI 16.0
#define SAMPLER_V2 6.0
/* From 0.26 V2's sampler copies the logits to fp32 only for requests whose
 * parameters process them (0.26 v1/worker/gpu/sample/sampler.py
 * apply_sampling_params works in place; 0.27 _requires_logits_processing;
 * 0.28 on needs_logits_processing). The dummy requests carry none
 * (temperature 0, top-k the vocabulary, top-p 1: states.py's initial
 * values), so the dummy pass keeps only the 16-bit logits: 2 bytes. */
#define SAMPLER_V2_IN_PLACE 2.0
/* 0.17.0 replaced the sort with a Triton top-k/top-p kernel
 * (v1/sample/ops/topk_topp_triton.py, used from 8 requests up): the 16-bit
 * logits, their fp32 copy, the probabilities and the exponential noise of
 * random_sample, about 15 bytes per element. The llm-d capacity-planner
 * report on 0.19.0 (H100) logs 1.89 GiB for Llama-3.1-8B and 2.21 GiB for
 * Qwen2.5-7B at 1024 requests (14.9-15.2 bytes per element once the hidden
 * states are taken off), and Qwen3-14B's activation falls from 5.64 GiB on
 * 0.16.0 to 2.23 GiB on 0.17.0. */
#define SAMPLER_TRITON 15.0
/* Non-torch growth from 0.18 (0.25 GiB at tp 1 in the same report: Qwen3-14B
 * 0.13 on 0.17.0, 0.25 on 0.18.0; Llama-3.1-8B 0.25 and Qwen2.5-7B 0.24 on
 * 0.19.0). */
#define NON_TORCH_018 0.25
/* The all-reduce fusion workspace at tp > 1 (0.19.0 report: 2.06-2.13 GiB of
 * non-torch memory at tp 2 and 4 against 0.24-0.25 at tp 1). */
#define NON_TORCH_FUSION 1.82
/* A cold compile cache (kv_release_memory.compile_cold_*), measured in
 * bytes per element of the profile's [T, hidden] activation. The same
 * command on the same card logged 35,792 tokens on a cold cache (peak
 * activation 1.18 GiB) and 43,040 on a warm one (0.19 GiB): 0.99 GiB more
 * for 2,048 tokens of Qwen3-8B's 4,096-wide hidden state, 126 bytes per
 * element. A 0.27.1 first start of Qwen2.5-0.5B (hidden 896) on a WSL2 RTX
 * 4090 logged 0.56 GiB of non-torch memory where a later start holds 0.25
 * (tests/vectors/real-logs.json wsl-0271-rtx4090-qwen2.5-0.5b-cold), 1.4
 * times its transient figure (its peak activation, 0.25 GiB, the sampler's,
 * leaves room for that); an LLM() start on the same card logged 0.30, and
 * the 0.27-0.28 first starts kvlab issue #22 cites show 1.5-2.5 GiB of
 * activation and non-torch memory in all: the non-torch part is taken as
 * equal to the transient one (2.0 GiB in all for an 8B). Larger
 * profiles are not known to cost more: the tokens count up to 2,048 (the
 * profile of cards under 70 GiB), an assumption until a log of a larger cold
 * profile says otherwise. Up to 0.19 a cold start shows no such cost: the
 * llm-d planner's 0.19.0 phi-2 log ("Compiling a graph for compile range
 * (1, 8192) takes 5.04 s") peaks at 0.79 GiB, its sampler's figure. */
#define COMPILE_COLD 126.0
#define COMPILE_COLD_NT_027 1.0
#define COMPILE_COLD_TOKENS 2048
/* gpu_worker.py: "empirically observed that the memory profiling may
 * slightly underestimate the memory consumption ... (=150MiB)". */
#define WARMUP_MARGIN (150.0 / 1024.0)

#define V0_MEM(budget_, chunked_)                                                                                  \
    .engine_v1 = 0, .budget = budget_, .runner = KV_RUNNER_V0, .default_gpu_memory_utilization = 0.90,             \
    .cuda_context_gib = {CTX_SMALL, CTX_LARGE}, .non_torch_gib = NON_TORCH, .non_torch_tp_nvlink_gib = NON_TORCH_NVLINK, \
    .non_torch_tp_pcie_gib = NON_TORCH_PCIE, .v0_chunked_tokens = chunked_, .v0_long_context = 32768,              \
    .card_classes = CARDS_V0, .sampler_bytes_per_elem = SAMPLER_TOPK, .cg_sizes = KV_CG_V0

#define V1_MEM(budget_, util_, cg_, autofit_)                                                                      \
    .engine_v1 = 1, .budget = budget_, .runner = KV_RUNNER_V1, .default_gpu_memory_utilization = util_,            \
    .cudagraph_estimate = cg_, .supports_auto_fit = autofit_,                                                      \
    .cuda_context_gib = {CTX_SMALL, CTX_LARGE}, .non_torch_gib = NON_TORCH, .non_torch_tp_nvlink_gib = NON_TORCH_NVLINK, \
    .non_torch_tp_pcie_gib = NON_TORCH_PCIE, .sampler_bytes_per_elem = SAMPLER_TOPK,                              \
    .sampler_fi_bytes_per_elem = SAMPLER_FI, .sampler_v2_bytes_per_elem = SAMPLER_V2, .cg_sizes = KV_CG_STEP8_512, \
    .mm_encoder_profile = 1, .mm_video_max_frames = 16

/* V0 0.6.4 (vllm/worker/worker.py determine_num_available_blocks): peak
 * torch allocation plus every non-torch byte in use, context included.
 * The profile run samples max_num_seqs dummy sequences with top-k/top-p
 * (worker/model_runner.py profile_run, model_executor/layers/sampler.py
 * _apply_top_k_top_p sorts the fp32 logits): the same 38 bytes per element
 * as V1's sort; the 0.8.2 T4 and 0.7.x logs of tests/vectors/real-logs.json
 * show it (0.90 GiB at 192 sequences of Llama-3.2-3B). Chunked prefill
 * (max_model_len > 32K) uses 512 tokens (config.py SchedulerConfig). */
static const kv_release_memory M_V0_064 = {V0_MEM(KV_BUDGET_PEAK, 512)};
/* V0 0.6.5-0.7.x: memory_profiling against the snapshot taken at worker
 * init (PR #10511): context outside; chunked prefill 2048 tokens. */
static const kv_release_memory M_V0_065 = {V0_MEM(KV_BUDGET_PROFILED, 2048)};
/* V1 0.8.0-0.9.0 (v1/worker/gpu_worker.py determine_available_memory):
 * total x util - (peak + non-torch allocations), context inside. */
static const kv_release_memory M_V1_080 = {V1_MEM(KV_BUDGET_PEAK, 0.90, 0, 0), .card_classes = CARDS_080,
                                           .v0_fallback_below_cc = 80, .v0_fallback_cpu_offload = 1,
                                           .opt_levels = KV_OPT_COMPILE_LEVEL};
/* 0.8.3: V1 offloads weights itself (models/utils.py maybe_offload_to_cpu over UVA). */
static const kv_release_memory M_V1_083 = {V1_MEM(KV_BUDGET_PEAK, 0.90, 0, 0), .card_classes = CARDS_080,
                                           .v0_fallback_below_cc = 80,
                                           .opt_levels = KV_OPT_COMPILE_LEVEL};
static const kv_release_memory M_V1_084 = {V1_MEM(KV_BUDGET_PEAK, 0.90, 0, 0), .card_classes = CARDS_084,
                                           .v0_fallback_below_cc = 80,
                                           .opt_levels = KV_OPT_COMPILE_LEVEL};
static const kv_release_memory M_V1_085 = {V1_MEM(KV_BUDGET_PEAK, 0.90, 0, 0), .card_classes = CARDS_085,
                                           .v0_fallback_below_cc = 80,
                                           .opt_levels = KV_OPT_COMPILE_LEVEL};
/* 0.9.0: FlashInfer's sampler whenever FlashInfer is installed (0.8.x
 * logged it as disabled, "not backward compatible"). The PyPI wheel does
 * not install FlashInfer before 0.11.1 (an extra), so kvlab's default is
 * PyTorch's sort; the official image has FlashInfer (--flashinfer-sampler
 * true): flashinfer issue #1180 compares the two. */
static const kv_release_memory M_V1_090 = {V1_MEM(KV_BUDGET_PEAK, 0.90, 0, 0), .card_classes = CARDS_090,
                                           .mxfp4_marlin_everywhere = 1, .v0_fallback_below_cc = 80,
                                           .opt_levels = KV_OPT_COMPILE_LEVEL};
/* V1 0.9.1: memory_profiling with the snapshot taken after NCCL init:
 * requested memory - non-KV memory. mxfp4 (gpt-oss, 0.10.1 on) runs on
 * Marlin unless the optional triton_kernels package is installed
 * (quantization/mxfp4.py get_mxfp4_backend; vllm issue #23278: 65.97 GiB). */
static const kv_release_memory M_V1_091 = {V1_MEM(KV_BUDGET_PROFILED, 0.90, 0, 0), .card_classes = CARDS_090,
                                           .mxfp4_marlin_everywhere = 1, .v0_fallback_below_cc = 80,
                                           .opt_levels = KV_OPT_COMPILE_LEVEL};
/* 0.10.1: graphs for 1, 2, 4, 8 ... min(2 x max_num_seqs, 512)
 * (config/scheduler.py cuda_graph_sizes). */
#define GPT_OSS_GRAPHS(max_) .cg_big_arch = "GptOssForCausalLM", .cg_big_max = max_
static const kv_release_memory M_V1_0101 = {V1_MEM(KV_BUDGET_PROFILED, 0.90, 0, 0), .card_classes = CARDS_090,
                                            .mxfp4_marlin_everywhere = 1, .v0_fallback_below_cc = 80,
                                            .cg_sizes = KV_CG_STEP8_2SEQS, GPT_OSS_GRAPHS(1024)};
/* 0.10.2: no V0 any more (the compute-capability fallback is gone). */
static const kv_release_memory M_V1_0102 = {V1_MEM(KV_BUDGET_PROFILED, 0.90, 0, 0), .card_classes = CARDS_090,
                                            .mxfp4_marlin_everywhere = 1, .cg_sizes = KV_CG_STEP8_2SEQS,
                                            .warmup_margin_gib = WARMUP_MARGIN, GPT_OSS_GRAPHS(1024)};
/* 0.11.0: Qwen2-VL's dummy video holds up to 14 frames (qwen2_vl.py
 * _MAX_FRAMES_PER_VIDEO, 16 before). */
#define MM_FRAMES_011 .mm_video_max_frames = 14
/* 0.11.0: decode also gets FULL graphs (cudagraph_mode FULL_AND_PIECEWISE). */
static const kv_release_memory M_V1_011 = {V1_MEM(KV_BUDGET_PROFILED, 0.90, 0, 0), .card_classes = CARDS_090,
                                           .mxfp4_marlin_everywhere = 1, .cg_sizes = KV_CG_STEP8_2SEQS,
                                           .cg_full_decode = 1, .warmup_margin_gib = WARMUP_MARGIN, GPT_OSS_GRAPHS(992),
                                           MM_FRAMES_011};
/* 0.11.1: FlashInfer becomes a dependency, its sampler opt-in
 * (VLLM_USE_FLASHINFER_SAMPLER=1); capture sizes step 16 above 256
 * (config/vllm.py _set_cudagraph_sizes). */
#define V1_0111 V1_MEM(KV_BUDGET_PROFILED, 0.90, 0, 0), .card_classes = CARDS_090, .cg_sizes = KV_CG_STEP16_2SEQS, \
    .cg_full_decode = 1, .warmup_margin_gib = WARMUP_MARGIN, GPT_OSS_GRAPHS(1024), MM_FRAMES_011
static const kv_release_memory M_V1_0111 = {V1_0111, .mxfp4_marlin_everywhere = 1};
/* 0.12.0: triton_kernels ships inside vLLM (vllm/third_party), so Hopper
 * runs mxfp4 on the Triton kernels. */
static const kv_release_memory M_V1_012 = {V1_0111, .opt_levels = KV_OPT_LEVELS};
/* 0.14.0: --max-model-len auto (kv_cache_utils.py "Cannot auto-fit"); the
 * OffloadingConnector's host tier sized by cpu_bytes_to_use (kv_offload/cpu.py). */
static const kv_release_memory M_V1_014 = {V1_0111, .supports_auto_fit = 1, .opt_levels = KV_OPT_LEVELS,
                                           .offload_cpu_bytes = 1};
/* 0.17.0: the Triton top-k/top-p kernel; FlashInfer's all-reduce fusion at tp > 1. */
#define V1_017 V1_0111, .supports_auto_fit = 1, .opt_levels = KV_OPT_LEVELS, .offload_cpu_bytes = 1, \
    .sampler_bytes_per_elem = SAMPLER_TRITON, \
    .non_torch_tp_fusion_gib = NON_TORCH_FUSION, .fusion_needs_compile = 1
static const kv_release_memory M_V1_017 = {V1_017};
/* 0.18.0: more non-torch memory at tp 1 (measured). */
/* The OffloadingConnector's LRU keeps an offer's own keys (lru_manager.py "protected"). */
static const kv_release_memory M_V1_018 = {V1_017, .non_torch_gib = NON_TORCH_018, .cudagraph_profiled = 1,
                                           .offload_protects_offer = 1};
/* 0.20.0: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 1 (envs.py),
 * so the CUDA-graph estimate is subtracted before sizing; the default
 * gpu_memory_utilization becomes 0.92 (config/cache.py). */
#define V1_020 V1_017, .non_torch_gib = NON_TORCH_018, .cudagraph_profiled = 1, .offload_protects_offer = 1, \
    .cudagraph_estimate = 1, \
    .default_gpu_memory_utilization = 0.92, .compile_cold_bytes_per_elem = COMPILE_COLD, \
    .compile_cold_max_tokens = COMPILE_COLD_TOKENS
static const kv_release_memory M_V1_020 = {V1_020};
/* 0.21.0: VLLM_USE_FLASHINFER_SAMPLER defaults to on (envs.py, PR #40376);
 * "GPU KV cache size" from the concurrency (v1/core/kv_cache_utils.py). */
#define V1_021 V1_020, .sampler_flashinfer = 1, .sampler_fi_cc = {75, 121}, .kv_size_by_concurrency = 1
/* 0.24.0: FlashInfer "currently broken on SM75 (Turing)": the floor is 8.0 (flashinfer.py). */
#define FI_CC_024 .sampler_fi_cc = {80, 121}
static const kv_release_memory M_V1_021 = {V1_021};
/* 0.27.0 (utils/mem_utils.py memory_profiling) counts the non-KV memory as
 * the free memory cudaMemGetInfo lost since the worker's snapshot plus the
 * transient torch peak over what stays allocated: weights, non-torch growth
 * and the activation peak as before, so the rows keep their terms.
 * 0.22.0-0.28: model runner V2 by default for some models
 * (config/vllm.py DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES); its
 * profile_cudagraph_memory returns 0 ("TBD whether we keep this API"). */
static const kv_release_memory M_V1_022 = {V1_021, .v2_runner = KV_V2_LISTED_PLAIN, .v2_arches = {"Qwen3ForCausalLM"}};
static const kv_release_memory M_V1_023 = {
    V1_021, .v2_runner = KV_V2_LISTED_PLAIN, .v2_arches = {"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"}};
static const kv_release_memory M_V1_024 = {
    V1_021, .v2_runner = KV_V2_LISTED,
    .v2_arches = {"Qwen3ForCausalLM", "DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM",
                  "LlamaForCausalLM", "MistralForCausalLM"}, FI_CC_024};
static const kv_release_memory M_V1_025 = {
    V1_021, .v2_runner = KV_V2_LISTED_OR_DENSE,
    .v2_arches = {"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"}, FI_CC_024};
/* 0.26.0 and 0.27.0 add MoE architectures to the list (config/vllm.py
 * DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES of each release). */
#define V2_ARCHES_026 "DeepseekV2ForCausalLM", "GraniteMoeForCausalLM", "InklingForCausalLM", \
    "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM", "Qwen2MoeForCausalLM"
static const kv_release_memory M_V1_026 = {V1_021, .v2_runner = KV_V2_LISTED_OR_DENSE, .v2_arches = {V2_ARCHES_026},
                                           .sampler_v2_bytes_per_elem = SAMPLER_V2_IN_PLACE, FI_CC_024};
#define COLD_027 .compile_cold_non_torch_frac = COMPILE_COLD_NT_027
static const kv_release_memory M_V1_027 = {V1_021, COLD_027, .sampler_v2_bytes_per_elem = SAMPLER_V2_IN_PLACE,
                                           .v2_runner = KV_V2_LISTED_OR_DENSE,
                                           .v2_arches = {V2_ARCHES_026, "KimiK3ForConditionalGeneration"}, FI_CC_024};
static const kv_release_memory M_V1_028 = {
    V1_021, COLD_027, .sampler_v2_bytes_per_elem = SAMPLER_V2_IN_PLACE, .card_classes = CARDS_028,
    .v2_runner = KV_V2_LISTED_OR_DENSE,
    .v2_arches = {V2_ARCHES_026, "KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM"}, FI_CC_024};
/* 0.29.0: V2 for every generative model, with a real graph estimate; the
 * standalone FlashInfer all-reduce on by default (envs.py
 * VLLM_ALLREDUCE_USE_FLASHINFER=1), so the fusion workspace no longer needs
 * the compile pass; the length check and auto-fit first take off the null block
 * (kv_cache_utils.py "Reserve the null block BlockPool permanently holds
 * back"). */
static const kv_release_memory M_V1_029 = {V1_021, COLD_027, .sampler_v2_bytes_per_elem = SAMPLER_V2_IN_PLACE,
                                           .card_classes = CARDS_028, .v2_runner = KV_V2_ALL,
                                           .fusion_needs_compile = 0,
                                           .cudagraph_estimate_v2 = 1, .check_reserves_null_block = 1, FI_CC_024};
/* 0.31.0: the OffloadingConnector's LRU ranks keys per request
 * (kv_offload/cpu/policies/lru.py heap of ranks, cpu/manager.py
 * on_request_finished; the connector's scheduler no longer touches). */
static const kv_release_memory M_V1_031 = {V1_021, COLD_027, .card_classes = CARDS_028, .v2_runner = KV_V2_ALL,
                                           .fusion_needs_compile = 0,
                                           .cudagraph_estimate_v2 = 1, .check_reserves_null_block = 1, FI_CC_024,
                                           .offload_lru = KV_OFFLOAD_LRU_FINISH};
/* 0.33.0: V2's profile also samples with the warm-up's parameters
 * (gpu/model_runner.py _dummy_sampler_run "Warmup-param pass"); the LRU
 * gives a running request's keys a provisional rank (lru.py _RequestRank); a
 * card whose NVML gives no memory figure (GB10) is classed by torch's total
 * (platforms/cuda.py get_device_total_memory). */
static const kv_release_memory M_V1_033 = {V1_021, COLD_027, .sampler_v2_bytes_per_elem = SAMPLER_V2_IN_PLACE,
                                           .card_classes = CARDS_028, .v2_runner = KV_V2_ALL,
                                           .fusion_needs_compile = 0,
                                           .cudagraph_estimate_v2 = 1, .check_reserves_null_block = 1,
                                           .v2_profiles_warmup = 1, .card_total_from_torch = 1, FI_CC_024,
                                           .offload_lru = KV_OFFLOAD_LRU_PROVISIONAL};
/* The V0 engine that 0.8.0 - 0.10.1.x fall back to on cards below compute
 * capability 8.0 (T4, V100, RTX 20xx): 0.7's V0 accounting
 * (worker/worker.py memory_profiling), with 0.8's "Model loading took". */
static const kv_release_memory M_V0_080 = {V0_MEM(KV_BUDGET_PROFILED, 2048)};
#if defined(__clang__)
#pragma clang diagnostic pop
#else
#pragma GCC diagnostic pop
#endif

/* The course: the source document's arithmetic (kv_plan.c holds its terms);
 * the estimate of the length check follows vLLM's newest rule. */
static const kv_release_memory M_TEXTBOOK = {
    .engine_v1 = 1, .budget = KV_BUDGET_TEXTBOOK, .runner = KV_RUNNER_TEXTBOOK,
    .default_gpu_memory_utilization = 0.92, .cuda_context_gib = {0.60, 0.60}, .cudagraph_estimate = 1,
    .cudagraph_profiled = 1,
    .cudagraph_gib = CG_GIB, .check_reserves_null_block = 1, .supports_auto_fit = 1, .card_classes = CARDS_090,
    .offload_cpu_bytes = 1, .offload_protects_offer = 1, /* the CPU tier as the newest release has it */
    .offload_lru = KV_OFFLOAD_LRU_PROVISIONAL,
    /* the course counts its pool as num_blocks x block_size (one group per
     * running example), so kv_size_by_concurrency stays 0 */
};

/* --------------------------------------------------------------- rows */

static const kv_release ROWS[] = {
    {"0.6.4", "0.6.4.post1", "vllm/worker/worker.py determine_num_available_blocks; config.py SchedulerConfig",
     &M_V0_064, &T_V0_064, &S_V1_080},
    {"0.6.5", "0.6.6.post1", "PR #10511: vllm/worker/worker.py with utils.py memory_profiling", &M_V0_065,
     &T_V0_065, &S_V1_080},
    {"0.7.0", "0.7.2", "vllm/worker/worker.py; executor_base.py names the platform's dispatch key (\"# CUDA blocks\")",
     &M_V0_065, &T_V0_070, &S_V1_080},
    {"0.7.3", "0.7.3", "executor_base.py names the device (\"# cuda blocks\")", &M_V0_065, &T_V0_073, &S_V1_080},
    {"0.8.0", "0.8.2", "V1 by default: v1/worker/gpu_worker.py determine_available_memory; arg_utils.py "
                       "_set_default_args_v1 (H100/H200 by name)",
     &M_V1_080, &T_V1_080, &S_V1_080},
    {"0.8.3", "0.8.3", "v1/worker/gpu_model_runner.py logs GiB; V1 offloads weights to the CPU", &M_V1_083, &T_V1_083,
     &S_V1_080},
    {"0.8.4", "0.8.4", "v1/core/kv_cache_utils.py estimate_max_model_len; arg_utils.py 256 seqs off H100/H200",
     &M_V1_084, &T_V1_084, &S_V1_080},
    {"0.8.5", "0.8.5.post1", "arg_utils.py: defaults by card memory (>= 70 GiB)", &M_V1_085, &T_V1_084, &S_V1_080},
    {"0.9.0", "0.9.0.1", "arg_utils.py: A100s keep the small defaults (PR #17885)", &M_V1_090, &T_V1_084,
     &S_V1_080},
    {"0.9.1", "0.9.1", "v1/worker/gpu_worker.py: memory_profiling after NCCL init; \"Available KV cache memory\"",
     &M_V1_091, &T_V1_091, &S_V1_080},
    {"0.9.2", "0.10.0", "v1/core/sched/scheduler.py: the priority policy; unchunkable prompts skipped", &M_V1_091,
     &T_V1_091, &S_V1_092},
    {"0.10.1", "0.10.1.99", "config/scheduler.py: cuda_graph_sizes up to min(2 x max_num_seqs, 512)", &M_V1_0101,
     &T_V1_091, &S_V1_092},
    {"0.10.2", "0.10.99", "engine/arg_utils.py: no V0 fallback; gpu_worker.py 150 MiB profiling buffer", &M_V1_0102,
     &T_V1_091, &S_V1_092},
    {"0.11.0", "0.11.0", "quantization/mxfp4.py: torch 2.8 (Triton kernels on Hopper, if installed)", &M_V1_011,
     &T_V1_091,
     &S_V1_092},
    {"0.11.1", "0.11.99", "v1/worker/gpu_model_runner.py: \"Model loading took ... GiB memory\"; scheduler.py "
                          "refunds a priority victim's tokens; FlashInfer's sampler opt-in",
     &M_V1_0111, &T_V1_0111, &S_V1_0111},
    {"0.12.0", "0.12.99", "v1/core/sched/scheduler.py: admission stops at an unchunkable prompt; vllm/third_party/"
                          "triton_kernels",
     &M_V1_012,
     &T_V1_0111, &S_V1_012},
    {"0.13.0", "0.13.99", "v1/core/kv_cache_utils.py: errors link the conserving-memory docs", &M_V1_012,
     &T_V1_013, &S_V1_012},
    {"0.14.0", "0.16.99", "utils/mem_utils.py format_gib; --max-model-len auto", &M_V1_014, &T_V1_014, &S_V1_012},
    {"0.17.0", "0.17.99", "v1/sample/ops/topk_topp_triton.py (no sort); config/vllm.py enable_allreduce_rms_fusion",
     &M_V1_017, &T_V1_014, &S_V1_012},
    {"0.18.0", "0.18.99", "v1/worker/gpu_model_runner.py profile_cudagraph_memory (logged, opt-in); "
                          "gpu_worker.py: \"In v0.19, CUDA graph memory profiling will be enabled\"",
     &M_V1_018, &T_V1_018, &S_V1_012},
    {"0.19.0", "0.19.99", "config/scheduler.py scheduler_reserve_full_isl=True", &M_V1_018, &T_V1_018, &S_V1_019},
    {"0.20.0", "0.20.99", "envs.py VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 (gpu_worker.py: \"CUDA graph "
                          "memory profiling is enabled\"); config/cache.py utilization 0.92",
     &M_V1_020, &T_V1_020, &S_V1_019},
    {"0.21.0", "0.21.99", "envs.py: FlashInfer's top-k/top-p sampler on by default", &M_V1_021, &T_V1_020,
     &S_V1_019},
    {"0.22.0", "0.22.99", "config/vllm.py: model runner V2 for Qwen3 (gpu/model_runner.py: \"Model loading "
                          "took ... GiB and\"); kv_cache_utils.py wording",
     &M_V1_022, &T_V1_022, &S_V1_019},
    {"0.23.0", "0.23.99", "config/vllm.py: V2 for Llama, Mistral, Qwen3", &M_V1_023, &T_V1_023, &S_V1_019},
    {"0.24.0", "0.24.99", "config/vllm.py: V2 for six architectures, quantized too; block_pool.py frees uncached "
                          "blocks first; config/scheduler.py watermark",
     &M_V1_024, &T_V1_023, &S_V1_024},
    {"0.25.0", "0.25.99", "config/vllm.py: V2 for every dense model", &M_V1_025, &T_V1_023, &S_V1_024},
    {"0.26.0", "0.26.99", "config/vllm.py: V2 also for Inkling and LongCat-Flash", &M_V1_026, &T_V1_023, &S_V1_024},
    {"0.27.0", "0.27.99", "v1/core/kv_cache_manager.py: prefix-cache stats at admission; utils/mem_utils.py: non-KV "
                          "memory read from cudaMemGetInfo (the same terms)",
     &M_V1_027, &T_V1_023, &S_V1_027},
    {"0.28.0", "0.28.99", "arg_utils.py: >= 160 GiB card class; kv_cache_utils.py one KV size line; "
                          "gpu/model_runner.py \"GiB memory\"",
     &M_V1_028, &T_V1_028, &S_V1_027},
    {"0.29.0", "0.30.99", "config/vllm.py: V2 everywhere; gpu/model_runner.py graph estimate; kv_cache_utils.py "
                          "null block held back in the length check",
     &M_V1_029, &T_V1_029, &S_V1_027},
    {"0.31.0", "0.32.99", "v1/core/sched/scheduler.py: long_prefill_token_threshold needs two requests; "
                          "kv_offload/cpu/policies/lru.py: keys ranked per request",
     &M_V1_031, &T_V1_029, &S_V1_031},
    {"0.33.0", "0.33.99", "v1/core/sched/scheduler.py: priority self-preemption goes on; v1/worker/gpu/"
                          "model_runner.py: the profile runs the warm-up's sampling parameters too",
     &M_V1_033, &T_V1_029, &S_V1_033},
};
#define NUM_ROWS ((int)(sizeof ROWS / sizeof ROWS[0]))

/* The V0 engine the V1 rows of 0.8.0 - 0.10.1.x fall back to on old cards,
 * one per scheduler era of those rows (kv_release_for_card). */
static const kv_release V0_FALLBACK[] = {
    {"0.8.0", "0.9.0.99", "engine/arg_utils.py: \"Compute Capability < 8.0 is not supported by the V1 Engine. Falling "
                       "back to V0\"; worker/worker.py memory_profiling",
     &M_V0_080, &T_V0_080, &S_V1_080},
    {"0.9.1", "0.9.1", "config.py _resolve_auto_dtype: --dtype auto falls back to float16 below compute capability 8.0",
     &M_V0_080, &T_V0_091, &S_V1_080},
    {"0.9.2", "0.10.1.99", "engine/arg_utils.py _is_v1_supported_oracle (compute capability); worker/worker.py",
     &M_V0_080, &T_V0_091, &S_V1_092},
};

static const kv_release TEXTBOOK = {"textbook", "textbook",
                                    "the source document's arithmetic (kv_plan.c); vLLM's length-check estimate",
                                    &M_TEXTBOOK, &T_TEXTBOOK, &S_V1_033};

#define NEWEST_RELEASE "0.33.0"

/* ------------------------------------------------------------- metrics */

#define STATS_V0                                                                                                   \
    "Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: "       \
    "{running:d} reqs, Swapped: 0 reqs, Pending: {waiting:d} reqs, GPU KV cache usage: {usage:.1f}%, CPU KV cache " \
    "usage: 0.0%."
#define STATS_V1_BODY                                                                                              \
    "Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: {gen:.1f} tokens/s, Running: "       \
    "{running:d} reqs, Waiting: {waiting:d} reqs, {preemptions}GPU KV cache usage: {usage:.1f}%, Prefix cache "    \
    "hit rate: {hit_rate:.1f}%"
#define TTFT "vllm:time_to_first_token_seconds"
#define TPOT "vllm:time_per_output_token_seconds"
#define ITL "vllm:inter_token_latency_seconds"
#define QUEUE "vllm:request_queue_time_seconds"
/* The KV usage gauge: vllm:gpu_cache_usage_perc in V0 and in V1 up to
 * 0.9.1; V1 renames it vllm:kv_cache_usage_perc in 0.9.2 (v1/metrics/loggers.py). */
#define USAGE_GPU "vllm:gpu_cache_usage_perc"
#define USAGE_KV "vllm:kv_cache_usage_perc"

/* kvlab runs one engine: vLLM's "Engine 000: " (engine_index 0). Swapped is
 * 0 (V0 preempts by recompute for one sequence per request); 0.20's
 * "Deferred: N reqs" (skipped waiting requests) needs what kvlab does not
 * model and is never printed. */
static const kv_release_metrics METRICS[] = {
    {"0.6.4", "0.6.4.post1", 0, TTFT, TPOT, QUEUE, USAGE_GPU, 5.0, 0, 0, 0, STATS_V0,
     "Prefix cache hit rate: GPU: {hit_rate:.2f}%, CPU: 0.00%", "vllm/engine/metrics.py LoggingStatLogger.log"},
    {"0.6.5", "0.10.1.99", 0, TTFT, TPOT, QUEUE, USAGE_GPU, 5.0, 1, 0, 0, STATS_V0,
     "Prefix cache hit rate: GPU: {hit_rate:.2f}%, CPU: 0.00%", "vllm/engine/metrics.py: quiet when idle"},
    {"0.8.0", "0.8.2", 1, TTFT, TPOT, QUEUE, USAGE_GPU, 10.0, 0, 0, 0, STATS_V1_BODY, NULL,
     "vllm/v1/metrics/loggers.py LoggingStatLogger.log; entrypoints/openai/api_server.py logs every 10 s"},
    {"0.8.3", "0.8.4", 1, TTFT, TPOT, QUEUE, USAGE_GPU, 10.0, 0, 0, 0, "Engine 000: " STATS_V1_BODY, NULL,
     "v1/metrics/loggers.py: \"Engine %03d: \""},
    {"0.8.5", "0.9.1.99", 1, TTFT, TPOT, QUEUE, USAGE_GPU, 10.0, 1, 0, 0, "Engine 000: " STATS_V1_BODY, NULL,
     "v1/metrics/loggers.py: quiet when idle"},
    {"0.9.2", "0.10.1.99", 1, TTFT, TPOT, QUEUE, USAGE_KV, 10.0, 1, 0, 0, "Engine 000: " STATS_V1_BODY, NULL,
     "v1/metrics/loggers.py: vllm:kv_cache_usage_perc (gpu_cache_usage_perc deprecated)"},
    {"0.10.2", "0.11.0", 1, TTFT, ITL, QUEUE, USAGE_KV, 10.0, 1, 0, 0, "Engine 000: " STATS_V1_BODY, NULL,
     "v1/metrics/loggers.py: vllm:inter_token_latency_seconds (time_per_output_token deprecated)"},
    {"0.11.1", "0.15.99", 1, TTFT, ITL, QUEUE, USAGE_KV, 10.0, 1, 0, 1, "Engine 000: " STATS_V1_BODY, NULL,
     "v1/metrics/loggers.py: \"Preemptions: %d\""},
    {"0.16.0", "0.33.99", 1, TTFT, ITL, QUEUE, USAGE_KV, 10.0, 1, 1, 1, "Engine 000: " STATS_V1_BODY, NULL,
     "v1/metrics/loggers.py: prompt throughput from prompt_token_stats.computed"},
};
#define NUM_METRICS ((int)(sizeof METRICS / sizeof METRICS[0]))

const kv_release_metrics *kv_release_metrics_of(const kv_release *r, int engine_v1)
{
    const kv_release_metrics *last = NULL;
    for (int i = 0; i < NUM_METRICS; i++) {
        const kv_release_metrics *m = &METRICS[i];
        if (m->engine_v1 != (engine_v1 != 0))
            continue;
        last = m;
        if (r && r->first && kv_release_compare(r->first, m->first) >= 0 && kv_release_compare(r->first, m->last) <= 0)
            return m;
    }
    return last ? last : &METRICS[NUM_METRICS - 1]; /* the textbook: the newest */
}

int kv_release_count(void) { return NUM_ROWS; }

const kv_release *kv_release_at(int i) { return i >= 0 && i < NUM_ROWS ? &ROWS[i] : NULL; }

const kv_release *kv_release_newest(void) { return &ROWS[NUM_ROWS - 1]; }

const kv_release *kv_release_textbook(void) { return &TEXTBOOK; }

/* ------------------------------------------------------------ versions */

/* Parse "v0.6.4.post1" / "0.10.1.1" / "0.6.4.dev26+g92d86da2" into four
 * numbers: dotted parts, then .postN or a 4th number; a .devN / rcN part or
 * a +local suffix ends it (a dev build counts as its release). Returns the
 * count of numbers read (2-4), or 0 if malformed. */
static int parse_version(const char *s, long v[4])
{
    v[0] = v[1] = v[2] = v[3] = 0;
    if (!s)
        return 0;
    if (*s == 'v' || *s == 'V')
        s++;
    int n = 0;
    for (;;) {
        if (n >= 2 && (!strncmp(s, "dev", 3) || !strncmp(s, "rc", 2)))
            return n; /* the rest of a pre-release tag is not checked */
        if (n == 3 && !strncmp(s, "post", 4))
            s += 4;
        if (n >= 4 || !isdigit((unsigned char)*s))
            return 0;
        char *end;
        long x = strtol(s, &end, 10);
        if (end - s > 6)
            return 0;
        v[n++] = x;
        s = end;
        if (*s == '\0' || *s == '+')
            return n >= 2 ? n : 0;
        if (n == 3 && (!strncmp(s, "post", 4) || !strncmp(s, "rc", 2) || !strncmp(s, "dev", 3)))
            continue; /* 0.6.4post1 */
        if (*s != '.')
            return 0;
        s++;
    }
}

int kv_release_compare(const char *a, const char *b)
{
    long x[4], y[4];
    int na = parse_version(a, x), nb = parse_version(b, y);
    if (!na || !nb)
        return na == nb ? 0 : na ? 1 : -1;
    for (int i = 0; i < 4; i++)
        if (x[i] != y[i])
            return x[i] < y[i] ? -1 : 1;
    return 0;
}

const kv_release *kv_release_find(const char *version, char *err, size_t errlen)
{
    if (!version || !*version)
        return kv_release_newest();
    long v[4];
    if (!parse_version(version, v)) {
        kv_errf(err, errlen, -1, "--vllm-version '%.40s' is not a vLLM version (X.Y or X.Y.Z, e.g. 0.11.0)", version);
        return NULL;
    }
    if (kv_release_compare(version, ROWS[0].first) < 0) {
        kv_errf(err, errlen, -1, "--vllm-version %.40s: kvlab models vLLM %s to %s; older releases are not modelled",
                version, ROWS[0].first, NEWEST_RELEASE);
        return NULL;
    }
    if (kv_release_compare(version, ROWS[NUM_ROWS - 1].last) > 0) {
        kv_errf(err, errlen, -1, "--vllm-version %.40s: unknown release; kvlab models vLLM %s to %s (the newest)",
                version, ROWS[0].first, NEWEST_RELEASE);
        return NULL;
    }
    for (int i = NUM_ROWS - 1; i >= 0; i--)
        if (kv_release_compare(version, ROWS[i].first) >= 0)
            return &ROWS[i];
    return NULL; /* not reached */
}

const char *kv_release_label(const kv_release *r, char *buf, size_t n)
{
    if (!r || r == &TEXTBOOK) {
        snprintf(buf, n, "textbook");
        return buf;
    }
    char last[24];
    snprintf(last, sizeof last, "%s", r->last);
    size_t l = strlen(last);
    if (l > 3 && !strcmp(last + l - 3, ".99"))
        snprintf(last + l - 2, sizeof last - (l - 2), "x");
    if (!strcmp(r->first, r->last))
        snprintf(buf, n, "vLLM %s (%s)", r->first, r->mem->engine_v1 ? "V1" : "V0");
    else
        snprintf(buf, n, "vLLM %s-%s (%s)", r->first, last, r->mem->engine_v1 ? "V1" : "V0");
    return buf;
}

static int has_ci(const char *hay, const char *needle)
{
    if (!hay)
        return 0;
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n))
            return 1;
    return 0;
}

void kv_release_card_defaults(const kv_release *r, double total_gib, const char *name, int64_t *mns, int64_t *mnbt)
{
    *mns = 256;
    *mnbt = 2048;
    for (int i = 0; i < KV_RELEASE_MAX_CARD_CLASSES; i++) {
        const kv_release_card_class *c = &r->mem->card_classes[i];
        if (!c->max_num_seqs)
            break;
        if (total_gib + 1e-9 < c->min_total_gib)
            continue;
        if (c->name_has && !has_ci(name, c->name_has))
            continue;
        if (c->name_lacks && has_ci(name, c->name_lacks))
            continue;
        *mns = c->max_num_seqs;
        *mnbt = c->max_num_batched_tokens;
        return;
    }
}

const kv_release *kv_release_for_card(const kv_release *r, int cc)
{
    if (!r || !r->mem->v0_fallback_below_cc || cc <= 0 || cc >= r->mem->v0_fallback_below_cc)
        return r;
    return kv_release_v0_fallback(r);
}

const kv_release *kv_release_v0_fallback(const kv_release *r)
{
    if (!r || !r->mem->engine_v1)
        return r;
    for (size_t i = 0; i < sizeof V0_FALLBACK / sizeof V0_FALLBACK[0]; i++)
        if (kv_release_compare(r->first, V0_FALLBACK[i].first) >= 0 &&
            kv_release_compare(r->first, V0_FALLBACK[i].last) <= 0)
            return &V0_FALLBACK[i];
    return r;
}

/* FI_ALLREDUCE_FUSION_MAX_SIZE_MB (compilation/passes/fusion/allreduce_rms_fusion.py,
 * the same from 0.29 to 0.33): MiB by compute capability and world size. */
static const struct {
    int cc, tp;
    double mib;
} FI_AR_MAX[] = {
    {90, 2, 64},  {90, 4, 2},    {90, 8, 0.5},
    {100, 2, 64}, {100, 4, 32},  {100, 8, 1},
    {103, 2, 64}, {103, 4, 64},  {103, 8, 4},
    {107, 2, 64}, {107, 4, 64},  {107, 8, 2},
};

double kv_release_fi_allreduce_max_mib(int cc, int tp)
{
    for (size_t i = 0; i < sizeof FI_AR_MAX / sizeof FI_AR_MAX[0]; i++)
        if (FI_AR_MAX[i].cc == cc && FI_AR_MAX[i].tp == tp)
            return FI_AR_MAX[i].mib;
    return 0;
}

/* vLLM environment variables that change the memory plan, with the first
 * release whose envs.py reads each. */
static const struct {
    const char *name;
    const char *since;
} ENV_VARS[] = {
    {"VLLM_USE_V2_MODEL_RUNNER", "0.12.0"},                 /* opt-in until 0.21, a per-model default after */
    {"VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS", "0.18.0"}, /* default 0 in 0.18-0.19, 1 from 0.20 */
};

int kv_release_reads_env(const kv_release *r, const char *name)
{
    if (!r || !name || r == kv_release_textbook())
        return 0;
    for (size_t i = 0; i < sizeof ENV_VARS / sizeof ENV_VARS[0]; i++)
        if (!strcmp(ENV_VARS[i].name, name))
            return kv_release_compare(r->first, ENV_VARS[i].since) >= 0;
    return 0;
}

int kv_release_uses_v2_runner(const kv_release *r, const char *arch, int is_moe, int is_quantized)
{
    const kv_release_memory *m = r->mem;
    int listed = 0;
    for (int i = 0; i < KV_RELEASE_MAX_V2_ARCHES && m->v2_arches[i]; i++)
        if (arch && !strcmp(arch, m->v2_arches[i]))
            listed = 1;
    switch (m->v2_runner) {
    case KV_V2_LISTED_PLAIN: return listed && !is_moe && !is_quantized;
    case KV_V2_LISTED: return listed;
    case KV_V2_LISTED_OR_DENSE: return listed || !is_moe;
    case KV_V2_ALL: return 1;
    default: return 0;
    }
}

/* ------------------------------------------------------------ templates */

/* Python's str(round(x, 2)): at least one decimal, trailing zeros dropped. */
static void py_round2(char *b, size_t n, double x)
{
    double r = round(x * 100.0) / 100.0;
    snprintf(b, n, "%.2f", r);
    size_t l = strlen(b);
    if (l > 3 && b[l - 1] == '0')
        b[l - 1] = '\0';
}

/* Python's str() of a float such as a utilization: 0.9, 0.92, 1.0. */
static void py_float(char *b, size_t n, double x)
{
    snprintf(b, n, "%.15g", x);
    if (!strchr(b, '.') && !strchr(b, 'e') && strlen(b) + 2 < n)
        strcat(b, ".0");
}

static int64_t to_i64(double v)
{
    if (!(v == v))
        return 0;
    if (v > 9.0e18)
        return (int64_t)9.0e18;
    if (v < -9.0e18)
        return (int64_t)-9.0e18;
    return (int64_t)floor(v + (v < 0 ? -0.0 : 0.0));
}

static void emit(char *out, size_t outlen, size_t *pos, const char *s, size_t n)
{
    for (size_t i = 0; i < n && *pos + 1 < outlen; i++)
        out[(*pos)++] = s[i];
}

size_t kv_release_format(char *out, size_t outlen, const char *tpl, const kv_release_arg *args, int nargs)
{
    size_t pos = 0;
    if (!outlen)
        return 0;
    for (const char *p = tpl ? tpl : ""; *p;) {
        if (*p != '{') {
            emit(out, outlen, &pos, p, 1);
            p++;
            continue;
        }
        const char *close = strchr(p, '}');
        if (!close) {
            emit(out, outlen, &pos, p, strlen(p));
            break;
        }
        char field[48] = "", fmt[8] = "";
        const char *colon = memchr(p, ':', (size_t)(close - p));
        size_t fl = (size_t)((colon ? colon : close) - p - 1);
        if (fl >= sizeof field)
            fl = sizeof field - 1;
        memcpy(field, p + 1, fl);
        if (colon) {
            size_t ml = (size_t)(close - colon - 1);
            if (ml >= sizeof fmt)
                ml = sizeof fmt - 1;
            memcpy(fmt, colon + 1, ml);
        }
        const kv_release_arg *a = NULL;
        for (int i = 0; i < nargs && !a; i++) /* the first of a name wins */
            if (args[i].name && !strcmp(args[i].name, field))
                a = &args[i];
        char buf[512];
        buf[0] = '\0';
        if (!a)
            snprintf(buf, sizeof buf, "{%s?}", field);
        else if (a->s)
            snprintf(buf, sizeof buf, "%s", a->s);
        else if (!strcmp(fmt, ".1f"))
            snprintf(buf, sizeof buf, "%.1f", a->v);
        else if (!strcmp(fmt, ".2f"))
            snprintf(buf, sizeof buf, "%.2f", a->v);
        else if (!strcmp(fmt, ".4f"))
            snprintf(buf, sizeof buf, "%.4f", a->v);
        else if (!strcmp(fmt, "gib"))
            py_round2(buf, sizeof buf, a->v);
        else if (!strcmp(fmt, ","))
            kv_fmt_thousands(buf, sizeof buf, (long long)to_i64(a->v));
        else if (!strcmp(fmt, "d") || !fmt[0])
            snprintf(buf, sizeof buf, "%lld", (long long)to_i64(a->v));
        else if (!strcmp(fmt, "g"))
            py_float(buf, sizeof buf, a->v);
        else
            snprintf(buf, sizeof buf, "{%s:%s?}", field, fmt);
        emit(out, outlen, &pos, buf, strlen(buf));
        p = close + 1;
    }
    out[pos] = '\0';
    return pos;
}
