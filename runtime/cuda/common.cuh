/* common.cuh: device helpers the kernel families share: little-endian
 * loads from GGUF blocks at any alignment, the Q8_1 activation block, each
 * weight type's decoder (bit-identical to the CPU's: every product and sum
 * is rounded once, as the CPU reference does, never contracted into an
 * FMA), and each quantized type's integer dot with a Q8_1 block (dp4a, as
 * quant_dot.c's reference computes it). */
#ifndef MINFER_CUDA_COMMON_CUH
#define MINFER_CUDA_COMMON_CUH

#include <atomic>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda/weight_layout.h"
#include "kv_cache.h"
#include "quant/tensor_type.h"

#define QK8 32 /* elements per Q8_1 block */

/* ---- launches: programmatic dependent launch (sm_90) ----
 * Every kernel is launched so that the next one in the stream may be
 * scheduled while it runs: the next kernel's CTAs become resident early and
 * wait in grid_begin until this kernel has finished and its writes are
 * visible, hiding the launch gap between dependent kernels. Each kernel
 * calls grid_begin before it touches memory that another kernel writes or
 * reads (activations, caches, scratch); only what no kernel before it in
 * the step writes may be touched before it (a kernel after it cannot start
 * before it has passed its wait): read-only weights (asked into L2 or
 * shared memory), the graph's inputs, and cache rows that earlier steps
 * stored (attention.cu). grid_begin then lets the kernel
 * after it launch. Before sm_90, or with MINFER_NO_PDL=1 in the environment
 * (for measurements), launches serialize as plain ones do. */
extern "C" bool cuda_pdl_enabled(void); /* device.cu */
extern "C" bool cuda_stage_enabled(void);    /* device.cu: decode weights staged by bulk copies (sm_90) */
extern "C" int cuda_sm_count(void);     /* device.cu: multiprocessors, 0 when unknown */
extern "C" size_t cuda_sm_shared_bytes(void); /* device.cu: one multiprocessor's shared memory, 0 when unknown */
extern "C" void cuda_smem_opt_in(const void *kernel, size_t bytes); /* device.cu: dynamic shared memory past 48 KiB */

/* A setting that measurements change: the environment's integer `name`,
 * read once into memo (-1 until then), or fallback where it is unset or
 * outside [lo, hi]. */
static inline long long measured_setting(const char *name, long long fallback, long long lo, long long hi,
                                         std::atomic<long long> *memo)
{
    long long v = memo->load(std::memory_order_relaxed);
    if (v < 0) {
        const char *e = getenv(name);
        v = e ? atoll(e) : fallback;
        memo->store(v = v < lo || v > hi ? fallback : v, std::memory_order_relaxed);
    }
    return v;
}

#include "cuda/timeline.cuh" /* a measuring build's grid_begin; timeline_mark */
#ifndef MINFER_TIMELINE
__device__ static inline void grid_begin(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#endif

/* The warp asks L2 for the bytes [p, p + n) (one 128-byte line per lane). */
__device__ static inline void prefetch_l2(const uint8_t *p, size_t n)
{
    const uintptr_t first = (uintptr_t)p & ~(uintptr_t)127, end = (uintptr_t)p + n;
    for (uintptr_t at = first + 128 * (threadIdx.x % 32); at < end; at += 128 * 32)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
}

/* Four 8 x 8 matrices of 16-bit pairs from shared memory (the tensor-core
 * fragments' loader): lanes 8 m..8 m + 7 give the addresses of matrix m's
 * rows (16 bytes each), and each lane receives, of every matrix, row
 * lane / 4's bytes 4 (lane % 4).. + 3 (for int8 codes, the fragment
 * itself); with TRANS, of every matrix transposed (f16 pairs down a column). */
template <bool TRANS>
__device__ static inline void ldmatrix_x4(unsigned r[4], const void *p)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
#endif
}

/* Launches kernel k; a failure is latched for cuda_launch_end to report. */
template <typename... P, typename... A>
static inline void launch(void (*k)(P...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, A... args)
{
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = cuda_pdl_enabled() ? 1 : 0;
    (void)cudaLaunchKernelEx(&cfg, k, ((P)args)...);
}

/* A ticket counter's old value, after adding one: a release of what this
 * CTA wrote before its barrier (the CTA's writes, then __syncthreads(),
 * then one thread takes the ticket) and an acquire of what every CTA that
 * took it before wrote, in one atomic; the thread's CTA reads those after
 * a __syncthreads(), past L1 (__ldcg). */
__device__ static inline unsigned ticket_take(unsigned *t)
{
    unsigned old;
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(t) : "memory");
    return old;
}

/* ---- bulk copies into shared memory (sm_90's TMA unit) ---- */

/* One use of the mbarrier at bar: armed for `bytes` (by one thread), then
 * copies of [src, src + n) into dst (16-byte aligned, n a multiple of 16)
 * that complete it; bulk_wait returns once all those bytes are in. A
 * barrier used again (bulk_init once, then bulk_expect and the copies each
 * time) completes phase u on its u-th use: bulk_wait_phase(bar, u & 1). */
__device__ static inline void bulk_init(uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

__device__ static inline void bulk_expect(uint64_t *bar, unsigned bytes)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const unsigned b = (unsigned)__cvta_generic_to_shared(bar);
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(b), "r"(bytes) : "memory");
#endif
}

__device__ static inline void bulk_arm(uint64_t *bar, unsigned bytes)
{
    bulk_init(bar);
    bulk_expect(bar, bytes);
}

__device__ static inline void bulk_copy(void *dst, const void *src, unsigned n, uint64_t *bar)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(n), "r"((unsigned)__cvta_generic_to_shared(bar))
                 : "memory");
#endif
}

/* An L2 policy for bytes a step reads once (the weights, a long
 * context's cache rows): FIRST, their lines are the first to go when L2
 * needs room, so that streaming them past does not evict the activations
 * the next launches read back; else the default (a measurement's
 * control). */
template <bool FIRST = true>
__device__ static inline uint64_t l2_evict_first(void)
{
    uint64_t p = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (FIRST)
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    else
        asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
#endif
    return p;
}

/* One thread asks L2 for the bytes [p, p + n) (16-byte aligned, n a
 * multiple of 16) under an L2 policy. */
__device__ static inline void bulk_prefetch_l2(const void *p, unsigned n, uint64_t policy)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p), "r"(n), "l"(policy) : "memory");
#endif
}

/* bulk_copy with an L2 policy (l2_evict_first) for the bytes it reads. */
__device__ static inline void bulk_copy_hinted(void *dst, const void *src, unsigned n, uint64_t *bar, uint64_t policy)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;"
                 ::"r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(n), "r"((unsigned)__cvta_generic_to_shared(bar)),
                 "l"(policy)
                 : "memory");
#endif
}

/* Before a bulk copy into shared memory that this thread's warp read
 * (after a __syncwarp): those reads ordered before the copy's writes. */
__device__ static inline void bulk_reuse_fence(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

__device__ static inline void bulk_wait_phase(uint64_t *bar, unsigned parity)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    /* bounded: a copy that never completes traps (a launch error the
     * stream reports) instead of hanging the step */
    unsigned done = 0;
    for (unsigned polls = 0; !done; polls++) {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(parity)
                     : "memory");
        if (!done && polls == 1u << 26)
            __trap();
    }
#endif
}

__device__ static inline void bulk_wait(uint64_t *bar) { bulk_wait_phase(bar, 0); }

/* D = A B + C: A 16 x 16 f16 (rows), B 16 x 8 f16 (columns), f32 sums;
 * with BF16, A and B bf16. */
template <bool BF16 = false>
__device__ static inline void mma_f16(float d[4], const unsigned a[4], unsigned b0, unsigned b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MMA_16816(AB) \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." AB "." AB ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
    if constexpr (BF16)
        MMA_16816("bf16");
    else
        MMA_16816("f16");
#undef MMA_16816
#endif
}

__device__ static inline unsigned half2_bits(float lo, float hi)
{
    const __half2 h = __floats2half2_rn(lo, hi);
    return *(const unsigned *)&h;
}

/* SiLU and GELU (tanh approximation) as the CPU writes them (cpu.h), each
 * step rounded once, no contraction into FMAs. */
__device__ static inline float silu(float v) { return __fdiv_rn(v, __fadd_rn(1.0f, expf(-v))); }
__device__ static inline float gelu(float v)
{
    const float cube = __fmul_rn(__fmul_rn(0.044715f, v), v);
    return __fdiv_rn(v, __fadd_rn(1.0f, expf(__fmul_rn(-1.59576912160573f, __fadd_rn(v, __fmul_rn(cube, v))))));
}

__device__ static inline float half_at(const uint8_t *p)
{
    return __half2float(__ushort_as_half((unsigned short)(p[0] | p[1] << 8)));
}

/* A little-endian 32-bit word at any address (byte loads). */
__device__ static inline uint32_t u32_at(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- the stored rows (weight_layout.h): planes of the split types ---- */

/* Plane f of a stored row of nb blocks of split type T. */
template <int T>
__device__ static inline const uint8_t *plane(const uint8_t *row, int64_t nb, int f)
{
    const struct cuda_planes pl = cuda_planes_of((enum tensor_type)T);
    size_t at = 0;
#pragma unroll
    for (int i = 0; i < CUDA_PLANES_MAX; i++)
        if (i < f)
            at += (size_t)nb * (size_t)pl.size[i];
    return row + at;
}

/* Field f of block j of that row. */
template <int T>
__device__ static inline const uint8_t *field(const uint8_t *row, int64_t nb, int64_t j, int f)
{
    return plane<T>(row, nb, f) + (size_t)j * (size_t)cuda_planes_of((enum tensor_type)T).size[f];
}

/* ---- decoding: element i of a stored row of nb blocks ---- */

template <int T>
__device__ static inline float decode_at(const uint8_t *row, int64_t nb, int64_t i)
{
    if constexpr (T == TYPE_F32) {
        return __uint_as_float(u32_at(row + 4 * i));
    } else if constexpr (T == TYPE_F16) {
        return half_at(row + 2 * i);
    } else if constexpr (T == TYPE_BF16) {
        return __uint_as_float((uint32_t)(row[2 * i] | row[2 * i + 1] << 8) << 16);
    } else if constexpr (T == TYPE_Q4_K || T == TYPE_Q5_K) {
        const uint8_t *b = row + (size_t)(i / 256) * (T == TYPE_Q4_K ? 144 : 176);
        const int j = (int)(i % 256) / 32, l = (int)(i % 32);
        const uint8_t *sp = b + 4;
        const int sc = j < 4 ? sp[j] & 63 : (sp[j + 4] & 0xf) | (sp[j - 4] >> 6) << 4;
        const int mn = j < 4 ? sp[j + 4] & 63 : (sp[j + 4] >> 4) | (sp[j] >> 6) << 4;
        const uint8_t *qs = b + (T == TYPE_Q4_K ? 16 : 48);
        int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xf;
        if (T == TYPE_Q5_K)
            q |= ((b[16 + l] >> j) & 1) << 4;
        const float dl = __fmul_rn(half_at(b), (float)sc), ml = __fmul_rn(half_at(b + 2), (float)mn);
        return __fsub_rn(__fmul_rn(dl, (float)q), ml);
    } else if constexpr (T == TYPE_Q6_K) {
        const int64_t j = i / 256;
        const int e = (int)(i % 256), h = e / 128, r = e % 128;
        const uint8_t *ql = field<T>(row, nb, j, 0), *qh = field<T>(row, nb, j, 1);
        const int lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xf;
        const int hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
        const float ds = __fmul_rn(half_at(field<T>(row, nb, j, 3)), (float)(int8_t)field<T>(row, nb, j, 2)[e / 16]);
        return __fmul_rn(ds, (float)((lo | hi << 4) - 32));
    } else if constexpr (T == TYPE_Q8_0) {
        return __fmul_rn(half_at(field<T>(row, nb, i / 32, 1)), (float)(int8_t)field<T>(row, nb, i / 32, 0)[i % 32]);
    } else { /* Q4_0, Q4_1, Q5_0, Q5_1: qs, then (Q5) qh, then d (and m) */
        const int64_t j = i / 32;
        const int e = (int)(i % 32);
        const uint8_t *qs = field<T>(row, nb, j, 0);
        int q = e < 16 ? qs[e] & 0xf : qs[e - 16] >> 4;
        if constexpr (T == TYPE_Q5_0 || T == TYPE_Q5_1)
            q |= (int)((u32_at(field<T>(row, nb, j, 1)) >> e) & 1) << 4;
        const uint8_t *dm = field<T>(row, nb, j, T == TYPE_Q5_0 || T == TYPE_Q5_1 ? 2 : 1);
        if constexpr (T == TYPE_Q4_0)
            return __fmul_rn(half_at(dm), (float)(q - 8));
        else if constexpr (T == TYPE_Q5_0)
            return __fmul_rn(half_at(dm), (float)(q - 16));
        else
            return __fadd_rn(__fmul_rn(half_at(dm), (float)q), half_at(dm + 2));
    }
}

/* Quantizes a block's 32 values into the Q8_1 block at out, as the CPU's
 * quant_q8_1 does: d = amax/127, q = roundf(v / d), s = d * sum(q), each
 * rounded once (the max and the integer sum are exact in any order). The
 * values lie N a lane (in order) across 32 / N aligned lanes of a warp. */
template <int N>
__device__ static inline void q8_1_block_of(const float (&v)[N], uint8_t *out)
{
    constexpr int LANES = 32 / N;
    const int lane = threadIdx.x % 32, sub = lane % LANES;
    const unsigned group = LANES == 32 ? 0xffffffffu : ((1u << LANES) - 1) << (lane - sub);
    float amax = fabsf(v[0]);
#pragma unroll
    for (int i = 1; i < N; i++)
        amax = fmaxf(amax, fabsf(v[i]));
    for (int off = LANES / 2; off > 0; off >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(group, amax, off));
    const float d = __fdiv_rn(amax, 127.0f);
    const float id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
    int sum = 0;
    unsigned codes = 0; /* the lane's codes, the first in the low byte */
#pragma unroll
    for (int i = 0; i < N; i++) {
        const int q = (int)roundf(__fmul_rn(v[i], id));
        sum += q;
        codes |= (unsigned)(q & 0xff) << (8 * i);
    }
    for (int off = LANES / 2; off > 0; off >>= 1)
        sum += __shfl_xor_sync(group, sum, off);
    if constexpr (N == 1)
        out[4 + lane] = (uint8_t)codes;
    else
        ((unsigned *)(out + 4))[sub] = codes; /* blocks are 36 bytes: their codes are 4-byte aligned */
    if (sub == 0) /* and every block starts 4-byte aligned */
        *reinterpret_cast<__half2 *>(out) = __floats2half2_rn(d, __fmul_rn(d, (float)sum));
}

/* The same, a value a lane. */
__device__ static inline void q8_1_block(float v, uint8_t *out)
{
    const float one[1] = { v };
    q8_1_block_of<1>(one, out);
}

/* One KV cache row (kv_cache.h's element types) from d values at src, by
 * n threads (whole warps; t: this one's index among them, by default the
 * CTA's): f16 rounded to nearest, Q8_0 as the CPU's quant_q8_0 (d = amax /
 * 127, q = roundf(v / d)). */
template <int KT>
__device__ static inline void kv_row_write(uint8_t *row, const float *src, int64_t d, int t = threadIdx.x, int n = blockDim.x)
{
    if constexpr (KT == KV_F32) {
        for (int64_t i = t; i < d; i += n)
            ((float *)row)[i] = src[i];
    } else if constexpr (KT == KV_F16) {
        for (int64_t i = t; i < d; i += n)
            ((__half *)row)[i] = __float2half_rn(src[i]);
    } else {
        const int lane = t % 32;
        for (int64_t b = t / 32; b < d / 32; b += n / 32) {
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

/* ---- quantized weights against Q8_1 activations ---- */

/* N little-endian words (N a multiple of 4) from a 16-byte-aligned p: the
 * code planes of the stored rows (weight_layout.h). */
template <int N>
__device__ static inline void words16(const uint8_t *p, unsigned out[N])
{
#pragma unroll
    for (int t = 0; t < N / 4; t++) {
        const uint4 v = ((const uint4 *)p)[t];
        out[4 * t] = v.x, out[4 * t + 1] = v.y, out[4 * t + 2] = v.z, out[4 * t + 3] = v.w;
    }
}

/* The f16 value at a field of a stored row (fields are at least 2-byte aligned). */
__device__ static inline float half_field(const uint8_t *p) { return __half2float(*(const __half *)p); }

/* The codes of a Q8_1 block as eight words, and its d and s. */
struct q8_1_block {
    int q[8];
    float d, s;
};

__device__ static inline struct q8_1_block q8_1_at(const uint8_t *a)
{
    struct q8_1_block x;
    const unsigned *w = (const unsigned *)a; /* blocks are 36 bytes, so every one is 4-byte aligned */
    const unsigned ds = w[0];
#pragma unroll
    for (int t = 0; t < 8; t++)
        x.q[t] = (int)w[1 + t];
    x.d = __half2float(__ushort_as_half((unsigned short)(ds & 0xffff)));
    x.s = __half2float(__ushort_as_half((unsigned short)(ds >> 16)));
    return x;
}

/* 32 legacy 4-bit codes (16 bytes: low nibbles are codes 0..15, high ones
 * 16..31) as eight words of four codes, in the activation's order. */
__device__ static inline void nibbles8(const unsigned b[4], unsigned out[8])
{
#pragma unroll
    for (int t = 0; t < 4; t++) {
        out[t] = b[t] & 0x0f0f0f0fu;
        out[t + 4] = (b[t] >> 4) & 0x0f0f0f0fu;
    }
}

/* Adds bit 4 of each code from qh (bit i for code i). */
__device__ static inline void high_bits8(uint32_t qh, unsigned q[8])
{
#pragma unroll
    for (int t = 0; t < 8; t++) {
        const unsigned bits = qh >> (4 * t);
        q[t] |= ((bits & 1) << 4) | ((bits & 2) << 11) | ((bits & 4) << 18) | ((bits & 8) << 25);
    }
}

__device__ static inline int dot8(const unsigned q[8], const int a[8])
{
    int s = 0;
#pragma unroll
    for (int t = 0; t < 8; t++)
        s = __dp4a((int)q[t], a[t], s);
    return s;
}

/* The dot of four unsigned bytes a with four signed ones b, plus c. */
__device__ static inline int dp4a_us(unsigned a, int b, int c)
{
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

/* The 6-bit scales and mins of sub-blocks 2p and 2p + 1 of a Q4_K/Q5_K
 * superblock, from its 12 packed bytes s[0..2] (bytes 4..15). Sub-blocks
 * 0..3 keep theirs in the low 6 bits of bytes 0..3 (scales) and 4..7
 * (mins); 4..7 in the nibbles of bytes 8..11 with the top 2 bits in the
 * spare bits of bytes 0..7. Both cases are one formula, the 6 bits (or
 * the nibbles) of src with the top bits of s >> 2 where top has them, src
 * and top chosen by p, so the lanes of a warp do not diverge. A lane's p
 * is fixed (its groups are lane, lane + 32, ...: p = lane % 4), so the
 * choices are made once a kernel. */
__device__ static inline void k_scale_min_pair(const unsigned s[3], int p, int sc[2], int mn[2])
{
    const unsigned top = p >= 2 ? 0x30303030u : 0u, shift = 16u * (unsigned)(p % 2);
    const unsigned scs = ((((p >= 2 ? s[2] : s[0]) & 0x3f3f3f3fu) & ~top) | ((s[0] >> 2) & top)) >> shift;
    const unsigned mns = ((((p >= 2 ? s[2] >> 4 : s[1]) & 0x3f3f3f3fu) & ~top) | ((s[1] >> 2) & top)) >> shift;
    sc[0] = (int)(scs & 0xff), sc[1] = (int)((scs >> 8) & 0xff);
    mn[0] = (int)(mns & 0xff), mn[1] = (int)((mns >> 8) & 0xff);
}

/* Two consecutive Q8_1 blocks from an 8-byte-aligned a (72 bytes: nine
 * 8-byte loads instead of eighteen 4-byte ones). */
__device__ static inline void q8_1_pair_at(const uint8_t *a, struct q8_1_block x[2])
{
    unsigned w[18];
#pragma unroll
    for (int t = 0; t < 9; t++) {
        const uint2 v = ((const uint2 *)a)[t];
        w[2 * t] = v.x, w[2 * t + 1] = v.y;
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
#pragma unroll
        for (int t = 0; t < 8; t++)
            x[i].q[t] = (int)w[9 * i + 1 + t];
        x[i].d = __half2float(__ushort_as_half((unsigned short)(w[9 * i] & 0xffff)));
        x[i].s = __half2float(__ushort_as_half((unsigned short)(w[9 * i] >> 16)));
    }
}

/* Four consecutive Q8_1 blocks from a 16-byte-aligned a (144 bytes: nine
 * 16-byte loads). */
__device__ static inline void q8_1_quad_at(const uint8_t *a, struct q8_1_block x[4])
{
    unsigned w[36];
#pragma unroll
    for (int t = 0; t < 9; t++) {
        const uint4 v = ((const uint4 *)a)[t];
        w[4 * t] = v.x, w[4 * t + 1] = v.y, w[4 * t + 2] = v.z, w[4 * t + 3] = v.w;
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int t = 0; t < 8; t++)
            x[i].q[t] = (int)w[9 * i + 1 + t];
        x[i].d = __half2float(__ushort_as_half((unsigned short)(w[9 * i] & 0xffff)));
        x[i].s = __half2float(__ushort_as_half((unsigned short)(w[9 * i] >> 16)));
    }
}

/* Q6_K: half h (sub-blocks 4h .. 4h + 3, 128 codes) of superblock sb of a
 * stored row of nb superblocks against the Q8_1 blocks x[0..3]: their four
 * block terms, each formed as quant_dot.c forms it. The four share their
 * bytes: low 4 bits in ql (64 bytes: sub-blocks 4h and 4h + 1 in the low
 * nibbles, 4h + 2 and 4h + 3 in the high), high 2 bits in qh (32 bytes, two
 * bits each), so one lane reads them once, 16 bytes at a time. */
__device__ static inline void q6_k_half_terms(const uint8_t *row, int64_t nb, int64_t sb, int h,
                                              const struct q8_1_block x[4], float term[4])
{
    unsigned ql[16], qh[8];
    words16<16>(field<TYPE_Q6_K>(row, nb, sb, 0) + 64 * h, ql);
    words16<8>(field<TYPE_Q6_K>(row, nb, sb, 1) + 32 * h, qh);
    const uint2 scales = *(const uint2 *)(field<TYPE_Q6_K>(row, nb, sb, 2) + 8 * h);
    const unsigned sc[2] = { scales.x, scales.y };
    const float d = half_field(field<TYPE_Q6_K>(row, nb, sb, 3));
#pragma unroll
    for (int i = 0; i < 4; i++) {
        int s2[2] = { 0, 0 };
#pragma unroll
        for (int t = 0; t < 8; t++) {
            /* four 6-bit codes 0..63 at once; their offset of 32 comes off
             * the integer sum as a dot with four -32s (exact) */
            const unsigned high = i < 2 ? qh[t] << (4 - 2 * i) : qh[t] >> (2 * i - 4); /* code bits 4..5 in place */
            const unsigned q = ((ql[8 * (i % 2) + t] >> (4 * (i / 2))) & 0x0f0f0f0fu) | (high & 0x30303030u);
            s2[t / 4] = __dp4a((int)0xe0e0e0e0u, x[i].q[t], __dp4a((int)q, x[i].q[t], s2[t / 4]));
        }
        const int sc0 = (int)(int8_t)(sc[i / 2] >> (16 * (i % 2))), sc1 = (int)(int8_t)(sc[i / 2] >> (16 * (i % 2) + 8));
        term[i] = __fmul_rn(__fmul_rn(d, x[i].d), (float)(sc0 * s2[0] + sc1 * s2[1]));
    }
}

/* Q4_K and Q5_K: sub-blocks 2p and 2p + 1 of the superblock at b, whose
 * codes share 32 bytes (low nibbles, then high), against the Q8_1 blocks
 * x[0] and x[1]: their two block terms, each formed as quant_dot.c forms
 * it, every rounding explicit. Q4_K's high nibbles are dotted where they
 * lie (16 times each code, as unsigned bytes): the product with 16 times
 * the code sum is 16 times the product with the sum, exactly (a power of
 * two scales a rounding exactly while no value is subnormal or infinite,
 * and these are products of f16 values and integers under 2^24), so one
 * multiply by 1/16 gives the same bits as shifting eight words down. */
template <int T>
__device__ static inline void k_pair_terms(const uint8_t *b, int p, const struct q8_1_block x[2], float term[2])
{
    const uint4 head = *(const uint4 *)b; /* d, dmin, the 12 scale bytes: superblocks are 16-byte aligned */
    const unsigned packed[3] = { head.y, head.z, head.w };
    int sc[2], mn[2];
    k_scale_min_pair(packed, p, sc, mn);
    const float d = __half2float(__ushort_as_half((unsigned short)(head.x & 0xffff)));
    const float dmin = __half2float(__ushort_as_half((unsigned short)(head.x >> 16)));
    const uint4 *q16 = (const uint4 *)(b + (T == TYPE_Q4_K ? 16 : 48) + 32 * p);
    const uint4 c0 = q16[0], c1 = q16[1];
    const unsigned raw[8] = { c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w };
    float dot[2];
    if constexpr (T == TYPE_Q4_K) {
        int lo = 0, hi16 = 0;
#pragma unroll
        for (int t = 0; t < 8; t++) {
            lo = __dp4a((int)(raw[t] & 0x0f0f0f0fu), x[0].q[t], lo);
            hi16 = dp4a_us(raw[t] & 0xf0f0f0f0u, x[1].q[t], hi16);
        }
        dot[0] = (float)lo, dot[1] = (float)hi16;
    } else { /* Q5_K: bit 2p (2p + 1) of byte l is the fifth bit of code l */
        unsigned q[2][8];
        const uint4 *h16 = (const uint4 *)(b + 16);
        const uint4 h0 = h16[0], h1 = h16[1];
        const unsigned hr[8] = { h0.x, h0.y, h0.z, h0.w, h1.x, h1.y, h1.z, h1.w };
#pragma unroll
        for (int t = 0; t < 8; t++) {
            q[0][t] = (raw[t] & 0x0f0f0f0fu) | ((hr[t] >> (2 * p)) & 0x01010101u) << 4;
            q[1][t] = ((raw[t] >> 4) & 0x0f0f0f0fu) | ((hr[t] >> (2 * p + 1)) & 0x01010101u) << 4;
        }
        dot[0] = (float)dot8(q[0], x[0].q), dot[1] = (float)dot8(q[1], x[1].q);
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        float prod = __fmul_rn(__fmul_rn(__fmul_rn(d, (float)sc[i]), x[i].d), dot[i]);
        if (T == TYPE_Q4_K && i == 1)
            prod = __fmul_rn(prod, 0.0625f);
        term[i] = __fsub_rn(prod, __fmul_rn(__fmul_rn(dmin, (float)mn[i]), x[i].s));
    }
}

/* The 32-element block j of a stored row of nb blocks of type T against
 * one Q8_1 block: the formulas of quant_dot.c. (K-quants: k_pair_terms,
 * q6_k_half_terms.) */
template <int T>
__device__ static inline float block_dot(const uint8_t *row, int64_t nb, int64_t j, const struct q8_1_block &x)
{
    if constexpr (T == TYPE_Q8_0) {
        unsigned q[8];
        words16<8>(field<T>(row, nb, j, 0), q);
        return half_field(field<T>(row, nb, j, 1)) * x.d * (float)dot8(q, x.q);
    } else if constexpr (T == TYPE_Q4_0 || T == TYPE_Q4_1 || T == TYPE_Q5_0 || T == TYPE_Q5_1) {
        unsigned raw[4], q[8];
        words16<4>(field<T>(row, nb, j, 0), raw);
        nibbles8(raw, q);
        if constexpr (T == TYPE_Q5_0 || T == TYPE_Q5_1)
            high_bits8(*(const unsigned *)field<T>(row, nb, j, 1), q);
        const int s = dot8(q, x.q);
        const uint8_t *dm = field<T>(row, nb, j, T == TYPE_Q5_0 || T == TYPE_Q5_1 ? 2 : 1);
        const float d = half_field(dm);
        /* every rounding explicit, in quant_dot.c's order (no contraction to FMA) */
        if constexpr (T == TYPE_Q4_0)
            return __fmul_rn(d, __fsub_rn(__fmul_rn(x.d, (float)s), __fmul_rn(8.0f, x.s)));
        else if constexpr (T == TYPE_Q5_0)
            return __fmul_rn(d, __fsub_rn(__fmul_rn(x.d, (float)s), __fmul_rn(16.0f, x.s)));
        else
            return __fadd_rn(__fmul_rn(__fmul_rn(d, x.d), (float)s), __fmul_rn(half_field(dm + 2), x.s));
    } else {
        static_assert(T == TYPE_Q8_0, "block_dot: K-quants take their blocks in groups (k_pair_terms, q6_k_half_terms)");
    }
}

#endif
