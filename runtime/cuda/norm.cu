/* norm.cu: RMS norms (optionally emitting the Q8_1 blocks the next matmuls
 * read) and the per-head norm and RoPE. The arithmetic is the CPU's: the
 * sum of squares in double, the scale in float, each product rounded once;
 * only the order of the double sum differs (a fixed tree here). RoPE forms
 * its angle in double as the CPU does. */
#include <string.h>

#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"
#include "graph_ops.h"

#define NORM_THREADS 256 /* a CTA's slice of a column: eight Q8_1 blocks */
#define NORM_VALS 32     /* values a thread at most: rows of up to 8192 */
#define HEAD_THREADS 128

/* The sum of v over the CTA's threads, in a fixed order: a butterfly in
 * each warp, then the warps' sums in order (shared: one per warp). */
__device__ static double block_sum(double v, double *shared)
{
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    if (threadIdx.x % 32 == 0)
        shared[threadIdx.x / 32] = v;
    __syncthreads();
    double total = 0;
    for (unsigned w = 0; w < blockDim.x / 32; w++)
        total += shared[w];
    __syncthreads();
    return total;
}

/* One output value at row at of column blockIdx.y: x times the scale and
 * the weight, plus the residual (the elementwise ADD's rounding), as f32
 * or into its Q8_1 block (whole warps alike: d is a multiple of 32). */
__device__ static inline void rms_emit(float x, float scale, float w, const float *res, float r, int64_t at, int64_t d,
                                       float *y, uint8_t *q8)
{
    float v = __fmul_rn(__fmul_rn(x, scale), w);
    if (res)
        v = __fadd_rn(v, r);
    if (q8)
        q8_1_block(v, q8 + (size_t)blockIdx.y * (size_t)(d / 32) * 36 + (size_t)(at / 32) * 36);
    else
        y[(size_t)blockIdx.y * (size_t)d + (size_t)at] = v;
}

/* CTA (s, c) writes slice s of column c (elements 256 s .. 256 s + 255:
 * eight Q8_1 blocks, one a warp, all in parallel); a prompt's launch is
 * one CTA a column, writing all its slices (the sums are not formed again
 * for every slice). Every CTA of a column first forms the column's whole
 * sum of squares (16 KiB from L2 at most), in one order whatever CTA
 * computes it: thread t adds the squares of elements t, t + 256, ... in
 * turn, then block_sum's fixed tree; so every slice gets the same scale,
 * and a column the same bits in any batch. Every load (the values, and of
 * the CTA's slices the weights and residuals) is asked for up front, so
 * the kernel waits on memory once, not once a slice; a step's CTA picks
 * its one value by selects, not by V predicated copies of the output. */
template <int V> /* values a thread: d <= 256 V */
__global__ void __launch_bounds__(NORM_THREADS) rms_norm_kernel(const float *__restrict__ x, const float *__restrict__ w,
                                                                float eps, int64_t d, const float *__restrict__ res,
                                                                float *__restrict__ y, uint8_t *__restrict__ q8)
{
    __shared__ double partial[NORM_THREADS / 32];
    const bool step = gridDim.x > 1; /* a step's launch: the CTA writes slice blockIdx.x alone */
    const int64_t own = (int64_t)blockIdx.x * NORM_THREADS + threadIdx.x;
    float xv[V], wv[V], rv[V];
#pragma unroll
    for (int j = 0; j < V; j++) { /* weights are read-only: before the wait */
        const int64_t i = threadIdx.x + (int64_t)j * NORM_THREADS;
        wv[j] = !step && i < d ? w[i] : 0.0f;
    }
    const float w_own = step && own < d ? w[own] : 0.0f;
    grid_begin();
    const size_t col = (size_t)blockIdx.y * (size_t)d;
#pragma unroll
    for (int j = 0; j < V; j++) {
        const int64_t i = threadIdx.x + (int64_t)j * NORM_THREADS;
        xv[j] = i < d ? x[col + (size_t)i] : 0.0f;
        rv[j] = !step && res && i < d ? res[col + (size_t)i] : 0.0f;
    }
    const float r_own = step && res && own < d ? res[col + (size_t)own] : 0.0f;
    double ss = 0;
#pragma unroll
    for (int j = 0; j < V; j++)
        if (threadIdx.x + (int64_t)j * NORM_THREADS < d)
            ss += (double)xv[j] * xv[j];
    ss = block_sum(ss, partial);
    const float scale = __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(ss / (double)d), eps)));
    if (step) {
        float x_own = 0.0f;
#pragma unroll
        for (int j = 0; j < V; j++)
            x_own = j == (int)blockIdx.x ? xv[j] : x_own;
        if (own < d)
            rms_emit(x_own, scale, w_own, res, r_own, own, d, y, q8);
        timeline_mark(TIMELINE_DONE);
        return;
    }
#pragma unroll
    for (int j = 0; j < V; j++) {
        const int64_t at = threadIdx.x + (int64_t)j * NORM_THREADS;
        if (at < d)
            rms_emit(xv[j], scale, wv[j], res, rv[j], at, d, y, q8);
    }
    timeline_mark(TIMELINE_DONE);
}

extern "C" int cuda_rms_norm(const float *x, const float *w, float eps, int64_t d, int64_t nt, const float *res, float *y,
                             void *q8, void *stream, struct error *e)
{
    if (d <= 0 || d > NORM_THREADS * NORM_VALS || nt <= 0 || nt > 65535 || (q8 && d % 32))
        return fail(e, "rms_norm: %lld columns (at most 65535) of %lld (at most %d%s)", (long long)nt, (long long)d,
                    NORM_THREADS * NORM_VALS, q8 ? "; Q8_1 output needs a multiple of 32" : "");
    const dim3 grid(nt > CUDA_PROMPT_MIN_COLUMNS ? 1u : (unsigned)((d + NORM_THREADS - 1) / NORM_THREADS), (unsigned)nt);
    if (cuda_launch_begin("rms_norm_kernel", e))
        return -1;
    const int slices = (int)((d + NORM_THREADS - 1) / NORM_THREADS);
    if (slices <= 4)
        launch(rms_norm_kernel<4>, grid, NORM_THREADS, 0, (cudaStream_t)stream, x, w, eps, d, res, y, (uint8_t *)q8);
    else if (slices <= 8)
        launch(rms_norm_kernel<8>, grid, NORM_THREADS, 0, (cudaStream_t)stream, x, w, eps, d, res, y, (uint8_t *)q8);
    else if (slices <= 16)
        launch(rms_norm_kernel<16>, grid, NORM_THREADS, 0, (cudaStream_t)stream, x, w, eps, d, res, y, (uint8_t *)q8);
    else
        launch(rms_norm_kernel<NORM_VALS>, grid, NORM_THREADS, 0, (cudaStream_t)stream, x, w, eps, d, res, y, (uint8_t *)q8);
    return cuda_launch_end("rms_norm_kernel", e);
}

/* Q's and K's heads (one or two tensors) of a column, normed and rotated,
 * and with a KV store (KT a kv_type, else -1) the last tensor's heads and
 * V's also put into the cache. grid.x: groups of `group` heads over Q's,
 * K's, then V's; grid.y: columns. A decode step's launch has one head a CTA,
 * all its threads on it, each forming its pairs' rotation. A prompt's has
 * eight: the CTA first forms the column's rotation (cos and sin of every
 * pair's angle) once for all of them, then each warp takes heads warp,
 * warp + 4, ... (a head a CTA, the double sin and cos of every head were
 * most of a prompt's launch). The same bits either way. */
struct hnr_args {
    struct cuda_heads part[2];
    int n_part;
    int64_t heads, group; /* Q's and K's heads (and V's, storing); heads a CTA */
    float eps, rope_base;
    double rope_factor; /* linear scaling: positions over it (1: none) */
    int style;
    const int32_t *pos;
    int64_t d;
    struct cuda_kv_dest store;
    size_t row_bytes; /* of a cached row */
    float2 *rot;      /* a decode step's rotation (struct cuda_rotation), or NULL */
    bool rot_formed;
};

/* The sum of the squares of x[0..d), in the order of a 128-thread CTA's
 * block_sum (thread t adds elements t, t + 128, ... in turn; warps'
 * butterflies; the four warps' sums in order), formed by one warp: so the
 * bits do not depend on how many warps share a head. */
__device__ static double head_square_sum(const float *x, int64_t d)
{
    const int lane = threadIdx.x % 32;
    double total = 0;
    for (int w = 0; w < HEAD_THREADS / 32; w++) {
        double ss = 0;
        for (int64_t i = 32 * w + lane; i < d; i += HEAD_THREADS)
            ss += (double)x[i] * x[i];
        for (int off = 16; off > 0; off >>= 1)
            ss += __shfl_xor_sync(0xffffffffu, ss, off);
        total += ss;
    }
    return total;
}

/* Pair i's angle at position pos (freq0: pair threadIdx.x's frequency). */
__device__ static inline double rope_angle(const struct hnr_args &a, int32_t pos, int64_t i, double freq0)
{
    return (double)pos * (i == threadIdx.x ? freq0 : pow((double)a.rope_base, -2.0 * (double)i / (double)a.d) / a.rope_factor);
}

/* Head hh of column c, by n threads (t: this one's index among them): the
 * whole CTA (a decode step's launch) or one warp (a prompt's). v is the
 * head's d floats of shared memory, rot the column's rotation (NULL: each
 * thread forms its pairs' own). */
template <int KT>
__device__ static void head_norm_rope_one(const struct hnr_args &a, int64_t hh, int64_t c, const float2 *rot, double freq0,
                                          float *v, int t, int n, double *partial)
{
    const int64_t d = a.d;
    int64_t head = hh;
    const struct cuda_heads *p = &a.part[0];
    if (a.n_part > 1 && head >= p->h)
        head -= p->h, p = &a.part[1];
    const struct cuda_heads *kp = &a.part[a.n_part - 1]; /* K, when storing */
    if constexpr (KT >= 0) {
        if (head >= p->h) { /* a V head: into the cache as it is */
            head -= p->h;
            const size_t at = ((size_t)head * (size_t)a.store.n_ctx + (size_t)a.pos[c]) * a.row_bytes;
            kv_row_write<KT>((uint8_t *)a.store.vl + at, a.store.v + ((size_t)c * (size_t)kp->h + (size_t)head) * (size_t)d, d, t, n);
            return;
        }
    }
    const size_t at = ((size_t)c * (size_t)p->h + (size_t)head) * (size_t)d;
    const float *xh = p->x + at;
    float *yh = p->y + at;
    if (p->w) {
        double ss;
        if (n == HEAD_THREADS) {
            ss = 0;
            for (int64_t i = t; i < d; i += HEAD_THREADS)
                ss += (double)xh[i] * xh[i];
            ss = block_sum(ss, partial);
        } else {
            ss = head_square_sum(xh, d);
        }
        const float scale = __fdiv_rn(1.0f, sqrtf(__fadd_rn((float)(ss / (double)d), a.eps)));
        for (int64_t i = t; i < d; i += n)
            v[i] = __fmul_rn(__fmul_rn(xh[i], scale), p->w[i]);
    } else {
        for (int64_t i = t; i < d; i += n)
            v[i] = xh[i];
    }
    n == HEAD_THREADS ? __syncthreads() : __syncwarp();
    if (a.rope_base <= 0) {
        for (int64_t i = t; i < d; i += n)
            yh[i] = v[i];
    } else {
        for (int64_t i = t; i < d / 2; i += n) {
            float cs, sn;
            if (rot) {
                cs = rot[i].x, sn = rot[i].y;
            } else {
                const double theta = rope_angle(a, a.pos[c], i, freq0);
                cs = (float)cos(theta), sn = (float)sin(theta);
                if (a.rot && hh == 0) /* the step's rotation, for its head launches after this one */
                    a.rot[i] = make_float2(cs, sn);
            }
            const int64_t x0i = a.style == ROPE_NEOX ? i : 2 * i, x1i = a.style == ROPE_NEOX ? i + d / 2 : 2 * i + 1;
            const float x0 = v[x0i], x1 = v[x1i];
            /* each pair is read and written by one thread: v can take the result */
            v[x0i] = yh[x0i] = __fsub_rn(__fmul_rn(x0, cs), __fmul_rn(x1, sn));
            v[x1i] = yh[x1i] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, cs));
        }
    }
    if constexpr (KT >= 0) {
        if (p == kp) {
            n == HEAD_THREADS ? __syncthreads() : __syncwarp();
            const size_t row = ((size_t)head * (size_t)a.store.n_ctx + (size_t)a.pos[c]) * a.row_bytes;
            kv_row_write<KT>((uint8_t *)a.store.kl + row, v, d, t, n);
        }
    }
    __syncwarp(); /* v is read before the warp's next head overwrites it */
}

template <int KT>
__global__ void __launch_bounds__(HEAD_THREADS) head_norm_rope_kernel(const struct hnr_args a)
{
    extern __shared__ float smem[]; /* a decode step's: the head's d floats; a prompt's: the rotation (d / 2 pairs of cos, sin), then d floats a warp */
    const int64_t d = a.d;
    float2 *rot = (float2 *)smem;
    /* the frequency of this thread's first pair depends on the arguments
     * alone: formed while the kernel before still runs */
    const double freq0 = a.rope_base > 0 ? pow((double)a.rope_base, -2.0 * (double)threadIdx.x / (double)d) / a.rope_factor : 0.0;
    grid_begin();
    const int64_t c = blockIdx.y;
    __shared__ double partial[HEAD_THREADS / 32];
    if (a.group == 1) { /* the CTA's threads together, each forming its pairs' rotation (or reading the step's): a decode step's shortest path */
        head_norm_rope_one<KT>(a, blockIdx.x, c, a.rot_formed ? a.rot : NULL, freq0, smem, threadIdx.x, HEAD_THREADS, partial);
        timeline_mark(TIMELINE_DONE);
        return;
    }
    if (a.rope_base > 0)
        for (int64_t i = threadIdx.x; i < d / 2; i += HEAD_THREADS) {
            const double theta = rope_angle(a, a.pos[c], i, freq0);
            rot[i] = make_float2((float)cos(theta), (float)sin(theta));
        }
    __syncthreads();
    const int64_t first = (int64_t)blockIdx.x * a.group, end = first + a.group < a.heads ? first + a.group : a.heads;
    for (int64_t hh = first + threadIdx.x / 32; hh < end; hh += HEAD_THREADS / 32)
        head_norm_rope_one<KT>(a, hh, c, rot, freq0, smem + d + (threadIdx.x / 32) * d, threadIdx.x % 32, 32, partial);
}

extern "C" int cuda_head_norm_rope_parts(const struct cuda_heads *parts, int n_part, float eps, float rope_base,
                                         float rope_factor, int rope_style, const int32_t *pos, int64_t d, int64_t nt,
                                         const struct cuda_kv_dest *store, const struct cuda_rotation *rot, void *stream,
                                         struct error *e)
{
    struct hnr_args a;
    memset(&a, 0, sizeof a);
    int64_t heads = 0;
    for (int k = 0; k < n_part && k < 2; k++)
        a.part[k] = parts[k], heads += parts[k].h;
    if (n_part < 1 || n_part > 2 || d <= 0 || d % 2 || d > 2048 || nt <= 0 || nt > 65535 || (rope_base > 0 && !pos) ||
        (store && (!pos || (store->kt == KV_Q8_0 && d % 32))))
        return fail(e, "head_norm_rope: %d tensors of %lld heads of %lld (an even size up to 2048%s), %lld columns (at most 65535)",
                    n_part, (long long)heads, (long long)d, store && store->kt == KV_Q8_0 ? ", a multiple of 32 for a Q8_0 cache" : "",
                    (long long)nt);
    a.n_part = n_part;
    a.eps = eps;
    a.rope_base = rope_base;
    a.rope_factor = rope_factor > 0 ? (double)rope_factor : 1.0; /* the CPU's division (cpu_ops.c) */
    a.style = rope_style;
    a.pos = pos;
    a.d = d;
    if (store) {
        a.store = *store;
        a.row_bytes = kv_row_bytes(store->kt, d);
    }
    a.heads = heads + (store ? parts[n_part - 1].h : 0);
    if (rot && (nt != 1 || rope_base <= 0 || !rot->rot))
        return fail(e, "head_norm_rope: a rotation for %lld columns%s (one column, with RoPE)", (long long)nt,
                    rope_base <= 0 ? " without RoPE" : "");
    a.rot = rot ? (float2 *)rot->rot : NULL;
    a.rot_formed = rot && rot->formed;
    a.group = nt > CUDA_PROMPT_MIN_COLUMNS ? 8 : 1;
    const dim3 grid((unsigned)((a.heads + a.group - 1) / a.group), (unsigned)nt);
    const size_t smem = (size_t)d * sizeof(float) * (1 + HEAD_THREADS / 32); /* 40 KiB at most: no opt-in */
    cudaStream_t s = (cudaStream_t)stream;
    if (cuda_launch_begin("head_norm_rope_kernel", e))
        return -1;
    if (!store)
        launch(head_norm_rope_kernel<-1>, grid, HEAD_THREADS, smem, s, a);
    else if (store->kt == KV_F32)
        launch(head_norm_rope_kernel<KV_F32>, grid, HEAD_THREADS, smem, s, a);
    else if (store->kt == KV_F16)
        launch(head_norm_rope_kernel<KV_F16>, grid, HEAD_THREADS, smem, s, a);
    else
        launch(head_norm_rope_kernel<KV_Q8_0>, grid, HEAD_THREADS, smem, s, a);
    return cuda_launch_end("head_norm_rope_kernel", e);
}

extern "C" int cuda_head_norm_rope(const float *x, const float *w, float eps, float rope_base, float rope_factor,
                                   int rope_style, const int32_t *pos, int64_t d, int64_t h, int64_t nt, float *y,
                                   void *stream, struct error *e)
{
    const struct cuda_heads part = { x, w, y, h };
    return cuda_head_norm_rope_parts(&part, 1, eps, rope_base, rope_factor, rope_style, pos, d, nt, NULL, NULL, stream, e);
}
