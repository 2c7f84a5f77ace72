/* kv_device: the device layer (docs/DESIGN.md, "Device backends").
 *
 * A backend holds, per tensor-parallel rank, the memory vLLM would hold on
 * that GPU: placeholders for each non-KV plan term and the KV pool itself.
 * The pool layout mirrors vLLM (vllm/v1/kv_cache_interface.py,
 * vllm/v1/worker/gpu_model_runner.py): per layer one tensor of
 * num_blocks pages; a page is block_size x num_kv_heads x head_size values for
 * K and the same for V. Block id b means slot range [b*block_size,
 * (b+1)*block_size) in every layer ("one block table for all layers").
 *
 * Two backends implement it: the host backend (engine/kv_device_host.c)
 * keeps one fingerprint per slot and touches only pages it writes; the CUDA
 * backend (cuda/) cudaMallocs the real pool and writes real K/V values.
 * The device layer owns devices the way ggml's backend registry does: what a
 * card is (name, bus id, MIG slice, memory, measured context, peak
 * bandwidth), what a rank holds, placeholders and benchmarks are operations
 * of a kv_device, so no caller needs to know which backend it has. Cards are
 * measured once per process (kv_device_driver_card) because a CUDA context,
 * once created, lives until the process ends.
 *
 * Functions return 0 on success or a negative KV_DEV_E* code and fill err
 * (if non-NULL) with one line the caller can show. Not thread-safe: open and
 * use devices from one thread. */
#ifndef KV_DEVICE_H
#define KV_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" { /* the CUDA backend (C++) implements this interface */
#endif

/* Lets cuda/ call the inline helpers below from kernels; plain C sees nothing. */
#ifdef __CUDACC__
#define KV_HOST_DEVICE __host__ __device__
#else
#define KV_HOST_DEVICE
#endif

enum {
    KV_DEV_OK = 0,
    KV_DEV_EINVAL = -1,   /* bad argument (rank out of range, slot past the pool) */
    KV_DEV_ENOMEM = -2,   /* allocation failed: a real out-of-memory */
    KV_DEV_EDEVICE = -3,  /* driver or kernel error, or no device */
};

/* Cache dtypes, each stored as itself: bf16, IEEE fp16, fp8 e4m3 (the "fn"
 * variant: bias 7, no infinity, max 448) and e5m2 (bias 15, max 57344), fp32
 * and int8 (vLLM's int8_per_token_head). */
enum {
    KV_DTYPE_BF16 = 0,
    KV_DTYPE_FP16 = 1,
    KV_DTYPE_FP8_E4M3 = 2,
    KV_DTYPE_FP32 = 3,
    KV_DTYPE_FP8_E5M2 = 4,
    KV_DTYPE_INT8 = 5,
    KV_DTYPE_COUNT
};

/* What a rank's KV pool looks like. Sizes are per rank (this GPU's share). */
typedef struct kv_pool_layout {
    int32_t num_blocks;      /* includes the null block 0 */
    int32_t block_size;      /* tokens per block (vLLM default 16) */
    int32_t num_layers;      /* attention layers holding KV on this rank */
    int32_t num_kv_heads;    /* KV heads on this rank: max(1, kv_heads // tp); 1 for MLA */
    int32_t head_size;       /* values per head (MLA: kv_lora_rank + qk_rope_head_dim) */
    int32_t kv_factor;       /* 2 = separate K and V; 1 = MLA latent */
    int32_t cache_dtype;     /* KV_DTYPE_* */
    int32_t first_kv_head;   /* global index of the rank's first KV head: rank r of tp holds
                                heads [first, first + num_kv_heads); replicas share indices */
} kv_pool_layout;

/* Bytes per value of a KV_DTYPE_*: 2, 2, 1, 4, 1, 1. */
static inline KV_HOST_DEVICE int kv_dtype_bytes(int dtype)
{
    return dtype == KV_DTYPE_FP8_E4M3 || dtype == KV_DTYPE_FP8_E5M2 || dtype == KV_DTYPE_INT8 ? 1
           : dtype == KV_DTYPE_FP32                                                            ? 4
                                                                                               : 2;
}

/* vLLM's name of a dtype ("bfloat16", "float16", "fp8_e4m3", "float32",
 * "fp8_e5m2", "int8"), "?" when out of range. */
const char *kv_dtype_name(int dtype);

/* The stored dtype of a KV cache named as vLLM's --kv-cache-dtype or the
 * model dtype names it (vllm/config/cache.py CacheDType; "fp8", "fp8_e4m3",
 * "fp8_inc", "fp8_ds_mla" and "fp8_per_token_head" are e4m3 on CUDA,
 * "fp8_e5m2" is e5m2, "int8_per_token_head" int8; also the short forms
 * "bf16", "fp16", "half", "fp32"). An unknown name falls back on
 * value_bytes (1: e4m3, 4: fp32, else bf16); -1 when name is unknown and
 * value_bytes is not 1, 2 or 4. */
int kv_dtype_from_name(const char *name, int value_bytes);

/* Bytes of one rank's whole pool: num_blocks x layers x kv_factor x
 * block_size x heads x head_size x dtype bytes. */
static inline uint64_t kv_pool_layout_bytes(const kv_pool_layout *l)
{
    return (uint64_t)l->num_blocks * (uint64_t)l->num_layers * (uint64_t)l->kv_factor *
           (uint64_t)l->block_size * (uint64_t)l->num_kv_heads * (uint64_t)l->head_size *
           (uint64_t)kv_dtype_bytes(l->cache_dtype);
}

/* One token's K/V to write: its slot (block_id * block_size + offset), the
 * token id, its position in the sequence, and the key of the block's parent
 * (kv_block_key of the request's hash chain at that block). */
typedef struct kv_slot_write {
    int64_t slot;
    int32_t token_id;
    int32_t position;
    uint64_t parent;
} kv_slot_write;

/* splitmix64's finaliser: a bijection on 64 bits. */
static inline KV_HOST_DEVICE uint64_t kv_mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* What every (layer, head) row of one token derives from: the token id, its
 * position and its block's parent key, so the same token at the same
 * position after another prefix has other K/V (as in a real model), and a
 * block shared between requests whose prefixes differ reads back wrong. */
static inline KV_HOST_DEVICE uint64_t kv_token_key(int32_t token_id, int32_t position, uint64_t parent)
{
    uint64_t x = ((uint64_t)(uint32_t)token_id << 32) | (uint64_t)(uint32_t)position;
    return kv_mix64(kv_mix64(x ^ 0x9E3779B97F4A7C15ull) ^ parent);
}

/* The value of one (layer, global KV head) row of a token: both backends
 * derive what they store from it, so a block shared by two requests is
 * provably the same bytes and a read-back can be checked. kv_head is the
 * model's head index (first_kv_head + local head), so two tp ranks never
 * store the same bytes unless they hold the same (replicated) head. */
static inline KV_HOST_DEVICE uint64_t kv_row_fingerprint(uint64_t token_key, int32_t layer, int32_t kv_head)
{
    return kv_mix64(token_key ^ (((uint64_t)(uint32_t)layer << 32) | (uint64_t)(uint32_t)kv_head) ^
                    0xC2B2AE3D27D4EB4Full);
}

static inline KV_HOST_DEVICE uint64_t kv_fingerprint(int32_t token_id, int32_t position, int32_t layer,
                                                     int32_t kv_head, uint64_t parent)
{
    return kv_row_fingerprint(kv_token_key(token_id, position, parent), layer, kv_head);
}

/* What verify reads back: positions [first, first + num_tokens) of a
 * request, through its block table. block_keys[b] is the parent key block b
 * was written with (as kv_slot_write.parent); token_ids[i] is the token at
 * position first + i. */
typedef struct kv_verify_req {
    const int32_t *block_table;
    const uint64_t *block_keys;
    int32_t num_table_blocks;
    const int32_t *token_ids;
    int32_t first;
    int32_t num_tokens;
} kv_verify_req;

/* What a rank's card is. Measured once per card per process. */
typedef struct kv_device_info {
    char backend[16];          /* "host", "cuda" */
    char name[128];            /* "NVIDIA H200"; MIG: "NVIDIA H100 80GB HBM3 MIG 3g.40gb" */
    char pci_bus_id[32];       /* "0000:3b:00.0"; "" on host */
    char uuid[48];             /* "GPU-..." or "MIG-..."; "" on host */
    char mig[48];              /* MIG profile ("3g.40gb") when the card is a MIG slice, else "" */
    int card;                  /* the card's ordinal (CUDA device); host: the rank */
    int ranks_on_card;         /* ranks of this device placed on that card (>= 1) */
    int cc_major, cc_minor, sm_count;
    uint64_t total_bytes;      /* cudaMemGetInfo total (MIG: the slice); host: the simulated card, 0 = unlimited */
    uint64_t free_bytes;       /* free right after the context was created */
    int64_t context_bytes;     /* device memory the context took (NVML before/after); -1 unknown */
    char context_how[160];     /* how it was measured, or why not */
    double peak_gbps;          /* DRAM peak, 1e9 B/s, from memory clock x bus width (MIG: its share); 0 unknown */
    char peak_how[96];
    double pool_alloc_ms;      /* time the rank's last alloc_pool spent allocating; -1 none */
} kv_device_info;

/* Benchmarks a backend runs on one rank (kv_device_ops.bench). The bench
 * request is num_tokens tokens at positions 0.. through a shuffled block
 * table over blocks 1.. (block 0 is vLLM's null block), so reads and writes
 * go through real indirection. */
typedef enum kv_bench_kind {
    KV_BENCH_MEMSET = 0,   /* cudaMemset of the request's K/V bytes: the write roofline */
    KV_BENCH_MEMCPY,       /* cudaMemcpy of the same bytes, device to device: the copy roofline */
    KV_BENCH_READ,         /* a plain read of the same bytes (16-byte loads, folded): the read-only
                              roofline the verify kernel is measured against */
    KV_BENCH_WRITE,        /* the write_kv kernel over the request (then verified) */
    KV_BENCH_GATHER,       /* a paged read: K/V through the block table into a contiguous buffer, as
                              attention reads it; a sample of the buffer is checked */
    KV_BENCH_VERIFY,       /* the verify kernel over the request from verify_first on (past its
                              first block, so the position, not the place in the call, picks the
                              table entry) */
    KV_BENCH_COUNT
} kv_bench_kind;

typedef struct kv_bench_req {
    kv_bench_kind kind;
    int32_t num_tokens;    /* 1 .. (num_blocks - 1) x block_size of the rank's pool */
    int repeats;           /* timed runs after one untimed warm-up; 1..1000 */
} kv_bench_req;

typedef struct kv_bench_result {
    uint64_t bytes;        /* memory traffic of one run: bytes read + bytes written */
    int runs;
    double best_ms, median_ms;
    double best_gbps, median_gbps; /* bytes / time in 1e9 B/s, the unit datasheets use */
    int64_t mismatches;    /* write, verify: values read back wrong; gather: sampled rows wrong; -1 not
                              checked (memset, memcpy, read) */
} kv_bench_result;

/* The bench request both backends build: num_tokens tokens, a shuffled
 * table of ceil(num_tokens / block_size) blocks from 1.., a parent key per
 * block and the slot writes that place the tokens. Arrays are malloc'd. */
typedef struct kv_bench_request {
    int32_t num_tokens, num_blocks;
    int32_t verify_first;  /* where the verify bench starts: block_size + 1 when the request has more
                              than two blocks of tokens, else 0 */
    int32_t *table;
    uint64_t *keys;
    int32_t *tokens;
    kv_slot_write *writes;
} kv_bench_request;

/* Builds *out for a pool of layout l. EINVAL when num_tokens is outside
 * 1 .. (num_blocks - 1) x block_size, ENOMEM when host memory runs out. */
int kv_bench_request_make(const kv_pool_layout *l, int32_t num_tokens, kv_bench_request *out, char *err,
                          size_t errlen);
void kv_bench_request_free(kv_bench_request *r);

/* Fills out's times and rates from n run times ms[] (sorted in place):
 * best = fastest, median = middle (mean of the two middle ones for even n). */
void kv_bench_summarize(double *ms, int n, uint64_t bytes, kv_bench_result *out);

/* 1-based handle of one allocation (a placeholder or a pool); 0 = none. */
typedef uint32_t kv_dev_handle;

typedef struct kv_device kv_device;

typedef struct kv_device_ops {
    /* What rank's card is (see kv_device_info). */
    int (*info)(kv_device *d, int rank, kv_device_info *out, char *err, size_t errlen);
    /* Total and free memory of the rank's card in bytes, now (host: the
     * simulated card's figures as given at open). */
    int (*mem_info)(kv_device *d, int rank, uint64_t *free_bytes, uint64_t *total_bytes,
                    char *err, size_t errlen);
    /* Hold bytes for a named non-KV plan term ("weights", "activation",
     * "cudagraph", "cuda_context", "nccl") on a rank, so the process holds
     * what vLLM would ("cuda_context" is bookkeeping: a real context already
     * holds it). KV_DEV_ENOMEM when the card cannot give it. *h (may be NULL)
     * receives the allocation's handle. */
    int (*reserve)(kv_device *d, int rank, const char *term, uint64_t bytes, kv_dev_handle *h,
                   char *err, size_t errlen);
    /* Allocate a rank's KV pool with the given layout (replaces any earlier
     * pool, whose handle then goes stale). */
    int (*alloc_pool)(kv_device *d, int rank, const kv_pool_layout *layout, kv_dev_handle *h,
                      char *err, size_t errlen);
    /* Free one allocation; a stale or 0 handle is ignored. */
    void (*free)(kv_device *d, int rank, kv_dev_handle h);
    /* Bytes the backend holds for rank (placeholders + pool, what the card gives). */
    uint64_t (*held)(kv_device *d, int rank);
    /* Placeholders on (1) or off (0, --no-placeholders: reserve() is then
     * bookkeeping only, for a card shared with other users). For later reserves. */
    void (*set_placeholders)(kv_device *d, int on);
    /* Write K/V for n tokens into their slots, every layer and KV head of the rank. */
    int (*write_kv)(kv_device *d, int rank, const kv_slot_write *w, size_t n, char *err, size_t errlen);
    /* Read v's positions back through its block table and compare with what
     * they must hold; *mismatches = (token, layer, head, K or V) rows that
     * differ (0 = correct; a wrong token counts layers x heads x kv_factor). */
    int (*verify)(kv_device *d, int rank, const kv_verify_req *v, int64_t *mismatches, char *err, size_t errlen);
    /* Runs one benchmark on rank's pool (it overwrites blocks 1.. with the
     * bench request's K/V). */
    int (*bench)(kv_device *d, int rank, const kv_bench_req *req, kv_bench_result *out, char *err, size_t errlen);
    /* Free everything held on all ranks (pool and placeholders). Only the
     * device's owner calls it; an engine frees its own handles instead. */
    void (*release)(kv_device *d);
    /* Free the backend itself (releasing what it holds). */
    void (*destroy)(kv_device *d);
} kv_device_ops;

/* What a program is told just before a backend allocates and clears a
 * large KV pool on the caller's thread (tens of GiB take a fraction of a
 * second): one line, "allocating 118.2 GiB on the GPU...", to show while
 * the call runs. The device layer never prints; the program decides. */
typedef void (*kv_device_progress_fn)(void *ctx, const char *what);

/* A backend instance: ops, a name for the screen ("host", "cuda"), the number
 * of ranks it serves and backend-private state; progress (NULL: nothing is
 * said) and its ctx are the program's to set. */
struct kv_device {
    const kv_device_ops *ops;
    const char *name;
    int num_ranks;
    void *impl;
    kv_device_progress_fn progress;
    void *progress_ctx;
};

/* Pools smaller than this are allocated too fast to mention (1 GiB). */
#define KV_DEVICE_PROGRESS_MIN_BYTES ((uint64_t)1 << 30)

/* The line for a pool of bytes: "allocating 118.2 GiB on the GPU..."
 * (GiB with one decimal). Returns buf. */
const char *kv_device_alloc_line(char *buf, size_t len, uint64_t bytes);

/* A backend about to allocate bytes for a KV pool calls this: d's progress
 * hook gets kv_device_alloc_line's text when bytes >= KV_DEVICE_PROGRESS_MIN_BYTES. */
void kv_device_progress(kv_device *d, uint64_t bytes);

/* ---- drivers: what opens devices of one kind (cuda, a test's fake) ------ */

typedef struct kv_device_driver {
    const char *name;
    /* Cards the driver sees (>= 1), or a negative KV_DEV_* with err
     * ("no CUDA device: <reason>", or "no NVIDIA driver (libcuda.so.1 not
     * found)": kv_cuda_format_no_device in cuda/kv_cuda.h). */
    int (*count)(char *err, size_t errlen);
    /* Creates card's context and measures it into *out. Called at most once
     * per card per process by kv_device_driver_card. */
    int (*measure)(int card, kv_device_info *out, char *err, size_t errlen);
    /* An instance serving num_ranks ranks; rank r sits on card
     * rank_info[r].card, described by rank_info[r] (ranks_on_card set). */
    kv_device *(*open)(int num_ranks, const kv_device_info *rank_info, char *err, size_t errlen);
} kv_device_driver;

/* Cards of a driver, counted once per process. */
int kv_device_driver_count(const kv_device_driver *drv, char *err, size_t errlen);

/* What card c of a driver is, measured the first time it is asked for in
 * this process and copied from that measurement ever after (a second
 * context measurement would read ~0: the first context still lives). */
int kv_device_driver_card(const kv_device_driver *drv, int card, kv_device_info *out, char *err, size_t errlen);

/* Opens a driver's device for num_ranks (1..64) ranks: rank r on card
 * r % cards (each rank its own card when there are enough; otherwise ranks
 * share cards and hold their pools side by side). NULL with err when the
 * driver has no card or the open fails. */
kv_device *kv_device_driver_open(const kv_device_driver *drv, int num_ranks, char *err, size_t errlen);

/* Forgets a driver's cached count and cards (tests). */
void kv_device_driver_forget(const kv_device_driver *drv);

/* How kv_device_fit_scale fits a plan to the cards (flags). */
enum {
    KV_FIT_SHARED = 1,   /* ranks that share one card split it */
    KV_FIT_SMALLER = 2,  /* a card smaller than the plan's holds a scaled-down copy */
};

/* What share of a plan device d can hold: each of num_ranks ranks wants
 * plan_card_bytes (the plan's whole card, or the rank's terms plus pool).
 * With KV_FIT_SHARED the ranks on one card share its total; with
 * KV_FIT_SMALLER a card smaller than plan_card_bytes counts as its own size
 * (else as the plan's: its OOM is then the answer). Returns the largest
 * scale in (0, 1] for which every card holds its ranks' scaled wants: 1 when
 * the plan fits as it is. Every caller sizes ranks this way: serve
 * --allocate (both flags), simulate --device and the lesson app's engines
 * (KV_FIT_SHARED, through kv_engine_config.fit_device). */
double kv_device_fit_scale(kv_device *d, int num_ranks, double plan_card_bytes, int how);

struct kv_gpu;
struct kv_gpu_catalog;

/* The catalogue entry (engine/kv_gpu.h) a real card is: the id's first word
 * ("h100", "rtx6000", "gh200") must appear in the device name with spaces,
 * dashes and "NVIDIA"/"GeForce"/"Tesla" ignored; the longest such word wins,
 * then the most other id words found ("pcie", "nvl", "ada"), then the
 * reported total closest to the card's. NULL when nothing matches, for the
 * host backend, and for a MIG slice (it has a share of the card's memory
 * and bandwidth, which no entry describes). */
const struct kv_gpu *kv_device_match_catalog(const struct kv_gpu_catalog *cat, const kv_device_info *info);

/* ---- the backends compiled into this program (engine/kv_device_reg.c) -- */

/* The GPU driver of this build (CUDA), or NULL when none was compiled in. */
const kv_device_driver *kv_device_gpu_driver(void);

#ifdef __cplusplus
}
#endif

#endif
