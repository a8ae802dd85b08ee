/* quant.h: the CPU reference for every tensor type minfer reads or writes.
 * Rows keep the GGUF block layout; n is always a multiple of the type's block
 * size (callers check with the type table). The arithmetic is the formats'
 * own, in binary32 with one rounding per operation, so results match the
 * Python gguf package bit for bit. */
#ifndef MINFER_QUANT_H
#define MINFER_QUANT_H

#include <stdint.h>

#include "quant/tensor_type.h"

/* Decodes n elements; returns -1 for a type without a decoder. */
int dequantize_row(enum tensor_type t, const void *src, float *dst, int64_t n);

/* Encodes n elements; returns -1 for a type without an encoder. K-quants run
 * a weighted scale/min search per sub-block (see quant_k_encode.c). */
int quantize_row(enum tensor_type t, const float *src, void *dst, int64_t n);

/* Per-format entry points (one block size per call granularity as above). */
void dequant_q4_0(const uint8_t *src, float *dst, int64_t n);
void dequant_q4_1(const uint8_t *src, float *dst, int64_t n);
void dequant_q5_0(const uint8_t *src, float *dst, int64_t n);
void dequant_q5_1(const uint8_t *src, float *dst, int64_t n);
void dequant_q8_0(const uint8_t *src, float *dst, int64_t n);
void dequant_q8_1(const uint8_t *src, float *dst, int64_t n);
void quant_q4_0(const float *src, uint8_t *dst, int64_t n);
void quant_q4_1(const float *src, uint8_t *dst, int64_t n);
void quant_q5_0(const float *src, uint8_t *dst, int64_t n);
void quant_q5_1(const float *src, uint8_t *dst, int64_t n);
void quant_q8_0(const float *src, uint8_t *dst, int64_t n);
void quant_q8_1(const float *src, uint8_t *dst, int64_t n);

void dequant_q2_k(const uint8_t *src, float *dst, int64_t n);
void dequant_q3_k(const uint8_t *src, float *dst, int64_t n);
void dequant_q4_k(const uint8_t *src, float *dst, int64_t n);
void dequant_q5_k(const uint8_t *src, float *dst, int64_t n);
void dequant_q6_k(const uint8_t *src, float *dst, int64_t n);
void quant_q4_k(const float *src, uint8_t *dst, int64_t n);
void quant_q5_k(const float *src, uint8_t *dst, int64_t n);
void quant_q6_k(const float *src, uint8_t *dst, int64_t n);

/* Q4_K/Q5_K pack eight 6-bit scales and eight 6-bit mins into 12 bytes. */
void k_scales_unpack(const uint8_t packed[12], uint8_t sc[8], uint8_t mn[8]);
void k_scales_pack(const uint8_t sc[8], const uint8_t mn[8], uint8_t packed[12]);

#endif
