/* argmax.cu: the greedy choice over a logits column, so that only a token
 * id crosses to the host; and, for greedy decoding, fed straight into the
 * next decode step's inputs on the device, so that step can be launched
 * before the host has read the token (the host's turn between steps, ~60
 * us of a 0.5B model's ~570 us token, then overlaps the GPU's work). */
#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

#define ARGMAX_THREADS 256
#define ARGMAX_PER_THREAD 8 /* values a thread loads before comparing: independent loads in flight */
#define ARGMAX_CTAS 256     /* at most; each CTA's best goes to the scratch */

struct argmax_scratch {
    float v[ARGMAX_CTAS];
    int i[ARGMAX_CTAS];
    unsigned ticket; /* CTAs done; back to 0 after the last one's turn */
};

extern "C" size_t cuda_argmax_scratch_bytes(void) { return sizeof(struct argmax_scratch); }

/* Whether (v, i) beats (bv, bi): larger, or equal and lower; NaN never
 * wins. A total order, so the result does not depend on the order in
 * which values meet. */
__device__ static inline bool better(float v, int i, float bv, int bi)
{
    if (isnan(v) || i < 0)
        return false;
    return bi < 0 || v > bv || (v == bv && i < bi);
}

/* The best (v, i) of the CTA, in thread 0. */
__device__ static void cta_best(float &v, int &i)
{
    __shared__ float sv[ARGMAX_THREADS / 32];
    __shared__ int si[ARGMAX_THREADS / 32];
    for (int off = 16; off > 0; off /= 2) {
        const float ov = __shfl_down_sync(0xffffffffu, v, off);
        const int oi = __shfl_down_sync(0xffffffffu, i, off);
        if (better(ov, oi, v, i))
            v = ov, i = oi;
    }
    if (threadIdx.x % 32 == 0)
        sv[threadIdx.x / 32] = v, si[threadIdx.x / 32] = i;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < ARGMAX_THREADS / 32; w++)
            if (better(sv[w], si[w], v, i))
                v = sv[w], i = si[w];
}

/* Each CTA scans `per` values; the last CTA done (by ticket) chooses
 * among the CTAs' bests and writes the token. */
__global__ void argmax_kernel(const float *__restrict__ x, int64_t n, int64_t per, struct argmax_scratch *sc,
                              int32_t *out, struct cuda_argmax_feed feed)
{
    grid_begin();
    const int64_t from = blockIdx.x * per, to = from + per < n ? from + per : n;
    float v = 0;
    int bi = -1;
    for (int64_t at = from + threadIdx.x; at < to; at += ARGMAX_THREADS * ARGMAX_PER_THREAD) {
        float got[ARGMAX_PER_THREAD];
#pragma unroll
        for (int k = 0; k < ARGMAX_PER_THREAD; k++)
            got[k] = at + k * ARGMAX_THREADS < to ? x[at + k * ARGMAX_THREADS] : NAN;
#pragma unroll
        for (int k = 0; k < ARGMAX_PER_THREAD; k++)
            if (better(got[k], (int)(at + k * ARGMAX_THREADS), v, bi))
                v = got[k], bi = (int)(at + k * ARGMAX_THREADS);
    }
    cta_best(v, bi);
    __shared__ bool last;
    if (threadIdx.x == 0) {
        sc->v[blockIdx.x] = v, sc->i[blockIdx.x] = bi;
        last = ticket_take(&sc->ticket) == gridDim.x - 1;
    }
    __syncthreads();
    if (!last)
        return;
    v = 0, bi = -1;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += ARGMAX_THREADS) {
        const float ov = __ldcg(&sc->v[b]);
        const int oi = __ldcg(&sc->i[b]);
        if (better(ov, oi, v, bi))
            v = ov, bi = oi;
    }
    cta_best(v, bi);
    if (threadIdx.x != 0)
        return;
    sc->ticket = 0;
    if (feed.token) { /* a valid row for the step; the host reports the -1 */
        *feed.token = bi < 0 ? 0 : bi;
        if (feed.pos)
            *feed.pos = feed.pos_value;
        if (feed.kv_len)
            *feed.kv_len = feed.kv_value;
    }
    *out = bi;
    __threadfence_system(); /* out may be the host's */
}

extern "C" int cuda_argmax(const float *x, int64_t n, int32_t *out, const struct cuda_argmax_feed *feed,
                           void *scratch, void *stream, struct error *e)
{
    if (n <= 0 || n > 0x7fffffff)
        return fail(e, "argmax: %lld values", (long long)n);
    const int64_t chunk = ARGMAX_THREADS * ARGMAX_PER_THREAD;
    int64_t ctas = (n + chunk - 1) / chunk;
    ctas = ctas < ARGMAX_CTAS ? ctas : ARGMAX_CTAS;
    const int64_t per = (n + ctas - 1) / ctas;
    const struct cuda_argmax_feed none = { NULL, NULL, NULL, 0, 0 };
    if (cuda_launch_begin("argmax_kernel", e))
        return -1;
    launch(argmax_kernel, (unsigned)ctas, ARGMAX_THREADS, 0, (cudaStream_t)stream, x, n, per,
           (struct argmax_scratch *)scratch, out, feed ? *feed : none);
    return cuda_launch_end("argmax_kernel", e);
}
