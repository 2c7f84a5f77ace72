/* kv_cuda_layout: where a K/V value lives in a rank's pool and the per-thread
 * work of the write, verify and gather kernels, as pure functions that
 * compile for the host (unit tests run them over a host buffer, phase by
 * phase as a CUDA block would) and for kernels.
 *
 * Layout (vLLM's FlashAttention cache, vllm/v1/attention/backends/
 * flash_attn.py get_kv_cache_shape, one tensor per layer, the layers one
 * after another in the rank's single allocation):
 *   layer l: [kv_factor][num_blocks * block_size][num_kv_heads][head_size]
 * so slot s = block * block_size + offset is row s of K (and of V) in every
 * layer, as vLLM's slot mapping indexes key_cache / value_cache.
 *
 * Work split: a kernel item is one token and a chunk of its rows (a row =
 * one (layer, K or V, head) of head_size values; rows ordered layer, K/V,
 * head, so a token's rows of one layer are contiguous). Phase 1: the block's
 * threads compute each row's fingerprint and address once, into shared
 * memory. Phase 2: the threads sweep the chunk's 16-byte units (one value
 * for rows that are not a multiple of 16 bytes), each reading its row's
 * fingerprint from shared memory, so no lane recomputes the 64-bit mix and
 * a warp stores 512 contiguous bytes. */
#ifndef KV_CUDA_LAYOUT_H
#define KV_CUDA_LAYOUT_H

#include <stdint.h>
#include <string.h>

#include "kv_cuda_values.h"
#include "kv_device.h"

/* Rows whose fingerprints and addresses one item keeps in shared memory. */
#define KV_CUDA_CHUNK_ROWS 1024

/* n / d by a multiply and a shift, exact for every n < 2^31 (Granlund and
 * Montgomery's round-up method, as CUTLASS's FastDivmod). */
typedef struct kv_fastdiv {
    uint32_t d, mul, shift;
} kv_fastdiv;

static inline KV_HOST_DEVICE void kv_fastdiv_init(kv_fastdiv *f, uint32_t d)
{
    f->d = d ? d : 1;
    f->mul = 0;
    f->shift = 0;
    if (f->d == 1) return;
    uint32_t s = 0;
    while ((1ull << s) < f->d) s++; /* ceil(log2 d) */
    f->mul = (uint32_t)(((1ull << (31 + s)) + f->d - 1) / f->d);
    f->shift = s - 1;
}

static inline KV_HOST_DEVICE uint32_t kv_fastdiv_q(const kv_fastdiv *f, uint32_t n)
{
    if (f->d == 1) return n;
#ifdef __CUDA_ARCH__
    return __umulhi(n, f->mul) >> f->shift;
#else
    return (uint32_t)(((uint64_t)n * f->mul) >> 32) >> f->shift;
#endif
}

/* A rank's pool as the kernels see it (bytes). */
typedef struct kv_cuda_geom {
    char *base;
    long long layer_stride;  /* from layer l to l + 1 */
    long long kv_stride;     /* from K to V inside a layer */
    long long slot_bytes;    /* one slot's row of a layer: heads x head_size values */
    int num_layers, heads, kvf, head_size, row_bytes, block_size, dtype, first_head;
    int unit_bytes;          /* 16 when a head's row is a multiple of 16 bytes, else one value */
    int upr;                 /* units per row */
    int rows;                /* rows per token: layers x kv_factor x heads */
    int chunk_rows, chunks;  /* rows per item (<= KV_CUDA_CHUNK_ROWS), items per token */
    kv_fastdiv upr_div, heads_div;
} kv_cuda_geom;

static inline KV_HOST_DEVICE void kv_cuda_geom_init(kv_cuda_geom *g, char *base, const kv_pool_layout *l)
{
    const int b = kv_dtype_bytes(l->cache_dtype);
    g->base = base;
    g->row_bytes = l->head_size * b;
    g->slot_bytes = (long long)l->num_kv_heads * g->row_bytes;
    g->kv_stride = (long long)l->num_blocks * l->block_size * g->slot_bytes;
    g->layer_stride = g->kv_stride * l->kv_factor;
    g->num_layers = l->num_layers;
    g->heads = l->num_kv_heads;
    g->kvf = l->kv_factor;
    g->head_size = l->head_size;
    g->block_size = l->block_size;
    g->dtype = l->cache_dtype;
    g->first_head = l->first_kv_head;
    g->unit_bytes = g->row_bytes % 16 == 0 ? 16 : b;
    g->upr = g->row_bytes / g->unit_bytes;
    g->rows = l->num_layers * l->kv_factor * l->num_kv_heads;
    g->chunk_rows = g->rows < KV_CUDA_CHUNK_ROWS ? g->rows : KV_CUDA_CHUNK_ROWS;
    g->chunks = (g->rows + g->chunk_rows - 1) / g->chunk_rows;
    kv_fastdiv_init(&g->upr_div, (uint32_t)g->upr);
    kv_fastdiv_init(&g->heads_div, (uint32_t)g->heads);
}

/* Byte offset of element 0 of (layer, K or V, slot, head). */
static inline KV_HOST_DEVICE long long kv_cuda_row_offset(const kv_cuda_geom *g, int layer, int kv,
                                                          long long slot, int head)
{
    return (long long)layer * g->layer_stride + (long long)kv * g->kv_stride + slot * g->slot_bytes +
           (long long)head * g->row_bytes;
}

/* Row index -> (layer, K or V, local head). */
static inline KV_HOST_DEVICE void kv_cuda_row_split(const kv_cuda_geom *g, int row, int *layer, int *kv, int *head)
{
    const int lk = (int)kv_fastdiv_q(&g->heads_div, (uint32_t)row);
    *head = row - lk * g->heads;
    *layer = g->kvf == 2 ? lk >> 1 : lk;
    *kv = lk - *layer * g->kvf;
}

/* Expected bits of unit col of a row with fingerprint f: 16 bytes as four
 * words, or one value in w[0]. */
static inline KV_HOST_DEVICE void kv_cuda_expected_unit(int dtype, int unit_bytes, uint64_t f, int col,
                                                        uint32_t w[4])
{
    if (unit_bytes == 16) {
        kv_cuda_pack16(dtype, f, col * (16 / kv_dtype_bytes(dtype)), w);
    } else {
        w[0] = kv_cuda_value_bits(dtype, kv_cuda_value_byte(f, col));
        w[1] = w[2] = w[3] = 0;
    }
}

static inline KV_HOST_DEVICE void kv_cuda_store_unit(char *p, int unit_bytes, const uint32_t w[4])
{
#ifdef __CUDA_ARCH__
    if (unit_bytes == 16) {
        *(uint4 *)p = make_uint4(w[0], w[1], w[2], w[3]);
        return;
    }
#endif
    if (unit_bytes == 16) memcpy(p, w, 16);
    else if (unit_bytes == 1) *(uint8_t *)p = (uint8_t)w[0];
    else if (unit_bytes == 2) *(uint16_t *)p = (uint16_t)w[0];
    else *(uint32_t *)p = w[0];
}

static inline KV_HOST_DEVICE int kv_cuda_unit_differs(const char *p, int unit_bytes, const uint32_t w[4])
{
#ifdef __CUDA_ARCH__
    if (unit_bytes == 16) {
        const uint4 g = *(const uint4 *)p;
        return g.x != w[0] || g.y != w[1] || g.z != w[2] || g.w != w[3];
    }
#endif
    if (unit_bytes == 16) {
        uint32_t g[4];
        memcpy(g, p, 16);
        return g[0] != w[0] || g[1] != w[1] || g[2] != w[2] || g[3] != w[3];
    }
    if (unit_bytes == 1) return *(const uint8_t *)p != (uint8_t)w[0];
    if (unit_bytes == 2) return *(const uint16_t *)p != (uint16_t)w[0];
    return *(const uint32_t *)p != w[0];
}

/* Phase 1 of an item: rows [r0, r0 + nr) of the token with token_key in
 * slot; thread tid of nthreads fills s_fp[j] (the row's fingerprint, V
 * salted) and s_off[j] (its byte offset) for its rows j. */
static inline KV_HOST_DEVICE void kv_cuda_item_rows(const kv_cuda_geom *g, uint64_t token_key, long long slot,
                                                    int r0, int nr, uint64_t *s_fp, long long *s_off, int tid,
                                                    int nthreads)
{
    for (int j = tid; j < nr; j += nthreads) {
        int l, kv, h;
        kv_cuda_row_split(g, r0 + j, &l, &kv, &h);
        s_fp[j] = kv_cuda_row_fingerprint(token_key, l, g->first_head + h, kv);
        s_off[j] = kv_cuda_row_offset(g, l, kv, slot, h);
    }
}

/* Phase 2 of a write item: thread tid stores its units of the nr rows. */
static inline KV_HOST_DEVICE void kv_cuda_item_write(const kv_cuda_geom *g, int dtype, int unit_bytes, int nr,
                                                     const uint64_t *s_fp, const long long *s_off, int tid,
                                                     int nthreads)
{
    const int units = nr * g->upr;
    for (int u = tid; u < units; u += nthreads) {
        const int row = (int)kv_fastdiv_q(&g->upr_div, (uint32_t)u), col = u - row * g->upr;
        uint32_t w[4];
        kv_cuda_expected_unit(dtype, unit_bytes, s_fp[row], col, w);
        kv_cuda_store_unit(g->base + s_off[row] + (long long)col * unit_bytes, unit_bytes, w);
    }
}

/* Phase 2 of a verify item: thread tid compares its units and sets
 * s_bad[row] = 1 for a row with any differing unit. */
static inline KV_HOST_DEVICE void kv_cuda_item_check(const kv_cuda_geom *g, int dtype, int unit_bytes, int nr,
                                                     const uint64_t *s_fp, const long long *s_off,
                                                     unsigned int *s_bad, int tid, int nthreads)
{
    const int units = nr * g->upr;
    for (int u = tid; u < units; u += nthreads) {
        const int row = (int)kv_fastdiv_q(&g->upr_div, (uint32_t)u), col = u - row * g->upr;
        uint32_t w[4];
        kv_cuda_expected_unit(dtype, unit_bytes, s_fp[row], col, w);
        if (kv_cuda_unit_differs(g->base + s_off[row] + (long long)col * unit_bytes, unit_bytes, w))
            s_bad[row] = 1u;
    }
}

/* The copy unit of a gather: the largest of 16, 4, 2, 1 bytes that divides a slot's row. */
static inline KV_HOST_DEVICE int kv_cuda_gather_unit(const kv_cuda_geom *g)
{
    return g->slot_bytes % 16 == 0 ? 16 : g->slot_bytes % 4 == 0 ? 4 : g->slot_bytes % 2 == 0 ? 2 : 1;
}

/* A gather's items: (table block b, layer-K/V lk) for b < blocks of ntok tokens. */
static inline KV_HOST_DEVICE long long kv_cuda_gather_items(const kv_cuda_geom *g, int32_t ntok)
{
    return (long long)((ntok + g->block_size - 1) / g->block_size) * g->num_layers * g->kvf;
}

/* Item it of a gather: copies the block's slots of one layer's K or V from
 * the pool (through the table) to out, laid out [layer][K/V][token][head]
 * [head_size] for tokens 0..ntok-1, as attention reads a sequence's
 * context. Thread tid of nthreads copies its units. */
static inline KV_HOST_DEVICE void kv_cuda_gather_item(const kv_cuda_geom *g, int unit, const int32_t *table,
                                                      int32_t ntok, char *out, long long it, int tid, int nthreads)
{
    const int lkn = g->num_layers * g->kvf;
    const long long b = it / lkn;
    const int lk = (int)(it - b * lkn), l = lk / g->kvf, kv = lk - l * g->kvf;
    const long long t0 = b * g->block_size;
    const long long nt = ntok - t0 < g->block_size ? ntok - t0 : g->block_size;
    const char *src = g->base + kv_cuda_row_offset(g, l, kv, (long long)table[b] * g->block_size, 0);
    char *dst = out + ((long long)lk * ntok + t0) * g->slot_bytes;
    const long long n = nt * g->slot_bytes / unit;
    for (long long i = tid; i < n; i += nthreads) {
#ifdef __CUDA_ARCH__
        if (unit == 16) ((uint4 *)dst)[i] = ((const uint4 *)src)[i];
        else if (unit == 4) ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i];
        else if (unit == 2) ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i];
        else dst[i] = src[i];
        continue;
#endif
        memcpy(dst + i * unit, src + i * unit, (size_t)unit);
    }
}

#endif
