/* kv_timemodel: how long one engine step takes on the virtual clock, from a
 * roofline estimate (Williams, Waterman, Patterson, "Roofline: an insightful
 * visual performance model", CACM 2009): a step is bound by whichever is
 * slower, the arithmetic or the bytes it moves from HBM.
 *
 *   FLOPs   = 2 x active_params x tokens                  (Kaplan et al.,
 *             + 2 x layers x hidden x attention_pairs       "Scaling Laws for
 *                                                           Neural Language
 *             (attention_pairs = sum over the step's tokens of the context
 *             each one attends to; Kaplan's 2 n_layer n_ctx d_attn term)  Models", 2020, Table 1)
 *   bytes   = weight_bytes (every step reads the rank's weights once)
 *             + kv_bytes_per_token x (context tokens read + tokens written)
 *   compute = FLOPs / tp / peak_flops ; memory = bytes / hbm_bytes_per_s
 *   comm    = tp > 1: 2 all-reduces per layer (Megatron-LM, Shoeybi et al.
 *             2019) of tokens x hidden x 2 bytes, a ring moving 2 (tp-1)/tp
 *             of it over the link: 2 x layers x 2 (tp-1)/tp x tokens x
 *             hidden x 2 / link_bytes_per_s
 *   step    = max(compute, memory) + comm
 *
 * So a big prefill chunk is compute-bound (thousands of tokens share one
 * weight read) and a decode batch is memory-bound (one token per request:
 * the weights and every request's KV are read for a few FLOPs). No constants
 * are fitted: the figures come from the model shape and the GPU catalogue. */
#ifndef KV_TIMEMODEL_H
#define KV_TIMEMODEL_H

#include <stdint.h>

typedef struct kv_time_params {
    double active_params;       /* parameters used per token (whole model) */
    double weight_bytes;        /* bytes of weights on one rank */
    double kv_bytes_per_token;  /* KV bytes per token on one rank, all layers */
    double peak_flops;          /* dense FLOP/s of one GPU */
    double hbm_bytes_per_s;     /* HBM bandwidth of one GPU */
    double link_bytes_per_s;    /* interconnect for all-reduce; 0 = ignore */
    int32_t tp;                 /* tensor_parallel_size */
    int32_t num_layers;
    int32_t hidden_size;
} kv_time_params;

/* The work of one step. */
typedef struct kv_step_work {
    double tokens;              /* tokens run through the model */
    double attention_pairs;     /* sum over those tokens of their context length */
    double kv_tokens_read;      /* KV tokens read (each request's context, once) */
} kv_step_work;

typedef struct kv_step_time {
    double flops, bytes;        /* per rank */
    double compute_s, memory_s, comm_s, total_s;
    int memory_bound;           /* 1 when memory_s >= compute_s */
} kv_step_time;

/* Estimate a step's duration in seconds (0 for no tokens); *out (may be
 * NULL) gets the breakdown. Non-positive peak_flops or bandwidth count as
 * infinitely fast for that term. */
double kv_timemodel_step(const kv_time_params *p, const kv_step_work *w, kv_step_time *out);

/* Work of running n tokens at positions [start, start + n) of a sequence
 * (adds to w): n tokens, their attention pairs, and start + n KV tokens read.
 * Inline: the engine calls it for every scheduled request of every step. */
static inline void kv_timemodel_add_chunk(kv_step_work *w, int64_t start, int64_t n)
{
    if (n <= 0)
        return;
    w->tokens += (double)n;
    /* token at position p attends to p + 1 positions */
    w->attention_pairs += (double)n * (double)start + (double)n * (double)(n + 1) / 2.0;
    w->kv_tokens_read += (double)(start + n);
}

#endif
