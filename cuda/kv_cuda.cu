/* kv_cuda: the CUDA backend (see kv_cuda.h for the contract).
 *
 * Pool layout per rank, one cudaMalloc, as kv_cuda_layout.h describes (vLLM's
 * FlashAttention shape per layer); each kernel's body (its item loop and
 * shared-memory layout) lives there too, so the GPU-free unit tests run the
 * kernels' own code on a host buffer. */
#include <cuda_runtime.h>
#include <dlfcn.h>

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
#define KV_CUDA_MAX_TERMS 16
#define KV_CUDA_MAGIC 0x6B766375 /* "kvcu" */
#define KV_CUDA_THREADS 256      /* the most threads per CUDA block; fewer when an item has fewer units */
/* Device copies of slot writes, block tables, keys and token ids: one
 * buffer of a fixed size per rank (work larger than it goes in pieces), so
 * what kvlab holds beside the plan is known up front. It lives inside the
 * rank's activation placeholder when there is one (the plan's activation
 * term: working memory, as a real worker's kernels use it), else in its own
 * cudaMalloc made before the KV pool's. */
#define KV_CUDA_SCRATCH_BYTES ((size_t)32 << 20)

namespace {

struct term_alloc {
    kv_dev_handle h;    /* 0 = unused */
    char name[32];
    void *ptr;          /* NULL when bookkeeping only (placeholders off, cuda_context) */
    uint64_t bytes;
};

struct rank_state {
    int gpu;
    kv_device_info info;
    term_alloc terms[KV_CUDA_MAX_TERMS];
    char *pool;
    uint64_t pool_bytes;
    kv_dev_handle pool_h;
    kv_pool_layout layout;
    double pool_alloc_ms;
    void *scratch;               /* KV_CUDA_SCRATCH_BYTES: device copies of writes / tables / keys / token ids */
    int scratch_own;             /* 1: its own cudaMalloc; 0: the start of the activation placeholder */
    unsigned long long *count;   /* device mismatch counter */
};

struct cuda_impl {
    int magic;
    int placeholders;
    int num_ranks;
    kv_dev_handle next_h;
    char deferred[256];          /* a failure in a call that could not report it */
    rank_state ranks[KV_CUDA_MAX_RANKS];
};

cuda_impl *impl_of(const kv_device *d)
{
    cuda_impl *im = d ? (cuda_impl *)d->impl : NULL;
    return im && im->magic == KV_CUDA_MAGIC ? im : NULL;
}

double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One line naming the rank, its GPU, what failed and CUDA's words. */
int fail(cudaError_t e, int rank, int gpu, const char *what, char *err, size_t errlen)
{
    return kv_errf(err, errlen, KV_DEV_EDEVICE, "rank %d (GPU %d): %s failed: %s (%s)", rank, gpu, what,
                   cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Keeps the first failure of a call that returns nothing. */
void defer(cuda_impl *im, cudaError_t e, int rank, const char *what)
{
    if (e == cudaSuccess || im->deferred[0]) return;
    snprintf(im->deferred, sizeof im->deferred, "an earlier %s on rank %d failed: %s (%s)", what, rank,
             cudaGetErrorString(e), cudaGetErrorName(e));
}

/* Reports a deferred failure once, from the next call that can. */
int take_deferred(cuda_impl *im, char *err, size_t errlen)
{
    if (!im->deferred[0]) return 0;
    kv_errf(err, errlen, KV_DEV_EDEVICE, "%s", im->deferred);
    im->deferred[0] = '\0';
    return KV_DEV_EDEVICE;
}

uint64_t held_bytes(const rank_state *r)
{
    uint64_t b = r->pool ? r->pool_bytes : 0;
    for (int i = 0; i < KV_CUDA_MAX_TERMS; i++)
        if (r->terms[i].h && r->terms[i].ptr) b += r->terms[i].bytes;
    return b;
}

/* Bytes kvlab holds on one device, over every rank placed there (its own
 * scratch buffers included: an out-of-memory report counts everything). */
uint64_t held_on_gpu(const cuda_impl *im, int gpu)
{
    uint64_t b = 0;
    for (int i = 0; i < im->num_ranks; i++)
        if (im->ranks[i].gpu == gpu)
            b += held_bytes(&im->ranks[i]) + (im->ranks[i].scratch_own ? KV_CUDA_SCRATCH_BYTES : 0);
    return b;
}

kv_dev_handle new_handle(cuda_impl *im)
{
    if (++im->next_h == 0) im->next_h = 1;
    return im->next_h;
}

/* A failed cudaMalloc: clear the (non-sticky) error, then report it as
 * PyTorch would, naming the allocation and the rank, or as a plain device
 * error if it was not memory. */
int alloc_fail(cudaError_t e, const cuda_impl *im, const rank_state *r, int rank, const char *what, uint64_t bytes,
               char *err, size_t errlen)
{
    (void)cudaGetLastError();
    if (e != cudaErrorMemoryAllocation) {
        char w[96];
        snprintf(w, sizeof w, "cudaMalloc of %llu bytes for the %s", (unsigned long long)bytes, what);
        return fail(e, rank, r->gpu, w, err, errlen);
    }
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        (void)cudaGetLastError();
        fr = tot = 0;
    }
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
        return kv_errf(err, errlen, KV_DEV_EINVAL, "rank %d out of range (0..%d)", rank, im ? im->num_ranks - 1 : -1);
    int rc = take_deferred(im, err, errlen);
    if (rc) return rc;
    cudaError_t e = cudaSetDevice(im->ranks[rank].gpu);
    return e == cudaSuccess ? 0 : fail(e, rank, im->ranks[rank].gpu, "cudaSetDevice", err, errlen);
}

int need_pool(const rank_state *r, int rank, const char *what, char *err, size_t errlen)
{
    return r->pool ? 0 : kv_errf(err, errlen, KV_DEV_EINVAL, "%s: rank %d has no KV cache pool", what, rank);
}

/* The rank's scratch buffer (KV_CUDA_SCRATCH_BYTES), allocated once. */
int need_scratch(cuda_impl *im, rank_state *r, int rank, char *err, size_t errlen)
{
    if (r->scratch) return 0;
    cudaError_t e = cudaMalloc(&r->scratch, KV_CUDA_SCRATCH_BYTES);
    if (e != cudaSuccess) {
        r->scratch = NULL;
        return alloc_fail(e, im, r, rank, "kvlab scratch buffer", KV_CUDA_SCRATCH_BYTES, err, errlen);
    }
    r->scratch_own = 1;
    return 0;
}

/* Drops the rank's scratch buffer: freed when it is its own, forgotten when
 * it lives in a placeholder (whose owner frees it). */
void drop_scratch(cuda_impl *im, rank_state *r, int rank)
{
    if (r->scratch && r->scratch_own) defer(im, cudaFree(r->scratch), rank, "cudaFree of the scratch buffer");
    r->scratch = NULL;
    r->scratch_own = 0;
}

kv_cuda_geom geom_of(const rank_state *r)
{
    kv_cuda_geom g;
    kv_cuda_geom_init(&g, r->pool, &r->layout);
    return g;
}

/* ---- kernels ---------------------------------------------------------- */

/* The kernels: one call of their body in kv_cuda_layout.h per thread. DT
 * and UNIT are compile-time so the shared helpers fold to straight-line code. */
__device__ kv_cuda_blk this_block(void)
{
    kv_cuda_blk b;
    b.block = blockIdx.x;
    b.nblocks = gridDim.x;
    b.tid0 = (int)threadIdx.x;
    b.tid1 = (int)threadIdx.x + 1;
    b.nthreads = (int)blockDim.x;
    return b;
}

template <int DT, int UNIT>
__global__ void write_kv_kernel(kv_cuda_geom g, const kv_slot_write *w, long long n)
{
    extern __shared__ unsigned long long smem[];
    const kv_cuda_blk b = this_block();
    kv_cuda_write_block(&g, DT, UNIT, w, n, smem, &b);
}

template <int DT, int UNIT>
__global__ void verify_kernel(kv_cuda_geom g, kv_cuda_verify_args a, unsigned long long *count)
{
    extern __shared__ unsigned long long smem[];
    const kv_cuda_blk b = this_block();
    kv_cuda_verify_block(&g, DT, UNIT, &a, count, smem, &b);
}

template <int UNIT>
__global__ void gather_kernel(kv_cuda_geom g, const int32_t *table, int32_t ntok, char *out)
{
    extern __shared__ unsigned long long smem[];
    const kv_cuda_blk b = this_block();
    kv_cuda_gather_block(&g, UNIT, table, ntok, out, smem, &b);
}

__global__ void read_kernel(const char *src, long long n16, unsigned long long *sink)
{
    const kv_cuda_blk b = this_block();
    kv_cuda_read_block(src, n16, sink, &b);
}

/* Every kernel instantiation, so a card can load them all when it is first
 * measured (the context then includes them) and report a missing sm_XY
 * image right away. */
template <int DT> constexpr int one_value()
{
    return DT == KV_DTYPE_FP32 ? 4 : DT == KV_DTYPE_FP8_E4M3 || DT == KV_DTYPE_FP8_E5M2 || DT == KV_DTYPE_INT8 ? 1 : 2;
}

#define KV_FOR_DTYPES(X) X(KV_DTYPE_BF16) X(KV_DTYPE_FP16) X(KV_DTYPE_FP8_E4M3) X(KV_DTYPE_FP32) \
                         X(KV_DTYPE_FP8_E5M2) X(KV_DTYPE_INT8)

const void *const kernel_table[] = {
#define KV_K(DT) (const void *)write_kv_kernel<DT, 16>, (const void *)write_kv_kernel<DT, one_value<DT>()>, \
                 (const void *)verify_kernel<DT, 16>, (const void *)verify_kernel<DT, one_value<DT>()>,
    KV_FOR_DTYPES(KV_K)
#undef KV_K
    (const void *)gather_kernel<16>, (const void *)gather_kernel<4>, (const void *)gather_kernel<2>,
    (const void *)gather_kernel<1>, (const void *)read_kernel,
};

/* Launch shape: threads fitted to an item's units (a multiple of 32, at most
 * KV_CUDA_THREADS), blocks to fill the card several times over. */
struct shape {
    int grid, threads;
};

shape shape_for(const rank_state *r, long long items, long long units_per_item)
{
    shape s;
    long long t = (units_per_item + 31) / 32 * 32;
    s.threads = (int)(t < 32 ? 32 : t > KV_CUDA_THREADS ? KV_CUDA_THREADS : t);
    const long long cap = (long long)(r->info.sm_count > 0 ? r->info.sm_count : 80) * 16;
    s.grid = (int)(items < 1 ? 1 : items > cap ? cap : items);
    return s;
}

template <int DT>
void launch_write_dt(const shape &s, const kv_cuda_geom &g, const kv_slot_write *w, long long n)
{
    const size_t sm = kv_cuda_smem_bytes(&g);
    if (g.unit_bytes == 16) write_kv_kernel<DT, 16><<<s.grid, s.threads, sm>>>(g, w, n);
    else write_kv_kernel<DT, one_value<DT>()><<<s.grid, s.threads, sm>>>(g, w, n);
}

void launch_write(const rank_state *r, const kv_cuda_geom &g, const kv_slot_write *w, long long n)
{
    const shape s = shape_for(r, n * g.chunks, (long long)g.chunk_rows * g.upr);
    switch (g.dtype) {
    case KV_DTYPE_BF16: launch_write_dt<KV_DTYPE_BF16>(s, g, w, n); break;
    case KV_DTYPE_FP16: launch_write_dt<KV_DTYPE_FP16>(s, g, w, n); break;
    case KV_DTYPE_FP8_E4M3: launch_write_dt<KV_DTYPE_FP8_E4M3>(s, g, w, n); break;
    case KV_DTYPE_FP8_E5M2: launch_write_dt<KV_DTYPE_FP8_E5M2>(s, g, w, n); break;
    case KV_DTYPE_INT8: launch_write_dt<KV_DTYPE_INT8>(s, g, w, n); break;
    default: launch_write_dt<KV_DTYPE_FP32>(s, g, w, n); break;
    }
}

template <int DT>
void launch_verify_dt(const shape &s, const kv_cuda_geom &g, const kv_cuda_verify_args &a, unsigned long long *count)
{
    const size_t sm = kv_cuda_smem_bytes(&g);
    if (g.unit_bytes == 16) verify_kernel<DT, 16><<<s.grid, s.threads, sm>>>(g, a, count);
    else verify_kernel<DT, one_value<DT>()><<<s.grid, s.threads, sm>>>(g, a, count);
}

void launch_verify(const rank_state *r, const kv_cuda_geom &g, const kv_cuda_verify_args &a, unsigned long long *count)
{
    const shape s = shape_for(r, (long long)a.n * g.chunks, (long long)g.chunk_rows * g.upr);
    switch (g.dtype) {
    case KV_DTYPE_BF16: launch_verify_dt<KV_DTYPE_BF16>(s, g, a, count); break;
    case KV_DTYPE_FP16: launch_verify_dt<KV_DTYPE_FP16>(s, g, a, count); break;
    case KV_DTYPE_FP8_E4M3: launch_verify_dt<KV_DTYPE_FP8_E4M3>(s, g, a, count); break;
    case KV_DTYPE_FP8_E5M2: launch_verify_dt<KV_DTYPE_FP8_E5M2>(s, g, a, count); break;
    case KV_DTYPE_INT8: launch_verify_dt<KV_DTYPE_INT8>(s, g, a, count); break;
    default: launch_verify_dt<KV_DTYPE_FP32>(s, g, a, count); break;
    }
}

void launch_gather(const rank_state *r, const kv_cuda_geom &g, const int32_t *table, int32_t ntok, char *out)
{
    const int unit = kv_cuda_gather_unit(&g);
    const long long units = (long long)g.block_size * g.slot_bytes / unit;
    const shape s = shape_for(r, kv_cuda_gather_items(&g, ntok), units);
    const size_t sm = KV_CUDA_GATHER_SMEM;
    switch (unit) {
    case 16: gather_kernel<16><<<s.grid, s.threads, sm>>>(g, table, ntok, out); break;
    case 4: gather_kernel<4><<<s.grid, s.threads, sm>>>(g, table, ntok, out); break;
    case 2: gather_kernel<2><<<s.grid, s.threads, sm>>>(g, table, ntok, out); break;
    default: gather_kernel<1><<<s.grid, s.threads, sm>>>(g, table, ntok, out); break;
    }
}

/* The read roofline: n16 16-byte units of src, folded into sink. */
void launch_read(const rank_state *r, const char *src, long long n16, unsigned long long *sink)
{
    const shape s = shape_for(r, (n16 + KV_CUDA_THREADS * KV_CUDA_ILP - 1) / (KV_CUDA_THREADS * KV_CUDA_ILP),
                              KV_CUDA_THREADS);
    read_kernel<<<s.grid, s.threads>>>(src, n16, sink);
}

/* After a launch: the launch's own error, then the kernel's. */
int finish_launch(const rank_state *r, int rank, const char *what, char *err, size_t errlen)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        char w[96];
        snprintf(w, sizeof w, "launching the %s kernel", what);
        return fail(e, rank, r->gpu, w, err, errlen);
    }
    e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        char w[96];
        snprintf(w, sizeof w, "the %s kernel", what);
        return fail(e, rank, r->gpu, w, err, errlen);
    }
    return 0;
}

/* ---- operations --------------------------------------------------------- */

int op_info(kv_device *d, int rank, kv_device_info *out, char *err, size_t errlen)
{
    cuda_impl *im = impl_of(d);
    if (!im || rank < 0 || rank >= im->num_ranks || !out)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "info: bad device or rank %d", rank);
    *out = im->ranks[rank].info;
    out->pool_alloc_ms = im->ranks[rank].pool_alloc_ms;
    return 0;
}

int op_mem_info(kv_device *d, int rank, uint64_t *free_bytes, uint64_t *total_bytes, char *err, size_t errlen)
{
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    size_t fr = 0, tot = 0;
    cudaError_t e = cudaMemGetInfo(&fr, &tot);
    if (e != cudaSuccess) return fail(e, rank, im->ranks[rank].gpu, "cudaMemGetInfo", err, errlen);
    *free_bytes = fr;
    *total_bytes = tot;
    return 0;
}

int op_reserve(kv_device *d, int rank, const char *term, uint64_t bytes, kv_dev_handle *out, char *err,
               size_t errlen)
{
    if (out) *out = 0;
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    rank_state *r = &im->ranks[rank];
    term_alloc *t = NULL;
    for (int i = 0; i < KV_CUDA_MAX_TERMS && !t; i++)
        if (!r->terms[i].h) t = &r->terms[i];
    if (!t) return kv_errf(err, errlen, KV_DEV_EINVAL, "rank %d holds %d placeholders already", rank, KV_CUDA_MAX_TERMS);
    void *p = NULL;
    /* The real context already holds its memory: never add a second one. */
    if (bytes && im->placeholders && strcmp(term ? term : "", "cuda_context") != 0) {
        cudaError_t e = cudaMalloc(&p, bytes);
        if (e != cudaSuccess) {
            char what[64];
            snprintf(what, sizeof what, "%s placeholder", term ? term : "?");
            return alloc_fail(e, im, r, rank, what, bytes, err, errlen);
        }
    }
    snprintf(t->name, sizeof t->name, "%s", term ? term : "?");
    t->ptr = p;
    t->bytes = bytes;
    t->h = new_handle(im);
    if (out) *out = t->h;
    /* The scratch buffer moves into the activation placeholder: what kvlab
     * holds is then the plan's terms and pool, nothing beside them. */
    if (p && bytes >= KV_CUDA_SCRATCH_BYTES && !strcmp(t->name, "activation") && (!r->scratch || r->scratch_own)) {
        drop_scratch(im, r, rank);
        r->scratch = p;
        r->scratch_own = 0;
    }
    return 0;
}

int check_layout(const kv_pool_layout *l, char *err, size_t errlen)
{
    if (!l || l->num_blocks < 1 || l->block_size < 1 || l->num_layers < 1 || l->num_kv_heads < 1 ||
        l->head_size < 1 || (l->kv_factor != 1 && l->kv_factor != 2) || l->cache_dtype < 0 ||
        l->cache_dtype >= KV_DTYPE_COUNT || l->first_kv_head < 0)
        return kv_errf(err, errlen, KV_DEV_EINVAL,
                       "bad pool layout (blocks %d, block_size %d, layers %d, heads %d, head_size %d, "
                       "kv_factor %d, dtype %d)",
                       l ? l->num_blocks : 0, l ? l->block_size : 0, l ? l->num_layers : 0, l ? l->num_kv_heads : 0,
                       l ? l->head_size : 0, l ? l->kv_factor : 0, l ? l->cache_dtype : 0);
    return 0;
}

int free_pool(rank_state *r, int rank, char *err, size_t errlen)
{
    cudaError_t e = r->pool ? cudaFree(r->pool) : cudaSuccess;
    r->pool = NULL;
    r->pool_bytes = 0;
    r->pool_h = 0;
    return e == cudaSuccess ? 0 : fail(e, rank, r->gpu, "cudaFree of the KV cache pool", err, errlen);
}

int op_alloc_pool(kv_device *d, int rank, const kv_pool_layout *layout, kv_dev_handle *out, char *err,
                  size_t errlen)
{
    if (out) *out = 0;
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    if ((rc = check_layout(layout, err, errlen))) return rc;
    rank_state *r = &im->ranks[rank];
    if ((rc = free_pool(r, rank, err, errlen))) return rc;
    /* The scratch buffer first, so a card too full for both reports the pool. */
    if ((rc = need_scratch(im, r, rank, err, errlen))) return rc;
    const uint64_t bytes = kv_pool_layout_bytes(layout);
    kv_device_progress(d, bytes); /* the program may say so: the malloc and clear take a moment */
    void *p = NULL;
    const double t0 = now_ms();
    cudaError_t e = cudaMalloc(&p, bytes);
    const double t1 = now_ms();
    if (e != cudaSuccess) return alloc_fail(e, im, r, rank, "KV cache pool", bytes, err, errlen);
    r->pool_alloc_ms = t1 - t0;
    r->pool = (char *)p;
    r->pool_bytes = bytes;
    r->layout = *layout;
    r->pool_h = new_handle(im);
    if (out) *out = r->pool_h; /* the caller holds the pool from here on, whatever follows */
    /* Zeroed so block 0 (the null block) and unwritten slots read the same
     * every run. A pool that cannot be cleared is not kept. */
    e = cudaMemset(p, 0, bytes);
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        rc = fail(e, rank, r->gpu, "clearing the KV cache pool", err, errlen);
        (void)cudaGetLastError();
        defer(im, cudaFree(p), rank, "cudaFree of the KV cache pool");
        r->pool = NULL;
        r->pool_bytes = 0;
        r->pool_h = 0;
        if (out) *out = 0;
        return rc;
    }
    return 0;
}

void op_free(kv_device *d, int rank, kv_dev_handle h)
{
    cuda_impl *im = impl_of(d);
    if (!im || !h || rank < 0 || rank >= im->num_ranks) return;
    rank_state *r = &im->ranks[rank];
    cudaError_t e = cudaSetDevice(r->gpu);
    if (e != cudaSuccess) {
        defer(im, e, rank, "cudaSetDevice");
        return;
    }
    if (r->pool_h == h) {
        defer(im, cudaFree(r->pool), rank, "cudaFree of the KV cache pool");
        r->pool = NULL;
        r->pool_bytes = 0;
        r->pool_h = 0;
        return;
    }
    for (int i = 0; i < KV_CUDA_MAX_TERMS; i++)
        if (r->terms[i].h == h) {
            if (r->terms[i].ptr && r->terms[i].ptr == r->scratch) r->scratch = NULL; /* it lived there */
            if (r->terms[i].ptr) defer(im, cudaFree(r->terms[i].ptr), rank, "cudaFree of a placeholder");
            memset(&r->terms[i], 0, sizeof r->terms[i]);
        }
}

uint64_t op_held(kv_device *d, int rank)
{
    cuda_impl *im = impl_of(d);
    return im && rank >= 0 && rank < im->num_ranks ? held_bytes(&im->ranks[rank]) : 0;
}

void op_set_placeholders(kv_device *d, int on)
{
    cuda_impl *im = impl_of(d);
    if (im) im->placeholders = on ? 1 : 0;
}

/* Slot writes one scratch buffer holds. */
const size_t WRITES_PER_PIECE = KV_CUDA_SCRATCH_BYTES / sizeof(kv_slot_write);

/* Uploads n writes into scratch (n <= WRITES_PER_PIECE). */
int upload_writes(rank_state *r, int rank, const kv_slot_write *w, size_t n, char *err, size_t errlen)
{
    cudaError_t e = cudaMemcpy(r->scratch, w, n * sizeof *w, cudaMemcpyHostToDevice);
    return e == cudaSuccess ? 0 : fail(e, rank, r->gpu, "copying slot writes to the device", err, errlen);
}

/* Runs the write kernel over n writes, a scratch buffer's worth at a time. */
int run_write(cuda_impl *im, rank_state *r, int rank, const kv_slot_write *w, size_t n, char *err, size_t errlen)
{
    int rc = need_scratch(im, r, rank, err, errlen);
    for (size_t i = 0; !rc && i < n; i += WRITES_PER_PIECE) {
        const size_t k = n - i < WRITES_PER_PIECE ? n - i : WRITES_PER_PIECE;
        if ((rc = upload_writes(r, rank, w + i, k, err, errlen))) break;
        launch_write(r, geom_of(r), (const kv_slot_write *)r->scratch, (long long)k);
        rc = finish_launch(r, rank, "write_kv", err, errlen);
    }
    return rc;
}

int op_write_kv(kv_device *d, int rank, const kv_slot_write *w, size_t n, char *err, size_t errlen)
{
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    rank_state *r = &im->ranks[rank];
    if ((rc = need_pool(r, rank, "write_kv", err, errlen))) return rc;
    if (n == 0) return 0;
    const long long slots = (long long)r->layout.num_blocks * r->layout.block_size;
    for (size_t i = 0; i < n; i++)
        if (w[i].slot < 0 || w[i].slot >= slots)
            return kv_errf(err, errlen, KV_DEV_EINVAL, "write_kv: slot %lld outside rank %d's pool (%lld slots)",
                           (long long)w[i].slot, rank, slots);
    return run_write(im, r, rank, w, n, err, errlen);
}

size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

/* Positions one verify piece covers: its token ids (4 bytes each) and at
 * most one table entry and key (12 bytes) per token, plus one more block at
 * each end, fit in the scratch buffer with their alignment. */
const int VERIFY_PER_PIECE = (int)((KV_CUDA_SCRATCH_BYTES - 1024) / 16 - 2);

int need_count(cuda_impl *im, rank_state *r, int rank, char *err, size_t errlen)
{
    if (r->count) return 0;
    cudaError_t e = cudaMalloc(&r->count, sizeof *r->count);
    if (e != cudaSuccess) {
        r->count = NULL;
        return alloc_fail(e, im, r, rank, "kvlab mismatch counter", sizeof *r->count, err, errlen);
    }
    return 0;
}

/* Uploads positions [first, first + n) of v (n <= VERIFY_PER_PIECE) into
 * scratch: the table entries and keys of their blocks from the first one,
 * and their tokens; *a gets the device pointers. */
int upload_verify(rank_state *r, int rank, const kv_verify_req *v, int first, int n, kv_cuda_verify_args *a,
                  char *err, size_t errlen)
{
    const int bs = r->layout.block_size, b0 = first / bs, b1 = (first + n - 1) / bs;
    const size_t nb = (size_t)(b1 - b0 + 1), tb = nb * sizeof(int32_t), kb = nb * sizeof(uint64_t),
                 nt = (size_t)n * sizeof(int32_t);
    char *base = (char *)r->scratch;
    int32_t *d_table = (int32_t *)base;
    uint64_t *d_keys = (uint64_t *)(base + align256(tb));
    int32_t *d_tok = (int32_t *)(base + align256(tb) + align256(kb));
    /* Keys are 0 when the caller gives none (as the host backend reads them). */
    cudaError_t e = cudaMemcpy(d_table, v->block_table + b0, tb, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = v->block_keys ? cudaMemcpy(d_keys, v->block_keys + b0, kb, cudaMemcpyHostToDevice) : cudaMemset(d_keys, 0, kb);
    if (e == cudaSuccess) e = cudaMemcpy(d_tok, v->token_ids + (first - v->first), nt, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) return fail(e, rank, r->gpu, "copying the block table to the device", err, errlen);
    a->table = d_table;
    a->keys = d_keys;
    a->tokens = d_tok;
    a->first = first;
    a->n = n;
    a->table_first = b0;
    return 0;
}

int check_verify_req(const rank_state *r, int rank, const kv_verify_req *v, char *err, size_t errlen)
{
    const int bs = r->layout.block_size;
    if (!v || v->first < 0 || v->num_tokens < 0 || v->num_table_blocks < 0 ||
        (long long)v->num_table_blocks * bs < (long long)v->first + v->num_tokens)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "verify: positions %d..%d need more than %d blocks of %d",
                       v ? v->first : 0, v ? v->first + v->num_tokens - 1 : 0, v ? v->num_table_blocks : 0, bs);
    const int32_t used = (int32_t)(((long long)v->first + v->num_tokens + bs - 1) / bs);
    for (int32_t i = v->first / bs; i < used; i++)
        if (v->block_table[i] < 0 || v->block_table[i] >= r->layout.num_blocks)
            return kv_errf(err, errlen, KV_DEV_EINVAL, "verify: block id %d outside rank %d's pool (%d blocks)",
                           v->block_table[i], rank, r->layout.num_blocks);
    return 0;
}

int read_count(const rank_state *r, int rank, int64_t *out, char *err, size_t errlen)
{
    unsigned long long c = 0;
    cudaError_t e = cudaMemcpy(&c, r->count, sizeof c, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) return fail(e, rank, r->gpu, "reading the mismatch count", err, errlen);
    *out = (int64_t)c;
    return 0;
}

int zero_count(const rank_state *r, int rank, char *err, size_t errlen)
{
    cudaError_t e = cudaMemset(r->count, 0, sizeof *r->count);
    return e == cudaSuccess ? 0 : fail(e, rank, r->gpu, "clearing the mismatch count", err, errlen);
}

int op_verify(kv_device *d, int rank, const kv_verify_req *v, int64_t *mismatches, char *err, size_t errlen)
{
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    rank_state *r = &im->ranks[rank];
    if ((rc = need_pool(r, rank, "verify", err, errlen))) return rc;
    if ((rc = check_verify_req(r, rank, v, err, errlen))) return rc;
    if (mismatches) *mismatches = 0;
    if (v->num_tokens == 0) return 0;
    if ((rc = need_scratch(im, r, rank, err, errlen)) || (rc = need_count(im, r, rank, err, errlen)) ||
        (rc = zero_count(r, rank, err, errlen)))
        return rc;
    for (int i = 0; i < v->num_tokens; i += VERIFY_PER_PIECE) {
        const int k = v->num_tokens - i < VERIFY_PER_PIECE ? v->num_tokens - i : VERIFY_PER_PIECE;
        kv_cuda_verify_args a;
        if ((rc = upload_verify(r, rank, v, v->first + i, k, &a, err, errlen))) return rc;
        launch_verify(r, geom_of(r), a, r->count);
        if ((rc = finish_launch(r, rank, "verify", err, errlen))) return rc;
    }
    int64_t c = 0;
    if ((rc = read_count(r, rank, &c, err, errlen))) return rc;
    if (mismatches) *mismatches = c;
    return 0;
}

/* ---- benchmarks ------------------------------------------------------- */

struct timer {
    cudaEvent_t a, b;
    int made;
};

int timer_make(timer *t, const rank_state *r, int rank, char *err, size_t errlen)
{
    t->made = 0;
    cudaError_t e = cudaEventCreate(&t->a);
    if (e != cudaSuccess) return fail(e, rank, r->gpu, "cudaEventCreate", err, errlen);
    e = cudaEventCreate(&t->b);
    if (e != cudaSuccess) {
        (void)cudaEventDestroy(t->a);
        return fail(e, rank, r->gpu, "cudaEventCreate", err, errlen);
    }
    t->made = 1;
    return 0;
}

int timer_free(timer *t, const rank_state *r, int rank, char *err, size_t errlen)
{
    if (!t->made) return 0;
    t->made = 0;
    cudaError_t e1 = cudaEventDestroy(t->a), e2 = cudaEventDestroy(t->b);
    cudaError_t e = e1 != cudaSuccess ? e1 : e2;
    return e == cudaSuccess ? 0 : fail(e, rank, r->gpu, "cudaEventDestroy", err, errlen);
}

/* Checks a sample of the gather's output against what the tokens must hold:
 * first, middle and last token, in the first and last layer's K and V.
 * Returns the rows that differ (or a negative KV_DEV_* code). */
int64_t check_gather(const rank_state *r, int rank, const kv_bench_request *b, const char *d_out, char *err,
                     size_t errlen)
{
    kv_cuda_geom g = geom_of(r);
    const int32_t n = b->num_tokens;
    const int32_t toks[3] = {0, n / 2, n - 1};
    const int lks[2] = {0, g.num_layers * g.kvf - 1};
    char *row = (char *)malloc((size_t)g.slot_bytes);
    if (!row) return kv_errf(err, errlen, KV_DEV_ENOMEM, "gather check: out of host memory");
    int64_t bad = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            const int32_t t = toks[i];
            const int lk = lks[j], l = lk / g.kvf, kv = lk - l * g.kvf;
            const long long off = ((long long)lk * n + t) * g.slot_bytes;
            cudaError_t e = cudaMemcpy(row, d_out + off, (size_t)g.slot_bytes, cudaMemcpyDeviceToHost);
            if (e != cudaSuccess) {
                free(row);
                return fail(e, rank, r->gpu, "reading the gather buffer back", err, errlen);
            }
            const uint64_t tk = kv_token_key(b->tokens[t], t, b->keys[t / g.block_size]);
            for (int h = 0; h < g.heads; h++) {
                const uint64_t f = kv_cuda_row_fingerprint(tk, l, g.first_head + h, kv);
                int differs = 0;
                for (int c = 0; c < g.upr && !differs; c++) {
                    uint32_t w[4];
                    kv_cuda_expected_unit(g.dtype, g.unit_bytes, f, c, w);
                    differs = kv_cuda_unit_differs(row + (long long)h * g.row_bytes + (long long)c * g.unit_bytes,
                                                   g.unit_bytes, w);
                }
                bad += differs;
            }
        }
    free(row);
    return bad;
}

int op_bench(kv_device *d, int rank, const kv_bench_req *q, kv_bench_result *out, char *err, size_t errlen)
{
    cuda_impl *im = impl_of(d);
    int rc = set_rank(im, rank, err, errlen);
    if (rc) return rc;
    rank_state *r = &im->ranks[rank];
    memset(out, 0, sizeof *out);
    out->mismatches = -1;
    if ((rc = need_pool(r, rank, "bench", err, errlen))) return rc;
    if (!q || q->kind < 0 || q->kind >= KV_BENCH_COUNT || q->repeats < 1 || q->repeats > 1000)
        return kv_errf(err, errlen, KV_DEV_EINVAL, "bench: bad request");
    kv_bench_request b;
    if ((rc = kv_bench_request_make(&r->layout, q->num_tokens, &b, err, errlen))) return rc;
    kv_pool_layout one = r->layout;
    one.num_blocks = 1;
    const uint64_t bytes = (uint64_t)b.num_tokens * (kv_pool_layout_bytes(&one) / (uint64_t)one.block_size);
    const kv_bench_kind k = q->kind;
    /* The verify bench reads from past the first block (b.verify_first). */
    const int32_t v0 = k == KV_BENCH_VERIFY ? b.verify_first : 0, nv = b.num_tokens - v0;
    const uint64_t traffic = k == KV_BENCH_MEMCPY || k == KV_BENCH_GATHER ? 2 * bytes
                             : k == KV_BENCH_VERIFY ? bytes / (uint64_t)b.num_tokens * (uint64_t)nv
                                                    : bytes;
    /* Writes and verifies larger than the scratch buffer run in pieces; only the kernels are timed. */
    const int per = k == KV_BENCH_WRITE ? (int)WRITES_PER_PIECE : VERIFY_PER_PIECE;
    const int pieces = k == KV_BENCH_WRITE || k == KV_BENCH_VERIFY ? (nv + per - 1) / per : 1;
    double *ms = (double *)calloc((size_t)q->repeats, sizeof *ms);
    char *buf = NULL;
    timer tm = {};
    int64_t bad = -1;
    const kv_verify_req vr = {b.table, b.keys, b.num_blocks, b.tokens, 0, b.num_tokens};
    kv_cuda_verify_args va = {};
    const kv_cuda_geom g = geom_of(r);
    if (!ms) rc = kv_errf(err, errlen, KV_DEV_ENOMEM, "bench: out of host memory");
    if (!rc && k == KV_BENCH_GATHER && (size_t)b.num_blocks * sizeof(int32_t) > KV_CUDA_SCRATCH_BYTES)
        rc = kv_errf(err, errlen, KV_DEV_EINVAL, "gather bench: %d blocks are more than one table upload holds",
                     (int)b.num_blocks);
    if (!rc && (k == KV_BENCH_MEMSET || k == KV_BENCH_MEMCPY || k == KV_BENCH_GATHER)) {
        cudaError_t e = cudaMalloc((void **)&buf, bytes);
        if (e != cudaSuccess) {
            buf = NULL;
            rc = alloc_fail(e, im, r, rank, "bench buffer", bytes, err, errlen);
        }
    }
    if (!rc) rc = need_scratch(im, r, rank, err, errlen);
    if (!rc) rc = need_count(im, r, rank, err, errlen);
    /* Reads find the bench request's K/V. */
    if (!rc && (k == KV_BENCH_GATHER || k == KV_BENCH_VERIFY)) rc = run_write(im, r, rank, b.writes, (size_t)b.num_tokens, err, errlen);
    if (!rc && k == KV_BENCH_GATHER) {
        cudaError_t e = cudaMemcpy(r->scratch, b.table, (size_t)b.num_blocks * sizeof(int32_t), cudaMemcpyHostToDevice);
        if (e != cudaSuccess) rc = fail(e, rank, r->gpu, "copying the block table to the device", err, errlen);
    }
    if (!rc) rc = timer_make(&tm, r, rank, err, errlen);
    static const char *names[KV_BENCH_COUNT] = {"memset bench", "memcpy bench", "read bench", "write bench",
                                                "gather bench", "verify bench"};
    for (int i = 0; !rc && i <= q->repeats; i++) { /* run 0 untimed: lazy loading, clocks ramping up */
        double total = 0;
        if (k == KV_BENCH_VERIFY) rc = zero_count(r, rank, err, errlen);
        for (int p = 0; !rc && p < pieces; p++) {
            const int first = v0 + p * per, n = v0 + nv - first < per ? v0 + nv - first : per;
            if (k == KV_BENCH_WRITE && (pieces > 1 || i == 0))
                rc = upload_writes(r, rank, b.writes + first, (size_t)n, err, errlen);
            if (k == KV_BENCH_VERIFY && (pieces > 1 || i == 0)) rc = upload_verify(r, rank, &vr, first, n, &va, err, errlen);
            if (rc) break;
            cudaError_t e = cudaEventRecord(tm.a);
            if (e == cudaSuccess) {
                switch (k) {
                case KV_BENCH_MEMSET: e = cudaMemset(buf, i & 0xFF, bytes); break;
                case KV_BENCH_MEMCPY: e = cudaMemcpy(buf, r->pool, bytes, cudaMemcpyDeviceToDevice); break;
                case KV_BENCH_READ:
                    launch_read(r, r->pool, (long long)(bytes / 16), r->count);
                    e = cudaGetLastError();
                    break;
                case KV_BENCH_WRITE:
                    launch_write(r, g, (const kv_slot_write *)r->scratch, n);
                    e = cudaGetLastError();
                    break;
                case KV_BENCH_GATHER:
                    launch_gather(r, g, (const int32_t *)r->scratch, b.num_tokens, buf);
                    e = cudaGetLastError();
                    break;
                default:
                    launch_verify(r, g, va, r->count);
                    e = cudaGetLastError();
                    break;
                }
            }
            if (e == cudaSuccess) e = cudaEventRecord(tm.b);
            if (e == cudaSuccess) e = cudaEventSynchronize(tm.b);
            float t = 0;
            if (e == cudaSuccess) e = cudaEventElapsedTime(&t, tm.a, tm.b);
            if (e != cudaSuccess) rc = fail(e, rank, r->gpu, names[k], err, errlen);
            total += t;
        }
        if (!rc && i > 0) ms[i - 1] = total;
    }
    int rc2 = timer_free(&tm, r, rank, rc ? NULL : err, rc ? 0 : errlen);
    if (!rc) rc = rc2;
    if (!rc && k == KV_BENCH_WRITE) {
        int64_t m = 0;
        rc = op_verify(d, rank, &vr, &m, err, errlen);
        bad = m;
    }
    if (!rc && k == KV_BENCH_VERIFY) rc = read_count(r, rank, &bad, err, errlen);
    if (!rc && k == KV_BENCH_GATHER) {
        int64_t m = check_gather(r, rank, &b, buf, err, errlen);
        if (m < 0) rc = (int)m;
        else bad = m;
    }
    if (buf) {
        cudaError_t e = cudaFree(buf);
        if (!rc && e != cudaSuccess) rc = fail(e, rank, r->gpu, "cudaFree of the bench buffer", err, errlen);
    }
    if (!rc) {
        kv_bench_summarize(ms, q->repeats, traffic, out);
        out->mismatches = bad;
    }
    free(ms);
    kv_bench_request_free(&b);
    return rc;
}

void op_release(kv_device *d)
{
    cuda_impl *im = impl_of(d);
    if (!im) return;
    for (int i = 0; i < im->num_ranks; i++) {
        rank_state *r = &im->ranks[i];
        cudaError_t e = cudaSetDevice(r->gpu);
        if (e != cudaSuccess) {
            defer(im, e, i, "cudaSetDevice");
            continue;
        }
        for (int t = 0; t < KV_CUDA_MAX_TERMS; t++) {
            if (r->terms[t].h && r->terms[t].ptr) defer(im, cudaFree(r->terms[t].ptr), i, "cudaFree of a placeholder");
            memset(&r->terms[t], 0, sizeof r->terms[t]);
        }
        if (r->pool) defer(im, cudaFree(r->pool), i, "cudaFree of the KV cache pool");
        drop_scratch(im, r, i);
        if (r->count) defer(im, cudaFree(r->count), i, "cudaFree of the mismatch counter");
        r->pool = NULL;
        r->pool_bytes = 0;
        r->pool_h = 0;
        r->count = NULL;
        r->pool_alloc_ms = -1;
    }
}

/* The primary contexts stay: they belong to the process (another device
 * opened later reuses them, and the measurement made at first use). */
void op_destroy(kv_device *d)
{
    if (!d) return;
    op_release(d);
    free(d->impl);
    free(d);
}

const kv_device_ops cuda_ops = {
    op_info, op_mem_info, op_reserve, op_alloc_pool, op_free, op_held, op_set_placeholders,
    op_write_kv, op_verify, op_bench, op_release, op_destroy,
};

/* ---- the driver --------------------------------------------------------- */

static_assert(KV_CUDA_ERR_INSUFFICIENT_DRIVER == cudaErrorInsufficientDriver, "kv_cuda.h");
static_assert(KV_CUDA_ERR_NO_DEVICE == cudaErrorNoDevice, "kv_cuda.h");

int drv_count(char *err, size_t errlen)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n < 1) {
        (void)cudaGetLastError();
        /* Whether the driver library is there at all: the runtime says
         * "insufficient driver" for a missing one too. */
        kv_cuda_no_device w = {(int)e, cudaGetErrorString(e), NULL, 0, 0};
        void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        char dlerr[200] = "";
        if (lib) {
            dlclose(lib);
        } else {
            const char *de = dlerror();
            snprintf(dlerr, sizeof dlerr, "%s", de ? de : "libcuda.so.1: cannot open shared object file");
            w.libcuda = dlerr;
        }
        (void)cudaDriverGetVersion(&w.driver_version);
        (void)cudaRuntimeGetVersion(&w.runtime_version);
        (void)cudaGetLastError();
        char why[400];
        return kv_errf(err, errlen, KV_DEV_EDEVICE, "%s", kv_cuda_format_no_device(why, sizeof why, &w));
    }
    return n;
}

/* Peak DRAM bandwidth: the memory clock and bus width CUDA reports, else
 * NVML's; a MIG slice gets the share of its memory in the whole GPU's. */
void measure_peak(int gpu, kv_nvml *nv, const kv_nvml_dev *nd, int have_nd, kv_device_info *info)
{
    int clk = 0, bus = 0;
    double peak = 0;
    const char *how = "";
    if (cudaDeviceGetAttribute(&clk, cudaDevAttrMemoryClockRate, gpu) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus, cudaDevAttrGlobalMemoryBusWidth, gpu) == cudaSuccess && clk > 0 && bus > 0) {
        peak = kv_cuda_peak_gbps(clk, bus);
        how = "memory clock x bus width (CUDA)";
    } else {
        (void)cudaGetLastError();
        unsigned mhz = 0, bits = 0;
        if (nv && have_nd && kv_nvml_memory_clock(nv, nd->parent ? nd->parent : nd->handle, &mhz, &bits) == 0) {
            peak = kv_cuda_peak_gbps(mhz * 1000.0, bits);
            how = "memory clock x bus width (NVML)";
        }
    }
    if (peak > 0 && info->mig[0]) {
        uint64_t used = 0, whole = 0;
        char why[128];
        if (nv && have_nd && nd->parent && kv_nvml_memory(nv, nd->parent, &used, &whole, why, sizeof why) == 0 &&
            whole > 0) {
            peak *= (double)info->total_bytes / (double)whole;
            how = "the MIG slice's share of the GPU's memory clock x bus width";
        } else {
            peak = 0;
            how = "unknown for this MIG slice (NVML cannot read the whole GPU)";
        }
    }
    info->peak_gbps = peak;
    snprintf(info->peak_how, sizeof info->peak_how, "%s", peak > 0 ? how : *how ? how : "not reported");
}

/* Creates the context on one device, loads every kernel and measures it
 * (see kv_device_info). Called once per card per process. */
int drv_measure(int gpu, kv_device_info *info, char *err, size_t errlen)
{
    snprintf(info->backend, sizeof info->backend, "cuda");
    info->context_bytes = -1;
    info->card = gpu;
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, gpu);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return kv_errf(err, errlen, KV_DEV_EDEVICE, "no CUDA device: GPU %d: %s", gpu, cudaGetErrorString(e));
    }
    snprintf(info->name, sizeof info->name, "%.127s", p.name);
    info->cc_major = p.major;
    info->cc_minor = p.minor;
    info->sm_count = p.multiProcessorCount;
    e = cudaDeviceGetPCIBusId(info->pci_bus_id, (int)sizeof info->pci_bus_id, gpu);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        info->pci_bus_id[0] = '\0';
    }
    char gpu_uuid[48], mig_uuid[48];
    kv_cuda_format_uuid(gpu_uuid, sizeof gpu_uuid, "GPU-", (const unsigned char *)p.uuid.bytes);
    kv_cuda_format_uuid(mig_uuid, sizeof mig_uuid, "MIG-", (const unsigned char *)p.uuid.bytes);
    const int named_mig = kv_cuda_mig_profile(info->name, info->mig, sizeof info->mig);

    char nv_why[160] = "", why[160] = "";
    kv_nvml *nv = kv_nvml_open(nv_why, sizeof nv_why);
    kv_nvml_dev nd;
    int have_nd = 0;
    if (nv) {
        const char *uuids[2] = {named_mig ? mig_uuid : gpu_uuid, named_mig ? gpu_uuid : mig_uuid};
        have_nd = kv_nvml_find(nv, uuids, 2, info->pci_bus_id, &nd, why, sizeof why) == 0;
        /* A slice NVML resolved only as its parent GPU: its memory is not ours to read. */
        if (have_nd && named_mig && !nd.is_mig) {
            have_nd = 0;
            snprintf(why, sizeof why, "NVML resolves this MIG slice only as its whole GPU (%s)", nd.how);
        }
        if (have_nd && !named_mig && !nd.is_mig && kv_nvml_mig_mode(nv, nd.handle) == 1) {
            have_nd = 0;
            snprintf(why, sizeof why, "MIG is on for this GPU but CUDA did not name a slice");
        }
    }
    snprintf(info->uuid, sizeof info->uuid, "%s", have_nd && nd.is_mig ? mig_uuid : named_mig ? mig_uuid : gpu_uuid);
    if (have_nd && nd.is_mig && !info->mig[0]) snprintf(info->mig, sizeof info->mig, "MIG slice");
    uint64_t used0 = 0, used1 = 0, nv_total = 0;
    const int before = have_nd && kv_nvml_memory(nv, nd.handle, &used0, &nv_total, why, sizeof why) == 0;

    e = cudaSetDevice(gpu);
    if (e == cudaSuccess) e = cudaFree(0); /* creates the primary context now */
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        kv_nvml_close(nv);
        return kv_errf(err, errlen, KV_DEV_EDEVICE, "no CUDA device: GPU %d: %s", gpu, cudaGetErrorString(e));
    }
    /* Every kernel now, so the context's size includes them and a binary
     * without code for this card says so here. */
    for (size_t i = 0; i < sizeof kernel_table / sizeof kernel_table[0]; i++) {
        cudaFuncAttributes fa;
        e = cudaFuncGetAttributes(&fa, kernel_table[i]);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            kv_nvml_close(nv);
            return kv_errf(err, errlen, KV_DEV_EDEVICE,
                           "GPU %d (%s, sm_%d%d): loading kvlab's kernels failed: %s (%s)%s", gpu, info->name,
                           p.major, p.minor, cudaGetErrorString(e), cudaGetErrorName(e),
                           e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction
                               ? ": rebuild with -DCMAKE_CUDA_ARCHITECTURES set for this card"
                               : "");
        }
    }
    size_t fr = 0, tot = 0;
    e = cudaMemGetInfo(&fr, &tot);
    if (e != cudaSuccess) {
        kv_nvml_close(nv);
        return fail(e, 0, gpu, "cudaMemGetInfo", err, errlen);
    }
    info->total_bytes = tot;
    info->free_bytes = fr;
    if (before && kv_nvml_memory(nv, nd.handle, &used1, &nv_total, why, sizeof why) == 0) {
        info->context_bytes = used1 >= used0 ? (int64_t)(used1 - used0) : 0;
        snprintf(info->context_how, sizeof info->context_how,
                 "NVML used memory of %.100s before and after creating the context", nd.how);
    } else {
        snprintf(info->context_how, sizeof info->context_how, "not measured: %.140s", nv ? why : nv_why);
    }
    measure_peak(gpu, nv, &nd, have_nd, info);
    kv_nvml_close(nv);
    return 0;
}

kv_device *drv_open(int num_ranks, const kv_device_info *rank_info, char *err, size_t errlen)
{
    if (num_ranks < 1 || num_ranks > KV_CUDA_MAX_RANKS) {
        kv_errf(err, errlen, KV_DEV_EINVAL, "CUDA backend: %d ranks (1..%d)", num_ranks, KV_CUDA_MAX_RANKS);
        return NULL;
    }
    cuda_impl *im = (cuda_impl *)calloc(1, sizeof *im);
    kv_device *d = (kv_device *)calloc(1, sizeof *d);
    if (!im || !d) {
        free(im);
        free(d);
        kv_errf(err, errlen, KV_DEV_ENOMEM, "CUDA backend: out of host memory");
        return NULL;
    }
    im->magic = KV_CUDA_MAGIC;
    im->placeholders = 1;
    im->num_ranks = num_ranks;
    for (int r = 0; r < num_ranks; r++) {
        im->ranks[r].gpu = rank_info[r].card;
        im->ranks[r].info = rank_info[r];
        im->ranks[r].pool_alloc_ms = -1;
    }
    cudaError_t e = cudaSetDevice(im->ranks[0].gpu);
    if (e != cudaSuccess) {
        fail(e, 0, im->ranks[0].gpu, "cudaSetDevice", err, errlen);
        free(im);
        free(d);
        return NULL;
    }
    d->ops = &cuda_ops;
    d->name = "cuda";
    d->num_ranks = num_ranks;
    d->impl = im;
    return d;
}

const kv_device_driver cuda_driver = {"cuda", drv_count, drv_measure, drv_open};

} /* namespace */

extern "C" const kv_device_driver *kv_cuda_driver(void)
{
    return &cuda_driver;
}
