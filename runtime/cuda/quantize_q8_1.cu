/* quantize_q8_1.cu: f32 -> Q8_1, one warp per 32-element block, each lane
 * one element (common.cuh's q8_1_block: the CPU reference's arithmetic step
 * for step; max and integer sum are exact in any order). */
#include "cuda/quantize_q8_1.h"

#include "cuda/common.cuh"
#include "cuda/device.h"

#define WARPS_PER_CTA 8

__global__ void quantize_q8_1_kernel(const float *__restrict__ x, uint8_t *__restrict__ y, int64_t n_blocks)
{
    grid_begin();
    const int64_t block = (int64_t)blockIdx.x * WARPS_PER_CTA + threadIdx.x / 32;
    if (block < n_blocks)
        q8_1_block(x[block * 32 + threadIdx.x % 32], y + block * 36);
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
    launch(quantize_q8_1_kernel, (unsigned)ctas, WARPS_PER_CTA * 32, 0, (cudaStream_t)stream, x, (uint8_t *)y,
                                                                                           n_blocks);
    return cuda_launch_end("quantize_q8_1_kernel", e);
}
