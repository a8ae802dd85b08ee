/* elementwise.cu: add, mul, SiLU, GELU, SwiGLU, GeGLU, bias and scale over f32 activations, and
 * the greedy argmax that lets only a token id cross to the host. */
#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

#define EW_THREADS 256
#define ARGMAX_THREADS 1024

template <int OP>
__global__ void elementwise_kernel(const float *__restrict__ a, const float *__restrict__ b, int64_t n, int64_t d,
                                   float c, float *__restrict__ y)
{
    grid_begin();
    for (int64_t i = (int64_t)blockIdx.x * EW_THREADS + threadIdx.x; i < n; i += (int64_t)gridDim.x * EW_THREADS) {
        if (OP == CUDA_EW_ADD)
            y[i] = __fadd_rn(a[i], b[i]);
        else if (OP == CUDA_EW_MUL)
            y[i] = __fmul_rn(a[i], b[i]);
        else if (OP == CUDA_EW_SILU)
            y[i] = silu(a[i]);
        else if (OP == CUDA_EW_GELU)
            y[i] = gelu(a[i]);
        else if (OP == CUDA_EW_SWIGLU)
            y[i] = __fmul_rn(silu(a[i]), b[i]);
        else if (OP == CUDA_EW_GEGLU)
            y[i] = __fmul_rn(gelu(a[i]), b[i]);
        else if (OP == CUDA_EW_SCALE)
            y[i] = __fmul_rn(a[i], c);
        else
            y[i] = __fadd_rn(a[i], b[i % d]);
    }
}

extern "C" int cuda_elementwise(enum cuda_elementwise_op op, const float *a, const float *b, int64_t n, int64_t d,
                                float c, float *y, void *stream, struct error *e)
{
    if (n <= 0 || (op == CUDA_EW_ADD_BIAS && (d <= 0 || n % d)))
        return fail(e, "elementwise: %lld values (bias of %lld)", (long long)n, (long long)d);
    const int64_t want = (n + EW_THREADS - 1) / EW_THREADS;
    const unsigned ctas = (unsigned)(want < 65535 * 8 ? want : 65535 * 8);
    cudaStream_t s = (cudaStream_t)stream;
    if (cuda_launch_begin("elementwise_kernel", e))
        return -1;
#define EW_CASE(OP) \
    case OP: launch(elementwise_kernel<OP>, ctas, EW_THREADS, 0, s, a, b, n, d, c, y); break;
    switch (op) {
        EW_CASE(CUDA_EW_ADD) EW_CASE(CUDA_EW_MUL) EW_CASE(CUDA_EW_SILU) EW_CASE(CUDA_EW_GELU) EW_CASE(CUDA_EW_SWIGLU)
        EW_CASE(CUDA_EW_GEGLU) EW_CASE(CUDA_EW_ADD_BIAS) EW_CASE(CUDA_EW_SCALE)
    }
#undef EW_CASE
    return cuda_launch_end("elementwise_kernel", e);
}

/* Whether (v, i) beats (bv, bi): larger, or equal and lower; NaN never wins. */
__device__ static inline bool better(float v, int i, float bv, int bi)
{
    if (isnan(v) || i < 0)
        return false;
    return bi < 0 || v > bv || (v == bv && i < bi);
}

/* One CTA: each thread scans a strided share, then a tree of fixed shape. */
__global__ void argmax_kernel(const float *__restrict__ x, int64_t n, int32_t *__restrict__ out)
{
    __shared__ float sv[ARGMAX_THREADS];
    __shared__ int si[ARGMAX_THREADS];
    grid_begin();
    float bv = 0;
    int bi = -1;
    for (int64_t i = threadIdx.x; i < n; i += ARGMAX_THREADS)
        if (better(x[i], (int)i, bv, bi))
            bv = x[i], bi = (int)i;
    sv[threadIdx.x] = bv;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int half = ARGMAX_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half && better(sv[threadIdx.x + half], si[threadIdx.x + half], sv[threadIdx.x], si[threadIdx.x])) {
            sv[threadIdx.x] = sv[threadIdx.x + half];
            si[threadIdx.x] = si[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *out = si[0];
}

extern "C" int cuda_argmax(const float *x, int64_t n, int32_t *out, void *stream, struct error *e)
{
    if (n <= 0 || n > 0x7fffffff)
        return fail(e, "argmax: %lld values", (long long)n);
    if (cuda_launch_begin("argmax_kernel", e))
        return -1;
    launch(argmax_kernel, 1, ARGMAX_THREADS, 0, (cudaStream_t)stream, x, n, out);
    return cuda_launch_end("argmax_kernel", e);
}
