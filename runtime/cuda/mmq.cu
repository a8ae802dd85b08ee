/* mmq.cu: a prompt's matmuls of quantized weights on the int8 tensor
 * cores. A CTA of 8 warps computes a tile of 64 rows by 128 columns (4 warps
 * and 64 by 64 when the launch would not give every SM a CTA); each warp
 * takes 32 rows by 32 columns. For each stage of four 32-element blocks
 * the CTA decodes its rows' blocks into int8 codes (the weight is
 * a * code + b, a per 16 elements and b per 32: every GGUF type the GPU
 * reads has that form; codes as quant_dot.c forms its integer sums, the
 * offsets it takes through the activation block's sum s, Q4_0's -8 among
 * them) and copies its columns' Q8_1 codes, both into shared memory; the
 * warps load fragments with ldmatrix and multiply with mma.sync
 * m16n8k32 (s8 x s8 -> s32 sums over a block; Q6_K's two scales, two
 * m16n8k16), and scale each block's integer sums into their f32
 * accumulators with explicit fused multiply-adds, block after block (a +
 * b sum(x): the activation block's d and s as the dp4a path reads them).
 * The order of every float operation is fixed and explicit, so a column's
 * result depends on neither the other columns, the matrices beside it
 * (Q, K and V of one type share a launch), nor the tile; it is not the
 * decode GEMV's order, which is why only launches of more than
 * CUDA_PROMPT_MIN_COLUMNS columns come here (smaller batches keep the bits
 * of single steps, DESIGN.md). */
#include "cuda/mmq.cuh"
#include "graph_ops.h"

#define MMQ_BLOCKS 4                      /* 32-element blocks a stage */
#define MMQ_STRIDE (32 * MMQ_BLOCKS + 16) /* bytes a row of codes in shared memory: 16-byte aligned, conflict-free ldmatrix */

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

/* D = A B + C over 16 codes (A 16 x 16 rows, B 16 x 8 columns), and over
 * 32 (A 16 x 32, B 32 x 8): s8 x s8 -> s32. */
__device__ static inline void mma_s8_k16(int d[4], unsigned a0, unsigned a1, unsigned b0)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0));
#endif
}

__device__ static inline void mma_s8_k32(int d[4], const unsigned a[4], const unsigned b[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/* Four 8 x 8 matrices of 16-bit pairs from shared memory: lanes 8 m..8 m + 7
 * give the addresses of matrix m's rows (16 bytes each), and each lane
 * receives, of every matrix, row lane / 4's bytes 4 (lane % 4).. + 3: for
 * int8 codes that is the tensor-core fragment itself. */
__device__ static inline void ldmatrix_x4(unsigned r[4], const void *p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#endif
}

/* An integer sum of at most 32 products of 8-bit codes (|s| < 2^22) as a
 * float, exactly: placed in the mantissa of 1.5 * 2^23, whose unit is 1,
 * then the 1.5 * 2^23 taken away. Two full-rate operations where the
 * int-to-float conversion runs at a quarter of the rate, and in the
 * prompt's matmuls it would be the slowest unit. */
__device__ static inline float exact_float(int s)
{
    return __fsub_rn(__int_as_float(s + 0x4b400000), 12582912.0f);
}

/* A CTA of WR x WC warps computes a tile of 32 WR rows (of each of P
 * matrices) by 32 WC columns; warp (wr, wc) takes rows 32 wr.. and
 * columns 32 wc.. of it, as two 16-row by four 8-column fragments. */
template <int P, int WR, int WC>
struct __align__(16) mmq_smem {
    int8_t w[P][32 * WR][MMQ_STRIDE]; /* [matrix][row][code]: the gate and up of a pair */
    int8_t x[32 * WC][MMQ_STRIDE];    /* [column][code] */
    float2 ws[P][MMQ_BLOCKS][32 * WR]; /* a row's block scales: { a, b } (Q6_K: { a of 0..15, a of 16..31 }) */
    float2 xs[MMQ_BLOCKS][32 * WC];    /* a column's Q8_1 block: { d, s } */
};

/* One stage: blocks j0.. of the tile's rows (of P matrices) and columns. */
template <int T, int P, int WR, int WC>
__device__ static void mmq_load(const struct mmq_args &m, const struct mmq_mat &w, struct mmq_smem<P, WR, WC> &sh,
                                int64_t r0, int64_t c0, int64_t j0)
{
    constexpr int ROWS = 32 * WR, COLS = 32 * WC, THREADS = 32 * WR * WC;
    const int64_t nbk = m.k / 32, nb = T == TYPE_Q4_K || T == TYPE_Q5_K || T == TYPE_Q6_K ? m.k / 256 : nbk;
    for (int t = threadIdx.x; t < P * ROWS * MMQ_BLOCKS; t += THREADS) {
        const int p = t / (ROWS * MMQ_BLOCKS), r = t / MMQ_BLOCKS % ROWS, jb = t % MMQ_BLOCKS;
        const int64_t row = r0 + r, j = j0 + jb;
        int8_t *q = &sh.w[p][r][32 * jb];
        float a[2] = { 0.0f, 0.0f }, b = 0.0f;
        if (row < w.n && j < nbk) /* a pair's up: m[1], of the gate's shape */
            mmq_decode<T>((p ? m.m[1].w : w.w) + (size_t)row * w.row_bytes, nb, j, q, a, &b);
        else
            ((uint4 *)q)[0] = ((uint4 *)q)[1] = make_uint4(0, 0, 0, 0);
        sh.ws[p][jb][r] = T == TYPE_Q6_K ? make_float2(a[0], a[1]) : make_float2(a[0], b);
    }
    /* a column's blocks j0.. are 36 MMQ_BLOCKS consecutive bytes: the
     * threads read them a word each, in order (coalesced), and put the
     * header words (d, s) and the code words where the fragments want them */
    for (int t = threadIdx.x; t < COLS * 9 * MMQ_BLOCKS; t += THREADS) {
        const int c = t / (9 * MMQ_BLOCKS), jb = t / 9 % MMQ_BLOCKS, i = t % 9;
        const int64_t col = c0 + c, j = j0 + jb;
        const unsigned v = col < m.nt && j < nbk ? ((const unsigned *)(m.xq + ((size_t)col * (size_t)nbk + (size_t)j) * 36))[i] : 0u;
        if (i == 0)
            sh.xs[jb][c] = make_float2(__half2float(__ushort_as_half((unsigned short)(v & 0xffff))),
                                       __half2float(__ushort_as_half((unsigned short)(v >> 16))));
        else
            ((unsigned *)&sh.x[c][32 * jb])[i - 1] = v;
    }
}

/* acc[p][rt][tile][i]: matrix p, the warp's row fragment rt (16 rows) and
 * column tile (8 columns), the fragment's element i (rows g and g + 8,
 * columns 2 t and 2 t + 1). Per block, its integer sums are scaled into
 * acc in a fixed order: acc + (a d) s_int (+ b s), or for Q6_K's two
 * scales acc + (a1 s1 + a0 s0) d. */
template <int T, int P, int WR, int WC>
__device__ static void mmq_stage(const struct mmq_smem<P, WR, WC> &sh, float acc[P][2][4][4])
{
    constexpr bool offset = T != TYPE_Q8_0 && T != TYPE_Q6_K;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wr = warp % WR, wc = warp / WR;
    const int g = lane / 4, t4 = lane % 4, mat = lane / 8;
#pragma unroll 1 /* registers: the matrices and fragments unrolled are enough */
    for (int jb = 0; jb < MMQ_BLOCKS; jb++) {
        unsigned bf[4][2]; /* the column tiles' B fragments: two tiles an ldmatrix */
        float4 xds[4];     /* tile's columns 2 t, 2 t + 1: { d, s, d, s } */
#pragma unroll
        for (int h = 0; h < 2; h++) {
            unsigned r[4];
            ldmatrix_x4(r, &sh.x[32 * wc + 16 * h + 8 * (mat / 2) + lane % 8][32 * jb + 16 * (mat % 2)]);
            bf[2 * h][0] = r[0], bf[2 * h][1] = r[1], bf[2 * h + 1][0] = r[2], bf[2 * h + 1][1] = r[3];
        }
#pragma unroll
        for (int tile = 0; tile < 4; tile++)
            xds[tile] = *(const float4 *)&sh.xs[jb][32 * wc + 8 * tile + 2 * t4];
#pragma unroll
        for (int p = 0; p < P; p++) {
#pragma unroll
            for (int rt = 0; rt < 2; rt++) {
                const int rf = 32 * wr + 16 * rt;
                unsigned af[4];
                ldmatrix_x4(af, &sh.w[p][rf + 8 * (mat % 2) + lane % 8][32 * jb + 16 * (mat / 2)]);
                const float2 sc[2] = { sh.ws[p][jb][rf + g], sh.ws[p][jb][rf + g + 8] };
#pragma unroll
                for (int tile = 0; tile < 4; tile++) {
                    const float xd[2] = { xds[tile].x, xds[tile].z }, xsum[2] = { xds[tile].y, xds[tile].w };
                    int s0[4] = { 0, 0, 0, 0 }, s1[4] = { 0, 0, 0, 0 };
                    if (T == TYPE_Q6_K) { /* a scale per 16 codes: two sums */
                        mma_s8_k16(s0, af[0], af[1], bf[tile][0]);
                        mma_s8_k16(s1, af[2], af[3], bf[tile][1]);
                    } else {
                        mma_s8_k32(s0, af, bf[tile]);
                    }
#pragma unroll
                    for (int i = 0; i < 4; i++) { /* rows g (i < 2) and g + 8, columns 2 t + i % 2 */
                        const float2 a = sc[i / 2];
                        float &acc_i = acc[p][rt][tile][i];
                        if (T == TYPE_Q6_K)
                            acc_i = __fmaf_rn(__fmaf_rn(a.y, exact_float(s1[i]), __fmul_rn(a.x, exact_float(s0[i]))),
                                              xd[i % 2], acc_i);
                        else
                            acc_i = __fmaf_rn(__fmul_rn(a.x, xd[i % 2]), exact_float(s0[i]), acc_i);
                        if (offset)
                            acc_i = __fmaf_rn(a.y, xsum[i % 2], acc_i);
                    }
                }
            }
        }
    }
}

/* Registers: at most 85 a thread for a single matrix (3 CTAs of 8 warps an
 * SM), 128 for a pair (2). */
template <int T, int P, int WR, int WC>
__global__ void __launch_bounds__(32 * WR * WC, 16 / (WR * WC)) mmq_kernel(const struct mmq_args m)
{
    __shared__ struct mmq_smem<P, WR, WC> sh;
    grid_begin();
    /* the CTA's matrix: row tiles run through m[0], then m[1], m[2] (selected,
     * not indexed: an indexed parameter struct is copied to local memory) */
    int64_t tile = blockIdx.x;
    const int64_t t0 = (m.m[0].n + 32 * WR - 1) / (32 * WR), t1 = m.n_mat > 1 ? (m.m[1].n + 32 * WR - 1) / (32 * WR) : 0;
    const int mi = P == 2 || tile < t0 ? 0 : tile < t0 + t1 ? 1 : 2;
    tile -= mi == 0 ? 0 : mi == 1 ? t0 : t0 + t1;
    const struct mmq_mat w = mi == 0 ? m.m[0] : mi == 1 ? m.m[1] : m.m[2];
    const int64_t r0 = tile * 32 * WR, c0 = (int64_t)blockIdx.y * 32 * WC;
    float acc[P][2][4][4];
#pragma unroll
    for (int p = 0; p < P; p++)
#pragma unroll
        for (int rt = 0; rt < 2; rt++)
#pragma unroll
            for (int tile = 0; tile < 4; tile++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    acc[p][rt][tile][i] = 0.0f;
    for (int64_t j0 = 0; j0 < m.k / 32; j0 += MMQ_BLOCKS) {
        __syncthreads(); /* the last stage's reads are done */
        mmq_load<T, P, WR, WC>(m, w, sh, r0, c0, j0);
        __syncthreads();
        mmq_stage<T, P, WR, WC>(sh, acc);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, wr = warp % WR, wc = warp / WR;
#pragma unroll
    for (int rt = 0; rt < 2; rt++)
#pragma unroll
        for (int ct = 0; ct < 4; ct++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t row = r0 + 32 * wr + 16 * rt + lane / 4 + 8 * (i / 2);
                const int64_t col = c0 + 32 * wc + 8 * ct + 2 * (lane % 4) + i % 2;
                if (row >= w.n || col >= m.nt)
                    continue;
                /* the product, plus the bias, plus the residual, or the gate's activation times up: the CPU's order */
                float v = acc[0][rt][ct][i];
                if (w.bias)
                    v = __fadd_rn(v, w.bias[row]);
                const size_t at = (size_t)col * (size_t)w.n + (size_t)row;
                if (m.res)
                    v = __fadd_rn(v, m.res[at]);
                if (P == 2)
                    v = __fmul_rn(m.glu == GLU_GELU ? gelu(v) : silu(v), acc[P - 1][rt][ct][i]);
                w.y[at] = v;
            }
}

/* The tile: 64 rows by 128 columns (8 warps) when that gives every SM a
 * CTA, else 64 by 64 (4 warps) for more CTAs. The tile never changes a
 * column's bits: every value's sum runs over the blocks in order. */
template <int T, int P>
static void launch_tiles(const struct mmq_args &m, cudaStream_t s)
{
    int64_t rows = 0;
    for (int i = 0; i < (P == 2 ? 1 : m.n_mat); i++)
        rows += (m.m[i].n + 63) / 64;
    const int64_t wide = rows * ((m.nt + 127) / 128);
    if (wide >= (int64_t)cuda_sm_count())
        launch(mmq_kernel<T, P, 2, 4>, dim3((unsigned)rows, (unsigned)((m.nt + 127) / 128)), 256, 0, s, m);
    else
        launch(mmq_kernel<T, P, 2, 2>, dim3((unsigned)rows, (unsigned)((m.nt + 63) / 64)), 128, 0, s, m);
}

template <int P>
static void launch_type(int t, const struct mmq_args &m, cudaStream_t s)
{
    switch (t) {
#define MMQ_CASE(T) \
    case T: launch_tiles<T, P>(m, s); break;
    MMQ_CASE(TYPE_Q4_0) MMQ_CASE(TYPE_Q4_1) MMQ_CASE(TYPE_Q5_0) MMQ_CASE(TYPE_Q5_1) MMQ_CASE(TYPE_Q8_0)
    MMQ_CASE(TYPE_Q4_K) MMQ_CASE(TYPE_Q5_K) MMQ_CASE(TYPE_Q6_K)
#undef MMQ_CASE
    default: break;
    }
}

void cuda_mmq_launch(int t, const struct mmq_args &m, bool pair, cudaStream_t s)
{
    if (pair)
        launch_type<2>(t, m, s);
    else
        launch_type<1>(t, m, s);
}
