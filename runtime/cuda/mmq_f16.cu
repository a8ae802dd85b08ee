/* mmq_f16.cu: a prompt's matmuls of quantized weights on the f16 tensor
 * cores, for matrices of many rows (cuda_mmq_f16). A CTA of 8 warps
 * computes a tile of 64 rows by 128 columns, each warp 32 by 32. The
 * stages are mmq.cu's (mmq_stage.cuh: four 32-element blocks, copied raw
 * by cp.async, double-buffered); each stage's weights
 * are decoded once a CTA into f16 values a * code + b (rounded once, from
 * f32), and the activations' Q8_1 codes, integers under 128, are f16
 * exactly. mma.sync m16n8k16 sums a block's 32 products in f32 on the
 * tensor cores (two steps of 16), and one fused multiply-add a value a
 * block scales that sum by the column's d into its accumulator.
 *
 * Against the int8 kernel: no integer-to-float conversions and no offset
 * term per value a block (the offset b is in the f16 weights), one
 * instruction of scaling where that one takes three or four; the weights
 * are rounded to f16 (a relative 2^-11), where the int8 kernel keeps them
 * exact. A column's value depends on neither the batch nor its tile (the
 * blocks in order, the same operations), so prompts keep the chunking
 * rule (DESIGN.md). On sm_90, Q4_K and Q6_K take mmq_wgmma.cu's kernel
 * instead (cuda_mmq_wgmma). */
#include "cuda/mmq_stage.cuh"

#define MMH_STRIDE (32 * MMQ_BLOCKS + 8) /* halves a row of weights in shared memory: conflict-free ldmatrix */

/* A CTA of WR x WC warps: each warp takes 32 / P rows of each of P
 * matrices (2 / P fragments of 16) by 32 columns (four of 8). */
template <int P, int WR, int WC>
struct __align__(16) mmh_smem {
    struct mmq_raw<P, 32 / P * WR, 32 * WC> raw;
    __half w[P][32 / P * WR][MMH_STRIDE]; /* [matrix][row][k]: each 16 in the fragments' order (mmh_unpack) */
    float xd[MMQ_BLOCKS][32 * WC];        /* a column's Q8_1 block scale */
};

/* Byte i of u (a code + 128) as the float code, exactly: placed in the
 * mantissa of 2^23, whose unit is 1 (full-rate operations, where the
 * integer-to-float conversion runs at a quarter of the rate). */
__device__ static inline float code_float(unsigned u, int i)
{
    return __fsub_rn(__int_as_float((int)__byte_perm(u, 0x4b000000u, 0x7540u | (unsigned)i)), 8388736.0f);
}

/* Four codes (a word of int8) as two f16 pairs, exactly: bytes 0, 1 and
 * bytes 2, 3 (1024 + code + 128 is an f16 of unit 1, less 1152). */
__device__ static inline void code_halves(unsigned w, unsigned &lo, unsigned &hi)
{
    const unsigned u = w ^ 0x80808080u;
    const __half2 bias = __half2half2(__ushort_as_half((unsigned short)0x6480)); /* 1152 */
    const unsigned l = __byte_perm(u, 0x64646464u, 0x5140u), h = __byte_perm(u, 0x64646464u, 0x7362u);
    const __half2 a = __hsub2(*(const __half2 *)&l, bias), b = __hsub2(*(const __half2 *)&h, bias);
    lo = *(const unsigned *)&a, hi = *(const unsigned *)&b;
}

/* The landed stage in buffer bi: every row's blocks as f16 weights, each
 * 16 in the order the fragments take them (logical k 2 t, 2 t + 1 hold
 * the codes 4 t, 4 t + 1 of the 16, and 2 t + 8, 2 t + 9 the codes
 * 4 t + 2, 4 t + 3, so that an activation fragment is one word of the
 * stored Q8_1 codes); the columns' scales as floats. Rows past the matrix
 * are zeros. */
template <int T, int P, int WR, int WC>
__device__ static void mmh_unpack(const struct mmq_mat &w, struct mmh_smem<P, WR, WC> &sh, int bi, int64_t r0,
                                  int64_t c0, int64_t j0, int64_t nt)
{
    constexpr int ROWS = 32 / P * WR, COLS = 32 * WC, THREADS = 32 * WR * WC;
    for (int t = (int)threadIdx.x; t < P * ROWS * MMQ_BLOCKS; t += THREADS) { /* rows fastest: conflict-free */
        const int p = t / (ROWS * MMQ_BLOCKS), jb = t / ROWS % MMQ_BLOCKS, r = t % ROWS;
        unsigned q[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
        float a[2] = { 0.0f, 0.0f }, b = 0.0f;
        if (r0 + r < w.n)
            mmq_decode<T>(sh.raw.wraw[bi][p][r], jb, j0, q, a, &b);
#pragma unroll
        for (int c = 0; c < 2; c++) {
            unsigned lo[4], hi[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const unsigned u = q[4 * c + i] ^ 0x80808080u;
                lo[i] = half2_bits(__fmaf_rn(a[c], code_float(u, 0), b), __fmaf_rn(a[c], code_float(u, 1), b));
                hi[i] = half2_bits(__fmaf_rn(a[c], code_float(u, 2), b), __fmaf_rn(a[c], code_float(u, 3), b));
            }
            uint4 *dst = (uint4 *)&sh.w[p][r][32 * jb + 16 * c];
            dst[0] = make_uint4(lo[0], lo[1], lo[2], lo[3]);
            dst[1] = make_uint4(hi[0], hi[1], hi[2], hi[3]);
        }
    }
    for (int t = (int)threadIdx.x; t < COLS * MMQ_BLOCKS; t += THREADS) {
        const int jb = t / COLS, c = t % COLS;
        sh.xd[jb][c] = c0 + c < nt ? half_field(&sh.raw.xraw[bi][c][36 * jb]) : 0.0f;
    }
}

/* acc[p][mf][tile][i]: matrix p, the warp's row fragment mf (16 rows) and
 * column tile (8 columns), the fragment's element i (rows g and g + 8,
 * columns 2 t and 2 t + 1). A block's sum, on the tensor cores from zero,
 * then acc + d sum. */
template <int P, int WR, int WC>
__device__ static void mmh_stage(const struct mmh_smem<P, WR, WC> &sh, int bi, float acc[P][2 / P][4][4])
{
    constexpr int MF = 2 / P;
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, wr = warp % WR, wc = warp / WR;
    const int g = lane / 4, t4 = lane % 4;
#pragma unroll 1
    for (int jb = 0; jb < MMQ_BLOCKS; jb++) {
        unsigned bf[4][2][2]; /* [tile][16 of the block][fragment word] */
        float2 xd[4];
#pragma unroll
        for (int tile = 0; tile < 4; tile++) {
            const int col = 32 * wc + 8 * tile;
            const unsigned *xc = (const unsigned *)&sh.raw.xraw[bi][col + g][36 * jb + 4];
#pragma unroll
            for (int c = 0; c < 2; c++)
                code_halves(xc[4 * c + t4], bf[tile][c][0], bf[tile][c][1]); /* 36-word columns: 32 lanes, 32 banks */
            xd[tile] = *(const float2 *)&sh.xd[jb][col + 2 * t4];
        }
#pragma unroll
        for (int p = 0; p < P; p++) {
#pragma unroll
            for (int mf = 0; mf < MF; mf++) {
                const int rf = 16 * MF * wr + 16 * mf;
                unsigned af[2][4];
#pragma unroll
                for (int c = 0; c < 2; c++)
                    ldmatrix_x4<false>(af[c], &sh.w[p][rf + lane % 8 + 8 * (lane / 8 % 2)][32 * jb + 16 * c + 8 * (lane / 16)]);
                float s[4][4]; /* [tile]: the block's sums; independent products first, then the dependent ones */
#pragma unroll
                for (int tile = 0; tile < 4; tile++) {
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        s[tile][i] = 0.0f;
                    mma_f16(s[tile], af[0], bf[tile][0][0], bf[tile][0][1]);
                }
#pragma unroll
                for (int tile = 0; tile < 4; tile++)
                    mma_f16(s[tile], af[1], bf[tile][1][0], bf[tile][1][1]);
#pragma unroll
                for (int tile = 0; tile < 4; tile++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        acc[p][mf][tile][i] = __fmaf_rn(i % 2 ? xd[tile].y : xd[tile].x, s[tile][i], acc[p][mf][tile][i]);
            }
        }
    }
}

template <int T, int P, int WR, int WC>
__global__ void __launch_bounds__(32 * WR * WC, 16 / (WR * WC)) mmh_kernel(const struct mmq_args m)
{
    constexpr int ROWS = 32 / P * WR, COLS = 32 * WC, MF = 2 / P;
    extern __shared__ __align__(16) uint8_t smem[];
    struct mmh_smem<P, WR, WC> &sh = *(struct mmh_smem<P, WR, WC> *)smem;
    grid_begin();
    int64_t r0;
    const struct mmq_mat w = mmq_tile_matrix<P>(m, ROWS, &r0);
    const int64_t c0 = (int64_t)blockIdx.y * COLS;
    float acc[P][MF][4][4] = {};
    const int64_t stages = m.k / (32 * MMQ_BLOCKS);
    mmq_fetch<T, P, ROWS, COLS, 32 * WR * WC>(m, w, sh.raw, 0, r0, c0, 0);
    for (int64_t st = 0; st < stages; st++) {
        const int bi = (int)(st % 2);
        __syncthreads(); /* the last stage's reads of the other buffer, the weights and the scales are done */
        if (st + 1 < stages)
            mmq_fetch<T, P, ROWS, COLS, 32 * WR * WC>(m, w, sh.raw, bi ^ 1, r0, c0, (st + 1) * MMQ_BLOCKS);
        else
            copy_commit(); /* an empty group: the wait below still means this stage's */
        copy_wait<1>();
        __syncthreads(); /* every thread's copies of this stage have landed */
        mmh_unpack<T, P, WR, WC>(w, sh, bi, r0, c0, st * MMQ_BLOCKS, m.nt);
        __syncthreads();
        mmh_stage<P, WR, WC>(sh, bi, acc);
    }
    const int warp = (int)threadIdx.x / 32;
    mmq_write_warp_tile<P>(m, w, r0 + 16 * MF * (warp % WR), c0 + 32 * (warp / WR), acc);
}

/* Tiles of 64 rows (of each matrix; a pair's gate and up 32 each) by 128
 * columns: measured against 128 by 128 (8 warps of 64 by 32, or 16 of 32
 * by 32), which leave a 512-column prompt of 4096 rows one CTA an SM
 * (BENCHMARKS.md). */
template <int T, int P, int WR, int WC>
static void launch_mmh(const struct mmq_args &m, cudaStream_t s)
{
    constexpr int ROWS = 32 / P * WR;
    int64_t rows = 0;
    for (int i = 0; i < (P == 2 ? 1 : m.n_mat); i++)
        rows += (m.m[i].n + ROWS - 1) / ROWS;
    const dim3 grid((unsigned)rows, (unsigned)((m.nt + 32 * WC - 1) / (32 * WC)));
    constexpr size_t bytes = sizeof(struct mmh_smem<P, WR, WC>);
    static const bool opted = (cuda_smem_opt_in((const void *)mmh_kernel<T, P, WR, WC>, bytes), true);
    (void)opted;
    launch(mmh_kernel<T, P, WR, WC>, grid, 32 * WR * WC, bytes, s, m);
}

struct f16_tiles { /* Q8_0 stays on the int8 kernel (cuda_mmq_f16), so it is not built here */
    template <int T, int P>
    static void run(const struct mmq_args &m, cudaStream_t s)
    {
        if constexpr (T != TYPE_Q8_0)
            launch_mmh<T, P, 2, 4>(m, s);
    }
};

void cuda_mmq_f16_launch(int t, const struct mmq_args &m, bool pair, cudaStream_t s) { mmq_dispatch<f16_tiles>(t, m, pair, s); }
