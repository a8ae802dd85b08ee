/* gpu_bench.h: what minfer-gpu-bench's two files (gpu_bench.c, gpu_bench_sync.cu) share. */
#ifndef MINFER_TOOLS_GPU_BENCH_H
#define MINFER_TOOLS_GPU_BENCH_H

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launch i (of a graph's n) of a kernel under measurement, on stream. */
typedef int (*gpu_bench_launch)(const void *ctx, int i, void *stream, struct error *e);

/* n launches of fn captured as a CUDA graph and replayed reps times, as a
 * decode step is (the host's launch cost is not timed): *us, the time a
 * launch. gpu_bench.c. */
int gpu_bench_replayed_us(gpu_bench_launch fn, const void *ctx, int n, int reps, double *us, struct error *e);

/* What one dependency costs: a launch boundary, a grid-wide barrier (a
 * table). gpu_bench_sync.cu. */
int gpu_bench_sync(int reps, struct error *e);

#ifdef __cplusplus
}
#endif

#endif
