/* kv_cuda_values: the K/V values the CUDA backend stores, as pure functions
 * that compile for the host (C11, unit-tested) and for kernels (nvcc).
 *
 * A token's value at (layer, global kv head) starts from kv_fingerprint()
 * in engine/kv_device.h; element e of that head's row takes one byte of the
 * fingerprint (V uses the fingerprint xor a constant), and the byte maps to
 * a number in +-[1, 2) stored in the cache dtype as itself (bf16, fp16, fp8
 * e4m3, fp8 e5m2, fp32; int8 stores the byte). Kernels build 16 stored
 * bytes at a time with bit operations (kv_cuda_pack16) so the write stays
 * bound by memory bandwidth; the float conversions are the reference.
 * No CUDA header is included: this file is plain C with a macro. */
#ifndef KV_CUDA_VALUES_H
#define KV_CUDA_VALUES_H

#include <stdint.h>
#include <string.h>

#include "kv_device.h"

/* Distinguishes V from K of the same token, layer and head. */
#define KV_CUDA_V_SALT 0xD6E8FEB86659FD93ull

static inline KV_HOST_DEVICE uint32_t kv_cuda_f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static inline KV_HOST_DEVICE float kv_cuda_bits_f32(uint32_t x)
{
    float f;
    memcpy(&f, &x, sizeof f);
    return f;
}

/* float -> bfloat16 bits, round to nearest even (NaN stays NaN). */
static inline KV_HOST_DEVICE uint16_t kv_cuda_f32_to_bf16(float f)
{
    uint32_t x = kv_cuda_f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* float -> IEEE binary16 bits, round to nearest even; overflow gives inf,
 * tiny values become fp16 subnormals or zero. */
static inline KV_HOST_DEVICE uint16_t kv_cuda_f32_to_f16(float f)
{
    uint32_t x = kv_cuda_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00u);
    if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u); /* >= 65520 rounds to inf */
    int e = (int)(ax >> 23) - 127;
    if (e < -14) { /* subnormal half: value = q x 2^-24 */
        if (e < -25) return sign;
        uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
        int shift = -e - 1; /* mant x 2^(e-23) / 2^-24 = mant >> (-e - 1) */
        uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t bits = ((uint32_t)(e + 15) << 10) | ((ax >> 13) & 0x3FFu);
    uint32_t rem = ax & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (bits & 1u))) bits++;
    return (uint16_t)(sign | bits);
}

/* float -> fp8 e4m3 bits (the "fn" variant NVIDIA and vLLM use: bias 7, no
 * infinity, largest finite 448 = 0x7E, NaN = 0x7F), round to nearest even,
 * saturating to +-448 like __NV_SATFINITE. */
static inline KV_HOST_DEVICE uint8_t kv_cuda_f32_to_e4m3(float f)
{
    uint32_t x = kv_cuda_f32_bits(f);
    uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return (uint8_t)(sign | 0x7Fu);
    if (ax >= 0x43E00000u) return (uint8_t)(sign | 0x7Eu); /* >= 448, inf included */
    int e = (int)(ax >> 23) - 127;
    if (e < -6) { /* subnormal e4m3: value = q x 2^-9 */
        if (e < -10) return sign;
        uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
        int shift = 14 - e;
        uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint8_t)(sign | q); /* q == 8 is the smallest normal: still right */
    }
    uint32_t bits = ((uint32_t)(e + 7) << 3) | ((ax >> 20) & 7u);
    uint32_t rem = ax & 0xFFFFFu;
    if (rem > 0x80000u || (rem == 0x80000u && (bits & 1u))) bits++;
    if (bits > 0x7Eu) bits = 0x7Eu;
    return (uint8_t)(sign | bits);
}

/* fp8 e4m3 bits -> float (exact). */
static inline KV_HOST_DEVICE float kv_cuda_e4m3_to_f32(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t e = (b >> 3) & 0xFu, m = b & 7u;
    if (e == 0xFu && m == 7u) return kv_cuda_bits_f32(sign | 0x7FC00000u);
    float v = e ? (float)(8u + m) * kv_cuda_bits_f32((e + 127u - 7u - 3u) << 23)
                : (float)m * (1.0f / 512.0f);
    return kv_cuda_bits_f32(sign | kv_cuda_f32_bits(v));
}

/* float -> fp8 e5m2 bits (bias 15, 2 mantissa bits; 0x7C is infinity),
 * round to nearest even, saturating to +-57344 = 0x7B like __NV_SATFINITE,
 * NaN = 0x7F. */
static inline KV_HOST_DEVICE uint8_t kv_cuda_f32_to_e5m2(float f)
{
    uint32_t x = kv_cuda_f32_bits(f);
    uint8_t sign = (uint8_t)((x >> 24) & 0x80u);
    uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return (uint8_t)(sign | 0x7Fu);
    if (ax >= 0x47600000u) return (uint8_t)(sign | 0x7Bu); /* >= 57344, inf included */
    int e = (int)(ax >> 23) - 127;
    if (e < -14) { /* subnormal e5m2: value = q x 2^-16 */
        if (e < -18) return sign;
        uint32_t mant = (ax & 0x7FFFFFu) | 0x800000u;
        int shift = 7 - e;
        uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint8_t)(sign | q); /* q == 4 is the smallest normal: still right */
    }
    uint32_t bits = ((uint32_t)(e + 15) << 2) | ((ax >> 21) & 3u);
    uint32_t rem = ax & 0x1FFFFFu;
    if (rem > 0x100000u || (rem == 0x100000u && (bits & 1u))) bits++;
    if (bits > 0x7Bu) bits = 0x7Bu;
    return (uint8_t)(sign | bits);
}

/* fp8 e5m2 bits -> float (exact; 0x7C infinity, 0x7D..0x7F NaN). */
static inline KV_HOST_DEVICE float kv_cuda_e5m2_to_f32(uint8_t b)
{
    uint32_t sign = (uint32_t)(b & 0x80u) << 24;
    uint32_t e = (b >> 2) & 0x1Fu, m = b & 3u;
    if (e == 0x1Fu) return kv_cuda_bits_f32(sign | (m ? 0x7FC00000u : 0x7F800000u));
    float v = e ? (float)(4u + m) * kv_cuda_bits_f32((e + 127u - 15u - 2u) << 23)
                : (float)m * (1.0f / 65536.0f);
    return kv_cuda_bits_f32(sign | kv_cuda_f32_bits(v));
}

/* The byte element e of a head row takes from fingerprint f. Bytes repeat
 * every 8 elements, shuffled by the group index so rows do not look periodic. */
static inline KV_HOST_DEVICE uint8_t kv_cuda_value_byte(uint64_t f, int32_t e)
{
    return (uint8_t)((uint8_t)(f >> ((e & 7) * 8)) ^ (uint8_t)((uint32_t)(e >> 3) * 157u));
}

/* The number a byte stands for: sign bit 7, then 1 + (7 low bits) / 128, so
 * +-[1, 2). Every such value is exact in bf16, fp16 and fp32 (7 mantissa
 * bits); fp8 e4m3 rounds it to 3 mantissa bits. */
static inline KV_HOST_DEVICE float kv_cuda_value_f32(uint8_t b)
{
    float v = 1.0f + (float)(b & 0x7Fu) * (1.0f / 128.0f);
    return (b & 0x80u) ? -v : v;
}

/* The stored bits (low kv_dtype_bytes() bytes) of a byte in a cache dtype:
 * the reference, through the conversions above (int8 stores the byte). */
static inline KV_HOST_DEVICE uint32_t kv_cuda_value_bits(int dtype, uint8_t b)
{
    float v = kv_cuda_value_f32(b);
    switch (dtype) {
    case KV_DTYPE_BF16: return kv_cuda_f32_to_bf16(v);
    case KV_DTYPE_FP16: return kv_cuda_f32_to_f16(v);
    case KV_DTYPE_FP8_E4M3: return kv_cuda_f32_to_e4m3(v);
    case KV_DTYPE_FP8_E5M2: return kv_cuda_f32_to_e5m2(v);
    case KV_DTYPE_INT8: return b;
    default: return kv_cuda_f32_bits(v);
    }
}

/* Two bytes (bits 0-7 and 16-23 of w) -> two 16-bit values in one word,
 * with the same bits kv_cuda_value_bits gives, by bit operations only. */
static inline KV_HOST_DEVICE uint32_t kv_cuda_pair16(int dtype, uint32_t w)
{
    uint32_t sign = (w & 0x00800080u) << 8, m = w & 0x007F007Fu;
    return dtype == KV_DTYPE_FP16 ? sign | 0x3C003C00u | (m << 3) : sign | 0x3F803F80u | m;
}

/* Four bytes -> four fp8 e4m3 values in one word: 1 + m/128 rounded to
 * nearest even on 3 mantissa bits, per byte without carries between bytes
 * (a round-up from 1.875 lands on 2.0 = 0x40, the next exponent). */
static inline KV_HOST_DEVICE uint32_t kv_cuda_quad_e4m3(uint32_t w)
{
    uint32_t q = (w >> 4) & 0x07070707u, rem = w & 0x0F0F0F0Fu;
    uint32_t up = ((rem + 0x07070707u + (q & 0x01010101u)) >> 4) & 0x01010101u;
    return (w & 0x80808080u) | (0x38383838u + q + up);
}

/* Four bytes -> four fp8 e5m2 values in one word: 1 + m/128 rounded to
 * nearest even on 2 mantissa bits, per byte without carries (a round-up
 * from 1.875 lands on 2.0 = 0x40). */
static inline KV_HOST_DEVICE uint32_t kv_cuda_quad_e5m2(uint32_t w)
{
    uint32_t q = (w >> 5) & 0x03030303u, rem = w & 0x1F1F1F1Fu;
    uint32_t up = ((rem + 0x0F0F0F0Fu + (q & 0x01010101u)) >> 5) & 0x01010101u;
    return (w & 0x80808080u) | (0x3C3C3C3Cu + q + up);
}

/* Four bytes -> four values of a one-byte dtype. */
static inline KV_HOST_DEVICE uint32_t kv_cuda_quad8(int dtype, uint32_t w)
{
    return dtype == KV_DTYPE_FP8_E5M2 ? kv_cuda_quad_e5m2(w) : dtype == KV_DTYPE_INT8 ? w : kv_cuda_quad_e4m3(w);
}

/* One 32-bit value from a byte (fp32 cache). */
static inline KV_HOST_DEVICE uint32_t kv_cuda_one32(uint32_t b)
{
    return ((b & 0x80u) << 24) | 0x3F800000u | ((b & 0x7Fu) << 16);
}

/* The 16 bytes stored for elements e0 .. e0 + 16/dtype_bytes - 1 of a head
 * row with fingerprint f (e0 a multiple of 16/dtype_bytes), as four
 * little-endian words: what the kernels store and compare, unit-tested
 * against kv_cuda_value_bits element by element. */
static inline KV_HOST_DEVICE void kv_cuda_pack16(int dtype, uint64_t f, int32_t e0, uint32_t out[4])
{
    const uint32_t lo = (uint32_t)f, hi = (uint32_t)(f >> 32);
    const uint32_t c0 = ((uint32_t)(e0 >> 3) * 157u & 0xFFu) * 0x01010101u;
    if (kv_dtype_bytes(dtype) == 1) { /* 16 elements: two groups of 8 */
        const uint32_t c1 = ((uint32_t)((e0 >> 3) + 1) * 157u & 0xFFu) * 0x01010101u;
        out[0] = kv_cuda_quad8(dtype, lo ^ c0);
        out[1] = kv_cuda_quad8(dtype, hi ^ c0);
        out[2] = kv_cuda_quad8(dtype, lo ^ c1);
        out[3] = kv_cuda_quad8(dtype, hi ^ c1);
    } else if (dtype == KV_DTYPE_BF16 || dtype == KV_DTYPE_FP16) { /* 8 elements: one group */
        const uint32_t x = lo ^ c0, y = hi ^ c0;
        out[0] = kv_cuda_pair16(dtype, (x & 0xFFu) | ((x & 0xFF00u) << 8));
        out[1] = kv_cuda_pair16(dtype, ((x >> 16) & 0xFFu) | ((x >> 8) & 0xFF0000u));
        out[2] = kv_cuda_pair16(dtype, (y & 0xFFu) | ((y & 0xFF00u) << 8));
        out[3] = kv_cuda_pair16(dtype, ((y >> 16) & 0xFFu) | ((y >> 8) & 0xFF0000u));
    } else { /* fp32: 4 elements, half a group */
        const uint32_t x = ((e0 & 4) ? hi : lo) ^ c0;
        out[0] = kv_cuda_one32(x & 0xFFu);
        out[1] = kv_cuda_one32((x >> 8) & 0xFFu);
        out[2] = kv_cuda_one32((x >> 16) & 0xFFu);
        out[3] = kv_cuda_one32(x >> 24);
    }
}

/* Fingerprint of K (kv = 0) or V (kv = 1) of a token (its kv_token_key) at
 * (layer, global KV head). */
static inline KV_HOST_DEVICE uint64_t kv_cuda_row_fingerprint(uint64_t token_key, int32_t layer, int32_t kv_head,
                                                              int kv)
{
    uint64_t f = kv_row_fingerprint(token_key, layer, kv_head);
    return kv ? f ^ KV_CUDA_V_SALT : f;
}

#endif
