/* explain_plan: from a read vLLM log (engine/kv_logread.h) to kvlab's plan
 * for the same release, flags and card, and the differences between the
 * two, term by term. Shared by `kvlab explain` (cmd_explain.c) and the app's
 * --log view, so both say the same thing about one log. */
#ifndef KVLAB_EXPLAIN_PLAN_H
#define KVLAB_EXPLAIN_PLAN_H

#include <stddef.h>

#include "kv_args.h"
#include "kv_gpu.h"
#include "kv_logread.h"
#include "kv_model.h"
#include "kv_plan.h"

#define EXPLAIN_MAX_DIFFS 10

/* One term side by side. */
typedef struct explain_diff {
    const char *term;     /* "weights", "activation + non-torch", "CUDA graphs", "KV cache", ... */
    const char *key;      /* JSON key: "weights_gib", ... */
    int unit_tokens;      /* 1: a token count (logged/predicted are tokens), 0: GiB */
    double logged;
    double predicted;
    int differs;          /* 1: outside the tolerance (0.05 GiB and 1%, or 1% of tokens) */
    char cause[200];      /* what kvlab thinks explains it ("" when it agrees) */
    const char *knob;     /* the flag(s) behind the term */
} explain_diff;

typedef struct explain_result {
    kv_logread lr;
    kv_args args;
    char unread[1024];    /* "key=value (why)" lines the args had that kvlab did not take */
    char flags[1024];     /* the flags kvlab plans with, as a command line */
    char missing[640];    /* what stops a plan ("" when planned): one line */
    char notes[1024];     /* how the card and model were picked, one per line */
    int planned;          /* 1: plan holds kvlab's plan */
    kv_model model;
    kv_gpu gpu;
    kv_plan plan;
    int replanned;        /* 1: calibrated holds the plan with the log's own terms typed in */
    kv_plan calibrated;   /* (its fixes are the ranked fixes for a failure kvlab's own plan does not predict) */
    int num_diffs;
    explain_diff diffs[EXPLAIN_MAX_DIFFS];
} explain_result;

/* Read text (len bytes) as a vLLM log and plan it. extra_argc/extra_argv:
 * flags the user adds or overrides (--model NAME, --gpu NAME, vLLM flags,
 * --vllm-version), applied after the log's. assets: kvlab's assets folder.
 * Returns 0 (res->planned says whether a plan was made; res->missing says
 * why not), or -1 when the text is not a vLLM log or the extra flags are bad,
 * with one line in err. */
int explain_run(const char *text, size_t len, int extra_argc, char **extra_argv, const char *assets,
                explain_result *res, char *err, size_t errlen);

/* Which figures of explain_logged_plan's plan the log states. */
enum {
    EXPLAIN_LP_WEIGHTS = 1u << 0,
    EXPLAIN_LP_ACTIVATION = 1u << 1, /* the peak, or (V1) derived from the budget */
    EXPLAIN_LP_NON_TORCH = 1u << 2,  /* in cuda_context_bytes; nccl_bytes and non_torch_bytes 0 */
    EXPLAIN_LP_CUDAGRAPH = 1u << 3,
    EXPLAIN_LP_KV = 1u << 4,         /* available_kv_bytes */
    EXPLAIN_LP_TOKENS = 1u << 5,     /* kv_cache_tokens and kv_cache_tokens_logged */
    EXPLAIN_LP_CONCURRENCY = 1u << 6,
};

/* The log's own plan, to draw beside kvlab's (the app's memory view under
 * --log): res->plan with each figure the log states put in its place, per
 * GPU: weights, activation peak (or, from a V1 log, the activation and
 * non-torch memory the budget leaves, less kvlab's non-torch), non-torch,
 * CUDA graphs, available KV memory, KV tokens, max concurrency, the card's
 * total; the budget follows the total; a failed log's kind of failure.
 * Figures the log does not state stay kvlab's. Returns the EXPLAIN_LP_*
 * bits of the figures the log states; 0 (out untouched) when there is no
 * plan or the log states no memory figure. */
unsigned explain_logged_plan(const explain_result *res, kv_plan *out);

#endif
