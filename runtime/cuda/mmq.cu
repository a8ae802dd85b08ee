/* mmq.cu: a prompt's matmuls of quantized weights on the int8 tensor
 * cores. A CTA computes a tile of 64 rows by 64 columns: for each stage of
 * four 32-element blocks it decodes its rows' blocks into int8 codes (the
 * weight is a * code + b, a per 16 elements and b per 32: every GGUF type
 * the GPU reads has that form) and copies its columns' Q8_1 codes, both
 * into shared memory (codes as quant_dot.c forms its integer sums, the
 * offsets it takes through the activation block's sum s, Q4_0's -8 among
 * them); each warp then takes 16 rows against the 64 columns
 * with mma.sync m16n8k16 (s8 x s8 -> s32 sums over 16 codes), and scales
 * each block's integer sums into its f32 accumulators with explicit fused
 * multiply-adds, block after block
 * (a + b sum(x): the activation block's d and s as the dp4a path reads
 * them). The order of every float operation is fixed and explicit, so a
 * column's result depends on neither the other columns nor the launch; it
 * is not the decode GEMV's order, which is why only launches of more than
 * CUDA_MMQ_MIN_COLUMNS columns come here (smaller batches keep the bits of
 * single steps, DESIGN.md). */
#include "cuda/mmq.cuh"
#include "graph_ops.h"

#define MMQ_ROWS 64
#define MMQ_COLS 64
#define MMQ_BLOCKS 4                      /* 32-element blocks a stage */
#define MMQ_STRIDE (32 * MMQ_BLOCKS + 16) /* bytes a row in shared memory: conflict-free fragment loads */
#define MMQ_THREADS 128

bool cuda_mmq_type(int t)
{
    switch (t) {
    case TYPE_Q4_0: case TYPE_Q4_1: case TYPE_Q5_0: case TYPE_Q5_1: case TYPE_Q8_0:
    case TYPE_Q4_K: case TYPE_Q5_K: case TYPE_Q6_K:
        return true;
    default:
        return false;
    }
}

/* Eight words of four codes into 32 bytes of shared memory (16-byte aligned). */
__device__ static inline void put_codes(int8_t *q, const unsigned w[8])
{
    ((uint4 *)q)[0] = make_uint4(w[0], w[1], w[2], w[3]);
    ((uint4 *)q)[1] = make_uint4(w[4], w[5], w[6], w[7]);
}

/* Block j (32 elements) of a stored row of nb type-T blocks: its codes into
 * q (32 int8, 16-byte aligned; read and written four codes a word, from
 * 16-byte loads of the code planes), its scales a[0] (elements 0..15) and
 * a[1] (16..31) and its offset b (the weight is a * code + b). */
template <int T>
__device__ static void mmq_decode(const uint8_t *row, int64_t nb, int64_t j, int8_t *q, float a[2], float *b)
{
    unsigned w[8];
    *b = 0.0f;
    if constexpr (T == TYPE_Q8_0) {
        words16<8>(field<T>(row, nb, j, 0), w);
        a[0] = a[1] = half_field(field<T>(row, nb, j, 1));
    } else if constexpr (T == TYPE_Q4_0 || T == TYPE_Q4_1 || T == TYPE_Q5_0 || T == TYPE_Q5_1) {
        constexpr bool five = T == TYPE_Q5_0 || T == TYPE_Q5_1, offset = T == TYPE_Q4_1 || T == TYPE_Q5_1;
        unsigned qs[4];
        words16<4>(field<T>(row, nb, j, 0), qs);
        nibbles8(qs, w);
        if (five)
            high_bits8(u32_at(field<T>(row, nb, j, 1)), w);
        const uint8_t *dm = field<T>(row, nb, j, five ? 2 : 1);
        a[0] = a[1] = half_at(dm);
        /* Q4_1, Q5_1: + m; Q4_0, Q5_0: codes less 8 (16) as quant_dot.c takes
         * them, through the activation's sum: d (dx sum(q x) - 8 s) */
        *b = offset ? half_at(dm + 2) : __fmul_rn(five ? -16.0f : -8.0f, a[0]);
    } else if constexpr (T == TYPE_Q4_K || T == TYPE_Q5_K) {
        const uint8_t *blk = row + (size_t)(j / 8) * (T == TYPE_Q4_K ? 144 : 176), *sp = blk + 4;
        const int s = (int)(j % 8);
        const int sc = s < 4 ? sp[s] & 63 : (sp[s + 4] & 0xf) | (sp[s - 4] >> 6) << 4;
        const int mn = s < 4 ? sp[s + 4] & 63 : (sp[s + 4] >> 4) | (sp[s] >> 6) << 4;
        words16<8>(blk + (T == TYPE_Q4_K ? 16 : 48) + 32 * (s / 2), w); /* sub-blocks 2p and 2p + 1 share these bytes */
#pragma unroll
        for (int t = 0; t < 8; t++)
            w[t] = (w[t] >> (4 * (s % 2))) & 0x0f0f0f0fu;
        if constexpr (T == TYPE_Q5_K) {
            unsigned h[8];
            words16<8>(blk + 16, h); /* bit s of byte l: code l's fifth bit */
#pragma unroll
            for (int t = 0; t < 8; t++)
                w[t] |= ((h[t] >> s) & 0x01010101u) << 4;
        }
        a[0] = a[1] = __fmul_rn(half_at(blk), (float)sc);
        *b = -__fmul_rn(half_at(blk + 2), (float)mn);
    } else { /* Q6_K: elements 32 s.. of a superblock: low bits from 32 ql bytes, high from 32 qh bytes; a scale per 16 */
        const int64_t sb = j / 8;
        const int s = (int)(j % 8), h = s / 4, r0 = 32 * (s % 4);
        unsigned lo[8];
        words16<8>(field<T>(row, nb, sb, 0) + 64 * h + r0 % 64, lo);
        words16<8>(field<T>(row, nb, sb, 1) + 32 * h, w);
#pragma unroll
        for (int t = 0; t < 8; t++)
            w[t] = __vsub4(((lo[t] >> (4 * (r0 / 64))) & 0x0f0f0f0fu) | (((w[t] >> (2 * (r0 / 32))) & 0x03030303u) << 4),
                           0x20202020u); /* code - 32, each byte */
        const int8_t *scales = (const int8_t *)field<T>(row, nb, sb, 2);
        const float d = half_at(field<T>(row, nb, sb, 3));
        a[0] = __fmul_rn(d, (float)scales[2 * s]);
        a[1] = __fmul_rn(d, (float)scales[2 * s + 1]);
    }
    put_codes(q, w);
}

/* D = A B + C over 16 codes: A 16 x 16 (rows), B 16 x 8 (columns). */
__device__ static inline void mma_s8_k16(int d[4], int a0, int a1, int b0)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0));
#endif
}

struct __align__(16) mmq_smem {
    int8_t w[2][MMQ_ROWS][MMQ_STRIDE]; /* [matrix][row][code]: the gate and up of a pair */
    int8_t x[MMQ_COLS][MMQ_STRIDE];
    float a[2][MMQ_ROWS][2 * MMQ_BLOCKS], b[2][MMQ_ROWS][MMQ_BLOCKS];
    float xd[MMQ_COLS][MMQ_BLOCKS], xs[MMQ_COLS][MMQ_BLOCKS];
};

/* One stage: blocks j0.. of the tile's rows (of P matrices) and columns. */
template <int T, int P>
__device__ static void mmq_load(const struct mmq_args &m, struct mmq_smem &sh, int64_t r0, int64_t c0, int64_t j0)
{
    const int64_t nbk = m.k / 32, nb = T == TYPE_Q4_K || T == TYPE_Q5_K || T == TYPE_Q6_K ? m.k / 256 : nbk;
    for (int t = threadIdx.x; t < P * MMQ_ROWS * MMQ_BLOCKS; t += MMQ_THREADS) {
        const int p = t / (MMQ_ROWS * MMQ_BLOCKS), r = t / MMQ_BLOCKS % MMQ_ROWS, jb = t % MMQ_BLOCKS;
        const int64_t row = r0 + r, j = j0 + jb;
        int8_t *q = &sh.w[p][r][32 * jb];
        float a[2] = { 0.0f, 0.0f }, b = 0.0f;
        if (row < m.n && j < nbk)
            mmq_decode<T>(m.w[p] + (size_t)row * m.row_bytes, nb, j, q, a, &b);
        else
            ((uint4 *)q)[0] = ((uint4 *)q)[1] = make_uint4(0, 0, 0, 0);
        sh.a[p][r][2 * jb] = a[0], sh.a[p][r][2 * jb + 1] = a[1], sh.b[p][r][jb] = b;
    }
    for (int t = threadIdx.x; t < MMQ_COLS * MMQ_BLOCKS; t += MMQ_THREADS) {
        const int c = t / MMQ_BLOCKS, jb = t % MMQ_BLOCKS;
        const int64_t col = c0 + c, j = j0 + jb;
        int *q = (int *)&sh.x[c][32 * jb];
        if (col < m.nt && j < nbk) {
            const unsigned *blk = (const unsigned *)(m.xq + ((size_t)col * (size_t)nbk + (size_t)j) * 36);
            for (int i = 0; i < 8; i++)
                q[i] = (int)blk[1 + i];
            sh.xd[c][jb] = __half2float(__ushort_as_half((unsigned short)(blk[0] & 0xffff)));
            sh.xs[c][jb] = __half2float(__ushort_as_half((unsigned short)(blk[0] >> 16)));
        } else {
            for (int i = 0; i < 8; i++)
                q[i] = 0;
            sh.xd[c][jb] = sh.xs[c][jb] = 0.0f;
        }
    }
}

/* acc[p][tile][i]: matrix p, column tile of 8, the fragment's element i
 * (rows g and g + 8, columns 2 t and 2 t + 1 of the warp's 16 x 8). */
template <int T, int P>
__device__ static void mmq_stage(const struct mmq_smem &sh, float acc[P][MMQ_COLS / 8][4])
{
    constexpr bool offset = T != TYPE_Q8_0 && T != TYPE_Q6_K;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4;
    const int r_lo = warp * 16 + g, r_hi = r_lo + 8;
#pragma unroll 1 /* registers: the matrices and tiles unrolled are enough */
    for (int jb = 0; jb < MMQ_BLOCKS; jb++) {
#pragma unroll
        for (int p = 0; p < P; p++) {
            const int *wl = (const int *)&sh.w[p][r_lo][32 * jb], *wh = (const int *)&sh.w[p][r_hi][32 * jb];
            const float a_lo[2] = { sh.a[p][r_lo][2 * jb], sh.a[p][r_lo][2 * jb + 1] };
            const float a_hi[2] = { sh.a[p][r_hi][2 * jb], sh.a[p][r_hi][2 * jb + 1] };
            const float b_row[2] = { sh.b[p][r_lo][jb], sh.b[p][r_hi][jb] };
#pragma unroll
            for (int tile = 0; tile < MMQ_COLS / 8; tile++) {
                const int c = tile * 8 + 2 * t4; /* this thread's columns: c and c + 1 */
                const float xd[2] = { sh.xd[c][jb], sh.xd[c + 1][jb] }, xs[2] = { sh.xs[c][jb], sh.xs[c + 1][jb] };
                const int *xc = (const int *)&sh.x[tile * 8 + g][32 * jb];
                int s0[4] = { 0, 0, 0, 0 }, s1[4] = { 0, 0, 0, 0 }; /* elements 0..15, 16..31 */
                mma_s8_k16(s0, wl[t4], wh[t4], xc[t4]);
                mma_s8_k16(s1, wl[4 + t4], wh[4 + t4], xc[4 + t4]);
#pragma unroll
                for (int i = 0; i < 4; i++) { /* rows g (i < 2) and g + 8, columns c + i % 2 */
                    const float *a = i / 2 ? a_hi : a_lo;
                    float &acc_i = acc[p][tile][i];
                    if (T == TYPE_Q6_K)
                        acc_i = __fmaf_rn(__fmaf_rn(a[1], (float)s1[i], __fmul_rn(a[0], (float)s0[i])), xd[i % 2], acc_i);
                    else
                        acc_i = __fmaf_rn(__fmul_rn(a[0], xd[i % 2]), (float)(s0[i] + s1[i]), acc_i);
                    if (offset)
                        acc_i = __fmaf_rn(b_row[i / 2], xs[i % 2], acc_i);
                }
            }
        }
    }
}

template <int T, int P>
__global__ void __launch_bounds__(MMQ_THREADS) mmq_kernel(const struct mmq_args m)
{
    __shared__ struct mmq_smem sh;
    grid_begin();
    const int64_t r0 = (int64_t)blockIdx.x * MMQ_ROWS, c0 = (int64_t)blockIdx.y * MMQ_COLS;
    float acc[P][MMQ_COLS / 8][4];
#pragma unroll
    for (int p = 0; p < P; p++)
#pragma unroll
        for (int tile = 0; tile < MMQ_COLS / 8; tile++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                acc[p][tile][i] = 0.0f;
    for (int64_t j0 = 0; j0 < m.k / 32; j0 += MMQ_BLOCKS) {
        __syncthreads(); /* the last stage's reads are done */
        mmq_load<T, P>(m, sh, r0, c0, j0);
        __syncthreads();
        mmq_stage<T, P>(sh, acc);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
#pragma unroll
    for (int tile = 0; tile < MMQ_COLS / 8; tile++) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int64_t row = r0 + warp * 16 + lane / 4 + 8 * (i / 2), col = c0 + tile * 8 + 2 * (lane % 4) + i % 2;
            if (row >= m.n || col >= m.nt)
                continue;
            /* the product, plus the bias, plus the residual, or the gate's activation times up: the CPU's order */
            float v = acc[0][tile][i];
            if (m.bias)
                v = __fadd_rn(v, m.bias[row]);
            const size_t at = (size_t)col * (size_t)m.n + (size_t)row;
            if (m.res)
                v = __fadd_rn(v, m.res[at]);
            if (P == 2)
                v = __fmul_rn(m.glu == GLU_GELU ? gelu(v) : silu(v), acc[P - 1][tile][i]);
            m.y[at] = v;
        }
    }
}

template <int P>
static void launch_type(int t, const struct mmq_args &m, cudaStream_t s)
{
    const dim3 grid((unsigned)((m.n + MMQ_ROWS - 1) / MMQ_ROWS), (unsigned)((m.nt + MMQ_COLS - 1) / MMQ_COLS));
    switch (t) {
#define MMQ_CASE(T) \
    case T: launch(mmq_kernel<T, P>, grid, MMQ_THREADS, 0, s, m); break;
    MMQ_CASE(TYPE_Q4_0) MMQ_CASE(TYPE_Q4_1) MMQ_CASE(TYPE_Q5_0) MMQ_CASE(TYPE_Q5_1) MMQ_CASE(TYPE_Q8_0)
    MMQ_CASE(TYPE_Q4_K) MMQ_CASE(TYPE_Q5_K) MMQ_CASE(TYPE_Q6_K)
#undef MMQ_CASE
    default: break;
    }
}

void cuda_mmq_launch(int t, const struct mmq_args &m, cudaStream_t s)
{
    if (m.w[1])
        launch_type<2>(t, m, s);
    else
        launch_type<1>(t, m, s);
}
