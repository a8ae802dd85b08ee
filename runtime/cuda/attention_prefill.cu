/* attention_prefill.cu: a prompt's causal attention on the f16 tensor cores,
 * flash-attention style. A CTA takes 64 queries of one head (16 a warp)
 * and walks the cached keys of its KV head in tiles of 64 from position 0
 * (aligned, whatever the batch): each tile's keys and values converted to
 * f16 into shared memory, the scores S = Q K^T by mma.sync m16n8k16 (f16
 * in, f32 sums), masked (causal, and the window), an online softmax in f32
 * registers (running max and sum per query), and O += P V with P in f16
 * straight from the score fragments. A query's result depends on its
 * position and the cache only, never on its batch or its row in the CTA,
 * so chunking a prompt changes no bits for a given chunk size; it is not
 * the decode kernel's order (f16 products), which is why only launches of
 * more than CUDA_PROMPT_MIN_COLUMNS queries come here, and tests/cuda states
 * its tolerance against the CPU. The cache must hold the batch's own keys
 * already (the heads launch stores them first).
 *
 * Heads of 256 (Gemma 3) would need 128 output sums and 64 query fragment
 * registers a thread beside the scores: their queries wait in shared
 * memory as f16 (read by ldmatrix a 16-element step at a time) and their
 * tiles are 32 keys. */
#include <math.h>

#include "cuda/attention_prefill.cuh"

#define FA_QUERIES 64 /* a CTA's queries: 16 a warp */
#define FA_THREADS 128

bool cuda_attention_prefill_fits(int64_t d) { return d == 64 || d == 128 || d == 256; }

template <int D>
struct fa_shape {
    static constexpr int keys = D == 256 ? 32 : 64; /* keys a tile */
    static constexpr bool q_shared = D == 256;      /* the queries' fragments from shared memory, not registers */
};

/* A tile's keys and values, [key][element], (heads of 256) the CTA's
 * queries, each row padded by 16 bytes so that ldmatrix's eight rows fall
 * in distinct banks; at the end the CTA's outputs in f32 [query][element]
 * for their Q8_1 blocks. */
template <int D>
struct __align__(16) fa_smem {
    static constexpr int KEYS = fa_shape<D>::keys, QROWS = fa_shape<D>::q_shared ? FA_QUERIES : 0;
    __half k[KEYS][D + 8], v[KEYS][D + 8], q[QROWS > 0 ? QROWS : 1][D + 8];
};
template <int D>
static constexpr size_t fa_smem_bytes()
{
    return sizeof(fa_smem<D>) > (size_t)FA_QUERIES * D * 4 ? sizeof(fa_smem<D>) : (size_t)FA_QUERIES * D * 4;
}

/* Elements 8 ch..8 ch + 7 of a cached row as eight f16 values. */
template <int KT>
__device__ static inline uint4 kv_chunk8(const uint8_t *row, int ch)
{
    if constexpr (KT == KV_F16) {
        return *(const uint4 *)(row + 16 * ch); /* rows of 64, 128 or 256 f16 values: 16-byte aligned */
    } else if constexpr (KT == KV_F32) {
        const float4 a = ((const float4 *)row)[2 * ch], b = ((const float4 *)row)[2 * ch + 1];
        const __half2 h[4] = { __floats2half2_rn(a.x, a.y), __floats2half2_rn(a.z, a.w), __floats2half2_rn(b.x, b.y),
                               __floats2half2_rn(b.z, b.w) };
        return *(const uint4 *)h;
    } else { /* Q8_0 blocks of 34 bytes: d, then 32 codes */
        const uint8_t *blk = row + (8 * ch / 32) * 34;
        const float d = half_at(blk);
        __half2 h[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int e = 8 * ch % 32 + 2 * i;
            h[i] = __floats2half2_rn(__fmul_rn(d, (float)(int8_t)blk[2 + e]), __fmul_rn(d, (float)(int8_t)blk[3 + e]));
        }
        return *(const uint4 *)h;
    }
}

/* Keys (and values) j0.. of a tile into shared memory; those outside
 * [jlo, jhi] as zeros, never read: past the batch the cache may hold
 * anything, and P's zeros times a NaN would still be a NaN. */
template <int KT, int D>
__device__ static void fa_load(const uint8_t *kh, const uint8_t *vh, size_t row_bytes, int64_t j0, int64_t jlo,
                               int64_t jhi, struct fa_smem<D> &sh)
{
    constexpr int KEYS = fa_shape<D>::keys;
    for (int t = threadIdx.x; t < 2 * KEYS * (D / 8); t += FA_THREADS) {
        const int which = t / (KEYS * (D / 8)), r = t / (D / 8) % KEYS, ch = t % (D / 8);
        const int64_t j = j0 + r;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (j >= jlo && j <= jhi)
            v = kv_chunk8<KT>((which ? vh : kh) + (size_t)j * row_bytes, ch);
        *(uint4 *)&(which ? sh.v : sh.k)[r][8 * ch] = v;
    }
}

/* Thread (g, t) of a warp holds, of every fragment, rows g and g + 8 of
 * the warp's 16 queries and columns 2 t, 2 t + 1 of each 8-wide tile. */
template <int KT, int D>
__global__ void __launch_bounds__(FA_THREADS) attention_prefill_kernel(
    const uint8_t *__restrict__ kl, const uint8_t *__restrict__ vl, const float *__restrict__ q,
    const int32_t *__restrict__ pos, int64_t h, int64_t group, int64_t nt, int64_t window, size_t row_bytes,
    int64_t n_ctx, float *__restrict__ y, uint8_t *__restrict__ q8)
{
    constexpr int KEYS = fa_shape<D>::keys;
    constexpr bool QS = fa_shape<D>::q_shared;
    extern __shared__ uint4 fa_dynamic[]; /* fa_smem_bytes<D>() */
    struct fa_smem<D> &sh = *(struct fa_smem<D> *)fa_dynamic;
    __shared__ int64_t first[FA_QUERIES], last[FA_QUERIES]; /* each query's visible positions */
    grid_begin();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t4 = lane % 4, mat = lane / 8;
    const int64_t c0 = (int64_t)blockIdx.x * FA_QUERIES, head = blockIdx.y, kvh = head / group;
    if (threadIdx.x < FA_QUERIES) {
        const int64_t c = c0 + threadIdx.x, p = c < nt ? pos[c] : -1;
        last[threadIdx.x] = p; /* a query past the batch sees nothing */
        first[threadIdx.x] = p < 0 ? INT64_MAX : window > 0 && p >= window ? p - window + 1 : 0;
    }
    __syncthreads();
    int64_t jlo = INT64_MAX, jhi = -1;
    for (int i = 0; i < FA_QUERIES; i++)
        jlo = min(jlo, first[i]), jhi = max(jhi, last[i]);
    jhi = min(jhi, n_ctx - 1);
    const int64_t rows[2] = { c0 + 16 * warp + g, c0 + 16 * warp + g + 8 };
    const int64_t p_row[2] = { last[16 * warp + g], last[16 * warp + g + 8] };
    const int64_t lo_row[2] = { first[16 * warp + g], first[16 * warp + g + 8] };

    unsigned qf[QS ? 1 : D / 16][4]; /* the warp's queries as A fragments, f16 (in sh.q when QS) */
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int64_t c = rows[i % 2];
            const int col = 16 * kk + 2 * t4 + 8 * (i / 2);
            float2 v = make_float2(0.0f, 0.0f);
            if (c < nt)
                v = *(const float2 *)(q + ((size_t)c * (size_t)h + (size_t)head) * D + col);
            if constexpr (QS)
                *(unsigned *)&sh.q[16 * warp + g + 8 * (i % 2)][col] = half2_bits(v.x, v.y);
            else
                qf[kk][i] = half2_bits(v.x, v.y);
        }
    const float scale = __fdiv_rn(1.0f, sqrtf((float)D));
    const uint8_t *kh = kl + (size_t)kvh * (size_t)n_ctx * row_bytes, *vh = vl + (size_t)kvh * (size_t)n_ctx * row_bytes;
    float o[D / 8][4], m[2] = { -INFINITY, -INFINITY }, l[2] = { 0.0f, 0.0f };
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            o[dt][i] = 0.0f;
    for (int64_t j0 = jlo <= jhi ? jlo / KEYS * KEYS : jhi + 1; j0 <= jhi; j0 += KEYS) {
        __syncthreads(); /* the last tile's reads are done (and, the first time, sh.q's writes) */
        fa_load<KT, D>(kh, vh, row_bytes, j0, jlo, jhi, sh);
        __syncthreads();
        float s[KEYS / 8][4]; /* scores: key tile of 8, fragment element */
#pragma unroll
        for (int kt = 0; kt < KEYS / 8; kt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                s[kt][i] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; kk += 2) { /* a score's 16-element steps in order, whatever QS */
            unsigned qa[2][4];
            if constexpr (QS)
#pragma unroll
                for (int i = 0; i < 2; i++)
                    ldmatrix_x4<false>(qa[i], &sh.q[16 * warp + lane % 8 + 8 * (lane / 8 % 2)][16 * (kk + i) + 8 * (lane / 16)]);
#pragma unroll
            for (int kt = 0; kt < KEYS / 8; kt++) {
                unsigned b[4]; /* one ldmatrix: two 16-element steps' B fragments */
                ldmatrix_x4<false>(b, &sh.k[8 * kt + lane % 8][16 * kk + 8 * mat]);
                mma_f16(s[kt], QS ? qa[0] : qf[QS ? 0 : kk], b[0], b[1]);
                mma_f16(s[kt], QS ? qa[1] : qf[QS ? 0 : kk + 1], b[2], b[3]);
            }
        }
        float mx[2] = { -INFINITY, -INFINITY };
#pragma unroll
        for (int kt = 0; kt < KEYS / 8; kt++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = i / 2;
                const int64_t j = j0 + 8 * kt + 2 * t4 + i % 2;
                s[kt][i] = j > p_row[r] || j < lo_row[r] ? -INFINITY : __fmul_rn(s[kt][i], scale);
                mx[r] = fmaxf(mx[r], s[kt][i]);
            }
        float corr[2], base[2];
#pragma unroll
        for (int r = 0; r < 2; r++) { /* a row's four lanes: max is exact in any order */
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            const float m_new = fmaxf(m[r], mx[r]);
            base[r] = m_new == -INFINITY ? 0.0f : m_new; /* nothing visible yet: exp(-inf) = 0 all round */
            corr[r] = expf(m[r] - base[r]);
            m[r] = m_new;
            l[r] = __fmul_rn(l[r], corr[r]);
        }
#pragma unroll
        for (int dt = 0; dt < D / 8; dt++)
#pragma unroll
            for (int i = 0; i < 4; i++)
                o[dt][i] = __fmul_rn(o[dt][i], corr[i / 2]);
        unsigned pa[KEYS / 16][4]; /* P as A fragments: score tiles 2 kk and 2 kk + 1 */
#pragma unroll
        for (int kt = 0; kt < KEYS / 8; kt++) {
            float e[4];
#pragma unroll
            for (int i = 0; i < 4; i++) {
                e[i] = expf(s[kt][i] - base[i / 2]);
                l[i / 2] = __fadd_rn(l[i / 2], e[i]);
            }
            pa[kt / 2][2 * (kt % 2)] = half2_bits(e[0], e[1]);
            pa[kt / 2][2 * (kt % 2) + 1] = half2_bits(e[2], e[3]);
        }
#pragma unroll
        for (int dt = 0; dt < D / 8; dt += 2)
#pragma unroll
            for (int kk = 0; kk < KEYS / 16; kk++) { /* one ldmatrix: B fragments of d tiles dt and dt + 1 */
                unsigned b[4];
                ldmatrix_x4<true>(b, &sh.v[16 * kk + 8 * (mat % 2) + lane % 8][8 * dt + 8 * (mat / 2)]);
                mma_f16(o[dt], pa[kk], b[0], b[1]);
                mma_f16(o[dt + 1], pa[kk], b[2], b[3]);
            }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) { /* the row's four partial sums, a fixed butterfly */
        l[r] = __fadd_rn(l[r], __shfl_xor_sync(0xffffffffu, l[r], 1));
        l[r] = __fadd_rn(l[r], __shfl_xor_sync(0xffffffffu, l[r], 2));
    }
    __syncthreads(); /* the tiles are done with: the outputs go through shared memory for the Q8_1 blocks */
    float *out = (float *)fa_dynamic; /* [FA_QUERIES][D] */
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int64_t c = rows[r];
            const int col = 8 * dt + 2 * t4;
            const float2 v = make_float2(__fdiv_rn(o[dt][2 * r], l[r]), __fdiv_rn(o[dt][2 * r + 1], l[r]));
            *(float2 *)&out[(16 * warp + g + 8 * r) * D + col] = v;
            if (c < nt)
                *(float2 *)(y + ((size_t)c * (size_t)h + (size_t)head) * D + col) = v;
        }
    if (!q8)
        return;
    __syncwarp(); /* the warp quantizes its own 16 rows, a 32-element block at a time */
    for (int i = 0; i < 16 * (D / 32); i++) {
        const int r = 16 * warp + i / (D / 32), b = i % (D / 32);
        const int64_t c = c0 + r;
        if (c < nt) /* the same for the whole warp */
            q8_1_block(out[r * D + 32 * b + lane], q8 + (size_t)c * (size_t)(h * D / 32) * 36 + (size_t)(head * (D / 32) + b) * 36);
    }
}

template <int KT, int D>
static void launch_d(dim3 grid, cudaStream_t s, const uint8_t *kl, const uint8_t *vl, const float *q, const int32_t *pos,
                     int64_t h, int64_t group, int64_t nt, int64_t window, size_t rb, int64_t n_ctx, float *y, uint8_t *q8)
{
    constexpr size_t bytes = fa_smem_bytes<D>();
    static const bool opted = (cuda_smem_opt_in((const void *)attention_prefill_kernel<KT, D>, bytes), true);
    (void)opted;
    launch(attention_prefill_kernel<KT, D>, grid, FA_THREADS, bytes, s, kl, vl, q, pos, h, group, nt, window, rb, n_ctx, y, q8);
}

template <int KT>
static void launch_kt(dim3 grid, cudaStream_t s, int64_t d, const uint8_t *kl, const uint8_t *vl, const float *q,
                      const int32_t *pos, int64_t h, int64_t group, int64_t nt, int64_t window, size_t rb, int64_t n_ctx,
                      float *y, uint8_t *q8)
{
    if (d == 64)
        launch_d<KT, 64>(grid, s, kl, vl, q, pos, h, group, nt, window, rb, n_ctx, y, q8);
    else if (d == 128)
        launch_d<KT, 128>(grid, s, kl, vl, q, pos, h, group, nt, window, rb, n_ctx, y, q8);
    else
        launch_d<KT, 256>(grid, s, kl, vl, q, pos, h, group, nt, window, rb, n_ctx, y, q8);
}

void cuda_attention_prefill(enum kv_type kt, const uint8_t *kl, const uint8_t *vl, const float *q, const int32_t *pos,
                            int64_t d, int64_t h, int64_t h_kv, int64_t nt, int64_t n_ctx, int64_t window,
                            size_t row_bytes, float *y, uint8_t *q8, cudaStream_t s)
{
    const dim3 grid((unsigned)((nt + FA_QUERIES - 1) / FA_QUERIES), (unsigned)h);
    if (kt == KV_F32)
        launch_kt<KV_F32>(grid, s, d, kl, vl, q, pos, h, h / h_kv, nt, window, row_bytes, n_ctx, y, q8);
    else if (kt == KV_F16)
        launch_kt<KV_F16>(grid, s, d, kl, vl, q, pos, h, h / h_kv, nt, window, row_bytes, n_ctx, y, q8);
    else
        launch_kt<KV_Q8_0>(grid, s, d, kl, vl, q, pos, h, h / h_kv, nt, window, row_bytes, n_ctx, y, q8);
}
