/* gemv.h: the decode matrix-vector product on the GPU: y = W x for one
 * token, W in its GGUF block layout (Q8_0, Q4_K or Q6_K, the types of the
 * usual Q4_K_M mixes), x as Q8_1 blocks (cuda_quantize_q8_1). Integer dot
 * products per 32-element block with __dp4a, scales applied once per block,
 * as quant_dot.c's reference does; one warp per output row, reduced in a
 * fixed order, so a run repeats its bits. A first kernel, not yet the tuned
 * one: it reads the GGUF layout as stored (no repack). */
#ifndef MINFER_CUDA_GEMV_H
#define MINFER_CUDA_GEMV_H

#include <stdint.h>

#include "error.h"
#include "quant/tensor_type.h"

#ifdef __cplusplus
extern "C" {
#endif

/* w: n rows of k elements of type t (device); x: k/32 Q8_1 blocks (device);
 * y: n floats (device). k must be a multiple of the type's block size. */
int cuda_gemv_q8_1(enum tensor_type t, const void *w, const void *x, float *y, int64_t k, int64_t n, void *stream,
                   struct error *e);

#ifdef __cplusplus
}
#endif

#endif
