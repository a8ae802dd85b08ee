/* cpu_dot.h: the CPU's dot product, in one place so generated code can
 * instantiate it for a fixed length: eight running sums (element i goes to
 * sum i % 8), combined in a fixed tree. The order is the same at any length
 * and in any instantiation, so a specialized build gives the generic build's
 * bits; a constant length only lets the compiler unroll and vectorize. */
#ifndef MINFER_CPU_DOT_H
#define MINFER_CPU_DOT_H

#include <stdint.h>

static inline float cpu_dot_n(const float *a, const float *b, int64_t n)
{
    float s[8] = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            s[j] += a[i + j] * b[i + j];
    for (int j = 0; j < 8 && i < n; i++, j++) /* the tail: fewer than 8 */
        s[j] += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

/* A dot product of a fixed length (generated kernels.c instantiates these). */
typedef float (*cpu_dot_fn)(const float *a, const float *b);

#define CPU_DOT_INSTANCE(K) \
    static float cpu_dot_##K(const float *a, const float *b) { return cpu_dot_n(a, b, K); }

#endif
