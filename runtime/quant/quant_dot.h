/* quant_dot.h: reference dot products between a weight row in its GGUF
 * block format and an activation row quantized to Q8_0 or Q8_1. These are
 * the integer formulations the GPU GEMV kernels use (codes multiplied as
 * integers per 32-element block, scales applied once per block, offsets
 * applied through the activation block's sum s = d * sum(codes)), written
 * plainly so the kernels can be tested against them. */
#ifndef MINFER_QUANT_DOT_H
#define MINFER_QUANT_DOT_H

#include <stdint.h>

#include "quant/tensor_type.h"

/* Dot of n elements: w in type wt, a in Q8_1 (n / 32 blocks). Fills *out and
 * returns 0, or returns -1 for a weight type without a Q8_1 dot (Q2_K, Q3_K,
 * the float types). */
int dot_q8_1(enum tensor_type wt, const void *w, const void *a, int64_t n, float *out);
/* The n / 32 float terms that dot_q8_1 adds left to right, one per 32-element
 * block, into terms; 0, or -1 as dot_q8_1. The GPU adds the same terms in
 * another fixed order (tests/cuda check the bits). */
int dot_q8_1_terms(enum tensor_type wt, const void *w, const void *a, int64_t n, float *terms);

/* Dot of two Q8_0 rows of n elements. */
float dot_q8_0_q8_0(const void *w, const void *a, int64_t n);

#endif
