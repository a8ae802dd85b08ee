/* matmul_kernel.cuh: the matmul kernel (see matmul.cu for what it
 * computes and in which order), as a template the generic build
 * instantiates with runtime row lengths (K = 0) and a per-model build's
 * generated kernels.cu with that model's (CUDA_MATMUL_INSTANCE). */
#ifndef MINFER_CUDA_MATMUL_KERNEL_CUH
#define MINFER_CUDA_MATMUL_KERNEL_CUH

#include "cuda/common.cuh"
#include "cuda/kernels.h"

__device__ static inline float silu(float v) { return __fdiv_rn(v, __fadd_rn(1.0f, expf(-v))); }

/* The warp's sum of v (every lane gets it), in a fixed butterfly. */
__device__ static inline float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

struct mm_mat {
    int type;
    const uint8_t *w;
    size_t row_bytes;
    int64_t n;
    const float *bias;
    float *y;
};

struct mm_args {
    struct mm_mat m[3];
    int n_mat;
    const uint8_t *xq; /* Q8_1 input, k/32 blocks per column */
    const float *xf;   /* f32 input */
    int64_t k, nt;
    const float *res;  /* CUDA_EPI_ADD */
    int epi;
    uint8_t *q8_out;   /* CUDA_EPI_PAIR: also the product as Q8_1 (rows/32 blocks per column) */
};

/* This lane's partial sums of one row against nc (at most NC) columns from
 * c0. K: the row length when a build fixes it (generated kernels.cu), else
 * 0 and a.k; the same order of sums either way. */
template <int T, int NC, int K>
__device__ static void row_sums(const uint8_t *wr, const struct mm_args &a, int64_t c0, int nc, float sum[NC])
{
    const int lane = threadIdx.x % 32;
    const int64_t k = K > 0 ? K : a.k;
    if constexpr (T == TYPE_F32 || T == TYPE_F16 || T == TYPE_BF16) {
        for (int64_t i = lane; i < k; i += 32) {
            const float wv = decode((enum tensor_type)T, wr, (int)i);
#pragma unroll
            for (int c = 0; c < NC; c++)
                if (c < nc)
                    sum[c] = __fmaf_rn(wv, a.xf[(size_t)(c0 + c) * (size_t)k + (size_t)i], sum[c]);
        }
    } else {
        const size_t col_bytes = (size_t)(k / QK8) * 36;
        for (int64_t j = lane; j < k / QK8; j += 32) {
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if (c < nc) {
                    const struct q8_1_block x = q8_1_at(a.xq + (size_t)(c0 + c) * col_bytes + (size_t)j * 36);
                    sum[c] = __fadd_rn(sum[c], block_dot<T>(wr, j, x));
                }
            }
        }
    }
}

/* Matrices of several types in one launch (Q5_0 Q and K with a Q8_0 V):
 * each warp dispatches on its own matrix's type, through the same row_sums
 * as a launch of one type, so the bits are the same. */
#define TYPE_MIXED (-1)

template <int NC, int K>
__device__ static void row_sums_of(int type, const uint8_t *wr, const struct mm_args &a, int64_t c0, int nc, float sum[NC])
{
    switch (type) {
    case TYPE_F32: row_sums<TYPE_F32, NC, K>(wr, a, c0, nc, sum); break;
    case TYPE_F16: row_sums<TYPE_F16, NC, K>(wr, a, c0, nc, sum); break;
    case TYPE_BF16: row_sums<TYPE_BF16, NC, K>(wr, a, c0, nc, sum); break;
    case TYPE_Q4_0: row_sums<TYPE_Q4_0, NC, K>(wr, a, c0, nc, sum); break;
    case TYPE_Q4_1: row_sums<TYPE_Q4_1, NC, K>(wr, a, c0, nc, sum); break;
    case TYPE_Q5_0: row_sums<TYPE_Q5_0, NC, K>(wr, a, c0, nc, sum); break;
    case TYPE_Q5_1: row_sums<TYPE_Q5_1, NC, K>(wr, a, c0, nc, sum); break;
    case TYPE_Q8_0: row_sums<TYPE_Q8_0, NC, K>(wr, a, c0, nc, sum); break;
    case TYPE_Q4_K: row_sums<TYPE_Q4_K, NC, K>(wr, a, c0, nc, sum); break;
    case TYPE_Q5_K: row_sums<TYPE_Q5_K, NC, K>(wr, a, c0, nc, sum); break;
    case TYPE_Q6_K: row_sums<TYPE_Q6_K, NC, K>(wr, a, c0, nc, sum); break;
    default: break;
    }
}

/* ROWS warps per CTA, one output row each (a decode step's 32-warp CTAs are
 * held to 32 registers a thread, so two fit an SM and a 4864-row SwiGLU
 * pair runs in one wave), every matrix of the launch of
 * type T (or each of its own, TYPE_MIXED); grid.y: groups of NC columns. With Q8 (a SwiGLU product that the
 * next matmul reads), ROWS is 32: the CTA's 32 products of a column are one
 * Q8_1 block. Every column is computed the same way whatever NC is. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define WIDE_CTAS_PER_SM 1 /* sm_89 holds 1536 threads an SM */
#else
#define WIDE_CTAS_PER_SM 2
#endif
template <int T, int ROWS, int NC, bool Q8, int K>
__global__ void __launch_bounds__(ROWS * 32, ROWS == 32 && NC == 1 ? WIDE_CTAS_PER_SM : 1) matmul_kernel(const struct mm_args a)
{
    __shared__ float outs[Q8 ? ROWS * NC : 1];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t c0 = (int64_t)blockIdx.y * NC;
    const int nc = a.nt - c0 < NC ? (int)(a.nt - c0) : NC;
    int64_t r = (int64_t)blockIdx.x * ROWS + warp;
    int mi = 0;
    while (mi < a.n_mat && r >= a.m[mi].n)
        r -= a.m[mi].n, mi++;
    const bool live = mi < a.n_mat;
    if (live && blockIdx.y == 0) /* the weights are read-only: fetch them while the kernel before still runs */
        for (int pair = 0; pair < (a.epi == CUDA_EPI_PAIR ? 2 : 1); pair++)
            prefetch_l2(a.m[mi + pair].w + (size_t)r * a.m[mi + pair].row_bytes, a.m[mi + pair].row_bytes);
    grid_begin();
    float v[NC];
    if (live) {
        const struct mm_mat &m = a.m[mi];
        float sum[NC], up[NC];
        for (int c = 0; c < NC; c++)
            sum[c] = up[c] = 0;
        if constexpr (T == TYPE_MIXED) {
            row_sums_of<NC, K>(m.type, m.w + (size_t)r * m.row_bytes, a, c0, nc, sum);
            if (a.epi == CUDA_EPI_PAIR)
                row_sums_of<NC, K>(a.m[1].type, a.m[1].w + (size_t)r * a.m[1].row_bytes, a, c0, nc, up);
        } else {
            row_sums<T, NC, K>(m.w + (size_t)r * m.row_bytes, a, c0, nc, sum);
            if (a.epi == CUDA_EPI_PAIR)
                row_sums<T, NC, K>(a.m[1].w + (size_t)r * a.m[1].row_bytes, a, c0, nc, up);
        }
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (c < nc) {
                /* the product, plus the bias, plus the residual: the CPU's order */
                float x = warp_sum(sum[c]);
                if (m.bias)
                    x = __fadd_rn(x, m.bias[r]);
                const size_t at = (size_t)(c0 + c) * (size_t)m.n + (size_t)r;
                if (a.epi == CUDA_EPI_ADD)
                    x = __fadd_rn(x, a.res[at]);
                if (a.epi == CUDA_EPI_PAIR)
                    x = __fmul_rn(silu(x), warp_sum(up[c]));
                v[c] = x;
                if (lane == 0)
                    m.y[at] = x;
            }
        }
    }
    if constexpr (Q8) {
        if (lane == 0)
            for (int c = 0; c < NC; c++)
                outs[warp * NC + c] = live && c < nc ? v[c] : 0.0f;
        __syncthreads();
        if (warp < nc) { /* warp c quantizes column c's 32 rows */
            const size_t col_bytes = (size_t)(a.m[0].n / 32) * 36;
            q8_1_block(outs[lane * NC + warp], a.q8_out + (size_t)(c0 + warp) * col_bytes + (size_t)blockIdx.x * 36);
        }
    }
}

/* One launch of type T over the rows of a.m, with the row length K fixed
 * (or 0: a.k): a decode step's one column (BATCH false: the fewest
 * registers), or groups of eight columns. */
template <int T, int K, bool BATCH>
static void launch_t(const struct mm_args &a, int64_t rows, cudaStream_t s)
{
    const unsigned groups = BATCH ? (unsigned)((a.nt + 7) / 8) : 1;
    if (a.q8_out)
        launch(matmul_kernel<T, 32, BATCH ? 8 : 1, true, K>, dim3((unsigned)(rows / 32), groups), 32 * 32, 0, s, a);
    else
        launch(matmul_kernel<T, 4, BATCH ? 8 : 1, false, K>, dim3((unsigned)((rows + 3) / 4), groups), 4 * 32, 0, s, a);
}

/* The launch for type t (a tensor type, or TYPE_MIXED). */
template <int K, bool BATCH>
static void launch_shape(int t, const struct mm_args &a, int64_t rows, cudaStream_t s)
{
    switch (t) {
    case TYPE_F32: launch_t<TYPE_F32, K, BATCH>(a, rows, s); break;
    case TYPE_F16: launch_t<TYPE_F16, K, BATCH>(a, rows, s); break;
    case TYPE_BF16: launch_t<TYPE_BF16, K, BATCH>(a, rows, s); break;
    case TYPE_Q4_0: launch_t<TYPE_Q4_0, K, BATCH>(a, rows, s); break;
    case TYPE_Q4_1: launch_t<TYPE_Q4_1, K, BATCH>(a, rows, s); break;
    case TYPE_Q5_0: launch_t<TYPE_Q5_0, K, BATCH>(a, rows, s); break;
    case TYPE_Q5_1: launch_t<TYPE_Q5_1, K, BATCH>(a, rows, s); break;
    case TYPE_Q8_0: launch_t<TYPE_Q8_0, K, BATCH>(a, rows, s); break;
    case TYPE_Q4_K: launch_t<TYPE_Q4_K, K, BATCH>(a, rows, s); break;
    case TYPE_Q5_K: launch_t<TYPE_Q5_K, K, BATCH>(a, rows, s); break;
    case TYPE_Q6_K: launch_t<TYPE_Q6_K, K, BATCH>(a, rows, s); break;
    case TYPE_MIXED: launch_t<TYPE_MIXED, K, BATCH>(a, rows, s); break;
    default: break;
    }
}

/* A generated kernels.cu's decode matmuls for row length K (a model's k). */
#define CUDA_MATMUL_INSTANCE(K) \
    static void cuda_matmul_k##K(int type, const struct mm_args *a, int64_t rows, void *stream) \
    { \
        launch_shape<K, false>(type, *a, rows, (cudaStream_t)stream); \
    }

#endif
