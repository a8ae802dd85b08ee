/* cpu_qdot.h: the fast CPU path's dot product: a weight row of a quantized
 * type in its GGUF layout against a row of Q8_1 activations, the integer
 * code sums on the vector unit the processor has (AVX2, chosen at run time;
 * otherwise quant_dot.c's scalar loop). The result is dot_q8_1's, bit for
 * bit, whichever unit computes it. */
#ifndef MINFER_CPU_QDOT_H
#define MINFER_CPU_QDOT_H

#include <stdbool.h>
#include <stdint.h>

#include "quant/tensor_type.h"

/* *out = the dot of k elements (a: k / 32 Q8_1 blocks); 0, or -1 for a type
 * without a Q8_1 dot (as dot_q8_1). */
int cpu_qdot(enum tensor_type t, const void *w, const void *a, int64_t k, float *out);

/* The same for nc columns (at most CPU_QDOT_COLS), col_bytes apart, into
 * out[0..nc): each weight block unpacked once for all of them (prompt
 * processing); every column's result is cpu_qdot's. */
#define CPU_QDOT_COLS 8
int cpu_qdot_cols(enum tensor_type t, const void *w, const void *a, size_t col_bytes, int nc, int64_t k, float *out);

/* Whether cpu_qdot takes weights of type t (the eight quantized types with a Q8_1 dot). */
bool cpu_qdot_takes(enum tensor_type t);

/* "avx2" or "scalar": what cpu_qdot runs on here. */
const char *cpu_qdot_unit(void);

#endif
