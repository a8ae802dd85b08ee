/* matmul.cu: the matmul family on the GPU. One launch multiplies one input
 * by up to three matrices (Q, K and V share their input's read and its
 * quantization, whatever their types), or by a gate and an up matrix at once, writing
 * silu(gate) * up (and, on request, that product already as the Q8_1
 * blocks the next matmul reads). Quantized weights meet Q8_1 activations in
 * integer dot products per 32-element block (__dp4a, quant_dot.c's
 * formulas); F32, F16 and BF16 weights meet f32 activations. One warp per
 * output row: lane i takes the row's blocks i, i + 32, ... and keeps one sum
 * per column, and the warp adds the 32 sums in a butterfly, every rounding
 * explicit, so a column's result is the same whichever launch computes it
 * (a batch gives the bits of single steps). The weights are read in their
 * GGUF layout, with the widest loads each type's alignment allows. */
#include <string.h>

#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

bool cuda_matmul_takes_q8(enum tensor_type t) { return t != TYPE_F32 && t != TYPE_F16 && t != TYPE_BF16; }

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

/* This lane's partial sums of one row against nc (at most NC) columns from c0. */
template <int T, int NC>
__device__ static void row_sums(const uint8_t *wr, const struct mm_args &a, int64_t c0, int nc, float sum[NC])
{
    const int lane = threadIdx.x % 32;
    if constexpr (T == TYPE_F32 || T == TYPE_F16 || T == TYPE_BF16) {
        for (int64_t i = lane; i < a.k; i += 32) {
            const float wv = decode((enum tensor_type)T, wr, (int)i);
#pragma unroll
            for (int c = 0; c < NC; c++)
                if (c < nc)
                    sum[c] = __fmaf_rn(wv, a.xf[(size_t)(c0 + c) * (size_t)a.k + (size_t)i], sum[c]);
        }
    } else {
        const size_t col_bytes = (size_t)(a.k / QK8) * 36;
        for (int64_t j = lane; j < a.k / QK8; j += 32) {
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

template <int NC>
__device__ static void row_sums_of(int type, const uint8_t *wr, const struct mm_args &a, int64_t c0, int nc, float sum[NC])
{
    switch (type) {
    case TYPE_F32: row_sums<TYPE_F32, NC>(wr, a, c0, nc, sum); break;
    case TYPE_F16: row_sums<TYPE_F16, NC>(wr, a, c0, nc, sum); break;
    case TYPE_BF16: row_sums<TYPE_BF16, NC>(wr, a, c0, nc, sum); break;
    case TYPE_Q4_0: row_sums<TYPE_Q4_0, NC>(wr, a, c0, nc, sum); break;
    case TYPE_Q4_1: row_sums<TYPE_Q4_1, NC>(wr, a, c0, nc, sum); break;
    case TYPE_Q5_0: row_sums<TYPE_Q5_0, NC>(wr, a, c0, nc, sum); break;
    case TYPE_Q5_1: row_sums<TYPE_Q5_1, NC>(wr, a, c0, nc, sum); break;
    case TYPE_Q8_0: row_sums<TYPE_Q8_0, NC>(wr, a, c0, nc, sum); break;
    case TYPE_Q4_K: row_sums<TYPE_Q4_K, NC>(wr, a, c0, nc, sum); break;
    case TYPE_Q5_K: row_sums<TYPE_Q5_K, NC>(wr, a, c0, nc, sum); break;
    case TYPE_Q6_K: row_sums<TYPE_Q6_K, NC>(wr, a, c0, nc, sum); break;
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
template <int T, int ROWS, int NC, bool Q8>
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
            row_sums_of<NC>(m.type, m.w + (size_t)r * m.row_bytes, a, c0, nc, sum);
            if (a.epi == CUDA_EPI_PAIR)
                row_sums_of<NC>(a.m[1].type, a.m[1].w + (size_t)r * a.m[1].row_bytes, a, c0, nc, up);
        } else {
            row_sums<T, NC>(m.w + (size_t)r * m.row_bytes, a, c0, nc, sum);
            if (a.epi == CUDA_EPI_PAIR)
                row_sums<T, NC>(a.m[1].w + (size_t)r * a.m[1].row_bytes, a, c0, nc, up);
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

/* One launch of type T over the rows of a.m: one column at a time for a
 * decode step (the fewest registers), else groups of eight. */
template <int T>
static void launch_type_t(const struct mm_args &a, int64_t rows, cudaStream_t s)
{
    const bool q8 = a.q8_out != NULL;
    if (a.nt == 1) {
        if (q8)
            launch(matmul_kernel<T, 32, 1, true>, dim3((unsigned)(rows / 32), 1), 32 * 32, 0, s, a);
        else
            launch(matmul_kernel<T, 4, 1, false>, dim3((unsigned)((rows + 3) / 4), 1), 4 * 32, 0, s, a);
        return;
    }
    const unsigned groups = (unsigned)((a.nt + 7) / 8);
    if (q8)
        launch(matmul_kernel<T, 32, 8, true>, dim3((unsigned)(rows / 32), groups), 32 * 32, 0, s, a);
    else
        launch(matmul_kernel<T, 4, 8, false>, dim3((unsigned)((rows + 3) / 4), groups), 4 * 32, 0, s, a);
}

static void launch_type(int t, const struct mm_args &a, int64_t rows, cudaStream_t s)
{
    switch (t) {
    case TYPE_F32: launch_type_t<TYPE_F32>(a, rows, s); break;
    case TYPE_F16: launch_type_t<TYPE_F16>(a, rows, s); break;
    case TYPE_BF16: launch_type_t<TYPE_BF16>(a, rows, s); break;
    case TYPE_Q4_0: launch_type_t<TYPE_Q4_0>(a, rows, s); break;
    case TYPE_Q4_1: launch_type_t<TYPE_Q4_1>(a, rows, s); break;
    case TYPE_Q5_0: launch_type_t<TYPE_Q5_0>(a, rows, s); break;
    case TYPE_Q5_1: launch_type_t<TYPE_Q5_1>(a, rows, s); break;
    case TYPE_Q8_0: launch_type_t<TYPE_Q8_0>(a, rows, s); break;
    case TYPE_Q4_K: launch_type_t<TYPE_Q4_K>(a, rows, s); break;
    case TYPE_Q5_K: launch_type_t<TYPE_Q5_K>(a, rows, s); break;
    case TYPE_Q6_K: launch_type_t<TYPE_Q6_K>(a, rows, s); break;
    case TYPE_MIXED: launch_type_t<TYPE_MIXED>(a, rows, s); break;
    default: break;
    }
}

extern "C" int cuda_matmul_multi(const struct cuda_matrix *m, int n_mat, int64_t k, const void *xq, const float *xf,
                                 int64_t nt, const float *res, enum cuda_epilogue epi, void *q8_out, void *stream,
                                 struct error *e)
{
    struct mm_args a;
    memset(&a, 0, sizeof a);
    if (n_mat < 1 || n_mat > 3 || (epi == CUDA_EPI_PAIR && n_mat != 2) ||
        (epi == CUDA_EPI_ADD && (n_mat != 1 || !res)))
        return fail(e, "matmul: %d matrices with epilogue %d", n_mat, (int)epi);
    for (int i = 0; i < n_mat; i++) {
        const struct type_info *ti = type_info(m[i].t);
        bool q8 = cuda_matmul_takes_q8(m[i].t);
        if (!cuda_weight_type_ok(m[i].t))
            return fail(e, "matmul: no GPU kernel for weight type %s", type_name(m[i].t));
        if (k <= 0 || m[i].n <= 0 || nt <= 0 || k % ti->block_elems || (q8 && (k % QK8 || !xq)) || (!q8 && !xf))
            return fail(e, "matmul: %s rows of %lld are not a positive multiple of %u (or %lld rows, %lld columns, "
                           "or no input of the kind the type reads)", ti->name, (long long)k, ti->block_elems,
                        (long long)m[i].n, (long long)nt);
        a.m[i] = (struct mm_mat){ (int)m[i].t, (const uint8_t *)m[i].w, (size_t)(k / ti->block_elems) * ti->block_bytes,
                                  m[i].n, m[i].bias, m[i].y };
    }
    if (epi == CUDA_EPI_PAIR && m[1].n != m[0].n)
        return fail(e, "matmul: a gate of %lld rows and an up of %lld", (long long)m[0].n, (long long)m[1].n);
    if (q8_out && (m[0].n % 32 || epi != CUDA_EPI_PAIR))
        return fail(e, "matmul: a Q8_1 product needs a SwiGLU epilogue and rows in multiples of 32, not %lld",
                    (long long)m[0].n);
    if (nt > 65535 * 8)
        return fail(e, "matmul: %lld columns", (long long)nt);
    a.xq = (const uint8_t *)xq;
    a.xf = xf;
    a.k = k;
    a.nt = nt;
    a.res = res;
    a.epi = epi;
    a.q8_out = (uint8_t *)q8_out;
    cudaStream_t s = (cudaStream_t)stream;
    /* one launch: a pair (its rows are the gate's), or every matrix, of one type or mixed */
    int64_t rows = 0;
    int type = a.m[0].type;
    for (int i = 0; i < n_mat; i++) {
        rows += epi == CUDA_EPI_PAIR && i > 0 ? 0 : a.m[i].n;
        type = a.m[i].type == type ? type : TYPE_MIXED;
    }
    a.n_mat = epi == CUDA_EPI_PAIR ? 1 : n_mat;
    if (cuda_launch_begin("matmul_kernel", e))
        return -1;
    launch_type(type, a, rows, s);
    return cuda_launch_end("matmul_kernel", e);
}

extern "C" int cuda_matmul(enum tensor_type t, const void *w, int64_t k, int64_t n, const void *x, int64_t nt,
                           const float *bias, const float *res, enum cuda_epilogue epi, float *y, void *stream,
                           struct error *e)
{
    const struct cuda_matrix m = { t, w, n, bias, y };
    bool q8 = cuda_matmul_takes_q8(t);
    return cuda_matmul_multi(&m, 1, k, q8 ? x : NULL, q8 ? NULL : (const float *)x, nt, res, epi, NULL, stream, e);
}
