/* cpu_dot.h: the CPU's dot product, in one place so generated code can
 * instantiate it for a fixed length. Eight running sums (element i goes to
 * sum i % 8, in order), combined in a fixed tree: cpu_dot_n says it plainly
 * and is the reference. cpu_dot_block computes the same sums for a block of
 * weight rows against a block of activation columns, four rows by two
 * columns at a time, each sum one lane of an 8-wide vector: every product
 * and addition is the reference's, in the reference's order (the build
 * forbids contracting them into FMAs), so the bits are the reference's at
 * any length, in any instantiation, with or without AVX2. A constant length
 * only lets the compiler unroll. */
#ifndef MINFER_CPU_DOT_H
#define MINFER_CPU_DOT_H

#include <stdint.h>
#include <string.h>

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

typedef float cpu_v8 __attribute__((vector_size(32)));

/* (macros: a vector passed by value to a function would tie the ABI to AVX) */
#define CPU_V8_LOAD(v, p) memcpy(&(v), (p), sizeof(cpu_v8))
#define CPU_V8_SUM(s) ((((s)[0] + (s)[4]) + ((s)[1] + (s)[5])) + (((s)[2] + (s)[6]) + ((s)[3] + (s)[7])))

/* Four rows (w, stride k) by nc (1 or 2) columns (x, stride k): out[c * 4 + r]. */
static inline __attribute__((always_inline)) void cpu_dot_tile(const float *w, const float *x, int nc, int64_t k,
                                                              float out[8])
{
    cpu_v8 acc[8] = { { 0 } };
    const float *w0 = w, *w1 = w + k, *w2 = w + 2 * k, *w3 = w + 3 * k, *x0 = x, *x1 = nc > 1 ? x + k : x;
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
        cpu_v8 a0, a1, a2, a3, b0, b1;
        CPU_V8_LOAD(a0, w0 + i), CPU_V8_LOAD(a1, w1 + i), CPU_V8_LOAD(a2, w2 + i), CPU_V8_LOAD(a3, w3 + i);
        CPU_V8_LOAD(b0, x0 + i);
        acc[0] += a0 * b0, acc[1] += a1 * b0, acc[2] += a2 * b0, acc[3] += a3 * b0;
        if (nc > 1) {
            CPU_V8_LOAD(b1, x1 + i);
            acc[4] += a0 * b1, acc[5] += a1 * b1, acc[6] += a2 * b1, acc[7] += a3 * b1;
        }
    }
    for (int j = 0; i < k; i++, j++) /* the tail, lane by lane as the reference */
        for (int c = 0; c < nc; c++)
            for (int r = 0; r < 4; r++)
                acc[c * 4 + r][j] += w[r * k + i] * x[c * k + i];
    for (int t = 0; t < 4 * nc; t++)
        out[t] = CPU_V8_SUM(acc[t]);
}

/* y[c * ldy + r] = dot(row r of w, column c of x) for r < nr, c < nc; w
 * holds nr rows of k floats and room for rows up to a multiple of four,
 * whose results are computed and dropped; x holds nc columns of k. */
static inline __attribute__((always_inline)) void cpu_dot_block(const float *w, int64_t nr, const float *x, int64_t nc,
                                                               float *y, int64_t ldy, int64_t k)
{
    float out[8];
    for (int64_t r = 0; r < nr; r += 4) {
        const float *rows = w + r * k;
        for (int64_t c = 0; c < nc; c += 2) {
            int n2 = nc - c >= 2 ? 2 : 1;
            if (n2 == 2)
                cpu_dot_tile(rows, x + c * k, 2, k, out);
            else
                cpu_dot_tile(rows, x + c * k, 1, k, out);
            for (int cc = 0; cc < n2; cc++)
                for (int rr = 0; rr < 4 && r + rr < nr; rr++)
                    y[(c + cc) * ldy + r + rr] = out[cc * 4 + rr];
        }
    }
}

/* Runs on the best vector unit the processor has, chosen when the program
 * starts (the bits do not depend on the choice). Not under ThreadSanitizer,
 * which instruments the choosing functions, and they run before it starts. */
#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define CPU_SIMD __attribute__((target_clones("avx2", "default")))
#else
#define CPU_SIMD
#endif

/* A block dot product of a fixed length (generated kernels_cpu.c instantiates these). */
typedef void (*cpu_dot_fn)(const float *w, int64_t nr, const float *x, int64_t nc, float *y, int64_t ldy);

/* One instantiation: the op and the sizes it was made for (k: the row
 * length, n: the output rows). */
struct cpu_kernel {
    int op;
    int64_t k, n;
    cpu_dot_fn dot;
};

/* Each compiled architecture's instantiations (generated kernels_cpu.c,
 * listed by the generated registry), up to an entry whose dot is NULL. */
struct cpu_kernel_table {
    const char *arch;   /* arch_def.name */
    const struct cpu_kernel *kernels;
};
extern const struct cpu_kernel_table cpu_kernel_tables[];
extern const int cpu_kernel_table_count;

#define CPU_DOT_INSTANCE(K) \
    CPU_SIMD static void cpu_dot_##K(const float *w, int64_t nr, const float *x, int64_t nc, float *y, int64_t ldy) \
    { \
        cpu_dot_block(w, nr, x, nc, y, ldy, K); \
    }

#endif
