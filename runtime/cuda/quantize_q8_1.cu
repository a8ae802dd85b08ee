/* quantize_q8_1.cu: f32 -> Q8_1, eight lanes a 32-element block, each
 * four elements (one 16-byte load, one 4-byte store of codes: common.cuh's
 * q8_1_block_of<4>, the CPU reference's arithmetic step for step). */
#include "cuda/quantize_q8_1.h"

#include "cuda/common.cuh"
#include "cuda/device.h"

#define BLOCKS_PER_CTA 32 /* 256 threads */

__global__ void quantize_q8_1_kernel(const float *__restrict__ x, uint8_t *__restrict__ y, int64_t n_blocks)
{
    grid_begin();
    const int64_t block = (int64_t)blockIdx.x * BLOCKS_PER_CTA + threadIdx.x / 8;
    if (block >= n_blocks) /* whole groups of eight lanes alike: the block's shuffles stay within its group */
        return;
    const float4 v4 = *(const float4 *)(x + block * 32 + 4 * (threadIdx.x % 8));
    const float v[4] = { v4.x, v4.y, v4.z, v4.w };
    q8_1_block_of<4>(v, y + block * 36);
    timeline_mark(TIMELINE_DONE);
}

extern "C" int cuda_quantize_q8_1(const float *x, void *y, int64_t n, void *stream, struct error *e)
{
    if (n <= 0 || n % 32 != 0)
        return fail(e, "quantize_q8_1: length %lld is not a positive multiple of 32", (long long)n);
    if ((uintptr_t)x % 16)
        return fail(e, "quantize_q8_1: input at %p is not 16-byte aligned (it is read 16 bytes at a time)", (const void *)x);
    const int64_t n_blocks = n / 32;
    const int64_t ctas = (n_blocks + BLOCKS_PER_CTA - 1) / BLOCKS_PER_CTA;
    if (ctas > 0x7fffffff)
        return fail(e, "quantize_q8_1: length %lld needs more than 2^31 thread blocks", (long long)n);
    if (cuda_launch_begin("quantize_q8_1_kernel", e))
        return -1;
    launch(quantize_q8_1_kernel, (unsigned)ctas, BLOCKS_PER_CTA * 8, 0, (cudaStream_t)stream, x, (uint8_t *)y, n_blocks);
    return cuda_launch_end("quantize_q8_1_kernel", e);
}
