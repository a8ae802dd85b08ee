/* cuda_backend.h: what a test may ask the CUDA backend beyond backend.h. */
#ifndef MINFER_CUDA_BACKEND_H
#define MINFER_CUDA_BACKEND_H

/* How many times this engine's state replayed a captured CUDA graph. */
long cuda_backend_replays(const void *state);

/* How many engines share this engine's device weights (its model's one copy). */
int cuda_backend_weight_engines(const void *state);

#endif
