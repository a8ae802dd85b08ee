/* common.cuh: device helpers the kernel families share: little-endian
 * loads from GGUF blocks at any alignment, the Q8_1 activation block, each
 * weight type's decoder (bit-identical to the CPU's: every product and sum
 * is rounded once, as the CPU reference does, never contracted into an
 * FMA), and each quantized type's integer dot with a Q8_1 block (dp4a, as
 * quant_dot.c's reference computes it). */
#ifndef MINFER_CUDA_COMMON_CUH
#define MINFER_CUDA_COMMON_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "quant/tensor_type.h"

#define QK8 32 /* elements per Q8_1 block */

__device__ static inline float half_at(const uint8_t *p)
{
    return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8)));
}

/* A little-endian 32-bit word at any address (byte loads). */
__device__ static inline uint32_t u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Eight little-endian words from a 2-byte-aligned p (Q8_0 and Q6_K blocks
 * are 34 and 210 bytes, so their codes are only 2-byte aligned): eight
 * aligned word loads and, when p is not 4-aligned, the two bytes after them,
 * so nothing past p + 32 is read. */
__device__ static inline void words8(const uint8_t *p, unsigned out[8])
{
    const uintptr_t a = (uintptr_t)p;
    const unsigned *w = (const unsigned *)(a & ~(uintptr_t)3);
    const unsigned shift = 8 * (unsigned)(a & 3);
    unsigned v[9];
    for (int t = 0; t < 8; t++)
        v[t] = w[t];
    v[8] = shift ? *(const unsigned short *)(w + 8) : 0;
    for (int t = 0; t < 8; t++)
        out[t] = __funnelshift_r(v[t], v[t + 1], shift);
}

/* ---- decoding: element e (0 <= e < block_elems) of one block ---- */

__device__ static inline float decode(enum tensor_type t, const uint8_t *b, int e)
{
    switch (t) {
    case TYPE_F32: return __uint_as_float(u32_at(b + 4 * e));
    case TYPE_F16: return half_at(b + 2 * e);
    case TYPE_BF16: return __uint_as_float((uint32_t)(b[2 * e] | b[2 * e + 1] << 8) << 16);
    case TYPE_Q4_0: {
        int q = e < 16 ? b[2 + e] & 0xf : b[2 + e - 16] >> 4;
        return __fmul_rn(half_at(b), (float)(q - 8));
    }
    case TYPE_Q4_1: {
        int q = e < 16 ? b[4 + e] & 0xf : b[4 + e - 16] >> 4;
        return __fadd_rn(__fmul_rn(half_at(b), (float)q), half_at(b + 2));
    }
    case TYPE_Q5_0: case TYPE_Q5_1: {
        const int off = t == TYPE_Q5_0 ? 2 : 4;
        const uint32_t qh = u32_at(b + off);
        int q = (e < 16 ? b[off + 4 + e] & 0xf : b[off + 4 + e - 16] >> 4) | (int)((qh >> e) & 1) << 4;
        return t == TYPE_Q5_0 ? __fmul_rn(half_at(b), (float)(q - 16))
                              : __fadd_rn(__fmul_rn(half_at(b), (float)q), half_at(b + 2));
    }
    case TYPE_Q8_0: return __fmul_rn(half_at(b), (float)(int8_t)b[2 + e]);
    case TYPE_Q4_K: case TYPE_Q5_K: {
        const int j = e / 32, l = e % 32;
        const uint8_t *sp = b + 4;
        const int sc = j < 4 ? sp[j] & 63 : (sp[j + 4] & 0xf) | (sp[j - 4] >> 6) << 4;
        const int mn = j < 4 ? sp[j + 4] & 63 : (sp[j + 4] >> 4) | (sp[j] >> 6) << 4;
        const uint8_t *qs = b + (t == TYPE_Q4_K ? 16 : 48);
        int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xf;
        if (t == TYPE_Q5_K)
            q |= ((b[16 + l] >> j) & 1) << 4;
        const float dl = __fmul_rn(half_at(b), (float)sc), ml = __fmul_rn(half_at(b + 2), (float)mn);
        return __fsub_rn(__fmul_rn(dl, (float)q), ml);
    }
    case TYPE_Q6_K: {
        const int h = e / 128, r = e % 128;
        const int lo = (b[64 * h + r % 64] >> (4 * (r / 64))) & 0xf;
        const int hi = (b[128 + 32 * h + r % 32] >> (2 * (r / 32))) & 3;
        const float ds = __fmul_rn(half_at(b + 208), (float)(int8_t)b[192 + e / 16]);
        return __fmul_rn(ds, (float)((lo | hi << 4) - 32));
    }
    default: return 0.0f;
    }
}

/* ---- quantized weights against Q8_1 activations ---- */

/* The 32 codes of a Q8_1 block as eight words, and its d and s. */
struct q8_1_block {
    const int *q;
    float d, s;
};

__device__ static inline struct q8_1_block q8_1_at(const uint8_t *a)
{
    struct q8_1_block x;
    x.q = (const int *)(a + 4);
    x.d = half_at(a);
    x.s = half_at(a + 2);
    return x;
}

/* 32 legacy 4-bit codes (low nibbles first) as eight words of four codes. */
__device__ static inline void nibbles8(const uint8_t *qs, unsigned out[8])
{
    for (int t = 0; t < 4; t++) {
        const unsigned w = u32_at(qs + 4 * t);
        out[t] = w & 0x0f0f0f0fu;
        out[t + 4] = (w >> 4) & 0x0f0f0f0fu;
    }
}

/* Adds bit 4 of each code from qh (bit i for code i). */
__device__ static inline void high_bits8(uint32_t qh, unsigned q[8])
{
    for (int t = 0; t < 8; t++) {
        const unsigned bits = qh >> (4 * t);
        q[t] |= ((bits & 1) << 4) | ((bits & 2) << 11) | ((bits & 4) << 18) | ((bits & 8) << 25);
    }
}

/* Q6_K: 32-element block sb of a 210-byte superblock; codes are 6-bit, low
 * 4 bits in ql and high 2 in qh, minus 32; two scales of 16 elements. */
__device__ static inline float block_dot_q6_k(const uint8_t *row, int64_t j, const struct q8_1_block &x)
{
    const uint8_t *b = row + (j / 8) * 210;
    const int sb = (int)(j % 8);
    const uint8_t *ql = b + 64 * (sb / 4) + 32 * (sb % 2), *qh = b + 128 + 32 * (sb / 4);
    const int lo_shift = 4 * ((sb % 4) / 2), hi_shift = 2 * (sb % 4);
    const int8_t *sc = (const int8_t *)(b + 192) + 2 * sb;
    unsigned lo[8], hi[8];
    words8(ql, lo);
    words8(qh, hi);
    int s2[2] = { 0, 0 };
    for (int t = 0; t < 8; t++) {
        /* four 6-bit codes at once; the bytewise subtraction wraps 0..63 to -32..31 */
        const unsigned q = ((lo[t] >> lo_shift) & 0x0f0f0f0fu) | ((hi[t] >> hi_shift) & 0x03030303u) << 4;
        s2[t / 4] = __dp4a((int)__vsub4(q, 0x20202020u), x.q[t], s2[t / 4]);
    }
    return half_at(b + 208) * x.d * (float)(sc[0] * s2[0] + sc[1] * s2[1]);
}


/* The 32-element block j of a row of type T (for K-quants, superblock j / 8,
 * sub-block j % 8) against one Q8_1 block: the formulas of quant_dot.c. */
template <int T>
__device__ static inline float block_dot(const uint8_t *row, int64_t j, const uint8_t *a)
{
    const struct q8_1_block x = q8_1_at(a);
    int s = 0;
    if constexpr (T == TYPE_Q8_0) {
        const uint8_t *b = row + j * 34;
        unsigned q[8];
        words8(b + 2, q);
        for (int t = 0; t < 8; t++)
            s = __dp4a((int)q[t], x.q[t], s);
        return half_at(b) * x.d * (float)s;
    } else if constexpr (T == TYPE_Q4_0 || T == TYPE_Q4_1 || T == TYPE_Q5_0 || T == TYPE_Q5_1) {
        const int bytes = T == TYPE_Q4_0 ? 18 : T == TYPE_Q4_1 ? 20 : T == TYPE_Q5_0 ? 22 : 24;
        const int qs_at = T == TYPE_Q4_0 ? 2 : T == TYPE_Q4_1 ? 4 : T == TYPE_Q5_0 ? 6 : 8;
        const uint8_t *b = row + j * bytes;
        unsigned q[8];
        nibbles8(b + qs_at, q);
        if (T == TYPE_Q5_0 || T == TYPE_Q5_1)
            high_bits8(u32_at(b + (T == TYPE_Q5_0 ? 2 : 4)), q);
        for (int t = 0; t < 8; t++)
            s = __dp4a((int)q[t], x.q[t], s);
        const float d = half_at(b);
        if (T == TYPE_Q4_0)
            return d * (x.d * (float)s - 8.0f * x.s);
        if (T == TYPE_Q5_0)
            return d * (x.d * (float)s - 16.0f * x.s);
        return d * x.d * (float)s + half_at(b + 2) * x.s;
    } else if constexpr (T == TYPE_Q4_K || T == TYPE_Q5_K) {
        const uint8_t *b = row + (j / 8) * (T == TYPE_Q4_K ? 144 : 176);
        const int sb = (int)(j % 8);
        const uint8_t *sp = b + 4;
        const int sc = sb < 4 ? sp[sb] & 63 : (sp[sb + 4] & 0xf) | (sp[sb - 4] >> 6) << 4;
        const int mn = sb < 4 ? sp[sb + 4] & 63 : (sp[sb + 4] >> 4) | (sp[sb] >> 6) << 4;
        const uint8_t *qs = b + (T == TYPE_Q4_K ? 16 : 48) + 32 * (sb / 2);
        const int shift = 4 * (sb % 2);
        unsigned q[8];
        for (int t = 0; t < 8; t++)
            q[t] = (u32_at(qs + 4 * t) >> shift) & 0x0f0f0f0fu;
        if (T == TYPE_Q5_K) {
            for (int t = 0; t < 8; t++) {
                const unsigned h = u32_at(b + 16 + 4 * t) >> sb;
                q[t] |= (h & 0x01010101u) << 4;
            }
        }
        for (int t = 0; t < 8; t++)
            s = __dp4a((int)q[t], x.q[t], s);
        return half_at(b) * (float)sc * x.d * (float)s - half_at(b + 2) * (float)mn * x.s;
    } else {
        static_assert(T == TYPE_Q6_K, "block_dot: a type without a Q8_1 dot");
        return block_dot_q6_k(row, j, x);
    }
}

#endif
