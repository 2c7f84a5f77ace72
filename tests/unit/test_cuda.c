/* The CUDA backend's host-side pieces, runnable without a GPU: the dtype
 * conversions the kernels store (bf16, fp16, both fp8 formats, fp32, int8),
 * the fast division and the kernels' per-thread code run on a host buffer
 * block by block as a GPU would, the OOM message, MIG names and peak
 * bandwidth. With a device present (tests/gpu/check.sh runs this binary
 * there) the last tests also write, read back and gather real blocks in
 * every dtype and run the host/device parity trace. */
#include <dlfcn.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "kv_cuda.h"
#include "kv_cuda_layout.h"
#include "kv_cuda_values.h"
#include "kv_device.h"
#include "kv_device_host.h"
#include "kv_device_parity.h"

static void test_e4m3_known_values(void **state)
{
    (void)state;
    assert_int_equal(kv_cuda_f32_to_e4m3(0.0f), 0x00);
    assert_int_equal(kv_cuda_f32_to_e4m3(-0.0f), 0x80);
    assert_int_equal(kv_cuda_f32_to_e4m3(1.0f), 0x38);
    assert_int_equal(kv_cuda_f32_to_e4m3(-1.0f), 0xB8);
    assert_int_equal(kv_cuda_f32_to_e4m3(0.5f), 0x30);
    assert_int_equal(kv_cuda_f32_to_e4m3(2.0f), 0x40);
    assert_int_equal(kv_cuda_f32_to_e4m3(1.125f), 0x39);
    assert_int_equal(kv_cuda_f32_to_e4m3(15.0f), 0x57);
    assert_int_equal(kv_cuda_f32_to_e4m3(448.0f), 0x7E);   /* largest finite */
    assert_int_equal(kv_cuda_f32_to_e4m3(-448.0f), 0xFE);
    /* round to nearest even on ties */
    assert_int_equal(kv_cuda_f32_to_e4m3(1.0625f), 0x38);  /* between 1.0 and 1.125 -> even 1.0 */
    assert_int_equal(kv_cuda_f32_to_e4m3(1.1875f), 0x3A);  /* between 1.125 and 1.25 -> even 1.25 */
    assert_int_equal(kv_cuda_f32_to_e4m3(15.5f), 0x58);    /* between 15 and 16 -> 16 */
    assert_int_equal(kv_cuda_f32_to_e4m3(1.06f), 0x38);
    assert_int_equal(kv_cuda_f32_to_e4m3(1.07f), 0x39);
    /* saturation (no infinity in e4m3fn) and NaN */
    assert_int_equal(kv_cuda_f32_to_e4m3(500.0f), 0x7E);
    assert_int_equal(kv_cuda_f32_to_e4m3(-1e9f), 0xFE);
    assert_int_equal(kv_cuda_f32_to_e4m3(INFINITY), 0x7E);
    assert_int_equal(kv_cuda_f32_to_e4m3(NAN) & 0x7F, 0x7F);
    /* normals down to 2^-6, subnormals in steps of 2^-9 */
    assert_int_equal(kv_cuda_f32_to_e4m3(0.015625f), 0x08);           /* 2^-6 */
    assert_int_equal(kv_cuda_f32_to_e4m3(7.0f / 512.0f), 0x07);
    assert_int_equal(kv_cuda_f32_to_e4m3(1.0f / 512.0f), 0x01);       /* 2^-9 */
    assert_int_equal(kv_cuda_f32_to_e4m3(1.0f / 1024.0f), 0x00);      /* tie -> even 0 */
    assert_int_equal(kv_cuda_f32_to_e4m3(1.5f / 1024.0f), 0x01);
    assert_int_equal(kv_cuda_f32_to_e4m3(15.5f / 1024.0f), 0x08);     /* 7.75 x 2^-9 -> 2^-6 */
    assert_true(kv_cuda_e4m3_to_f32(0x7E) == 448.0f);
    assert_true(kv_cuda_e4m3_to_f32(0x01) == 1.0f / 512.0f);
    assert_true(kv_cuda_e4m3_to_f32(0xB8) == -1.0f);
    assert_true(isnan(kv_cuda_e4m3_to_f32(0x7F)));
}

static void test_e4m3_round_trip(void **state)
{
    (void)state;
    for (int b = 0; b < 256; b++) {
        if ((b & 0x7F) == 0x7F) continue; /* NaN */
        float v = kv_cuda_e4m3_to_f32((uint8_t)b);
        assert_int_equal(kv_cuda_f32_to_e4m3(v), b);
    }
}

static void test_f16_bf16_known_values(void **state)
{
    (void)state;
    assert_int_equal(kv_cuda_f32_to_f16(1.0f), 0x3C00);
    assert_int_equal(kv_cuda_f32_to_f16(-2.0f), 0xC000);
    assert_int_equal(kv_cuda_f32_to_f16(1.0f / 3.0f), 0x3555);
    assert_int_equal(kv_cuda_f32_to_f16(65504.0f), 0x7BFF);
    assert_int_equal(kv_cuda_f32_to_f16(65520.0f), 0x7C00); /* rounds up to inf */
    assert_int_equal(kv_cuda_f32_to_f16(0x1p-24f), 0x0001);  /* smallest subnormal */
    assert_int_equal(kv_cuda_f32_to_f16(0x1p-14f), 0x0400);  /* smallest normal */
    assert_int_equal(kv_cuda_f32_to_f16(0x1p-26f), 0x0000);
    assert_int_equal(kv_cuda_f32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(kv_cuda_f32_to_bf16(-2.0f), 0xC000);
    assert_int_equal(kv_cuda_f32_to_bf16(1.0f / 3.0f), 0x3EAB);
    assert_int_equal(kv_cuda_f32_to_bf16(3.0e38f), 0x7F62);
}


/* e5m2 is binary16 with the low 8 bits rounded off: every finite fp16
 * value's e5m2 is its top byte rounded to nearest even, saturating at
 * 57344 (0x7B) as __NV_SATFINITE does. */
static void test_e5m2(void **state)
{
    (void)state;
    assert_int_equal(kv_cuda_f32_to_e5m2(1.0f), 0x3C);
    assert_int_equal(kv_cuda_f32_to_e5m2(-2.0f), 0xC0);
    assert_int_equal(kv_cuda_f32_to_e5m2(1.25f), 0x3D);
    assert_int_equal(kv_cuda_f32_to_e5m2(1.125f), 0x3C);   /* tie -> even 1.0 */
    assert_int_equal(kv_cuda_f32_to_e5m2(1.375f), 0x3E);   /* tie -> even 1.5 */
    assert_int_equal(kv_cuda_f32_to_e5m2(57344.0f), 0x7B); /* largest finite */
    assert_int_equal(kv_cuda_f32_to_e5m2(1e9f), 0x7B);
    assert_int_equal(kv_cuda_f32_to_e5m2(-INFINITY), 0xFB);
    assert_int_equal(kv_cuda_f32_to_e5m2(NAN) & 0x7F, 0x7F);
    assert_int_equal(kv_cuda_f32_to_e5m2(0x1p-16f), 0x01);  /* smallest subnormal */
    assert_int_equal(kv_cuda_f32_to_e5m2(0x1p-17f), 0x00);  /* tie -> even 0 */
    assert_int_equal(kv_cuda_f32_to_e5m2(0x1.8p-17f), 0x01);
    assert_int_equal(kv_cuda_f32_to_e5m2(0x1p-14f), 0x04);  /* smallest normal */
    assert_true(kv_cuda_e5m2_to_f32(0x7B) == 57344.0f);
    assert_true(isinf(kv_cuda_e5m2_to_f32(0x7C)));
    assert_true(isnan(kv_cuda_e5m2_to_f32(0x7F)));
    for (int b = 0; b < 256; b++) { /* round trip of every finite value */
        if ((b & 0x7F) >= 0x7C) continue;
        assert_int_equal(kv_cuda_f32_to_e5m2(kv_cuda_e5m2_to_f32((uint8_t)b)), b);
    }
    for (uint32_t h = 0; h < 0x10000u; h++) { /* every finite half */
        if ((h & 0x7C00u) == 0x7C00u) continue;
        const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
        float v = e ? ldexpf((float)(1024u + m), (int)e - 25) : ldexpf((float)m, -24);
        if (h & 0x8000u) v = -v;
        uint32_t top = h >> 8, low = h & 0xFFu;
        if (low > 0x80u || (low == 0x80u && (top & 1u))) top++;
        if ((top & 0x7Fu) > 0x7Bu) top = (top & 0x80u) | 0x7Bu;
        if (kv_cuda_f32_to_e5m2(v) != top) fail_msg("half %04x: e5m2 %02x, want %02x", h, kv_cuda_f32_to_e5m2(v), top);
    }
}

/* Every stored value is the byte's number in the cache dtype: exact in
 * bf16/fp16/fp32, within half a step in the fp8 formats (1/16 in [1, 2) for
 * e4m3, 1/8 for e5m2); int8 is the byte. */
static void test_value_table(void **state)
{
    (void)state;
    for (int b = 0; b < 256; b++) {
        float v = kv_cuda_value_f32((uint8_t)b);
        assert_true(fabsf(v) >= 1.0f && fabsf(v) < 2.0f);
        uint32_t bf = kv_cuda_value_bits(KV_DTYPE_BF16, (uint8_t)b);
        assert_true(kv_cuda_bits_f32(bf << 16) == v);
        assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP16, (uint8_t)b), kv_cuda_f32_to_f16(v));
        assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP32, (uint8_t)b), kv_cuda_f32_bits(v));
        float f8 = kv_cuda_e4m3_to_f32((uint8_t)kv_cuda_value_bits(KV_DTYPE_FP8_E4M3, (uint8_t)b));
        assert_true(fabsf(f8 - v) <= 1.0f / 16.0f);
        float f5 = kv_cuda_e5m2_to_f32((uint8_t)kv_cuda_value_bits(KV_DTYPE_FP8_E5M2, (uint8_t)b));
        assert_true(fabsf(f5 - v) <= 1.0f / 8.0f);
        assert_int_equal(kv_cuda_value_bits(KV_DTYPE_INT8, (uint8_t)b), b);
    }
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP16, 0x00), 0x3C00); /* +1.0 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP16, 0x80), 0xBC00); /* -1.0 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP16, 0x7F), 0x3FF8); /* 1.9921875 as fp16, not bf16's 0x3FFF */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_BF16, 0x7F), 0x3FFF); /* 1.9921875 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP8_E4M3, 0x7F), 0x40); /* rounds up to 2.0 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP8_E4M3, 0x88), 0xB8); /* -1.0625: tie -> even -1.0 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP8_E4M3, 0x18), 0x3A); /* 1.1875: tie -> even 1.25 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP8_E5M2, 0x00), 0x3C); /* +1.0, not e4m3's 0x38 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP8_E5M2, 0x10), 0x3C); /* 1.125: tie -> even 1.0 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP8_E5M2, 0x30), 0x3E); /* 1.375: tie -> even 1.5 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP8_E5M2, 0xFF), 0xC0); /* -1.99 rounds to -2.0 */
}

/* The kernels' 16-byte packing equals the reference element by element. */
static void test_pack16_matches_reference(void **state)
{
    (void)state;
    for (int dt = 0; dt < KV_DTYPE_COUNT; dt++) {
        const int bytes = kv_dtype_bytes(dt), per = 16 / bytes;
        for (int i = 0; i < 200; i++) {
            const uint64_t f = kv_fingerprint(i * 7919, i, i % 5, i % 3, (uint64_t)i * 77) ^ (i & 1 ? KV_CUDA_V_SALT : 0);
            const int32_t e0 = (i % 24) * per;
            uint32_t w[4];
            kv_cuda_pack16(dt, f, e0, w);
            for (int k = 0; k < per; k++) {
                uint32_t got = bytes == 4 ? w[k]
                             : bytes == 2 ? (w[k >> 1] >> (16 * (k & 1))) & 0xFFFFu
                                          : (w[k >> 2] >> (8 * (k & 3))) & 0xFFu;
                uint32_t want = kv_cuda_value_bits(dt, kv_cuda_value_byte(f, e0 + k));
                if (got != want)
                    fail_msg("dtype %s f %016llx e0 %d element %d: packed %x, reference %x", kv_dtype_name(dt),
                             (unsigned long long)f, e0, k, got, want);
            }
        }
    }
    /* all 256 bytes through the fp8 and 16-bit packers */
    for (uint32_t b = 0; b < 256; b++) {
        assert_int_equal(kv_cuda_quad_e4m3(b * 0x01010101u) & 0xFFu, kv_cuda_value_bits(KV_DTYPE_FP8_E4M3, (uint8_t)b));
        assert_int_equal(kv_cuda_quad_e5m2(b * 0x01010101u) >> 24, kv_cuda_value_bits(KV_DTYPE_FP8_E5M2, (uint8_t)b));
        assert_int_equal(kv_cuda_pair16(KV_DTYPE_FP16, b) & 0xFFFFu, kv_cuda_value_bits(KV_DTYPE_FP16, (uint8_t)b));
        assert_int_equal(kv_cuda_pair16(KV_DTYPE_BF16, b << 16) >> 16, kv_cuda_value_bits(KV_DTYPE_BF16, (uint8_t)b));
        assert_int_equal(kv_cuda_one32(b), kv_cuda_value_bits(KV_DTYPE_FP32, (uint8_t)b));
    }
}

static void test_value_bytes(void **state)
{
    (void)state;
    const uint64_t tk = kv_token_key(128000, 5, 0x1234), f = kv_row_fingerprint(tk, 3, 1);
    assert_true(f == kv_fingerprint(128000, 5, 3, 1, 0x1234));
    for (int e = 0; e < 8; e++)
        assert_int_equal(kv_cuda_value_byte(f, e), (uint8_t)(f >> (8 * e)));
    assert_int_equal(kv_cuda_value_byte(f, 8), (uint8_t)((uint8_t)f ^ 157u));
    assert_true(kv_cuda_row_fingerprint(tk, 3, 1, 0) == f);
    assert_true(kv_cuda_row_fingerprint(tk, 3, 1, 1) != f);
}

/* n / d by multiply and shift equals the division for every divisor the
 * kernels use and dividends up to 2^31 - 1. */
static void test_fastdiv(void **state)
{
    (void)state;
    for (uint32_t d = 1; d <= 5000; d++) {
        kv_fastdiv f;
        kv_fastdiv_init(&f, d);
        for (uint32_t n = 0; n < 3 * d + 70; n++)
            if (kv_fastdiv_q(&f, n) != n / d) fail_msg("%u / %u: %u", n, d, kv_fastdiv_q(&f, n));
        const uint32_t big[4] = {0x7FFFFFFFu, 0x7FFFFFFFu - d, 0x40000000u, 123456789u};
        for (int i = 0; i < 4; i++)
            if (kv_fastdiv_q(&f, big[i]) != big[i] / d) fail_msg("%u / %u: %u", big[i], d, kv_fastdiv_q(&f, big[i]));
    }
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t d = (uint32_t)(s % 100000) + 1, n = (uint32_t)(s >> 33);
        kv_fastdiv f;
        kv_fastdiv_init(&f, d);
        if (kv_fastdiv_q(&f, n) != n / d) fail_msg("%u / %u: %u", n, d, kv_fastdiv_q(&f, n));
    }
}

/* ---- the kernels, run on the host as a CUDA grid would ----------------- */

/* The emulator calls each kernel's own body (kv_cuda_*_block in
 * cuda/kv_cuda_layout.h) once per CUDA block, running all its threads, with
 * a shared-memory buffer of the size the kernel is launched with. Threads
 * per block: not a multiple of any row length, so every stride path is
 * taken; blocks: a few, so the grid-stride item loops wrap. */
#define EMU_THREADS 96
#define EMU_BLOCKS 3

static kv_cuda_blk emu_blk(int block)
{
    kv_cuda_blk b = {block, EMU_BLOCKS, 0, EMU_THREADS, EMU_THREADS};
    return b;
}

static void emu_write(const kv_cuda_geom *g, const kv_slot_write *w, int n)
{
    for (int blk = 0; blk < EMU_BLOCKS; blk++) {
        void *smem = malloc(kv_cuda_smem_bytes(g));
        assert_non_null(smem);
        const kv_cuda_blk b = emu_blk(blk);
        kv_cuda_write_block(g, g->dtype, g->unit_bytes, w, n, smem, &b);
        free(smem);
    }
}

/* Positions first .. first + n - 1 read through the table from block
 * table_first on (table[0] is that block's entry): tokens[i] is position
 * first + i's token. */
static int64_t emu_verify_from(const kv_cuda_geom *g, const int32_t *table, const uint64_t *keys,
                               const int32_t *tokens, int first, int n, int table_first)
{
    const kv_cuda_verify_args a = {table, keys, tokens, first, n, table_first};
    unsigned long long count = 0;
    for (int blk = 0; blk < EMU_BLOCKS; blk++) {
        void *smem = malloc(kv_cuda_smem_bytes(g));
        assert_non_null(smem);
        const kv_cuda_blk b = emu_blk(blk);
        kv_cuda_verify_block(g, g->dtype, g->unit_bytes, &a, &count, smem, &b);
        free(smem);
    }
    return (int64_t)count;
}

static int64_t emu_verify(const kv_cuda_geom *g, const int32_t *table, const uint64_t *keys, const int32_t *tokens,
                          int first, int n)
{
    return emu_verify_from(g, table, keys, tokens, first, n, 0);
}

static void emu_gather(const kv_cuda_geom *g, const int32_t *table, int32_t ntok, char *out)
{
    const int unit = kv_cuda_gather_unit(g);
    for (int blk = 0; blk < EMU_BLOCKS; blk++) {
        long long src = -1;
        const kv_cuda_blk b = emu_blk(blk);
        kv_cuda_gather_block(g, unit, table, ntok, out, &src, &b);
    }
}

static void test_kernel_code_on_host(void **state)
{
    (void)state;
    static const kv_pool_layout layouts[] = {
        {12, 16, 3, 2, 128, 2, KV_DTYPE_BF16, 0},
        {12, 16, 3, 2, 128, 2, KV_DTYPE_FP16, 4},
        {12, 16, 3, 2, 128, 2, KV_DTYPE_FP8_E4M3, 0},
        {12, 16, 3, 2, 64, 2, KV_DTYPE_FP8_E5M2, 2},
        {12, 16, 3, 2, 64, 2, KV_DTYPE_INT8, 0},
        {12, 16, 3, 2, 64, 2, KV_DTYPE_FP32, 0},
        {12, 16, 3, 2, 68, 2, KV_DTYPE_FP16, 0},   /* 136-byte rows: one value at a time */
        {12, 16, 3, 3, 20, 2, KV_DTYPE_FP8_E4M3, 0}, /* 20-byte rows, 60-byte slots: 4-byte gather units */
        {12, 16, 2, 1, 576, 1, KV_DTYPE_BF16, 0},  /* MLA latent: one "head", no V */
        {12, 8, 130, 4, 16, 2, KV_DTYPE_BF16, 0},  /* 1040 rows per token: two row chunks */
    };
    for (size_t li = 0; li < sizeof layouts / sizeof *layouts; li++) {
        const kv_pool_layout *L = &layouts[li];
        char *pool = calloc(1, kv_pool_layout_bytes(L));
        assert_non_null(pool);
        kv_cuda_geom g;
        kv_cuda_geom_init(&g, pool, L);
        const int b = kv_dtype_bytes(L->cache_dtype), bs = L->block_size;
        assert_int_equal(g.unit_bytes, L->head_size * b % 16 == 0 ? 16 : b);
        assert_int_equal(g.rows, L->num_layers * L->kv_factor * L->num_kv_heads);
        assert_true(g.chunk_rows <= KV_CUDA_CHUNK_ROWS && g.chunk_rows * g.chunks >= g.rows);
        /* vLLM's FlashAttention index: [layer][kv][block][offset][head][element] */
        long long want = ((((1LL * L->kv_factor + (L->kv_factor - 1)) * L->num_blocks + 5) * bs + 3) *
                               L->num_kv_heads + (L->num_kv_heads - 1)) * L->head_size * b;
        assert_int_equal(kv_cuda_row_offset(&g, 1, L->kv_factor - 1, 5 * bs + 3, L->num_kv_heads - 1), want);
        /* two requests sharing their first block (a cached prefix), 40 tokens each */
        const int nt = 40, nb = (nt + bs - 1) / bs;
        int32_t ta[5] = {4, 9, 2, 10, 6}, tb[5] = {4, 7, 11, 3, 8}, toka[40], tokb[40];
        uint64_t ka[5], kb[5];
        for (int i = 0; i < 5; i++) {
            ka[i] = kv_mix64(100 + (uint64_t)i);
            kb[i] = i == 0 ? ka[0] : kv_mix64(200 + (uint64_t)i);
        }
        kv_slot_write w[80];
        for (int i = 0; i < nt; i++) {
            toka[i] = 500 + i;
            tokb[i] = i < bs ? toka[i] : 900 + i;
            w[i] = (kv_slot_write){(int64_t)ta[i / bs] * bs + i % bs, toka[i], i, ka[i / bs]};
            w[nt + i] = (kv_slot_write){(int64_t)tb[i / bs] * bs + i % bs, tokb[i], i, kb[i / bs]};
        }
        emu_write(&g, w, 2 * nt);
        assert_int_equal(emu_verify(&g, ta, ka, toka, 0, nt), 0);
        assert_int_equal(emu_verify(&g, tb, kb, tokb, 0, nt), 0);
        /* a later range, past the first block: the position, not the token's index in
         * the call, picks the table entry; and a call given the table from block 1 on */
        assert_int_equal(emu_verify(&g, tb, kb, tokb + 17, 17, nt - 17), 0);
        assert_int_equal(emu_verify_from(&g, tb + 1, kb + 1, tokb + 17, 17, nt - 17, 1), 0);
        assert_int_equal(emu_verify_from(&g, ta + 2, ka + 2, toka + 2 * bs + 1, 2 * bs + 1, 5, 2), 0);
        tokb[30] += 1; /* and a wrong token there is still every row of it */
        assert_int_equal(emu_verify_from(&g, tb + 1, kb + 1, tokb + 17, 17, nt - 17, 1), g.rows);
        tokb[30] -= 1;
        /* every value of a written row is what the reference says */
        uint32_t bits = 0;
        const int h = L->num_kv_heads - 1;
        long long off = kv_cuda_row_offset(&g, 1, 0, (long long)ta[18 / bs] * bs + 18 % bs, h) + 5 * b;
        memcpy(&bits, pool + off, (size_t)b);
        const uint64_t f = kv_cuda_row_fingerprint(kv_token_key(518, 18, ka[18 / bs]), 1, L->first_kv_head + h, 0);
        assert_int_equal(bits, kv_cuda_value_bits(L->cache_dtype, kv_cuda_value_byte(f, 5)));
        /* the null block 0 and unused blocks stay zero */
        for (long long i = 0; i < (long long)bs * g.slot_bytes; i++) assert_int_equal(pool[i], 0);
        /* the paged gather: [layer][kv][token][head][head_size], token by token */
        char *out = calloc((size_t)nt, (size_t)(g.slot_bytes * L->num_layers * L->kv_factor));
        assert_non_null(out);
        emu_gather(&g, ta, nt, out);
        for (int lk = 0; lk < L->num_layers * L->kv_factor; lk++)
            for (int t = 0; t < nt; t++) {
                const long long src = kv_cuda_row_offset(&g, lk / L->kv_factor, lk % L->kv_factor,
                                                         (long long)ta[t / bs] * bs + t % bs, 0);
                if (memcmp(out + ((long long)lk * nt + t) * g.slot_bytes, pool + src, (size_t)g.slot_bytes))
                    fail_msg("layout %zu: gather of token %d, layer-kv %d differs", li, t, lk);
            }
        free(out);
        /* a wrong token: every layer, head, K and V of it */
        toka[20] += 1;
        assert_int_equal(emu_verify(&g, ta, ka, toka, 0, nt), g.rows);
        toka[20] -= 1;
        /* b's second block read with a's prefix key: a wrong share, every row of its tokens */
        uint64_t kx[5];
        memcpy(kx, kb, sizeof kx);
        kx[1] = ka[1];
        assert_int_equal(emu_verify(&g, tb, kx, tokb, 0, nt), (int64_t)bs * g.rows);
        (void)nb;
        free(pool);
    }
}

/* Two ranks of one model store different bytes for the same token (their
 * global heads differ), so a rank that reads another's pool fails. */
static void test_kernel_global_heads(void **state)
{
    (void)state;
    kv_pool_layout l0 = {4, 16, 2, 2, 64, 2, KV_DTYPE_BF16, 0}, l1 = l0;
    l1.first_kv_head = 2;
    char *p0 = calloc(1, kv_pool_layout_bytes(&l0)), *p1 = calloc(1, kv_pool_layout_bytes(&l1));
    assert_true(p0 && p1);
    kv_cuda_geom g0, g1;
    kv_cuda_geom_init(&g0, p0, &l0);
    kv_cuda_geom_init(&g1, p1, &l1);
    int32_t table[1] = {2}, tok[16];
    uint64_t key[1] = {77};
    kv_slot_write w[16];
    for (int i = 0; i < 16; i++) {
        tok[i] = 40 + i;
        w[i] = (kv_slot_write){2 * 16 + i, tok[i], i, key[0]};
    }
    emu_write(&g0, w, 16);
    emu_write(&g1, w, 16);
    assert_int_equal(emu_verify(&g0, table, key, tok, 0, 16), 0);
    assert_int_equal(emu_verify(&g1, table, key, tok, 0, 16), 0);
    assert_true(memcmp(p0, p1, kv_pool_layout_bytes(&l0)) != 0);
    g1.base = p0; /* rank 1 reading rank 0's pool */
    assert_int_equal(emu_verify(&g1, table, key, tok, 0, 16), 16 * g1.rows);
    free(p0);
    free(p1);
}

static void test_format_size(void **state)
{
    (void)state;
    char b[32];
    assert_string_equal(kv_cuda_format_size(b, sizeof b, 512), "512 bytes");
    assert_string_equal(kv_cuda_format_size(b, sizeof b, 1024), "1024 bytes");
    assert_string_equal(kv_cuda_format_size(b, sizeof b, 1536), "1.50 KiB");
    assert_string_equal(kv_cuda_format_size(b, sizeof b, 20ull << 20), "20.00 MiB");
    assert_string_equal(kv_cuda_format_size(b, sizeof b, 1ull << 30), "1024.00 MiB");
    assert_string_equal(kv_cuda_format_size(b, sizeof b, 5ull << 28), "1.25 GiB");
}

static void test_format_oom(void **state)
{
    (void)state;
    char b[512];
    kv_cuda_oom o = {"KV cache pool", 1, 1, 20ull << 30, 150110748672ull, 3328599654ull, 120ull << 30, 536870912};
    kv_cuda_format_oom(b, sizeof b, &o);
    assert_non_null(strstr(b, "CUDA out of memory. Tried to allocate 20.00 GiB (KV cache pool, rank 1). "
                              "GPU 1 has a total capacity of 139.80 GiB of which 3.10 GiB is free. "));
    assert_non_null(strstr(b, "kvlab holds 120.00 GiB there plus a 512.00 MiB CUDA context."));
    assert_true(strlen(b) < 256);
    o.context = -1;
    kv_cuda_format_oom(b, sizeof b, &o);
    assert_null(strstr(b, "CUDA context"));
}

static void test_mig_names_and_peak(void **state)
{
    (void)state;
    char m[48];
    assert_int_equal(kv_cuda_mig_profile("NVIDIA A100-SXM4-40GB MIG 1g.5gb", m, sizeof m), 1);
    assert_string_equal(m, "1g.5gb");
    assert_int_equal(kv_cuda_mig_profile("NVIDIA H100 80GB HBM3 MIG 3g.40gb", m, sizeof m), 1);
    assert_string_equal(m, "3g.40gb");
    assert_int_equal(kv_cuda_mig_profile("NVIDIA H200", m, sizeof m), 0);
    assert_string_equal(m, "");
    assert_int_equal(kv_cuda_mig_profile("NVIDIA AMIGO 9000", m, sizeof m), 0); /* a word, not a substring */
    /* H100 SXM: 2619 MHz HBM3 on 5120 bits = 3352 GB/s; RTX 4090: 10501 MHz GDDR6X x 384 bits = 1008 GB/s */
    assert_true(fabs(kv_cuda_peak_gbps(2619000, 5120) - 3352.32) < 0.01);
    assert_true(fabs(kv_cuda_peak_gbps(10501000, 384) - 1008.096) < 0.01);
    assert_true(kv_cuda_peak_gbps(0, 5120) == 0);
    unsigned char u[16];
    for (int i = 0; i < 16; i++) u[i] = (unsigned char)(0x10 * i + i);
    char s[48];
    kv_cuda_format_uuid(s, sizeof s, "MIG-", u);
    assert_string_equal(s, "MIG-00112233-4455-6677-8899-aabbccddeeff");
}

/* Why no device opened, told apart honestly: the runtime reports a missing
 * libcuda.so.1 as cudaErrorInsufficientDriver, which must not read as an old
 * driver; a real old driver names both CUDA versions; a driver without a
 * visible GPU says the driver is there. */
static void test_format_no_device(void **state)
{
    (void)state;
    char b[400];
    const char *insuff = "CUDA driver version is insufficient for CUDA runtime version";
    kv_cuda_no_device w = {KV_CUDA_ERR_INSUFFICIENT_DRIVER, insuff,
                           "libcuda.so.1: cannot open shared object file: No such file or directory", 0, 13000};
    assert_string_equal(kv_cuda_format_no_device(b, sizeof b, &w), "no NVIDIA driver (libcuda.so.1 not found)");
    w.libcuda = "/usr/lib/x86_64-linux-gnu/libcuda.so.1: wrong ELF class: ELFCLASS32";
    kv_cuda_format_no_device(b, sizeof b, &w);
    assert_non_null(strstr(b, "no NVIDIA driver (libcuda.so.1 does not load: "));
    assert_non_null(strstr(b, "wrong ELF class"));
    w.libcuda = NULL;
    w.driver_version = 12020;
    kv_cuda_format_no_device(b, sizeof b, &w);
    assert_non_null(strstr(b, "no CUDA device: the NVIDIA driver supports CUDA 12.2, older than the CUDA 13.0 runtime"));
    assert_non_null(strstr(b, insuff));
    w.code = KV_CUDA_ERR_NO_DEVICE;
    w.cuda_text = "no CUDA-capable device is detected";
    kv_cuda_format_no_device(b, sizeof b, &w);
    assert_non_null(strstr(b, "no CUDA device: no CUDA-capable device is detected (the NVIDIA driver is there"));
    w.code = 999;
    w.cuda_text = "unknown error";
    assert_string_equal(kv_cuda_format_no_device(b, sizeof b, &w), "no CUDA device: unknown error");
}

#ifdef KVLAB_HAVE_CUDA
/* Without a device: one line naming the reason. With one: small pools in
 * every dtype written, read back, gathered and benchmarked; a wrong token
 * and a wrong prefix caught; the OOM line names the rank and the pool. */
static void test_device_or_fallback(void **state)
{
    (void)state;
    char err[512] = "";
    const kv_device_driver *drv = kv_cuda_driver();
    assert_null(kv_device_driver_open(drv, 0, err, sizeof err));
    err[0] = 0;
    kv_device *d = kv_device_driver_open(drv, 1, err, sizeof err);
    if (!d) {
        void *lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
        if (lib) {
            dlclose(lib);
            assert_int_equal(strncmp(err, "no CUDA device: ", 16), 0);
        } else { /* no driver on this machine: said so, not "insufficient driver" */
            assert_string_equal(err, "no NVIDIA driver (libcuda.so.1 not found)");
        }
        assert_null(strchr(err, '\n'));
        print_message("no CUDA device here (%s): fallback path checked\n", err);
        skip();
    }
    assert_string_equal(d->name, "cuda");
    kv_device_info info;
    assert_int_equal(d->ops->info(d, 0, &info, err, sizeof err), 0);
    assert_true(info.total_bytes > 0 && info.name[0] && info.sm_count > 0);
    print_message("%s (%s): context %lld bytes (%s), peak %.0f GB/s\n", info.name, info.pci_bus_id,
                  (long long)info.context_bytes, info.context_how, info.peak_gbps);
    for (int dt = 0; dt < KV_DTYPE_COUNT; dt++) {
        for (int odd = 0; odd < 2; odd++) {
            /* 68 fp16 values = 136 bytes: the per-value path */
            kv_pool_layout l = {9, 16, 4, 2, odd ? 68 : 128, 2, dt, odd ? 2 : 0};
            kv_dev_handle h = 0;
            if (d->ops->alloc_pool(d, 0, &l, &h, err, sizeof err) != 0) fail_msg("alloc %s: %s", kv_dtype_name(dt), err);
            assert_true(h != 0);
            int32_t table[2] = {7, 3}, tokens[20];
            uint64_t keys[2] = {11, 22};
            kv_slot_write w[20];
            for (int i = 0; i < 20; i++) {
                tokens[i] = 1000 + 37 * i;
                w[i] = (kv_slot_write){(int64_t)table[i / 16] * 16 + i % 16, tokens[i], i, keys[i / 16]};
            }
            assert_int_equal(d->ops->write_kv(d, 0, w, 20, err, sizeof err), 0);
            int64_t bad = -1;
            kv_verify_req v = {table, keys, 2, tokens, 0, 20};
            if (d->ops->verify(d, 0, &v, &bad, err, sizeof err) != 0) fail_msg("verify: %s", err);
            if (bad) fail_msg("%s: %lld rows wrong after writing", kv_dtype_name(dt), (long long)bad);
            /* from a position past the first block: the position picks the table entry */
            kv_verify_req late = {table, keys, 2, tokens + 17, 17, 3};
            if (d->ops->verify(d, 0, &late, &bad, err, sizeof err) != 0) fail_msg("verify from 17: %s", err);
            if (bad) fail_msg("%s: %lld rows wrong reading positions 17..19", kv_dtype_name(dt), (long long)bad);
            tokens[17] += 1; /* one wrong token: every layer and head of it differs */
            assert_int_equal(d->ops->verify(d, 0, &v, &bad, err, sizeof err), 0);
            assert_int_equal(bad, 4 * 2 * 2); /* layers x heads x (K, V), as the host backend counts */
            assert_int_equal(d->ops->verify(d, 0, &late, &bad, err, sizeof err), 0);
            assert_int_equal(bad, 4 * 2 * 2);
            tokens[17] -= 1;
            keys[1] = 33; /* the second block read with another prefix's key */
            assert_int_equal(d->ops->verify(d, 0, &v, &bad, err, sizeof err), 0);
            assert_int_equal(bad, 4 * 4 * 2 * 2);
            keys[1] = 22;
            w[0].slot = 9 * 16;
            assert_int_equal(d->ops->write_kv(d, 0, w, 1, err, sizeof err), KV_DEV_EINVAL);
            for (int k = 0; k < KV_BENCH_COUNT; k++) {
                kv_bench_req q = {(kv_bench_kind)k, 100, 3};
                kv_bench_result r;
                if (d->ops->bench(d, 0, &q, &r, err, sizeof err) != 0) fail_msg("bench %d: %s", k, err);
                assert_true(r.runs == 3 && r.best_ms >= 0 && r.best_ms <= r.median_ms && r.bytes > 0);
                if (k >= KV_BENCH_WRITE && r.mismatches != 0)
                    fail_msg("%s bench %d: %lld mismatches", kv_dtype_name(dt), k, (long long)r.mismatches);
            }
            d->ops->free(d, 0, h);
            assert_int_equal(d->ops->held(d, 0), 0);
        }
    }
    /* a pool the card cannot hold: the PyTorch-style line, naming rank and pool */
    kv_pool_layout huge = {51200000, 16, 32, 8, 128, 2, KV_DTYPE_BF16, 0}; /* 100,000 GiB */
    assert_int_equal(d->ops->alloc_pool(d, 0, &huge, NULL, err, sizeof err), KV_DEV_ENOMEM);
    assert_non_null(strstr(err, "CUDA out of memory. Tried to allocate"));
    assert_non_null(strstr(err, "(KV cache pool, rank 0)"));
    /* the context is measured once per process: a second open reports the same figure */
    kv_device *d2 = kv_device_driver_open(drv, 1, err, sizeof err);
    assert_non_null(d2);
    kv_device_info info2;
    assert_int_equal(d2->ops->info(d2, 0, &info2, err, sizeof err), 0);
    assert_true(info2.context_bytes == info.context_bytes);
    d2->ops->destroy(d2);
    d->ops->destroy(d);
}

/* Parity with the host backend, one rank and two ranks (side by side when
 * there is one card). */
static void test_device_parity(void **state)
{
    (void)state;
    char err[512] = "";
    for (int tp = 1; tp <= 2; tp++) {
        kv_device *d = kv_device_driver_open(kv_cuda_driver(), tp, err, sizeof err);
        if (!d) skip();
        kv_device_parity_report r;
        if (kv_device_parity_run(d, tp, &r, err, sizeof err) != 0) fail_msg("parity run: %s", err);
        for (int rank = 0; rank < tp; rank++) assert_int_equal(d->ops->held(d, rank), 0); /* the engine gave back its own */
        d->ops->destroy(d);
        if (!r.identical) fail_msg("tp %d: %s %s", tp, r.difference, r.verify_error);
        assert_true(r.preemptions > 0 && r.prefix_cache_hits > 0);
    }
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_e4m3_known_values),
        cmocka_unit_test(test_e4m3_round_trip),
        cmocka_unit_test(test_f16_bf16_known_values),
        cmocka_unit_test(test_e5m2),
        cmocka_unit_test(test_value_table),
        cmocka_unit_test(test_pack16_matches_reference),
        cmocka_unit_test(test_value_bytes),
        cmocka_unit_test(test_fastdiv),
        cmocka_unit_test(test_kernel_code_on_host),
        cmocka_unit_test(test_kernel_global_heads),
        cmocka_unit_test(test_format_size),
        cmocka_unit_test(test_format_oom),
        cmocka_unit_test(test_mig_names_and_peak),
        cmocka_unit_test(test_format_no_device),
#ifdef KVLAB_HAVE_CUDA
        cmocka_unit_test(test_device_or_fallback),
        cmocka_unit_test(test_device_parity),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
