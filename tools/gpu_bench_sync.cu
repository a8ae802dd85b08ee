/* gpu_bench_sync.cu: what one dependency between two steps of a decode
 * costs on the GPU, for minfer-gpu-bench, measured two ways: as a launch
 * boundary (empty kernels one after another, programmatic dependent
 * launches replayed from a CUDA graph, as a decode step's are) and as a
 * barrier across every CTA of one persistent kernel (what a kernel per
 * layer would use instead). */
#include <stdio.h>

#include "cuda/common.cuh"
#include "cuda/device.h"
#include "gpu_bench.h"

#define SYNC_THREADS 128
#define SYNC_LAUNCHES 100          /* empty kernels a graph */
#define SYNC_BARRIERS 2000         /* barriers a persistent launch */
#define SYNC_SPIN_LIMIT (1u << 24) /* polls before a barrier gives up (bounded waits) */

__global__ void __launch_bounds__(SYNC_THREADS) empty_kernel(void) { grid_begin(); }

/* n barriers across the grid. count (arrivals) and gen (barriers passed)
 * start at zero; the last CTA to arrive resets count and releases the next
 * generation, the others poll gen. Every CTA must be resident at once (a
 * few CTAs an SM of a kernel this small are); a barrier that waits past
 * SYNC_SPIN_LIMIT polls sets *failed and the kernel stops. */
__global__ void __launch_bounds__(SYNC_THREADS) barrier_kernel(unsigned *count, unsigned *gen, int n, unsigned *failed)
{
    __shared__ bool stuck;
    grid_begin();
    for (int i = 0; i < n; i++) {
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned g, prev, now, spins = 0;
            asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(g) : "l"(gen) : "memory");
            asm volatile("atom.acq_rel.gpu.add.u32 %0, [%1], 1;" : "=r"(prev) : "l"(count) : "memory");
            if (prev == gridDim.x - 1) {
                *count = 0;
                asm volatile("st.release.gpu.u32 [%0], %1;" ::"l"(gen), "r"(g + 1) : "memory");
                now = g + 1;
            } else {
                do
                    asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(now) : "l"(gen) : "memory");
                while (now == g && ++spins < SYNC_SPIN_LIMIT);
            }
            stuck = now == g;
            if (stuck)
                atomicExch(failed, 1u);
        }
        __syncthreads();
        if (stuck)
            return;
    }
}

/* ctx: two CTA counts; launch i has the first's when i is even, the
 * second's when odd (a big launch, then a small one, as a matmul and the
 * norm after it). */
static int empty_launch(const void *ctx, int i, void *stream, struct error *e)
{
    if (cuda_launch_begin("empty_kernel", e))
        return -1;
    launch(empty_kernel, dim3(((const unsigned *)ctx)[i % 2]), SYNC_THREADS, 0, (cudaStream_t)stream);
    return cuda_launch_end("empty_kernel", e);
}

/* us per empty launch in a replayed graph of SYNC_LAUNCHES alternating
 * launches of a and b CTAs (the GPU, not the host, sets the pace). */
static int launch_boundary(int reps, unsigned a, unsigned b, double *us, struct error *e)
{
    const unsigned ctas[2] = { a, b };
    return gpu_bench_replayed_us(empty_launch, ctas, SYNC_LAUNCHES, reps, us, e);
}

/* us per barrier of a persistent launch of ctas CTAs: a launch of
 * SYNC_BARRIERS barriers less one of none, over SYNC_BARRIERS. */
static int grid_barrier(unsigned ctas, unsigned *state, double *us, struct error *e)
{
    float ms[2];
    for (int pass = 0; pass < 3; pass++) { /* the first pass warms up */
        const int n = pass == 2 ? 0 : SYNC_BARRIERS;
        struct cuda_timer *t;
        if (cuda_memset_async(state, 0, 3 * sizeof(unsigned), NULL, e) || cuda_sync(e) || cuda_timer_start(&t, e) ||
            cuda_launch_begin("barrier_kernel", e))
            return -1;
        launch(barrier_kernel, dim3(ctas), SYNC_THREADS, 0, (cudaStream_t)0, state, state + 1, n, state + 2);
        if (cuda_launch_end("barrier_kernel", e) || cuda_timer_stop(t, &ms[pass == 2], e))
            return -1;
        unsigned failed;
        if (cuda_download(&failed, state + 2, sizeof failed, e))
            return -1;
        if (failed)
            return fail(e, "grid barrier: %u CTAs were not all resident (a barrier waited past %u polls)", ctas, SYNC_SPIN_LIMIT);
    }
    *us = (double)(ms[0] - ms[1]) * 1e3 / SYNC_BARRIERS;
    return 0;
}

extern "C" int gpu_bench_sync(int reps, struct error *e)
{
    const unsigned sms = (unsigned)cuda_sm_count();
    void *state;
    if (sms == 0)
        return fail(e, "sync: no multiprocessor count");
    if (cuda_alloc(&state, 3 * sizeof(unsigned), "barrier state", e))
        return -1;
    printf("\n| one dependency (us) | CTAs | us |\n|---|---:|---:|\n");
    for (unsigned per_sm = 1; per_sm <= 4; per_sm *= 4) {
        double boundary = 0, barrier = 0;
        if (launch_boundary(reps, per_sm * sms, per_sm * sms, &boundary, e) ||
            grid_barrier(per_sm * sms, (unsigned *)state, &barrier, e))
            return cuda_free(state), -1;
        printf("| an empty kernel after an empty kernel (PDL, a replayed graph) | %u | %.2f |\n", per_sm * sms, boundary);
        printf("| a barrier across one persistent kernel's CTAs | %u | %.2f |\n", per_sm * sms, barrier);
    }
    /* Does a launch's boundary grow with its CTAs? A decode step's matmuls
     * are 1024 to 3072 CTAs of 4 warps (8 to 24 an SM), its norms 16. */
    printf("\n| empty launches of 4 warps, alternating (PDL, a replayed graph) | us a launch |\n|---|---:|\n");
    const unsigned small = 16, per_sm_big[] = { 1, 2, 8, 16, 24 };
    for (size_t i = 0; i < sizeof per_sm_big / sizeof *per_sm_big; i++) {
        const unsigned big = per_sm_big[i] * sms;
        double same = 0, mixed = 0;
        if (launch_boundary(reps, big, big, &same, e) || launch_boundary(reps, big, small, &mixed, e))
            return cuda_free(state), -1;
        printf("| %u CTAs after %u | %.2f |\n| %u and %u CTAs in turns | %.2f |\n", big, big, same, big, small, mixed);
    }
    double tiny = 0;
    if (launch_boundary(reps, small, small, &tiny, e))
        return cuda_free(state), -1;
    printf("| %u CTAs after %u | %.2f |\n", small, small, tiny);
    cuda_free(state);
    return 0;
}
