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

#include "kv_cache.h"
#include "quant/tensor_type.h"

#define QK8 32 /* elements per Q8_1 block */

/* ---- launches: programmatic dependent launch (sm_90) ----
 * Every kernel is launched so that the next one in the stream may be
 * scheduled while it runs: the next kernel's CTAs become resident early and
 * wait in grid_begin until this kernel has finished and its writes are
 * visible, hiding the launch gap between dependent kernels. Each kernel
 * calls grid_begin before it touches memory that another kernel writes or
 * reads (activations, caches, scratch); only read-only weights may be
 * touched before it (a prefetch into L2). grid_begin then lets the kernel
 * after it launch. Before sm_90, or with MINFER_NO_PDL=1 in the environment
 * (for measurements), launches serialize as plain ones do. */
extern "C" bool cuda_pdl_enabled(void); /* device.cu */

__device__ static inline void grid_begin(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

/* The warp asks L2 for the bytes [p, p + n) (one 128-byte line per lane). */
__device__ static inline void prefetch_l2(const uint8_t *p, size_t n)
{
    const uintptr_t first = (uintptr_t)p & ~(uintptr_t)127, end = (uintptr_t)p + n;
    for (uintptr_t at = first + 128 * (threadIdx.x % 32); at < end; at += 128 * 32)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
}

/* Launches kernel k; a failure is latched for cuda_launch_end to report. */
template <typename... P, typename... A>
static inline void launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A... args)
{
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = cuda_pdl_enabled() ? 1 : 0;
    (void)cudaLaunchKernelEx(&cfg, k, ((P)args)...);
}

__device__ static inline float half_at(const uint8_t *p)
{
    return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8)));
}

/* A little-endian 32-bit word at any address (byte loads). */
__device__ static inline uint32_t u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
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

/* Quantizes the 32 values of one warp (one per lane) into the Q8_1 block at
 * out, as the CPU's quant_q8_1 does: d = amax/127, q = roundf(v / d),
 * s = d * sum(q), each rounded once. */
__device__ static inline void q8_1_block(float v, uint8_t *out)
{
    const int lane = threadIdx.x % 32;
    float amax = fabsf(v);
    for (int off = 16; off > 0; off >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    const int q = (int)roundf(__fmul_rn(v, id));
    int sum = q;
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    out[4 + lane] = (uint8_t)(int8_t)q;
    if (lane == 0) /* blocks are 36 bytes, so every block starts 4-byte aligned */
        *reinterpret_cast<__half2 *>(out) = __floats2half2_rn(d, __fmul_rn(d, (float)sum));
}

/* One KV cache row (kv_cache.h's element types) from d values at src, by
 * the CTA's threads (whole warps): f16 rounded to nearest, Q8_0 as the
 * CPU's quant_q8_0 (d = amax / 127, q = roundf(v / d)). */
template <int KT>
__device__ static inline void kv_row_write(uint8_t *row, const float *src, int64_t d)
{
    if constexpr (KT == KV_F32) {
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
            ((float *)row)[i] = src[i];
    } else if constexpr (KT == KV_F16) {
        for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
            ((__half *)row)[i] = __float2half_rn(src[i]);
    } else {
        const int lane = threadIdx.x % 32;
        for (int64_t b = threadIdx.x / 32; b < d / 32; b += blockDim.x / 32) {
            const float x = src[b * 32 + lane];
            float amax = fabsf(x);
            for (int off = 16; off > 0; off >>= 1)
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
            const float dq = __fdiv_rn(amax, 127.0f), id = dq != 0.0f ? __fdiv_rn(1.0f, dq) : 0.0f;
            uint8_t *blk = row + b * 34;
            blk[2 + lane] = (uint8_t)(int8_t)roundf(__fmul_rn(x, id));
            if (lane == 0) /* blocks are 34 bytes: the scale is 2-byte aligned */
                *(unsigned short *)blk = __half_as_ushort(__float2half_rn(dq));
        }
    }
}

/* ---- quantized weights against Q8_1 activations ---- */

/* N little-endian words from p, which is 2-byte aligned (legacy blocks of
 * 18 and 22 bytes, Q8_0's 34, Q6_K's 210): aligned word loads shifted into
 * place, and the last two bytes read as a half word, so nothing past p + 4N
 * is touched. */
template <int N>
__device__ static inline void words2(const uint8_t *p, unsigned out[N])
{
    const uintptr_t a = (uintptr_t)p;
    const unsigned *w = (const unsigned *)(a & ~(uintptr_t)3);
    const unsigned shift = 8 * (unsigned)(a & 3);
    unsigned v[N + 1];
#pragma unroll
    for (int t = 0; t < N; t++)
        v[t] = w[t];
    v[N] = shift ? *(const unsigned short *)(w + N) : 0;
#pragma unroll
    for (int t = 0; t < N; t++)
        out[t] = __funnelshift_r(v[t], v[t + 1], shift);
}

/* N words from a 4-byte-aligned p. */
template <int N>
__device__ static inline void words4(const uint8_t *p, unsigned out[N])
{
#pragma unroll
    for (int t = 0; t < N; t++)
        out[t] = ((const unsigned *)p)[t];
}

/* The codes of a Q8_1 block as eight words, and its d and s. */
struct q8_1_block {
    int q[8];
    float d, s;
};

__device__ static inline struct q8_1_block q8_1_at(const uint8_t *a)
{
    struct q8_1_block x;
    const unsigned *w = (const unsigned *)a; /* blocks are 36 bytes, so every one is 4-byte aligned */
    const unsigned ds = w[0];
#pragma unroll
    for (int t = 0; t < 8; t++)
        x.q[t] = (int)w[1 + t];
    x.d = __half2float(__ushort_as_half((unsigned short)(ds & 0xffff)));
    x.s = __half2float(__ushort_as_half((unsigned short)(ds >> 16)));
    return x;
}

/* 32 legacy 4-bit codes (16 bytes: low nibbles are codes 0..15, high ones
 * 16..31) as eight words of four codes, in the activation's order. */
__device__ static inline void nibbles8(const unsigned b[4], unsigned out[8])
{
#pragma unroll
    for (int t = 0; t < 4; t++) {
        out[t] = b[t] & 0x0f0f0f0fu;
        out[t + 4] = (b[t] >> 4) & 0x0f0f0f0fu;
    }
}

/* Adds bit 4 of each code from qh (bit i for code i). */
__device__ static inline void high_bits8(uint32_t qh, unsigned q[8])
{
#pragma unroll
    for (int t = 0; t < 8; t++) {
        const unsigned bits = qh >> (4 * t);
        q[t] |= ((bits & 1) << 4) | ((bits & 2) << 11) | ((bits & 4) << 18) | ((bits & 8) << 25);
    }
}

__device__ static inline int dot8(const unsigned q[8], const int a[8])
{
    int s = 0;
#pragma unroll
    for (int t = 0; t < 8; t++)
        s = __dp4a((int)q[t], a[t], s);
    return s;
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
    words2<8>(ql, lo);
    words2<8>(qh, hi);
    int s2[2] = { 0, 0 };
#pragma unroll
    for (int t = 0; t < 8; t++) {
        /* four 6-bit codes at once; the bytewise subtraction wraps 0..63 to -32..31 */
        const unsigned q = ((lo[t] >> lo_shift) & 0x0f0f0f0fu) | ((hi[t] >> hi_shift) & 0x03030303u) << 4;
        s2[t / 4] = __dp4a((int)__vsub4(q, 0x20202020u), x.q[t], s2[t / 4]);
    }
    return half_at(b + 208) * x.d * (float)(sc[0] * s2[0] + sc[1] * s2[1]);
}

/* The 6-bit scale and min of sub-block sb of a Q4_K/Q5_K superblock, from
 * the 12 packed bytes at b + 4 (read as three aligned words). */
__device__ static inline void k_scale_min(const uint8_t *b, int sb, int *sc, int *mn)
{
    const unsigned *w = (const unsigned *)(b + 4);
    const unsigned w0 = w[0], w1 = w[1], w2 = w[2];
#define KBYTE(k) ((int)((((k) < 4 ? w0 : (k) < 8 ? w1 : w2) >> (8 * ((k) % 4))) & 0xff))
    if (sb < 4) {
        *sc = KBYTE(sb) & 63;
        *mn = KBYTE(sb + 4) & 63;
    } else {
        *sc = (KBYTE(sb + 4) & 0xf) | (KBYTE(sb - 4) >> 6) << 4;
        *mn = (KBYTE(sb + 4) >> 4) | (KBYTE(sb) >> 6) << 4;
    }
#undef KBYTE
}

/* The 32-element block j of a row of type T (for K-quants, superblock j / 8,
 * sub-block j % 8) against one Q8_1 block: the formulas of quant_dot.c.
 * Rows start where a block of their type may: Q4_K and Q5_K rows are
 * 16-byte aligned (144 and 176 are multiples of 16), Q4_1 and Q5_1 4-byte,
 * the rest 2-byte. */
template <int T>
__device__ static inline float block_dot(const uint8_t *row, int64_t j, const struct q8_1_block &x)
{
    if constexpr (T == TYPE_Q8_0) {
        const uint8_t *b = row + j * 34;
        unsigned q[8];
        words2<8>(b + 2, q);
        return half_at(b) * x.d * (float)dot8(q, x.q);
    } else if constexpr (T == TYPE_Q4_0 || T == TYPE_Q4_1 || T == TYPE_Q5_0 || T == TYPE_Q5_1) {
        const int bytes = T == TYPE_Q4_0 ? 18 : T == TYPE_Q4_1 ? 20 : T == TYPE_Q5_0 ? 22 : 24;
        const uint8_t *b = row + j * bytes;
        unsigned raw[4], q[8];
        if constexpr (T == TYPE_Q4_0)
            words2<4>(b + 2, raw);
        else if constexpr (T == TYPE_Q4_1)
            words4<4>(b + 4, raw);
        else if constexpr (T == TYPE_Q5_0)
            words2<4>(b + 6, raw);
        else
            words4<4>(b + 8, raw);
        nibbles8(raw, q);
        if constexpr (T == TYPE_Q5_0) {
            unsigned qh[1];
            words2<1>(b + 2, qh);
            high_bits8(qh[0], q);
        } else if constexpr (T == TYPE_Q5_1) {
            high_bits8(((const unsigned *)b)[1], q);
        }
        const int s = dot8(q, x.q);
        const float d = half_at(b);
        /* every rounding explicit, in quant_dot.c's order (no contraction to FMA) */
        if constexpr (T == TYPE_Q4_0)
            return __fmul_rn(d, __fsub_rn(__fmul_rn(x.d, (float)s), __fmul_rn(8.0f, x.s)));
        else if constexpr (T == TYPE_Q5_0)
            return __fmul_rn(d, __fsub_rn(__fmul_rn(x.d, (float)s), __fmul_rn(16.0f, x.s)));
        else
            return __fadd_rn(__fmul_rn(__fmul_rn(d, x.d), (float)s), __fmul_rn(half_at(b + 2), x.s));
    } else if constexpr (T == TYPE_Q4_K || T == TYPE_Q5_K) {
        const uint8_t *b = row + (j / 8) * (T == TYPE_Q4_K ? 144 : 176);
        const int sb = (int)(j % 8);
        int sc, mn;
        k_scale_min(b, sb, &sc, &mn);
        const uint4 *q16 = (const uint4 *)(b + (T == TYPE_Q4_K ? 16 : 48) + 32 * (sb / 2));
        const uint4 lo = q16[0], hi = q16[1];
        const unsigned raw[8] = { lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w };
        const int shift = 4 * (sb % 2);
        unsigned q[8];
#pragma unroll
        for (int t = 0; t < 8; t++)
            q[t] = (raw[t] >> shift) & 0x0f0f0f0fu;
        if constexpr (T == TYPE_Q5_K) {
            const uint4 *h16 = (const uint4 *)(b + 16);
            const uint4 h0 = h16[0], h1 = h16[1];
            const unsigned hr[8] = { h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w };
#pragma unroll
            for (int t = 0; t < 8; t++)
                q[t] |= ((hr[t] >> sb) & 0x01010101u) << 4;
        }
        return __fsub_rn(__fmul_rn(__fmul_rn(__fmul_rn(half_at(b), (float)sc), x.d), (float)dot8(q, x.q)),
                         __fmul_rn(__fmul_rn(half_at(b + 2), (float)mn), x.s));
    } else {
        static_assert(T == TYPE_Q6_K, "block_dot: a type without a Q8_1 dot");
        return block_dot_q6_k(row, j, x);
    }
}

#endif
