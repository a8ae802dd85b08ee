/* mmf.cu: a prompt's matmuls of F16 and BF16 weights on the bf16 tensor
 * cores (matmul.cu sends launches of more than CUDA_PROMPT_MIN_COLUMNS
 * columns here; F32 weights keep the CUDA-core kernel). A CTA of 8 warps
 * computes a tile of 64 rows by 128 columns, each warp 32 by 32, through
 * stages of 32 values of k: the weights and the f32 activations copied
 * raw by cp.async (double-buffered), then split into bf16 pieces in
 * shared memory, multiplied by mma.sync m16n8k16 with f32 sums.
 *
 * Precision: an activation x is hi + lo, hi = bf16(x) and lo = bf16(x -
 * hi), within 2^-16 |x|; a BF16 weight is exact in bf16, an F16 one (11
 * bits) is exactly bf16 w_hi + w_lo. Each product is formed as hi hi + hi
 * lo (+ lo hi for F16; lo lo, under 2^-16 of it, is left out): within
 * 2^-15 of w x, in bf16's range (f32's), where rounding x to f16 would
 * cost 2^-11 and overflow past 65504. A column's value depends on neither
 * the batch nor its tile (the stages in order, the same operations), so
 * prompts keep the chunking rule (DESIGN.md). */
#include "cuda/mmq_stage.cuh"

#define MMF_K 32              /* values of k a stage */
#define MMF_STRIDE (MMF_K + 8) /* 16-bit values a row in shared memory: conflict-free ldmatrix */
#define MMF_WR 2              /* warps down the rows */
#define MMF_WC 4              /* and across the columns */
#define MMF_COLS (32 * MMF_WC)
#define MMF_THREADS (32 * MMF_WR * MMF_WC)

bool cuda_mmf_type(int t) { return t == TYPE_F16 || t == TYPE_BF16; }

/* v as bf16 hi + lo, each rounded to nearest. */
__device__ static inline void bf16_split(float v, uint16_t &hi, uint16_t &lo)
{
    const __nv_bfloat16 h = __float2bfloat16_rn(v);
    hi = __bfloat16_as_ushort(h);
    lo = __bfloat16_as_ushort(__float2bfloat16_rn(__fsub_rn(v, __bfloat162float(h))));
}

/* A CTA's shared memory: raw stages (rows of each of P matrices, columns),
 * double-buffered, and the landed stage's bf16 pieces (an F16 weight's
 * hi and lo; a BF16 weight is its own piece, read from wraw). */
template <int T, int P>
struct __align__(16) mmf_smem {
    static constexpr int ROWS = 32 / P * MMF_WR, WP = T == TYPE_F16 ? 2 : 1;
    uint16_t wraw[2][P][ROWS][MMF_STRIDE]; /* [buffer][matrix][row][k], as stored */
    float xraw[2][MMF_COLS][MMF_K];        /* [buffer][column][k] */
    uint16_t w[WP == 2 ? 2 : 1][P][T == TYPE_F16 ? ROWS : 1][MMF_STRIDE]; /* [piece][matrix][row][k] (F16) */
    uint16_t x[2][MMF_COLS][MMF_STRIDE];   /* [piece][column][k] */
};

/* Starts the copies of the stage from k0 into buffer bi, as one group;
 * rows past the matrix and columns past the batch are zeros. */
template <int T, int P>
__device__ static void mmf_fetch(const struct mmq_args &m, const struct mmq_mat &w, struct mmf_smem<T, P> &sh, int bi,
                                 int64_t r0, int64_t c0, int64_t k0)
{
    constexpr int ROWS = mmf_smem<T, P>::ROWS;
    for (int t = (int)threadIdx.x; t < P * ROWS * (MMF_K / 8); t += MMF_THREADS) { /* 16 bytes: 8 values */
        const int p = t / (ROWS * (MMF_K / 8)), r = t / (MMF_K / 8) % ROWS, i = t % (MMF_K / 8);
        uint16_t *dst = &sh.wraw[bi][p][r][8 * i];
        if (r0 + r < w.n) /* a pair's up: m[1], of the gate's shape */
            copy_async(dst, (p ? m.m[1].w : w.w) + (size_t)(r0 + r) * w.row_bytes + (size_t)(k0 + 8 * i) * 2, 16);
        else
            *(uint4 *)dst = make_uint4(0, 0, 0, 0);
    }
    for (int t = (int)threadIdx.x; t < MMF_COLS * (MMF_K / 4); t += MMF_THREADS) { /* 16 bytes: 4 values */
        const int c = t / (MMF_K / 4), i = t % (MMF_K / 4);
        float *dst = &sh.xraw[bi][c][4 * i];
        if (c0 + c < m.nt)
            copy_async(dst, m.xf + (size_t)(c0 + c) * (size_t)m.k + (size_t)(k0 + 4 * i), 16);
        else
            *(float4 *)dst = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    copy_commit();
}

/* The landed stage in buffer bi as bf16 pieces: the activations' hi and
 * lo, and an F16 weight's. */
template <int T, int P>
__device__ static void mmf_split(struct mmf_smem<T, P> &sh, int bi)
{
    for (int t = (int)threadIdx.x; t < MMF_COLS * (MMF_K / 4); t += MMF_THREADS) {
        const int c = t / (MMF_K / 4), i = t % (MMF_K / 4);
        const float4 v = *(const float4 *)&sh.xraw[bi][c][4 * i];
        uint16_t hi[4], lo[4];
        bf16_split(v.x, hi[0], lo[0]), bf16_split(v.y, hi[1], lo[1]), bf16_split(v.z, hi[2], lo[2]), bf16_split(v.w, hi[3], lo[3]);
        *(uint2 *)&sh.x[0][c][4 * i] = *(const uint2 *)hi;
        *(uint2 *)&sh.x[1][c][4 * i] = *(const uint2 *)lo;
    }
    if constexpr (T == TYPE_F16) {
        constexpr int ROWS = mmf_smem<T, P>::ROWS;
        for (int t = (int)threadIdx.x; t < P * ROWS * (MMF_K / 4); t += MMF_THREADS) {
            const int p = t / (ROWS * (MMF_K / 4)), r = t / (MMF_K / 4) % ROWS, i = t % (MMF_K / 4);
            const uint16_t *src = &sh.wraw[bi][p][r][4 * i];
            uint16_t hi[4], lo[4];
#pragma unroll
            for (int j = 0; j < 4; j++) /* exact: an f16 value has 11 significant bits, bf16 hi 8, the rest at most 4 */
                bf16_split(__half2float(__ushort_as_half(src[j])), hi[j], lo[j]);
            *(uint2 *)&sh.w[0][p][r][4 * i] = *(const uint2 *)hi;
            *(uint2 *)&sh.w[1][p][r][4 * i] = *(const uint2 *)lo;
        }
    }
}

/* acc[p][mf][tile][i]: matrix p, the warp's row fragment mf (16 rows) and
 * column tile (8 columns), the fragment's element i (rows g and g + 8,
 * columns 2 t and 2 t + 1); each 16 values of k: hi hi, hi lo (, lo hi). */
template <int T, int P>
__device__ static void mmf_stage(const struct mmf_smem<T, P> &sh, int bi, float acc[P][2 / P][4][4])
{
    constexpr int MF = 2 / P, WP = mmf_smem<T, P>::WP;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, wr = warp % MMF_WR, wc = warp / MMF_WR;
    unsigned bx[2][4][4]; /* [piece][tile]: both 16-value steps' B fragments */
#pragma unroll
    for (int piece = 0; piece < 2; piece++)
#pragma unroll
        for (int tile = 0; tile < 4; tile++)
            ldmatrix_x4<false>(bx[piece][tile], &sh.x[piece][32 * wc + 8 * tile + lane % 8][8 * (lane / 8)]);
#pragma unroll
    for (int p = 0; p < P; p++) {
#pragma unroll
        for (int mf = 0; mf < MF; mf++) {
            const int rf = 16 * MF * wr + 16 * mf + lane % 8 + 8 * (lane / 8 % 2);
            unsigned af[WP][2][4]; /* [piece][16-value step] */
#pragma unroll
            for (int wp = 0; wp < WP; wp++) {
                const uint16_t *rows = T == TYPE_F16 ? &sh.w[wp][p][0][0] : &sh.wraw[bi][p][0][0];
#pragma unroll
                for (int kk = 0; kk < 2; kk++)
                    ldmatrix_x4<false>(af[wp][kk], rows + rf * MMF_STRIDE + 16 * kk + 8 * (lane / 16));
            }
#pragma unroll
            for (int kk = 0; kk < 2; kk++)
#pragma unroll
                for (int tile = 0; tile < 4; tile++) {
                    mma_f16<true>(acc[p][mf][tile], af[0][kk], bx[0][tile][2 * kk], bx[0][tile][2 * kk + 1]);
                    mma_f16<true>(acc[p][mf][tile], af[0][kk], bx[1][tile][2 * kk], bx[1][tile][2 * kk + 1]);
                    if constexpr (WP == 2)
                        mma_f16<true>(acc[p][mf][tile], af[WP - 1][kk], bx[0][tile][2 * kk], bx[0][tile][2 * kk + 1]);
                }
        }
    }
}

template <int T, int P>
__global__ void __launch_bounds__(MMF_THREADS, 2) mmf_kernel(const struct mmq_args m)
{
    constexpr int ROWS = mmf_smem<T, P>::ROWS, MF = 2 / P;
    extern __shared__ __align__(16) uint8_t smem[];
    struct mmf_smem<T, P> &sh = *(struct mmf_smem<T, P> *)smem;
    grid_begin();
    int64_t r0;
    const struct mmq_mat w = mmq_tile_matrix<P>(m, ROWS, &r0);
    const int64_t c0 = (int64_t)blockIdx.y * MMF_COLS, stages = m.k / MMF_K;
    float acc[P][MF][4][4] = {};
    mmf_fetch<T, P>(m, w, sh, 0, r0, c0, 0);
    for (int64_t st = 0; st < stages; st++) {
        const int bi = (int)(st % 2);
        __syncthreads(); /* the last stage's reads of the other buffer and of the pieces are done */
        if (st + 1 < stages)
            mmf_fetch<T, P>(m, w, sh, bi ^ 1, r0, c0, (st + 1) * MMF_K);
        else
            copy_commit(); /* an empty group: the wait below still means this stage's */
        copy_wait<1>();
        __syncthreads(); /* every thread's copies (and zeros) of this stage have landed */
        mmf_split<T, P>(sh, bi);
        __syncthreads();
        mmf_stage<T, P>(sh, bi, acc);
    }
    const int warp = (int)threadIdx.x / 32;
    mmq_write_warp_tile<P>(m, w, r0 + 16 * MF * (warp % MMF_WR), c0 + 32 * (warp / MMF_WR), acc);
}

template <int T, int P>
static void launch_mmf(const struct mmq_args &m, cudaStream_t s)
{
    constexpr int ROWS = mmf_smem<T, P>::ROWS;
    int64_t tiles = 0;
    for (int i = 0; i < (P == 2 ? 1 : m.n_mat); i++)
        tiles += (m.m[i].n + ROWS - 1) / ROWS;
    const dim3 grid((unsigned)tiles, (unsigned)((m.nt + MMF_COLS - 1) / MMF_COLS));
    constexpr size_t bytes = sizeof(struct mmf_smem<T, P>);
    static const bool opted = (cuda_smem_opt_in((const void *)mmf_kernel<T, P>, bytes), true);
    (void)opted;
    launch(mmf_kernel<T, P>, grid, MMF_THREADS, bytes, s, m);
}

void cuda_mmf_launch(int t, const struct mmq_args &m, bool pair, cudaStream_t s)
{
    if (t == TYPE_F16)
        pair ? launch_mmf<TYPE_F16, 2>(m, s) : launch_mmf<TYPE_F16, 1>(m, s);
    else if (t == TYPE_BF16)
        pair ? launch_mmf<TYPE_BF16, 2>(m, s) : launch_mmf<TYPE_BF16, 1>(m, s);
}
