/* kv_logread: read a vLLM start-up (or failure) log as users paste it and
 * pull out what it states about the memory plan, for `kvlab explain` and the
 * app's --log view.
 *
 * Input is the log text as pasted: process prefixes ("(EngineCore_DP0
 * pid=1) ", "(APIServer pid=1) ", "(Worker_TP1 pid=2) ",
 * "(VllmWorkerProcess pid=3) "), docker / RFC 3339 and journald timestamps,
 * "name | " compose prefixes, ANSI colours, CRLF, interleaved ranks and a
 * cut-off tail are all accepted. Each line is reduced to vLLM's own record
 * (level, source file:line, message) and the message is matched against a
 * table of the lines vLLM's releases print (the wording kv_release.c holds
 * for each release: vllm/v1/worker/gpu_worker.py, gpu_model_runner.py,
 * v1/core/kv_cache_utils.py, worker/worker.py ...). Per-GPU figures are taken
 * from the first rank that logs them.
 *
 * The release comes, most sure first, from the banner ("version 0.19.0",
 * "vLLM API server version 0.8.2"), the engine line ("Initializing a V1 LLM
 * engine (v0.19.0) with config: ..."), the source line numbers only some
 * releases print for the same message (a table generated from vLLM's wheels
 * by scripts/gen-logread-lines.py), or the wording (a range of releases).
 *
 * The engine never prints: the caller formats what is read here. */
#ifndef KV_LOGREAD_H
#define KV_LOGREAD_H

#include <stddef.h>
#include <stdint.h>

#include "kv_args.h"

/* How the release was found (most sure first). */
typedef enum kv_logread_how {
    KV_LOGREAD_VER_NONE = 0,   /* nothing in the log says */
    KV_LOGREAD_VER_BANNER,     /* the API server's banner / "vLLM API server version X" */
    KV_LOGREAD_VER_ENGINE,     /* "Initializing a V1 LLM engine (vX)" / "an LLM engine (vX)" */
    KV_LOGREAD_VER_LINES,      /* source line numbers that match one release's files */
    KV_LOGREAD_VER_WORDING,    /* the wording of its lines: a range of releases */
} kv_logread_how;

/* Which figures the log states (bits of kv_logread.have). */
enum {
    KV_LR_WEIGHTS = 1 << 0,      /* "Model loading took X GiB" / "Loading model weights took X GB" */
    KV_LR_ACTIVATION = 1 << 1,   /* V0's profile: "PyTorch activation peak memory takes" / peak - weights */
    KV_LR_NON_TORCH = 1 << 2,    /* V0's profile: non_torch_memory */
    KV_LR_CUDAGRAPH = 1 << 3,    /* "Estimated CUDA graph memory: X GiB total" (before the pool) */
    KV_LR_CUDAGRAPH_ACTUAL = 1 << 4, /* "Graph capturing finished ..., took X GiB" (after it) */
    KV_LR_KV_GIB = 1 << 5,       /* "Available KV cache memory" / V0's kv_cache_size / the error's figure */
    KV_LR_KV_TOKENS = 1 << 6,    /* "GPU KV cache size: N tokens" */
    KV_LR_BLOCKS = 1 << 7,       /* "# GPU blocks: N" (V0 and early V1) */
    KV_LR_CONCURRENCY = 1 << 8,  /* "Maximum concurrency for L tokens per request: Xx" */
    KV_LR_GPU_TOTAL = 1 << 9,    /* the card's total (profile line, free-memory check, torch OOM) */
    KV_LR_UTIL = 1 << 10,        /* gpu_memory_utilization as logged (profile line or args) */
    KV_LR_BUDGET = 1 << 11,      /* V0's total x utilization = X */
    KV_LR_ARGS = 1 << 12,        /* the non-default args line (or V0's Namespace) */
    KV_LR_ENGINE = 1 << 13,      /* the engine config line */
    KV_LR_MODEL = 1 << 14,
    KV_LR_ERROR = 1 << 15,
    KV_LR_FREE = 1 << 16,        /* free memory at start-up (the free-memory check) */
};

/* What went wrong, as the log says it. The first seven read as
 * kv_plan_error_name spells kv_plan_error (kv_plan.h). */
typedef enum kv_logread_error {
    KV_LR_ERR_NONE = 0,
    KV_LR_ERR_FREE_MEMORY,       /* "Free memory on device ... on startup is less than desired" */
    KV_LR_ERR_NO_KV_MEMORY,      /* "No available memory for the cache blocks" */
    KV_LR_ERR_MAX_MODEL_LEN,     /* "To serve at least one request ..." / V0 "The model's max seq len (N) is larger" */
    KV_LR_ERR_AUTO_FIT,          /* "Cannot auto-fit max_model_len" */
    KV_LR_ERR_WEIGHTS_OOM,       /* CUDA out of memory before "Model loading took" */
    KV_LR_ERR_PROFILE_OOM,       /* CUDA out of memory after the weights, before the pool */
    KV_LR_ERR_SAMPLER_OOM,       /* "CUDA out of memory occurred when warming up sampler" */
    KV_LR_ERR_OOM,               /* CUDA out of memory after the pool was sized (not the sampler) */
    KV_LR_ERR_BF16,              /* "Bfloat16 is only supported on GPUs with compute capability ..." */
    KV_LR_ERR_MODEL_LEN_CONFIG,  /* "User-specified max_model_len (N) is greater than the derived max_model_len" */
    KV_LR_ERR_CONFIG,            /* another configuration error (divisibility, a ValueError) */
    KV_LR_ERR_OTHER,             /* an error line kvlab has no name for */
} kv_logread_error;

/* Short names: "", "free_memory", "no_memory_for_cache_blocks", "max_model_len",
 * "auto_fit", "weights_oom", "profile_oom", "sampler_oom", "oom", "bf16_unsupported",
 * "max_model_len_config", "config", "other". */
const char *kv_logread_error_name(kv_logread_error e);

#define KV_LOGREAD_MAX_ARGS 48
#define KV_LOGREAD_MAX_EVIDENCE 4

/* One key of the non-default args (vLLM's underscore name and value as
 * logged, Python's True / False / None / 'text' / numbers). */
typedef struct kv_logread_arg {
    char key[48];
    char value[96];
} kv_logread_arg;

typedef struct kv_logread {
    /* Lines. */
    int lines;               /* lines in the input */
    int vllm_lines;          /* lines with vLLM's "LEVEL MM-DD HH:MM:SS [file:line]" record (the date and time
                                may be missing) or a known message */
    int records;             /* lines in vLLM's record format */
    int matched;             /* lines that set a field */
    int truncated;           /* 1: the input stops mid-line */

    /* Release. */
    kv_logread_how version_how;
    char vllm_version[40];   /* exact ("0.19.0") when the banner, engine line or line numbers say; else "" */
    char version_lo[16];     /* the range the wording allows ("0.18.0" .. "0.19.99"); "" = open */
    char version_hi[16];
    char version_evidence[160]; /* what said so: "banner", "engine line", "gpu_worker.py:436, ..." */
    int engine_v1;           /* -1 unknown, 0 V0 (incl. the compute-capability fallback), 1 V1 */
    int v0_fallback;         /* 1: "Falling back to V0" */

    /* Model and flags. */
    char model[256];         /* from the args, the engine line or the banner */
    int num_args;
    kv_logread_arg args[KV_LOGREAD_MAX_ARGS];   /* non-default args, in order */
    int num_engine;
    kv_logread_arg engine[KV_LOGREAD_MAX_ARGS]; /* the engine line's memory-related keys */
    int64_t max_model_len;   /* the engine line's max_seq_len / "Using max model len N"; 0 unknown */
    int tensor_parallel_size;/* engine line / args; 0 unknown */
    int pipeline_parallel_size;

    /* Card. */
    char gpu_name[128];      /* where the log names it ("Tesla T4", "NVIDIA H100 80GB HBM3"); "" */
    double gpu_total_gib;
    double free_gib;         /* free at start-up (free-memory check) */
    double gpu_memory_utilization;
    double cc;               /* compute capability where logged (7.5); 0 */
    int compile_cache;       /* torch.compile's cache: 0 not said, 1 cold ("Compiling a graph for ..."),
                                2 warm ("Directly load the compiled graph(s) ... from the cache") */

    /* Figures, per GPU, GiB as logged (KV_LR_* bits in have). */
    unsigned have;
    double weights_gib;
    double activation_gib;
    double non_torch_gib;
    double cudagraph_gib;
    double cudagraph_actual_gib;
    double kv_cache_gib;
    double budget_gib;
    int64_t kv_cache_tokens;
    int64_t gpu_blocks;
    int64_t concurrency_len; /* the L of "Maximum concurrency for L tokens per request" */
    double max_concurrency;

    /* Failure. */
    kv_logread_error error_kind;
    char error[512];         /* the error line, prefixes stripped */
    double error_needed_gib; /* the length check's "(X GiB KV cache is needed" */
    int64_t error_max_model_len;
    int64_t error_estimated_max_model_len;
    int64_t error_kv_tokens; /* V0's "stored in KV cache (N)" */
    int64_t error_num_reqs;  /* the sampler warm-up's dummy requests */

    /* Source lines seen for the messages the line-number table knows. */
    int num_evidence;
    struct { char file[40]; int line; char what[16]; } evidence[KV_LOGREAD_MAX_EVIDENCE];
} kv_logread;

/* Read a log of len bytes (need not be NUL-terminated; any bytes). Fills *out
 * (zeroed first). Returns 0 when the text is a vLLM log (a line in vLLM's
 * record format, or known messages in at least one line of 20 when none is
 * in that format: a pasted excerpt, not a page that quotes one), -1 when not,
 * with one line in err. Never fails otherwise: what the log lacks is absent
 * from out->have. */
int kv_logread_parse(const char *text, size_t len, kv_logread *out, char *err, size_t errlen);

/* The args this log's server ran with, as kvlab flags: the non-default args
 * (every key kv_args knows), then what the engine line adds (max_model_len, else
 * the length of the concurrency line,
 * tensor_parallel_size, dtype, quantization, kv_cache_dtype, enforce_eager,
 * enable_prefix_caching) where the args did not say, then --vllm-version
 * when the release is exact or the newest kvlab row of the wording's range.
 * Keys kv_args does not know or does not model are listed, one per line, in
 * unread (may be NULL) as "name=value". Returns the number of flags set. */
int kv_logread_to_args(const kv_logread *lr, kv_args *a, char *unread, size_t unreadlen);

/* The release kvlab follows for this log: the exact version, else the newest
 * release of the wording's range kvlab has, else "" (the newest). Writes to
 * buf; returns buf. */
const char *kv_logread_release(const kv_logread *lr, char *buf, size_t buflen);

/* One line saying how sure the release is: "0.19.0 (the banner)",
 * "0.18.0-0.19.x (the wording of 3 lines; kvlab follows 0.19.0)",
 * "unknown (nothing in the log names it; kvlab follows the newest, 0.33.0)". */
const char *kv_logread_release_how(const kv_logread *lr, char *buf, size_t buflen);

#endif
