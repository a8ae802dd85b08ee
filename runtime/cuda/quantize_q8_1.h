/* quantize_q8_1.h: activation quantization to Q8_1 on the GPU: the kernel
 * that feeds every dp4a GEMV. Bit-identical to the CPU's quant_q8_1. */
#ifndef MINFER_CUDA_QUANTIZE_Q8_1_H
#define MINFER_CUDA_QUANTIZE_Q8_1_H

#include <stdint.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* x: n f32 on the device; y: n/32 Q8_1 blocks (36 bytes each) on the device.
 * stream is a cudaStream_t (NULL: the default stream). n % 32 != 0 is an
 * error, not a silent truncation. */
int cuda_quantize_q8_1(const float *x, void *y, int64_t n, void *stream, struct error *e);

#ifdef __cplusplus
}
#endif

#endif
