/* mmq.cuh: the prompt matmuls on int8 tensor cores (mmq.cu), as matmul.cu
 * calls them for launches of more than CUDA_MMQ_MIN_COLUMNS columns. */
#ifndef MINFER_CUDA_MMQ_CUH
#define MINFER_CUDA_MMQ_CUH

#include "cuda/common.cuh"

/* Batches up to this many columns keep the decode kernel, and so the bits
 * of single steps (DESIGN.md: nt <= 8); 16 leaves the kernel tests' batch
 * of 9 there too. */
#define CUDA_MMQ_MIN_COLUMNS 16

/* One matrix of n rows of k (type t, the GPU's row layout), or a gate and
 * an up of the same type (w[1]: y = act(gate) * up), against nt Q8_1
 * columns; y [n, nt] plus bias and res when not NULL. */
struct mmq_args {
    const uint8_t *w[2];
    size_t row_bytes;
    int64_t n, k, nt;
    const uint8_t *xq;
    const float *bias, *res;
    float *y;
    int glu; /* enum glu_gate, for a pair */
};

/* Whether the tensor cores take weights of type t (a tensor_type). */
bool cuda_mmq_type(int t);
void cuda_mmq_launch(int t, const struct mmq_args &m, cudaStream_t s);

#endif
