/* cuda_backend.h: what a test may ask the CUDA backend beyond backend.h. */
#ifndef MINFER_CUDA_BACKEND_H
#define MINFER_CUDA_BACKEND_H

/* How many times this engine's state replayed a captured CUDA graph. */
long cuda_backend_replays(const void *state);

/* How many engines share this engine's device weights (its model's one copy). */
int cuda_backend_weight_engines(const void *state);

/* Of a one-token graph g of model m, how many decode matmul launches
 * take each kind of kernel (launches[enum cuda_fixed]: a per-model build's
 * typed ones, its ones for the row length, the generic ones): for
 * `minfer info`. */
struct graph;
struct model;
void cuda_backend_fixed_launches(const struct model *m, const struct graph *g, int launches[3]);

#endif
