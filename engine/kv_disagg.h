/* kv_disagg: a prefill/decode split (disaggregated serving) of one plan:
 * P prefill instances and D decode instances, each a kv_engine with the same
 * config and its own block pool and virtual clock, and a KV transfer per
 * request between them, as vLLM runs it with NixlConnector and a proxy
 * (vllm 0.33.0: distributed/kv_transfer/kv_connector/v1/nixl/
 * pull_scheduler.py, v1/core/sched/scheduler.py _update_waiting_for_remote_kv;
 * and the proxy vLLM documents for disaggregated serving):
 *  - a request goes to prefill instance i mod P with max_tokens 1
 *    (do_remote_decode): the prefill instance computes the prompt, samples one
 *    token and finishes (that token is thrown away, as the proxy does);
 *  - its prompt KV then crosses the link to decode instance i mod D: every
 *    block the prefill instance holds for the prompt, ceil(prompt /
 *    block_size) blocks; each rank sends its own share over its own link, so
 *    a transfer takes blocks x block_size x KV bytes per token per rank /
 *    link_bytes_per_s; transfers into one decode instance go one after the
 *    other (its link is busy), from when the prefill finished;
 *  - the decode instance admits it as a remote prefill
 *    (kv_request_spec.remote_prefill: the prompt beyond its own GPU prefix
 *    hit is loaded, the last prompt token recomputed to sample from) and
 *    generates every output token. Time to first token, inter-token latency
 *    and request latency are the decode instance's, counted from the
 *    request's arrival at the proxy; the queue time is the prefill
 *    instance's.
 * Not modelled: the prefill instance keeps a finished request's blocks until
 * the decode side has read them (delay_free_blocks); here they are freed
 * (kept in its prefix cache) when it finishes. NIXL reads only the blocks the
 * decode instance lacks; here every prompt block crosses the link. The
 * engines run no K/V writes (no read-back). The split never prints and never
 * exits; one thread drives it. */
#ifndef KV_DISAGG_H
#define KV_DISAGG_H

#include <stddef.h>
#include <stdint.h>

#include "kv_engine.h"

#define KV_DISAGG_MAX_INSTANCES 16

/* The link a transfer crosses (kvlab simulate --kv-transfer-link). */
typedef enum kv_disagg_link {
    KV_LINK_RDMA = 0, /* NIXL over InfiniBand / RoCE: one 400 Gb/s NIC per GPU, 50 GB/s each way */
    KV_LINK_NVLINK,   /* prefill and decode on one NVLink domain: the card's NVLink, one way */
    KV_LINK_PCIE,     /* through host memory: the card's PCIe link, one way */
} kv_disagg_link;

/* "rdma", "nvlink", "pcie" for a link, "?" out of range. */
const char *kv_disagg_link_name(kv_disagg_link link);

/* Parse a link name into *out. 0, or -1 with one line in err. */
int kv_disagg_link_parse(const char *s, kv_disagg_link *out, char *err, size_t errlen);

/* Bytes per second one direction of link carries for one GPU whose
 * catalogue figures (GB/s, both directions added; 0 = unknown) are
 * pcie_gbps and nvlink_gbps. An unknown figure falls back to PCIe 4.0 x16
 * (64 GB/s both ways) and writes a line into note (may be NULL). */
double kv_disagg_link_bytes_per_s(kv_disagg_link link, double pcie_gbps, double nvlink_gbps, char *note,
                                  size_t notelen);

/* Parse "P:D" (each 1..KV_DISAGG_MAX_INSTANCES) into *p, *d. 0, or -1 with
 * one line in err. */
int kv_disagg_parse_split(const char *s, int32_t *p, int32_t *d, char *err, size_t errlen);

typedef struct kv_disagg_config {
    int32_t num_prefill;         /* prefill instances, 1..KV_DISAGG_MAX_INSTANCES */
    int32_t num_decode;          /* decode instances, 1..KV_DISAGG_MAX_INSTANCES */
    double link_bytes_per_s;     /* one direction, per GPU (> 0) */
} kv_disagg_config;

typedef struct kv_disagg kv_disagg;

/* P + D engines from cfg (each its own pool; cfg->device must be NULL:
 * every engine gets its own host backend; K/V writes and read-back are
 * turned off). NULL with one line in err: EINVAL-like for a bad split or
 * link, the engine's own error otherwise. */
kv_disagg *kv_disagg_create(const kv_engine_config *cfg, const kv_disagg_config *dc, char *err, size_t errlen);
void kv_disagg_destroy(kv_disagg *d);

/* Queue a request that reaches the proxy at spec->arrival_s (>= 0, not
 * before the previous one's). The spec is copied; its strings and id array
 * are borrowed and must outlive the split. 0, or KV_ENGINE_EINVAL /
 * KV_ENGINE_ENOMEM with one line in err. */
int kv_disagg_add(kv_disagg *d, const kv_request_spec *spec, char *err, size_t errlen);

/* Do the earliest thing due: hand a request that has arrived to its prefill
 * instance, a transferred one to its decode instance, or run one step of the
 * instance whose clock is earliest. Returns 1 when something was done, 0
 * when nothing is left (every request finished or was rejected), or a
 * negative KV_ENGINE_E* code with one line in err (an engine's step error). */
int kv_disagg_step(kv_disagg *d, char *err, size_t errlen);

/* Engine i (0-based) of the prefill (decode = 0) or decode (decode = 1)
 * instances, for views and tests; NULL when out of range. */
kv_engine *kv_disagg_engine(const kv_disagg *d, int decode, int32_t i);

typedef struct kv_disagg_stats {
    int32_t num_prefill, num_decode;
    double link_bytes_per_s;
    int64_t requests_added;
    int64_t requests_rejected;   /* refused by a prefill or a decode instance */
    int64_t requests_prefilled;  /* finished on a prefill instance */
    int64_t kv_transfers;        /* transfers done (reached a decode instance) */
    int64_t kv_transfers_in_flight;
    int64_t kv_transfer_bytes;   /* bytes moved, every rank's share added */
    double kv_transfer_s;        /* link time, summed over transfers */
    double kv_transfer_wait_s;   /* time transfers waited for a busy link, summed */
    int64_t remote_prefill_tokens; /* prompt tokens decode instances loaded instead of computing */
    int64_t requests_finished;   /* finished on a decode instance */
    int64_t prompt_tokens;       /* computed on prefill instances */
    int64_t generation_tokens;   /* generated on decode instances */
    int64_t preemptions;         /* on every instance */
    double duration_s;           /* the latest clock of any instance */
    double prefill_peak_kv_usage, decode_peak_kv_usage; /* 0..1, the fullest pool of each kind */
    double prefill_mean_kv_usage, decode_mean_kv_usage; /* 0..1, time-weighted, averaged over instances */
    kv_latency_stats ttft, itl, e2e; /* decode instances, from the arrival at the proxy */
    kv_latency_stats queue;      /* prefill instances' queue time */
} kv_disagg_stats;

/* Figures so far. */
void kv_disagg_get_stats(const kv_disagg *d, kv_disagg_stats *out);

/* A KV transfer on its way to a decode instance. */
typedef struct kv_disagg_flight {
    int64_t request;   /* 0-based, in the order kv_disagg_add took them */
    double start_s;    /* its first byte leaves (the link was free): split clock, seconds */
    double ready_s;    /* its last byte has crossed */
    int64_t blocks;    /* prompt blocks it carries */
} kv_disagg_flight;

/* The transfers on the link now: up to max of them into out[0..max), by
 * start time (the first max of the internal list when there are more; for
 * views). Returns how many there are in all. */
int64_t kv_disagg_get_flights(const kv_disagg *d, kv_disagg_flight *out, int64_t max);

/* The transfers as NixlConnector's Prometheus histograms
 * (vllm:nixl_xfer_time_seconds, vllm:nixl_bytes_transferred; 0.33.0
 * kv_connector/v1/nixl/stats.py), label model_name, into buf[len]. Returns
 * the length needed, like snprintf. */
size_t kv_disagg_prometheus(const kv_disagg *d, const char *model_name, char *buf, size_t len);

#endif
