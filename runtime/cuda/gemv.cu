/* gemv.cu: decode GEMV over Q8_1 activations (see gemv.h). Each warp owns
 * one row; lane i takes the row's 32-element blocks i, i + 32, ... and keeps
 * one float sum, and the warp adds the 32 sums in a butterfly. */
#include "cuda/gemv.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/device.h"

#define ROWS_PER_CTA 4

__device__ static inline float half_at(const uint8_t *p)
{
    return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8)));
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

/* One Q8_0 block (34 bytes) against one Q8_1 block. */
__device__ static inline float block_q8_0(const uint8_t *w, const uint8_t *a)
{
    const int *aq = (const int *)(a + 4);
    unsigned q[8];
    words8(w + 2, q);
    int s = 0;
    for (int t = 0; t < 8; t++)
        s = __dp4a((int)q[t], aq[t], s);
    return half_at(w) * half_at(a) * (float)s;
}

/* Sub-block j (0..7) of a Q4_K superblock (144 bytes) against one Q8_1 block. */
__device__ static inline float block_q4_k(const uint8_t *w, int j, const uint8_t *a)
{
    const uint8_t *sp = w + 4;
    int sc = j < 4 ? sp[j] & 63 : (sp[j + 4] & 0xf) | (sp[j - 4] >> 6) << 4;
    int mn = j < 4 ? sp[j + 4] & 63 : (sp[j + 4] >> 4) | (sp[j] >> 6) << 4;
    /* the 32 code bytes in two 16-byte loads (superblocks are 144 bytes, so
     * the codes of a row that starts 16-byte aligned are 16-byte aligned) */
    const uint4 *q16 = (const uint4 *)(w + 16 + 32 * (j / 2));
    const uint4 lo = q16[0], hi = q16[1];
    const int q[8] = { (int)lo.x, (int)lo.y, (int)lo.z, (int)lo.w, (int)hi.x, (int)hi.y, (int)hi.z, (int)hi.w };
    const int *aq = (const int *)(a + 4);
    const int shift = 4 * (j % 2);
    int s = 0;
    for (int t = 0; t < 8; t++)
        s = __dp4a((q[t] >> shift) & 0x0f0f0f0f, aq[t], s);
    return half_at(w) * (float)sc * half_at(a) * (float)s - half_at(w + 2) * (float)mn * half_at(a + 2);
}

/* 32-element block j (0..7) of a Q6_K superblock (210 bytes): codes are
 * 6-bit, stored low 4 bits in ql and high 2 in qh, minus 32. */
__device__ static inline float block_q6_k(const uint8_t *w, int j, const uint8_t *a)
{
    const uint8_t *ql = w + 64 * (j / 4) + 32 * (j % 2), *qh = w + 128 + 32 * (j / 4);
    const int lo_shift = 4 * ((j % 4) / 2), hi_shift = 2 * (j % 4);
    const int8_t *sc = (const int8_t *)(w + 192) + 2 * j;
    const int *aq = (const int *)(a + 4);
    unsigned lo[8], hi[8];
    words8(ql, lo);
    words8(qh, hi);
    int s[2] = { 0, 0 };
    for (int t = 0; t < 8; t++) {
        /* four 6-bit codes at once; the bytewise subtraction wraps 0..63 to -32..31 */
        const unsigned q = ((lo[t] >> lo_shift) & 0x0f0f0f0fu) | ((hi[t] >> hi_shift) & 0x03030303u) << 4;
        s[t / 4] = __dp4a((int)__vsub4(q, 0x20202020u), aq[t], s[t / 4]);
    }
    return half_at(w + 208) * half_at(a) * (float)(sc[0] * s[0] + sc[1] * s[1]);
}

template <int TYPE>
__global__ void gemv_kernel(const uint8_t *__restrict__ w, const uint8_t *__restrict__ x, float *__restrict__ y,
                            int64_t k, int64_t n, size_t row_bytes)
{
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_CTA + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (row >= n)
        return;
    const uint8_t *wr = w + (size_t)row * row_bytes;
    float sum = 0;
    for (int64_t j = lane; j < k / 32; j += 32) {
        const uint8_t *a = x + j * 36;
        if (TYPE == TYPE_Q8_0)
            sum += block_q8_0(wr + j * 34, a);
        else if (TYPE == TYPE_Q4_K)
            sum += block_q4_k(wr + (j / 8) * 144, (int)(j % 8), a);
        else
            sum += block_q6_k(wr + (j / 8) * 210, (int)(j % 8), a);
    }
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (lane == 0)
        y[row] = sum;
}

extern "C" int cuda_gemv_q8_1(enum tensor_type t, const void *w, const void *x, float *y, int64_t k, int64_t n,
                              void *stream, struct error *e)
{
    const struct type_info *ti = type_info(t);
    if (t != TYPE_Q8_0 && t != TYPE_Q4_K && t != TYPE_Q6_K)
        return fail(e, "gemv: no GPU kernel for weight type %s (Q8_0, Q4_K, Q6_K)", type_name(t));
    if (k <= 0 || n <= 0 || k % ti->block_elems)
        return fail(e, "gemv: %s rows of %lld are not a positive multiple of %u", ti->name, (long long)k, ti->block_elems);
    const size_t row_bytes = (size_t)(k / ti->block_elems) * ti->block_bytes;
    if (t == TYPE_Q4_K && (((uintptr_t)w) % 16 || row_bytes % 16))
        return fail(e, "gemv: Q4_K weights must start 16-byte aligned");
    const unsigned ctas = (unsigned)((n + ROWS_PER_CTA - 1) / ROWS_PER_CTA);
    cudaStream_t s = (cudaStream_t)stream;
    if (cuda_launch_begin("gemv_kernel", e))
        return -1;
    const uint8_t *wb = (const uint8_t *)w, *xb = (const uint8_t *)x;
    if (t == TYPE_Q8_0)
        gemv_kernel<TYPE_Q8_0><<<ctas, ROWS_PER_CTA * 32, 0, s>>>(wb, xb, y, k, n, row_bytes);
    else if (t == TYPE_Q4_K)
        gemv_kernel<TYPE_Q4_K><<<ctas, ROWS_PER_CTA * 32, 0, s>>>(wb, xb, y, k, n, row_bytes);
    else
        gemv_kernel<TYPE_Q6_K><<<ctas, ROWS_PER_CTA * 32, 0, s>>>(wb, xb, y, k, n, row_bytes);
    return cuda_launch_end("gemv_kernel", e);
}
