/* prefetch.cu: weights asked into L2 ahead of the matmuls that read them,
 * from a launch on a second stream (cuda_backend.c forks it off the step
 * where the step reads little: the heads, attention, a norm). The lines are
 * only asked for: nothing is written, and no kernel waits for this one but
 * the step's end. */
#include "cuda/common.cuh"
#include "cuda/device.h"
#include "cuda/kernels.h"

#define PREFETCH_THREADS 128
#define BULK_PIECE 4096 /* bytes a bulk prefetch asks for */

__global__ void __launch_bounds__(PREFETCH_THREADS) prefetch_kernel(const struct cuda_prefetch r, bool bulk)
{
    const size_t lane = (size_t)blockIdx.x * PREFETCH_THREADS + threadIdx.x, lanes = (size_t)gridDim.x * PREFETCH_THREADS;
    const size_t piece = bulk ? BULK_PIECE : 128;
    for (int i = 0; i < r.n; i++) {
        const uintptr_t first = (uintptr_t)r.p[i] & ~(uintptr_t)127, end = (uintptr_t)r.p[i] + r.bytes[i];
        for (uintptr_t at = first + piece * lane; at < end; at += piece * lanes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
            if (bulk) {
                const unsigned n = (unsigned)(end - at < piece ? (end - at) & ~(uintptr_t)15 : piece);
                if (n)
                    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(at), "r"(n) : "memory");
                continue;
            }
#endif
            asm volatile("prefetch.global.L2 [%0];" ::"l"(at));
        }
    }
}

extern "C" int cuda_prefetch_l2(const struct cuda_prefetch *r, int ctas, bool bulk, void *stream, struct error *e)
{
    if (r->n < 1 || r->n > CUDA_PREFETCH_RANGES || ctas < 1)
        return fail(e, "prefetch: %d ranges by %d CTAs (1..%d ranges, at least one CTA)", r->n, ctas, CUDA_PREFETCH_RANGES);
    if (cuda_launch_begin("prefetch_kernel", e))
        return -1;
    prefetch_kernel<<<ctas, PREFETCH_THREADS, 0, (cudaStream_t)stream>>>(*r, bulk);
    return cuda_launch_end("prefetch_kernel", e);
}
