/* quantize_q8_1.cu: f32 -> Q8_1, one warp per 32-element block. Each lane
 * owns one element; the block's absolute maximum and code sum come from
 * butterfly shuffles (max and integer sum are exact in any order), and the
 * arithmetic is the CPU reference's, step for step: d = amax/127, id = 1/d,
 * q = roundf(x*id), s = d*sum, each rounded once (no fast math, no FMA). */
#include "cuda/quantize_q8_1.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda/device.h"

#define WARPS_PER_CTA 8

__global__ void quantize_q8_1_kernel(const float *__restrict__ x, uint8_t *__restrict__ y, int64_t n_blocks)
{
    const int64_t block = (int64_t)blockIdx.x * WARPS_PER_CTA + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (block >= n_blocks)
        return;
    const float v = x[block * 32 + lane];
    float amax = fabsf(v);
    for (int off = 16; off > 0; off >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    const int q = (int)roundf(__fmul_rn(v, id));
    int sum = q;
    for (int off = 16; off > 0; off >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, off);
    uint8_t *out = y + block * 36;
    out[4 + lane] = (uint8_t)(int8_t)q;
    /* d and s as one aligned 32-bit store (blocks are 36 bytes, so every
     * block start is 4-byte aligned): .x is the low half, byte 0. */
    if (lane == 0)
        *reinterpret_cast<__half2 *>(out) = __floats2half2_rn(d, __fmul_rn(d, (float)sum));
}

extern "C" int cuda_quantize_q8_1(const float *x, void *y, int64_t n, void *stream, struct error *e)
{
    if (n <= 0 || n % 32 != 0)
        return fail(e, "quantize_q8_1: length %lld is not a positive multiple of 32", (long long)n);
    const int64_t n_blocks = n / 32;
    const int64_t ctas = (n_blocks + WARPS_PER_CTA - 1) / WARPS_PER_CTA;
    if (ctas > 0x7fffffff)
        return fail(e, "quantize_q8_1: length %lld needs more than 2^31 thread blocks", (long long)n);
    if (cuda_launch_begin("quantize_q8_1_kernel", e))
        return -1;
    quantize_q8_1_kernel<<<(unsigned)ctas, WARPS_PER_CTA * 32, 0, (cudaStream_t)stream>>>(x, (uint8_t *)y,
                                                                                           n_blocks);
    return cuda_launch_end("quantize_q8_1_kernel", e);
}
