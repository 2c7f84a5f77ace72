/* kv_args: vLLM engine arguments, with vLLM's names and defaults
 * (vllm/engine/arg_utils.py, vllm/config/cache.py, vllm/config/scheduler.py),
 * plus kvlab's overrides for
 * each memory-plan term.
 *
 * The same setter serves the command line (`kvlab serve ... --max-model-len
 * 8192`), the TUI flags view and Lua lessons (kv_args_set(a, "max-model-len",
 * "8192")). Names are accepted with dashes or underscores and with or without
 * the leading "--", as vLLM's FlexibleArgumentParser does.
 *
 * The integers vLLM reads with human_readable_int (arg_utils.py:
 * --max-model-len from 0.8.4, --max-num-batched-tokens from 0.9.1,
 * --kv-cache-memory-bytes; kv_args.c HUMAN_INT) accept its forms, other
 * options refuse a suffix as argparse's int does (and so do those three
 * under an older --vllm-version, in kv_args_check_release): k/m/g/t = powers of 1000 (decimals allowed: 25.6k = 25600),
 * K/M/G/T = powers of 1024 (whole numbers only): 32k = 32000, 128K = 131072,
 * 1m = 1000000. Booleans take --flag, --no-flag, or --flag=true/false. */
#ifndef KV_ARGS_H
#define KV_ARGS_H

#include <stddef.h>
#include <stdint.h>

/* kv_args_set / kv_args_parse results. */
enum {
    KV_ARGS_OK = 0,
    KV_ARGS_IGNORED = 1,     /* a real vLLM flag that does not touch memory: accepted, note in err */
    KV_ARGS_EUNKNOWN = -1,   /* not a vLLM (or kvlab) flag */
    KV_ARGS_EVALUE = -2,     /* bad value: not a number, negative, out of range, not a choice */
    KV_ARGS_EMISSING = -3,   /* flag needs a value and none was given */
};

/* --max-model-len auto / -1: fit the largest length the KV pool allows. */
#define KV_MAX_MODEL_LEN_AUTO (-1)

/* Weight quantization (--quantization). */
typedef enum kv_args_quant {
    KV_ARGS_QUANT_NONE = 0,  /* default: the checkpoint's own quantization_config, if any */
    KV_ARGS_QUANT_FP8,
    KV_ARGS_QUANT_AWQ,
    KV_ARGS_QUANT_GPTQ,
    KV_ARGS_QUANT_BITSANDBYTES,
    KV_ARGS_QUANT_MXFP4,
    KV_ARGS_QUANT_COMPRESSED_TENSORS,
} kv_args_quant;

/* --kv-cache-dtype: the values vLLM's CacheDType accepts (vllm/config/cache.py;
 * vllm-internals.md section 7). Older vLLM: auto, bfloat16, fp8, fp8_e4m3,
 * fp8_e5m2, fp8_inc, fp8_ds_mla; 2026 adds float16, fp8_per_token_head,
 * int8_per_token_head (sized here) and nvfp4, turboquant_* (refused with a
 * message: kvlab cannot size them). vLLM has no float32 KV cache. */
typedef enum kv_args_kv_dtype {
    KV_ARGS_KV_AUTO = 0,     /* = model dtype */
    KV_ARGS_KV_BF16,
    KV_ARGS_KV_FP16,
    KV_ARGS_KV_FP8,          /* fp8, fp8_e4m3, fp8_e5m2, fp8_inc: 1 byte */
    KV_ARGS_KV_FP8_DS_MLA,   /* MLA special layout: 656 bytes per token per layer */
    KV_ARGS_KV_FP8_PER_TOKEN_HEAD,  /* 1 byte per value (+ per token-and-head scales, not counted) */
    KV_ARGS_KV_INT8_PER_TOKEN_HEAD, /* 1 byte per value (+ per token-and-head scales, not counted) */
} kv_args_kv_dtype;

/* --accounting: the release's own start-up accounting (the default), or the
 * course's textbook arithmetic (kv_plan.h). */
enum { KV_ACCOUNTING_RELEASE = 0, KV_ACCOUNTING_TEXTBOOK = 1 };

/* --dtype. */
typedef enum kv_args_dtype {
    KV_ARGS_DTYPE_AUTO = 0,  /* config torch_dtype; float32 checkpoints run in 16-bit as vLLM does */
    KV_ARGS_DTYPE_BF16,
    KV_ARGS_DTYPE_FP16,
    KV_ARGS_DTYPE_FP32,
} kv_args_dtype;

typedef struct kv_args {
    /* vLLM engine args (names as in vLLM; -1 / 0 = "unset, use vLLM's default"). */
    char model[1024];               /* positional MODEL or --model */
    double gpu_memory_utilization;  /* default 0.92 (2026 vLLM); (0, 1] */
    int64_t max_model_len;          /* 0 = model's max; KV_MAX_MODEL_LEN_AUTO = auto-fit */
    int64_t max_num_seqs;           /* 0 = default (256, or 1024 on >= 70 GiB non-A100 cards) */
    int64_t max_num_batched_tokens; /* 0 = default (2048, or 8192 on >= 70 GiB non-A100 cards) */
    int32_t block_size;             /* default 16 */
    kv_args_kv_dtype kv_cache_dtype;
    int32_t kv_fp8_e5m2;            /* 1: --kv-cache-dtype fp8_e5m2 (KV_ARGS_KV_FP8 with 5 exponent bits) */
    char kv_cache_dtype_text[40];   /* --kv-cache-dtype as given: kv_args_get reads an alias (fp8_e4m3, fp8_inc) back
                                       as itself, so a list of choices can be stepped through; "" = never set */
    kv_args_quant quantization;
    char quantization_text[40];     /* --quantization as given ("awq_marlin", "modelopt"); "" = never set */
    kv_args_dtype dtype;
    int32_t tensor_parallel_size;   /* default 1 */
    int32_t pipeline_parallel_size; /* default 1; kvlab plans pp=1 only */
    int32_t enable_prefix_caching;  /* default 1 */
    int32_t enable_chunked_prefill; /* default 1 (v1 engine) */
    int32_t enforce_eager;          /* default 0 */
    int64_t kv_cache_memory_bytes;  /* 0 = unset; else the KV pool per GPU and utilization is ignored */
    int64_t num_gpu_blocks_override;/* 0 = unset */
    int32_t scheduling_policy;      /* --scheduling-policy: 0 fcfs (default), 1 priority (kv_sched_policy) */
    double cpu_offload_gb;          /* --cpu-offload-gb: GiB of weights per GPU kept in CPU memory (default 0) */
    /* CUDA-graph flags (kv_plan_cudagraph_bytes reads them): */
    int32_t optimization_level;     /* -O N / --optimization-level N (0-3; -1 = unset): the compilation level
                                       before 0.12, the optimization level from 0.12 */
    int64_t max_cudagraph_capture_size; /* --max-cudagraph-capture-size N (0 = the release's) */
    int32_t cuda_graph_sizes_n;     /* --cuda-graph-sizes: how many sizes were given (0 = unset; 1 = a maximum) */
    int64_t cuda_graph_sizes[64];   /* the sizes */

    /* kvlab: the card and term overrides (GiB; < 0 = not overridden). */
    char gpu[64];                   /* --gpu NAME ("" = none) */
    double gpu_memory_gib;          /* --gpu-memory-gib: the card's reported total */
    double gpu_used_gib;            /* --gpu-used-gib: taken by other processes at start-up (default 0) */
    double weights_gib;             /* --weights-gib */
    double activation_gib;          /* --activation-gib */
    double cudagraph_gib;           /* --cudagraph-gib */
    double cuda_context_gib;        /* --cuda-context-gib */
    double nccl_gib;                /* --nccl-gib */

    /* kvlab: which accounting to follow. */
    char vllm_version[32];          /* --vllm-version X.Y[.Z] ("" = the newest release, kv_release.h) */
    int32_t accounting;             /* --accounting: KV_ACCOUNTING_RELEASE (default) or KV_ACCOUNTING_TEXTBOOK */
    int32_t flashinfer_sampler;     /* --flashinfer-sampler: only read when given (kv_args_is_set) */
    int32_t mxfp4_backend;          /* --mxfp4-backend: 0 the release's, 1 marlin, 2 triton */
    int32_t compile_cache_warm;     /* --compile-cache: 0 cold (default: torch.compile and Triton autotune run in
                                       the profile), 1 warm (their results come from ~/.cache/vllm) */
    /* scheduler flags of newer releases, only read when given (kv_args_is_set) */
    int32_t scheduler_reserve_full_isl; /* --scheduler-reserve-full-isl (vLLM 0.19+) */
    double watermark;               /* --watermark, a fraction of num_blocks in [0, 1) (vLLM 0.24+) */
    /* KV offloading (vllm/config/cache.py, vllm/config/kv_transfer.py; the engine's host tier, kv_offload.h):
       the GPU memory plan does not read them */
    double kv_offloading_size;      /* --kv-offloading-size GiB, summed over the tp ranks (0 = off; vLLM 0.11.1+) */
    int32_t kv_offloading_backend;  /* --kv-offloading-backend: 0 native (OffloadingConnector), 1 lmcache */
    char kv_connector[48];          /* --kv-transfer-config's kv_connector ("" = none) */
    double kv_connector_cpu_bytes;  /* its kv_connector_extra_config.cpu_bytes_to_use (0.14+; 0 = absent) */
    int64_t kv_connector_cpu_blocks;/* its kv_connector_extra_config.num_cpu_blocks (0.11-0.13; 0 = absent) */
    /* vLLM's environment (vllm/envs.py), set by the program from VLLM_*
     * variables (tui/cli/vllm_config.c; docs: README "Environment"): */
    /* LoRA (kv_plan_lora_bytes): --enable-lora, --max-loras (default 1), --max-lora-rank (default 16) */
    int32_t enable_lora;
    int32_t max_loras;
    int32_t max_lora_rank;
    char hf_overrides[2048];        /* --hf-overrides: a JSON object applied to the model's config before planning
                                       (kv_model_load_overrides); "" = none */
    int32_t allow_long_max_model_len; /* VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: a --max-model-len above the model's
                                         maximum is a warning, not an error (config/model.py) */
    int32_t use_v1;                 /* VLLM_USE_V1: -1 unset, 0 the V0 engine where the release still has it
                                       (0.8.0-0.10.1.x: kv_release_v0_fallback), 1 V1 */
    int32_t use_v2_model_runner;    /* VLLM_USE_V2_MODEL_RUNNER: -1 unset (the release's choice per model), 0 runner
                                       V1, 1 runner V2 (config/vllm.py use_v2_model_runner; read where the release
                                       has the variable: kv_release_reads_env) */
    int32_t estimate_cudagraphs;    /* VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS: -1 unset (the release's default),
                                       0 the graph estimate is logged but not subtracted, 1 subtracted
                                       (v1/worker/gpu_worker.py determine_available_memory, 0.18 on) */
    /* multimodal: the encoder-cache profile's levers */
    int32_t mm_limit_image;         /* --limit-mm-per-prompt image count (-1 = unset: vLLM's 999) */
    int32_t mm_limit_video;         /* --limit-mm-per-prompt video count (-1 = unset) */
    int64_t mm_max_pixels;          /* --mm-processor-kwargs max_pixels (0 = the checkpoint's) */
    int32_t skip_mm_profiling;      /* --skip-mm-profiling (vLLM 0.10.1+) */
    int32_t disable_sliding_window; /* --disable-sliding-window: kv_model_disable_sliding_window */
    char limit_mm_text[128];        /* the two JSON flags as given ("" = unset) */
    char mm_kwargs_text[128];

    /* Which vLLM args the user set explicitly (bit per kv_args flag index), so
     * defaults that depend on the card can be filled in later. */
    uint64_t set_mask;
    /* Every flag given by kv_args_set, any kind (bit per flag index): what
     * kv_args_check_release checks against the release. */
    uint64_t given[4];
    /* Options of vLLM's own parsers kvlab has no row for (engine/kv_vllm_flags.h),
     * as given: index into kv_vllm_flags, checked against the release like the
     * rows above. */
    int16_t vllm_given[96];
    int32_t num_vllm_given;
    /* Options given a k/K-style size ("32k"): bit k = kv_args.c HUMAN_INT[k].
     * kv_args_check_release refuses it where the release's parser read that
     * option with argparse's int. */
    uint32_t suffix_given;
    char suffix_text[3][24]; /* each one's value as given, for argparse's words */
    /* Options given in their --no- form: index into kv_vllm_flags, checked
     * against the release's parser (its shape: a store_true switch has no
     * --no- form). */
    int16_t neg_given[16];
    int32_t num_neg_given;
    /* A switch given a value after '=' ("--enforce-eager=true"): its
     * kv_vllm_flags index + 1 (0 = none) and the value, for the release
     * check: argparse refuses it where the release's option takes no value. */
    int16_t switch_eq_given;
    char switch_eq_text[24];
} kv_args;

/* Fill *a with vLLM's defaults (above). */
void kv_args_init(kv_args *a);

/* Set one flag by name ("max-model-len", "--max_model_len", "no-enforce-eager",
 * a short form of any release: "-tp", "-dp", "-asc") to value (NULL for a bare
 * boolean flag). Any option of any vLLM release's `vllm serve` parser
 * (engine/kv_vllm_flags.h, generated from vLLM's arg_utils.py and
 * cli_args.py) is accepted: modelled, or KV_ARGS_IGNORED with a one-line note
 * in err ("--port does not change the memory plan; ignored", "... not
 * modelled: it changes ..."). A name no release has: KV_ARGS_EUNKNOWN with
 * argparse's words ("vllm serve: error: unrecognized arguments: --x (did you
 * mean --y?)"). Other errors: a negative code with one line naming the flag. */
int kv_args_set(kv_args *a, const char *name, const char *value, char *err, size_t errlen);

/* Read one flag's current value as text ("8192", "auto", "true", "0.92"; ""
 * when unset). Returns 0, or KV_ARGS_EUNKNOWN. */
int kv_args_get(const kv_args *a, const char *name, char *buf, size_t buflen);

/* Parse a `vllm serve` argument vector (argv[0] is the first argument, not a
 * program name): the MODEL positional (or --model), `--flag value`,
 * `--flag=value`, bare and --no- booleans. A leading "vllm serve" is skipped
 * so a pasted command works. Notes for accepted-but-ignored flags are written
 * one per line into notes (if non-NULL). Returns KV_ARGS_OK or the first
 * error's code with one line in err. */
int kv_args_parse(kv_args *a, int argc, char **argv, char *notes, size_t noteslen,
                  char *err, size_t errlen);

/* Was this vLLM flag given explicitly? */
int kv_args_is_set(const kv_args *a, const char *name);

/* The `vllm serve` command line of a, as an operator would type it:
 * "vllm serve MODEL" and every vLLM flag given (kv_args_set), in the
 * table's order, `--flag value` (a value with characters a shell reads
 * quoted in single quotes), a boolean as `--flag` or `--no-flag` (the
 * latter left out where vLLM's default is off); kvlab's own flags (--gpu,
 * --vllm-version, --accounting, the *-gib overrides) and options kvlab
 * does not model are left out; VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 goes first
 * when set. Writes at most len bytes (NUL included); returns the length
 * needed, like snprintf. */
size_t kv_args_command(const kv_args *a, char *out, size_t len);

/* The known flags, for help screens and the TUI flags view. */
typedef enum kv_args_kind {
    KV_ARG_INT, KV_ARG_FLOAT, KV_ARG_BOOL, KV_ARG_CHOICE, KV_ARG_STRING,
    KV_ARG_GIB,       /* kvlab override in GiB */
    KV_ARG_NOTE,      /* real vLLM flag kvlab does not model: accepted with a note ("does not change the
                         memory plan", or with .changes "not modelled: ...") */
    KV_ARG_NOTE_BOOL, /* the same, taking no value */
    KV_ARG_REFUSED,   /* real vLLM flag kvlab cannot follow (--config FILE): exit 2 with .changes */
} kv_args_kind;

typedef struct kv_args_flag {
    const char *name;     /* dashed, without "--": "max-model-len" */
    const char *field;    /* vLLM's name: "max_model_len" (kvlab-only: "kvlab") */
    kv_args_kind kind;
    const char *choices;  /* "auto|fp8|..." for choices, else NULL */
    const char *deflt;    /* vLLM's default, as text */
    const char *help;     /* one line */
    int memory;           /* 1: changes the memory plan */
    /* The vLLM releases that have the flag (engine/arg_utils.py and the
     * frontend's cli_args.py of each release): since = the first (NULL: all
     * of 0.6.4 on), removed = the first without it (NULL: still there). */
    const char *since;
    const char *removed;
    /* A flag that changes memory in a way kvlab does not model: what it
     * changes, for the note "not modelled: ..." (NULL otherwise). */
    const char *changes;
} kv_args_flag;

/* Whether vLLM release `version` (X.Y[.Z]; "" = the newest) has flag f. */
int kv_args_flag_in_release(const kv_args_flag *f, const char *version);

/* Every vLLM flag given to a (a->given, a->vllm_given) exists in the release
 * a follows (a->vllm_version, the newest when ""), as that release's parser
 * says (engine/kv_vllm_flags_data.c; a flag it does not list: the row's
 * since/removed): 0, or KV_ARGS_EVALUE with one line in argparse's words
 * ("vllm serve: error: unrecognized arguments: --async-scheduling (vLLM 0.9.2
 * has no such flag; 0.10.0-0.33.0 have it)"), or a size suffix ("32k") on
 * an option the release read with argparse's int ("argument --max-model-len:
 * invalid int value: '32k'", --max-model-len before 0.8.4,
 * --max-num-batched-tokens before 0.9.1). Nothing is checked under
 * textbook accounting. kv_args_parse calls it once all flags are read. */
int kv_args_check_release(const kv_args *a, char *err, size_t errlen);

/* The host tier's size in blocks that a asks for (kv_offload.h): from
 * --kv-offloading-size GiB with the native backend, else from an
 * OffloadingConnector's kv_connector_extra_config (cpu_bytes_to_use, or
 * num_cpu_blocks before 0.14), as vLLM reads them for the release a follows;
 * block_bytes_per_rank = one block of every layer on one rank. 0 = no tier
 * (not asked for, LMCache or another connector: those are not modelled). */
int64_t kv_args_offload_blocks(const kv_args *a, double block_bytes_per_rank);

int kv_args_flag_count(void);
const kv_args_flag *kv_args_flag_at(int i);
/* Look up by any accepted spelling; NULL if unknown. */
const kv_args_flag *kv_args_flag_find(const char *name);

/* Parse a vLLM human-readable integer ("8192", "32k", "128K", "1m", "25.6k").
 * Returns 0 and *out, or KV_ARGS_EVALUE with err. */
int kv_args_parse_int(const char *s, int64_t *out, char *err, size_t errlen);

/* Names for enums, as vLLM spells them ("fp8", "awq", "auto", "bfloat16"). */
const char *kv_args_quant_name(kv_args_quant q);
const char *kv_args_kv_dtype_name(kv_args_kv_dtype d);
const char *kv_args_dtype_name(kv_args_dtype d);

#endif
