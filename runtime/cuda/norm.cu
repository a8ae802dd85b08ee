/* norm.cu: RMS norms (optionally emitting the Q8_1 blocks the next matmuls
 * read) and the per-head norm and RoPE. The arithmetic is the CPU's: the
 * sum of squares in double, the scale in float, each product rounded once;
 * only the order of the double sum differs (a fixed tree here). RoPE forms
 * its angle in double as the CPU does. */
#include <string.h>

#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"
#include "graph_ops.h"

#define NORM_THREADS 256
#define HEAD_THREADS 128

/* The sum of v over the CTA's threads, in a fixed order: a butterfly in
 * each warp, then the warps' sums in order. */
template <int THREADS>
__device__ static double block_sum(double v, double *shared)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x % 32 == 0)
        shared[threadIdx.x / 32] = v;
    __syncthreads();
    double total = 0;
    for (int w = 0; w < THREADS / 32; w++)
        total += shared[w];
    __syncthreads();
    return total;
}

/* One CTA per column. */
__global__ void rms_norm_kernel(const float *__restrict__ x, const float *__restrict__ w, float eps, int64_t d,
                                float *__restrict__ y, uint8_t *__restrict__ q8)
{
    __shared__ double partial[NORM_THREADS / 32];
    const float *xc = x + (size_t)blockIdx.x * (size_t)d;
    double ss = 0;
    for (int64_t i = threadIdx.x; i < d; i += NORM_THREADS)
        ss += (double)xc[i] * xc[i];
    ss = block_sum<NORM_THREADS>(ss, partial);
    const float scale = __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(ss / (double)d), eps)));
    if (!q8) {
        float *yc = y + (size_t)blockIdx.x * (size_t)d;
        for (int64_t i = threadIdx.x; i < d; i += NORM_THREADS)
            yc[i] = __fmul_rn(__fmul_rn(xc[i], scale), w[i]);
        return;
    }
    /* warp k quantizes the 32-element blocks k, k + 8, ... of the column */
    uint8_t *qc = q8 + (size_t)blockIdx.x * (size_t)(d / 32) * 36;
    for (int64_t b = threadIdx.x / 32; b < d / 32; b += NORM_THREADS / 32) {
        const int64_t i = b * 32 + threadIdx.x % 32;
        q8_1_block(__fmul_rn(__fmul_rn(xc[i], scale), w[i]), qc + b * 36);
    }
}

extern "C" int cuda_rms_norm(const float *x, const float *w, float eps, int64_t d, int64_t nt, float *y, void *q8,
                             void *stream, struct error *e)
{
    if (d <= 0 || nt <= 0 || (q8 && d % 32))
        return fail(e, "rms_norm: %lld columns of %lld%s", (long long)nt, (long long)d,
                    q8 ? " (Q8_1 output needs a multiple of 32)" : "");
    if (cuda_launch_begin("rms_norm_kernel", e))
        return -1;
    rms_norm_kernel<<<(unsigned)nt, NORM_THREADS, 0, (cudaStream_t)stream>>>(x, w, eps, d, y, (uint8_t *)q8);
    return cuda_launch_end("rms_norm_kernel", e);
}

/* One CTA per (head, column) of one or two tensors (Q's and K's heads in
 * one launch); the head's d values pass through shared memory. */
struct hnr_args {
    struct cuda_heads part[2];
    int n_part;
    float eps, rope_base;
    int style;
    const int32_t *pos;
    int64_t d;
};

__global__ void head_norm_rope_kernel(const struct hnr_args a)
{
    extern __shared__ float v[];
    __shared__ double partial[HEAD_THREADS / 32];
    int64_t head = blockIdx.x;
    const struct cuda_heads *p = &a.part[0];
    if (a.n_part > 1 && head >= p->h)
        head -= p->h, p = &a.part[1];
    const int64_t d = a.d;
    const size_t at = ((size_t)blockIdx.y * (size_t)p->h + (size_t)head) * (size_t)d;
    const float *xh = p->x + at;
    float *yh = p->y + at;
    if (p->w) {
        double ss = 0;
        for (int64_t i = threadIdx.x; i < d; i += HEAD_THREADS)
            ss += (double)xh[i] * xh[i];
        ss = block_sum<HEAD_THREADS>(ss, partial);
        const float scale = __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(ss / (double)d), a.eps)));
        for (int64_t i = threadIdx.x; i < d; i += HEAD_THREADS)
            v[i] = __fmul_rn(__fmul_rn(xh[i], scale), p->w[i]);
    } else {
        for (int64_t i = threadIdx.x; i < d; i += HEAD_THREADS)
            v[i] = xh[i];
    }
    __syncthreads();
    if (a.rope_base <= 0) {
        for (int64_t i = threadIdx.x; i < d; i += HEAD_THREADS)
            yh[i] = v[i];
        return;
    }
    const double pos = (double)a.pos[blockIdx.y];
    for (int64_t i = threadIdx.x; i < d / 2; i += HEAD_THREADS) {
        const double theta = pos * pow((double)a.rope_base, -2.0 * (double)i / (double)d);
        const float c = (float)cos(theta), s = (float)sin(theta);
        const int64_t x0i = a.style == ROPE_NEOX ? i : 2 * i, x1i = a.style == ROPE_NEOX ? i + d / 2 : 2 * i + 1;
        const float x0 = v[x0i], x1 = v[x1i];
        yh[x0i] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
        yh[x1i] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
    }
}

extern "C" int cuda_head_norm_rope_parts(const struct cuda_heads *parts, int n_part, float eps, float rope_base,
                                         int rope_style, const int32_t *pos, int64_t d, int64_t nt, void *stream,
                                         struct error *e)
{
    struct hnr_args a;
    memset(&a, 0, sizeof a);
    int64_t heads = 0;
    for (int k = 0; k < n_part; k++)
        a.part[k] = parts[k], heads += parts[k].h;
    if (n_part < 1 || n_part > 2 || d <= 0 || d % 2 || d > 4096 || nt <= 0 || (rope_base > 0 && !pos))
        return fail(e, "head_norm_rope: %d tensors of %lld heads of %lld (an even size up to 4096), %lld columns", n_part,
                    (long long)heads, (long long)d, (long long)nt);
    a.n_part = n_part;
    a.eps = eps;
    a.rope_base = rope_base;
    a.style = rope_style;
    a.pos = pos;
    a.d = d;
    if (cuda_launch_begin("head_norm_rope_kernel", e))
        return -1;
    head_norm_rope_kernel<<<dim3((unsigned)heads, (unsigned)nt), HEAD_THREADS, (size_t)d * sizeof(float),
                            (cudaStream_t)stream>>>(a);
    return cuda_launch_end("head_norm_rope_kernel", e);
}

extern "C" int cuda_head_norm_rope(const float *x, const float *w, float eps, float rope_base, int rope_style,
                                   const int32_t *pos, int64_t d, int64_t h, int64_t nt, float *y, void *stream,
                                   struct error *e)
{
    const struct cuda_heads part = { x, w, y, h };
    return cuda_head_norm_rope_parts(&part, 1, eps, rope_base, rope_style, pos, d, nt, stream, e);
}
