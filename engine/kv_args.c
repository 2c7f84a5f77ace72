/* kv_args: vLLM engine args by name, with vLLM's defaults and forms. */
#include "kv_args.h"
#include "kv_offload.h"
#include "kv_release.h"
#include "kv_util.h"
#include "kv_vllm_flags.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum {
    F_MODEL, F_UTIL, F_MAX_MODEL_LEN, F_MAX_NUM_SEQS, F_MNBT, F_BLOCK_SIZE, F_KV_DTYPE, F_QUANT, F_DTYPE, F_TP, F_PP,
    F_PREFIX, F_CHUNKED, F_EAGER, F_KV_BYTES, F_BLOCKS_OVERRIDE,
    F_GPU, F_GPU_GIB, F_GPU_USED, F_WEIGHTS, F_ACTIVATION, F_CUDAGRAPH, F_CONTEXT, F_NCCL, F_SCHED_POLICY,
    F_VLLM_VERSION, F_ACCOUNTING, F_FI_SAMPLER, F_RESERVE_ISL, F_WATERMARK, F_MXFP4_BACKEND, F_CPU_OFFLOAD,
    F_OPT_LEVEL, F_MAX_CG_SIZE, F_CG_SIZES, F_COMPILE_CACHE, F_KV_OFFLOAD, F_KV_OFFLOAD_BACKEND, F_KV_TRANSFER,
    F_HF_OVERRIDES, F_ENABLE_LORA, F_MAX_LORAS, F_MAX_LORA_RANK,
    F_LIMIT_MM, F_MM_KWARGS, F_SKIP_MM, F_NO_SLIDING,
    F_FIRST_NOTE
};

/* Rows leave since / removed / changes out when the flag is in every
 * release and kvlab models it (NULL): data, so the warning is off here. */
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wmissing-field-initializers"
#else
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#endif
static const kv_args_flag flags[] = {
    [F_MODEL] = {"model", "model", KV_ARG_STRING, NULL, "", "model id, config.json or folder (also the positional MODEL)", 1},
    [F_UTIL] = {"gpu-memory-utilization", "gpu_memory_utilization", KV_ARG_FLOAT, NULL, "the release's: 0.92, 0.90 before 0.20",
                "fraction of the card's reported total vLLM may use, in (0, 1]", 1},
    [F_MAX_MODEL_LEN] = {"max-model-len", "max_model_len", KV_ARG_INT, NULL, "model's max",
                         "longest request in tokens (32k or 128K from vLLM 0.8.4; auto or -1 to fit from 0.14.0)", 1},
    [F_MAX_NUM_SEQS] = {"max-num-seqs", "max_num_seqs", KV_ARG_INT, NULL, "by release and card: 256, 1024 on >= 70 GiB non-A100",
                        "requests scheduled at once", 1},
    [F_MNBT] = {"max-num-batched-tokens", "max_num_batched_tokens", KV_ARG_INT, NULL,
                "by release and card: 2048, 8192 on >= 70 GiB non-A100", "tokens per step; sizes the profile run's activation peak", 1},
    [F_BLOCK_SIZE] = {"block-size", "block_size", KV_ARG_CHOICE, "1|8|16|32|64|128|256", "16", "tokens per KV block", 1},
    [F_KV_DTYPE] = {"kv-cache-dtype", "kv_cache_dtype", KV_ARG_CHOICE,
                    "auto|bfloat16|float16|fp8|fp8_e4m3|fp8_e5m2|fp8_inc|fp8_ds_mla|fp8_per_token_head|int8_per_token_head",
                    "auto",
                    "KV cache element type (auto = model dtype; fp8 = 1 byte)", 1},
    [F_QUANT] = {"quantization", "quantization", KV_ARG_CHOICE,
                 "none|fp8|awq|awq_marlin|gptq|gptq_marlin|bitsandbytes|mxfp4|compressed-tensors", "none",
                 "weight quantization (default: the checkpoint's quantization_config)", 1},
    [F_DTYPE] = {"dtype", "dtype", KV_ARG_CHOICE, "auto|bfloat16|float16|half|float|float32", "auto",
                 "weight and activation dtype", 1},
    [F_TP] = {"tensor-parallel-size", "tensor_parallel_size", KV_ARG_INT, NULL, "1", "GPUs the model is split across", 1},
    [F_PP] = {"pipeline-parallel-size", "pipeline_parallel_size", KV_ARG_INT, NULL, "1",
              "pipeline stages (kvlab plans 1 only)", 1},
    [F_PREFIX] = {"enable-prefix-caching", "enable_prefix_caching", KV_ARG_BOOL, NULL, "true",
                  "reuse cached blocks of shared prefixes", 0},
    [F_CHUNKED] = {"enable-chunked-prefill", "enable_chunked_prefill", KV_ARG_BOOL, NULL, "true",
                   "split long prompts over steps", 0},
    [F_EAGER] = {"enforce-eager", "enforce_eager", KV_ARG_BOOL, NULL, "false", "no CUDA graphs (their memory becomes 0)", 1},
    [F_KV_BYTES] = {"kv-cache-memory-bytes", "kv_cache_memory_bytes", KV_ARG_INT, NULL, "unset",
                    "KV pool size per GPU in bytes; gpu_memory_utilization is then ignored", 1, "0.10.2"},
    [F_BLOCKS_OVERRIDE] = {"num-gpu-blocks-override", "num_gpu_blocks_override", KV_ARG_INT, NULL, "unset",
                           "force num_blocks (vLLM uses it to test preemption)", 1},
    [F_GPU] = {"gpu", "kvlab", KV_ARG_STRING, NULL, "", "the card: a kvlab gpus id or alias (rtx-4090, h100-80gb)", 1},
    [F_GPU_GIB] = {"gpu-memory-gib", "kvlab", KV_ARG_GIB, NULL, "catalogue",
                   "the card's reported total in GiB (alone: a custom card)", 1},
    [F_GPU_USED] = {"gpu-used-gib", "kvlab", KV_ARG_GIB, NULL, "0", "memory other processes hold at start-up (GiB)", 1},
    [F_WEIGHTS] = {"weights-gib", "kvlab", KV_ARG_GIB, NULL, "from the shape", "override the weights term (GiB per GPU)", 1},
    [F_ACTIVATION] = {"activation-gib", "kvlab", KV_ARG_GIB, NULL, "estimated",
                      "override the profile run's activation peak (GiB per GPU)", 1},
    [F_CUDAGRAPH] = {"cudagraph-gib", "kvlab", KV_ARG_GIB, NULL, "0.60 where counted", "override the CUDA-graph estimate (GiB per GPU)", 1},
    [F_CONTEXT] = {"cuda-context-gib", "kvlab", KV_ARG_GIB, NULL, "0.60 (release: 0.35/0.61)", "override the CUDA context (GiB per GPU)", 1},
    [F_NCCL] = {"nccl-gib", "kvlab", KV_ARG_GIB, NULL, "tp > 1: 1.00 (release: 0.41 NVLink, 0.12 PCIe)", "override the NCCL buffers (GiB per GPU)", 1},
    [F_SCHED_POLICY] = {"scheduling-policy", "scheduling_policy", KV_ARG_CHOICE, "fcfs|priority", "fcfs",
                        "which waiting request runs first and which running one is preempted", 0},
    [F_VLLM_VERSION] = {"vllm-version", "kvlab", KV_ARG_STRING, NULL, "0.33.0 (the newest)",
                        "the vLLM release whose accounting, defaults and wording to follow (0.6.4 ... 0.33)", 1},
    [F_ACCOUNTING] = {"accounting", "kvlab", KV_ARG_CHOICE, "release|textbook", "release",
                      "release: what that vLLM release does; textbook: the course's arithmetic", 1},
    [F_FI_SAMPLER] = {"flashinfer-sampler", "kvlab", KV_ARG_BOOL, NULL, "the release's",
                      "FlashInfer's top-k/top-p sampler in the profile (vLLM's VLLM_USE_FLASHINFER_SAMPLER)", 1},
    [F_RESERVE_ISL] = {"scheduler-reserve-full-isl", "scheduler_reserve_full_isl", KV_ARG_BOOL, NULL, "the release's",
                       "admit a request only if its whole prompt fits the free KV blocks (vLLM 0.19+)", 0, "0.19.0"},
    [F_WATERMARK] = {"watermark", "watermark", KV_ARG_FLOAT, NULL, "0.0",
                     "fraction of KV blocks kept free when admitting requests (vLLM 0.24+), in [0, 1)", 0, "0.24.0"},
    [F_MXFP4_BACKEND] = {"mxfp4-backend", "kvlab", KV_ARG_CHOICE, "marlin|triton", "the release's",
                         "mxfp4 MoE kernels (vLLM logs 'Using Marlin backend' / 'Using Triton backend')", 1},
    [F_CPU_OFFLOAD] = {"cpu-offload-gb", "cpu_offload_gb", KV_ARG_FLOAT, NULL, "0",
                       "GiB of weights per GPU kept in CPU memory (whole parameters of the first layers)", 1},
    [F_OPT_LEVEL] = {"optimization-level", "optimization_level", KV_ARG_INT, NULL, "2",
                     "-O N: 0 no CUDA graphs, 1 PIECEWISE only, 2-3 the default (0.12 on; before: compile level)",
                     1, "0.12.0"},
    [F_MAX_CG_SIZE] = {"max-cudagraph-capture-size", "max_cudagraph_capture_size", KV_ARG_INT, NULL, "the release's",
                       "largest batch captured in a CUDA graph (0.11.1 on)", 1, "0.11.1"},
    [F_CG_SIZES] = {"cuda-graph-sizes", "cuda_graph_sizes", KV_ARG_STRING, NULL, "the release's",
                    "batch sizes captured in CUDA graphs (one value: the largest; 0.9-0.12)", 1, "0.9.0", "0.13.0"},
    [F_COMPILE_CACHE] = {"compile-cache", "kvlab", KV_ARG_CHOICE, "cold|warm", "cold",
                         "torch.compile cache at start-up: cold (first start, or a container without a persisted "
                         "~/.cache/vllm) or warm (a later start reusing it)", 1},
    /* KV offloading: kept as notes for the memory plan (the GPU pool is sized as without), read by the
     * engine's host tier (kv_offload.h) in kvlab simulate. */
    [F_KV_OFFLOAD] = {"kv-offloading-size", "kv_offloading_size", KV_ARG_NOTE, NULL, "",
                      "GiB of KV blocks kept in CPU memory, all tp ranks together (kvlab simulate runs the tier)", 1,
                      "0.11.1", NULL,
                      "host memory for a CPU tier of KV blocks and its transfer buffers (kvlab simulate runs the "
                      "tier; the GPU pool is sized as without)"},
    [F_KV_OFFLOAD_BACKEND] = {"kv-offloading-backend", "kv_offloading_backend", KV_ARG_NOTE, "native|lmcache", "native",
                              "the KV offloading backend: native (OffloadingConnector) or lmcache", 0, "0.11.1"},
    [F_KV_TRANSFER] = {"kv-transfer-config", "kv_transfer_config", KV_ARG_NOTE, NULL, "",
                       "a KV connector (JSON): OffloadingConnector runs as the host tier in kvlab simulate", 1,
                       "0.6.5", NULL,
                       "host memory or a remote store for KV blocks through the connector (kvlab simulate runs "
                       "OffloadingConnector's CPU tier; the GPU pool is sized as without)"},
    [F_HF_OVERRIDES] = {"hf-overrides", "hf_overrides", KV_ARG_STRING, NULL, "",
                        "JSON object applied to the model's config.json before planning", 1},
    [F_ENABLE_LORA] = {"enable-lora", "enable_lora", KV_ARG_BOOL, NULL, "false",
                       "LoRA slots on every projection, embeddings and lm_head (in the weights term)", 1},
    [F_MAX_LORAS] = {"max-loras", "max_loras", KV_ARG_INT, NULL, "1", "LoRA slots (adapters in one batch)", 1},
    [F_MAX_LORA_RANK] = {"max-lora-rank", "max_lora_rank", KV_ARG_INT, NULL, "16", "rank of each LoRA slot", 1},
    /* Multimodal: the encoder-cache profile (kv_plan.h mm_encoder_*). */
    [F_LIMIT_MM] = {"limit-mm-per-prompt", "limit_mm_per_prompt", KV_ARG_STRING, NULL, "999 per modality",
                    "multimodal items per prompt: JSON {\"image\": N, \"video\": N} (or image=N,video=N); 0 takes a "
                    "modality out of the encoder profile", 1},
    [F_MM_KWARGS] = {"mm-processor-kwargs", "mm_processor_kwargs", KV_ARG_STRING, NULL, "the checkpoint's",
                     "multimodal processor overrides (JSON); max_pixels sizes the largest image or video frame", 1},
    [F_SKIP_MM] = {"skip-mm-profiling", "skip_mm_profiling", KV_ARG_BOOL, NULL, "false",
                   "no encoder profile run (its memory is then not set aside)", 1, "0.10.1"},
    [F_NO_SLIDING] = {"disable-sliding-window", "disable_sliding_window", KV_ARG_BOOL, NULL, "false",
                      "every layer attends to the whole context; max_model_len is capped at the window", 1},
    /* Real vLLM flags that do not change the memory plan. */
    {"port", "port", KV_ARG_NOTE, NULL, "8000", "API server port", 0},
    {"host", "host", KV_ARG_NOTE, NULL, "", "API server host", 0},
    {"served-model-name", "served_model_name", KV_ARG_NOTE, NULL, "", "names the API serves the model under", 0},
    {"api-key", "api_key", KV_ARG_NOTE, NULL, "", "API key", 0},
    {"seed", "seed", KV_ARG_NOTE, NULL, "0", "random seed", 0},
    {"swap-space", "swap_space", KV_ARG_NOTE, NULL, "4", "CPU swap space in GiB (host memory)", 0, NULL, "0.18.0"},
    {"tokenizer", "tokenizer", KV_ARG_NOTE, NULL, "", "tokenizer name or path", 0},
    {"tokenizer-mode", "tokenizer_mode", KV_ARG_NOTE, NULL, "auto", "tokenizer mode", 0},
    {"revision", "revision", KV_ARG_NOTE, NULL, "", "model revision", 0},
    {"tokenizer-revision", "tokenizer_revision", KV_ARG_NOTE, NULL, "", "tokenizer revision", 0},
    {"download-dir", "download_dir", KV_ARG_NOTE, NULL, "", "where weights are downloaded", 0},
    {"load-format", "load_format", KV_ARG_NOTE, NULL, "auto", "weight file format", 0},
    {"config-format", "config_format", KV_ARG_NOTE, NULL, "auto", "config file format", 0},
    {"chat-template", "chat_template", KV_ARG_NOTE, NULL, "", "chat template", 0},
    {"generation-config", "generation_config", KV_ARG_NOTE, NULL, "auto", "generation config source", 0, "0.6.6"},
    {"uvicorn-log-level", "uvicorn_log_level", KV_ARG_NOTE, NULL, "info", "API server log level", 0},
    {"max-logprobs", "max_logprobs", KV_ARG_NOTE, NULL, "20", "most logprobs returned", 0},
    {"max-log-len", "max_log_len", KV_ARG_NOTE, NULL, "", "prompt characters logged", 0},
    {"tool-call-parser", "tool_call_parser", KV_ARG_NOTE, NULL, "", "tool-call parser", 0},
    {"reasoning-parser", "reasoning_parser", KV_ARG_NOTE, NULL, "", "reasoning parser", 0, "0.7.3"},
    {"root-path", "root_path", KV_ARG_NOTE, NULL, "", "API root path", 0},
    {"ssl-keyfile", "ssl_keyfile", KV_ARG_NOTE, NULL, "", "TLS key", 0},
    {"ssl-certfile", "ssl_certfile", KV_ARG_NOTE, NULL, "", "TLS certificate", 0},
    {"distributed-executor-backend", "distributed_executor_backend", KV_ARG_NOTE, NULL, "", "mp or ray", 0},
    {"data-parallel-size", "data_parallel_size", KV_ARG_NOTE, NULL, "1",
     "engine replicas; each runs this same per-GPU plan", 0, "0.8.3"},
    {"trust-remote-code", "trust_remote_code", KV_ARG_NOTE_BOOL, NULL, "false", "run the model repo's code", 0},
    {"disable-log-requests", "disable_log_requests", KV_ARG_NOTE_BOOL, NULL, "false", "quieter logs", 0, NULL, "0.17.0"},
    {"enable-log-requests", "enable_log_requests", KV_ARG_NOTE_BOOL, NULL, "false", "log each request", 0, "0.10.1"},
    {"disable-log-stats", "disable_log_stats", KV_ARG_NOTE_BOOL, NULL, "false", "no periodic stats", 0},
    {"enable-auto-tool-choice", "enable_auto_tool_choice", KV_ARG_NOTE_BOOL, NULL, "false", "automatic tool choice", 0},
    {"disable-custom-all-reduce", "disable_custom_all_reduce", KV_ARG_NOTE_BOOL, NULL, "false",
     "use NCCL all-reduce only", 0},
    {"disable-frontend-multiprocessing", "disable_frontend_multiprocessing", KV_ARG_NOTE_BOOL, NULL, "false",
     "API server in the engine's process", 0},
    /* Real vLLM flags that change memory in ways kvlab does not model: a note says what. */
    {"enable-expert-parallel", "enable_expert_parallel", KV_ARG_NOTE_BOOL, NULL, "false",
     "whole experts per rank instead of slices of each", 1, "0.8.0", NULL,
     "the all-to-all buffers (the expert bytes per GPU stay the same)"},
    {"compilation-config", "compilation_config", KV_ARG_NOTE, NULL, "", "torch.compile and CUDA-graph settings (JSON)", 1,
     "0.6.5", NULL, "CUDA-graph sizes and modes (kvlab models -O N and --max-cudagraph-capture-size)"},
    {"speculative-config", "speculative_config", KV_ARG_NOTE, NULL, "", "speculative decoding (JSON)", 1, "0.8.2", NULL,
     "a draft model's weights and KV cache, and the extra tokens each step verifies"},
    {"speculative-model", "speculative_model", KV_ARG_NOTE, NULL, "", "the draft model", 1, NULL, "0.8.3",
     "a draft model's weights and KV cache"},
    {"num-speculative-tokens", "num_speculative_tokens", KV_ARG_NOTE, NULL, "", "tokens the draft proposes", 1, NULL,
     "0.8.3", "the extra tokens each step verifies"},
    {"rope-scaling", "rope_scaling", KV_ARG_NOTE, NULL, "", "RoPE scaling (JSON)", 1, NULL, "0.11.1",
     "the model's maximum length: kvlab reads rope_scaling from config.json (edit a copy of it instead)"},
    {"cpu-offload-params", "cpu_offload_params", KV_ARG_NOTE, NULL, "", "which parameters --cpu-offload-gb moves", 1,
     "0.17.0", NULL, "which parameters move to the CPU (kvlab moves them in layer order)"},
    /* Real vLLM flags that do not change the memory plan (scheduler, compile, frontend). */
    {"max-seq-len-to-capture", "max_seq_len_to_capture", KV_ARG_NOTE, NULL, "8192",
     "longest sequence run in a CUDA graph (the graphs' memory stays)", 0, NULL, "0.11.0"},
    {"async-scheduling", "async_scheduling", KV_ARG_NOTE_BOOL, NULL, "false", "schedule the next step during this one",
     0, "0.10.0"},
    {"long-prefill-token-threshold", "long_prefill_token_threshold", KV_ARG_NOTE, NULL, "0",
     "prefills longer than this count as long", 0, "0.7.3"},
    {"max-num-partial-prefills", "max_num_partial_prefills", KV_ARG_NOTE, NULL, "1", "concurrent partial prefills", 0,
     "0.7.3", "0.27.0"},
    {"calculate-kv-scales", "calculate_kv_scales", KV_ARG_NOTE_BOOL, NULL, "false",
     "fp8 KV scales from the first batch (a few floats per layer)", 0, "0.7.0", "0.28.0"},
    {"max-cpu-loras", "max_cpu_loras", KV_ARG_NOTE, NULL, "", "LoRA adapters cached in CPU memory", 0},
    {"model-impl", "model_impl", KV_ARG_NOTE, NULL, "auto", "vLLM's or the Transformers implementation", 0, "0.7.3"},
    /* Real vLLM flags kvlab cannot follow. */
    {"config", "config", KV_ARG_REFUSED, NULL, "", "a YAML file of flags", 0, NULL, NULL,
     "kvlab serve, simulate and fit read vLLM's YAML config files (tui/cli/vllm_config.c); here put the file's "
     "flags one by one"},
};
#if defined(__clang__)
#pragma clang diagnostic pop
#else
#pragma GCC diagnostic pop
#endif
#define NUM_FLAGS ((int)(sizeof flags / sizeof flags[0]))

int kv_args_flag_count(void) { return NUM_FLAGS; }

const kv_args_flag *kv_args_flag_at(int i) { return i >= 0 && i < NUM_FLAGS ? &flags[i] : NULL; }

void kv_args_init(kv_args *a)
{
    memset(a, 0, sizeof *a);
    a->gpu_memory_utilization = 0.92;
    a->block_size = 16;
    a->tensor_parallel_size = 1;
    a->pipeline_parallel_size = 1;
    a->enable_prefix_caching = 1;
    a->enable_chunked_prefill = 1;
    a->gpu_memory_gib = a->weights_gib = a->activation_gib = -1;
    a->cudagraph_gib = a->cuda_context_gib = a->nccl_gib = -1;
    a->gpu_used_gib = 0;
    a->optimization_level = -1;
    a->max_loras = 1;         /* vllm/config/lora.py LoRAConfig */
    a->max_lora_rank = 16;
    a->use_v2_model_runner = a->estimate_cudagraphs = a->use_v1 = -1;
    a->mm_limit_image = a->mm_limit_video = -1;
}

/* Normalise a name: strip leading dashes, '_' -> '-'; *negated set for "no-". */
static int find_index(const char *name, int *negated)
{
    char n[96];
    *negated = 0;
    if (!name)
        return -1;
    while (*name == '-')
        name++;
    size_t j = 0;
    for (; *name && j + 1 < sizeof n; name++)
        n[j++] = *name == '_' ? '-' : *name;
    n[j] = '\0';
    if (!strcmp(n, "q"))
        return F_QUANT;
    if (!strcmp(n, "tp"))
        return F_TP;
    if (!strcmp(n, "pp"))
        return F_PP;
    if (!strcmp(n, "kv-cache-memory"))
        return F_KV_BYTES;
    if (!strcmp(n, "cc")) /* -cc, 0.12's short form of --compilation-config */
        snprintf(n, sizeof n, "compilation-config");
    for (int pass = 0; pass < 2; pass++) {
        const char *s = n;
        if (pass == 1) {
            if (strncmp(n, "no-", 3))
                break;
            s = n + 3;
        }
        for (int i = 0; i < NUM_FLAGS; i++)
            if (!strcmp(flags[i].name, s)) {
                if (pass == 1 && flags[i].kind != KV_ARG_BOOL && flags[i].kind != KV_ARG_NOTE_BOOL)
                    return -1;
                *negated = pass;
                return i;
            }
    }
    /* another spelling vLLM's parser has for a row's flag (-dp, -asc, ...) */
    int vneg;
    const kv_vllm_flag *vf = kv_vllm_flag_find(n, &vneg);
    if (vf && strcmp(vf->name, n) && strcmp(vf->name, n + (vneg ? 3 : 0)))
        for (int i = 0; i < NUM_FLAGS; i++)
            if (!strcmp(flags[i].name, vf->name) && (!vneg || flags[i].kind == KV_ARG_BOOL ||
                                                     flags[i].kind == KV_ARG_NOTE_BOOL)) {
                *negated = vneg;
                return i;
            }
    return -1;
}

/* Is each dash-separated word of q the start of the same word of f, with as
 * many words ("gpu-mem-util" for "gpu-memory-utilization")? */
static int word_prefixes(const char *q, const char *f)
{
    while (*q && *f) {
        size_t lq = strcspn(q, "-"), lf = strcspn(f, "-");
        if (!lq || lq > lf || strncmp(q, f, lq))
            return 0;
        q += lq;
        f += lf;
        if ((*q == '-') != (*f == '-'))
            return 0;
        if (*q)
            q++, f++;
    }
    return !*q && !*f;
}

/* "Did you mean" for an unknown flag: flags whose name starts with the typed
 * one or is its start (--max-model-length, --gpu-memory), or that it
 * abbreviates word by word (--gpu-mem-util), score 0, else the
 * edit distance, allowed up to 2 (4 for names of 12+ letters: a British
 * spelling, a dropped word). Writes "--a, --b" (best first, at most 3) or "". */
static void suggest_flags(const char *name, char *out, size_t n)
{
    char q[96];
    size_t j = 0;
    out[0] = '\0';
    while (name && *name == '-')
        name++;
    for (; name && *name && j + 1 < sizeof q; name++)
        q[j++] = *name == '_' ? '-' : (char)tolower((unsigned char)*name);
    q[j] = '\0';
    if (j < 2)
        return;
    int limit = j >= 12 ? 4 : 2;
    int score[NUM_FLAGS];
    int lo = 99;
    for (int i = 0; i < NUM_FLAGS; i++) {
        const char *f = flags[i].name;
        size_t fl = strlen(f);
        int pre = (j >= 4 && !strncmp(f, q, j)) || (fl >= 4 && !strncmp(q, f, fl)) || word_prefixes(q, f);
        score[i] = pre ? 0 : kv_edit_distance(q, f);
        if (score[i] < lo)
            lo = score[i];
    }
    int shown = 0;
    for (int d = lo; d <= limit && d <= lo + 1 && shown < 3; d++)
        for (int i = 0; i < NUM_FLAGS && shown < 3; i++)
            if (score[i] == d) {
                size_t l = strlen(out);
                snprintf(out + l, n - l, "%s--%s", shown ? ", " : "", flags[i].name);
                shown++;
            }
}

static int unknown_flag(const char *name, char *err, size_t errlen)
{
    char sug[160];
    const char *nm = name ? name : "";
    while (*nm == '-')
        nm++;
    suggest_flags(nm, sug, sizeof sug);
    /* argparse's words (vLLM's FlexibleArgumentParser keeps them) */
    if (sug[0])
        return kv_errf(err, errlen, KV_ARGS_EUNKNOWN,
                       "vllm serve: error: unrecognized arguments: --%s (unknown flag; did you mean %s?)", nm, sug);
    return kv_errf(err, errlen, KV_ARGS_EUNKNOWN,
                   "vllm serve: error: unrecognized arguments: --%s (unknown flag: no vLLM release from %s to %s has "
                   "it)", nm, kv_vllm_releases[0], kv_vllm_releases[kv_vllm_num_releases - 1]);
}

const kv_args_flag *kv_args_flag_find(const char *name)
{
    int neg;
    int i = find_index(name, &neg);
    return i < 0 ? NULL : &flags[i];
}

int kv_args_parse_int(const char *s, int64_t *out, char *err, size_t errlen)
{
    *out = 0;
    if (!s)
        return kv_errf(err, errlen, KV_ARGS_EVALUE, "missing number");
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n == 0 || n > 40)
        return kv_errf(err, errlen, KV_ARGS_EVALUE, "'%.40s' is not a number", s);
    char buf[48];
    memcpy(buf, s, n);
    buf[n] = '\0';
    char suf = buf[n - 1];
    static const char dec[] = "kmgt", bin[] = "KMGT";
    const char *pd = strchr(dec, suf), *pb = strchr(bin, suf);
    if (suf && (pd || pb)) {
        buf[n - 1] = '\0';
        /* digits with at most one '.', as vLLM's regex (\d+(?:\.\d+)?) */
        int dots = 0, digits = 0;
        for (char *p = buf; *p; p++) {
            if (*p == '.')
                dots++;
            else if (isdigit((unsigned char)*p))
                digits++;
            else
                return kv_errf(err, errlen, KV_ARGS_EVALUE, "'%s' is not a number", s);
        }
        if (!digits || dots > 1 || buf[0] == '.' || buf[strlen(buf) - 1] == '.')
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "'%s' is not a number", s);
        if (pb && dots)
            return kv_errf(err, errlen, KV_ARGS_EVALUE,
                           "decimals are not allowed with binary suffixes like %c (did you mean %s%c?)", suf, buf,
                           (char)tolower((unsigned char)suf));
        double v = strtod(buf, NULL);
        double mult = 1;
        int power = (int)((pd ? pd - dec : pb - bin) + 1);
        for (int i = 0; i < power; i++)
            mult *= pd ? 1000.0 : 1024.0;
        v = floor(v * mult);
        if (!(v < 9.0e18))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "'%s' is too large", s);
        *out = (int64_t)v;
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (*end || errno)
        return kv_errf(err, errlen, KV_ARGS_EVALUE, "'%s' is not a whole number", s);
    *out = v;
    return 0;
}

/* vLLM's human_readable_int (utils/argparse_utils.py): the int options whose
 * value may end in k/K, m/M, g/G or t/T (engine/arg_utils.py), and the
 * release whose parser first read each so: 0.8.4 typed --max-model-len
 * human_readable_int, 0.9.1's generated parser added max_num_batched_tokens,
 * 0.10.2 kv_cache_memory_bytes (the option's first release). Every other int
 * option, and these before that release, is argparse's int, which rejects
 * "1k" (kv_args_check_release). */
static const struct {
    int flag;
    const char *since;
} HUMAN_INT[] = {{F_MAX_MODEL_LEN, "0.8.4"}, {F_MNBT, "0.9.1"}, {F_KV_BYTES, "0.10.2"}};
_Static_assert(sizeof HUMAN_INT / sizeof HUMAN_INT[0] == sizeof((kv_args *)0)->suffix_text /
                                                          sizeof((kv_args *)0)->suffix_text[0],
               "one suffix_text per HUMAN_INT row");

/* 0, or KV_ARGS_EVALUE in argparse's words when value carries a size
 * suffix option flags[i] does not take in any release; a suffix on a
 * HUMAN_INT option is remembered for the release check. */
static int suffix_check(kv_args *a, int i, const char *name, const char *value, char *err, size_t errlen)
{
    size_t n = strlen(value);
    while (n && isspace((unsigned char)value[n - 1]))
        n--;
    int suffix = n && strchr("kKmMgGtT", value[n - 1]);
    for (size_t k = 0; k < sizeof HUMAN_INT / sizeof HUMAN_INT[0]; k++)
        if (HUMAN_INT[k].flag == i) {
            a->suffix_given &= ~(1u << k);
            a->suffix_given |= (uint32_t)suffix << k;
            snprintf(a->suffix_text[k], sizeof a->suffix_text[k], "%.*s", (int)n, value);
            return 0;
        }
    if (!suffix)
        return 0;
    return kv_errf(err, errlen, KV_ARGS_EVALUE,
                   "vllm serve: error: argument --%s: invalid int value: '%s' (only --max-model-len, "
                   "--max-num-batched-tokens and --kv-cache-memory-bytes take k/K suffixes)",
                   name, value);
}

static int given_has(const kv_args *a, int i);

/* The LoRA ranks a release allows (config.py, from 0.10.2 config/lora.py):
 * LoRAConfig.__post_init__'s possible_max_ranks, a ValueError when LoRA is
 * on, up to 0.11.0; from 0.11.1 MaxLoRARanks, a Literal the parser turns
 * into argparse choices (refused whether LoRA is on or not). */
static const struct {
    const char *first;
    const char *ranks; /* as Python prints the tuple / the choices */
    int argparse;
} LORA_RANKS[] = {
    {"0.6.4", "(8, 16, 32, 64, 128, 256)", 0},
    {"0.8.0", "(8, 16, 32, 64, 128, 256, 320, 512)", 0},
    {"0.11.1", "1, 8, 16, 32, 64, 128, 256, 320, 512", 1},
};

/* 0, or KV_ARGS_EVALUE in the release's words for a --max-lora-rank it does
 * not allow. */
static int lora_rank_check(const kv_args *a, const char *v, char *err, size_t errlen)
{
    if (!given_has(a, F_MAX_LORA_RANK))
        return 0;
    int row = 0;
    for (int k = 0; k < (int)(sizeof LORA_RANKS / sizeof LORA_RANKS[0]); k++)
        if (kv_release_compare(v, LORA_RANKS[k].first) >= 0)
            row = k;
    if (!LORA_RANKS[row].argparse && !a->enable_lora)
        return 0; /* no LoRAConfig is made */
    char want[16];
    snprintf(want, sizeof want, "%d", a->max_lora_rank);
    const char *r = LORA_RANKS[row].ranks;
    for (const char *q = strstr(r, want); q; q = strstr(q + 1, want))
        if ((q == r || q[-1] == ' ' || q[-1] == '(') && (q[strlen(want)] == ',' || q[strlen(want)] == ')' ||
                                                         !q[strlen(want)]))
            return 0;
    if (LORA_RANKS[row].argparse)
        return kv_errf(err, errlen, KV_ARGS_EVALUE,
                       "vllm serve: error: argument --max-lora-rank: invalid choice: %d (choose from %s)",
                       a->max_lora_rank, r);
    return kv_errf(err, errlen, KV_ARGS_EVALUE, "ValueError: max_lora_rank (%d) must be one of %s.", a->max_lora_rank,
                   r);
}

/* The release check of the suffixes suffix_check let through: 0, or
 * KV_ARGS_EVALUE where release v read the option with argparse's int. */
static int suffix_check_release(const kv_args *a, const char *v, char *err, size_t errlen)
{
    for (size_t k = 0; k < sizeof HUMAN_INT / sizeof HUMAN_INT[0]; k++)
        if ((a->suffix_given >> k & 1) && kv_release_compare(v, HUMAN_INT[k].since) < 0)
            return kv_errf(err, errlen, KV_ARGS_EVALUE,
                           "vllm serve: error: argument --%s: invalid int value: '%s' (vLLM %s reads a plain "
                           "integer there; k/K suffixes from %s)",
                           flags[HUMAN_INT[k].flag].name, a->suffix_text[k], v, HUMAN_INT[k].since);
    return 0;
}

static int parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    while (isspace((unsigned char)*end))
        end++;
    if (*end || errno || !isfinite(v) || isspace((unsigned char)*s))
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    if (!s) {
        *out = 1;
        return 0;
    }
    if (!strcasecmp(s, "true") || !strcmp(s, "1") || !strcasecmp(s, "yes") || !strcasecmp(s, "on")) {
        *out = 1;
        return 0;
    }
    if (!strcasecmp(s, "false") || !strcmp(s, "0") || !strcasecmp(s, "no") || !strcasecmp(s, "off")) {
        *out = 0;
        return 0;
    }
    return -1;
}

static int choice_ok(const char *choices, const char *v)
{
    size_t n = strlen(v);
    for (const char *p = choices; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == n && !strncmp(p, v, n))
            return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* "a|b|c" -> "a, b, c" for messages. */
static void choices_text(const char *choices, char *out, size_t n)
{
    size_t j = 0;
    for (const char *p = choices; *p && j + 3 < n; p++) {
        if (*p == '|') {
            out[j++] = ',';
            out[j++] = ' ';
        } else
            out[j++] = *p;
    }
    out[j] = '\0';
}

/* kv_args.given: one bit per flag index (0-255) that kv_args_set or the -O
 * shorthand saw; GIVEN_DASH_O is the -O shorthand (every release from 0.6.5). */
#define GIVEN_DASH_O 255

static void given_mark(kv_args *a, int i, int on)
{
    if (i < 0 || i > GIVEN_DASH_O)
        return;
    if (on)
        a->given[i / 64] |= 1ull << (i % 64);
    else
        a->given[i / 64] &= ~(1ull << (i % 64));
}

static int given_has(const kv_args *a, int i)
{
    return i >= 0 && i <= GIVEN_DASH_O && ((a->given[i / 64] >> (i % 64)) & 1);
}

/* The KV connectors --kv-transfer-config may name (vllm/distributed/kv_transfer/kv_connector/factory.py):
 * the release that added each and, for those kvlab does not run, what they change. */
typedef struct connector_row {
    const char *name;
    const char *since;
    const char *not_modelled; /* NULL: the engine's host tier runs it */
} connector_row;

static const connector_row connectors[] = {
    {"OffloadingConnector", "0.11.0", NULL},
    {"LMCacheConnectorV1", "0.9.0",
     "LMCache keeps KV chunks (256 tokens by default) in its own CPU/disk/remote store, looked up by its own "
     "token hashes, with its own eviction; kvlab runs no LMCache tier"},
    {"LMCacheMPConnector", "0.11.1",
     "LMCache's multi-process server holds the KV outside vLLM; kvlab runs no LMCache tier"},
    {"NixlConnector", "0.9.0",
     "prefill/decode disaggregation moves each request's KV to another instance over NIXL; kvlab runs one "
     "instance here (kvlab simulate --disaggregate P:D runs the split)"},
    {"P2pNcclConnector", "0.10.0", "KV sent between instances over NCCL; kvlab runs one instance"},
    {"MultiConnector", "0.9.2", "several connectors at once; kvlab runs none of them"},
};

static const connector_row *connector_find(const char *name)
{
    for (size_t k = 0; k < sizeof connectors / sizeof connectors[0]; k++)
        if (!strcmp(connectors[k].name, name))
            return &connectors[k];
    return NULL;
}

/* --kv-offloading-size, --kv-offloading-backend, --kv-transfer-config: keep
 * their values for the host tier. 0, or KV_ARGS_EVALUE with one line. */
static int set_offload(kv_args *a, int i, const char *value, char *err, size_t errlen)
{
    if (!value || !*value)
        return kv_errf(err, errlen, KV_ARGS_EMISSING, "--%s needs a value", flags[i].name);
    if (i == F_KV_OFFLOAD) {
        double v;
        if (parse_double(value, &v) || v < 0)
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--kv-offloading-size takes GiB (a number >= 0), not '%.40s'",
                           value);
        a->kv_offloading_size = v;
        return 0;
    }
    if (i == F_KV_OFFLOAD_BACKEND) {
        if (!choice_ok(flags[i].choices, value))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--kv-offloading-backend must be native or lmcache; got '%.40s'",
                           value);
        a->kv_offloading_backend = !strcmp(value, "lmcache");
        if (a->kv_offloading_backend)
            return kv_errf(err, errlen, KV_ARGS_IGNORED,
                           "note: --kv-offloading-backend lmcache is accepted but not modelled: %s",
                           connector_find("LMCacheMPConnector")->not_modelled);
        return 0;
    }
    cJSON *j = cJSON_Parse(value);
    const cJSON *c = j ? cJSON_GetObjectItemCaseSensitive(j, "kv_connector") : NULL;
    if (!cJSON_IsString(c) || !c->valuestring[0]) {
        cJSON_Delete(j);
        return kv_errf(err, errlen, KV_ARGS_EVALUE,
                       "--kv-transfer-config takes JSON with a kv_connector, e.g. "
                       "'{\"kv_connector\":\"OffloadingConnector\",\"kv_role\":\"kv_both\"}'");
    }
    snprintf(a->kv_connector, sizeof a->kv_connector, "%s", c->valuestring);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, "kv_connector_extra_config");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(x, "cpu_bytes_to_use");
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(x, "num_cpu_blocks");
    a->kv_connector_cpu_bytes = cJSON_IsNumber(b) && b->valuedouble > 0 ? b->valuedouble : 0;
    a->kv_connector_cpu_blocks = cJSON_IsNumber(n) && n->valuedouble >= 1 ? (int64_t)n->valuedouble : 0;
    cJSON_Delete(j);
    const connector_row *row = connector_find(a->kv_connector);
    if (row && row->not_modelled)
        return kv_errf(err, errlen, KV_ARGS_IGNORED, "note: --kv-transfer-config %s is accepted but not modelled: %s",
                       row->name, row->not_modelled);
    if (!row)
        return kv_errf(err, errlen, KV_ARGS_IGNORED,
                       "note: --kv-transfer-config %.47s is accepted but not modelled: kvlab knows no such connector",
                       a->kv_connector);
    return 0;
}

int64_t kv_args_offload_blocks(const kv_args *a, double block_bytes_per_rank)
{
    int32_t tp = a->tensor_parallel_size > 0 ? a->tensor_parallel_size : 1;
    if (a->kv_offloading_size > 0)
        return a->kv_offloading_backend == 0 ? kv_offload_num_blocks(a->kv_offloading_size, tp, block_bytes_per_rank)
                                             : 0;
    if (strcmp(a->kv_connector, "OffloadingConnector"))
        return 0;
    /* the extra-config key the release reads (kv_release_memory.offload_cpu_bytes) */
    const kv_release *r = kv_release_find(a->vllm_version, NULL, 0);
    if (!r)
        r = kv_release_newest();
    if (!r->mem->offload_cpu_bytes)
        return a->kv_connector_cpu_blocks;
    return kv_offload_num_blocks(a->kv_connector_cpu_bytes / 1073741824.0, tp, block_bytes_per_rank);
}

/* The read release a follows (--vllm-version, the newest when unset or older
 * than every read release). */
static int release_index_or_newest(const kv_args *a)
{
    int ri = kv_vllm_release_index(a->vllm_version);
    return ri < 0 ? kv_vllm_num_releases - 1 : ri;
}

/* Does some read release list value ('|'-separated lists, one per release)? */
static int any_release_has(const char *const *lists, const char *value)
{
    for (int r = 0; r < kv_vllm_num_releases; r++)
        if (kv_vllm_list_has(lists[r], value))
            return 1;
    return 0;
}

/* argparse's refusal of a --quantization the release ri does not list
 * (model_executor/layers/quantization/__init__.py of that release). */
static int invalid_quantization(const char *value, int ri, char *err, size_t errlen)
{
    char list[2048];
    kv_vllm_list_quoted(kv_vllm_quantization_methods[ri], list, sizeof list);
    if (!kv_vllm_quantization_argparse[ri]) /* config/model.py _verify_quantization */
        return kv_errf(err, errlen, KV_ARGS_EVALUE, "ValueError: Unknown quantization method: %.40s. Must be one of [%s].",
                       value, list);
    return kv_errf(err, errlen, KV_ARGS_EVALUE,
                   "vllm serve: error: argument --quantization/-q: invalid choice: '%.40s' (choose from %s, None)",
                   value, list);
}

/* argparse's abbreviations: a name neither kvlab nor any release has
 * exactly, that starts exactly one long option of vLLM's parsers, is that
 * option (vLLM never turns allow_abbrev off). Returns 1 and the full name in
 * full (with a note in note), 0 when it is no abbreviation, or
 * KV_ARGS_EUNKNOWN with argparse's "ambiguous option" in err. */
static int resolve_abbrev(const char *name, char *full, size_t fulln, char *note, size_t noten, char *err,
                          size_t errlen)
{
    int neg;
    if (find_index(name, &neg) >= 0 || kv_vllm_flag_find(name, NULL))
        return 0;
    char others[512];
    const kv_vllm_flag *vf = kv_vllm_flag_prefix(name, others, sizeof others);
    const char *nm = name;
    while (*nm == '-')
        nm++;
    if (!vf) {
        if (strchr(others, ','))
            return kv_errf(err, errlen, KV_ARGS_EUNKNOWN, "vllm serve: error: ambiguous option: --%s could match %s",
                           nm, others);
        return 0;
    }
    snprintf(full, fulln, "%s", vf->name);
    if (note && noten)
        snprintf(note, noten, "note: --%s is taken as --%s (argparse accepts the start of a flag's name when only "
                              "one flag starts so)", nm, vf->name);
    return 1;
}

/* Options of vLLM's parsers that change memory in ways kvlab does not model,
 * and what they change (the note "not modelled: ..."); every other option
 * kvlab has no row for does not change the start-up memory plan. */
static const struct {
    const char *name;
    const char *changes;
} UNMODELLED[] = {
    {"enable-sleep-mode", "how weights and the KV cache are allocated (CuMemAllocator pools that sleep() can free); "
                          "the start-up plan is sized as without"},
    {"enable-eplb", "redundant experts per GPU (--eplb-config num_redundant_experts) and the rebalancing buffers"},
    {"eplb-config", "redundant experts per GPU and the rebalancing buffers"},
    {"num-redundant-experts", "redundant experts per GPU"},
    {"num-scheduler-steps", "V0's multi-step scheduling buffers (one output per step kept on the GPU)"},
    {"preemption-mode", "V0: swap keeps preempted blocks in --swap-space host memory (the GPU pool is the same)"},
    {"disable-hybrid-kv-cache-manager", "how full and sliding-window layers share the pool (one group of all "
                                        "layers)"},
    {"long-lora-scaling-factors", "the LoRA slots"},
    {"max-num-partial-prefills", "nothing at start-up"},
    {"mm-processor-cache-gb", "host memory for the multimodal processor cache"},
    {"max-num-encoder-input-tokens", "the encoder cache profile of multimodal models"},
    {"kv-sharing-fast-prefill", "the KV cache of layers that share it"},
    {"max-parallel-loading-workers", "nothing on the GPU (host memory while loading)"},
    {"quantization-param-path", "nothing (fp8 KV scales)"},
};

/* An option only vLLM's generated table knows (kv_vllm_flags.h): accepted
 * with a note, remembered for the release check. */
static int set_vllm_only(kv_args *a, const kv_vllm_flag *vf, const char *value, char *err, size_t errlen)
{
    (void)value;
    int idx = (int)(vf - kv_vllm_flags);
    int seen = 0;
    for (int k = 0; k < a->num_vllm_given; k++)
        seen |= a->vllm_given[k] == idx;
    if (!seen && a->num_vllm_given < (int32_t)(sizeof a->vllm_given / sizeof a->vllm_given[0]))
        a->vllm_given[a->num_vllm_given++] = (int16_t)idx;
    for (size_t k = 0; k < sizeof UNMODELLED / sizeof UNMODELLED[0]; k++)
        if (!strcmp(UNMODELLED[k].name, vf->name))
            return kv_errf(err, errlen, KV_ARGS_IGNORED, "note: --%s is accepted but not modelled: it changes %s",
                           vf->name, UNMODELLED[k].changes);
    return kv_errf(err, errlen, KV_ARGS_IGNORED, "note: --%s does not change the memory plan; ignored", vf->name);
}

/* --limit-mm-per-prompt: vLLM's JSON ({"image": 2, "video": 0}, a modality
 * as {"count": N, ...} from 0.11) or the older image=2,video=0 form
 * (config/multimodal.py limit_per_prompt). Other modalities are accepted
 * and not counted (kvlab profiles image and video towers only). */
static int parse_mm_limits(const char *v, kv_args *a, char *e, size_t n)
{
    int img = -1, vid = -1;
    if (*v == '{') {
        cJSON *o = cJSON_Parse(v);
        if (!cJSON_IsObject(o)) {
            cJSON_Delete(o);
            return kv_errf(e, n, -1, "not a JSON object: '%.60s'", v);
        }
        for (const cJSON *it = o->child; it; it = it->next) {
            const cJSON *c = cJSON_IsObject(it) ? cJSON_GetObjectItemCaseSensitive(it, "count") : it;
            if (!cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble > 1e6) {
                kv_errf(e, n, -1, "'%.30s' needs a count >= 0", it->string ? it->string : "");
                cJSON_Delete(o);
                return -1;
            }
            if (!strcmp(it->string, "image"))
                img = (int)c->valuedouble;
            else if (!strcmp(it->string, "video"))
                vid = (int)c->valuedouble;
        }
        cJSON_Delete(o);
    } else {
        for (const char *q = v; *q;) {
            const char *eq = strchr(q, '=');
            char *end;
            if (!eq)
                return kv_errf(e, n, -1, "expected JSON or modality=N[,modality=N], got '%.60s'", v);
            long c = strtol(eq + 1, &end, 10);
            if (end == eq + 1 || c < 0 || c > 1000000 || (*end && *end != ','))
                return kv_errf(e, n, -1, "expected JSON or modality=N[,modality=N], got '%.60s'", v);
            if (eq - q == 5 && !strncmp(q, "image", 5))
                img = (int)c;
            else if (eq - q == 5 && !strncmp(q, "video", 5))
                vid = (int)c;
            q = *end ? end + 1 : end;
        }
    }
    a->mm_limit_image = img;
    a->mm_limit_video = vid;
    snprintf(a->limit_mm_text, sizeof a->limit_mm_text, "%s", v);
    return 0;
}

/* --mm-processor-kwargs: JSON; max_pixels (the processor's size
 * longest_edge override, model_executor/models/qwen2_vl.py
 * _get_vision_info) is the key kvlab reads. */
static int parse_mm_kwargs(const char *v, kv_args *a, char *e, size_t n)
{
    cJSON *o = cJSON_Parse(v);
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return kv_errf(e, n, -1, "not a JSON object: '%.60s'", v);
    }
    const cJSON *mp = cJSON_GetObjectItemCaseSensitive(o, "max_pixels");
    if (mp && (!cJSON_IsNumber(mp) || mp->valuedouble < 1 || mp->valuedouble > 1e12)) {
        cJSON_Delete(o);
        return kv_errf(e, n, -1, "max_pixels must be a positive number of pixels");
    }
    a->mm_max_pixels = mp ? (int64_t)mp->valuedouble : 0;
    cJSON_Delete(o);
    snprintf(a->mm_kwargs_text, sizeof a->mm_kwargs_text, "%s", v);
    return 0;
}

int kv_args_set(kv_args *a, const char *name, const char *value, char *err, size_t errlen)
{
    char full[128], note[300];
    int ab = name ? resolve_abbrev(name, full, sizeof full, note, sizeof note, err, errlen) : 0;
    if (ab < 0)
        return ab;
    if (ab) {
        int rc = kv_args_set(a, full, value, err, errlen);
        if (rc == KV_ARGS_OK)
            return kv_errf(err, errlen, KV_ARGS_IGNORED, "%s", note);
        return rc;
    }
    int neg;
    int i = find_index(name, &neg);
    const char *nm = name ? name : "";
    while (*nm == '-')
        nm++;
    if (i < 0) {
        int vneg;
        const kv_vllm_flag *vf = kv_vllm_flag_find(nm, &vneg);
        if (!vf)
            return unknown_flag(nm, err, errlen);
        return set_vllm_only(a, vf, value, err, errlen);
    }
    const kv_args_flag *f = &flags[i];
    if (f->kind == KV_ARG_REFUSED)
        return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s: %s", f->name, f->changes);
    given_mark(a, i, 1);
    if (i == F_KV_OFFLOAD || i == F_KV_OFFLOAD_BACKEND || i == F_KV_TRANSFER) {
        int rc = set_offload(a, i, value, err, errlen);
        if (rc)
            return rc;
    }
    if ((f->kind == KV_ARG_NOTE_BOOL || f->kind == KV_ARG_NOTE) && f->changes)
        return kv_errf(err, errlen, KV_ARGS_IGNORED, "note: --%s is accepted but not modelled: it changes %s", f->name,
                       f->changes);
    if (f->kind == KV_ARG_NOTE_BOOL || f->kind == KV_ARG_NOTE)
        return kv_errf(err, errlen, KV_ARGS_IGNORED, "note: --%s does not change the memory plan; ignored", f->name);
    if (f->kind == KV_ARG_BOOL) {
        int b;
        if (parse_bool(value, &b))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s takes true or false, not '%s'", f->name, value);
        if (neg)
            b = !b;
        if (i == F_PREFIX)
            a->enable_prefix_caching = b;
        else if (i == F_FI_SAMPLER)
            a->flashinfer_sampler = b;
        else if (i == F_RESERVE_ISL)
            a->scheduler_reserve_full_isl = b;
        else if (i == F_CHUNKED)
            a->enable_chunked_prefill = b;
        else if (i == F_ENABLE_LORA)
            a->enable_lora = b;
        else if (i == F_SKIP_MM)
            a->skip_mm_profiling = b;
        else if (i == F_NO_SLIDING)
            a->disable_sliding_window = b;
        else
            a->enforce_eager = b;
        a->set_mask |= 1ull << i;
        return KV_ARGS_OK;
    }
    if (!value || !*value)
        return kv_errf(err, errlen, KV_ARGS_EMISSING, "--%s needs a value", f->name);
    char e2[160];
    int64_t iv = 0;
    double dv = 0;
    switch (i) {
    case F_MODEL:
        snprintf(a->model, sizeof a->model, "%s", value);
        break;
    case F_GPU:
        snprintf(a->gpu, sizeof a->gpu, "%s", value);
        break;
    case F_VLLM_VERSION:
        if (!kv_release_find(value, e2, sizeof e2))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "%s", e2);
        snprintf(a->vllm_version, sizeof a->vllm_version, "%s", value);
        break;
    case F_MXFP4_BACKEND:
        if (!choice_ok(f->choices, value))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--mxfp4-backend must be marlin or triton; got '%.40s'", value);
        a->mxfp4_backend = !strcmp(value, "triton") ? 2 : 1;
        break;
    case F_LIMIT_MM:
        if (parse_mm_limits(value, a, e2, sizeof e2))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--limit-mm-per-prompt: %s", e2);
        break;
    case F_MM_KWARGS:
        if (parse_mm_kwargs(value, a, e2, sizeof e2))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--mm-processor-kwargs: %s", e2);
        break;
    case F_COMPILE_CACHE:
        if (!choice_ok(f->choices, value))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--compile-cache must be cold or warm; got '%.40s'", value);
        a->compile_cache_warm = !strcmp(value, "warm");
        break;
    case F_ACCOUNTING:
        if (!choice_ok(f->choices, value))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--accounting must be release or textbook; got '%.40s'", value);
        a->accounting = !strcmp(value, "textbook") ? KV_ACCOUNTING_TEXTBOOK : KV_ACCOUNTING_RELEASE;
        break;
    case F_UTIL:
        if (parse_double(value, &dv))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--gpu-memory-utilization: '%s' is not a number", value);
        if (!(dv > 0 && dv <= 1))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--gpu-memory-utilization must be in (0, 1], got %s", value);
        a->gpu_memory_utilization = dv;
        break;
    case F_MAX_MODEL_LEN:
        if (!strcasecmp(value, "auto")) {
            a->max_model_len = KV_MAX_MODEL_LEN_AUTO;
            break;
        }
        if (kv_args_parse_int(value, &iv, e2, sizeof e2))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--max-model-len: %s", e2);
        if (suffix_check(a, i, f->name, value, err, errlen))
            return KV_ARGS_EVALUE;
        if (iv == -1) {
            a->max_model_len = KV_MAX_MODEL_LEN_AUTO;
            break;
        }
        if (iv < 1)
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--max-model-len must be a positive length, auto or -1, got %s",
                           value);
        a->max_model_len = iv;
        break;
    case F_MAX_NUM_SEQS:
    case F_MNBT:
    case F_TP:
    case F_PP:
    case F_KV_BYTES:
    case F_BLOCKS_OVERRIDE:
    case F_BLOCK_SIZE:
        if (kv_args_parse_int(value, &iv, e2, sizeof e2))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s: %s", f->name, e2);
        if (suffix_check(a, i, f->name, value, err, errlen))
            return KV_ARGS_EVALUE;
        if (iv < 1)
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s must be a positive whole number, got %s", f->name, value);
        if ((i == F_TP || i == F_PP) && iv > 1024)
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s %s is more GPUs than kvlab plans for (1024)", f->name, value);
        if ((i == F_MAX_NUM_SEQS || i == F_MNBT || i == F_BLOCKS_OVERRIDE) && iv > ((int64_t)1 << 40))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s %s is too large", f->name, value);
        if (i == F_MAX_NUM_SEQS)
            a->max_num_seqs = iv;
        else if (i == F_MNBT)
            a->max_num_batched_tokens = iv;
        else if (i == F_TP)
            a->tensor_parallel_size = (int32_t)iv;
        else if (i == F_PP) {
            if (iv != 1)
                return kv_errf(err, errlen, KV_ARGS_EVALUE,
                               "--pipeline-parallel-size %s: kvlab plans one pipeline stage only (use --tensor-parallel-size)",
                               value);
            a->pipeline_parallel_size = 1;
        } else if (i == F_KV_BYTES)
            a->kv_cache_memory_bytes = iv;
        else if (i == F_BLOCKS_OVERRIDE)
            a->num_gpu_blocks_override = iv;
        else {
            if (!choice_ok(f->choices, value) && !(iv == 1 || iv == 8 || iv == 16 || iv == 32 || iv == 64 || iv == 128 ||
                                                   iv == 256))
                return kv_errf(err, errlen, KV_ARGS_EVALUE, "--block-size must be one of 1, 8, 16, 32, 64, 128, 256, got %s",
                               value);
            a->block_size = (int32_t)iv;
        }
        break;
    case F_KV_DTYPE:
        if (!choice_ok(f->choices, value) &&
            (!strcmp(value, "nvfp4") || any_release_has(kv_vllm_kv_cache_dtypes, value)))
            return kv_errf(err, errlen, KV_ARGS_EVALUE,
                           "--kv-cache-dtype %s: newer vLLM accepts it, but kvlab cannot size its blocks yet (try fp8)",
                           value);
        if (!choice_ok(f->choices, value)) {
            char list[1024];
            kv_vllm_list_quoted(kv_vllm_kv_cache_dtypes[release_index_or_newest(a)], list, sizeof list);
            return kv_errf(err, errlen, KV_ARGS_EVALUE,
                           "vllm serve: error: argument --kv-cache-dtype: invalid choice: '%.40s' (choose from %s)%s",
                           value, list,
                           !strcmp(value, "float32") || !strcmp(value, "fp32") ? " (vLLM has no float32 KV cache)" : "");
        }
        a->kv_fp8_e5m2 = !strcmp(value, "fp8_e5m2");
        snprintf(a->kv_cache_dtype_text, sizeof a->kv_cache_dtype_text, "%s", value);
        if (!strcmp(value, "auto"))
            a->kv_cache_dtype = KV_ARGS_KV_AUTO;
        else if (!strcmp(value, "bfloat16"))
            a->kv_cache_dtype = KV_ARGS_KV_BF16;
        else if (!strcmp(value, "float16"))
            a->kv_cache_dtype = KV_ARGS_KV_FP16;
        else if (!strcmp(value, "fp8_per_token_head"))
            a->kv_cache_dtype = KV_ARGS_KV_FP8_PER_TOKEN_HEAD;
        else if (!strcmp(value, "int8_per_token_head"))
            a->kv_cache_dtype = KV_ARGS_KV_INT8_PER_TOKEN_HEAD;
        else if (!strcmp(value, "fp8_ds_mla"))
            a->kv_cache_dtype = KV_ARGS_KV_FP8_DS_MLA;
        else
            a->kv_cache_dtype = KV_ARGS_KV_FP8;
        break;
    case F_QUANT:
        if (!choice_ok(f->choices, value) && !any_release_has(kv_vllm_quantization_methods, value))
            return invalid_quantization(value, release_index_or_newest(a), err, errlen);
        snprintf(a->quantization_text, sizeof a->quantization_text, "%s", value);
        if (!choice_ok(f->choices, value))
            a->quantization = KV_ARGS_QUANT_NONE; /* a method of vLLM's list sized from the checkpoint's
                                                     quantization_config (modelopt, fbgemm_fp8, ...) */
        else if (!strcmp(value, "none"))
            a->quantization = KV_ARGS_QUANT_NONE;
        else if (!strcmp(value, "fp8"))
            a->quantization = KV_ARGS_QUANT_FP8;
        else if (!strncmp(value, "awq", 3))
            a->quantization = KV_ARGS_QUANT_AWQ;
        else if (!strncmp(value, "gptq", 4))
            a->quantization = KV_ARGS_QUANT_GPTQ;
        else if (!strcmp(value, "bitsandbytes"))
            a->quantization = KV_ARGS_QUANT_BITSANDBYTES;
        else if (!strcmp(value, "mxfp4"))
            a->quantization = KV_ARGS_QUANT_MXFP4;
        else
            a->quantization = KV_ARGS_QUANT_COMPRESSED_TENSORS;
        break;
    case F_OPT_LEVEL:
        if (strlen(value) != 1 || value[0] < '0' || value[0] > '3')
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--optimization-level (-O) must be 0, 1, 2 or 3, got '%.40s'",
                           value);
        a->optimization_level = value[0] - '0';
        break;
    case F_MAX_CG_SIZE:
        if (kv_args_parse_int(value, &iv, e2, sizeof e2))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s: %s", f->name, e2);
        if (iv < 0 || iv > 65536)
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s must be a batch size in [0, 65536], got %s", f->name, value);
        a->max_cudagraph_capture_size = iv;
        break;
    case F_CG_SIZES: {
        /* "8", "1 2 4 8", "1,2,4,8" or "[1, 2, 4, 8]" */
        int n = 0;
        for (const char *q = value; *q;) {
            while (*q == ' ' || *q == ',' || *q == '[' || *q == ']')
                q++;
            if (!*q)
                break;
            char *end;
            errno = 0;
            long long v = strtoll(q, &end, 10);
            if (end == q || errno || v < 1 || v > 65536 || n >= 64)
                return kv_errf(err, errlen, KV_ARGS_EVALUE,
                               "--cuda-graph-sizes takes up to 64 batch sizes in [1, 65536], got '%.60s'", value);
            a->cuda_graph_sizes[n++] = v;
            q = end;
        }
        if (!n)
            return kv_errf(err, errlen, KV_ARGS_EMISSING, "--cuda-graph-sizes needs a value");
        a->cuda_graph_sizes_n = n;
        break;
    }
    case F_MAX_LORAS:
    case F_MAX_LORA_RANK:
        if (kv_args_parse_int(value, &iv, e2, sizeof e2) || iv < 1 || iv > 100000)
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s must be a positive whole number, got %s", f->name, value);
        if (i == F_MAX_LORAS)
            a->max_loras = (int32_t)iv;
        else
            a->max_lora_rank = (int32_t)iv;
        break;
    case F_HF_OVERRIDES: {
        /* vLLM parses it as JSON (a dict); config/model.py applies it */
        cJSON *j = cJSON_Parse(value);
        int ok = cJSON_IsObject(j);
        cJSON_Delete(j);
        if (!ok)
            return kv_errf(err, errlen, KV_ARGS_EVALUE,
                           "--hf-overrides must be a JSON object of config.json keys ('{\"max_position_embeddings\": "
                           "65536}'), got '%.60s'", value);
        if (strlen(value) >= sizeof a->hf_overrides)
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--hf-overrides: longer than %zu bytes",
                           sizeof a->hf_overrides - 1);
        snprintf(a->hf_overrides, sizeof a->hf_overrides, "%s", value);
        break;
    }
    case F_CPU_OFFLOAD:
        if (parse_double(value, &dv) || !(dv >= 0 && dv <= 1e6))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--cpu-offload-gb must be a non-negative number of GiB, got %s",
                           value);
        a->cpu_offload_gb = dv;
        break;
    case F_WATERMARK:
        if (parse_double(value, &dv) || !(dv >= 0 && dv < 1))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--watermark must be a fraction in [0, 1), got %s", value);
        a->watermark = dv;
        break;
    case F_SCHED_POLICY:
        if (!choice_ok(f->choices, value))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--scheduling-policy must be fcfs or priority; got '%s'", value);
        a->scheduling_policy = !strcmp(value, "priority");
        break;
    case F_DTYPE:
        if (!choice_ok(f->choices, value))
        {
            char list[256];
            choices_text(f->choices, list, sizeof list);
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--dtype must be one of %s; got '%s'", list, value);
        }
        if (!strcmp(value, "auto"))
            a->dtype = KV_ARGS_DTYPE_AUTO;
        else if (!strcmp(value, "bfloat16"))
            a->dtype = KV_ARGS_DTYPE_BF16;
        else if (!strcmp(value, "float16") || !strcmp(value, "half"))
            a->dtype = KV_ARGS_DTYPE_FP16;
        else
            a->dtype = KV_ARGS_DTYPE_FP32;
        break;
    default: /* GiB overrides */
        if (parse_double(value, &dv))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s: '%s' is not a number", f->name, value);
        if (dv < 0 || dv > 1e6 || (i == F_GPU_GIB && dv <= 0))
            return kv_errf(err, errlen, KV_ARGS_EVALUE, "--%s must be %s GiB, got %s", f->name,
                           i == F_GPU_GIB ? "a positive number of" : "a non-negative number of", value);
        if (i == F_GPU_GIB)
            a->gpu_memory_gib = dv;
        else if (i == F_GPU_USED)
            a->gpu_used_gib = dv;
        else if (i == F_WEIGHTS)
            a->weights_gib = dv;
        else if (i == F_ACTIVATION)
            a->activation_gib = dv;
        else if (i == F_CUDAGRAPH)
            a->cudagraph_gib = dv;
        else if (i == F_CONTEXT)
            a->cuda_context_gib = dv;
        else
            a->nccl_gib = dv;
        break;
    }
    a->set_mask |= 1ull << i;
    return KV_ARGS_OK;
}

int kv_args_is_set(const kv_args *a, const char *name)
{
    int neg;
    int i = find_index(name, &neg);
    return i >= 0 && i < 64 && (a->set_mask >> i) & 1;
}

static void fmt_gib(char *b, size_t n, double v)
{
    if (v < 0)
        snprintf(b, n, "%s", "");
    else
        snprintf(b, n, "%g", v);
}

int kv_args_get(const kv_args *a, const char *name, char *b, size_t n)
{
    int neg;
    int i = find_index(name, &neg);
    if (!n)
        return i < 0 ? KV_ARGS_EUNKNOWN : 0;
    b[0] = '\0';
    if (i < 0)
        return KV_ARGS_EUNKNOWN;
    switch (i) {
    case F_MODEL: snprintf(b, n, "%s", a->model); break;
    case F_GPU: snprintf(b, n, "%s", a->gpu); break;
    case F_VLLM_VERSION: snprintf(b, n, "%s", a->vllm_version); break;
    case F_ACCOUNTING: snprintf(b, n, "%s", a->accounting == KV_ACCOUNTING_TEXTBOOK ? "textbook" : "release"); break;
    case F_MXFP4_BACKEND: snprintf(b, n, "%s", a->mxfp4_backend == 2 ? "triton" : a->mxfp4_backend == 1 ? "marlin" : ""); break;
    case F_COMPILE_CACHE: snprintf(b, n, "%s", a->compile_cache_warm ? "warm" : "cold"); break;
    case F_LIMIT_MM: snprintf(b, n, "%s", a->limit_mm_text); break;
    case F_MM_KWARGS: snprintf(b, n, "%s", a->mm_kwargs_text); break;
    case F_SKIP_MM: snprintf(b, n, "%s", (a->skip_mm_profiling != 0) != neg ? "true" : "false"); break;
    case F_NO_SLIDING: snprintf(b, n, "%s", (a->disable_sliding_window != 0) != neg ? "true" : "false"); break;
    case F_UTIL: snprintf(b, n, "%g", a->gpu_memory_utilization); break;
    case F_MAX_MODEL_LEN:
        if (a->max_model_len == KV_MAX_MODEL_LEN_AUTO)
            snprintf(b, n, "auto");
        else if (a->max_model_len > 0)
            snprintf(b, n, "%lld", (long long)a->max_model_len);
        break;
    case F_MAX_NUM_SEQS: if (a->max_num_seqs) snprintf(b, n, "%lld", (long long)a->max_num_seqs); break;
    case F_MNBT: if (a->max_num_batched_tokens) snprintf(b, n, "%lld", (long long)a->max_num_batched_tokens); break;
    case F_BLOCK_SIZE: snprintf(b, n, "%d", a->block_size); break;
    case F_KV_DTYPE:
        if (a->kv_cache_dtype_text[0])
            snprintf(b, n, "%s", a->kv_cache_dtype_text);
        else
            snprintf(b, n, "%s", a->kv_fp8_e5m2 && a->kv_cache_dtype == KV_ARGS_KV_FP8
                                     ? "fp8_e5m2" : kv_args_kv_dtype_name(a->kv_cache_dtype));
        break;
    case F_QUANT: /* a method kvlab has no enum for reads back as given (modelopt) */
        snprintf(b, n, "%s", a->quantization == KV_ARGS_QUANT_NONE && a->quantization_text[0]
                                 ? a->quantization_text : kv_args_quant_name(a->quantization));
        break;
    case F_DTYPE: snprintf(b, n, "%s", kv_args_dtype_name(a->dtype)); break;
    case F_TP: snprintf(b, n, "%d", a->tensor_parallel_size); break;
    case F_PP: snprintf(b, n, "%d", a->pipeline_parallel_size); break;
    case F_PREFIX: snprintf(b, n, "%s", (a->enable_prefix_caching != 0) != neg ? "true" : "false"); break;
    case F_CHUNKED: snprintf(b, n, "%s", (a->enable_chunked_prefill != 0) != neg ? "true" : "false"); break;
    case F_EAGER: snprintf(b, n, "%s", (a->enforce_eager != 0) != neg ? "true" : "false"); break;
    case F_FI_SAMPLER:
        if (kv_args_is_set(a, "flashinfer-sampler"))
            snprintf(b, n, "%s", (a->flashinfer_sampler != 0) != neg ? "true" : "false");
        break;
    case F_RESERVE_ISL:
        if (kv_args_is_set(a, "scheduler-reserve-full-isl"))
            snprintf(b, n, "%s", (a->scheduler_reserve_full_isl != 0) != neg ? "true" : "false");
        break;
    case F_WATERMARK: if (kv_args_is_set(a, "watermark")) snprintf(b, n, "%g", a->watermark); break;
    case F_CPU_OFFLOAD: snprintf(b, n, "%g", a->cpu_offload_gb); break;
    case F_KV_OFFLOAD: if (a->kv_offloading_size > 0) snprintf(b, n, "%g", a->kv_offloading_size); break;
    case F_KV_OFFLOAD_BACKEND: if (a->kv_offloading_backend) snprintf(b, n, "lmcache"); break;
    case F_OPT_LEVEL: if (a->optimization_level >= 0) snprintf(b, n, "%d", a->optimization_level); break;
    case F_MAX_CG_SIZE:
        if (a->max_cudagraph_capture_size) snprintf(b, n, "%lld", (long long)a->max_cudagraph_capture_size);
        break;
    case F_HF_OVERRIDES: snprintf(b, n, "%s", a->hf_overrides); break;
    case F_ENABLE_LORA: snprintf(b, n, "%s", (a->enable_lora != 0) != neg ? "true" : "false"); break;
    case F_MAX_LORAS: snprintf(b, n, "%d", a->max_loras); break;
    case F_MAX_LORA_RANK: snprintf(b, n, "%d", a->max_lora_rank); break;
    case F_CG_SIZES:
        for (int k = 0; k < a->cuda_graph_sizes_n; k++) {
            size_t l = strlen(b);
            snprintf(b + l, n - l, "%s%lld", k ? " " : "", (long long)a->cuda_graph_sizes[k]);
        }
        break;
    case F_KV_BYTES: if (a->kv_cache_memory_bytes) snprintf(b, n, "%lld", (long long)a->kv_cache_memory_bytes); break;
    case F_BLOCKS_OVERRIDE:
        if (a->num_gpu_blocks_override) snprintf(b, n, "%lld", (long long)a->num_gpu_blocks_override);
        break;
    case F_GPU_GIB: fmt_gib(b, n, a->gpu_memory_gib); break;
    case F_GPU_USED: fmt_gib(b, n, a->gpu_used_gib); break;
    case F_WEIGHTS: fmt_gib(b, n, a->weights_gib); break;
    case F_ACTIVATION: fmt_gib(b, n, a->activation_gib); break;
    case F_CUDAGRAPH: fmt_gib(b, n, a->cudagraph_gib); break;
    case F_CONTEXT: fmt_gib(b, n, a->cuda_context_gib); break;
    case F_NCCL: fmt_gib(b, n, a->nccl_gib); break;
    case F_SCHED_POLICY: snprintf(b, n, "%s", a->scheduling_policy ? "priority" : "fcfs"); break;
    default: break; /* ignored flags hold no value */
    }
    return 0;
}

static void add_note(char *notes, size_t n, const char *line)
{
    if (!notes || !n)
        return;
    size_t l = strlen(notes);
    if (l + 1 < n)
        snprintf(notes + l, n - l, "%s\n", line);
}

/* Does this argument look like a flag (not a value such as "-1")? */
static int is_flag(const char *s)
{
    if (s[0] != '-')
        return 0;
    if (s[1] == '-')
        return 1;
    if (!strncmp(s, "-O", 2))
        return 1;
    /* a short form of some release's parser (-q, -tp, -dp, -asc, ...), with
     * or without "=value"; "-1" is a value */
    return kv_vllm_flag_find(s, NULL) != NULL;
}


int kv_args_flag_in_release(const kv_args_flag *f, const char *version)
{
    const kv_release *r = kv_release_find(version && *version ? version : NULL, NULL, 0);
    if (!f || !r)
        return 0;
    /* the release's own parser, where it was read */
    const kv_vllm_flag *vf = strcmp(f->field, "kvlab") ? kv_vllm_flag_find(f->name, NULL) : NULL;
    int ri = kv_vllm_release_index(version);
    if (vf && ri >= 0)
        return kv_vllm_flag_in(vf, ri);
    const char *v = version && *version ? version : r->first;
    return (!f->since || kv_release_compare(v, f->since) >= 0) && (!f->removed || kv_release_compare(v, f->removed) < 0);
}

/* argparse's words, then where the flag is. */
#define UNRECOGNIZED "vllm serve: error: unrecognized arguments: "

static int not_in_release(const char *flag, const char *v, const char *since, const char *removed, char *err,
                          size_t errlen)
{
    if (removed && since)
        return kv_errf(err, errlen, KV_ARGS_EVALUE, UNRECOGNIZED "%s (vLLM %s has no such flag; %s to before %s have it)",
                       flag, v, since, removed);
    if (removed)
        return kv_errf(err, errlen, KV_ARGS_EVALUE, UNRECOGNIZED "%s (vLLM %s has no such flag; removed in %s)", flag, v,
                       removed);
    return kv_errf(err, errlen, KV_ARGS_EVALUE, UNRECOGNIZED "%s (vLLM %s has no such flag; %s and later have it)", flag,
                   v, since);
}

/* The same from the generated table: the spans of releases that have it. */
static int not_in_release_vllm(const char *flag, const char *v, const kv_vllm_flag *vf, char *err, size_t errlen)
{
    char spans[256];
    kv_vllm_flag_spans(vf, spans, sizeof spans);
    return kv_errf(err, errlen, KV_ARGS_EVALUE, UNRECOGNIZED "%s (vLLM %s has no such flag; %s %s it)", flag, v, spans,
                   strchr(spans, '-') || strchr(spans, ',') ? "have" : "has");
}

int kv_args_check_release(const kv_args *a, char *err, size_t errlen)
{
    if (a->accounting == KV_ACCOUNTING_TEXTBOOK)
        return 0;
    const char *v = a->vllm_version[0] ? a->vllm_version : kv_release_newest()->first;
    int ri = kv_vllm_release_index(a->vllm_version);
    char name[80];
    for (int i = 0; i < NUM_FLAGS && i < 256; i++) {
        if (!given_has(a, i) || !strcmp(flags[i].field, "kvlab"))
            continue;
        snprintf(name, sizeof name, "--%s", flags[i].name);
        /* the release's own parser decides where it lists the flag */
        const kv_vllm_flag *vf = kv_vllm_flag_find(flags[i].name, NULL);
        if (vf && ri >= 0) {
            if (!kv_vllm_flag_in(vf, ri))
                return not_in_release_vllm(name, v, vf, err, errlen);
            continue;
        }
        if (!kv_args_flag_in_release(&flags[i], a->vllm_version))
            return not_in_release(name, v, flags[i].since, flags[i].removed, err, errlen);
    }
    /* the release's own lists of --quantization methods and KV cache dtypes */
    if (ri >= 0 && given_has(a, F_QUANT) && a->quantization_text[0] && strcmp(a->quantization_text, "none") &&
        !kv_vllm_list_has(kv_vllm_quantization_methods[ri], a->quantization_text))
        return invalid_quantization(a->quantization_text, ri, err, errlen);
    if (ri >= 0 && given_has(a, F_KV_DTYPE) && a->kv_cache_dtype_text[0] &&
        !kv_vllm_list_has(kv_vllm_kv_cache_dtypes[ri], a->kv_cache_dtype_text)) {
        char list[1024];
        kv_vllm_list_quoted(kv_vllm_kv_cache_dtypes[ri], list, sizeof list);
        return kv_errf(err, errlen, KV_ARGS_EVALUE,
                       "vllm serve: error: argument --kv-cache-dtype: invalid choice: '%s' (choose from %s) (vLLM %s)",
                       a->kv_cache_dtype_text, list, v);
    }
    for (int k = 0; k < a->num_vllm_given; k++) {
        const kv_vllm_flag *vf = &kv_vllm_flags[a->vllm_given[k]];
        if (ri >= 0 && !kv_vllm_flag_in(vf, ri)) {
            snprintf(name, sizeof name, "--%s", vf->name);
            return not_in_release_vllm(name, v, vf, err, errlen);
        }
    }
    const connector_row *row = a->kv_connector[0] ? connector_find(a->kv_connector) : NULL;
    if (row && kv_release_compare(v, row->since) < 0)
        return kv_errf(err, errlen, KV_ARGS_EVALUE,
                       "--kv-transfer-config: vLLM %s has no %s (%s and later); vLLM would reject it", v, row->name,
                       row->since);
    if (given_has(a, GIVEN_DASH_O) && kv_release_compare(v, "0.6.5") < 0)
        return not_in_release("-O", v, "0.6.5", NULL, err, errlen);
    /* a --no- form where the release's option is a plain switch (store_true) */
    for (int k = 0; k < a->num_neg_given && ri >= 0; k++) {
        const kv_vllm_flag *vf = &kv_vllm_flags[a->neg_given[k]];
        int nargs, neg;
        if (kv_vllm_flag_shape(vf, ri, &nargs, &neg) && !neg) {
            int from = kv_vllm_flag_negatable_from(vf);
            return kv_errf(err, errlen, KV_ARGS_EVALUE,
                           "vllm serve: error: unrecognized arguments: --no-%s (vLLM %s has --%s without a --no- form; "
                           "%s and later have it)",
                           vf->name, v, vf->name, from >= 0 ? kv_vllm_releases[from] : "no release");
        }
    }
    /* "--enforce-eager=true": argparse's switches take no value */
    if (a->switch_eq_given) {
        const kv_vllm_flag *vf = &kv_vllm_flags[a->switch_eq_given - 1];
        int nargs = vf->nargs, negf = 0;
        if (ri < 0 || kv_vllm_flag_shape(vf, ri, &nargs, &negf)) {
            if (nargs == KV_VLLM_NARGS_NONE) {
                char both[160];
                snprintf(both, sizeof both, negf ? "--%s/--no-%s" : "--%s", vf->name, vf->name);
                return kv_errf(err, errlen, KV_ARGS_EVALUE,
                               "vllm serve: error: argument %s: ignored explicit argument '%s' (a switch: give "
                               "--%s%s%s)",
                               both, a->switch_eq_text, vf->name, negf ? " or --no-" : "", negf ? vf->name : "");
            }
        }
    }
    if (lora_rank_check(a, v, err, errlen))
        return KV_ARGS_EVALUE;
    return suffix_check_release(a, v, err, errlen);
}

/* The --no- form of vLLM option vf was given: remembered for the release
 * check (kv_args_check_release). */
static void neg_mark(kv_args *a, const kv_vllm_flag *vf)
{
    if (!vf)
        return;
    int16_t idx = (int16_t)(vf - kv_vllm_flags);
    for (int k = 0; k < a->num_neg_given; k++)
        if (a->neg_given[k] == idx)
            return;
    if (a->num_neg_given < (int32_t)(sizeof a->neg_given / sizeof a->neg_given[0]))
        a->neg_given[a->num_neg_given++] = idx;
}

/* How vf takes values in the release a follows (its parser's nargs); the
 * newest shape where that release lacks it (the release check refuses it). */
static int release_nargs(const kv_args *a, const kv_vllm_flag *vf)
{
    int nargs, neg;
    if (kv_vllm_flag_shape(vf, release_index_or_newest(a), &nargs, &neg))
        return nargs;
    return vf->nargs;
}

/* A switch vf given as "--name=value": remembered (the first) for the
 * release check, which knows the release's shape of it. */
static void switch_eq_mark(kv_args *a, const kv_vllm_flag *vf, const char *value)
{
    if (!vf || a->switch_eq_given)
        return;
    a->switch_eq_given = (int16_t)(vf - kv_vllm_flags + 1);
    snprintf(a->switch_eq_text, sizeof a->switch_eq_text, "%s", value ? value : "");
}

/* A flag kv_args_set accepted without modelling (KV_ARGS_IGNORED) leaves
 * its message as a note; any other result passes through. */
static int note_if_ignored(int rc, char *notes, size_t noteslen, char *err, size_t errlen)
{
    if (rc != KV_ARGS_IGNORED)
        return rc;
    add_note(notes, noteslen, err);
    if (err && errlen)
        err[0] = '\0';
    return 0;
}

int kv_args_parse(kv_args *a, int argc, char **argv, char *notes, size_t noteslen, char *err, size_t errlen)
{
    if (notes && noteslen)
        notes[0] = '\0';
    int i = 0;
    if (argc >= 2 && !strcmp(argv[0], "vllm") && !strcmp(argv[1], "serve"))
        i = 2;
    int have_model = 0;
    char sizes[512];
    /* the release first, wherever it stands: it decides how values are
     * checked (the --quantization methods and KV cache dtypes it lists) */
    for (int k = i; k < argc && argv[k]; k++) {
        const char *v = NULL;
        if (!strncmp(argv[k], "--vllm-version=", 15) || !strncmp(argv[k], "--vllm_version=", 15))
            v = argv[k] + 15;
        else if ((!strcmp(argv[k], "--vllm-version") || !strcmp(argv[k], "--vllm_version")) && k + 1 < argc)
            v = argv[k + 1];
        if (v && kv_args_set(a, "vllm-version", v, err, errlen) < 0)
            return KV_ARGS_EVALUE;
    }
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (!arg)
            break;
        if (!strcmp(arg, "\\") || !strcmp(arg, "--"))
            continue; /* a pasted line continuation; end of options */
        if (!is_flag(arg)) {
            /* argparse reads any other "-x" (not a number) as an option it lacks */
            char *numend;
            if (arg[0] == '-' && arg[1] && (strtod(arg, &numend), *numend))
                return kv_errf(err, errlen, KV_ARGS_EUNKNOWN,
                               "vllm serve: error: unrecognized arguments: %.60s (no option of vLLM's parser)", arg);
            if (have_model)
                return kv_errf(err, errlen, KV_ARGS_EUNKNOWN,
                               "vllm serve: error: unrecognized arguments: %s (MODEL is already '%s')", arg, a->model);
            snprintf(a->model, sizeof a->model, "%s", arg);
            have_model = 1;
            continue;
        }
        if (!strncmp(arg, "-O", 2)) {
            /* -O3, -O 3, -O=3: the compilation level (0.6.5-0.11), the
             * optimization level (0.12 on); other -O forms are JSON or
             * dotted compilation settings kvlab does not model */
            const char *v = arg[2] == '=' ? arg + 3 : arg[2] ? arg + 2 : NULL;
            if (!v && i + 1 < argc && argv[i + 1] && !is_flag(argv[i + 1]))
                v = argv[++i];
            if (!v || !*v)
                return kv_errf(err, errlen, KV_ARGS_EMISSING, "-O needs a value (0, 1, 2 or 3)");
            given_mark(a, GIVEN_DASH_O, 1);
            /* a whole number is a level in every release (vLLM rejects
             * -O 9 as it rejects --optimization-level 9) */
            char *numend;
            (void)strtol(v, &numend, 10);
            int rc = numend != v && !*numend ? kv_args_set(a, "optimization-level", v, err, errlen)
                                             : kv_args_set(a, "compilation-config", v, err, errlen);
            int neg2;
            given_mark(a, F_OPT_LEVEL, 0); /* -O is not the long flags */
            given_mark(a, find_index("compilation-config", &neg2), 0);
            if ((rc = note_if_ignored(rc, notes, noteslen, err, errlen)) < 0)
                return rc;
            continue;
        }
        char name[128];
        const char *eq = strchr(arg, '=');
        const char *value = NULL;
        size_t nl = eq ? (size_t)(eq - arg) : strlen(arg);
        if (nl >= sizeof name)
            return kv_errf(err, errlen, KV_ARGS_EUNKNOWN, "unknown flag %.60s...", arg);
        memcpy(name, arg, nl);
        name[nl] = '\0';
        if (eq)
            value = eq + 1;
        char full[128], note[300];
        int ab = resolve_abbrev(name, full, sizeof full, note, sizeof note, err, errlen);
        if (ab < 0)
            return ab;
        if (ab) {
            add_note(notes, noteslen, note);
            snprintf(name, sizeof name, "--%.100s", full);
        }
        int neg;
        int fi = find_index(name, &neg);
        if (fi < 0) {
            /* an option of vLLM's parsers kvlab has no row for: take its
             * values as argparse would (nargs), then note it */
            int vneg;
            const kv_vllm_flag *vf = kv_vllm_flag_find(name, &vneg);
            if (!vf)
                return unknown_flag(name, err, errlen);
            if (vneg)
                neg_mark(a, vf);
            if (eq)
                switch_eq_mark(a, vf, value);
            int vnargs = release_nargs(a, vf);
            if (!eq && !vneg && vnargs != KV_VLLM_NARGS_NONE) {
                int more = vnargs == KV_VLLM_NARGS_MANY;
                int have = i + 1 < argc && argv[i + 1] && !is_flag(argv[i + 1]);
                if (!have && vnargs != KV_VLLM_NARGS_OPT)
                    return kv_errf(err, errlen, KV_ARGS_EMISSING,
                                   "vllm serve: error: argument --%s: expected %s", vf->name,
                                   more ? "at least one argument" : "one argument");
                if (have)
                    value = argv[++i];
                while (more && i + 1 < argc && argv[i + 1] && !is_flag(argv[i + 1]))
                    i++;
            }
            int rc = note_if_ignored(kv_args_set(a, name, value, err, errlen), notes, noteslen, err, errlen);
            if (rc < 0)
                return rc;
            continue;
        }
        const kv_args_flag *f = &flags[fi];
        int takes_value = f->kind != KV_ARG_BOOL && f->kind != KV_ARG_NOTE_BOOL;
        if (!takes_value && eq && (f->kind == KV_ARG_NOTE_BOOL))
            value = NULL;
        const kv_vllm_flag *vf = kv_vllm_flag_find(f->name, NULL);
        if (neg && vf)
            neg_mark(a, vf);
        if (!takes_value && eq)
            switch_eq_mark(a, vf, eq + 1);
        /* a switch the release's parser reads with an optional true/false
         * (0.6.4's --enable-chunked-prefill, StoreBoolean with nargs "?") */
        if (!takes_value && !eq && !neg && vf && release_nargs(a, vf) == KV_VLLM_NARGS_OPT && i + 1 < argc &&
            argv[i + 1] && (!strcasecmp(argv[i + 1], "true") || !strcasecmp(argv[i + 1], "false")))
            value = argv[++i];
        if (takes_value && !eq) {
            if (i + 1 >= argc || !argv[i + 1] || is_flag(argv[i + 1]))
                return kv_errf(err, errlen, KV_ARGS_EMISSING, "--%s needs a value", f->name);
            value = argv[++i];
            /* --served-model-name takes one or more names */
            if (fi >= F_FIRST_NOTE && !strcmp(f->name, "served-model-name"))
                while (i + 1 < argc && argv[i + 1] && !is_flag(argv[i + 1]) && have_model)
                    i++;
            /* --cuda-graph-sizes takes one or more sizes (nargs="+") */
            if (fi == F_CG_SIZES) {
                size_t l = strlen(value);
                if (l >= sizeof sizes)
                    l = sizeof sizes - 1;
                memcpy(sizes, value, l);
                sizes[l] = '\0';
                while (i + 1 < argc && argv[i + 1] && !is_flag(argv[i + 1]) && isdigit((unsigned char)argv[i + 1][0])) {
                    l = strlen(sizes);
                    snprintf(sizes + l, sizeof sizes - l, " %s", argv[++i]);
                }
                value = sizes;
            }
        }
        if (fi == F_MODEL)
            have_model = 1;
        int rc = note_if_ignored(kv_args_set(a, name, value, err, errlen), notes, noteslen, err, errlen);
        if (rc < 0)
            return rc;
    }
    return kv_args_check_release(a, err, errlen);
}

const char *kv_args_quant_name(kv_args_quant q)
{
    switch (q) {
    case KV_ARGS_QUANT_FP8: return "fp8";
    case KV_ARGS_QUANT_AWQ: return "awq";
    case KV_ARGS_QUANT_GPTQ: return "gptq";
    case KV_ARGS_QUANT_BITSANDBYTES: return "bitsandbytes";
    case KV_ARGS_QUANT_MXFP4: return "mxfp4";
    case KV_ARGS_QUANT_COMPRESSED_TENSORS: return "compressed-tensors";
    default: return "none";
    }
}

const char *kv_args_kv_dtype_name(kv_args_kv_dtype d)
{
    switch (d) {
    case KV_ARGS_KV_BF16: return "bfloat16";
    case KV_ARGS_KV_FP16: return "float16";
    case KV_ARGS_KV_FP8: return "fp8";
    case KV_ARGS_KV_FP8_DS_MLA: return "fp8_ds_mla";
    case KV_ARGS_KV_FP8_PER_TOKEN_HEAD: return "fp8_per_token_head";
    case KV_ARGS_KV_INT8_PER_TOKEN_HEAD: return "int8_per_token_head";
    default: return "auto";
    }
}

const char *kv_args_dtype_name(kv_args_dtype d)
{
    switch (d) {
    case KV_ARGS_DTYPE_BF16: return "bfloat16";
    case KV_ARGS_DTYPE_FP16: return "float16";
    case KV_ARGS_DTYPE_FP32: return "float32";
    default: return "auto";
    }
}

/* Append s to out (at *pos of len), single-quoted when a shell would read
 * anything in it other than itself. */
static void cmd_put(char *out, size_t len, size_t *pos, const char *s, int quote_if_needed)
{
    int plain = *s != '\0';
    for (const char *p = s; *p && quote_if_needed; p++)
        if (!isalnum((unsigned char)*p) && !strchr("._/:=@%+-,", *p))
            plain = 0;
    char buf[1200];
    if (!quote_if_needed || plain) {
        snprintf(buf, sizeof buf, "%s", s);
    } else {
        size_t b = 0;
        buf[b++] = '\'';
        for (const char *p = s; *p && b + 6 < sizeof buf; p++) {
            if (*p == '\'') { memcpy(buf + b, "'\\''", 4); b += 4; }
            else buf[b++] = *p;
        }
        buf[b++] = '\'';
        buf[b] = '\0';
    }
    size_t l = strlen(buf);
    if (*pos < len) snprintf(out + *pos, len - *pos, "%s", buf);
    *pos += l;
}

size_t kv_args_command(const kv_args *a, char *out, size_t len)
{
    size_t pos = 0;
    if (len) out[0] = '\0';
    if (a->allow_long_max_model_len) cmd_put(out, len, &pos, "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 ", 0);
    cmd_put(out, len, &pos, "vllm serve ", 0);
    cmd_put(out, len, &pos, a->model, 1);
    char val[1100], opt[128];
    for (int i = 0; i < NUM_FLAGS && i < GIVEN_DASH_O; i++) {
        if (i == F_MODEL || !given_has(a, i) || !strcmp(flags[i].field, "kvlab"))
            continue;
        if (kv_args_get(a, flags[i].name, val, sizeof val) != 0)
            continue;
        if (flags[i].kind == KV_ARG_BOOL) {
            int on = !strcmp(val, "true") || !strcmp(val, "1");
            const char *d = flags[i].deflt ? flags[i].deflt : "";
            if (!on && (!strcasecmp(d, "false") || !strcmp(d, "0")))
                continue; /* off is the default: nothing to type */
            snprintf(opt, sizeof opt, " --%s%s", on ? "" : "no-", flags[i].name);
            cmd_put(out, len, &pos, opt, 0);
            continue;
        }
        if (!val[0])
            continue;
        snprintf(opt, sizeof opt, " --%s ", flags[i].name);
        cmd_put(out, len, &pos, opt, 0);
        cmd_put(out, len, &pos, val, 1);
    }
    return pos;
}
