/* kv_cuda: the CUDA device backend (see kv_cuda.h for the contract).
 *
 * Pool layout per rank, one cudaMalloc, as kv_cuda_layout.h describes (vLLM's
 * FlashAttention shape per layer); the kernels' per-thread work lives there
 * too, so the unit tests run the same code on a host buffer. */
#include <cuda_runtime.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_cuda.h"
#include "kv_cuda_layout.h"
#include "kv_cuda_values.h"
#include "kv_nvml.h"
#include "kv_util.h"

#define KV_CUDA_MAX_RANKS 64
#define KV_CUDA_MAX_TERMS 8
#define KV_CUDA_MAGIC 0x6B766375 /* "kvcu" */

namespace {

struct term_alloc {
    char name[32];
    void *ptr;          /* NULL when placeholders are off (bookkeeping only) */
    uint64_t bytes;
};

struct rank_state {
    int gpu;
    kv_cuda_gpu_info info;
    term_alloc terms[KV_CUDA_MAX_TERMS];
    int nterms;
    char *pool;
    uint64_t pool_bytes;
    kv_pool_layout layout;
    double pool_alloc_ms;
    void *scratch;               /* device copies of writes / tables / token ids */
    size_t scratch_bytes;
    unsigned long long *count;   /* device mismatch counter */
};

struct cuda_impl {
    int magic;
    int placeholders;
    int shared;
    int num_ranks;
    rank_state ranks[KV_CUDA_MAX_RANKS];
};

cuda_impl *impl_of(const kv_device *d)
{
    return d ? (cuda_impl *)d->impl : NULL;
}


int cuda_fail(cudaError_t e, const char *what, char *err, size_t errlen)
{
    return kv_errf(err, errlen, KV_DEV_EDEVICE, "CUDA error in %s: %s (%s)", what,
                cudaGetErrorString(e), cudaGetErrorName(e));
}

double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

uint64_t held_bytes(const rank_state *r)
{
    uint64_t b = r->pool ? r->pool_bytes : 0;
    for (int i = 0; i < r->nterms; i++)
        if (r->terms[i].ptr) b += r->terms[i].bytes;
    return b;
}

/* Bytes kvlab holds on one device, over every rank placed there. */
uint64_t held_on_gpu(const cuda_impl *im, int gpu)
{
    uint64_t b = 0;
    for (int i = 0; i < im->num_ranks; i++)
        if (im->ranks[i].gpu == gpu) b += held_bytes(&im->ranks[i]);
    return b;
}

/* A failed cudaMalloc: clear the (non-sticky) error, then report it as
 * PyTorch would, or as a plain device error if it was not memory. */
int alloc_fail(cudaError_t e, const cuda_impl *im, rank_state *r, int rank, const char *what, uint64_t bytes,
               char *err, size_t errlen)
{
    (void)cudaGetLastError();
    if (e != cudaErrorMemoryAllocation)
        return cuda_fail(e, "cudaMalloc", err, errlen);
    size_t fr = 0, tot = 0;
    cudaMemGetInfo(&fr, &tot);
    kv_cuda_oom o;
    o.what = what;
    o.rank = rank;
    o.gpu = r->gpu;
    o.tried = bytes;
    o.total = tot;
    o.free = fr;
    o.held = held_on_gpu(im, r->gpu);
    o.context = r->info.context_bytes;
    char line[512];
    kv_cuda_format_oom(line, sizeof line, &o);
    return kv_errf(err, errlen, KV_DEV_ENOMEM, "%s", line);
}

int set_rank(cuda_impl *im, int rank, char *err, size_t errlen)
{
    if (!im || rank < 0 || rank >= im->num_ranks)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "rank %d out of range", rank);
    cudaError_t e = cudaSetDevice(im->ranks[rank].gpu);
    return e == cudaSuccess ? 0 : cuda_fail(e, "cudaSetDevice", err, errlen);
}

/* Grows a rank's scratch buffer to at least bytes. */
int need_scratch(const cuda_impl *im, rank_state *r, int rank, size_t bytes, char *err, size_t errlen)
{
    if (r->scratch_bytes >= bytes) return 0;
    size_t want = r->scratch_bytes ? r->scratch_bytes : 65536;
    while (want < bytes) want *= 2;
    if (r->scratch) cudaFree(r->scratch);
    r->scratch = NULL;
    r->scratch_bytes = 0;
    cudaError_t e = cudaMalloc(&r->scratch, want);
    if (e != cudaSuccess) {
        r->scratch = NULL;
        return alloc_fail(e, im, r, rank, "kvlab scratch buffer", want, err, errlen);
    }
    r->scratch_bytes = want;
    return 0;
}

kv_cuda_geom geom_of(const rank_state *r)
{
    kv_cuda_geom g;
    kv_cuda_geom_init(&g, r->pool, &r->layout);
    return g;
}

/* ---- kernels ---------------------------------------------------------- */

/* Writes K/V of n tokens: a CUDA block per token (grid-stride), threads over
 * the cells of a layer (K/V x head x 16-byte unit), each thread walking the
 * layers so a warp's stores for one layer are contiguous. DT and UNIT are
 * compile-time so the shared helpers fold to straight-line code. */
template <int DT, int UNIT>
__global__ void write_kv_kernel(kv_cuda_geom g, const kv_slot_write *w, long long n)
{
    const int cells = kv_cuda_cells(&g);
    for (long long t = blockIdx.x; t < n; t += gridDim.x) {
        const kv_slot_write s = w[t];
        for (int u = threadIdx.x; u < cells; u += blockDim.x)
            kv_cuda_write_cell(&g, DT, UNIT, &s, u);
    }
}

/* Reads a request's tokens through its block table: a CUDA block per token,
 * a warp per (layer, head) covering K and V; each of K and V of a (token,
 * layer, head) with any differing value counts once, as the host backend
 * counts (a wrong token = layers x heads x kv_factor). */
template <int DT, int UNIT>
__global__ void verify_kernel(kv_cuda_geom g, const int32_t *table, const int32_t *tokens, int n,
                              unsigned long long *count)
{
    __shared__ unsigned int s_bad;
    if (threadIdx.x == 0) s_bad = 0;
    __syncthreads();
    const int units = g.kvf * (g.row_bytes / UNIT);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const int rows = g.num_layers * g.heads;
    for (int t = blockIdx.x; t < n; t += gridDim.x) {
        const long long slot = (long long)table[t / g.block_size] * g.block_size + t % g.block_size;
        const int32_t tok = tokens[t];
        for (int r = warp; r < rows; r += warps) {
            const int l = r / g.heads, h = r - l * g.heads;
            bool bad_k = false, bad_v = false;
            for (int j = lane; j < units; j += 32) {
                int kv = 0;
                const bool d = kv_cuda_check_unit(&g, DT, UNIT, slot, tok, t, l, h, j, &kv) != 0;
                bad_k |= d && kv == 0;
                bad_v |= d && kv == 1;
            }
            const unsigned nbad = (__any_sync(0xffffffffu, bad_k) ? 1u : 0u) + (__any_sync(0xffffffffu, bad_v) ? 1u : 0u);
            if (nbad && lane == 0) atomicAdd(&s_bad, nbad);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0 && s_bad) atomicAdd(count, (unsigned long long)s_bad);
}

int grid_for(long long n)
{
    return (int)(n < 1 ? 1 : n > 1048576 ? 1048576 : n);
}

template <int DT>
void launch_write_dt(const kv_cuda_geom &g, const kv_slot_write *w, long long n)
{
    constexpr int B = DT == KV_DTYPE_FP8_E4M3 ? 1 : DT == KV_DTYPE_FP32 ? 4 : 2;
    if (g.unit_bytes == 16) write_kv_kernel<DT, 16><<<grid_for(n), 256>>>(g, w, n);
    else write_kv_kernel<DT, B><<<grid_for(n), 256>>>(g, w, n);
}

void launch_write(const kv_cuda_geom &g, const kv_slot_write *w, long long n)
{
    switch (g.dtype) {
    case KV_DTYPE_BF16: launch_write_dt<KV_DTYPE_BF16>(g, w, n); break;
    case KV_DTYPE_FP16: launch_write_dt<KV_DTYPE_FP16>(g, w, n); break;
    case KV_DTYPE_FP8_E4M3: launch_write_dt<KV_DTYPE_FP8_E4M3>(g, w, n); break;
    default: launch_write_dt<KV_DTYPE_FP32>(g, w, n); break;
    }
}

template <int DT>
void launch_verify_dt(const kv_cuda_geom &g, const int32_t *table, const int32_t *tokens, int n,
                      unsigned long long *count)
{
    constexpr int B = DT == KV_DTYPE_FP8_E4M3 ? 1 : DT == KV_DTYPE_FP32 ? 4 : 2;
    if (g.unit_bytes == 16) verify_kernel<DT, 16><<<grid_for(n), 256>>>(g, table, tokens, n, count);
    else verify_kernel<DT, B><<<grid_for(n), 256>>>(g, table, tokens, n, count);
}

void launch_verify(const kv_cuda_geom &g, const int32_t *table, const int32_t *tokens, int n,
                   unsigned long long *count)
{
    switch (g.dtype) {
    case KV_DTYPE_BF16: launch_verify_dt<KV_DTYPE_BF16>(g, table, tokens, n, count); break;
    case KV_DTYPE_FP16: launch_verify_dt<KV_DTYPE_FP16>(g, table, tokens, n, count); break;
    case KV_DTYPE_FP8_E4M3: launch_verify_dt<KV_DTYPE_FP8_E4M3>(g, table, tokens, n, count); break;
    default: launch_verify_dt<KV_DTYPE_FP32>(g, table, tokens, n, count); break;
    }
}

/* ---- kv_device_ops ------------------------------------------------------ */

int op_mem_info(kv_device *d, int rank, uint64_t *free_bytes, uint64_t *total_bytes, char *err,
                size_t errlen)
{
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    size_t fr = 0, tot = 0;
    cudaError_t e = cudaMemGetInfo(&fr, &tot);
    if (e != cudaSuccess) return cuda_fail(e, "cudaMemGetInfo", err, errlen);
    if (free_bytes) *free_bytes = fr;
    if (total_bytes) *total_bytes = tot;
    return 0;
}

int op_reserve(kv_device *d, int rank, const char *term, uint64_t bytes, char *err, size_t errlen)
{
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    if (!term || !*term) return kv_errf(err, errlen, KV_DEV_EINVAL, "reserve: no term name");
    rank_state *r = &im->ranks[rank];
    term_alloc *t = NULL;
    for (int i = 0; i < r->nterms; i++)
        if (!strcmp(r->terms[i].name, term)) t = &r->terms[i];
    if (!t) {
        if (r->nterms == KV_CUDA_MAX_TERMS)
            return kv_errf(err, errlen, KV_DEV_EINVAL, "reserve: more than %d terms", KV_CUDA_MAX_TERMS);
        t = &r->terms[r->nterms++];
        memset(t, 0, sizeof *t);
        snprintf(t->name, sizeof t->name, "%s", term);
    }
    if (t->ptr) cudaFree(t->ptr); /* a new figure replaces the old one */
    t->ptr = NULL;
    t->bytes = 0;
    if (bytes == 0) return 0;
    /* The real context already holds its memory: never add a second one. */
    if (!im->placeholders || !strcmp(term, "cuda_context")) {
        t->bytes = bytes;
        return 0;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        char what[64];
        snprintf(what, sizeof what, "%s placeholder", term);
        return alloc_fail(e, im, r, rank, what, bytes, err, errlen);
    }
    t->ptr = p;
    t->bytes = bytes;
    return 0;
}

int check_layout(const kv_pool_layout *l, char *err, size_t errlen)
{
    if (l->num_blocks < 1 || l->block_size < 1 || l->num_layers < 1 || l->num_kv_heads < 1 ||
        l->head_size < 1 || (l->kv_factor != 1 && l->kv_factor != 2) || l->cache_dtype < 0 ||
        l->cache_dtype > KV_DTYPE_FP32)
        return kv_errf(err, errlen, KV_DEV_EINVAL,
                    "bad pool layout (blocks %d, block_size %d, layers %d, heads %d, head_size %d, "
                    "kv_factor %d, dtype %d)",
                    l->num_blocks, l->block_size, l->num_layers, l->num_kv_heads, l->head_size,
                    l->kv_factor, l->cache_dtype);
    return 0;
}

int op_alloc_pool(kv_device *d, int rank, const kv_pool_layout *layout, char *err, size_t errlen)
{
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    if (!layout || (rc = check_layout(layout, err, errlen))) return rc ? rc : KV_DEV_EINVAL;
    rank_state *r = &im->ranks[rank];
    if (r->pool) cudaFree(r->pool);
    r->pool = NULL;
    r->pool_bytes = 0;
    const uint64_t bytes = kv_pool_layout_bytes(layout);
    void *p = NULL;
    const double t0 = now_ms();
    cudaError_t e = cudaMalloc(&p, bytes);
    const double t1 = now_ms();
    if (e != cudaSuccess) return alloc_fail(e, im, r, rank, "KV cache pool", bytes, err, errlen);
    r->pool_alloc_ms = t1 - t0;
    r->pool = (char *)p;
    r->pool_bytes = bytes;
    r->layout = *layout;
    /* Zeroed so block 0 (the null block) and unwritten slots read the same every run. */
    e = cudaMemset(p, 0, bytes);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) return cuda_fail(e, "clearing the KV pool", err, errlen);
    return 0;
}

int need_pool(rank_state *r, int rank, char *err, size_t errlen)
{
    return r->pool ? 0 : kv_errf(err, errlen, KV_DEV_EINVAL, "rank %d has no KV pool yet", rank);
}

int op_write_kv(kv_device *d, int rank, const kv_slot_write *w, size_t n, char *err, size_t errlen)
{
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    rank_state *r = &im->ranks[rank];
    if ((rc = need_pool(r, rank, err, errlen))) return rc;
    if (n == 0) return 0;
    const long long slots = (long long)r->layout.num_blocks * r->layout.block_size;
    for (size_t i = 0; i < n; i++)
        if (w[i].slot < 0 || w[i].slot >= slots)
            return kv_errf(err, errlen, KV_DEV_EINVAL, "write_kv: slot %lld outside the pool (%lld slots)",
                        (long long)w[i].slot, slots);
    if ((rc = need_scratch(im, r, rank, n * sizeof *w, err, errlen))) return rc;
    cudaError_t e = cudaMemcpy(r->scratch, w, n * sizeof *w, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return cuda_fail(e, "copying slot writes", err, errlen);
    launch_write(geom_of(r), (const kv_slot_write *)r->scratch, (long long)n);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    return e == cudaSuccess ? 0 : cuda_fail(e, "the write_kv kernel", err, errlen);
}

/* Uploads a block table and token ids, runs the verify kernel and reads the count. */
int run_verify(const cuda_impl *im, rank_state *r, int rank, const int32_t *block_table, int32_t num_table_blocks,
               const int32_t *token_ids, int32_t num_tokens, int64_t *mismatches, double *kernel_ms,
               char *err, size_t errlen)
{
    const int bs = r->layout.block_size;
    if (num_tokens < 0 || num_table_blocks < 0 ||
        (long long)num_table_blocks * bs < (long long)num_tokens)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "verify: %d tokens need more than %d blocks of %d",
                    num_tokens, num_table_blocks, bs);
    const int32_t used = (int32_t)((num_tokens + bs - 1) / bs);
    for (int32_t i = 0; i < used; i++)
        if (block_table[i] < 0 || block_table[i] >= r->layout.num_blocks)
            return kv_errf(err, errlen, KV_DEV_EINVAL, "verify: block id %d outside the pool (%d blocks)",
                        block_table[i], r->layout.num_blocks);
    *mismatches = 0;
    if (num_tokens == 0) return 0;
    const size_t tb = (size_t)used * sizeof(int32_t), kb = (size_t)num_tokens * sizeof(int32_t);
    const size_t tb_al = (tb + 255) & ~(size_t)255;
    int rc = need_scratch(im, r, rank, tb_al + kb, err, errlen);
    if (rc) return rc;
    if (!r->count) {
        cudaError_t e = cudaMalloc(&r->count, sizeof *r->count);
        if (e != cudaSuccess) {
            r->count = NULL;
            return alloc_fail(e, im, r, rank, "kvlab counter", sizeof *r->count, err, errlen);
        }
    }
    int32_t *d_table = (int32_t *)r->scratch, *d_tok = (int32_t *)((char *)r->scratch + tb_al);
    cudaError_t e = cudaMemcpy(d_table, block_table, tb, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemcpy(d_tok, token_ids, kb, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) e = cudaMemset(r->count, 0, sizeof *r->count);
    if (e != cudaSuccess) return cuda_fail(e, "copying the block table", err, errlen);
    cudaEvent_t a = NULL, b = NULL;
    if (kernel_ms) {
        cudaEventCreate(&a);
        cudaEventCreate(&b);
        cudaEventRecord(a);
    }
    launch_verify(geom_of(r), d_table, d_tok, num_tokens, r->count);
    e = cudaGetLastError();
    if (kernel_ms) {
        cudaEventRecord(b);
        cudaEventSynchronize(b);
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        *kernel_ms = ms;
        cudaEventDestroy(a);
        cudaEventDestroy(b);
    }
    unsigned long long c = 0;
    if (e == cudaSuccess) e = cudaMemcpy(&c, r->count, sizeof c, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return cuda_fail(e, "the verify kernel", err, errlen);
    *mismatches = (int64_t)c;
    return 0;
}

int op_verify(kv_device *d, int rank, const int32_t *block_table, int32_t num_table_blocks,
              const int32_t *token_ids, int32_t num_tokens, int64_t *mismatches, char *err,
              size_t errlen)
{
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    rank_state *r = &im->ranks[rank];
    if ((rc = need_pool(r, rank, err, errlen))) return rc;
    int64_t m = 0;
    rc = run_verify(im, r, rank, block_table, num_table_blocks, token_ids, num_tokens, &m, NULL, err, errlen);
    if (mismatches) *mismatches = m;
    return rc;
}

void op_release(kv_device *d)
{
    cuda_impl *im = impl_of(d);
    if (!im) return;
    for (int i = 0; i < im->num_ranks; i++) {
        rank_state *r = &im->ranks[i];
        cudaSetDevice(r->gpu);
        for (int t = 0; t < r->nterms; t++)
            if (r->terms[t].ptr) cudaFree(r->terms[t].ptr);
        r->nterms = 0;
        if (r->pool) cudaFree(r->pool);
        if (r->scratch) cudaFree(r->scratch);
        if (r->count) cudaFree(r->count);
        r->pool = NULL;
        r->pool_bytes = 0;
        r->scratch = NULL;
        r->scratch_bytes = 0;
        r->count = NULL;
        r->pool_alloc_ms = -1;
    }
}

void op_destroy(kv_device *d)
{
    if (!d) return;
    op_release(d);
    free(d->impl);
    free(d);
}

const kv_device_ops cuda_ops = {
    op_mem_info, op_reserve, op_alloc_pool, op_write_kv, op_verify, op_release, op_destroy,
};

/* Creates the context on one device and measures it (see kv_cuda_gpu_info). */
int open_gpu(int gpu, kv_nvml *nv, const char *nv_why, kv_cuda_gpu_info *info, char *err,
             size_t errlen)
{
    memset(info, 0, sizeof *info);
    info->device = gpu;
    info->context_bytes = -1;
    cudaError_t e = cudaDeviceGetPCIBusId(info->pci_bus_id, (int)sizeof info->pci_bus_id, gpu);
    uint64_t used0 = 0, used1 = 0, nv_total = 0;
    char why[160] = "";
    int have_before = 0;
    if (e == cudaSuccess && nv)
        have_before = kv_nvml_memory(nv, info->pci_bus_id, &used0, &nv_total, why, sizeof why) == 0;
    if (e == cudaSuccess) e = cudaSetDevice(gpu);
    if (e == cudaSuccess) e = cudaFree(0); /* creates the primary context now */
    if (e != cudaSuccess) return kv_errf(err, errlen, KV_DEV_EDEVICE, "no CUDA device: %s", cudaGetErrorString(e));
    size_t fr = 0, tot = 0;
    e = cudaMemGetInfo(&fr, &tot);
    if (e != cudaSuccess) return cuda_fail(e, "cudaMemGetInfo", err, errlen);
    info->total_bytes = tot;
    info->free_at_open = fr;
    cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, gpu);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGetDeviceProperties", err, errlen);
    snprintf(info->name, sizeof info->name, "%s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    if (have_before && kv_nvml_memory(nv, info->pci_bus_id, &used1, &nv_total, why, sizeof why) == 0) {
        info->context_bytes = used1 >= used0 ? (int64_t)(used1 - used0) : 0;
        snprintf(info->context_how, sizeof info->context_how,
                 "NVML used memory before and after creating the context");
    } else {
        snprintf(info->context_how, sizeof info->context_how, "not measured: %s",
                 nv ? why : nv_why);
    }
    return 0;
}

} /* namespace */

extern "C" {

kv_device *kv_cuda_open(int num_ranks, char *err, size_t errlen)
{
    if (num_ranks < 1 || num_ranks > KV_CUDA_MAX_RANKS) {
        kv_errf(err, errlen, KV_DEV_EINVAL, "kv_cuda_open: %d ranks (1..%d)", num_ranks, KV_CUDA_MAX_RANKS);
        return NULL;
    }
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        kv_errf(err, errlen, KV_DEV_EDEVICE, "no CUDA device: %s",
             e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA-capable device is detected");
        return NULL;
    }
    cuda_impl *im = (cuda_impl *)calloc(1, sizeof *im);
    kv_device *d = (kv_device *)calloc(1, sizeof *d);
    if (!im || !d) {
        free(im);
        free(d);
        kv_errf(err, errlen, KV_DEV_ENOMEM, "kv_cuda_open: out of host memory");
        return NULL;
    }
    im->magic = KV_CUDA_MAGIC;
    im->placeholders = 1;
    im->num_ranks = num_ranks;
    int gpu_of[KV_CUDA_MAX_RANKS];
    im->shared = kv_cuda_map_ranks(num_ranks, n, gpu_of);
    char nv_why[160] = "";
    kv_nvml *nv = kv_nvml_open(nv_why, sizeof nv_why);
    int rc = 0;
    for (int r = 0; r < num_ranks && !rc; r++) {
        rank_state *rs = &im->ranks[r];
        rs->gpu = gpu_of[r];
        rs->pool_alloc_ms = -1;
        if (r >= n)
            rs->info = im->ranks[r % n].info; /* same card as an earlier rank: measured once */
        else
            rc = open_gpu(rs->gpu, nv, nv_why, &rs->info, err, errlen);
    }
    kv_nvml_close(nv);
    if (rc) {
        free(im);
        free(d);
        return NULL;
    }
    cudaSetDevice(im->ranks[0].gpu);
    d->ops = &cuda_ops;
    d->name = "cuda";
    d->num_ranks = num_ranks;
    d->impl = im;
    return d;
}

int kv_cuda_is(const kv_device *d)
{
    return d && d->ops == &cuda_ops && impl_of(d) && impl_of(d)->magic == KV_CUDA_MAGIC;
}

void kv_cuda_set_placeholders(kv_device *d, int on)
{
    if (kv_cuda_is(d)) impl_of(d)->placeholders = on ? 1 : 0;
}

int kv_cuda_rank_gpu(const kv_device *d, int rank)
{
    if (!kv_cuda_is(d) || rank < 0 || rank >= d->num_ranks) return -1;
    return impl_of(d)->ranks[rank].gpu;
}

int kv_cuda_ranks_share_card(const kv_device *d)
{
    return kv_cuda_is(d) ? impl_of(d)->shared : 0;
}

int kv_cuda_info(const kv_device *d, int rank, kv_cuda_gpu_info *out, char *err, size_t errlen)
{
    if (!kv_cuda_is(d) || rank < 0 || rank >= d->num_ranks || !out)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "kv_cuda_info: bad device or rank %d", rank);
    *out = impl_of(d)->ranks[rank].info;
    return 0;
}

uint64_t kv_cuda_held_bytes(const kv_device *d, int rank)
{
    if (!kv_cuda_is(d) || rank < 0 || rank >= d->num_ranks) return 0;
    return held_bytes(&impl_of(d)->ranks[rank]);
}

double kv_cuda_pool_alloc_ms(const kv_device *d, int rank)
{
    if (!kv_cuda_is(d) || rank < 0 || rank >= d->num_ranks) return -1;
    return impl_of(d)->ranks[rank].pool_alloc_ms;
}

/* The bench request: tokens 0..n-1 at positions 0..n-1 placed through a
 * shuffled block table over blocks 1.. (block 0 is vLLM's null block), so
 * reads and writes go through real indirection. */
static int bench_setup(rank_state *r, int32_t n, int32_t **table, int32_t **tokens,
                       kv_slot_write **writes, int32_t *nblocks, char *err, size_t errlen)
{
    const int bs = r->layout.block_size;
    const long long usable = (long long)(r->layout.num_blocks - 1) * bs;
    if (n < 1 || n > usable)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "bench: %d tokens but the pool has %lld usable slots", n,
                    usable);
    const int32_t nb = (n + bs - 1) / bs;
    *table = (int32_t *)malloc((size_t)nb * sizeof(int32_t));
    *tokens = (int32_t *)malloc((size_t)n * sizeof(int32_t));
    *writes = (kv_slot_write *)malloc((size_t)n * sizeof(kv_slot_write));
    if (!*table || !*tokens || !*writes)
        return kv_errf(err, errlen, KV_DEV_ENOMEM, "bench: out of host memory");
    for (int32_t i = 0; i < nb; i++) (*table)[i] = 1 + i;
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (int32_t i = nb - 1; i > 0; i--) { /* Fisher-Yates with an LCG */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int32_t j = (int32_t)((s >> 33) % (uint64_t)(i + 1));
        int32_t t = (*table)[i];
        (*table)[i] = (*table)[j];
        (*table)[j] = t;
    }
    for (int32_t i = 0; i < n; i++) {
        (*tokens)[i] = (int32_t)((i * 7919u + 13u) % 128256u);
        (*writes)[i].slot = (int64_t)(*table)[i / bs] * bs + i % bs;
        (*writes)[i].token_id = (*tokens)[i];
        (*writes)[i].position = i;
    }
    *nblocks = nb;
    return 0;
}

static uint64_t bench_bytes(const rank_state *r, int32_t n)
{
    const kv_pool_layout *l = &r->layout;
    return (uint64_t)n * (uint64_t)l->num_layers * (uint64_t)l->kv_factor * (uint64_t)l->num_kv_heads *
           (uint64_t)l->head_size * (uint64_t)kv_dtype_bytes(l->cache_dtype);
}

int kv_cuda_bench_write(kv_device *d, int rank, int32_t num_tokens, int repeats, double *gbps,
                        double *ms, uint64_t *bytes, char *err, size_t errlen)
{
    cuda_impl *im = kv_cuda_is(d) ? impl_of(d) : NULL;
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    rank_state *r = &im->ranks[rank];
    if ((rc = need_pool(r, rank, err, errlen))) return rc;
    int32_t *table = NULL, *tokens = NULL, nb = 0;
    kv_slot_write *w = NULL;
    rc = bench_setup(r, num_tokens, &table, &tokens, &w, &nb, err, errlen);
    if (!rc) rc = need_scratch(im, r, rank, (size_t)num_tokens * sizeof *w, err, errlen);
    cudaError_t e = cudaSuccess;
    if (!rc) e = cudaMemcpy(r->scratch, w, (size_t)num_tokens * sizeof *w, cudaMemcpyHostToDevice);
    free(table);
    free(tokens);
    free(w);
    if (rc) return rc;
    if (e != cudaSuccess) return cuda_fail(e, "copying bench writes", err, errlen);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    float best = -1;
    const kv_cuda_geom g = geom_of(r);
    /* One untimed run first: lazy module loading happens on first launch. */
    for (int i = 0; i < (repeats < 1 ? 1 : repeats) + 1 && e == cudaSuccess; i++) {
        cudaEventRecord(a);
        launch_write(g, (const kv_slot_write *)r->scratch, num_tokens);
        cudaEventRecord(b);
        e = cudaEventSynchronize(b);
        if (e == cudaSuccess) e = cudaGetLastError();
        float t = 0;
        cudaEventElapsedTime(&t, a, b);
        if (i > 0 && (best < 0 || t < best)) best = t;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (e != cudaSuccess) return cuda_fail(e, "the write_kv kernel", err, errlen);
    const uint64_t by = bench_bytes(r, num_tokens);
    if (bytes) *bytes = by;
    if (ms) *ms = best;
    if (gbps) *gbps = best > 0 ? (double)by / (best * 1e6) : 0;
    return 0;
}

int kv_cuda_bench_gather(kv_device *d, int rank, int32_t num_tokens, int repeats, double *gbps,
                         double *ms, uint64_t *bytes, int64_t *mismatches, char *err, size_t errlen)
{
    cuda_impl *im = kv_cuda_is(d) ? impl_of(d) : NULL;
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    rank_state *r = &im->ranks[rank];
    if ((rc = need_pool(r, rank, err, errlen))) return rc;
    int32_t *table = NULL, *tokens = NULL, nb = 0;
    kv_slot_write *w = NULL;
    rc = bench_setup(r, num_tokens, &table, &tokens, &w, &nb, err, errlen);
    double best = -1;
    int64_t m = 0;
    for (int i = 0; !rc && i < (repeats < 1 ? 1 : repeats) + 1; i++) {
        double t = 0;
        rc = run_verify(im, r, rank, table, nb, tokens, num_tokens, &m, &t, err, errlen);
        if (!rc && i > 0 && (best < 0 || t < best)) best = t;
    }
    free(table);
    free(tokens);
    free(w);
    if (rc) return rc;
    const uint64_t by = bench_bytes(r, num_tokens);
    if (bytes) *bytes = by;
    if (ms) *ms = best;
    if (gbps) *gbps = best > 0 ? (double)by / (best * 1e6) : 0;
    if (mismatches) *mismatches = m;
    return 0;
}

} /* extern "C" */
