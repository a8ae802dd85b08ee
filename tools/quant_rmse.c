/* quant_rmse.c: prints each encodable type's error on N(0,1) data and its
 * encode/decode speed on this machine, as a table for BENCHMARKS.md.
 * usage: quant-rmse [N_ELEMENTS] (default 16 Mi, a multiple of 256) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "quant/quant.h"
#include "rng.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static struct rng rng = { 0x853c49e6748fea9bull };

static float normal(void) { return rng_normal(&rng); }

int main(int argc, char **argv)
{
    long long n = argc > 1 ? atoll(argv[1]) : 16ll << 20;
    if (n <= 0 || n % QK_K)
        return fprintf(stderr, "quant-rmse: N must be a positive multiple of 256\n"), 1;
    static const enum tensor_type types[] = { TYPE_F16,  TYPE_BF16, TYPE_Q8_0, TYPE_Q6_K, TYPE_Q5_1, TYPE_Q5_K,
                                              TYPE_Q5_0, TYPE_Q4_1, TYPE_Q4_K, TYPE_Q4_0 };
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    uint8_t *q = malloc((size_t)n * 2);
    if (!x || !y || !q)
        return fprintf(stderr, "quant-rmse: out of memory\n"), 1;
    for (long long i = 0; i < n; i++)
        x[i] = normal();
    printf("%lld N(0,1) values, one thread\n\n", n);
    printf("| type | bits/weight | RMSE | max abs error | encode MB/s | decode MB/s |\n");
    printf("|------|------------:|-----:|--------------:|------------:|------------:|\n");
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        enum tensor_type t = types[k];
        double t0 = now();
        quantize_row(t, x, q, n);
        double t1 = now();
        dequantize_row(t, q, y, n);
        double t2 = now();
        double e2 = 0, emax = 0;
        for (long long i = 0; i < n; i++) {
            double d = fabs((double)x[i] - y[i]);
            e2 += d * d;
            emax = d > emax ? d : emax;
        }
        double mb = (double)n * 4 / 1e6;
        printf("| %s | %.4f | %.6f | %.5f | %.0f | %.0f |\n", type_name(t), 8.0 * (double)type_bytes(t, (uint64_t)n) / (double)n,
               sqrt(e2 / (double)n), emax, mb / (t1 - t0), mb / (t2 - t1));
    }
    free(x);
    free(y);
    free(q);
    return 0;
}
