/* kv_gpu: the GPU catalogue (assets/gpus.json, read with cJSON) and the
 * short aliases users type (rtx-4090, h100-80gb, ...).
 *
 * A card's size is what CUDA reports (cudaMemGetInfo total), the figure
 * vLLM multiplies by gpu_memory_utilization, not the marketing number
 * (assets/gpus.SOURCES.md). */
#ifndef KV_GPU_H
#define KV_GPU_H

#include <stddef.h>
#include <stdint.h>

enum {
    KV_GPU_OK = 0,
    KV_GPU_ENOTFOUND = -1,  /* no such GPU (message lists near matches) / no catalogue file */
    KV_GPU_EPARSE = -2,     /* gpus.json is not valid JSON or an entry lacks id / size */
};

typedef struct kv_gpu {
    char id[48];                 /* catalogue id, e.g. "h100-80gb-sxm"; "custom" for a typed-in card */
    char name[128];              /* long name (the catalogue's description) */
    char device_name[64];        /* the name torch.cuda.get_device_name() returns, which vLLM logs
                                    ("NVIDIA H100 80GB HBM3", "Tesla T4"); gpus.json "device_name",
                                    else the long name */
    double reported_total_bytes; /* what CUDA reports as total memory (bytes) */
    double reported_total_gib;   /* the same in GiB as the catalogue rounds it */
    double hbm_bandwidth_gbps;   /* 0 if unknown */
    double bf16_dense_tflops;    /* 0 if unknown */
    double pcie_gbps;            /* host link, GB/s with both directions added (NVIDIA's
                                    x16 convention, assets/gpus.json); 0 if unknown */
    double nvlink_gbps;          /* GPU-to-GPU link, GB/s both directions added; 0 if none/unknown */
    int32_t fp8;                 /* 1: fp8 tensor cores (Ada, Hopper, Blackwell, MI300) */
    int32_t compute_capability;  /* CUDA compute capability x 10 (75 = 7.5, 90 = 9.0); 0 unknown or not NVIDIA */
    int32_t is_custom;           /* 1: made by kv_gpu_custom, not from the catalogue */
    int32_t unified_memory;      /* 1: CPU and GPU share one memory (GB10; gpus.json "unified_memory"):
                                    vLLM's memory snapshots then count what the host side grows by */
    int32_t nvml_memory_info;    /* 0: NVML answers "Not Supported" for the card's memory (GB10;
                                    gpus.json "nvml_memory_info": false), 1 otherwise (the default) */
} kv_gpu;

typedef struct kv_gpu_catalog {
    kv_gpu *gpus;
    int count;
} kv_gpu_catalog;

/* Read <assets_dir>/gpus.json. Returns KV_GPU_OK or a negative code + err. */
int kv_gpu_catalog_load(const char *assets_dir, kv_gpu_catalog *out, char *err, size_t errlen);
/* Same from JSON text in memory (len bytes). */
int kv_gpu_catalog_parse(const char *json, size_t len, kv_gpu_catalog *out, char *err, size_t errlen);
void kv_gpu_catalog_free(kv_gpu_catalog *cat);

/* Find a card by id or alias, case-insensitively, ignoring '-', '_' and
 * spaces ("RTX 4090", "rtx-4090", "h100"). NULL if none, with err =
 * "unknown GPU 'x' (did you mean: a, b, c?)" listing near matches. */
const kv_gpu *kv_gpu_find(const kv_gpu_catalog *cat, const char *name, char *err, size_t errlen);

/* A custom card of total_gib GiB (--gpu-memory-gib alone). */
void kv_gpu_custom(double total_gib, kv_gpu *out);

/* The alias table: number of aliases, and alias i -> catalogue id. */
int kv_gpu_alias_count(void);
void kv_gpu_alias_at(int i, const char **alias, const char **id);

#endif
