/* kv_cuda_layout: where a K/V value lives in a rank's pool and the per-thread
 * work of the write and verify kernels, as pure functions that compile for
 * the host (unit tests run them over a host buffer) and for kernels.
 *
 * Layout (vLLM's FlashAttention cache, vllm/v1/attention/backends/
 * flash_attn.py get_kv_cache_shape, one tensor per layer, the layers one
 * after another in the rank's single allocation):
 *   layer l: [kv_factor][num_blocks * block_size][num_kv_heads][head_size]
 * so slot s = block * block_size + offset is row s of K (and of V) in every
 * layer, as vLLM's slot mapping indexes key_cache / value_cache. */
#ifndef KV_CUDA_LAYOUT_H
#define KV_CUDA_LAYOUT_H

#include <stdint.h>
#include <string.h>

#include "kv_cuda_values.h"
#include "kv_device.h"

/* A rank's pool as the kernels see it (bytes). */
typedef struct kv_cuda_geom {
    char *base;
    long long layer_stride;  /* from layer l to l + 1 */
    long long kv_stride;     /* from K to V inside a layer */
    long long slot_bytes;    /* one slot's row: heads x head_size values */
    int num_layers, heads, kvf, head_size, row_bytes, block_size, dtype;
    int unit_bytes;          /* 16 when a head's row is a multiple of 16 bytes, else one value */
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
    g->unit_bytes = g->row_bytes % 16 == 0 ? 16 : b;
}

/* Byte offset of element 0 of (layer, K or V, slot, head). */
static inline KV_HOST_DEVICE long long kv_cuda_row_offset(const kv_cuda_geom *g, int layer, int kv,
                                                          long long slot, int head)
{
    return (long long)layer * g->layer_stride + (long long)kv * g->kv_stride + slot * g->slot_bytes +
           (long long)head * g->row_bytes;
}

/* Expected bits of one unit starting at element e0 of a row with fingerprint
 * f: 16 bytes as four words, or one value in w[0]. */
static inline KV_HOST_DEVICE void kv_cuda_expected_unit(int dtype, int unit_bytes, uint64_t f, int32_t e0,
                                                        uint32_t w[4])
{
    if (unit_bytes == 16) {
        kv_cuda_pack16(dtype, f, e0, w);
    } else {
        w[0] = kv_cuda_value_bits(dtype, kv_cuda_value_byte(f, e0));
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

/* Units in one layer of one slot: kv_factor x heads x units per head row.
 * The write kernel gives each thread cells of this range. */
static inline KV_HOST_DEVICE int kv_cuda_cells(const kv_cuda_geom *g)
{
    return g->kvf * g->heads * (g->row_bytes / g->unit_bytes);
}

/* Writes cell u (0 <= u < kv_cuda_cells) of one token in every layer. dtype
 * and unit_bytes are passed separately so kernels can give compile-time
 * constants and let the compiler fold the branches. */
static inline KV_HOST_DEVICE void kv_cuda_write_cell(const kv_cuda_geom *g, int dtype, int unit_bytes,
                                                     const kv_slot_write *s, int u)
{
    const int per_row = g->row_bytes / unit_bytes;
    const int row = u / per_row, col = u - row * per_row;
    const int kv = row >= g->heads ? 1 : 0, h = row - kv * g->heads;
    const int32_t e0 = col * (unit_bytes / kv_dtype_bytes(dtype));
    char *p = g->base + kv_cuda_row_offset(g, 0, kv, s->slot, h) + (long long)col * unit_bytes;
    for (int l = 0; l < g->num_layers; l++, p += g->layer_stride) {
        uint32_t w[4];
        kv_cuda_expected_unit(dtype, unit_bytes, kv_cuda_row_fingerprint(s->token_id, s->position, l, h, kv), e0, w);
        kv_cuda_store_unit(p, unit_bytes, w);
    }
}

/* Whether unit j (0 <= j < kv_factor x units per row) of (token at
 * position pos in slot, layer, head) differs from what it must hold; *kv
 * says whether j is in K (0) or V (1). */
static inline KV_HOST_DEVICE int kv_cuda_check_unit(const kv_cuda_geom *g, int dtype, int unit_bytes,
                                                    long long slot, int32_t token_id, int32_t pos, int layer,
                                                    int head, int j, int *kv)
{
    const int per_row = g->row_bytes / unit_bytes;
    const int c = j >= per_row ? 1 : 0, col = j - c * per_row;
    uint32_t w[4];
    kv_cuda_expected_unit(dtype, unit_bytes, kv_cuda_row_fingerprint(token_id, pos, layer, head, c),
                          col * (unit_bytes / kv_dtype_bytes(dtype)), w);
    *kv = c;
    return kv_cuda_unit_differs(g->base + kv_cuda_row_offset(g, layer, c, slot, head) + (long long)col * unit_bytes,
                                unit_bytes, w);
}

#endif
