/* matmul.cu: the matmul family on the GPU: y = W x (+ bias) for up to a
 * few columns at a time, with the residual add or the SwiGLU product as an
 * epilogue. Quantized weights meet Q8_1 activations in integer dot products
 * per 32-element block (__dp4a, quant_dot.c's formulas); F32, F16 and BF16
 * weights meet f32 activations. One warp per output row: lane i takes the
 * row's blocks i, i + 32, ... and keeps one sum per column, and the warp
 * adds the 32 sums in a butterfly. Every column is computed the same way
 * whether a launch has one column or eight, so a batch gives the bits of
 * single steps. The GGUF layout is read as stored (no repack yet). */
#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

#define ROWS_PER_CTA 4
#define COLS 8 /* columns per launch column-group */

bool cuda_matmul_takes_q8(enum tensor_type t) { return t != TYPE_F32 && t != TYPE_F16 && t != TYPE_BF16; }

__device__ static inline float silu(float v) { return __fdiv_rn(v, __fadd_rn(1.0f, expf(-v))); }

/* The warp's sum of v (every lane gets it), in a fixed butterfly. */
__device__ static inline float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* Lane 0 writes a row's result for column c with the epilogue, as the CPU
 * orders it: the product, plus the bias, plus the residual. */
template <int EPI>
__device__ static inline void put(float v, int64_t row, int64_t c, int64_t n, const float *bias, const float *res,
                                  float *y)
{
    const size_t at = (size_t)c * (size_t)n + (size_t)row;
    if (bias)
        v = __fadd_rn(v, bias[row]);
    if (EPI == CUDA_EPI_ADD)
        v = __fadd_rn(v, res[at]);
    if (EPI == CUDA_EPI_SWIGLU_UP)
        v = __fmul_rn(silu(y[at]), v);
    y[at] = v;
}

template <int T, int EPI>
__global__ void matmul_q8_kernel(const uint8_t *__restrict__ w, size_t row_bytes, const uint8_t *__restrict__ x,
                                 int64_t k, int64_t n, int64_t nt, const float *__restrict__ bias,
                                 const float *__restrict__ res, float *__restrict__ y)
{
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_CTA + threadIdx.x / 32;
    const int64_t c0 = (int64_t)blockIdx.y * COLS;
    const int lane = threadIdx.x % 32;
    if (row >= n)
        return;
    const int nc = nt - c0 < COLS ? (int)(nt - c0) : COLS;
    const uint8_t *wr = w + (size_t)row * row_bytes;
    const size_t col_bytes = (size_t)(k / QK8) * 36;
    float sum[COLS];
    for (int c = 0; c < COLS; c++)
        sum[c] = 0;
    for (int64_t j = lane; j < k / QK8; j += 32)
#pragma unroll
        for (int c = 0; c < COLS; c++)
            if (c < nc) /* explicit roundings: the compiler may not contract differently per column */
                sum[c] = __fadd_rn(sum[c], block_dot<T>(wr, j, x + (size_t)(c0 + c) * col_bytes + (size_t)j * 36));
#pragma unroll
    for (int c = 0; c < COLS; c++) {
        if (c < nc) {
            const float v = warp_sum(sum[c]);
            if (lane == 0)
                put<EPI>(v, row, c0 + c, n, bias, res, y);
        }
    }
}

template <int T, int EPI>
__global__ void matmul_f32_kernel(const uint8_t *__restrict__ w, size_t row_bytes, const float *__restrict__ x,
                                  int64_t k, int64_t n, int64_t nt, const float *__restrict__ bias,
                                  const float *__restrict__ res, float *__restrict__ y)
{
    const int64_t row = (int64_t)blockIdx.x * ROWS_PER_CTA + threadIdx.x / 32;
    const int64_t c0 = (int64_t)blockIdx.y * COLS;
    const int lane = threadIdx.x % 32;
    if (row >= n)
        return;
    const int nc = nt - c0 < COLS ? (int)(nt - c0) : COLS;
    const uint8_t *wr = w + (size_t)row * row_bytes;
    float sum[COLS];
    for (int c = 0; c < COLS; c++)
        sum[c] = 0;
    for (int64_t i = lane; i < k; i += 32) {
        const float wv = decode((enum tensor_type)T, wr, (int)i);
#pragma unroll
        for (int c = 0; c < COLS; c++)
            if (c < nc)
                sum[c] = __fmaf_rn(wv, x[(size_t)(c0 + c) * (size_t)k + (size_t)i], sum[c]);
    }
#pragma unroll
    for (int c = 0; c < COLS; c++) {
        if (c < nc) {
            const float v = warp_sum(sum[c]);
            if (lane == 0)
                put<EPI>(v, row, c0 + c, n, bias, res, y);
        }
    }
}

template <int T>
static void launch(enum cuda_epilogue epi, dim3 grid, cudaStream_t s, const uint8_t *w, size_t row_bytes,
                   const void *x, int64_t k, int64_t n, int64_t nt, const float *bias, const float *res, float *y)
{
    const unsigned threads = ROWS_PER_CTA * 32;
    constexpr bool q8 = T != TYPE_F32 && T != TYPE_F16 && T != TYPE_BF16;
#define MM_EPI(E)                                                                                                  \
    if constexpr (q8)                                                                                              \
        matmul_q8_kernel<T, E><<<grid, threads, 0, s>>>(w, row_bytes, (const uint8_t *)x, k, n, nt, bias, res, y); \
    else                                                                                                           \
        matmul_f32_kernel<T, E><<<grid, threads, 0, s>>>(w, row_bytes, (const float *)x, k, n, nt, bias, res, y);
    if (epi == CUDA_EPI_NONE) {
        MM_EPI(CUDA_EPI_NONE)
    } else if (epi == CUDA_EPI_ADD) {
        MM_EPI(CUDA_EPI_ADD)
    } else {
        MM_EPI(CUDA_EPI_SWIGLU_UP)
    }
#undef MM_EPI
}

extern "C" int cuda_matmul(enum tensor_type t, const void *w, int64_t k, int64_t n, const void *x, int64_t nt,
                           const float *bias, const float *res, enum cuda_epilogue epi, float *y, void *stream,
                           struct error *e)
{
    const struct type_info *ti = type_info(t);
    if (!cuda_weight_type_ok(t))
        return fail(e, "matmul: no GPU kernel for weight type %s", type_name(t));
    if (k <= 0 || n <= 0 || nt <= 0 || k % ti->block_elems || (cuda_matmul_takes_q8(t) && k % QK8))
        return fail(e, "matmul: %s rows of %lld are not a positive multiple of %u (or %lld rows, %lld columns)", ti->name,
                    (long long)k, ti->block_elems, (long long)n, (long long)nt);
    if ((epi == CUDA_EPI_ADD && !res) || (nt + COLS - 1) / COLS > 65535)
        return fail(e, "matmul: epilogue %d without its operand, or %lld columns", (int)epi, (long long)nt);
    const size_t row_bytes = (size_t)(k / ti->block_elems) * ti->block_bytes;
    const dim3 grid((unsigned)((n + ROWS_PER_CTA - 1) / ROWS_PER_CTA), (unsigned)((nt + COLS - 1) / COLS));
    const uint8_t *wb = (const uint8_t *)w;
    cudaStream_t s = (cudaStream_t)stream;
    if (cuda_launch_begin("matmul_kernel", e))
        return -1;
    switch (t) {
    case TYPE_F32: launch<TYPE_F32>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    case TYPE_F16: launch<TYPE_F16>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    case TYPE_BF16: launch<TYPE_BF16>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    case TYPE_Q4_0: launch<TYPE_Q4_0>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    case TYPE_Q4_1: launch<TYPE_Q4_1>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    case TYPE_Q5_0: launch<TYPE_Q5_0>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    case TYPE_Q5_1: launch<TYPE_Q5_1>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    case TYPE_Q8_0: launch<TYPE_Q8_0>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    case TYPE_Q4_K: launch<TYPE_Q4_K>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    case TYPE_Q5_K: launch<TYPE_Q5_K>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    case TYPE_Q6_K: launch<TYPE_Q6_K>(epi, grid, s, wb, row_bytes, x, k, n, nt, bias, res, y); break;
    default: break;
    }
    return cuda_launch_end("matmul_kernel", e);
}
