/* matmul_kernel.cuh: the decode and batch matmul kernels (see matmul.cu
 * for what they compute and in which order), as templates the generic build
 * instantiates with runtime row lengths (K = 0) and a per-model build's
 * generated kernels.cu with that model's. Which of them a launch takes, and
 * its grid, stage and pacing: matmul_launch.cuh. */
#ifndef MINFER_CUDA_MATMUL_KERNEL_CUH
#define MINFER_CUDA_MATMUL_KERNEL_CUH

#include "cuda/common.cuh"
#include "cuda/kernels.h"

/* The warp's sum of v (every lane gets it), in a fixed butterfly. */
__device__ static inline float warp_sum(float v)
{
    for (int off = 16; off > 0; off >>= 1)
        v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

/* warp_sum of g in lanes 0..15 and of u in lanes 16..31, bit for bit (each
 * step adds the same two values, a + b being b + a): the first step trades
 * the half of the values the other half of the warp sums, so the two
 * butterflies take six shuffles, not ten. */
__device__ static inline float warp_sum_pair(float g, float u)
{
    const bool low = threadIdx.x % 32 < 16;
    float t = __fadd_rn(low ? g : u, __shfl_xor_sync(0xffffffffu, low ? u : g, 16));
    for (int off = 8; off > 0; off >>= 1)
        t = __fadd_rn(t, __shfl_xor_sync(0xffffffffu, t, off));
    return t;
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
    int epi;           /* CUDA_EPI_NONE, _ADD or _PAIR (with glu) */
    int glu;           /* CUDA_EPI_PAIR: enum glu_gate */
    uint8_t *q8_out;   /* CUDA_EPI_PAIR: also the product as Q8_1 (rows/32 blocks per column) */
    unsigned stage;    /* a staged launch's shared memory a warp: its rows (then the pair's up rows) */
    int l2_first;      /* l2_first_enabled's setting: 0 to 3 */
    int64_t tiles;     /* matmul_loop_kernel: the launch's tiles (4 rows each); matmul_piece_kernel's (2 rows) */
    int pieces;        /* matmul_piece_kernel: the pieces a tile's rows are asked for in, 1 to PIECES_MAX */
    /* a decode pair with q8_out, whose first SPIN_CTAS CTAs form its Q8_1
     * product as its rows come in (pair_spin): the rows go to spin_y
     * (m[0].y: SPIN_EMPTY where none is yet), the f32 product to spin_out */
    float *spin_y, *spin_out;
    /* a decode step's staged launch: its CTAs b < pace_ctas wait b stages'
     * bytes / pace_rate ns before anything else (stage_pace); 0: none */
    unsigned pace_rate, pace_ctas;
};

/* A spinning pair's CTAs that quantize (pair_spin), before those that
 * compute rows. */
#define SPIN_CTAS 8

/* A value one thread stores and another polls for, with no flag, fence or
 * atomic: one relaxed GPU-scope store into a scratch whose every bit the
 * poller set again after reading it (SPIN_EMPTY, a NaN that no arithmetic
 * gives: the GPU's own NaNs are 0x7fffffff, and a value stored with those
 * bits goes in as 0x7fffffff). */
#define SPIN_EMPTY 0xffffffffu
__device__ static inline void spin_put(float *p, float x)
{
    const unsigned bits = __float_as_uint(x) == SPIN_EMPTY ? 0x7fffffffu : __float_as_uint(x);
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(bits) : "memory");
}
__device__ static inline void spin_clear(float *p)
{
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(SPIN_EMPTY) : "memory");
}
__device__ static inline unsigned spin_get(const float *p)
{
    unsigned bits;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(bits) : "l"(p) : "memory");
    return bits;
}

/* A pair's product stored by lane 0 of its warp: with a spinning launch
 * for the spinning CTAs to poll (spin_put). */
template <bool PAIR>
__device__ static inline void product_store(const struct mm_args &a, float *y, float x)
{
    if (PAIR && a.spin_y)
        spin_put(y, x);
    else
        *y = x;
}

/* A spinning pair's quantizing CTA (blockIdx.x < SPIN_CTAS): its warps
 * take the 32-row blocks SPIN_GROUP at a time (warp w of CTA c: blocks
 * c + SPIN_CTAS w + j * step, j < SPIN_GROUP, then the next group), one
 * load a lane for each block not yet done asked for at once, so a warp
 * waits on L2 once a round, not once a block; a block whose 32 values are
 * all in gets its Q8_1 (q8_1_block: the quantize launch's bits), its f32
 * product and the sentinels back for the next launch. No ticket, fence
 * or atomic: every value is its own flag, and the CTAs that compute rows
 * only store. They cannot starve those CTAs: they hold SPIN_CTAS of the
 * GPU's places, the rest free up as row CTAs finish, and the next launch's
 * CTAs enter only once every CTA of this one has passed grid_begin. */
#define SPIN_GROUP 8
__device__ static void pair_spin(const struct mm_args &a)
{
    const int lane = threadIdx.x % 32;
    const int64_t blocks = a.m[0].n / 32, step = (int64_t)SPIN_CTAS * (blockDim.x / 32);
    for (int64_t first = blockIdx.x + (int64_t)(threadIdx.x / 32) * SPIN_CTAS; first < blocks; first += SPIN_GROUP * step) {
        unsigned todo = 0;
#pragma unroll
        for (int j = 0; j < SPIN_GROUP; j++)
            todo |= first + j * step < blocks ? 1u << j : 0u;
        while (todo) {
            unsigned bits[SPIN_GROUP];
#pragma unroll
            for (int j = 0; j < SPIN_GROUP; j++)
                if (todo >> j & 1)
                    bits[j] = spin_get(a.spin_y + (first + j * step) * 32 + lane);
#pragma unroll
            for (int j = 0; j < SPIN_GROUP; j++) {
                if (!(todo >> j & 1) || !__all_sync(0xffffffffu, bits[j] != SPIN_EMPTY))
                    continue;
                const int64_t b = first + j * step;
                const float v = __uint_as_float(bits[j]);
                q8_1_block(v, a.q8_out + (size_t)b * 36);
                a.spin_out[b * 32 + lane] = v;
                spin_clear(a.spin_y + b * 32 + lane);
                todo &= ~(1u << j);
            }
        }
    }
}

/* The blocks a lane takes at once for a quantized type T: the K-quants'
 * blocks whose codes share bytes (Q4_K and Q5_K 2, Q6_K 4), else one. */
template <int T>
__host__ __device__ constexpr int group_blocks(void)
{
    return T == TYPE_Q6_K ? 4 : T == TYPE_Q4_K || T == TYPE_Q5_K ? 2 : 1;
}

/* Group i's Q8_1 blocks of the column at xq. */
template <int T>
__device__ static inline void group_x(const uint8_t *xq, int i, struct q8_1_block x[group_blocks<T>()])
{
    constexpr int G = group_blocks<T>();
    const uint8_t *xg = xq + (size_t)i * (36 * G);
    if constexpr (G == 4)
        q8_1_quad_at(xg, x);
    else if constexpr (G == 2)
        q8_1_pair_at(xg, x);
    else
        x[0] = q8_1_at(xg);
}

/* Group i's block terms of the row at w against its blocks x (K: the row
 * length when fixed, else 0 and kk). */
template <int T, int K>
__device__ static inline void group_terms(const uint8_t *w, int64_t kk, int i, const struct q8_1_block x[group_blocks<T>()],
                                          float term[group_blocks<T>()])
{
    const int64_t k = K > 0 ? K : kk;
    if constexpr (T == TYPE_Q6_K)
        q6_k_half_terms(w, k / 256, i / 2, i % 2, x, term);
    else if constexpr (T == TYPE_Q4_K || T == TYPE_Q5_K)
        k_pair_terms<T>(w + (size_t)(i / 4) * (T == TYPE_Q4_K ? 144 : 176), i % 4, x, term);
    else
        term[0] = block_dot<T>(w, k / QK8, i, x[0]);
}

/* This lane's partial sums of R rows (w[0..R-1]: a SwiGLU pair's gate and
 * up share each activation load) against nc (at most NC) columns of x:
 * Q8_1 at xq (k/32 blocks apart) or f32 at xf (k apart). K: the row length
 * when a build fixes it (generated kernels.cu), else 0 and kk. A row's sum
 * takes its blocks in the same order whatever R, NC and K are, so every
 * launch shape gives the same bits. */
template <int T, int NC, int K, int R = 1, bool RANGE = false>
__device__ static void row_sums(const uint8_t *const w[R], const uint8_t *xq, const float *xf, int64_t kk, int nc,
                                float sum[R][NC], int from = 0, int to = 0)
{
    const int lane = threadIdx.x % 32;
    const int64_t k = K > 0 ? K : kk;
    if constexpr (T == TYPE_F32 || T == TYPE_F16 || T == TYPE_BF16) {
        for (int64_t i = lane; i < k; i += 32) {
#pragma unroll
            for (int r = 0; r < R; r++) {
                const float wv = decode_at<T>(w[r], k, i);
#pragma unroll
                for (int c = 0; c < NC; c++)
                    if (c < nc)
                        sum[r][c] = __fmaf_rn(wv, xf[(size_t)c * (size_t)k + (size_t)i], sum[r][c]);
            }
        }
    } else {
        /* a lane takes the G blocks whose codes share bytes at once (K-quants;
         * else G = 1): group i is blocks G i .. G i + G - 1, and lane l takes
         * groups l, l + 32, ...; with RANGE, groups from .. to - 1 alone,
         * for a caller that takes a row's groups in ranges (from a multiple
         * of 32), in order: the same sums) */
        constexpr int G = group_blocks<T>();
        const size_t col_bytes = (size_t)(k / QK8) * 36;
        const int groups = (int)(k / (QK8 * G)), end = RANGE && to < groups ? to : groups;
        for (int i = (RANGE ? from : 0) + lane; i < end; i += 32) {
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if (c < nc) {
                    struct q8_1_block x[G];
                    group_x<T>(xq + (size_t)c * col_bytes, i, x);
#pragma unroll
                    for (int r = 0; r < R; r++) {
                        float term[G];
                        group_terms<T, K>(w[r], kk, i, x, term);
#pragma unroll
                        for (int g = 0; g < G; g++)
                            sum[r][c] = __fadd_rn(sum[r][c], term[g]);
                    }
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
__device__ static void row_sums_of(int type, const uint8_t *w, const uint8_t *xq, const float *xf, int64_t kk, int nc,
                                   float (*sum)[NC])
{
#define ROW_SUMS(T) row_sums<T, NC, K, 1>(&w, xq, xf, kk, nc, sum)
    switch (type) {
    case TYPE_F32: ROW_SUMS(TYPE_F32); break;
    case TYPE_F16: ROW_SUMS(TYPE_F16); break;
    case TYPE_BF16: ROW_SUMS(TYPE_BF16); break;
    case TYPE_Q4_0: ROW_SUMS(TYPE_Q4_0); break;
    case TYPE_Q4_1: ROW_SUMS(TYPE_Q4_1); break;
    case TYPE_Q5_0: ROW_SUMS(TYPE_Q5_0); break;
    case TYPE_Q5_1: ROW_SUMS(TYPE_Q5_1); break;
    case TYPE_Q8_0: ROW_SUMS(TYPE_Q8_0); break;
    case TYPE_Q4_K: ROW_SUMS(TYPE_Q4_K); break;
    case TYPE_Q5_K: ROW_SUMS(TYPE_Q5_K); break;
    case TYPE_Q6_K: ROW_SUMS(TYPE_Q6_K); break;
    default: break;
    }
#undef ROW_SUMS
}

/* A launch's row sets and their types: read from mm_args at run time
 * (mm_runtime), or fixed at compile time by a per-model build's typed
 * entries (mm_fixed; N 0 and T -1: no such set). A pair's one row set is
 * the gate's, its types the gate's and the up's. */
struct mm_runtime {
    static constexpr bool fixed = false;
    static constexpr int64_t n0 = 0, n1 = 0, n2 = 0;
    static constexpr int t0 = -1, t1 = -1, t2 = -1;
};
template <int64_t N0, int64_t N1, int64_t N2, int T0, int T1, int T2>
struct mm_fixed {
    static constexpr bool fixed = true;
    static constexpr int64_t n0 = N0, n1 = N1, n2 = N2;
    static constexpr int t0 = T0, t1 = T1, t2 = T2;
};

template <class FIX>
__device__ static inline int sets_of(const struct mm_args &a)
{
    if constexpr (FIX::fixed)
        return FIX::n1 == 0 ? 1 : FIX::n2 == 0 ? 2 : 3;
    return a.n_mat;
}

template <class FIX>
__device__ static inline int64_t rows_of(const struct mm_args &a, int i)
{
    if constexpr (FIX::fixed)
        return i == 0 ? FIX::n0 : i == 1 ? FIX::n1 : FIX::n2;
    return a.m[i].n;
}

/* row_sums of type TT, where the launch has such a matrix (TT >= 0). */
template <int TT, int NC, int K>
__device__ static inline void row_sums_if(const uint8_t *w, const uint8_t *xq, const float *xf, int64_t kk, int nc,
                                          float (*sum)[NC])
{
    if constexpr (TT >= 0)
        row_sums<TT, NC, K, 1>(&w, xq, xf, kk, nc, sum);
}

/* Whether the launch is a gated pair: always for a PAIR kernel, so that
 * its branches are decided at compile time. */
template <bool PAIR>
__device__ static inline bool is_pair(const struct mm_args &a)
{
    return PAIR || a.epi == CUDA_EPI_PAIR;
}

/* Row r of the launch's row sets, in order, as row *rr of set *mi; false
 * past the last set. (A pair's one set is the gate's.) */
template <class FIX, bool PAIR = false>
__device__ static inline bool find_row(const struct mm_args &a, int64_t r, int *mi, int64_t *rr)
{
    if constexpr (PAIR) {
        *mi = 0, *rr = r;
        return r < rows_of<FIX>(a, 0);
    }
    int m = 0;
    while (m < sets_of<FIX>(a) && r >= rows_of<FIX>(a, m))
        r -= rows_of<FIX>(a, m), m++;
    *mi = m, *rr = r;
    return m < sets_of<FIX>(a);
}

/* One thread: asks the TMA unit for the n bytes at src into dst,
 * completing bar's next phase, with l2_evict_first where a.l2_first says
 * so for rows of a quantized type T (see stage_ask). */
template <int T>
__device__ static inline void stage_copy(const struct mm_args &a, uint8_t *dst, const uint8_t *src, unsigned n, uint64_t *bar)
{
    if (T != TYPE_F32 && T != TYPE_F16 && T != TYPE_BF16 && a.l2_first)
        bulk_copy_hinted(dst, src, n, bar, l2_evict_first());
    else
        bulk_copy(dst, src, n, bar);
}

/* One thread: asks the TMA unit for the RW rows from r of set mi (and
 * then the pair's up rows) into mine, completing bar's next phase; rows of
 * a quantized type T (or TYPE_MIXED) with l2_evict_first where a.l2_first
 * says so. (Not F32, F16 or BF16 rows: with the branch, the 0.5B F16
 * model's tg128 fell 1283 -> 1172, the policy on or off, its loop
 * kernel's registers 39 -> 32; without it, 1284.) */
template <int T, int RW, bool PAIR>
__device__ static inline void stage_ask(const struct mm_args &a, int mi, int64_t r, uint8_t *mine, uint64_t *bar)
{
    const int n_w = is_pair<PAIR>(a) ? 2 : 1; /* matrices a warp reads: the pair's gate and up */
    const unsigned rows = (unsigned)(RW < a.m[mi].n - r ? RW : a.m[mi].n - r);
    unsigned at = 0;
    bulk_expect(bar, rows * (unsigned)(a.m[mi].row_bytes + (n_w == 2 ? a.m[mi + 1].row_bytes : 0)));
    for (int p = 0; p < n_w; at += RW * (unsigned)a.m[mi + p].row_bytes, p++) {
        const uint8_t *src = a.m[mi + p].w + (size_t)r * a.m[mi + p].row_bytes;
        stage_copy<T>(a, mine + at, src, rows * (unsigned)a.m[mi + p].row_bytes, bar);
    }
}

/* A staged decode launch's CTA b < pace_ctas (those the SMs hold at
 * once), before it asks for its rows or passes its grid dependency wait
 * (so before it lets the next launch in), waits b * bytes / pace_rate ns
 * from its entry (bytes: its stage): the first wave asks at about the
 * DRAM's rate rather than all at once, so a dependency's own loads wait
 * behind a short queue (pace_set; BENCHMARKS, twenty-eighth and
 * twenty-ninth sessions). */
__device__ static inline void stage_pace(const struct mm_args &a, size_t bytes)
{
    if (!a.pace_rate || blockIdx.x >= a.pace_ctas || gridDim.y > 1)
        return;
    const unsigned long long delay = (unsigned long long)blockIdx.x * bytes / a.pace_rate;
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(32);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < delay);
}

/* The warp's RW rows from r of set mi against columns c0.. (nc of them;
 * xq and xf at column c0): the weights at w0 (staged, or in global
 * memory), the pair's up rows at up; each row's sum, plus its bias, plus
 * the residual (the CPU's order), or gated by the pair's up product,
 * stored by lane 0; v[c]: the last row's result for column c. */
template <int T, int NC, int K, int RW, bool Q8, bool PAIR, class FIX>
__device__ static inline void rows_out(const struct mm_args &a, int mi, int64_t r, const uint8_t *w0, const uint8_t *up,
                                       const uint8_t *xq, const float *xf, int64_t c0, int nc, float v[NC])
{
    const struct mm_mat &m = a.m[mi];
    const int lane = threadIdx.x % 32;
    constexpr int NR = PAIR && RW == 2 ? 4 : 2; /* a pair's two rows of gate, then its two of up */
    float sums[NR][NC];
    for (int q = 0; q < NR; q++)
        for (int c = 0; c < NC; c++)
            sums[q][c] = 0;
    const uint8_t *rows[NR] = { w0, is_pair<PAIR>(a) ? up : RW == 2 ? w0 + m.row_bytes : nullptr };
    if constexpr (NR == 4)
        rows[1] = w0 + m.row_bytes, rows[2] = up, rows[3] = up + a.m[1].row_bytes;
    if constexpr (T == TYPE_MIXED && FIX::fixed) { /* each matrix's type a compile-time constant */
        if (is_pair<PAIR>(a)) {
            row_sums_if<FIX::t0, NC, K>(rows[0], xq, xf, a.k, nc, &sums[0]);
            row_sums_if<FIX::t1, NC, K>(rows[1], xq, xf, a.k, nc, &sums[1]);
        } else if (mi == 0) {
            row_sums_if<FIX::t0, NC, K>(rows[0], xq, xf, a.k, nc, &sums[0]);
        } else if (mi == 1) {
            row_sums_if<FIX::t1, NC, K>(rows[0], xq, xf, a.k, nc, &sums[0]);
        } else {
            row_sums_if<FIX::t2, NC, K>(rows[0], xq, xf, a.k, nc, &sums[0]);
        }
    } else if constexpr (T == TYPE_MIXED) {
        row_sums_of<NC, K>(m.type, rows[0], xq, xf, a.k, nc, &sums[0]);
        if (is_pair<PAIR>(a))
            row_sums_of<NC, K>(a.m[1].type, rows[1], xq, xf, a.k, nc, &sums[1]);
    } else if constexpr (NR == 4) {
        row_sums<T, NC, K, 4>(rows, xq, xf, a.k, nc, sums);
    } else if constexpr (Q8 || RW == 2 || PAIR) { /* a pair's gate and up rows, or a warp's two rows, share each activation load */
        row_sums<T, NC, K, 2>(rows, xq, xf, a.k, nc, sums);
    } else {
        row_sums<T, NC, K, 1>(rows, xq, xf, a.k, nc, sums);
        if (is_pair<PAIR>(a))
            row_sums<T, NC, K, 1>(rows + 1, xq, xf, a.k, nc, sums + 1);
    }
#pragma unroll
    for (int rr = 0; rr < RW; rr++) {
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (c < nc) {
                /* the product, plus the bias, plus the residual: the CPU's order
                 * (a gated pair: lane 0's x is right, its gate's sum and lane 16's up) */
                const bool gated = (RW == 1 || NR == 4) && is_pair<PAIR>(a);
                const float both = gated ? warp_sum_pair(sums[rr][c], sums[NR == 4 ? 2 + rr : 1][c]) : 0.0f;
                float x = gated ? both : warp_sum(sums[rr][c]);
                if (m.bias)
                    x = __fadd_rn(x, m.bias[r + rr]);
                const size_t at = (size_t)(c0 + c) * (size_t)m.n + (size_t)(r + rr);
                if (!PAIR && a.epi == CUDA_EPI_ADD)
                    x = __fadd_rn(x, a.res[at]);
                if (gated)
                    x = __fmul_rn(a.glu == GLU_GELU ? gelu(x) : silu(x), __shfl_sync(0xffffffffu, both, 16));
                v[c] = x;
                if (lane == 0)
                    product_store<PAIR>(a, &m.y[at], x);
            }
        }
    }
}

/* WARPS warps a CTA, RW output rows each (two sharing each activation
 * load, where every matrix has an even number of rows), every matrix of the launch of
 * type T (or each of its own, TYPE_MIXED); grid.y: groups of NC columns.
 * With Q8 (a batch's SwiGLU product that the next matmul reads) the
 * products also go out as Q8_1 blocks of 32 rows, each 32-warp CTA
 * quantizing its own (a decode pair's: its first CTAs, pair_spin, so no
 * CTA is held to 32 registers a thread to fit 32 warps). With STAGE (sm_90), each
 * warp's weights come into shared memory by one bulk copy (the TMA unit),
 * asked for before the grid dependency wait, so no register holds a load
 * in flight. At least one CTA an SM:
 * the compiler may then give a lane the registers to have all of a
 * group's loads in flight (held to fewer, Q4_K streamed at 37% of copy
 * bandwidth instead of 46%). FULL (staged launches of more CTAs than the
 * SMs hold at once; 4 warps): registers held to 64 a thread, so that 8
 * CTAs fit an SM (Q6_K's and the mixed launch's 89 held 5). PAIR (a
 * decode step's SwiGLU pair, its product f32, or also Q8_1 by pair_spin):
 * the gate and up rows share each activation load, as with Q8 (a kernel
 * of its own: sharing takes registers that the other launches would pay
 * in occupancy). */
template <int T, int WARPS, int NC, bool Q8, int K, int RW = 1, bool STAGE = false, bool FULL = false, bool PAIR = false,
          class FIX = mm_runtime>
__global__ void __launch_bounds__(WARPS * 32, FULL ? 8 : 1) matmul_kernel(const struct mm_args a)
{
    __shared__ float outs[Q8 ? WARPS * NC : 1];
    __shared__ uint64_t staged_bar[STAGE ? WARPS : 1];
    extern __shared__ __align__(16) uint8_t staged[]; /* STAGE: a.stage bytes a warp */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t c0 = (int64_t)blockIdx.y * NC;
    const int nc = a.nt - c0 < NC ? (int)(a.nt - c0) : NC;
    const int spin = PAIR && a.spin_y ? SPIN_CTAS : 0;
    if (PAIR && (int)blockIdx.x < spin) {
        grid_begin();
        pair_spin(a);
        return;
    }
    int mi;
    int64_t r;
    const bool live = find_row<FIX, PAIR>(a, ((int64_t)blockIdx.x - spin) * WARPS * RW + (int64_t)warp * RW, &mi, &r);
    uint8_t *mine = staged + (size_t)warp * a.stage;
    if (STAGE && NC == 1)
        stage_pace(a, (size_t)WARPS * a.stage);
    if (STAGE && live && lane == 0) { /* the weights are read-only: in flight while the kernel before still runs */
        bulk_init(&staged_bar[warp]);
        stage_ask<T, RW, PAIR>(a, mi, r, mine, &staged_bar[warp]);
    } else if (!STAGE && live && blockIdx.y == 0) {
        for (int p = 0; p < (is_pair<PAIR>(a) ? 2 : 1); p++) {
            const uint8_t *src = a.m[mi + p].w + (size_t)r * a.m[mi + p].row_bytes;
            const size_t n = (size_t)(RW < a.m[mi].n - r ? RW : a.m[mi].n - r) * a.m[mi + p].row_bytes;
            if (a.l2_first < 2 || n % 16 || (uintptr_t)src % 16)
                prefetch_l2(src, n);
            else if (lane == 0)
                bulk_prefetch_l2(src, (unsigned)n, a.l2_first == 2 ? l2_evict_first() : l2_evict_first<false>());
        }
    }
    grid_begin();
    const int64_t k = K > 0 ? K : a.k;
    const uint8_t *xq = a.xq + (size_t)c0 * (size_t)(k / QK8) * 36;
    const float *xf = a.xf + (size_t)c0 * (size_t)k;
    float v[NC];
    if (live) {
        const struct mm_mat &m = a.m[mi];
        if (STAGE) {
            __syncwarp(); /* lane 0 armed the barrier */
            bulk_wait(&staged_bar[warp]);
            timeline_mark(TIMELINE_IN);
        }
        const uint8_t *const w0 = STAGE ? mine : m.w + (size_t)r * m.row_bytes;
        const uint8_t *const up = !is_pair<PAIR>(a) ? nullptr
                                  : STAGE              ? mine + RW * m.row_bytes
                                                       : a.m[1].w + (size_t)r * a.m[1].row_bytes;
        rows_out<T, NC, K, RW, Q8, PAIR, FIX>(a, mi, r, w0, up, xq, xf, c0, nc, v);
    }
    timeline_mark(TIMELINE_DONE);
    static_assert(!Q8 || WARPS == 32, "a Q8_1 product in the kernel: a batch's 32-warp CTAs (a decode pair's: pair_spin)");
    if constexpr (Q8) { /* the CTA's 32 rows are one block */
        if (lane == 0)
            for (int c = 0; c < NC; c++)
                outs[warp * NC + c] = live && c < nc ? v[c] : 0.0f;
        __syncthreads();
        if (warp < nc) { /* warp c quantizes column c's 32 rows */
            const size_t out_bytes = (size_t)(a.m[0].n / 32) * 36;
            q8_1_block(outs[lane * NC + warp], a.q8_out + (size_t)(c0 + warp) * out_bytes + (size_t)blockIdx.x * 36);
        }
    }
}

/* A decode step's staged launch as a loop (sm_90): each CTA of 4 warps
 * takes tiles (4 rows, a row a warp) blockIdx.x, + gridDim.x, ... and
 * each warp keeps LOOP_STAGES of its rows in flight, every one asked for
 * as soon as its stage is free (the first ones before the grid dependency
 * wait). Why: a CTA of one tile asks for nothing from its exit to its
 * successor's entry, and where a stage is large few such CTAs fit an SM
 * (the 8B's Q6_K down: 40 KiB, 5); a fixed set of CTAs asks continuously
 * (launch_loop says where it pays). Each row's sum is rows_out's, as in
 * matmul_kernel: the same bits. */
#define LOOP_STAGES 2
template <int T, int K, bool PAIR, class FIX>
__global__ void __launch_bounds__(4 * 32) matmul_loop_kernel(const struct mm_args a)
{
    __shared__ uint64_t bar[4][LOOP_STAGES];
    extern __shared__ __align__(16) uint8_t staged[]; /* a.stage bytes a warp and stage */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint8_t *const mine = staged + (size_t)warp * LOOP_STAGES * a.stage;
    int mi;
    int64_t r;
    if (lane == 0) {
        for (int u = 0; u < LOOP_STAGES; u++) {
            bulk_init(&bar[warp][u]);
            const int64_t t = blockIdx.x + (int64_t)u * gridDim.x;
            if (t < a.tiles && find_row<FIX, PAIR>(a, t * 4 + warp, &mi, &r))
                stage_ask<T, 1, PAIR>(a, mi, r, mine + (size_t)u * a.stage, &bar[warp][u]);
        }
    }
    grid_begin();
    __syncwarp(); /* lane 0 armed the barriers */
    for (int64_t i = 0, t = blockIdx.x; t < a.tiles && find_row<FIX, PAIR>(a, t * 4 + warp, &mi, &r); i++, t += gridDim.x) {
        const int u = (int)(i % LOOP_STAGES);
        uint8_t *const w0 = mine + (size_t)u * a.stage;
        float v[1];
        bulk_wait_phase(&bar[warp][u], (unsigned)(i / LOOP_STAGES) & 1);
        if (i == 0)
            timeline_mark(TIMELINE_IN);
        rows_out<T, 1, K, 1, false, PAIR, FIX>(a, mi, r, w0, is_pair<PAIR>(a) ? w0 + a.m[mi].row_bytes : nullptr, a.xq, a.xf,
                                         0, 1, v);
        __syncwarp(); /* every lane has read the stage */
        const int64_t next = t + (int64_t)LOOP_STAGES * gridDim.x;
        int mn;
        int64_t rn;
        if (lane == 0 && next < a.tiles && find_row<FIX, PAIR>(a, next * 4 + warp, &mn, &rn)) {
            bulk_reuse_fence();
            stage_ask<T, 1, PAIR>(a, mn, rn, w0, &bar[warp][u]);
        }
    }
    timeline_mark(TIMELINE_DONE);
}

/* matmul_loop_kernel with each row taken by a team of TW warps (one
 * quantized type, no pair): a row's trips (groups 32 t .. 32 t + 31, lane
 * l's group 32 t + l) go to the team's warps in turn, each warp's terms
 * into shared memory, and the team's first warp adds every lane's terms in
 * row_sums' order and finishes the row as rows_out does: the same bits,
 * with TW times the warps an SM that the long rows' stages allow (the 8B's
 * Q6_K down: 8 warps an SM, 0.35 of them eligible a cycle). */
template <int T, int K, int TW, class FIX>
__global__ void __launch_bounds__(4 * TW * 32, 2) matmul_team_kernel(const struct mm_args a)
{
    constexpr int G = group_blocks<T>();
    __shared__ uint64_t bar[4][LOOP_STAGES];
    extern __shared__ __align__(16) uint8_t staged[]; /* a.stage bytes a team and stage, then the terms */
    const int warp = threadIdx.x / 32 % TW, team = threadIdx.x / 32 / TW, lane = threadIdx.x % 32;
    const int64_t k = K > 0 ? K : a.k;
    const int groups = (int)(k / (QK8 * G)), trips = (groups + 31) / 32;
    uint8_t *const mine = staged + (size_t)team * LOOP_STAGES * a.stage;
    float *const terms = (float *)(staged + (size_t)4 * LOOP_STAGES * a.stage) + (size_t)team * LOOP_STAGES * trips * G * 32;
    int mi;
    int64_t r;
    if (warp == 0 && lane == 0) {
        for (int u = 0; u < LOOP_STAGES; u++) {
            bulk_init(&bar[team][u]);
            const int64_t t = blockIdx.x + (int64_t)u * gridDim.x;
            if (t < a.tiles && find_row<FIX>(a, t * 4 + team, &mi, &r))
                stage_ask<T, 1, false>(a, mi, r, mine + (size_t)u * a.stage, &bar[team][u]);
        }
    }
    grid_begin();
    __syncthreads(); /* the barriers are armed */
    for (int64_t i = 0, t = blockIdx.x; t < a.tiles && find_row<FIX>(a, t * 4 + team, &mi, &r); i++, t += gridDim.x) {
        const int u = (int)(i % LOOP_STAGES);
        uint8_t *const w0 = mine + (size_t)u * a.stage;
        float *const tu = terms + (size_t)u * trips * G * 32;
        bulk_wait_phase(&bar[team][u], (unsigned)(i / LOOP_STAGES) & 1);
        for (int trip = (warp + TW - 1) % TW; trip < trips; trip += TW) { /* the first warp takes the fewest */
            const int g = trip * 32 + lane;
            if (g < groups) {
                struct q8_1_block x[G];
                float term[G];
                group_x<T>(a.xq, g, x);
                group_terms<T, K>(w0, a.k, g, x, term);
#pragma unroll
                for (int q = 0; q < G; q++)
                    tu[(trip * G + q) * 32 + lane] = term[q];
            }
        }
        asm volatile("bar.sync %0, %1;" ::"r"(1 + team), "r"(TW * 32) : "memory"); /* the terms are in, the stage read */
        const int64_t next = t + (int64_t)LOOP_STAGES * gridDim.x;
        int mn;
        int64_t rn;
        if (warp == 0 && lane == 0 && next < a.tiles && find_row<FIX>(a, next * 4 + team, &mn, &rn)) {
            bulk_reuse_fence();
            stage_ask<T, 1, false>(a, mn, rn, w0, &bar[team][u]);
        }
        if (warp == 0) {
            float sum = 0.0f;
            for (int trip = 0; trip < trips; trip++)
                if (trip * 32 + lane < groups)
#pragma unroll
                    for (int q = 0; q < G; q++)
                        sum = __fadd_rn(sum, tu[(trip * G + q) * 32 + lane]);
            const struct mm_mat &m = a.m[mi];
            float x = warp_sum(sum);
            if (m.bias)
                x = __fadd_rn(x, m.bias[r]);
            if (a.epi == CUDA_EPI_ADD)
                x = __fadd_rn(x, a.res[r]);
            if (lane == 0)
                m.y[r] = x;
        }
    }
}

/* A decode step's launch of long rows of a planar type of one-block groups
 * (the 8B Q8_0's down, rows of 12288: 13 KiB), persistent: CTAs of two
 * warps, as many as the SMs hold at once, warp w of CTA c taking tiles of
 * two rows t = 2 c + w, t + 2 gridDim.x, ... Each warp's stage holds its
 * tile's two rows as stored, asked for in a.pieces pieces of the row's trips
 * (32 groups), a barrier each; once the warp has read piece p, it asks for
 * piece p of its next tile into the same place. Why: a launch of one tile
 * a warp (form 5, 1024 CTAs) asks for its second wave's rows only as its
 * first wave's CTAs exit. Measured (tg128 8B Q8_0, H200): one piece
 * x1.012, the default; the pieces, meant to keep rows coming during a
 * tile's compute, lose (4 x0.954, 8 x0.846: BENCHMARKS, forty-second
 * session). A lane's sum takes the pieces' groups in order: row_sums'
 * bits. */
#define PIECES_MAX 8

/* The first group of piece p of n of a row of trips trips (32 groups
 * each): pieces take whole trips. */
__device__ static inline int piece_start(int trips, int p, int n) { return 32 * (trips * p / n); }

/* Piece p's bytes (of n) of plane f in the stored row at row, of nb
 * blocks of T (row_bytes in all): [row + *at, row + *at + return).
 * Boundaries are whole trips (32 blocks), so 16-byte units for Q8_0's
 * planes; the last piece of the last plane takes the row's padding. */
template <int T>
__device__ static inline unsigned piece_span(const uint8_t *row, int64_t nb, size_t row_bytes, int p, int n, int f,
                                             size_t *at)
{
    const int trips = (int)((nb + 31) / 32);
    const int64_t b0 = piece_start(trips, p, n), b1 = p == n - 1 ? nb : piece_start(trips, p + 1, n);
    *at = (size_t)(field<T>(row, nb, b0, f) - row);
    const size_t end = p == n - 1 && f == cuda_planes_of((enum tensor_type)T).n - 1 ? row_bytes
                                                                                      : (size_t)(field<T>(row, nb, b1, f) - row);
    return (unsigned)(end - *at);
}

/* Lane 0: asks for piece p of rows r, r + 1 of set mi into mine. */
template <int T>
__device__ static inline void piece_ask(const struct mm_args &a, int mi, int64_t r, int64_t nb, int p, uint8_t *mine,
                                        uint64_t *bar)
{
    const struct mm_mat &m = a.m[mi];
    const int planes = cuda_planes_of((enum tensor_type)T).n;
    unsigned bytes = 0;
    size_t at;
    for (int f = 0; f < planes; f++)
        bytes += 2 * piece_span<T>(m.w, nb, m.row_bytes, p, a.pieces, f, &at);
    bulk_expect(bar, bytes);
    for (int rr = 0; rr < 2; rr++)
        for (int f = 0; f < planes; f++) {
            const unsigned n = piece_span<T>(m.w, nb, m.row_bytes, p, a.pieces, f, &at);
            uint8_t *dst = mine + (size_t)rr * m.row_bytes + at;
            const uint8_t *src = m.w + (size_t)(r + rr) * m.row_bytes + at;
            if (n == 0)
                continue;
            stage_copy<T>(a, dst, src, n, bar);
        }
}

/* Rows r and r + 1 of m from a warp's lane sums, as rows_out finishes
 * them for one column: the warp's sum, its bias, the residual; stored by
 * lane 0. */
__device__ static inline void two_rows_out(const struct mm_args &a, const struct mm_mat &m, int64_t r, const float sums[2][1])
{
#pragma unroll
    for (int rr = 0; rr < 2; rr++) {
        float x = warp_sum(sums[rr][0]);
        if (m.bias)
            x = __fadd_rn(x, m.bias[r + rr]);
        if (a.epi == CUDA_EPI_ADD)
            x = __fadd_rn(x, a.res[r + rr]);
        if (threadIdx.x % 32 == 0)
            m.y[r + rr] = x;
    }
}

#ifdef MINFER_PIECE_PRELOAD
/* A measuring build's sums for the piece kernel's Q8_0 tiles: a lane
 * loads its next MINFER_PIECE_PRELOAD groups' activation blocks (global)
 * before it forms any of their terms (block_dot's, whose shared loads of
 * the codes the unrolled body leaves free to go early too), then adds the
 * terms in order: row_sums' bits. Why: on the H200 the down's tile takes
 * 3.4 us of work, ~290 ns a trip whatever its bytes, as if each trip
 * waited out its loads in turn (BENCHMARKS, forty-third session); the
 * H100 A/B of an activation preload in every Q8_0 launch (forty-second)
 * lost by the other launches' registers, and the H200's down was never
 * measured with one. */
template <int K>
__device__ static inline void piece_sums_ahead(const uint8_t *const rows[2], const uint8_t *xq, int64_t kk, float sums[2][1],
                                               int from, int to)
{
    constexpr int N = MINFER_PIECE_PRELOAD;
    const int64_t nb = (K > 0 ? K : kk) / QK8;
    const int end = to < (int)nb ? to : (int)nb;
    for (int i0 = from + (int)(threadIdx.x % 32); i0 < end; i0 += 32 * N) {
        struct q8_1_block x[N];
#pragma unroll
        for (int j = 0; j < N; j++) /* past the end: group i0's block again, its terms unused */
            x[j] = q8_1_at(xq + (size_t)(i0 + 32 * j < end ? i0 + 32 * j : i0) * 36);
#pragma unroll
        for (int j = 0; j < N; j++)
            if (i0 + 32 * j < end)
#pragma unroll
                for (int r = 0; r < 2; r++)
                    sums[r][0] = __fadd_rn(sums[r][0], block_dot<TYPE_Q8_0>(rows[r], nb, i0 + 32 * j, x[j]));
    }
}
#endif

template <int T, int K, class FIX>
__global__ void __launch_bounds__(2 * 32) matmul_piece_kernel(const struct mm_args a)
{
    __shared__ uint64_t bar[2][PIECES_MAX];
    extern __shared__ __align__(16) uint8_t staged[]; /* a.stage bytes a warp: its tile's two rows */
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint8_t *const mine = staged + (size_t)warp * a.stage;
    const int64_t k = K > 0 ? K : a.k, nb = k / QK8, tiles = a.tiles, step = 2 * (int64_t)gridDim.x;
    const int trips = (int)((nb + 31) / 32);
    int mi;
    int64_t r;
    stage_pace(a, 2 * (size_t)a.stage);
    const int64_t t0 = 2 * (int64_t)blockIdx.x + warp;
    if (lane == 0) {
        for (int p = 0; p < a.pieces; p++)
            bulk_init(&bar[warp][p]);
        if (t0 < tiles && find_row<FIX>(a, 2 * t0, &mi, &r))
            for (int p = 0; p < a.pieces; p++)
                piece_ask<T>(a, mi, r, nb, p, mine, &bar[warp][p]);
    }
    grid_begin();
    __syncwarp(); /* lane 0 armed the barriers */
    for (int64_t i = 0, t = t0; t < tiles && find_row<FIX>(a, 2 * t, &mi, &r); i++, t += step) {
        const struct mm_mat &m = a.m[mi];
        const uint8_t *const rows[2] = { mine, mine + m.row_bytes };
        float sums[2][1] = { { 0.0f }, { 0.0f } };
        int mn = 0;
        int64_t rn = 0;
        const bool more = t + step < tiles && find_row<FIX>(a, 2 * (t + step), &mn, &rn);
        for (int p = 0; p < a.pieces; p++) {
            bulk_wait_phase(&bar[warp][p], (unsigned)i & 1);
            if (i == 0 && p == 0)
                timeline_mark(TIMELINE_IN);
#ifdef MINFER_PIECE_PRELOAD
            if constexpr (T == TYPE_Q8_0)
                piece_sums_ahead<K>(rows, a.xq, a.k, sums, piece_start(trips, p, a.pieces),
                                    p == a.pieces - 1 ? 1 << 30 : piece_start(trips, p + 1, a.pieces));
            else
#endif
            row_sums<T, 1, K, 2, true>(rows, a.xq, a.xf, a.k, 1, sums, piece_start(trips, p, a.pieces),
                                       p == a.pieces - 1 ? 1 << 30 : piece_start(trips, p + 1, a.pieces));
            __syncwarp(); /* every lane has read the piece */
            if (lane == 0 && more) {
                bulk_reuse_fence();
                piece_ask<T>(a, mn, rn, nb, p, mine, &bar[warp][p]);
            }
        }
        two_rows_out(a, m, r, sums);
        if (i == 0) /* a measuring build's work: the first tile's sums alone, not the next tile's wait */
            timeline_mark(TIMELINE_DONE);
    }
}

#endif
