/* elementwise.cu: add, mul, SiLU, GELU, SwiGLU, GeGLU, bias and scale over f32 activations. */
#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

#define EW_THREADS 256

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
