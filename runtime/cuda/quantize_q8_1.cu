/* quantize_q8_1.cu: f32 -> Q8_1, eight lanes a 32-element block, each
 * four elements (one 16-byte load, one 4-byte store of codes): the CPU
 * reference's arithmetic step for step, as common.cuh's q8_1_block (max
 * and integer sum are exact in any order), with a quarter of its threads
 * and shuffles. */
#include "cuda/quantize_q8_1.h"

#include "cuda/common.cuh"
#include "cuda/device.h"

#define BLOCKS_PER_CTA 32 /* 256 threads */

__global__ void quantize_q8_1_kernel(const float *__restrict__ x, uint8_t *__restrict__ y, int64_t n_blocks)
{
    grid_begin();
    const int64_t block = (int64_t)blockIdx.x * BLOCKS_PER_CTA + threadIdx.x / 8;
    const int sub = (int)threadIdx.x % 8;
    if (block >= n_blocks) /* whole groups of eight lanes alike: the shuffles below stay within a group */
        return;
    const float4 v = *(const float4 *)(x + block * 32 + 4 * sub);
    float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
    const unsigned group = 0xffu << (threadIdx.x % 32 / 8 * 8);
    for (int off = 4; off > 0; off >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(group, amax, off));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    const int q0 = (int)roundf(__fmul_rn(v.x, id)), q1 = (int)roundf(__fmul_rn(v.y, id));
    const int q2 = (int)roundf(__fmul_rn(v.z, id)), q3 = (int)roundf(__fmul_rn(v.w, id));
    int sum = q0 + q1 + q2 + q3;
    for (int off = 4; off > 0; off >>= 1)
        sum += __shfl_xor_sync(group, sum, off);
    uint8_t *out = y + block * 36; /* 36-byte blocks: every block and its codes 4-byte aligned */
    ((unsigned *)(out + 4))[sub] = (unsigned)(q0 & 0xff) | (unsigned)(q1 & 0xff) << 8 | (unsigned)(q2 & 0xff) << 16 |
                                   (unsigned)(q3 & 0xff) << 24;
    if (sub == 0)
        *reinterpret_cast<__half2 *>(out) = __floats2half2_rn(d, __fmul_rn(d, (float)sum));
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
