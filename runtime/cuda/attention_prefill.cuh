/* attention_prefill.cuh: a prompt's causal attention on the f16 tensor
 * cores (attention_prefill.cu), as attention.cu calls it for launches of
 * more than CUDA_PROMPT_MIN_COLUMNS queries. */
#ifndef MINFER_CUDA_ATTENTION_PREFILL_CUH
#define MINFER_CUDA_ATTENTION_PREFILL_CUH

#include "cuda/common.cuh"
#include "cuda/kernels.h" /* cuda_attention_prefill_fits */

/* Queries q [nt][h][d] (f32, positions pos[nt]) against the cached keys and
 * values of their KV heads (kv_cache.h's type kt, [h_kv][n_ctx] rows of
 * row_bytes), causal (and within window positions when window > 0): y
 * [nt][h][d], and its Q8_1 blocks into q8 when not NULL. */
void cuda_attention_prefill(enum kv_type kt, const uint8_t *kl, const uint8_t *vl, const float *q, const int32_t *pos,
                            int64_t d, int64_t h, int64_t h_kv, int64_t nt, int64_t n_ctx, int64_t window,
                            size_t row_bytes, float *y, uint8_t *q8, cudaStream_t s);

#endif
