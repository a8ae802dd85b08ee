/* mmq.cu: a prompt's matmuls of quantized weights on the int8 tensor
 * cores. A CTA of 8 warps computes a tile of 64 rows by 128 columns (4 warps
 * and 64 by 64 when the launch would not give every SM a CTA; four groups
 * of 4 warps sharing out the row length of a matrix of few rows); each warp
 * takes 32 rows by 32 columns. Stages of four 32-element blocks (k % 128
 * == 0) are copied raw into shared memory by cp.async, the next while the
 * present one is worked (double buffers). For each stage the CTA decodes
 * its rows' blocks into int8 codes (the weight is
 * a * code + b, a per 16 elements and b per 32: every GGUF type the GPU
 * reads has that form; codes as quant_dot.c forms its integer sums, the
 * offsets it takes through the activation block's sum s, Q4_0's -8 among
 * them) and its columns' scales; the warps load weight fragments with
 * ldmatrix (activation ones straight from the copied Q8_1 blocks) and multiply with mma.sync
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
#include "cuda/mmq_stage.cuh"

#define MMQ_STRIDE (32 * MMQ_BLOCKS + 16) /* bytes a row of codes in shared memory: 16-byte aligned, conflict-free ldmatrix */

bool cuda_mmq_type(int t)
{
    switch (t) {
#define MMQ_IS(T) case T:
        MMQ_TYPES(MMQ_IS)
#undef MMQ_IS
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

/* D = A B + C over 16 codes (A 16 x 16 rows, B 16 x 8 columns), and over
 * 32 (A 16 x 32, B 32 x 8): s8 x s8 -> s32. */
__device__ static inline void mma_s8_k16(int d[4], unsigned a0, unsigned a1, unsigned b0)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a0), "r"(a1), "r"(b0));
#endif
}

__device__ static inline void mma_s8_k32(int d[4], const unsigned a[4], const unsigned b[2])
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
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
    struct mmq_raw<P, 32 * WR, 32 * WC> raw;
    int8_t w[P][32 * WR][MMQ_STRIDE];  /* [matrix][row][code]: the gate and up of a pair */
    float2 ws[P][MMQ_BLOCKS][32 * WR]; /* a row's block scales: { a, b } (Q6_K: { a of 0..15, a of 16..31 }) */
    float2 xs[MMQ_BLOCKS][32 * WC];    /* a column's Q8_1 block: { d, s } */
};

/* The landed stage in buffer bi: the rows' codes and scales decoded, the
 * columns' scales as floats (their codes are read where they lie). Rows
 * past the matrix decode as zeros; columns past the batch are never
 * written out, so their bytes need not be set. */
template <int T, int P, int WR, int WC>
__device__ static void mmq_unpack(const struct mmq_mat &w, struct mmq_smem<P, WR, WC> &sh, int bi, int64_t r0,
                                  int64_t c0, int64_t j0, int64_t nt)
{
    constexpr int ROWS = 32 * WR, COLS = 32 * WC, THREADS = 32 * WR * WC;
    const int lt = (int)threadIdx.x % THREADS;
    for (int t = lt; t < P * ROWS * MMQ_BLOCKS; t += THREADS) { /* rows fastest: conflict-free */
        const int p = t / (ROWS * MMQ_BLOCKS), jb = t / ROWS % MMQ_BLOCKS, r = t % ROWS;
        unsigned q[8] = { 0, 0, 0, 0, 0, 0, 0, 0 };
        float a[2] = { 0.0f, 0.0f }, b = 0.0f;
        if (r0 + r < w.n)
            mmq_decode<T>(sh.raw.wraw[bi][p][r], jb, j0, q, a, &b);
        put_codes(&sh.w[p][r][32 * jb], q);
        sh.ws[p][jb][r] = T == TYPE_Q6_K ? make_float2(a[0], a[1]) : make_float2(a[0], b);
    }
    for (int t = lt; t < COLS * MMQ_BLOCKS; t += THREADS) {
        const int jb = t / COLS, c = t % COLS;
        const unsigned v = c0 + c < nt ? *(const unsigned *)&sh.raw.xraw[bi][c][36 * jb] : 0u;
        sh.xs[jb][c] = make_float2(__half2float(__ushort_as_half((unsigned short)(v & 0xffff))),
                                   __half2float(__ushort_as_half((unsigned short)(v >> 16))));
    }
}

/* acc[p][rt][tile][i]: matrix p, the warp's row fragment rt (16 rows) and
 * column tile (8 columns), the fragment's element i (rows g and g + 8,
 * columns 2 t and 2 t + 1). Per block, its integer sums are scaled into
 * acc in a fixed order: acc + (a d) s_int (+ b s), or for Q6_K's two
 * scales acc + (a1 s1 + a0 s0) d. */
template <int T, int P, int WR, int WC>
__device__ static void mmq_stage(const struct mmq_smem<P, WR, WC> &sh, int bi, float acc[P][2][4][4])
{
    constexpr bool offset = T != TYPE_Q8_0 && T != TYPE_Q6_K;
    const int warp = (int)threadIdx.x % (32 * WR * WC) / 32, lane = threadIdx.x % 32, wr = warp % WR, wc = warp / WR;
    const int g = lane / 4, t4 = lane % 4, mat = lane / 8;
#pragma unroll 1 /* registers: the matrices and fragments unrolled are enough */
    for (int jb = 0; jb < MMQ_BLOCKS; jb++) {
        unsigned bf[4][2]; /* the column tiles' B fragments, from the stored Q8_1 blocks (column g's codes 4 t..) */
        float4 xds[4];     /* tile's columns 2 t, 2 t + 1: { d, s, d, s } */
#pragma unroll
        for (int tile = 0; tile < 4; tile++) {
            const unsigned *xc = (const unsigned *)&sh.raw.xraw[bi][32 * wc + 8 * tile + g][36 * jb + 4];
            bf[tile][0] = xc[t4], bf[tile][1] = xc[4 + t4]; /* 36-word columns: 32 lanes, 32 banks */
            xds[tile] = *(const float4 *)&sh.xs[jb][32 * wc + 8 * tile + 2 * t4];
        }
#pragma unroll
        for (int p = 0; p < P; p++) {
#pragma unroll
            for (int rt = 0; rt < 2; rt++) {
                const int rf = 32 * wr + 16 * rt;
                unsigned af[4];
                ldmatrix_x4<false>(af, &sh.w[p][rf + 8 * (mat % 2) + lane % 8][32 * jb + 16 * (mat / 2)]);
                const float2 sc[2] = { sh.ws[p][jb][rf + g], sh.ws[p][jb][rf + g + 8] };
                int s0[4][4], s1[4][4]; /* [tile]: the block's sums, every tile's products asked for before any is used */
#pragma unroll
                for (int tile = 0; tile < 4; tile++) {
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        s0[tile][i] = s1[tile][i] = 0;
                    if (T == TYPE_Q6_K) { /* a scale per 16 codes: two sums */
                        mma_s8_k16(s0[tile], af[0], af[1], bf[tile][0]);
                        mma_s8_k16(s1[tile], af[2], af[3], bf[tile][1]);
                    } else {
                        mma_s8_k32(s0[tile], af, bf[tile]);
                    }
                }
#pragma unroll
                for (int tile = 0; tile < 4; tile++) {
                    const float xd[2] = { xds[tile].x, xds[tile].z }, xsum[2] = { xds[tile].y, xds[tile].w };
#pragma unroll
                    for (int i = 0; i < 4; i++) { /* rows g (i < 2) and g + 8, columns 2 t + i % 2 */
                        const float2 a = sc[i / 2];
                        float &acc_i = acc[p][rt][tile][i];
                        if (T == TYPE_Q6_K)
                            acc_i = __fmaf_rn(__fmaf_rn(a.y, exact_float(s1[tile][i]), __fmul_rn(a.x, exact_float(s0[tile][i]))),
                                              xd[i % 2], acc_i);
                        else
                            acc_i = __fmaf_rn(__fmul_rn(a.x, xd[i % 2]), exact_float(s0[tile][i]), acc_i);
                        if (offset)
                            acc_i = __fmaf_rn(a.y, xsum[i % 2], acc_i);
                    }
                }
            }
        }
    }
}

/* Registers: at most 85 a thread for a single matrix (3 CTAs of 8 warps an
 * SM), 128 for a pair (2) or a split one (a CTA of 16 warps an SM).
 * KS > 1 splits the row length: the CTA's KS groups of WR x WC warps take
 * stages g, g + KS, ... each into its own sums (its own shared memory),
 * the groups in step (CTA-wide barriers); at the end group 0 adds the
 * others' sums to its own in group order. Only matrices of few rows and
 * long rows are split (cuda_mmq_splits: by rows and k, never by the
 * batch), so a column's bits still depend on neither the batch nor the
 * launch. */
template <int T, int P, int WR, int WC, int KS>
__global__ void __launch_bounds__(32 * WR * WC * KS, KS > 1 ? 1 : 16 / (WR * WC)) mmq_kernel(const struct mmq_args m)
{
    extern __shared__ __align__(16) uint8_t smem[];
    constexpr int GROUP = 32 * WR * WC; /* threads a group */
    const int g = KS > 1 ? (int)threadIdx.x / GROUP : 0; /* the thread's group */
    struct mmq_smem<P, WR, WC> &sh = ((struct mmq_smem<P, WR, WC> *)smem)[g];
    grid_begin();
    int64_t r0;
    const struct mmq_mat w = mmq_tile_matrix<P>(m, 32 * WR, &r0);
    const int64_t c0 = (int64_t)blockIdx.y * 32 * WC;
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
    /* the group's stages: g, g + KS, ...; every group runs the same turns */
    const int64_t stages = m.k / (32 * MMQ_BLOCKS), turns = (stages + KS - 1) / KS;
    if (KS == 1 || g < stages)
        mmq_fetch<T, P, 32 * WR, 32 * WC, 32 * WR * WC>(m, w, sh.raw, 0, r0, c0, (int64_t)g * MMQ_BLOCKS);
    else
        copy_commit();
    for (int64_t i = 0; i < turns; i++) {
        const int bi = (int)(i % 2);
        const int64_t st = g + i * KS, next = st + KS;
        __syncthreads(); /* the last turn's reads of the other buffer, the codes and the scales are done */
        if (next < stages)
            mmq_fetch<T, P, 32 * WR, 32 * WC, 32 * WR * WC>(m, w, sh.raw, bi ^ 1, r0, c0, next * MMQ_BLOCKS);
        else
            copy_commit(); /* an empty group: the wait below still means this turn's */
        copy_wait<1>();
        __syncthreads(); /* every thread's copies of this stage have landed */
        if (KS == 1 || st < stages)
            mmq_unpack<T, P, WR, WC>(w, sh, bi, r0, c0, st * MMQ_BLOCKS, m.nt);
        __syncthreads();
        if (KS == 1 || st < stages)
            mmq_stage<T, P, WR, WC>(sh, bi, acc);
    }
    if constexpr (KS > 1) { /* the groups' sums meet in group 0, in group order */
        static_assert(P == 1, "a pair is never split");
        float *sums = (float *)&sh; /* the group's own shared memory, its stages done: GROUP x 32 floats */
        const int lt = (int)threadIdx.x % GROUP;
        __syncthreads();
        if (g > 0)
#pragma unroll
            for (int x = 0; x < 32; x++)
                sums[x * GROUP + lt] = (&acc[0][0][0][0])[x];
        __syncthreads();
        if (g > 0)
            return;
#pragma unroll
        for (int other = 1; other < KS; other++) {
            const float *theirs = (const float *)&((struct mmq_smem<P, WR, WC> *)smem)[other];
#pragma unroll
            for (int x = 0; x < 32; x++)
                (&acc[0][0][0][0])[x] = __fadd_rn((&acc[0][0][0][0])[x], theirs[x * GROUP + threadIdx.x % GROUP]);
        }
    }
    const int warp = (int)threadIdx.x % GROUP / 32, lane = threadIdx.x % 32, wr = warp % WR, wc = warp / WR;
#pragma unroll
    for (int rt = 0; rt < 2; rt++)
#pragma unroll
        for (int ct = 0; ct < 4; ct++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                mmq_write<P>(m, w, r0 + 32 * wr + 16 * rt + lane / 4 + 8 * (i / 2), c0 + 32 * wc + 8 * ct + 2 * (lane % 4) + i % 2,
                             acc[0][rt][ct][i], acc[P - 1][rt][ct][i]);
}

/* A launch of one instantiation, its shared memory (more than the default
 * 48 KiB) asked for once per process, at its first launch: never inside a
 * capture, which begins at a graph's third run. A refusal fails the launch,
 * which cuda_launch_end reports. */
template <int T, int P, int WR, int WC, int KS>
static void launch_mmq(dim3 grid, const struct mmq_args &m, cudaStream_t s)
{
    constexpr size_t bytes = KS * sizeof(struct mmq_smem<P, WR, WC>);
    static const bool opted = (cuda_smem_opt_in((const void *)mmq_kernel<T, P, WR, WC, KS>, bytes), true);
    (void)opted;
    launch(mmq_kernel<T, P, WR, WC, KS>, grid, 32 * WR * WC * KS, bytes, s, m);
}

extern "C" int cuda_mmq_splits(int64_t rows, int64_t k) { return rows < 1024 && k / (32 * MMQ_BLOCKS) >= 16 ? 4 : 1; }

/* Q8_0's codes need no decoding, and its int8 kernel measured faster than
 * the f16 one (BENCHMARKS.md). */
extern "C" bool cuda_mmq_f16(enum tensor_type t, int64_t rows) { return rows >= 1024 && t != TYPE_Q8_0; }

/* The tile: 64 rows by 128 columns (8 warps) when that gives every SM a
 * CTA, else 64 by 64 (4 warps) for more CTAs; the tile never changes a
 * column's bits (every value's sum runs over the blocks in order). A split
 * launch (its matrices' cuda_mmq_splits, alike: matmul.cu groups them so)
 * has 64 by 64 tiles of four groups of 4 warps, whatever the batch. */
template <int T, int P>
static void launch_tiles(const struct mmq_args &m, cudaStream_t s)
{
    int64_t rows = 0;
    for (int i = 0; i < (P == 2 ? 1 : m.n_mat); i++)
        rows += (m.m[i].n + 63) / 64;
    const int64_t wide = rows * ((m.nt + 127) / 128);
    if (P == 1 && cuda_mmq_splits(m.m[0].n, m.k) == 4)
        launch_mmq<T, 1, 2, 2, 4>(dim3((unsigned)rows, (unsigned)((m.nt + 63) / 64)), m, s);
    else if (wide >= (int64_t)cuda_sm_count())
        launch_mmq<T, P, 2, 4, 1>(dim3((unsigned)rows, (unsigned)((m.nt + 127) / 128)), m, s);
    else
        launch_mmq<T, P, 2, 2, 1>(dim3((unsigned)rows, (unsigned)((m.nt + 63) / 64)), m, s);
}

struct int8_tiles {
    template <int T, int P>
    static void run(const struct mmq_args &m, cudaStream_t s) { launch_tiles<T, P>(m, s); }
};

void cuda_mmq_launch(int t, const struct mmq_args &m, bool pair, cudaStream_t s) { mmq_dispatch<int8_tiles>(t, m, pair, s); }
