/* cuda_backend.h: what a test may ask the CUDA backend beyond backend.h. */
#ifndef MINFER_CUDA_BACKEND_H
#define MINFER_CUDA_BACKEND_H

/* How many times this engine's state replayed a captured CUDA graph, and
 * how many graphs it captured. */
long cuda_backend_replays(const void *state);
long cuda_backend_captures(const void *state);

/* How many head launches this engine's state recorded reading their
 * step's rotation (formed by an earlier launch of the step) instead of
 * forming it. */
long cuda_backend_rotations_read(const void *state);

/* How many engines share this engine's device weights (its model's one copy). */
int cuda_backend_weight_engines(const void *state);

/* Of a one-token graph g of model m, how many decode matmul launches
 * take each kind of kernel: for `minfer info`. */
struct cuda_launches {
    int typed;     /* a per-model build's typed kernels (its rows and types) */
    int by_length; /* its kernels for their row length */
    int generic;   /* the runtime-shaped ones */
};
struct graph;
struct model;
struct cuda_launches cuda_backend_fixed_launches(const struct model *m, const struct graph *g);

#endif
