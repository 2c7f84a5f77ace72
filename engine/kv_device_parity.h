/* kv_device_parity: runs one built-in trace on the host backend and on
 * another backend (the CUDA one on a GPU box) and compares them. The trace
 * shares a system prompt between requests and overfills a small pool, so it
 * exercises prefix-cache hits, eviction and preemption; the engine reads
 * back what changed after every step (verify on) and every running request
 * in full every 8 steps. Plain C: the backend comes in as a kv_device. */
#ifndef KV_DEVICE_PARITY_H
#define KV_DEVICE_PARITY_H

#include <stddef.h>
#include <stdint.h>

#include "kv_device.h"

typedef struct kv_device_parity_report {
    int32_t tensor_parallel_size;
    int64_t steps;                /* engine steps on the backend under test */
    int64_t requests_finished;
    int64_t preemptions;          /* vllm:num_preemptions_total */
    int64_t prefix_cache_hits;    /* tokens (vllm:prefix_cache_hits_total) */
    int64_t events;               /* events compared */
    int64_t verified_steps;       /* steps after which every running request was read back */
    char verify_error[256];       /* "" or the first failed read-back (engine's message) */
    int identical;                /* 1: block tables after every step, events and metrics equal */
    char difference[256];         /* the first difference when not identical */
    double seconds_host, seconds_device; /* wall time of each run */
} kv_device_parity_report;

/* Runs the trace with tensor_parallel_size tp (1..8) on the host backend and
 * on dev (borrowed; it must serve >= tp ranks; the engine frees what it
 * allocated there and leaves the device open) and fills *out. Returns 0
 * when both runs completed
 * (out says whether they agree and verified), or -1 with err when an engine
 * could not be created or a step failed for another reason than a
 * read-back mismatch. */
int kv_device_parity_run(kv_device *dev, int tp, kv_device_parity_report *out, char *err, size_t errlen);

#endif
