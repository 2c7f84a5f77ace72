/* The CUDA backend's host-side pieces, runnable without a GPU: the dtype
 * conversions the kernels store, the OOM message, rank mapping, catalogue
 * matching, and kv_cuda_open's fallback answer. With a device present the
 * last test also writes and verifies real blocks. */
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
#include "kv_cuda_parity.h"
#include "kv_cuda_values.h"
#include "kv_device_host.h"
#include "kv_gpu.h"

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

/* Every stored value is the byte's number in the cache dtype: exact in
 * bf16/fp16/fp32, within half an fp8 step (1/16 in [1, 2)) in e4m3. */
static void test_value_table(void **state)
{
    (void)state;
    for (int b = 0; b < 256; b++) {
        float v = kv_cuda_value_f32((uint8_t)b);
        assert_true(fabsf(v) >= 1.0f && fabsf(v) < 2.0f);
        uint32_t bf = kv_cuda_value_bits(KV_DTYPE_BF16, (uint8_t)b);
        assert_true(kv_cuda_bits_f32(bf << 16) == v);
        assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP32, (uint8_t)b), kv_cuda_f32_bits(v));
        float f8 = kv_cuda_e4m3_to_f32((uint8_t)kv_cuda_value_bits(KV_DTYPE_FP8_E4M3, (uint8_t)b));
        assert_true(fabsf(f8 - v) <= 1.0f / 16.0f);
    }
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP16, 0x00), 0x3C00); /* +1.0 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP16, 0x80), 0xBC00); /* -1.0 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_BF16, 0x7F), 0x3FFF); /* 1.9921875 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP8_E4M3, 0x7F), 0x40); /* rounds up to 2.0 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP8_E4M3, 0x88), 0xB8); /* -1.0625: tie -> even -1.0 */
    assert_int_equal(kv_cuda_value_bits(KV_DTYPE_FP8_E4M3, 0x18), 0x3A); /* 1.1875: tie -> even 1.25 */
}

/* The kernels' 16-byte packing equals the reference element by element. */
static void test_pack16_matches_reference(void **state)
{
    (void)state;
    for (int dt = 0; dt < 4; dt++) {
        const int bytes = kv_dtype_bytes(dt), per = 16 / bytes;
        for (int i = 0; i < 200; i++) {
            const uint64_t f = kv_fingerprint(i * 7919, i, i % 5, i % 3) ^ (i & 1 ? KV_CUDA_V_SALT : 0);
            const int32_t e0 = (i % 24) * per;
            uint32_t w[4];
            kv_cuda_pack16(dt, f, e0, w);
            for (int k = 0; k < per; k++) {
                uint32_t got = bytes == 4 ? w[k]
                             : bytes == 2 ? (w[k >> 1] >> (16 * (k & 1))) & 0xFFFFu
                                          : (w[k >> 2] >> (8 * (k & 3))) & 0xFFu;
                uint32_t want = kv_cuda_value_bits(dt, kv_cuda_value_byte(f, e0 + k));
                if (got != want)
                    fail_msg("dtype %d f %016llx e0 %d element %d: packed %x, reference %x", dt,
                             (unsigned long long)f, e0, k, got, want);
            }
        }
    }
    /* all 256 bytes through the fp8 and 16-bit packers */
    for (uint32_t b = 0; b < 256; b++) {
        assert_int_equal(kv_cuda_quad_e4m3(b * 0x01010101u) & 0xFFu, kv_cuda_value_bits(KV_DTYPE_FP8_E4M3, (uint8_t)b));
        assert_int_equal(kv_cuda_pair16(KV_DTYPE_FP16, b) & 0xFFFFu, kv_cuda_value_bits(KV_DTYPE_FP16, (uint8_t)b));
        assert_int_equal(kv_cuda_pair16(KV_DTYPE_BF16, b << 16) >> 16, kv_cuda_value_bits(KV_DTYPE_BF16, (uint8_t)b));
        assert_int_equal(kv_cuda_one32(b), kv_cuda_value_bits(KV_DTYPE_FP32, (uint8_t)b));
    }
}

static void test_value_bytes(void **state)
{
    (void)state;
    const uint64_t f = kv_fingerprint(128000, 5, 3, 1);
    for (int e = 0; e < 8; e++)
        assert_int_equal(kv_cuda_value_byte(f, e), (uint8_t)(f >> (8 * e)));
    assert_int_equal(kv_cuda_value_byte(f, 8), (uint8_t)((uint8_t)f ^ 157u));
    assert_true(kv_cuda_row_fingerprint(128000, 5, 3, 1, 0) == f);
    assert_true(kv_cuda_row_fingerprint(128000, 5, 3, 1, 1) != f);
    /* a different token, position, layer or head changes the row */
    assert_true(kv_fingerprint(128001, 5, 3, 1) != f);
    assert_true(kv_fingerprint(128000, 6, 3, 1) != f);
    assert_true(kv_fingerprint(128000, 5, 4, 1) != f);
    assert_true(kv_fingerprint(128000, 5, 3, 2) != f);
}

/* Host run of the kernels' per-thread code: every cell of every token
 * written, then every (token, layer, head, K/V) checked, on small pools in
 * each dtype, the per-value path (a 136-byte fp16 row) and MLA. */
static int64_t host_verify(const kv_cuda_geom *g, int unit, const int32_t *table, const int32_t *tokens, int n)
{
    int64_t bad = 0;
    for (int t = 0; t < n; t++) {
        long long slot = (long long)table[t / g->block_size] * g->block_size + t % g->block_size;
        for (int l = 0; l < g->num_layers; l++)
            for (int h = 0; h < g->heads; h++) {
                int row_bad[2] = {0, 0};
                for (int j = 0; j < g->kvf * (g->row_bytes / unit); j++) {
                    int kv = 0;
                    if (kv_cuda_check_unit(g, g->dtype, unit, slot, tokens[t], t, l, h, j, &kv)) row_bad[kv] = 1;
                }
                bad += row_bad[0] + row_bad[1];
            }
    }
    return bad;
}

static void test_kernel_code_on_host(void **state)
{
    (void)state;
    static const kv_pool_layout layouts[] = {
        {12, 16, 3, 2, 128, 2, KV_DTYPE_BF16},
        {12, 16, 3, 2, 128, 2, KV_DTYPE_FP8_E4M3},
        {12, 16, 3, 2, 64, 2, KV_DTYPE_FP32},
        {12, 16, 3, 2, 68, 2, KV_DTYPE_FP16},   /* 136-byte rows: one value at a time */
        {12, 16, 2, 1, 576, 1, KV_DTYPE_BF16},  /* MLA latent: one "head", no V */
    };
    for (size_t li = 0; li < sizeof layouts / sizeof *layouts; li++) {
        const kv_pool_layout *L = &layouts[li];
        char *pool = calloc(1, kv_pool_layout_bytes(L));
        assert_non_null(pool);
        kv_cuda_geom g;
        kv_cuda_geom_init(&g, pool, L);
        const int unit = g.unit_bytes;
        assert_int_equal(unit, L->head_size * kv_dtype_bytes(L->cache_dtype) % 16 == 0 ? 16 : kv_dtype_bytes(L->cache_dtype));
        /* vLLM's FlashAttention index: [layer][kv][block][offset][head][element] */
        const int b = kv_dtype_bytes(L->cache_dtype);
        long long want = ((((1LL * L->kv_factor + (L->kv_factor - 1)) * L->num_blocks + 5) * L->block_size + 3) *
                               L->num_kv_heads + (L->num_kv_heads - 1)) * L->head_size * b;
        assert_int_equal(kv_cuda_row_offset(&g, 1, L->kv_factor - 1, 5 * 16 + 3, L->num_kv_heads - 1), want);
        /* two requests sharing their first block (a cached prefix), 40 tokens each */
        int32_t ta[3] = {4, 9, 2}, tb[3] = {4, 7, 11}, toka[40], tokb[40];
        for (int i = 0; i < 40; i++) {
            toka[i] = 500 + i;
            tokb[i] = i < 16 ? toka[i] : 900 + i;
        }
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < 40; i++) {
                kv_slot_write s = {(int64_t)(r ? tb : ta)[i / 16] * 16 + i % 16, (r ? tokb : toka)[i], i};
                for (int u = 0; u < kv_cuda_cells(&g); u++) kv_cuda_write_cell(&g, L->cache_dtype, unit, &s, u);
            }
        assert_int_equal(host_verify(&g, unit, ta, toka, 40), 0);
        assert_int_equal(host_verify(&g, unit, tb, tokb, 40), 0);
        /* every value of a written row is what the reference says */
        uint32_t bits = 0;
        long long off = kv_cuda_row_offset(&g, 1, 0, 9 * 16 + 2, 0) + 5 * b;
        memcpy(&bits, pool + off, (size_t)b);
        assert_int_equal(bits, kv_cuda_value_bits(L->cache_dtype,
                                                  kv_cuda_value_byte(kv_cuda_row_fingerprint(500 + 18, 18, 1, 0, 0), 5)));
        /* the null block 0 and unused blocks stay zero */
        for (long long i = 0; i < (long long)16 * g.slot_bytes; i++) assert_int_equal(pool[i], 0);
        /* a wrong token: every layer, head, K and V of it */
        toka[20] += 1;
        assert_int_equal(host_verify(&g, unit, ta, toka, 40), L->num_layers * L->num_kv_heads * L->kv_factor);
        free(pool);
    }
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

static void test_map_ranks(void **state)
{
    (void)state;
    int g[4];
    assert_int_equal(kv_cuda_map_ranks(4, 8, g), 0);
    for (int r = 0; r < 4; r++) assert_int_equal(g[r], r);
    assert_int_equal(kv_cuda_map_ranks(2, 1, g), 1);
    assert_int_equal(g[0], 0);
    assert_int_equal(g[1], 0);
    assert_int_equal(kv_cuda_map_ranks(4, 2, g), 1); /* two per card, side by side */
    assert_int_equal(g[0], 0);
    assert_int_equal(g[1], 1);
    assert_int_equal(g[2], 0);
    assert_int_equal(g[3], 1);
    assert_int_equal(kv_cuda_map_ranks(0, 1, g), -1);
    assert_int_equal(kv_cuda_map_ranks(1, 0, g), -1);
}

static void test_match_catalog(void **state)
{
    (void)state;
    static const struct { const char *id; double total; } rows[] = {
        {"t4-16gb", 15835660288.0}, {"a10g-24gb", 23609475072.0}, {"a10-24gb", 23609475072.0},
        {"l4-24gb", 23570219008.0}, {"l40s-48gb", 47803596800.0}, {"rtx4090-24gb", 25386352640.0},
        {"rtx-a6000-48gb", 0}, {"rtx6000-ada-48gb", 51002867712.0}, {"a100-40gb-pcie", 42298834944.0},
        {"a100-80gb-sxm", 85100068864.0}, {"h100-80gb-sxm", 85045477376.0}, {"h100-80gb-pcie", 0},
        {"h100-nvl-94gb", 99861594112.0}, {"h200-141gb-sxm", 0}, {"gh200-96gb", 0},
    };
    kv_gpu gpus[sizeof rows / sizeof *rows];
    memset(gpus, 0, sizeof gpus);
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        snprintf(gpus[i].id, sizeof gpus[i].id, "%s", rows[i].id);
        gpus[i].reported_total_bytes = rows[i].total;
    }
    kv_gpu_catalog cat = {gpus, (int)(sizeof rows / sizeof *rows)};
    static const struct { const char *name; double total; const char *want; } cases[] = {
        {"NVIDIA H200", 150110748672.0, "h200-141gb-sxm"},
        {"NVIDIA H100 80GB HBM3", 85045477376.0, "h100-80gb-sxm"},
        {"NVIDIA H100 PCIe", 85030000000.0, "h100-80gb-pcie"},
        {"NVIDIA H100 NVL", 99861594112.0, "h100-nvl-94gb"},
        {"NVIDIA GH200 480GB", 102000000000.0, "gh200-96gb"},
        {"NVIDIA A100-SXM4-80GB", 85100068864.0, "a100-80gb-sxm"},
        {"NVIDIA A100-PCIE-40GB", 42298834944.0, "a100-40gb-pcie"},
        {"NVIDIA GeForce RTX 4090", 25386352640.0, "rtx4090-24gb"},
        {"NVIDIA RTX A6000", 51041271808.0, "rtx-a6000-48gb"},
        {"NVIDIA RTX 6000 Ada Generation", 51002867712.0, "rtx6000-ada-48gb"},
        {"NVIDIA L40S", 47803596800.0, "l40s-48gb"},
        {"NVIDIA L4", 23570219008.0, "l4-24gb"},
        {"NVIDIA A10G", 23609475072.0, "a10g-24gb"},
        {"Tesla T4", 15835660288.0, "t4-16gb"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const kv_gpu *g = kv_cuda_match_catalog(&cat, cases[i].name, cases[i].total);
        assert_non_null(g);
        if (strcmp(g->id, cases[i].want)) fail_msg("%s matched %s, want %s", cases[i].name, g->id, cases[i].want);
    }
    assert_null(kv_cuda_match_catalog(&cat, "Quadro P1000", 4e9));
}

/* The parity harness against a second host backend: the trace really shares
 * a prefix, preempts, verifies every step, and two runs agree exactly. */
static void test_parity_harness_host(void **state)
{
    (void)state;
    char err[256] = "";
    for (int tp = 1; tp <= 2; tp++) {
        kv_device *d = kv_device_host_open(tp, 0, err, sizeof err);
        assert_non_null(d);
        kv_cuda_parity_report r;
        if (kv_cuda_parity_run(d, tp, &r, err, sizeof err) != 0) fail_msg("parity run: %s", err);
        d->ops->destroy(d);
        print_message("tp %d: %lld steps, %lld preemptions, %lld prefix hit tokens, %lld events\n", tp,
                      (long long)r.steps, (long long)r.preemptions, (long long)r.prefix_cache_hits, (long long)r.events);
        if (!r.identical) fail_msg("tp %d: %s %s", tp, r.difference, r.verify_error);
        assert_string_equal(r.verify_error, "");
        assert_true(r.steps > 10);
        assert_int_equal(r.verified_steps, r.steps);
        assert_int_equal(r.requests_finished, 12);
        assert_true(r.preemptions > 0);
        assert_true(r.prefix_cache_hits >= 11 * 192); /* the 12 full prefix blocks, for the 11 later requests */
        assert_true(r.events > 100);
    }
}

#ifdef KVLAB_HAVE_CUDA
/* Without a device: NULL and one line naming the reason. With one: a small
 * pool written and read back, a wrong token caught. */
static void test_open_or_fallback(void **state)
{
    (void)state;
    char err[256] = "";
    assert_null(kv_cuda_open(0, err, sizeof err));
    assert_non_null(strstr(err, "ranks"));
    err[0] = 0;
    kv_device *d = kv_cuda_open(1, err, sizeof err);
    if (!d) {
        assert_int_equal(strncmp(err, "no CUDA device: ", 16), 0);
        assert_null(strchr(err, '\n'));
        print_message("no CUDA device here (%s): fallback path checked\n", err);
        return;
    }
    assert_true(kv_cuda_is(d));
    assert_string_equal(d->name, "cuda");
    kv_cuda_gpu_info info;
    assert_int_equal(kv_cuda_info(d, 0, &info, err, sizeof err), 0);
    assert_true(info.total_bytes > 0 && info.name[0]);
    for (int dt = 0; dt < 4; dt++) {
        kv_pool_layout l = {9, 16, 4, 2, dt == KV_DTYPE_FP16 ? 68 : 128, 2, dt}; /* 68 x 2 bytes: the per-element path */
        assert_int_equal(d->ops->alloc_pool(d, 0, &l, err, sizeof err), 0);
        int32_t table[2] = {7, 3}, tokens[20];
        kv_slot_write w[20];
        for (int i = 0; i < 20; i++) {
            tokens[i] = 1000 + 37 * i;
            w[i].slot = (int64_t)table[i / 16] * 16 + i % 16;
            w[i].token_id = tokens[i];
            w[i].position = i;
        }
        assert_int_equal(d->ops->write_kv(d, 0, w, 20, err, sizeof err), 0);
        int64_t bad = -1;
        assert_int_equal(d->ops->verify(d, 0, table, 2, tokens, 20, &bad, err, sizeof err), 0);
        assert_int_equal(bad, 0);
        tokens[17] += 1; /* one wrong token: every layer and head of it differs */
        assert_int_equal(d->ops->verify(d, 0, table, 2, tokens, 20, &bad, err, sizeof err), 0);
        assert_int_equal(bad, 4 * 2 * 2); /* layers x heads x (K, V), as the host backend counts */
        w[0].slot = 9 * 16;
        assert_int_equal(d->ops->write_kv(d, 0, w, 1, err, sizeof err), KV_DEV_EINVAL);
    }
    d->ops->destroy(d);

    /* Parity with the host backend, one rank and two ranks (side by side when
     * there is one card). */
    for (int tp = 1; tp <= 2; tp++) {
        d = kv_cuda_open(tp, err, sizeof err);
        assert_non_null(d);
        kv_cuda_parity_report r;
        if (kv_cuda_parity_run(d, tp, &r, err, sizeof err) != 0) fail_msg("parity run: %s", err);
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
        cmocka_unit_test(test_value_table),
        cmocka_unit_test(test_pack16_matches_reference),
        cmocka_unit_test(test_kernel_code_on_host),
        cmocka_unit_test(test_value_bytes),
        cmocka_unit_test(test_format_size),
        cmocka_unit_test(test_format_oom),
        cmocka_unit_test(test_map_ranks),
        cmocka_unit_test(test_match_catalog),
        cmocka_unit_test(test_parity_harness_host),
#ifdef KVLAB_HAVE_CUDA
        cmocka_unit_test(test_open_or_fallback),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
