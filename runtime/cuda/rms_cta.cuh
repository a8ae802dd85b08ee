/* rms_cta.cuh: what the RMS norm's kernel (norm.cu) and a matmul that
 * forms the norm of its own output (matmul_kernel.cuh: norm_after) share:
 * the norm's CTA width, its scale's formula, and the norm of one column by
 * one CTA in rms_norm_kernel's order, so both give the same bits. */
#ifndef MINFER_CUDA_RMS_CTA_CUH
#define MINFER_CUDA_RMS_CTA_CUH

#include "cuda/common.cuh"

#define NORM_THREADS 256 /* a norm CTA's slice of a column: eight Q8_1 blocks */

/* The norm's scale from the column's sum of squares ss over d values. */
__device__ static inline float rms_scale(double ss, int64_t d, float eps)
{
    return __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(ss / (double)d), eps)));
}

/* The RMS norm of the column x (d values, a multiple of 32; written by
 * other CTAs of this launch: read past L1) times w, into the Q8_1 blocks at
 * q8, by every thread of one CTA (blockDim.x a divisor of NORM_THREADS):
 * thread t stands for the norm kernel's threads t, t + blockDim.x, ...,
 * each adding the squares of its elements in turn, each such warp's
 * butterfly, then the eight warp sums in order (block_sum's tree). */
__device__ static void rms_norm_q8_cta(const float *x, const float *w, float eps, int64_t d, uint8_t *q8)
{
    __shared__ double warp_ss[NORM_THREADS / 32];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    for (int vt = threadIdx.x; vt < NORM_THREADS; vt += blockDim.x) {
        double ss = 0;
        for (int64_t i = vt; i < d; i += NORM_THREADS) {
            const float v = __ldcg(x + i);
            ss += (double)v * v;
        }
        for (int off = 16; off > 0; off >>= 1)
            ss += __shfl_xor_sync(0xffffffffu, ss, off);
        if (lane == 0)
            warp_ss[vt / 32] = ss;
    }
    __syncthreads();
    double total = 0;
    for (int v = 0; v < NORM_THREADS / 32; v++)
        total += warp_ss[v];
    const float scale = rms_scale(total, d, eps);
    for (int64_t at = (int64_t)warp * 32 + lane; at < d; at += (int64_t)warps * 32)
        q8_1_block(__fmul_rn(__fmul_rn(__ldcg(x + at), scale), w[at]), q8 + (size_t)(at / 32) * 36);
}

#endif
