/* matmul_kernel.cuh: the matmul kernel (see matmul.cu for what it
 * computes and in which order), as a template the generic build
 * instantiates with runtime row lengths (K = 0) and a per-model build's
 * generated kernels.cu with that model's (CUDA_MATMUL_INSTANCE). */
#ifndef MINFER_CUDA_MATMUL_KERNEL_CUH
#define MINFER_CUDA_MATMUL_KERNEL_CUH

#include <atomic>
#include <stdlib.h>

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
    int64_t tiles;     /* matmul_loop_kernel: the launch's tiles (4 rows each) */
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
template <int T, int NC, int K, int R = 1>
__device__ static void row_sums(const uint8_t *const w[R], const uint8_t *xq, const float *xf, int64_t kk, int nc,
                                float sum[R][NC])
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
         * groups l, l + 32, ... */
        constexpr int G = group_blocks<T>();
        const size_t col_bytes = (size_t)(k / QK8) * 36;
        for (int i = lane; i < (int)(k / (QK8 * G)); i += 32) {
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
        if (T != TYPE_F32 && T != TYPE_F16 && T != TYPE_BF16 && a.l2_first)
            bulk_copy_hinted(mine + at, src, rows * (unsigned)a.m[mi + p].row_bytes, bar, l2_evict_first());
        else
            bulk_copy(mine + at, src, rows * (unsigned)a.m[mi + p].row_bytes, bar);
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

/* The warps of a team in a loop launch of one quantized type: 2 (the 8B's
 * Q6_K down 15.3 -> 13.8 us, tg128 x1.013; 4 warps gave the same 13.8 and
 * x1.009), or MINFER_MM_TEAM (for measurements: 0 for matmul_loop_kernel,
 * or 4). */
static inline int team_warps(void)
{
    static std::atomic<long long> m{ -1 };
    const long long v = measured_setting("MINFER_MM_TEAM", 2, 0, 4, &m);
    return v == 0 || v == 4 ? (int)v : 2;
}

/* The team launch of b for rows rows, smem the loop's stages of a CTA. */
template <int T, int K, int TW, class FIX>
static void launch_team(struct mm_args b, size_t smem, cudaStream_t s)
{
    constexpr int G = group_blocks<T>();
    const int64_t trips = (b.k / (QK8 * G) + 31) / 32;
    smem += (size_t)4 * LOOP_STAGES * trips * G * 32 * sizeof(float);
    static const bool opted = (cuda_smem_opt_in((const void *)matmul_team_kernel<T, K, TW, FIX>, 200 * 1024), true);
    (void)opted;
    const size_t per_sm = cuda_sm_shared_bytes() / (smem + 1024) < 2 ? 1 : 2; /* the kernel's bound */
    const int64_t most = (int64_t)per_sm * cuda_sm_count();
    launch(matmul_team_kernel<T, K, TW, FIX>, dim3((unsigned)(most < b.tiles ? most : b.tiles)), 4 * TW * 32, smem, s, b);
}

/* The loop launch pays where one tile a CTA holds fewer than 8 CTAs an SM
 * by its stage: the 8B's Q6_K FFN down (rows of 12288, 40 KiB a CTA, 5 an
 * SM) 16.0 -> 14.4 us; the launches of smaller stages were slower as loops
 * (4096 x 4096 Q4_K 4.7 -> 5.1-7.3 us, the output matrix 126 -> 144-196;
 * minfer-gpu-bench). A CTA stage above LOOP_KIB KiB; MINFER_MM_LOOP=KIB
 * sets it for measurements (0: every staged launch). */
#define LOOP_KIB 28
static inline size_t loop_above(void)
{
    static std::atomic<long long> m{ -1 };
    return (size_t)measured_setting("MINFER_MM_LOOP", LOOP_KIB, 0, 1 << 20, &m) * 1024;
}

/* The loop launch of a (a.stage bytes a warp and stage) for rows rows,
 * where it pays (loop_above) and its stages fit 3/4 of an SM's shared
 * memory, at as many CTAs an SM as fit there: the rest is room for the
 * next launch's CTAs to enter early. Rows of one quantized type take the
 * team kernel (team_warps), two CTAs an SM. */
template <int T, int K, bool PAIR, class FIX>
static bool launch_loop(struct mm_args b, int64_t rows, cudaStream_t s)
{
    const size_t smem = (size_t)4 * LOOP_STAGES * b.stage, room = cuda_sm_shared_bytes() * 3 / 4;
    if ((size_t)4 * b.stage <= loop_above() || smem > room || smem > 200 * 1024)
        return false;
    static const bool opted = (cuda_smem_opt_in((const void *)matmul_loop_kernel<T, K, PAIR, FIX>, 200 * 1024), true);
    (void)opted;
    b.tiles = (rows + 3) / 4;
    if constexpr (!PAIR && T != TYPE_MIXED && T != TYPE_F32 && T != TYPE_F16 && T != TYPE_BF16) {
        if (team_warps() == 2) {
            launch_team<T, K, 2, FIX>(b, smem, s);
            return true;
        }
        if (team_warps() == 4) {
            launch_team<T, K, 4, FIX>(b, smem, s);
            return true;
        }
    }
    const int64_t most = (int64_t)(room / smem) * cuda_sm_count();
    launch(matmul_loop_kernel<T, K, PAIR, FIX>, dim3((unsigned)(most < b.tiles ? most : b.tiles)), 4 * 32, smem, s, b);
    return true;
}

/* Whether a row of k gives each lane of its warp at most one group of
 * blocks (row_sums): then the warp's fixed costs (its stage's wait, the
 * butterflies, the gate) outweigh its dot products, and a decode pair
 * takes two rows of gate and two of up a warp. The 0.5B's Q5_0 pair (rows
 * of 896: 28 blocks) x1.019 in tg128; the 8B's Q4_K pair (rows of 4096:
 * two groups a lane) lost (x0.94: 17.6 -> 18.3 us, fewer warps in flight). */
template <int T>
static inline bool short_rows(int64_t k)
{
    return k <= (int64_t)32 * QK8 * group_blocks<T>();
}

static inline bool even_rows(const struct mm_args &a)
{
    for (int i = 0; i < a.n_mat; i++)
        if (a.m[i].n % 2)
            return false;
    return true;
}

/* The shared memory a warp of a decode launch takes to stage its rows
 * (rw of each matrix it reads), or 0 where they are read from global
 * memory instead: before sm_90 or with MINFER_NO_STAGE=1, rows that are
 * not whole 16-byte units, or more than most bytes a CTA (48 KiB: no
 * opt-in needed). */
static inline unsigned stage_bytes(const struct mm_args &a, int rw, int warps, size_t most_cta = 48 * 1024)
{
    if (!cuda_stage_enabled())
        return 0;
    const int n = a.epi == CUDA_EPI_PAIR ? 2 : a.n_mat;
    size_t most = 0, both = 0;
    for (int i = 0; i < n; i++) {
        if (a.m[i].row_bytes % 16)
            return 0;
        most = a.m[i].row_bytes > most ? a.m[i].row_bytes : most;
        both += a.m[i].row_bytes;
    }
    const size_t per = (size_t)rw * (a.epi == CUDA_EPI_PAIR ? both : most);
    return per * (size_t)warps <= most_cta ? (unsigned)per : 0;
}

/* The CTAs an SM holds at once of kernel k launched with threads and smem
 * bytes each, asked once per smem size (memo: smem << 8 | CTAs an SM);
 * unknown (the query failed) reads as fallback, and a failed launch then
 * reports itself. */
static inline int occupancy_per_sm(void (*k)(struct mm_args), int threads, size_t smem, int fallback,
                                   std::atomic<long long> *memo)
{
    long long m = memo->load(std::memory_order_relaxed);
    if (m < 0 || (size_t)(m >> 8) != smem) {
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, threads, smem) != cudaSuccess)
            cudaGetLastError(), per_sm = fallback;
        memo->store(m = (long long)smem << 8 | per_sm, std::memory_order_relaxed);
    }
    return (int)(m & 0xff);
}

/* Whether a staged launch of ctas CTAs of 4 warps, smem bytes each, should
 * take the kernel held to 8 CTAs an SM (FULL): when it has more CTAs than
 * the SMs hold at once of the kernel as compiled (`free`; unknown: 8, as
 * compiled), and 8 fit in an SM's shared memory. Q6_K's output matrix
 * (151936 rows of 4096) went from 145 to 125 us (82% -> 96% of copy
 * bandwidth); held throughout, the 0.5B's short launches lost 3%
 * (minfer-gpu-bench, tg128 A/B). */
static inline bool full_pays(void (*free)(struct mm_args), int64_t ctas, unsigned smem, std::atomic<long long> *memo)
{
    const int per_sm = occupancy_per_sm(free, 4 * 32, smem, 8, memo);
    return per_sm < 8 && 8 * (size_t)smem <= 200 * 1024 && ctas > (int64_t)per_sm * cuda_sm_count();
}

/* Whether a decode launch's weights pass through L2 first to go
 * (l2_evict_first), on sm_90: 2, the staged rows' copies and the unstaged
 * rows' asks into L2; or MINFER_MM_EVICT (for measurements): 0 neither, 1
 * the copies alone, 3 the copies, and the asks into L2 by bulk prefetches
 * of the default policy (2's control). */
static inline int l2_first_enabled(void)
{
    static std::atomic<long long> m{ -1 };
    return cuda_stage_enabled() ? (int)measured_setting("MINFER_MM_EVICT", 2, 0, 3, &m) : 0;
}

/* A staged decode launch's pacing (stage_pace), set for the kernel k of
 * ctas CTAs, threads and smem bytes each: PACE_RATE bytes a ns, the CTAs
 * paced the occupancy's first wave (memo: occupancy_per_sm's), where
 * the launch stages PACE_MIN_MIB or more; MINFER_MM_PACE=R another rate,
 * 0 none (for measurements). Measured (tg128 A/B): 8B Q4_K_M x1.065, Q8_0
 * x1.045, the 0.5B even (only its output matrix paced). 4000 or 6000
 * B/ns gained less, a PACE_MIN_MIB of 16 (the 8B's attn_output unpaced)
 * less, every launch paced (the 0.5B's short ones) lost 3%, and 8 CTAs
 * an SM paced from their entry whatever the occupancy lost the Q8_0's
 * gain (its 34 KiB CTAs, 5 an SM: the later ones waited twice). */
#define PACE_RATE 5000
#define PACE_MIN_MIB 8
static inline void pace_set(struct mm_args *b, void (*k)(struct mm_args), unsigned ctas, int threads, size_t smem,
                            std::atomic<long long> *memo)
{
    static std::atomic<long long> rate{ -1 };
    b->pace_rate = (unsigned)measured_setting("MINFER_MM_PACE", PACE_RATE, 0, 1 << 20, &rate);
    if (!b->pace_rate || (size_t)ctas * smem < ((size_t)PACE_MIN_MIB << 20)) {
        b->pace_rate = 0;
        return;
    }
    /* unknown occupancy: none paced */
    b->pace_ctas = (unsigned)(occupancy_per_sm(k, threads, smem, 0, memo) * cuda_sm_count());
}

#define LONG_STAGE_KIB 64 /* launch_step's 2-warp CTAs' stage at most */

/* A decode step's launch (one column) of W warps, RW rows each, its
 * weights staged in shared memory where stage_bytes allows. (The pair with
 * its Q8_1 product is not: staged, its 3072 CTAs took 25.6 us, not 21.7,
 * for Q4_K; the 8B Q8_0's tg128 x0.918.) */
template <int T, int K, int W, int RW, bool PAIR, class FIX>
static void launch_step(const struct mm_args &a, int64_t rows, cudaStream_t s)
{
    struct mm_args b = a;
    b.stage = stage_bytes(a, RW, W);
    b.l2_first = l2_first_enabled();
    b.pace_rate = 0;
    static std::atomic<long long> paced4{ -1 }, paced_full{ -1 }, paced{ -1 };
    const unsigned spin = PAIR && a.spin_y ? SPIN_CTAS : 0; /* a spinning pair's quantizing CTAs come first */
    if constexpr (W == 8) { /* rows too long for 8 warps' stages (Q8_0's 16 rows of 4096: 68 KiB): 4 warps staged */
        if (!b.stage && (b.stage = stage_bytes(a, RW, 4)) != 0) {
            const auto k4 = matmul_kernel<T, 4, 1, false, K, RW, true, false, PAIR, FIX>;
            const unsigned ctas = (unsigned)((rows / RW + 3) / 4) + spin;
            pace_set(&b, k4, ctas, 4 * 32, 4 * (size_t)b.stage, &paced4);
            launch(k4, dim3(ctas), 4 * 32, 4 * (size_t)b.stage, s, b);
            return;
        }
        /* too long for 4 (the 8B Q8_0's down, rows of 12288: 104 KiB): 2
         * warps staged, opted in past 48 KiB (52 KiB, 4 CTAs an SM), rather
         * than 8 unstaged warps asking the whole matrix into L2 at once
         * (BENCHMARKS, thirty-fourth session) */
        if constexpr (RW == 2 && !PAIR)
            if (!b.stage && (b.stage = stage_bytes(a, RW, 2, LONG_STAGE_KIB * 1024)) != 0) {
                const auto k2 = matmul_kernel<T, 2, 1, false, K, RW, true, false, PAIR, FIX>;
                static const bool opted = (cuda_smem_opt_in((const void *)k2, LONG_STAGE_KIB * 1024), true);
                (void)opted;
                static std::atomic<long long> paced2{ -1 };
                const unsigned ctas = (unsigned)((rows / RW + 1) / 2);
                pace_set(&b, k2, ctas, 2 * 32, 2 * (size_t)b.stage, &paced2);
                launch(k2, dim3(ctas), 2 * 32, 2 * (size_t)b.stage, s, b);
                return;
            }
    }
    const dim3 grid((unsigned)((rows / RW + W - 1) / W) + spin);
    if constexpr (W == 4 && RW == 1) {
        if (b.stage && !spin && launch_loop<T, K, PAIR, FIX>(b, rows, s))
            return;
        static std::atomic<long long> memo{ -1 };
        if (b.stage && full_pays(matmul_kernel<T, W, 1, false, K, RW, true, false, PAIR, FIX>, grid.x - spin, W * b.stage, &memo)) {
            const auto full = matmul_kernel<T, W, 1, false, K, RW, true, true, PAIR, FIX>;
            pace_set(&b, full, grid.x, W * 32, (size_t)W * b.stage, &paced_full);
            launch(full, grid, W * 32, (size_t)W * b.stage, s, b);
            return;
        }
    }
    if (b.stage) {
        const auto staged = matmul_kernel<T, W, 1, false, K, RW, true, false, PAIR, FIX>;
        pace_set(&b, staged, grid.x, W * 32, (size_t)W * b.stage, &paced);
        launch(staged, grid, W * 32, (size_t)W * b.stage, s, b);
    } else
        launch(matmul_kernel<T, W, 1, false, K, RW, false, false, PAIR, FIX>, grid, W * 32, 0, s, b);
}

/* One launch of type T over the rows of a.m, with the row length K fixed
 * (or 0: a.k): a decode step's one column (BATCH false: the fewest
 * registers), or groups of eight columns. Q8_0 rows stream best with 8
 * warps a CTA, the rest with 4, and Q8_0 with two rows a warp sharing each
 * activation load (4096 x 4096: 54% -> 61% of copy bandwidth; Q4_K there
 * fell to 35% and Q6_K to 56%, half as many warps in flight; all measured
 * with minfer-gpu-bench). A pair with its product as Q8_1 has 4 warps. */
template <int T, int K, bool BATCH, class FIX = mm_runtime>
static void launch_t(const struct mm_args &a, int64_t rows, cudaStream_t s)
{
    constexpr int W = T == TYPE_Q8_0 ? 8 : 4;
    if constexpr (BATCH) {
        const unsigned groups = (unsigned)((a.nt + 7) / 8);
        if (a.q8_out)
            launch(matmul_kernel<T, 32, 8, true, K>, dim3((unsigned)(rows / 32), groups), 32 * 32, 0, s, a);
        else
            launch(matmul_kernel<T, 4, 8, false, K>, dim3((unsigned)((rows + 3) / 4), groups), 4 * 32, 0, s, a);
    } else {
        if constexpr (T == TYPE_Q8_0) /* two rows a warp: see above */
            if (a.epi != CUDA_EPI_PAIR && even_rows(a)) {
                launch_step<T, K, W, 2, false, FIX>(a, rows, s);
                return;
            }
        if constexpr (T != TYPE_MIXED && W == 4 && T != TYPE_F32 && T != TYPE_F16 && T != TYPE_BF16)
            if (a.epi == CUDA_EPI_PAIR && short_rows<T>(a.k) && even_rows(a)) {
                launch_step<T, K, W, 2, true, FIX>(a, rows, s);
                return;
            }
        if (a.epi == CUDA_EPI_PAIR)
            launch_step<T, K, W, 1, true, FIX>(a, rows, s);
        else
            launch_step<T, K, W, 1, false, FIX>(a, rows, s);
    }
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

/* A generated kernels.cu's decode launch ID of one model: row length K,
 * type T (TYPE_MIXED: the matrices' types differ), row sets N0..N2 of
 * types T0..T2 (cuda_kernel's typed entries). */
#define CUDA_MATMUL_TYPED(ID, K, T, N0, N1, N2, T0, T1, T2) \
    static void cuda_matmul_typed##ID(int type, const struct mm_args *a, int64_t rows, void *stream) \
    { \
        (void)type; \
        launch_t<T, K, false, mm_fixed<N0, N1, N2, T0, T1, T2>>(*a, rows, (cudaStream_t)stream); \
    }

/* A generated kernels.cu's decode matmuls for row length K (a model's k). */
#define CUDA_MATMUL_INSTANCE(K) \
    static void cuda_matmul_k##K(int type, const struct mm_args *a, int64_t rows, void *stream) \
    { \
        launch_shape<K, false>(type, *a, rows, (cudaStream_t)stream); \
    }

#endif
