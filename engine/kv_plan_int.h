/* kv_plan internals shared by the plan's phases (kv_plan.c: inputs, KV
 * sizing, checks, fixes; kv_plan_terms.c: weights, activation, CUDA graphs,
 * the budget). Not a public header. */
#ifndef KV_PLAN_INT_H
#define KV_PLAN_INT_H

#include "kv_plan.h"

/* What every phase reads. */
typedef struct plan_ctx {
    const kv_model *m;
    const kv_gpu *gpu;           /* NULL: a custom card */
    const kv_args *a;
    const kv_release *r;         /* the row in use (kv_release_textbook() under textbook) */
    int textbook;
    int tp;
    double total;                /* the card's reported total, bytes */
    int act_bytes;               /* 2, or 4 with --dtype float32 */
    int v0_for_offload;          /* 1: the release's V1 fell back to V0 for --cpu-offload-gb */
    int fp16_for_card;           /* 1: --dtype auto on a bfloat16 checkpoint ran as float16 (card below 8.0) */
    char *err;
    size_t errlen;
} plan_ctx;

/* Append one vLLM log line ("INFO ...", "ERROR ...") / one kvlab note. */
void plan_log(kv_plan *p, const char *level, const char *line);
void plan_note(kv_plan *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void plan_set_term(kv_plan *p, int i, const char *name, double bytes, int overridden, int counted, const char *fmt,
                   ...) __attribute__((format(printf, 7, 8)));
/* Mark the plan failed with kind and message (vLLM's text). */
void plan_fail(kv_plan *p, kv_plan_error kind, const char *msg);
/* Fill the release's template tpl (kv_release_format) with the plan's
 * figures plus extra fields; the result goes to out. */
void plan_format(const kv_plan *p, const char *tpl, const kv_release_arg *extra, int nextra, char *out,
                 size_t outlen);
/* Log the release's template as INFO (nothing when the release has no such line). */
void plan_log_tpl(kv_plan *p, const char *level, const char *tpl, const kv_release_arg *extra, int nextra);

/* The terms (kv_plan_terms.c), in the order vLLM meets them. */
void plan_weights(const plan_ctx *c, kv_plan *p);
void plan_activation(const plan_ctx *c, kv_plan *p);
void plan_cudagraph(const plan_ctx *c, kv_plan *p);
/* The CUDA-graph estimate: 1 when the runner in use profiles a real one
 * before the pool is sized (profile_cudagraph_memory: runner V1 from 0.18,
 * runner V2 from 0.29; textbook: always); 1 when it is also subtracted (the
 * release's default VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, or the
 * environment's, kv_args.estimate_cudagraphs). */
int plan_cg_profiled(const plan_ctx *c, const kv_plan *p);
int plan_cg_subtracted(const plan_ctx *c, const kv_plan *p);
void plan_budget(const plan_ctx *c, kv_plan *p);

/* vLLM's checks before memory (kv_plan_checks.c): the quantization method
 * against the card's compute capability (at config time), weight shapes
 * against tp (at load time). Each returns 1 after plan_fail with vLLM's
 * message (KV_PLAN_ERR_QUANT_CAPABILITY / KV_PLAN_ERR_LOAD_CHECK), else 0.
 * Release accounting only. */
int plan_check_config(const plan_ctx *c, kv_plan *p);
int plan_check_load(const plan_ctx *c, kv_plan *p);
/* A method's minimum compute capability (x10) in release `version`, by
 * vLLM's method name ("fp8", "awq", "modelopt", "fbgemm_fp8", ...;
 * get_min_capability of its quantization config); 0: no minimum known. */
int plan_min_capability(const char *method, const char *version);

/* double -> int64 without overflow (hostile configs and flags). */
int64_t plan_clamp_i64(double v);

#endif
