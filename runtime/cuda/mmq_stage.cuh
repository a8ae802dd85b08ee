/* mmq_stage.cuh: what the prompt's tensor-core matmuls (mmq.cu on int8,
 * mmq_f16.cu on f16) share: the weight types they read and the dispatch on
 * them; a stage of four 32-element blocks of each row (k % 128 == 0),
 * copied raw from the stored weights and Q8_1 columns into shared memory
 * by cp.async, and each row's blocks decoded from there into codes with
 * their scales; the CTA's matrix; and the write of a finished value (bias,
 * residual, a pair's gate). */
#ifndef MINFER_CUDA_MMQ_STAGE_CUH
#define MINFER_CUDA_MMQ_STAGE_CUH

#include "cuda/mmq.cuh"
#include "graph_ops.h"

#define MMQ_BLOCKS 4 /* 32-element blocks a stage */

/* The weight types both kernels read: X(T) for each. */
#define MMQ_TYPES(X) X(TYPE_Q4_0) X(TYPE_Q4_1) X(TYPE_Q5_0) X(TYPE_Q5_1) X(TYPE_Q8_0) X(TYPE_Q4_K) X(TYPE_Q5_K) X(TYPE_Q6_K)

/* L::run<T, P>(m, s) for the runtime type t (one of MMQ_TYPES) and P = 2
 * for a pair, else 1. */
template <class L>
static void mmq_dispatch(int t, const struct mmq_args &m, bool pair, cudaStream_t s)
{
    switch (t) {
#define MMQ_CASE(T) \
    case T: pair ? L::template run<T, 2>(m, s) : L::template run<T, 1>(m, s); break;
        MMQ_TYPES(MMQ_CASE)
#undef MMQ_CASE
    default: break;
    }
}

/* ---- a stage's raw bytes: copied by cp.async, decoded from shared memory ----
 * A stage is blocks j0..j0 + 3 of a row (j0 a multiple of 4: rows are
 * whole stages, k % 128 == 0). Its bytes, field by field, are copied from
 * the stored row (weight_layout.h) into MMQ_RAW bytes of shared memory:
 *   Q4_0 [qs 64][d 8]   Q4_1 [qs 64][dm 16]   Q5_0 [qs 64][qh 16][d 8]
 *   Q5_1 [qs 64][qh 16][dm 16]   Q8_0 [qs 128][d 8]
 *   Q4_K [d, dmin, scales 16][qs: the stage's half, 64]
 *   Q5_K [d, dmin, scales 16][qh 32][qs half 64]
 *   Q6_K [ql half 64][qh half 32][scales half 8][the word holding d 4]
 * (K-quants: a stage is half a superblock). Every piece is a 16-, 8- or
 * 4-byte copy from an address so aligned. */
#define MMQ_RAW 144 /* bytes a row's raw stage takes in shared memory (at most 136) */

struct mmq_chunk {
    int dst, size;   /* in the raw stage */
    int64_t src;     /* in the stored row */
};

/* Chunk c of the stage from block j0 of a row of type T (nb of T's
 * blocks); size 0 past the last. */
template <int T>
__device__ static inline struct mmq_chunk mmq_chunk_of(int c, int64_t nb, int64_t j0)
{
    const int64_t sb = j0 / 8, h = j0 / 4 % 2;
    switch (T) {
    case TYPE_Q4_0: return c == 0 ? mmq_chunk{ 0, 64, 16 * j0 } : c == 1 ? mmq_chunk{ 64, 8, 16 * nb + 2 * j0 } : mmq_chunk{ 0, 0, 0 };
    case TYPE_Q4_1: return c == 0 ? mmq_chunk{ 0, 64, 16 * j0 } : c == 1 ? mmq_chunk{ 64, 16, 16 * nb + 4 * j0 } : mmq_chunk{ 0, 0, 0 };
    case TYPE_Q5_0:
        return c == 0 ? mmq_chunk{ 0, 64, 16 * j0 } : c == 1 ? mmq_chunk{ 64, 16, 16 * nb + 4 * j0 }
             : c == 2 ? mmq_chunk{ 80, 8, 20 * nb + 2 * j0 } : mmq_chunk{ 0, 0, 0 };
    case TYPE_Q5_1:
        return c == 0 ? mmq_chunk{ 0, 64, 16 * j0 } : c == 1 ? mmq_chunk{ 64, 16, 16 * nb + 4 * j0 }
             : c == 2 ? mmq_chunk{ 80, 16, 20 * nb + 4 * j0 } : mmq_chunk{ 0, 0, 0 };
    case TYPE_Q8_0: return c == 0 ? mmq_chunk{ 0, 128, 32 * j0 } : c == 1 ? mmq_chunk{ 128, 8, 32 * nb + 2 * j0 } : mmq_chunk{ 0, 0, 0 };
    case TYPE_Q4_K: return c == 0 ? mmq_chunk{ 0, 16, 144 * sb } : c == 1 ? mmq_chunk{ 16, 64, 144 * sb + 16 + 64 * h } : mmq_chunk{ 0, 0, 0 };
    case TYPE_Q5_K:
        return c == 0 ? mmq_chunk{ 0, 16, 176 * sb } : c == 1 ? mmq_chunk{ 16, 32, 176 * sb + 16 }
             : c == 2 ? mmq_chunk{ 48, 64, 176 * sb + 48 + 64 * h } : mmq_chunk{ 0, 0, 0 };
    default: /* Q6_K: planes ql 128, qh 64, scales 16, d 2 a superblock */
        return c == 0 ? mmq_chunk{ 0, 64, 128 * sb + 64 * h } : c == 1 ? mmq_chunk{ 64, 32, 128 * nb + 64 * sb + 32 * h }
             : c == 2 ? mmq_chunk{ 96, 8, 192 * nb + 16 * sb + 8 * h } : mmq_chunk{ 104, 4, 208 * nb + 4 * (sb / 2) };
    }
}

/* An asynchronous copy of n (4, 8 or 16) bytes, global to shared. */
__device__ static inline void copy_async(void *dst, const void *src, int n)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    if (n == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
    else if (n == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(d), "l"(src) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(d), "l"(src) : "memory");
#endif
}

__device__ static inline void copy_commit(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

/* Waits until at most N of this thread's committed copy groups are pending. */
template <int N>
__device__ static inline void copy_wait(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

/* Block jb of the raw stage from block j0: its 32 codes as eight words of
 * four int8 (from 16-byte loads), its scales a[0] (elements 0..15) and
 * a[1] (16..31) and its offset b (the weight is a * code + b). */
template <int T>
__device__ static void mmq_decode(const uint8_t *raw, int jb, int64_t j0, unsigned w[8], float a[2], float *b)
{
    *b = 0.0f;
    if constexpr (T == TYPE_Q8_0) {
        words16<8>(raw + 32 * jb, w);
        a[0] = a[1] = half_field(raw + 128 + 2 * jb);
    } else if constexpr (T == TYPE_Q4_0 || T == TYPE_Q4_1 || T == TYPE_Q5_0 || T == TYPE_Q5_1) {
        constexpr bool five = T == TYPE_Q5_0 || T == TYPE_Q5_1, offset = T == TYPE_Q4_1 || T == TYPE_Q5_1;
        unsigned qs[4];
        words16<4>(raw + 16 * jb, qs);
        nibbles8(qs, w);
        if (five)
            high_bits8(*(const unsigned *)(raw + 64 + 4 * jb), w);
        const uint8_t *dm = raw + (five ? 80 : 64) + (offset ? 4 : 2) * jb;
        a[0] = a[1] = half_field(dm);
        /* Q4_1, Q5_1: + m; Q4_0, Q5_0: codes less 8 (16) as quant_dot.c takes
         * them, through the activation's sum: d (dx sum(q x) - 8 s) */
        *b = offset ? half_field(dm + 2) : __fmul_rn(five ? -16.0f : -8.0f, a[0]);
    } else if constexpr (T == TYPE_Q4_K || T == TYPE_Q5_K) {
        const uint8_t *sp = raw + 4;
        const int s = (int)(j0 % 8) + jb; /* the sub-block of 32 in the superblock */
        const int sc = s < 4 ? sp[s] & 63 : (sp[s + 4] & 0xf) | (sp[s - 4] >> 6) << 4;
        const int mn = s < 4 ? sp[s + 4] & 63 : (sp[s + 4] >> 4) | (sp[s] >> 6) << 4;
        words16<8>(raw + (T == TYPE_Q4_K ? 16 : 48) + 32 * (jb / 2), w); /* sub-blocks 2p and 2p + 1 share these bytes */
#pragma unroll
        for (int t = 0; t < 8; t++)
            w[t] = (w[t] >> (4 * (jb % 2))) & 0x0f0f0f0fu;
        if constexpr (T == TYPE_Q5_K) {
            unsigned hb[8];
            words16<8>(raw + 16, hb); /* bit s of byte l: code l's fifth bit */
#pragma unroll
            for (int t = 0; t < 8; t++)
                w[t] |= ((hb[t] >> s) & 0x01010101u) << 4;
        }
        a[0] = a[1] = __fmul_rn(half_field(raw), (float)sc);
        *b = -__fmul_rn(half_field(raw + 2), (float)mn);
    } else { /* Q6_K: block jb's low bits from ql (nibble jb / 2 of 32 bytes), high from qh (bits 2 jb); a scale per 16 */
        unsigned lo[8];
        words16<8>(raw + 32 * (jb % 2), lo);
        words16<8>(raw + 64, w);
#pragma unroll
        for (int t = 0; t < 8; t++)
            w[t] = __vsub4(((lo[t] >> (4 * (jb / 2))) & 0x0f0f0f0fu) | (((w[t] >> (2 * jb)) & 0x03030303u) << 4),
                           0x20202020u); /* code - 32, each byte */
        const int8_t *scales = (const int8_t *)(raw + 96);
        const float d = half_field(raw + 104 + 2 * (int)(j0 / 8 % 2)); /* the word holds the d of superblocks 2i, 2i + 1 */
        a[0] = __fmul_rn(d, (float)scales[2 * jb]);
        a[1] = __fmul_rn(d, (float)scales[2 * jb + 1]);
    }
}

/* A CTA's raw stages, double-buffered: stage s + 1's copies land while
 * stage s is decoded and multiplied. ROWS rows of each of P matrices,
 * COLS columns. */
template <int P, int ROWS, int COLS>
struct __align__(16) mmq_raw {
    uint8_t xraw[2][COLS][MMQ_RAW];    /* [buffer][column]: a stage's four Q8_1 blocks, as stored */
    uint8_t wraw[2][P][ROWS][MMQ_RAW]; /* [buffer][matrix][row]: raw stages */
};

/* Starts the copies of the stage from block j0 into buffer bi, as one group. */
template <int T, int P, int ROWS, int COLS, int THREADS>
__device__ static void mmq_fetch(const struct mmq_args &m, const struct mmq_mat &w, struct mmq_raw<P, ROWS, COLS> &sh,
                                 int bi, int64_t r0, int64_t c0, int64_t j0)
{
    const int lt = (int)threadIdx.x % THREADS; /* the thread in its group (a split launch's) */
    const int64_t nbk = m.k / 32, nb = T == TYPE_Q4_K || T == TYPE_Q5_K || T == TYPE_Q6_K ? m.k / 256 : nbk;
#pragma unroll
    for (int c = 0; c < 4; c++) {
        const struct mmq_chunk ch = mmq_chunk_of<T>(c, nb, j0);
        const int piece = ch.size < 16 ? ch.size : 16, pieces = ch.size / (piece ? piece : 1);
        for (int t = lt; t < P * ROWS * pieces; t += THREADS) { /* a row's pieces side by side: coalesced */
            const int p = t / (ROWS * pieces), r = t / pieces % ROWS, i = t % pieces;
            const int64_t row = r0 + r;
            if (row < w.n) /* a pair's up: m[1], of the gate's shape */
                copy_async(&sh.wraw[bi][p][r][ch.dst + piece * i],
                           (p ? m.m[1].w : w.w) + (size_t)row * w.row_bytes + (size_t)ch.src + (size_t)(piece * i), piece);
        }
    }
    for (int t = lt; t < COLS * 9; t += THREADS) { /* a column's stage: 144 bytes, 16-byte aligned */
        const int c = t / 9, i = t % 9;
        if (c0 + c < m.nt)
            copy_async(&sh.xraw[bi][c][16 * i], m.xq + ((size_t)(c0 + c) * (size_t)nbk + (size_t)j0) * 36 + 16 * i, 16);
    }
    copy_commit();
}

/* The CTA's matrix, and its first row in *r0: tiles of rows rows run
 * through m[0], then m[1], m[2] (selected, not indexed: an indexed
 * parameter struct is copied to local memory); a pair's are the gate's. */
template <int P>
__device__ static inline struct mmq_mat mmq_tile_matrix(const struct mmq_args &m, int64_t rows, int64_t *r0)
{
    int64_t tile = blockIdx.x;
    const int64_t t0 = (m.m[0].n + rows - 1) / rows, t1 = m.n_mat > 1 ? (m.m[1].n + rows - 1) / rows : 0;
    const int mi = P == 2 || tile < t0 ? 0 : tile < t0 + t1 ? 1 : 2;
    tile -= mi == 0 ? 0 : mi == 1 ? t0 : t0 + t1;
    *r0 = tile * rows;
    return mi == 0 ? m.m[0] : mi == 1 ? m.m[1] : m.m[2];
}

/* The finished value v of row (of w) and column col: plus the bias, plus
 * the residual, or the gate's activation times up (the CPU's order). */
template <int P>
__device__ static inline void mmq_write(const struct mmq_args &m, const struct mmq_mat &w, int64_t row, int64_t col,
                                        float v, float up)
{
    if (row >= w.n || col >= m.nt)
        return;
    if (w.bias)
        v = __fadd_rn(v, w.bias[row]);
    const size_t at = (size_t)col * (size_t)w.n + (size_t)row;
    if (m.res)
        v = __fadd_rn(v, m.res[at]);
    if (P == 2)
        v = __fmul_rn(m.glu == GLU_GELU ? gelu(v) : silu(v), up);
    w.y[at] = v;
}

/* A warp's finished tile of 32 / P rows of each matrix from r0 by 32
 * columns from c0, as the f16 and bf16 kernels hold it: acc[p][mf][tile][i]
 * is matrix p's (a pair's gate 0, up 1) row r0 + 16 mf + lane / 4
 * (+ 8 for i >= 2), column c0 + 8 tile + 2 (lane % 4) + i % 2. */
template <int P>
__device__ static inline void mmq_write_warp_tile(const struct mmq_args &m, const struct mmq_mat &w, int64_t r0, int64_t c0,
                                                  const float (&acc)[P][2 / P][4][4])
{
    const int lane = (int)threadIdx.x % 32;
#pragma unroll
    for (int mf = 0; mf < 2 / P; mf++)
#pragma unroll
        for (int ct = 0; ct < 4; ct++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                mmq_write<P>(m, w, r0 + 16 * mf + lane / 4 + 8 * (i / 2), c0 + 8 * ct + 2 * (lane % 4) + i % 2,
                             acc[0][mf][ct][i], acc[P - 1][mf][ct][i]);
}

#endif
