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

/* ---- the kernels' bodies, shared with the GPU-free emulator ------------
 *
 * Each kernel is one call of kv_cuda_write_block, kv_cuda_verify_block or
 * kv_cuda_gather_block per thread; the unit tests (tests/unit/test_cuda.c)
 * call the same functions once per CUDA block, so they run the kernels'
 * own item loops, index arithmetic and shared-memory layout. A call runs the
 * threads [tid0, tid1) of one block: on the device tid1 = tid0 + 1 (the
 * thread itself), on the host tid0 = 0 and tid1 = nthreads. Every
 * per-thread section loops over those threads (KV_CUDA_EACH_THREAD), so on
 * the host a section is finished by every thread before the barrier that
 * follows it (KV_CUDA_SYNC: __syncthreads on the device, nothing on the
 * host), which is what the barrier guarantees on the device. */
typedef struct kv_cuda_blk {
    long long block, nblocks; /* blockIdx.x, gridDim.x */
    int tid0, tid1, nthreads; /* the threads this call runs; blockDim.x */
} kv_cuda_blk;

#ifdef __CUDA_ARCH__
#define KV_CUDA_SYNC() __syncthreads()
#else
#define KV_CUDA_SYNC() ((void)0)
#endif
#define KV_CUDA_EACH_THREAD(b, tid) for (int tid = (b)->tid0; tid < (b)->tid1; tid++)

/* Independent loads each thread keeps in flight in verify and gather, so a
 * thread waits for DRAM once per KV_CUDA_ILP units instead of once per unit. */
#define KV_CUDA_ILP 4

static inline KV_HOST_DEVICE void kv_cuda_add_u32(unsigned int *p, unsigned int v)
{
#ifdef __CUDA_ARCH__
    atomicAdd(p, v);
#else
    *p += v;
#endif
}

static inline KV_HOST_DEVICE void kv_cuda_add_u64(unsigned long long *p, unsigned long long v)
{
#ifdef __CUDA_ARCH__
    atomicAdd(p, v);
#else
    *p += v;
#endif
}

/* One unit (16 bytes as four words, or one value in w[0]) read from p
 * through the read-only cache; the words a value does not fill are 0, as
 * kv_cuda_expected_unit leaves them. */
static inline KV_HOST_DEVICE void kv_cuda_load_unit(const char *p, int unit_bytes, uint32_t w[4])
{
#ifdef __CUDA_ARCH__
    if (unit_bytes == 16) {
        const uint4 v = __ldg((const uint4 *)p);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
        return;
    }
#endif
    w[1] = w[2] = w[3] = 0;
    if (unit_bytes == 16) memcpy(w, p, 16);
    else if (unit_bytes == 1) w[0] = *(const uint8_t *)p;
    else if (unit_bytes == 2) w[0] = *(const uint16_t *)p;
    else w[0] = *(const uint32_t *)p;
}

static inline KV_HOST_DEVICE int kv_cuda_words_differ(const uint32_t a[4], const uint32_t b[4])
{
    return a[0] != b[0] || a[1] != b[1] || a[2] != b[2] || a[3] != b[3];
}

/* Shared memory of a write or verify block: the item's slot and token key
 * (set by thread 0), then per row of the chunk its fingerprint, its byte
 * offset and its mismatch flag, then the block's mismatch count. */
typedef struct kv_cuda_item_hdr {
    long long slot;
    uint64_t token_key;
} kv_cuda_item_hdr;

typedef struct kv_cuda_smem {
    kv_cuda_item_hdr *hdr;
    uint64_t *fp;       /* [chunk_rows] */
    long long *off;     /* [chunk_rows] */
    unsigned int *bad;  /* [chunk_rows] */
    unsigned int *count;
} kv_cuda_smem;

/* Bytes of dynamic shared memory kv_cuda_smem_carve lays out for g. */
static inline KV_HOST_DEVICE size_t kv_cuda_smem_bytes(const kv_cuda_geom *g)
{
    return sizeof(kv_cuda_item_hdr) + (size_t)g->chunk_rows * (sizeof(uint64_t) + sizeof(long long)) +
           (size_t)g->chunk_rows * sizeof(unsigned int) + sizeof(unsigned int);
}

static inline KV_HOST_DEVICE void kv_cuda_smem_carve(const kv_cuda_geom *g, void *base, kv_cuda_smem *s)
{
    s->hdr = (kv_cuda_item_hdr *)base;
    s->fp = (uint64_t *)(s->hdr + 1);
    s->off = (long long *)(s->fp + g->chunk_rows);
    s->bad = (unsigned int *)(s->off + g->chunk_rows);
    s->count = s->bad + g->chunk_rows;
}

/* Item it of a write or verify: its token (index into the call's list), first row and rows. */
static inline KV_HOST_DEVICE void kv_cuda_item_span(const kv_cuda_geom *g, long long it, long long *t, int *r0,
                                                    int *nr)
{
    *t = g->chunks == 1 ? it : it / g->chunks;
    *r0 = (int)(it - *t * g->chunks) * g->chunk_rows;
    *nr = g->rows - *r0 < g->chunk_rows ? g->rows - *r0 : g->chunk_rows;
}

/* Rows [r0, r0 + nr) of the item in s->hdr: thread tid fills s->fp[j] (the
 * row's fingerprint, V salted) and s->off[j] (its byte offset) for its rows
 * j, and clears their flags. */
static inline KV_HOST_DEVICE void kv_cuda_item_rows(const kv_cuda_geom *g, const kv_cuda_smem *s, int r0, int nr,
                                                    int tid, int nthreads)
{
    const uint64_t tk = s->hdr->token_key;
    const long long slot = s->hdr->slot;
    for (int j = tid; j < nr; j += nthreads) {
        int l, kv, h;
        kv_cuda_row_split(g, r0 + j, &l, &kv, &h);
        s->fp[j] = kv_cuda_row_fingerprint(tk, l, g->first_head + h, kv);
        s->off[j] = kv_cuda_row_offset(g, l, kv, slot, h);
        s->bad[j] = 0u;
    }
}

/* The write kernel's block: writes[0..n) into their slots, an item per
 * (token, chunk of its rows), items spread over the blocks grid-stride. */
static inline KV_HOST_DEVICE void kv_cuda_write_block(const kv_cuda_geom *g, int dtype, int unit_bytes,
                                                      const kv_slot_write *writes, long long n, void *smem,
                                                      const kv_cuda_blk *b)
{
    kv_cuda_smem s;
    kv_cuda_smem_carve(g, smem, &s);
    const long long items = n * g->chunks;
    for (long long it = b->block; it < items; it += b->nblocks) {
        long long t;
        int r0, nr;
        kv_cuda_item_span(g, it, &t, &r0, &nr);
        KV_CUDA_EACH_THREAD(b, tid)
        if (tid == 0) { /* the item's write, read once */
            const kv_slot_write w = writes[t];
            s.hdr->slot = w.slot;
            s.hdr->token_key = kv_token_key(w.token_id, w.position, w.parent);
        }
        KV_CUDA_SYNC();
        KV_CUDA_EACH_THREAD(b, tid) kv_cuda_item_rows(g, &s, r0, nr, tid, b->nthreads);
        KV_CUDA_SYNC();
        const int units = nr * g->upr;
        KV_CUDA_EACH_THREAD(b, tid)
        for (int u = tid; u < units; u += b->nthreads) {
            const int row = (int)kv_fastdiv_q(&g->upr_div, (uint32_t)u), col = u - row * g->upr;
            uint32_t w[4];
            kv_cuda_expected_unit(dtype, unit_bytes, s.fp[row], col, w);
            kv_cuda_store_unit(g->base + s.off[row] + (long long)col * unit_bytes, unit_bytes, w);
        }
        KV_CUDA_SYNC(); /* the next item overwrites the header and rows */
    }
}

/* What the verify kernel reads: positions first .. first + n - 1 of a
 * request. table[i] and keys[i] are the request's block table entry and
 * parent key of block table_first + i (a call may get the table from a later
 * block on); tokens[i] is the token at position first + i. */
typedef struct kv_cuda_verify_args {
    const int32_t *table;
    const uint64_t *keys;
    const int32_t *tokens;
    int first, n, table_first;
} kv_cuda_verify_args;

/* The table index of a position: its block in the request, less the first
 * block the call was given. */
static inline KV_HOST_DEVICE int kv_cuda_table_index(const kv_cuda_geom *g, const kv_cuda_verify_args *a, int pos)
{
    return pos / g->block_size - a->table_first;
}

/* The verify kernel's block: reads every position back and adds to *count
 * the (token, layer, head, K or V) rows with any differing value, as the
 * host backend counts (a wrong token = every row). Each thread keeps
 * KV_CUDA_ILP loads in flight before comparing. */
static inline KV_HOST_DEVICE void kv_cuda_verify_block(const kv_cuda_geom *g, int dtype, int unit_bytes,
                                                       const kv_cuda_verify_args *a, unsigned long long *count,
                                                       void *smem, const kv_cuda_blk *b)
{
    kv_cuda_smem s;
    kv_cuda_smem_carve(g, smem, &s);
    KV_CUDA_EACH_THREAD(b, tid)
    if (tid == 0) *s.count = 0u;
    const long long items = (long long)a->n * g->chunks;
    for (long long it = b->block; it < items; it += b->nblocks) {
        long long t;
        int r0, nr;
        kv_cuda_item_span(g, it, &t, &r0, &nr);
        KV_CUDA_EACH_THREAD(b, tid)
        if (tid == 0) { /* the table entry and key, read once per item */
            const int pos = a->first + (int)t, bi = kv_cuda_table_index(g, a, pos);
            s.hdr->slot = (long long)a->table[bi] * g->block_size + pos % g->block_size;
            s.hdr->token_key = kv_token_key(a->tokens[t], pos, a->keys[bi]);
        }
        KV_CUDA_SYNC();
        KV_CUDA_EACH_THREAD(b, tid) kv_cuda_item_rows(g, &s, r0, nr, tid, b->nthreads);
        KV_CUDA_SYNC();
        const int units = nr * g->upr, step = b->nthreads;
        KV_CUDA_EACH_THREAD(b, tid)
        for (int u0 = tid; u0 < units; u0 += KV_CUDA_ILP * step) {
            uint32_t got[KV_CUDA_ILP][4];
            int row[KV_CUDA_ILP], col[KV_CUDA_ILP];
            for (int k = 0; k < KV_CUDA_ILP; k++) { /* the loads first: they do not wait on each other */
                const int u = u0 + k * step;
                row[k] = u < units ? (int)kv_fastdiv_q(&g->upr_div, (uint32_t)u) : -1;
                col[k] = u - row[k] * g->upr;
                if (row[k] >= 0)
                    kv_cuda_load_unit(g->base + s.off[row[k]] + (long long)col[k] * unit_bytes, unit_bytes, got[k]);
            }
            for (int k = 0; k < KV_CUDA_ILP; k++) {
                if (row[k] < 0) continue;
                uint32_t w[4];
                kv_cuda_expected_unit(dtype, unit_bytes, s.fp[row[k]], col[k], w);
                if (kv_cuda_words_differ(got[k], w)) s.bad[row[k]] = 1u;
            }
        }
        KV_CUDA_SYNC();
        KV_CUDA_EACH_THREAD(b, tid)
        {
            unsigned int mine = 0;
            for (int j = tid; j < nr; j += b->nthreads) mine += s.bad[j];
            if (mine) kv_cuda_add_u32(s.count, mine);
        }
        KV_CUDA_SYNC(); /* the next item overwrites the header, rows and flags */
    }
    KV_CUDA_SYNC();
    KV_CUDA_EACH_THREAD(b, tid)
    if (tid == 0 && *s.count) kv_cuda_add_u64(count, *s.count);
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

/* Shared memory of a gather block: the item's source offset in the pool. */
#define KV_CUDA_GATHER_SMEM ((size_t)sizeof(long long))

static inline KV_HOST_DEVICE void kv_cuda_copy_units(char *dst, const char *src, int unit, long long i0, long long n,
                                                     int step)
{
    if (unit == 16) { /* KV_CUDA_ILP loads in flight, then their stores */
        uint32_t v[KV_CUDA_ILP][4];
        for (int k = 0; k < KV_CUDA_ILP; k++)
            if (i0 + (long long)k * step < n) kv_cuda_load_unit(src + (i0 + (long long)k * step) * 16, 16, v[k]);
        for (int k = 0; k < KV_CUDA_ILP; k++)
            if (i0 + (long long)k * step < n) kv_cuda_store_unit(dst + (i0 + (long long)k * step) * 16, 16, v[k]);
        return;
    }
    for (int k = 0; k < KV_CUDA_ILP; k++) {
        const long long i = i0 + (long long)k * step;
        if (i >= n) break;
        if (unit == 4) ((uint32_t *)dst)[i] = ((const uint32_t *)src)[i];
        else if (unit == 2) ((uint16_t *)dst)[i] = ((const uint16_t *)src)[i];
        else dst[i] = src[i];
    }
}

/* The paged gather kernel's block: item it = (table block, layer's K or V)
 * copies that block's slots from the pool (through the table) to out, laid
 * out [layer][K/V][token][head][head_size] for tokens 0..ntok-1, as
 * attention reads a sequence's context. Thread 0 reads the table entry once
 * per item; each thread keeps KV_CUDA_ILP 16-byte loads in flight. */
static inline KV_HOST_DEVICE void kv_cuda_gather_block(const kv_cuda_geom *g, int unit, const int32_t *table,
                                                       int32_t ntok, char *out, void *smem, const kv_cuda_blk *b)
{
    long long *s_src = (long long *)smem;
    const int lkn = g->num_layers * g->kvf;
    const long long items = kv_cuda_gather_items(g, ntok);
    for (long long it = b->block; it < items; it += b->nblocks) {
        const long long blk = it / lkn;
        const int lk = (int)(it - blk * lkn), l = lk / g->kvf, kv = lk - l * g->kvf;
        KV_CUDA_EACH_THREAD(b, tid)
        if (tid == 0) *s_src = kv_cuda_row_offset(g, l, kv, (long long)table[blk] * g->block_size, 0);
        KV_CUDA_SYNC();
        const long long t0 = blk * g->block_size;
        const long long nt = ntok - t0 < g->block_size ? ntok - t0 : g->block_size;
        const char *src = g->base + *s_src;
        char *dst = out + ((long long)lk * ntok + t0) * g->slot_bytes;
        const long long n = nt * g->slot_bytes / unit;
        KV_CUDA_EACH_THREAD(b, tid)
        for (long long i0 = tid; i0 < n; i0 += (long long)KV_CUDA_ILP * b->nthreads)
            kv_cuda_copy_units(dst, src, unit, i0, n, b->nthreads);
        KV_CUDA_SYNC(); /* the next item overwrites the source offset */
    }
}

/* The read roofline's block: reads n 16-byte units of src with
 * KV_CUDA_ILP loads in flight per thread, folding them into *sink (xor), so
 * the reads cannot be optimised away. A bandwidth reference only. */
static inline KV_HOST_DEVICE void kv_cuda_read_block(const char *src, long long n, unsigned long long *sink,
                                                     const kv_cuda_blk *b)
{
    KV_CUDA_EACH_THREAD(b, tid)
    {
        uint32_t acc = 0;
        const long long step = (long long)b->nblocks * b->nthreads;
        for (long long i0 = b->block * b->nthreads + tid; i0 < n; i0 += KV_CUDA_ILP * step) {
            uint32_t v[KV_CUDA_ILP][4];
            for (int k = 0; k < KV_CUDA_ILP; k++)
                if (i0 + k * step < n) kv_cuda_load_unit(src + (i0 + k * step) * 16, 16, v[k]);
            for (int k = 0; k < KV_CUDA_ILP; k++)
                if (i0 + k * step < n) acc ^= v[k][0] ^ v[k][1] ^ v[k][2] ^ v[k][3];
        }
        if (acc == 0x9E3779B9u) kv_cuda_add_u64(sink, 1); /* almost never: keeps the loads */
    }
}

#endif
