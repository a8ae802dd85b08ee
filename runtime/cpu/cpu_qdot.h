/* cpu_qdot.h: the fast CPU path's dot product: a weight row of a quantized
 * type in its GGUF layout against a row of Q8_1 activations, the integer
 * code sums on the vector unit the processor has (AVX-512 VNNI or AVX2,
 * chosen at run time; otherwise scalar code). The float terms are quant_dot.c's, and their
 * order is fixed: block j's term into lane j % 8 (in block order), then the
 * lanes as (l0 + l4) + (l2 + l6) + ((l1 + l5) + (l3 + l7)); so the bits
 * are the same whichever unit computes them (cpu_qdot_reference). */
#ifndef MINFER_CPU_QDOT_H
#define MINFER_CPU_QDOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "quant/tensor_type.h"

/* Activations as the fast path reads them: n values quantized as quant_q8_1
 * does, split for wide loads: the n codes (their bytes rounded up to 256),
 * then the n / 32 scales d, then the n / 32 sums s, as floats (the f16
 * values widened, exactly), then 32 times the integer sum of each block's
 * first 16 codes and of its last 16 (n / 32 int32 each: Q6_K's offset of
 * -32, subtracted once a column instead of once a row). The codes in block order, or grouped for a
 * prompt's full group of columns: in groups of eight blocks, four codes of
 * each block in turn (one 32-byte row holds the same four codes of eight
 * blocks, so the kernels sum a block without horizontal adds). */
size_t cpu_q8_bytes(int64_t n);
void cpu_q8_quantize(const float *x, int64_t n, void *out, bool grouped);

/* *out = the dot of k elements of w against a (cpu_q8_quantize's layout,
 * in block order); 0, or -1 for a type without a Q8_1 dot (the float
 * types, Q2_K, Q3_K). */
int cpu_qdot(enum tensor_type t, const void *w, const void *a, int64_t k, float *out);

/* The same for nc columns (at most CPU_QDOT_COLS), col_bytes apart, into
 * out[0..nc): each weight block unpacked once for all of them (prompt
 * processing); every column's result is cpu_qdot's. A full group of
 * CPU_QDOT_COLS columns is read grouped, fewer in block order. */
#define CPU_QDOT_COLS 8
int cpu_qdot_cols(enum tensor_type t, const void *w, const void *a, size_t col_bytes, int nc, int64_t k, float *out);

/* The same dot from quant_dot.c's dot_q8_1_terms, added in the order above,
 * with no vector code: what cpu_qdot must equal bit for bit (a's codes
 * grouped or in block order). */
float cpu_qdot_reference(enum tensor_type t, const void *w, const void *a, int64_t k, bool grouped);

/* Whether cpu_qdot takes weights of type t (the eight quantized types with a Q8_1 dot). */
bool cpu_qdot_takes(enum tensor_type t);

/* What cpu_qdot runs on: "avx512-vnni", "avx2" or "scalar", the best the
 * processor has unless cpu_qdot_use chose another it has (0; -1 for a unit
 * this processor lacks; "best" undoes the choice). The bits are the same
 * on all of them. */
const char *cpu_qdot_unit(void);
int cpu_qdot_use(const char *unit);

#endif
