/* attention.cu: the KV cache store and causal attention on the GPU.
 * Attention is split-K: a cache of n_ctx positions is cut into chunks of a
 * length fixed for the engine (cuda_attention_chunk), one CTA per (chunk,
 * head, query) forms that chunk's scores, their max, the sum of their
 * exponentials and the weighted sum of values (an exact softmax within the
 * chunk), and the last CTA of each (head, query) to finish combines the
 * chunks in order. The cut never depends on the batch, the position or
 * timing, so a query gets the same
 * bits in a batch as alone. Within a chunk the order of every sum is fixed
 * too (attention_kernel), though not the CPU's: the two agree within a
 * stated tolerance (tests/cuda). */
#include <atomic>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cuda/attention_prefill.cuh"
#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

#ifndef ATT_THREADS
#define ATT_THREADS 256 /* 128 with -DATT_THREADS=128, for measurements (any multiple of 32 that holds ATT_MAX_CHUNKS) */
#endif
#define ATT_STAGE_MAX (200 * 1024) /* a staged chunk's shared memory at most (stage_chunks) */
#define ATT_MIN_CHUNK 128 /* positions a chunk at least: a short context is one CTA's, no combine */
#define ATT_QUERIES 64 /* queries per launch: bounds the partials' scratch */
#define ATT_MAX_CHUNKS 64 /* chunks a cache at most: chunks grow with n_ctx past 64 of ATT_MIN_CHUNK */
static_assert(ATT_THREADS % 32 == 0 && ATT_THREADS >= ATT_MAX_CHUNKS, "the combine gives each chunk a thread");
#define ATT_GROUPS (ATT_THREADS / 8) /* 8-lane groups, one KV position each at a time */
#define ATT_MAX_HEAD 256             /* 8 lanes of at most 32 elements */
#ifndef ATT_TURNS
#define ATT_TURNS 2 /* turns whose K and V loads are in flight at once (heads up to 128 wide) */
#endif

/* Element i of one cached row. */
template <int KT>
__device__ static inline float kv_at(const uint8_t *row, int64_t i)
{
    if constexpr (KT == KV_F32)
        return ((const float *)row)[i];
    else if constexpr (KT == KV_F16)
        return __half2float(((const __half *)row)[i]);
    else {
        const uint8_t *b = row + (i / 32) * 34;
        return __fmul_rn(half_at(b), (float)(int8_t)b[2 + i % 32]);
    }
}

/* One CTA per (head, column): the column's k and v rows of that head. */
template <int KT>
__global__ void kv_store_kernel(uint8_t *__restrict__ kl, uint8_t *__restrict__ vl, const float *__restrict__ k,
                                const float *__restrict__ v, const int32_t *__restrict__ pos, int64_t d,
                                int64_t h_kv, int64_t n_ctx, size_t row_bytes)
{
    grid_begin();
    const int64_t head = blockIdx.x, c = blockIdx.y;
    const size_t at = ((size_t)head * (size_t)n_ctx + (size_t)pos[c]) * row_bytes;
    for (int which = 0; which < 2; which++)
        kv_row_write<KT>((which ? vl : kl) + at, (which ? v : k) + ((size_t)c * (size_t)h_kv + (size_t)head) * (size_t)d, d);
}

extern "C" int cuda_kv_store(enum kv_type kt, void *kl, void *vl, const float *k, const float *v, const int32_t *pos,
                             int64_t d, int64_t h_kv, int64_t nt, int64_t n_ctx, void *stream, struct error *e)
{
    if (d <= 0 || h_kv <= 0 || nt <= 0 || (kt == KV_Q8_0 && d % 32))
        return fail(e, "kv_store: %lld heads of %lld, %lld columns", (long long)h_kv, (long long)d, (long long)nt);
    const dim3 grid((unsigned)h_kv, (unsigned)nt);
    const size_t rb = kv_row_bytes(kt, d);
    uint8_t *kb = (uint8_t *)kl, *vb = (uint8_t *)vl;
    cudaStream_t s = (cudaStream_t)stream;
    if (cuda_launch_begin("kv_store_kernel", e))
        return -1;
    if (kt == KV_F32)
        launch(kv_store_kernel<KV_F32>, grid, 128, 0, s, kb, vb, k, v, pos, d, h_kv, n_ctx, rb);
    else if (kt == KV_F16)
        launch(kv_store_kernel<KV_F16>, grid, 128, 0, s, kb, vb, k, v, pos, d, h_kv, n_ctx, rb);
    else
        launch(kv_store_kernel<KV_Q8_0>, grid, 128, 0, s, kb, vb, k, v, pos, d, h_kv, n_ctx, rb);
    return cuda_launch_end("kv_store_kernel", e);
}

/* Chunks a cache at most: ATT_MAX_CHUNKS, or MINFER_ATT_CHUNKS=N (1 to
 * ATT_MAX_CHUNKS) from the environment, for measurements (fewer, longer
 * chunks: fewer CTAs, fewer waves, a shorter combine). Decided once. */
static int64_t max_chunks(void)
{
    static std::atomic<int> n{ -1 };
    int v = n.load(std::memory_order_relaxed);
    if (v < 0) {
        const char *env = getenv("MINFER_ATT_CHUNKS");
        char *end = NULL;
        const long x = env ? strtol(env, &end, 10) : ATT_MAX_CHUNKS;
        v = env && (end == env || *end || x < 1 || x > ATT_MAX_CHUNKS) ? -1 : (int)x;
        if (v < 0) {
            fprintf(stderr, "minfer: MINFER_ATT_CHUNKS wants a whole number in [1, %d], got '%s': %d kept\n",
                    ATT_MAX_CHUNKS, env, ATT_MAX_CHUNKS);
            v = ATT_MAX_CHUNKS;
        }
        n.store(v, std::memory_order_relaxed);
    }
    return v;
}

int64_t cuda_attention_chunk(int64_t n_ctx)
{
    const int64_t most = max_chunks();
    int64_t chunk = (n_ctx + most - 1) / most;
    chunk = (chunk + 31) / 32 * 32;
    return chunk < ATT_MIN_CHUNK ? ATT_MIN_CHUNK : chunk;
}

static int64_t n_chunks(int64_t n_ctx, int64_t chunk) { return (n_ctx + chunk - 1) / chunk; }

size_t cuda_attention_scratch_floats(int64_t d, int64_t h, int64_t n_ctx, int64_t chunk)
{
    /* the partials, then one ticket per (query, head) */
    return (size_t)ATT_QUERIES * (size_t)h * ((size_t)n_chunks(n_ctx, chunk) * (size_t)(d + 2) + 1);
}

/* The first S chunks' partials of one (head, query) (the chunks that hold
 * positions) combined in chunk order into y's head, and its Q8_1 blocks
 * into q8h (if not NULL). Thread s reads chunk s's max and sum, and thread
 * i forms element i (and i + ATT_THREADS, ...) alone, asking for CB
 * chunks' values at once: its first CB are asked for with the maxes and
 * sums, one trip to L2 for up to CB chunks. (Read chunk by chunk, the 58
 * chunks after 16384 tokens cost the 0.5B 31% of its tg128 there.) The
 * partials were written by other CTAs of this launch: read past L1
 * (__ldcg). */
__device__ static void combine_chunks(const float *pc, int64_t S, int64_t d, float *yh, uint8_t *q8h)
{
    constexpr int CB = 16;
    __shared__ float ms[ATT_MAX_CHUNKS], ls[ATT_MAX_CHUNKS], wts[ATT_MAX_CHUNKS];
    const int t = threadIdx.x;
    const size_t stride = (size_t)d + 2;
    const auto values = [&](int64_t s0, int64_t i, float (&v)[CB]) { /* chunks s0 .. s0 + CB - 1's element i */
#pragma unroll
        for (int u = 0; u < CB; u++)
            v[u] = s0 + u < S && i < d ? __ldcg(pc + (size_t)(s0 + u) * stride + 2 + i) : 0.0f;
    };
    if (t < S)
        ms[t] = __ldcg(pc + (size_t)t * stride), ls[t] = __ldcg(pc + (size_t)t * stride + 1);
    float v[CB];
    values(0, t, v);
    __syncthreads();
    float M = -INFINITY; /* a max: exact in any order */
    for (int64_t s = 0; s < S; s++)
        M = fmaxf(M, ms[s]);
    if (t < S)
        wts[t] = expf(ms[t] - M);
    __syncthreads();
    float L = 0;
    for (int64_t s = 0; s < S; s++)
        L = __fadd_rn(L, __fmul_rn(ls[s], wts[s]));
    for (int64_t i = t; i < d; i += ATT_THREADS) { /* whole warps when q8h (d % 32 == 0) */
        float acc = 0;
        for (int64_t s0 = 0; s0 < S; s0 += CB) {
            if (s0 > 0 || i != t)
                values(s0, i, v);
#pragma unroll
            for (int u = 0; u < CB; u++)
                if (s0 + u < S)
                    acc = __fadd_rn(acc, __fmul_rn(v[u], wts[s0 + u]));
        }
        const float out = __fdiv_rn(acc, L);
        yh[i] = out;
        if (q8h) /* warp i / 32 holds block i / 32 */
            q8_1_block(out, q8h + (size_t)(i / 32) * 36);
    }
}

/* dl elements of a cached row from element first into v (DL >= dl; the
 * rest zero): 16-byte loads when the lane's part is whole and aligned. */
template <int KT, int DL>
__device__ static inline void kv_part(const uint8_t *row, int64_t first, int dl, float v[DL])
{
    if constexpr (KT == KV_F16 && DL % 8 == 0) {
        if (dl == DL) { /* rows are 2d = 16 DL bytes: aligned */
            const uint4 *p = (const uint4 *)(row + 2 * first);
#pragma unroll
            for (int u = 0; u < DL / 8; u++) {
                const uint4 w = p[u];
                const unsigned words[4] = { w.x, w.y, w.z, w.w };
#pragma unroll
                for (int t = 0; t < 4; t++) {
                    const float2 f = __half22float2(*(const __half2 *)&words[t]);
                    v[8 * u + 2 * t] = f.x, v[8 * u + 2 * t + 1] = f.y;
                }
            }
            return;
        }
    } else if constexpr (KT == KV_F32 && DL % 4 == 0) {
        if (dl == DL) {
            const float4 *p = (const float4 *)(row + 4 * first);
#pragma unroll
            for (int u = 0; u < DL / 4; u++) {
                const float4 w = p[u];
                v[4 * u] = w.x, v[4 * u + 1] = w.y, v[4 * u + 2] = w.z, v[4 * u + 3] = w.w;
            }
            return;
        }
    }
#pragma unroll
    for (int k = 0; k < DL; k++)
        v[k] = k < dl ? kv_at<KT>(row, first + k) : 0.0f;
}

/* A group's online softmax: its running max, sum of exponentials and
 * weighted values (its lane's part of the head). */
template <int DL>
struct online {
    float m, l, acc[DL];
};

/* TURNS turns of the CTA's groups from position j0: turn u's group g takes
 * position j0 + u ATT_GROUPS + g (if before end), whose K and V rows are
 * row j - row0 of kh and vh. Every turn's K and V loads are issued before
 * the first is used (one memory latency for TURNS turns), and o is
 * rescaled once for the TURNS scores. How positions fall into turns
 * depends only on the chunk's bounds and the kernel's TURNS, so a query
 * gets the same bits in a batch as alone. Every lane of a warp runs every
 * turn: the shuffles need them all. */
template <int KT, int DL, int TURNS>
__device__ static inline void attend_turns(const uint8_t *kh, const uint8_t *vh, int64_t row0, size_t row_bytes, int64_t j0,
                                           int64_t end, int g, int64_t first, int dl, const float qv[DL], float scale,
                                           struct online<DL> &o)
{
    float kv[TURNS][DL], vv[TURNS][DL];
#pragma unroll
    for (int u = 0; u < TURNS; u++) {
        const int64_t j = j0 + u * ATT_GROUPS + g;
        if (j < end) {
            kv_part<KT, DL>(kh + (size_t)(j - row0) * row_bytes, first, dl, kv[u]);
            kv_part<KT, DL>(vh + (size_t)(j - row0) * row_bytes, first, dl, vv[u]);
        } else {
#pragma unroll
            for (int k = 0; k < DL; k++)
                kv[u][k] = vv[u][k] = 0.0f;
        }
    }
    float sc[TURNS], mn = o.m; /* the turns' scores (-inf past the end) and the new max */
#pragma unroll
    for (int u = 0; u < TURNS; u++) {
        float dot = 0.0f;
#pragma unroll
        for (int k = 0; k < DL; k++)
            dot = __fmaf_rn(qv[k], kv[u][k], dot);
        for (int off = 4; off > 0; off >>= 1) /* the group's 8 lanes, a fixed butterfly */
            dot = __fadd_rn(dot, __shfl_xor_sync(0xffffffffu, dot, off));
        sc[u] = j0 + u * ATT_GROUPS + g < end ? __fmul_rn(dot, scale) : -INFINITY;
        mn = fmaxf(mn, sc[u]);
    }
    if (mn == -INFINITY) /* no position in these turns, none before */
        return;
    /* what came before rescaled once to the new max, then each turn's
     * exponential (independent of each other: their latencies overlap) */
    const float corr = expf(o.m - mn);
    o.l = __fmul_rn(o.l, corr);
#pragma unroll
    for (int k = 0; k < DL; k++)
        o.acc[k] = __fmul_rn(o.acc[k], corr);
#pragma unroll
    for (int u = 0; u < TURNS; u++) {
        if (sc[u] == -INFINITY)
            continue;
        const float e = expf(sc[u] - mn);
        o.l = __fadd_rn(o.l, e);
#pragma unroll
        for (int k = 0; k < DL; k++)
            o.acc[k] = __fmaf_rn(e, vv[u][k], o.acc[k]);
    }
    o.m = mn;
}

/* A decode step's chunk of rows start..end - 1 into shared memory at st
 * (K's rows, then V's, chunk rows apart). The rows before the step's
 * position p were stored by earlier steps: stage_old asks for them, one
 * bulk copy each of K and V (sm_90's TMA unit), before the grid dependency
 * wait, while the kernel before still runs. Row p, which that kernel
 * stores, is copied after the wait (stage_new), which then waits for the
 * bulk copies. */
__device__ static inline int64_t old_rows(int64_t start, int64_t end, int64_t p) { return (end == p + 1 ? p : end) - start; }

__device__ static void stage_old(const uint8_t *kh, const uint8_t *vh, int64_t start, int64_t end, int64_t p,
                                 size_t row_bytes, uint8_t *st, int64_t chunk, uint64_t *bar, bool kv_first)
{
    const int64_t old = old_rows(start, end, p);
    if (old > 0 && threadIdx.x == 0) {
        const unsigned n = (unsigned)((size_t)old * row_bytes);
        bulk_arm(bar, 2 * n);
        if (kv_first) {
            const uint64_t first = l2_evict_first();
            bulk_copy_hinted(st, kh + (size_t)start * row_bytes, n, bar, first);
            bulk_copy_hinted(st + (size_t)chunk * row_bytes, vh + (size_t)start * row_bytes, n, bar, first);
        } else {
            bulk_copy(st, kh + (size_t)start * row_bytes, n, bar);
            bulk_copy(st + (size_t)chunk * row_bytes, vh + (size_t)start * row_bytes, n, bar);
        }
    }
}

__device__ static void stage_new(const uint8_t *kh, const uint8_t *vh, int64_t start, int64_t end, int64_t p,
                                 size_t row_bytes, uint8_t *st, int64_t chunk, uint64_t *bar)
{
    const int64_t old = old_rows(start, end, p);
    if (end == p + 1) /* this step's row, 16 bytes a thread */
        for (size_t i = 16 * threadIdx.x; i < 2 * row_bytes; i += 16 * ATT_THREADS) {
            const bool v = i >= row_bytes;
            const size_t in_row = v ? i - row_bytes : i;
            *(uint4 *)(st + (v ? (size_t)chunk * row_bytes : 0) + (size_t)old * row_bytes + in_row) =
                *(const uint4 *)((v ? vh : kh) + (size_t)p * row_bytes + in_row);
        }
    __syncthreads(); /* the barrier armed, this step's row in */
    if (old > 0)
        bulk_wait(bar);
}

/* CTAs an SM holds at least, by registers: 1024 threads' worth (64
 * registers a thread) for the f32 and f16 heads up to 64 wide (left alone
 * at 256 threads, ptxas takes 80 registers unstaged, 95 staged: 3 and 2
 * CTAs an SM, where a long context's launch is many waves of them; at 64
 * nothing spills; Q8_0 rows would), else 0: ptxas's own choice. */
constexpr int att_min_blocks(int kt, int dl) { return kt != KV_Q8_0 && dl <= 8 ? 1024 / ATT_THREADS : 0; }

/* One CTA per (chunk, head, query): partial = { max, sum of exps, d weighted
 * values } over the chunk's positions. ATT_GROUPS groups of 8 lanes take
 * positions start + g, start + g + ATT_GROUPS, ...; lane i of a group holds
 * elements [i dl, (i + 1) dl) of the head (dl = d / 8 <= DL): a score is
 * its lanes' partial dots added in a fixed butterfly, and each group keeps
 * an online softmax (running max, sum and weighted values) in registers.
 * The groups then merge in group order through shared memory. Chunks past
 * the query's position hold nothing and return at once; a query whose
 * positions fit one chunk is finished by that chunk's CTA (no partials);
 * otherwise the last chunk to finish, as counted by an atomic ticket,
 * combines them. The ticket decides only who combines, never the order of
 * a sum, so the bits do not depend on timing; the combiner leaves it at
 * zero for the next launch. (Measured per phase with clock64 stamps, at
 * 128 threads and chunks of 64: the combine and its ticket took ~3 us of
 * a 6 us launch; hence chunks of 128 for 256 threads, so that a context
 * under 128 positions has none, and a combine in one trip to L2.) */
template <int KT, int DL, bool STAGE>
__global__ void __launch_bounds__(ATT_THREADS, att_min_blocks(KT, DL)) attention_kernel(
    const uint8_t *__restrict__ kl, const uint8_t *__restrict__ vl, const float *__restrict__ q,
    const int32_t *__restrict__ pos, int64_t c_base, int64_t d, int64_t h, int64_t group, int64_t n_ctx, int64_t chunk,
    int64_t window, size_t row_bytes, float *__restrict__ partial, unsigned *__restrict__ tickets, float *__restrict__ y,
    uint8_t *__restrict__ q8, bool kv_first)
{
    /* ATT_GROUPS x (d + 2): each group's max, sum and values; with STAGE,
     * then the chunk's K rows and its V rows */
    extern __shared__ __align__(16) float smem[];
    __shared__ bool last;
    __shared__ uint64_t staged_bar;
    /* staged, the positions are read before the wait: they are the graph's
     * input, written before its first kernel (the arena slot's next writer
     * comes after this kernel) */
    if (!STAGE)
        grid_begin();
    const int64_t s = blockIdx.x, head = blockIdx.y, c = c_base + blockIdx.z, kvh = head / group;
    /* positions lo..p, in chunks s_lo..s_lo + live - 1 */
    const int64_t p = pos[c], lo = window > 0 && p >= window ? p - window + 1 : 0, s_lo = lo / chunk;
    const int64_t live = p / chunk + 1 - s_lo, start = s * chunk > lo ? s * chunk : lo;
    const int64_t end = s * chunk + chunk < p + 1 ? s * chunk + chunk : p + 1;
    if (s < s_lo || s >= s_lo + live)
        return;
    const int g = threadIdx.x / 8, lane = threadIdx.x % 8, dl = (int)(d / 8);
    const int64_t first = (int64_t)lane * dl;
    const float scale = __fdiv_rn(1.0f, sqrtf((float)d));
    const uint8_t *kh = kl + (size_t)kvh * (size_t)n_ctx * row_bytes, *vh = vl + (size_t)kvh * (size_t)n_ctx * row_bytes;
    uint8_t *st = (uint8_t *)(smem + (size_t)ATT_GROUPS * (size_t)(d + 2));
    if (STAGE) { /* the chunk's rows into shared memory, the query's loads in flight meanwhile */
        stage_old(kh, vh, start, end, p, row_bytes, st, chunk, &staged_bar, kv_first);
        grid_begin();
    }
    float qv[DL];
    const float *qh = q + ((size_t)c * (size_t)h + (size_t)head) * (size_t)d;
#pragma unroll
    for (int k = 0; k < DL; k++)
        qv[k] = k < dl ? qh[first + k] : 0.0f;
    int64_t row0 = 0; /* the row kh and vh begin at */
    if (STAGE) {
        stage_new(kh, vh, start, end, p, row_bytes, st, chunk, &staged_bar);
        kh = st, vh = st + (size_t)chunk * row_bytes, row0 = start;
    }
    struct online<DL> o = { -INFINITY, 0.0f, {} };
    /* whole blocks of TURNS turns (TURNS turns' loads in flight at once),
     * then single turns: no turn past the chunk's end */
    constexpr int TURNS = KT != KV_Q8_0 && DL <= 16 ? ATT_TURNS : 1; /* Q8_0 rows, wider heads: spills */
    int64_t j0 = start;
    for (; j0 + TURNS * ATT_GROUPS <= end; j0 += TURNS * ATT_GROUPS)
        attend_turns<KT, DL, TURNS>(kh, vh, row0, row_bytes, j0, end, g, first, dl, qv, scale, o);
    for (; j0 < end; j0 += ATT_GROUPS)
        attend_turns<KT, DL, 1>(kh, vh, row0, row_bytes, j0, end, g, first, dl, qv, scale, o);
    const float m = o.m, l = o.l;
    float *acc = o.acc;
    float *mine = smem + (size_t)g * (size_t)(d + 2);
    if (lane == 0)
        mine[0] = m, mine[1] = l;
#pragma unroll
    for (int k = 0; k < DL; k++)
        if (k < dl)
            mine[2 + first + k] = acc[k];
    __syncthreads();
    /* the groups in order, each weighed by exp(its max - the max), formed
     * once (a group without positions: max -inf, weight 0, adds nothing);
     * every group's loads asked for at once */
    __shared__ float weight[ATT_GROUPS];
    float M = -INFINITY;
#pragma unroll
    for (int k = 0; k < ATT_GROUPS; k++)
        M = fmaxf(M, smem[(size_t)k * (size_t)(d + 2)]);
    if (threadIdx.x < ATT_GROUPS)
        weight[threadIdx.x] = expf(smem[(size_t)threadIdx.x * (size_t)(d + 2)] - M);
    __syncthreads();
    float L = 0.0f;
#pragma unroll
    for (int k = 0; k < ATT_GROUPS; k++)
        L = __fmaf_rn(smem[(size_t)k * (size_t)(d + 2) + 1], weight[k], L);
    const auto merged = [&](int64_t i) {
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < ATT_GROUPS; k++)
            sum = __fmaf_rn(smem[(size_t)k * (size_t)(d + 2) + 2 + i], weight[k], sum);
        return sum;
    };
    if (live == 1) { /* the only chunk: no partials, no combine */
        float *yh = y + ((size_t)c * (size_t)h + (size_t)head) * (size_t)d;
        uint8_t *q8h = q8 ? q8 + (size_t)c * (size_t)(d * h / 32) * 36 + (size_t)(head * (d / 32)) * 36 : nullptr;
        for (int64_t i = threadIdx.x; i < d; i += ATT_THREADS) { /* whole warps when q8 (d % 32 == 0) */
            const float out = __fdiv_rn(merged(i), L);
            yh[i] = out;
            if (q8h) /* warp i / 32 holds block i / 32 */
                q8_1_block(out, q8h + (size_t)(i / 32) * 36);
        }
        timeline_mark(TIMELINE_DONE);
        return;
    }
    float *out = partial + (((size_t)blockIdx.z * (size_t)h + (size_t)head) * (size_t)gridDim.x + (size_t)s) * (size_t)(d + 2);
    if (threadIdx.x == 0)
        out[0] = M, out[1] = L;
    for (int64_t i = threadIdx.x; i < d; i += ATT_THREADS)
        out[2 + i] = merged(i);
    __syncthreads(); /* the CTA's partial written: thread 0's release publishes it (ticket_take) */
    unsigned *ticket = tickets + (size_t)blockIdx.z * (size_t)h + (size_t)head;
    if (threadIdx.x == 0)
        last = ticket_take(ticket) == (unsigned)live - 1;
    __syncthreads();
    if (!last)
        return;
    const size_t col_bytes = (size_t)(d * h / 32) * 36;
    float *pc = partial + (((size_t)blockIdx.z * (size_t)h + (size_t)head) * (size_t)gridDim.x + (size_t)s_lo) * (size_t)(d + 2);
    combine_chunks(pc, live, d, y + ((size_t)c * (size_t)h + (size_t)head) * (size_t)d,
                   q8 ? q8 + (size_t)c * col_bytes + (size_t)(head * (d / 32)) * 36 : NULL);
    if (threadIdx.x == 0)
        *ticket = 0;
    timeline_mark(TIMELINE_DONE);
}

/* Whether the staged rows of the cache pass through L2 first to go
 * (l2_evict_first), as the weights do: so that a long context's rows,
 * read once a step and past L2's size, do not evict the activations; yes,
 * or MINFER_KV_EVICT=0 (for measurements). */
static bool kv_l2_first(void)
{
    static std::atomic<long long> m{ -1 };
    return measured_setting("MINFER_KV_EVICT", 1, 0, 1, &m) != 0;
}

template <int KT, int DL>
static void launch_attention(bool stage, dim3 grid, size_t smem, cudaStream_t st, const uint8_t *kb, const uint8_t *vb,
                             const float *q, const int32_t *pos, int64_t c0, int64_t d, int64_t h, int64_t group,
                             int64_t n_ctx, int64_t chunk, int64_t window, size_t rb, float *scratch, unsigned *tickets,
                             float *y, uint8_t *q8)
{
    if (stage) { /* only where staged (sm_90): sm_89's blocks take at most 99 KiB, and a refusal would stay latched */
        static const bool opted = (cuda_smem_opt_in((const void *)attention_kernel<KT, DL, true>, ATT_STAGE_MAX), true);
        (void)opted;
        launch(attention_kernel<KT, DL, true>, grid, ATT_THREADS, smem + 2 * (size_t)chunk * rb, st, kb, vb, q, pos, c0, d, h,
               group, n_ctx, chunk, window, rb, scratch, tickets, y, q8, kv_l2_first());
    } else {
        launch(attention_kernel<KT, DL, false>, grid, ATT_THREADS, smem, st, kb, vb, q, pos, c0, d, h, group, n_ctx, chunk,
               window, rb, scratch, tickets, y, q8, false);
    }
}

template <int KT>
static void launch_attention_kt(bool stage, dim3 grid, size_t smem, cudaStream_t st, const uint8_t *kb, const uint8_t *vb,
                                const float *q, const int32_t *pos, int64_t c0, int64_t d, int64_t h, int64_t group,
                                int64_t n_ctx, int64_t chunk, int64_t window, size_t rb, float *scratch, unsigned *tickets,
                                float *y, uint8_t *q8)
{
#define ATT_ARGS stage, grid, smem, st, kb, vb, q, pos, c0, d, h, group, n_ctx, chunk, window, rb, scratch, tickets, y, q8
    if (d <= 64)
        launch_attention<KT, 8>(ATT_ARGS);
    else if (d <= 128)
        launch_attention<KT, 16>(ATT_ARGS);
    else
        launch_attention<KT, 32>(ATT_ARGS);
#undef ATT_ARGS
}

/* Whether a launch of ctas CTAs stages its chunks' rows in shared memory
 * (stage_old): a decode step's (a batch's later tokens read rows its
 * earlier ones store, which may not be read before the wait), on sm_90,
 * with rows of whole 16-byte units, and a chunk's K and V rows beside the
 * rest within 48 KiB, or more (opted in, up to ATT_STAGE_MAX) when the
 * launch is one wave of CTAs that big (a short context's; at long ones,
 * many CTAs of fewer bytes each keep more loads in flight). */
static bool stage_chunks(int64_t nt, size_t rb, int64_t chunk, size_t smem, int64_t ctas)
{
    const size_t bytes = smem + 2 * (size_t)chunk * rb;
    if (nt != 1 || !cuda_stage_enabled() || rb % 16)
        return false;
    const int64_t per_sm = (int64_t)(cuda_sm_shared_bytes() / (bytes + 1024)); /* 1 KiB of each CTA's is reserved */
    return bytes <= 48 * 1024 || (bytes <= ATT_STAGE_MAX && ctas <= per_sm * (int64_t)cuda_sm_count());
}

extern "C" int cuda_attention(enum kv_type kt, const void *kl, const void *vl, const float *q, const int32_t *pos,
                              int64_t d, int64_t h, int64_t h_kv, int64_t nt, int64_t n_ctx, int64_t chunk,
                              int64_t span, int64_t window, float *scratch, float *y, void *q8, void *stream,
                              struct error *e)
{
    const int64_t S = n_chunks(n_ctx, chunk), launched = n_chunks(span, chunk);
    const size_t smem = (size_t)ATT_GROUPS * (size_t)(d + 2) * sizeof(float); /* the groups' partials */
    if (d <= 0 || d % 8 || d > ATT_MAX_HEAD || h <= 0 || h_kv <= 0 || h % h_kv || nt <= 0 || S > ATT_MAX_CHUNKS ||
        (q8 && d % 32) || (kt == KV_Q8_0 && d % 32) || window < 0)
        return fail(e, "attention: %lld heads of %lld (a multiple of 8 up to %d) over %lld KV heads, %lld chunks of %lld "
                       "(at most %d)", (long long)h, (long long)d, ATT_MAX_HEAD, (long long)h_kv, (long long)S,
                    (long long)chunk, ATT_MAX_CHUNKS);
    if (span < 1 || span > n_ctx)
        return fail(e, "attention: a span of %lld positions outside the cache's 1..%lld", (long long)span,
                    (long long)n_ctx);
    const size_t rb = kv_row_bytes(kt, d);
    const uint8_t *kb = (const uint8_t *)kl, *vb = (const uint8_t *)vl;
    cudaStream_t st = (cudaStream_t)stream;
    if (nt > CUDA_PROMPT_MIN_COLUMNS && cuda_attention_prefill_fits(d)) {
        if (cuda_launch_begin("attention_prefill_kernel", e))
            return -1;
        cuda_attention_prefill(kt, kb, vb, q, pos, d, h, h_kv, nt, n_ctx, window, rb, y, (uint8_t *)q8, st);
        return cuda_launch_end("attention_prefill_kernel", e);
    }
    unsigned *tickets = (unsigned *)(scratch + (size_t)ATT_QUERIES * (size_t)h * (size_t)S * (size_t)(d + 2));
    for (int64_t c0 = 0; c0 < nt; c0 += ATT_QUERIES) {
        const unsigned nq = (unsigned)(nt - c0 < ATT_QUERIES ? nt - c0 : ATT_QUERIES);
        const dim3 grid((unsigned)launched, (unsigned)h, nq);
        uint8_t *q8b = (uint8_t *)q8;
        const bool stage = stage_chunks(nt, rb, chunk, smem, launched * h);
        if (cuda_launch_begin("attention_kernel", e))
            return -1;
        if (kt == KV_F32)
            launch_attention_kt<KV_F32>(stage, grid, smem, st, kb, vb, q, pos, c0, d, h, h / h_kv, n_ctx, chunk, window, rb, scratch,
                                        tickets, y, q8b);
        else if (kt == KV_F16)
            launch_attention_kt<KV_F16>(stage, grid, smem, st, kb, vb, q, pos, c0, d, h, h / h_kv, n_ctx, chunk, window, rb, scratch,
                                        tickets, y, q8b);
        else
            launch_attention_kt<KV_Q8_0>(stage, grid, smem, st, kb, vb, q, pos, c0, d, h, h / h_kv, n_ctx, chunk, window, rb, scratch,
                                         tickets, y, q8b);
        if (cuda_launch_end("attention_kernel", e))
            return -1;
    }
    return 0;
}
