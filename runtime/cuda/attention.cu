/* attention.cu: the KV cache store and causal attention on the GPU.
 * Attention is split-K: a cache of n_ctx positions is cut into chunks of a
 * length fixed for the engine (cuda_attention_chunk), one CTA per (chunk,
 * head, query) forms that chunk's scores, their max, the sum of their
 * exponentials and the weighted sum of values (an exact softmax within the
 * chunk), and a second kernel combines the chunks in order. The cut never
 * depends on the batch, the position or timing, so a query gets the same
 * bits in a batch as alone. Scores and sums keep the CPU's order within
 * each piece: a score is a sequential dot over the head's elements. */
#include <math.h>

#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

#define ATT_THREADS 128
#define ATT_QUERIES 64 /* queries per launch: bounds the partials' scratch */
#define ATT_MAX_CHUNKS 64

static size_t kv_row_bytes(enum kv_type kt, int64_t d)
{
    return kt == KV_F32 ? 4 * (size_t)d : kt == KV_F16 ? 2 * (size_t)d : (size_t)d / 32 * 34;
}

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
    const int64_t head = blockIdx.x, c = blockIdx.y;
    const size_t at = ((size_t)head * (size_t)n_ctx + (size_t)pos[c]) * row_bytes;
    for (int which = 0; which < 2; which++) {
        const float *src = (which ? v : k) + ((size_t)c * (size_t)h_kv + (size_t)head) * (size_t)d;
        uint8_t *row = (which ? vl : kl) + at;
        if constexpr (KT == KV_F32) {
            for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
                ((float *)row)[i] = src[i];
        } else if constexpr (KT == KV_F16) {
            for (int64_t i = threadIdx.x; i < d; i += blockDim.x)
                ((__half *)row)[i] = __float2half_rn(src[i]);
        } else { /* Q8_0 as the CPU's quant_q8_0: d = amax/127, q = roundf(v / d) */
            for (int64_t b = threadIdx.x / 32; b < d / 32; b += blockDim.x / 32) {
                const int lane = threadIdx.x % 32;
                const float x = src[b * 32 + lane];
                float amax = fabsf(x);
                for (int off = 16; off > 0; off >>= 1)
                    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
                const float dq = __fdiv_rn(amax, 127.0f), id = dq != 0.0f ? __fdiv_rn(1.0f, dq) : 0.0f;
                uint8_t *blk = row + b * 34;
                blk[2 + lane] = (uint8_t)(int8_t)roundf(__fmul_rn(x, id));
                if (lane == 0) /* blocks are 34 bytes: the scale is 2-byte aligned */
                    *(unsigned short *)blk = __half_as_ushort(__float2half_rn(dq));
            }
        }
    }
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
        kv_store_kernel<KV_F32><<<grid, 128, 0, s>>>(kb, vb, k, v, pos, d, h_kv, n_ctx, rb);
    else if (kt == KV_F16)
        kv_store_kernel<KV_F16><<<grid, 128, 0, s>>>(kb, vb, k, v, pos, d, h_kv, n_ctx, rb);
    else
        kv_store_kernel<KV_Q8_0><<<grid, 128, 0, s>>>(kb, vb, k, v, pos, d, h_kv, n_ctx, rb);
    return cuda_launch_end("kv_store_kernel", e);
}

int64_t cuda_attention_chunk(int64_t n_ctx)
{
    int64_t chunk = (n_ctx + ATT_MAX_CHUNKS - 1) / ATT_MAX_CHUNKS;
    chunk = (chunk + 31) / 32 * 32;
    return chunk < 64 ? 64 : chunk;
}

static int64_t n_chunks(int64_t n_ctx, int64_t chunk) { return (n_ctx + chunk - 1) / chunk; }

size_t cuda_attention_scratch_floats(int64_t d, int64_t h, int64_t n_ctx, int64_t chunk)
{
    return (size_t)ATT_QUERIES * (size_t)h * (size_t)n_chunks(n_ctx, chunk) * (size_t)(d + 2);
}

/* max (op 0) or sum (op 1) over the CTA: each thread's value, a butterfly
 * per warp, then the warps in order. */
__device__ static float block_reduce(float v, int op, float *shared)
{
    for (int off = 16; off > 0; off >>= 1) {
        const float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = op ? v + o : fmaxf(v, o);
    }
    if (threadIdx.x % 32 == 0)
        shared[threadIdx.x / 32] = v;
    __syncthreads();
    float r = shared[0];
    for (int w = 1; w < ATT_THREADS / 32; w++)
        r = op ? r + shared[w] : fmaxf(r, shared[w]);
    __syncthreads();
    return r;
}

/* One CTA per (chunk, head, query): partial = { max, sum of exps, d weighted values }. */
template <int KT>
__global__ void attention_chunk_kernel(const uint8_t *__restrict__ kl, const uint8_t *__restrict__ vl,
                                       const float *__restrict__ q, const int32_t *__restrict__ pos, int64_t c_base,
                                       int64_t d, int64_t h, int64_t group, int64_t n_ctx, int64_t chunk,
                                       size_t row_bytes, float *__restrict__ partial)
{
    extern __shared__ float smem[];
    __shared__ float red[ATT_THREADS / 32];
    float *qs = smem, *sc = smem + d;
    const int64_t s = blockIdx.x, head = blockIdx.y, c = c_base + blockIdx.z, kvh = head / group;
    const int64_t S = gridDim.x;
    float *out = partial + (((size_t)blockIdx.z * (size_t)h + (size_t)head) * (size_t)S + (size_t)s) * (size_t)(d + 2);
    const int64_t p = pos[c], start = s * chunk, end = start + chunk < p + 1 ? start + chunk : p + 1;
    if (start >= end) {
        if (threadIdx.x == 0)
            out[0] = -INFINITY, out[1] = 0;
        return;
    }
    for (int64_t i = threadIdx.x; i < d; i += ATT_THREADS)
        qs[i] = q[((size_t)c * (size_t)h + (size_t)head) * (size_t)d + (size_t)i];
    __syncthreads();
    const float scale = __fdiv_rn(1.0f, sqrtf((float)d));
    const uint8_t *kh = kl + (size_t)kvh * (size_t)n_ctx * row_bytes, *vh = vl + (size_t)kvh * (size_t)n_ctx * row_bytes;
    float m = -INFINITY;
    for (int64_t j = start + threadIdx.x; j < end; j += ATT_THREADS) {
        const uint8_t *row = kh + (size_t)j * row_bytes;
        float dot = 0;
        for (int64_t i = 0; i < d; i++)
            dot = __fadd_rn(dot, __fmul_rn(qs[i], kv_at<KT>(row, i)));
        sc[j - start] = __fmul_rn(dot, scale);
        m = fmaxf(m, sc[j - start]);
    }
    m = block_reduce(m, 0, red);
    float l = 0;
    for (int64_t j = start + threadIdx.x; j < end; j += ATT_THREADS) {
        sc[j - start] = expf(sc[j - start] - m);
        l += sc[j - start];
    }
    l = block_reduce(l, 1, red); /* also the barrier before the scores are read below */
    for (int64_t i = threadIdx.x; i < d; i += ATT_THREADS) {
        float acc = 0;
        for (int64_t j = start; j < end; j++)
            acc = __fadd_rn(acc, __fmul_rn(sc[j - start], kv_at<KT>(vh + (size_t)j * row_bytes, i)));
        out[2 + i] = acc;
    }
    if (threadIdx.x == 0)
        out[0] = m, out[1] = l;
}

/* One CTA per (head, query): the chunks' partials combined in chunk order. */
__global__ void attention_combine_kernel(const float *__restrict__ partial, int64_t c_base, int64_t d, int64_t h,
                                         int64_t S, float *__restrict__ y, uint8_t *__restrict__ q8)
{
    extern __shared__ float outs[];
    const int64_t head = blockIdx.x, c = c_base + blockIdx.y;
    const float *pc = partial + ((size_t)blockIdx.y * (size_t)h + (size_t)head) * (size_t)S * (size_t)(d + 2);
    float M = -INFINITY;
    for (int64_t s = 0; s < S; s++)
        M = fmaxf(M, pc[s * (d + 2)]);
    float L = 0;
    for (int64_t s = 0; s < S; s++)
        if (pc[s * (d + 2) + 1] > 0)
            L += pc[s * (d + 2) + 1] * expf(pc[s * (d + 2)] - M);
    for (int64_t i = threadIdx.x; i < d; i += ATT_THREADS) {
        float acc = 0;
        for (int64_t s = 0; s < S; s++)
            if (pc[s * (d + 2) + 1] > 0)
                acc += pc[s * (d + 2) + 2 + i] * expf(pc[s * (d + 2)] - M);
        outs[i] = __fdiv_rn(acc, L);
        y[((size_t)c * (size_t)h + (size_t)head) * (size_t)d + (size_t)i] = outs[i];
    }
    if (!q8)
        return;
    __syncthreads(); /* warp b quantizes the head's 32-element blocks b, b + 4, ... */
    const size_t col_bytes = (size_t)(d * h / 32) * 36;
    for (int64_t b = threadIdx.x / 32; b < d / 32; b += ATT_THREADS / 32)
        q8_1_block(outs[b * 32 + threadIdx.x % 32], q8 + (size_t)c * col_bytes + (size_t)(head * (d / 32) + b) * 36);
}

extern "C" int cuda_attention(enum kv_type kt, const void *kl, const void *vl, const float *q, const int32_t *pos,
                              int64_t d, int64_t h, int64_t h_kv, int64_t nt, int64_t n_ctx, int64_t chunk,
                              float *scratch, float *y, void *q8, void *stream, struct error *e)
{
    const int64_t S = n_chunks(n_ctx, chunk);
    const size_t smem = (size_t)(d + chunk) * sizeof(float);
    if (d <= 0 || h <= 0 || h_kv <= 0 || h % h_kv || nt <= 0 || S > 65535 || smem > 48 * 1024 || (q8 && d % 32))
        return fail(e, "attention: %lld heads of %lld over %lld KV heads, chunks of %lld (%zu bytes of shared memory)",
                    (long long)h, (long long)d, (long long)h_kv, (long long)chunk, smem);
    const size_t rb = kv_row_bytes(kt, d);
    const uint8_t *kb = (const uint8_t *)kl, *vb = (const uint8_t *)vl;
    cudaStream_t st = (cudaStream_t)stream;
    for (int64_t c0 = 0; c0 < nt; c0 += ATT_QUERIES) {
        const unsigned nq = (unsigned)(nt - c0 < ATT_QUERIES ? nt - c0 : ATT_QUERIES);
        const dim3 grid((unsigned)S, (unsigned)h, nq);
        if (cuda_launch_begin("attention_chunk_kernel", e))
            return -1;
        if (kt == KV_F32)
            attention_chunk_kernel<KV_F32><<<grid, ATT_THREADS, smem, st>>>(kb, vb, q, pos, c0, d, h, h / h_kv, n_ctx,
                                                                            chunk, rb, scratch);
        else if (kt == KV_F16)
            attention_chunk_kernel<KV_F16><<<grid, ATT_THREADS, smem, st>>>(kb, vb, q, pos, c0, d, h, h / h_kv, n_ctx,
                                                                            chunk, rb, scratch);
        else
            attention_chunk_kernel<KV_Q8_0><<<grid, ATT_THREADS, smem, st>>>(kb, vb, q, pos, c0, d, h, h / h_kv, n_ctx,
                                                                             chunk, rb, scratch);
        if (cuda_launch_end("attention_chunk_kernel", e) || cuda_launch_begin("attention_combine_kernel", e))
            return -1;
        attention_combine_kernel<<<dim3((unsigned)h, nq), ATT_THREADS, (size_t)d * sizeof(float), st>>>(
            scratch, c0, d, h, S, y, (uint8_t *)q8);
        if (cuda_launch_end("attention_combine_kernel", e))
            return -1;
    }
    return 0;
}
