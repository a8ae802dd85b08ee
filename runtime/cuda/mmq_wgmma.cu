/* mmq_wgmma.cu: a prompt's Q4_K and Q6_K matmuls of many rows
 * (cuda_mmq_wgmma) on sm_90's asynchronous tensor-core instruction
 * (wgmma), where mmq_f16.cu's mma.sync kernel is issue-bound: about twice
 * its speed (BENCHMARKS.md). A CTA of two
 * warpgroups computes 128 rows (a pair's: 64 of gate, 64 of up) by 128
 * columns; each warpgroup issues one m64n128k16 wgmma a step of 16, both
 * operands from shared memory, and decodes the next stage's weights
 * while its wgmmas run.
 *
 * Weights: decoded from the raw stage (copied by cp.async) into f16
 * tiles, every value f16(a * code + b) rounded once from f32: mmq_f16.cu's
 * weights, bit for bit.
 *
 * Activations: wgmma sums whole rows, so a Q8_1 block's scale cannot be
 * applied per block as mmq_f16.cu does. A launch first writes each column
 * as f16 values code * d / s (cuda_mmw_prepare: one rounding, a relative
 * 2^-11), s a power of two for the column, chosen from its largest block
 * scale so that its values lie under 512: never past f16's range,
 * whatever the activations' magnitude. The column's sums are multiplied
 * by s at the end (exact). Weights and activations rounded once each:
 * within 2^-10 of the sum of |w x|, as test_mmq.c holds the f16 kernel.
 *
 * A column's value depends on neither the batch nor its tile (its s and
 * its sums' order are its own), so prompts keep the chunking rule. */
#include "cuda/mmq_stage.cuh"

#define MMW_ROWS 128   /* a CTA's rows: two warpgroups of 64 */
#define MMW_COLS 128   /* a CTA's columns: one wgmma's n */
#define MMW_STAGE 128  /* k a stage: half a K-quant superblock */
#define MMW_THREADS 256
/* Stages copied ahead: activations two (a ring of three tiles: the one
 * multiplied, two in flight), raw weights three (a ring of four: the one
 * decoded, two in flight, one landed early), in one group a stage. */
#define MMW_XRING 3
#define MMW_WRING 4

/* f16 tiles of a stage (128 rows or columns by 128 k): two tiles of 64 k
 * (128 bytes a row) in wgmma's 128-byte swizzle, the 16-byte chunk c of
 * row n at chunk c ^ (n % 8). */
typedef __half mmw_tile[2][128][64];

/* A row's raw stage (weight type T): Q4_K [header 16][codes 64]; Q6_K
 * [ql 64][qh 32][scales 8][the word holding d 4] (mmq_stage.cuh's). */
template <int T>
struct mmw_raw {
    static constexpr int bytes = T == TYPE_Q4_K ? 80 : 112;
};

template <int T>
struct __align__(1024) mmw_smem {
    mmw_tile a[2];                            /* weights: [the stage's parity]; a pair's gate rows, then up rows */
    mmw_tile b[MMW_XRING];                    /* activations */
    uint8_t wraw[MMW_WRING][MMW_ROWS][mmw_raw<T>::bytes];
    float scale[MMW_COLS];                    /* s: a column's sums times this */
};

/* ---- the activations' preparation: one CTA a column ---- */

#define MMW_PREP_THREADS 256

/* Column blockIdx.x of xq (nbk Q8_1 blocks) into xh (k f16 values) and
 * its s into xs. */
__global__ void __launch_bounds__(MMW_PREP_THREADS) mmw_prepare_kernel(const uint8_t *xq, int64_t k, __half *xh, float *xs)
{
    __shared__ float part[MMW_PREP_THREADS / 32];
    const int64_t col = blockIdx.x, nbk = k / 32;
    const uint8_t *blocks = xq + (size_t)col * (size_t)nbk * 36;
    grid_begin();
    float top = 0.0f;
    for (int64_t b = threadIdx.x; b < nbk; b += MMW_PREP_THREADS)
        top = fmaxf(top, fabsf(half_field(blocks + 36 * b)));
    for (int o = 16; o > 0; o /= 2)
        top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, o));
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = top;
    __syncthreads();
    top = 0.0f;
    for (int i = 0; i < MMW_PREP_THREADS / 32; i++)
        top = fmaxf(top, part[i]);
    int x = 0;
    if (top > 0.0f)
        (void)frexpf(127.0f * top, &x);
    /* 127 top in [2^(x - 1), 2^x): over 2^(x - 9), in [256, 512). Bounded so
     * that both powers stay finite floats (a column that small keeps its
     * values' relative precision down to f16's subnormals) */
    const int e = top > 0.0f ? min(max(x - 9, -100), 100) : 0;
    const float inv = ldexpf(1.0f, -e);
    if (threadIdx.x == 0)
        xs[col] = ldexpf(1.0f, e);
    const __half2 bias = __half2half2(__ushort_as_half((unsigned short)0x6480)); /* 1152 */
    for (int64_t q = threadIdx.x; q < k / 8; q += MMW_PREP_THREADS) { /* eight values: a 16-byte store */
        const uint8_t *blk = blocks + 36 * (q / 4);
        const __half2 d = __half2half2(__float2half_rn(__fmul_rn(half_field(blk), inv)));
        unsigned v[4];
#pragma unroll
        for (int w = 0; w < 2; w++) {
            const unsigned u = *(const unsigned *)(blk + 4 + 8 * (q % 4) + 4 * w) ^ 0x80808080u; /* codes + 128 */
#pragma unroll
            for (int i = 0; i < 2; i++) { /* bytes 2 i, 2 i + 1: 1024 + code + 128 as f16, exactly */
                const unsigned h = __byte_perm(u, 0x64646464u, 0x5140u + 0x202u * (unsigned)i);
                const __half2 c = __hmul2(__hsub2(*(const __half2 *)&h, bias), d);
                v[2 * w + i] = *(const unsigned *)&c;
            }
        }
        *(uint4 *)(xh + (size_t)col * (size_t)k + 8 * q) = make_uint4(v[0], v[1], v[2], v[3]);
    }
}

size_t cuda_mmw_scratch_bytes(int64_t nt, int64_t k) { return (size_t)(nt * k) * 2 + (size_t)nt * 4; }

void cuda_mmw_prepare(struct mmq_args &m, void *scratch, cudaStream_t s)
{
    __half *xh = (__half *)scratch;
    float *xs = (float *)(xh + m.nt * m.k);
    launch(mmw_prepare_kernel, dim3((unsigned)m.nt), MMW_PREP_THREADS, 0, s, m.xq, m.k, xh, xs);
    m.xh = xh, m.xs = xs;
}

/* ---- the matmul ---- */

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MMW_ON 1

/* wgmma's shared-memory descriptor of a 128-byte-swizzled tile of 8-row
 * groups 1024 bytes apart. */
__device__ static inline uint64_t mmw_desc(const void *p)
{
    const uint64_t a = (uint64_t)__cvta_generic_to_shared(p);
    return ((a & 0x3ffff) >> 4) | (uint64_t)1 << 16 | (uint64_t)(1024 >> 4) << 32 | (uint64_t)1 << 62;
}

/* acc (the warpgroup's 64 rows by 128 columns) += A (64 by 16 at
 * descriptor a) B (16 by 128 at descriptor b). */
__device__ static inline void mmw_mma(float acc[64], uint64_t a, uint64_t b)
{
#define R8(i) "+f"(acc[i]), "+f"(acc[i + 1]), "+f"(acc[i + 2]), "+f"(acc[i + 3]), "+f"(acc[i + 4]), "+f"(acc[i + 5]), \
              "+f"(acc[i + 6]), "+f"(acc[i + 7])
    asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
                 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "%64, %65, 1, 1, 1, 0, 0;"
                 : R8(0), R8(8), R8(16), R8(24), R8(32), R8(40), R8(48), R8(56)
                 : "l"(a), "l"(b));
#undef R8
}

__device__ static inline void mmw_fence(void) { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ static inline void mmw_commit(void) { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ static inline void mmw_wait(float acc[64])
{
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
    for (int i = 0; i < 64; i++) /* the accumulators are the wgmma's until here */
        asm volatile("" : "+f"(acc[i])::"memory");
}
/* This thread's writes to shared memory (and its copies landed there),
 * made visible to wgmma's reads. */
__device__ static inline void mmw_proxy_fence(void) { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

__device__ static inline void copy16(unsigned dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}

/* A thread's share of each stage's copies, set once so that a stage only
 * adds its offsets; neighbouring lanes copy neighbouring bytes.
 * Activations: piece t % 16 (of 16 bytes) of columns t / 16 + 16 j,
 * j = 0..7. Weights, Q4_K: code piece t % 4 (of 16 bytes) of rows t / 4
 * and t / 4 + 64, and threads under 128 row t's header; Q6_K: piece t % 8
 * (ql 0..3, qh 4 and 5, scales 6, d 7) of rows t / 8 + 32 j, j = 0..3. */
struct mmw_copies {
    const uint8_t *x;     /* column t / 16's piece */
    const uint8_t *w[4];  /* the rows' pieces (their first stage's, less its offsets), NULL past the rows */
    size_t xstep;         /* 16 columns of xh */
    int xn;               /* columns from t / 16 on, in steps of 16, before nt */
    unsigned xs, ws[4];   /* destinations in buffer 0 (shared addresses) */
};

/* The stored row r (of the CTA's 128: a pair's gate rows, then up rows)
 * at byte off, or NULL past the matrix. */
__device__ static inline const uint8_t *mmw_row(const struct mmq_args &m, const struct mmq_mat &w, bool pair, int64_t r0, int r,
                                                size_t off)
{
    const int rr = pair ? r % 64 : r;
    return r0 + rr < w.n ? (pair && r >= 64 ? m.m[1].w : w.w) + (size_t)(r0 + rr) * w.row_bytes + off : NULL;
}

/* Q6_K piece p (mmw_copies): its plane's offset in the row (nb
 * superblocks), its size, its place in the raw stage, and stage st's offset. */
__device__ static inline size_t q6k_plane(int p, int64_t nb) { return p < 4 ? 16 * p : p < 6 ? 128 * nb + 16 * (p - 4) : p == 6 ? 192 * nb : 208 * nb; }
__device__ static inline int q6k_size(int p) { return p < 6 ? 16 : p == 6 ? 8 : 4; }
__device__ static inline int q6k_raw(int p) { return p < 4 ? 16 * p : p < 6 ? 64 + 16 * (p - 4) : p == 6 ? 96 : 104; }
__device__ static inline size_t q6k_stage(int p, int64_t st)
{
    const int64_t sb = st / 2, h = st % 2;
    return (size_t)(p < 4 ? 128 * sb + 64 * h : p < 6 ? 64 * sb + 32 * h : p == 6 ? 16 * sb + 8 * h : 4 * (sb / 2));
}

template <int T>
__device__ static struct mmw_copies mmw_copies_of(const struct mmq_args &m, const struct mmq_mat &w, struct mmw_smem<T> &sh,
                                                  bool pair, int64_t r0, int64_t c0)
{
    const int t = (int)threadIdx.x, c = t / 16, p = t % 16;
    struct mmw_copies cp;
    cp.xstep = (size_t)(16 * m.k) * 2;
    cp.xn = c0 + c < m.nt ? (int)((m.nt - c0 - c + 15) / 16) : 0;
    cp.x = (const uint8_t *)m.xh + ((size_t)(c0 + c) * (size_t)m.k + 8 * (size_t)p) * 2;
    cp.xs = (unsigned)__cvta_generic_to_shared(&sh.b[0][p / 8][c][8 * ((p % 8) ^ (c % 8))]);
    if constexpr (T == TYPE_Q4_K) {
        for (int i = 0; i < 2; i++) {
            cp.w[i] = mmw_row(m, w, pair, r0, t / 4 + 64 * i, 16 + 16 * (t % 4));
            cp.ws[i] = (unsigned)__cvta_generic_to_shared(&sh.wraw[0][t / 4 + 64 * i][16 + 16 * (t % 4)]);
        }
        cp.w[2] = t < MMW_ROWS ? mmw_row(m, w, pair, r0, t, 0) : NULL;
        cp.ws[2] = (unsigned)__cvta_generic_to_shared(&sh.wraw[0][t % MMW_ROWS][0]);
        cp.w[3] = NULL, cp.ws[3] = 0;
    } else {
        for (int j = 0; j < 4; j++) {
            cp.w[j] = mmw_row(m, w, pair, r0, t / 8 + 32 * j, q6k_plane(t % 8, m.k / 256));
            cp.ws[j] = (unsigned)__cvta_generic_to_shared(&sh.wraw[0][t / 8 + 32 * j][q6k_raw(t % 8)]);
        }
    }
    return cp;
}

/* Stage st's activations into tile buffer b. */
__device__ static void mmw_fetch_x(const struct mmw_copies &cp, int b, int64_t st)
{
    const uint8_t *x = cp.x + 2 * MMW_STAGE * st;
    const unsigned xs = cp.xs + (unsigned)(b * sizeof(mmw_tile));
#pragma unroll
    for (int j = 0; j < 8; j++)
        if (j < cp.xn)
            copy16(xs + 16 * 128 * j, x + cp.xstep * j);
}

/* Stage st's raw weights into raw buffer b. Q4_K: the stage's codes at
 * 16 + 64 H of the superblock's 144 bytes (H the stage's half), the header
 * at 0. */
template <int T>
__device__ static void mmw_fetch_w(const struct mmw_copies &cp, int b, int64_t st)
{
    const unsigned off = (unsigned)b * MMW_ROWS * mmw_raw<T>::bytes;
    if constexpr (T == TYPE_Q4_K) {
        const size_t sb = 144 * (size_t)(st / 2), codes = sb + 64 * (size_t)(st % 2);
#pragma unroll
        for (int i = 0; i < 3; i++)
            if (cp.w[i])
                copy16(cp.ws[i] + off, cp.w[i] + (i < 2 ? codes : sb));
    } else {
        const int p = (int)threadIdx.x % 8, n = q6k_size(p);
        const size_t at = q6k_stage(p, st);
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (cp.w[j]) {
                if (n == 16)
                    copy16(cp.ws[j] + off, cp.w[j] + at);
                else if (n == 8)
                    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(cp.ws[j] + off), "l"(cp.w[j] + at) : "memory");
                else
                    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(cp.ws[j] + off), "l"(cp.w[j] + at) : "memory");
            }
    }
}

/* Byte i of w (a code plus bias, under 2^8) as the float a (code), the
 * code exact in the mantissa of 2^23 (bias: 2^23, or 2^23 + 32 for Q6_K's
 * codes, stored plus 32), then times a plus b. */
__device__ static inline float mmw_weight(unsigned w, unsigned i, float bias, float a, float b)
{
    return __fmaf_rn(a, __fsub_rn(__int_as_float((int)__byte_perm(w, 0x4b000000u, 0x7440u | i)), bias), b);
}

/* Eight weights from two words of byte codes: four f16 pairs. */
__device__ static inline uint4 mmw_eight(unsigned w0, unsigned w1, float bias, float a, float b)
{
    return make_uint4(half2_bits(mmw_weight(w0, 0, bias, a, b), mmw_weight(w0, 1, bias, a, b)),
                      half2_bits(mmw_weight(w0, 2, bias, a, b), mmw_weight(w0, 3, bias, a, b)),
                      half2_bits(mmw_weight(w1, 0, bias, a, b), mmw_weight(w1, 1, bias, a, b)),
                      half2_bits(mmw_weight(w1, 2, bias, a, b), mmw_weight(w1, 3, bias, a, b)));
}

/* The raw stage in buffer wb (stage st) as f16 weights into tile a:
 * thread 2 r + c decodes row r's 64 values 64 c..64 c + 63 (tile c), each
 * a * code + b rounded once, as mmq_decode and mmq_f16.cu take them. Rows
 * past the matrix are zeros. Q4_K: the codes' bytes 32 c..32 c + 31, low
 * nibbles values 0..31 (sub-block 2 (2 H + c)), high 32..63 (the next).
 * Q6_K: blocks 2 c and 2 c + 1 of the stage (a scale each 16 values): low
 * bits nibble c of ql bytes 32 (block % 2).., high bits 2 block of qh. */
template <int T>
__device__ static void mmw_decode(struct mmw_smem<T> &sh, int wb, int64_t st, bool live, mmw_tile &a)
{
    const int r = (int)threadIdx.x / 2, c = (int)threadIdx.x % 2;
    const uint8_t *raw = sh.wraw[wb][r];
    if constexpr (T == TYPE_Q4_K) {
        const uint4 q0 = *(const uint4 *)(raw + 16 + 32 * c), q1 = *(const uint4 *)(raw + 32 + 32 * c);
        const unsigned qw[8] = { q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w };
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int sb = 2 * (2 * (int)(st % 2) + c) + h;
            const uint8_t *sp = raw + 4;
            const int sc = sb < 4 ? sp[sb] & 63 : (sp[sb + 4] & 0xf) | (sp[sb - 4] >> 6) << 4;
            const int mn = sb < 4 ? sp[sb + 4] & 63 : (sp[sb + 4] >> 4) | (sp[sb] >> 6) << 4;
            const float sa = live ? __fmul_rn(half_field(raw), (float)sc) : 0.0f;
            const float so = live ? -__fmul_rn(half_field(raw + 2), (float)mn) : 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++) /* values 32 h + 8 j.. + 7: bytes 8 j.. + 7, nibble h */
                *(uint4 *)&a[c][r][8 * ((4 * h + j) ^ (r % 8))] =
                    mmw_eight((qw[2 * j] >> (4 * h)) & 0x0f0f0f0fu, (qw[2 * j + 1] >> (4 * h)) & 0x0f0f0f0fu, 8388608.0f, sa, so);
        }
    } else {
        const float d = half_field(raw + 104 + 2 * (int)(st / 2 % 2)); /* the word holds the d of superblocks 2 i, 2 i + 1 */
        const int8_t *scales = (const int8_t *)(raw + 96);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int blk = 2 * c + h;
            const uint4 l0 = *(const uint4 *)(raw + 32 * h), l1 = *(const uint4 *)(raw + 32 * h + 16);
            const uint4 h0 = *(const uint4 *)(raw + 64), h1 = *(const uint4 *)(raw + 80);
            const unsigned lw[8] = { l0.x, l0.y, l0.z, l0.w, l1.x, l1.y, l1.z, l1.w };
            const unsigned hw[8] = { h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w };
#pragma unroll
            for (int j = 0; j < 4; j++) { /* values 32 h + 8 j.. + 7 of the tile: the block's 8 j.. */
                const float sa = live ? __fmul_rn(d, (float)scales[2 * blk + j / 2]) : 0.0f;
                unsigned q[2];
#pragma unroll
                for (int i = 0; i < 2; i++)
                    q[i] = ((lw[2 * j + i] >> (4 * c)) & 0x0f0f0f0fu) | ((hw[2 * j + i] >> (2 * blk)) & 0x03030303u) << 4;
                *(uint4 *)&a[c][r][8 * ((4 * h + j) ^ (r % 8))] = mmw_eight(q[0], q[1], 8388640.0f, sa, 0.0f);
            }
        }
    }
}

/* Whether this thread's decoded row (mmw_decode) is in the matrix. */
__device__ static inline bool mmw_live(const struct mmq_mat &w, bool pair, int64_t r0)
{
    const int r = (int)threadIdx.x / 2;
    return r0 + (pair ? r % 64 : r) < w.n;
}

/* One stage st: the barrier that publishes its activations and weights
 * (and the raw weights of st + 1); the copies of st + 2's activations and
 * st + 3's raw weights (one group, empty past the last stage, so that one
 * group is in flight at each wait); st's wgmmas, and st + 1's weights
 * decoded while they run. */
template <int T>
__device__ static inline void mmw_step(const struct mmw_copies &cp, struct mmw_smem<T> &sh, int64_t st, int64_t stages, bool live,
                                       float acc[64])
{
    copy_wait<1>();
    mmw_proxy_fence();
    __syncthreads(); /* everyone's copies and decoded weights of st; every wgmma of st - 1 done */
    if (st + 2 < stages)
        mmw_fetch_x(cp, (int)((st + 2) % MMW_XRING), st + 2);
    if (st + 3 < stages)
        mmw_fetch_w<T>(cp, (int)((st + 3) % MMW_WRING), st + 3);
    copy_commit();
    const int wg = (int)threadIdx.x / 128, b = (int)(st % MMW_XRING);
    mmw_tile &a = sh.a[st % 2];
    mmw_fence();
#pragma unroll
    for (int s = 0; s < 8; s++)
        mmw_mma(acc, mmw_desc(&a[s / 4][64 * wg][16 * (s % 4)]), mmw_desc(&sh.b[b][s / 4][0][16 * (s % 4)]));
    mmw_commit();
    if (st + 1 < stages)
        mmw_decode<T>(sh, (int)((st + 1) % MMW_WRING), st + 1, live, sh.a[(st + 1) % 2]);
    mmw_wait(acc);
}
#endif

template <int T, int P>
__global__ void __launch_bounds__(MMW_THREADS, 1) mmw_kernel(const struct mmq_args m)
{
#ifdef MMW_ON
    extern __shared__ uint8_t smem_bytes[];
    /* aligned by pointer arithmetic, so that the compiler still sees shared memory (no generic loads) */
    struct mmw_smem<T> &sh = *(struct mmw_smem<T> *)(smem_bytes + ((1024 - (uintptr_t)smem_bytes % 1024) % 1024));
    grid_begin();
    int64_t r0;
    const struct mmq_mat w = mmq_tile_matrix<P>(m, MMW_ROWS / P, &r0);
    const int64_t c0 = (int64_t)blockIdx.y * MMW_COLS, stages = m.k / MMW_STAGE;
    const struct mmw_copies cp = mmw_copies_of<T>(m, w, sh, P == 2, r0, c0);
    const bool live = mmw_live(w, P == 2, r0);
    /* the prologue's groups: raw weights 0 and 1 with activations 0, then raw weights 2 with activations 1 */
    mmw_fetch_w<T>(cp, 0, 0);
    if (stages > 1)
        mmw_fetch_w<T>(cp, 1, 1);
    mmw_fetch_x(cp, 0, 0);
    copy_commit();
    if (stages > 2)
        mmw_fetch_w<T>(cp, 2, 2);
    if (stages > 1)
        mmw_fetch_x(cp, 1, 1);
    copy_commit();
    if (threadIdx.x < MMW_COLS)
        sh.scale[threadIdx.x] = c0 + threadIdx.x < m.nt ? m.xs[c0 + threadIdx.x] : 0.0f;
    copy_wait<1>();
    __syncthreads();
    mmw_decode<T>(sh, 0, 0, live, sh.a[0]);
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++)
        acc[i] = 0.0f;
    for (int64_t st = 0; st < stages; st++)
        mmw_step<T>(cp, sh, st, stages, live, acc);
    /* acc[4 j + i]: row 16 (warp % 4) + g + 8 (i / 2) of the warpgroup's 64, column 8 j + 2 t + i % 2 */
    const int warp = (int)threadIdx.x / 32, lane = (int)threadIdx.x % 32, wg = warp / 4, g = lane / 4, t = lane % 4;
    const int row = 16 * (warp % 4) + g;
    if (P == 2) { /* the up warpgroup hands its values to the gate's, through the tiles' memory */
        float(*up)[MMW_COLS + 4] = (float(*)[MMW_COLS + 4])(void *)sh.b;
        __syncthreads(); /* every wgmma's reads of the tiles are done */
        if (wg == 1)
#pragma unroll
            for (int i = 0; i < 64; i++)
                up[row + 8 * (i % 4 / 2)][8 * (i / 4) + 2 * t + i % 2] = acc[i];
        __syncthreads();
        if (wg == 0)
#pragma unroll
            for (int i = 0; i < 64; i++) {
                const int r = row + 8 * (i % 4 / 2), c = 8 * (i / 4) + 2 * t + i % 2;
                mmq_write<2>(m, w, r0 + r, c0 + c, __fmul_rn(acc[i], sh.scale[c]), __fmul_rn(up[r][c], sh.scale[c]));
            }
    } else {
#pragma unroll
        for (int i = 0; i < 64; i++) {
            const int c = 8 * (i / 4) + 2 * t + i % 2;
            const float v = __fmul_rn(acc[i], sh.scale[c]);
            mmq_write<1>(m, w, r0 + 64 * wg + row + 8 * (i % 4 / 2), c0 + c, v, v);
        }
    }
#endif
}

extern "C" bool cuda_wgmma_enabled(void); /* device.cu */

bool cuda_mmw_type(int t) { return (t == TYPE_Q4_K || t == TYPE_Q6_K) && cuda_wgmma_enabled(); }

extern "C" bool cuda_mmq_wgmma(enum tensor_type t, int64_t rows) { return cuda_mmq_f16(t, rows) && cuda_mmw_type(t); }

extern "C" size_t cuda_prompt_scratch_bytes(int64_t nt, int64_t k)
{
    return nt > CUDA_PROMPT_MIN_COLUMNS && cuda_wgmma_enabled() ? cuda_mmw_scratch_bytes(nt, k) : 0;
}

template <int T, int P>
static void launch_mmw(const struct mmq_args &m, dim3 grid, cudaStream_t s)
{
    constexpr size_t bytes = sizeof(struct mmw_smem<T>) + 1024;
    static const bool opted = (cuda_smem_opt_in((const void *)mmw_kernel<T, P>, bytes), true);
    (void)opted;
    launch(mmw_kernel<T, P>, grid, MMW_THREADS, bytes, s, m);
}

void cuda_mmw_launch(int t, const struct mmq_args &m, bool pair, cudaStream_t s)
{
    int64_t rows = 0;
    for (int i = 0; i < (pair ? 1 : m.n_mat); i++)
        rows += (m.m[i].n + MMW_ROWS / (pair ? 2 : 1) - 1) / (MMW_ROWS / (pair ? 2 : 1));
    const dim3 grid((unsigned)rows, (unsigned)((m.nt + MMW_COLS - 1) / MMW_COLS));
    if (t == TYPE_Q4_K)
        pair ? launch_mmw<TYPE_Q4_K, 2>(m, grid, s) : launch_mmw<TYPE_Q4_K, 1>(m, grid, s);
    else
        pair ? launch_mmw<TYPE_Q6_K, 2>(m, grid, s) : launch_mmw<TYPE_Q6_K, 1>(m, grid, s);
}
