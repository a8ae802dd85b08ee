/* mmq.cuh: the prompt matmuls on tensor cores (mmq.cu, mmq_f16.cu, mmf.cu),
 * as matmul.cu calls them for launches of more than CUDA_PROMPT_MIN_COLUMNS
 * columns. */
#ifndef MINFER_CUDA_MMQ_CUH
#define MINFER_CUDA_MMQ_CUH

#include "cuda/common.cuh"
#include "cuda/kernels.h"

/* A matrix of n rows of k (the GPU's row layout): y [n, nt] = w x (+ bias). */
struct mmq_mat {
    const uint8_t *w;
    size_t row_bytes;
    int64_t n;
    const float *bias;
    float *y;
};

/* Up to three matrices of one type t against the same nt Q8_1 columns, one
 * after another in one launch (Q, K and V), plus res when not NULL; or a
 * gate m[0] and an up m[1] (pair: m[0].y = act(gate) * up). */
struct mmq_args {
    struct mmq_mat m[3];
    int n_mat;
    int64_t k, nt;
    const uint8_t *xq;
    const float *xf; /* Whether the wgmma kernel (mmq_wgmma.cu, sm_90) takes type t's f16
 * launches (Q4_K, Q6_K); the bytes of scratch it needs for nt columns of k; the
 * columns xq (Q8_1) as its f16 input, into scratch (m.xh and m.xs set
 * from it); its launch. */
bool cuda_mmw_type(int t);
size_t cuda_mmw_scratch_bytes(int64_t nt, int64_t k);
void cuda_mmw_prepare(struct mmq_args &m, void *scratch, cudaStream_t s);
void cuda_mmw_launch(int t, const struct mmq_args &m, bool pair, cudaStream_t s);
/* F16 and BF16 weights (mmf.cu): f32 columns, k apart */
    const float *res;
    int glu; /* enum glu_gate, for a pair */
    const void *xh;  /* the wgmma kernel's f16 columns (cuda_mmw_prepare), k apart */
    const float *xs; /* ... and each column's scale */
};

/* Whether the tensor cores take weights of type t (a tensor_type). */
bool cuda_mmq_type(int t);
void cuda_mmq_launch(int t, const struct mmq_args &m, bool pair, cudaStream_t s);
/* The same on the f16 tensor cores (mmq_f16.cu). */
void cuda_mmq_f16_launch(int t, const struct mmq_args &m, bool pair, cudaStream_t s);
/* Whether the wgmma kernel (mmq_wgmma.cu, sm_90) takes type t's f16
 * launches (Q4_K, Q6_K); the bytes of scratch it needs for nt columns of k; the
 * columns xq (Q8_1) as its f16 input, into scratch (m.xh and m.xs set
 * from it); its launch. */
bool cuda_mmw_type(int t);
size_t cuda_mmw_scratch_bytes(int64_t nt, int64_t k);
void cuda_mmw_prepare(struct mmq_args &m, void *scratch, cudaStream_t s);
void cuda_mmw_launch(int t, const struct mmq_args &m, bool pair, cudaStream_t s);
/* F16 and BF16 weights (cuda_mmf_type) against f32 columns xf, on the bf16
 * tensor cores (mmf.cu). */
bool cuda_mmf_type(int t);
void cuda_mmf_launch(int t, const struct mmq_args &m, bool pair, cudaStream_t s);

#endif
