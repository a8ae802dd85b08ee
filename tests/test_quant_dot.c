/* test_quant_dot.c: the reference weight x Q8_1 (and Q8_0 x Q8_0) dot
 * products against the plain sum of dequantized products. The only allowed
 * difference is float rounding, plus the f16 rounding of the activation's
 * stored block sum s, which the integer formulation uses by design; both
 * stay far below 1e-3 of sum |w_i a_i|, while a wrong scale, offset or code
 * index is off by a large fraction of it. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "support.h"

#define N (QK_K * 16)

static enum tensor_type weight_types[] = { TYPE_Q4_0, TYPE_Q4_1, TYPE_Q5_0, TYPE_Q5_1,
                                           TYPE_Q8_0, TYPE_Q4_K, TYPE_Q5_K, TYPE_Q6_K };

ParameterizedTestParameters(quant_dot, matches_dequantized_products)
{
    return cr_make_param_array(enum tensor_type, weight_types, sizeof weight_types / sizeof weight_types[0]);
}

ParameterizedTest(enum tensor_type *t, quant_dot, matches_dequantized_products)
{
    struct rng r;
    rng_seed(&r, 99 + (uint64_t)*t);
    static float w[N], a[N], wd[N], ad[N];
    static uint8_t wq[N * 2], aq[N / 32 * 36];
    for (int trial = 0; trial < 4; trial++) {
        /* trial 3 shifts the weights so the offset formats' mins matter */
        for (int i = 0; i < N; i++) {
            w[i] = 0.02f * rng_normal(&r) + (trial == 3 ? 0.05f : 0.0f);
            a[i] = rng_normal(&r) * (trial == 2 ? 100.0f : 1.0f);
        }
        quantize_row(*t, w, wq, N);
        quant_q8_1(a, aq, N);
        dequantize_row(*t, wq, wd, N);
        dequant_q8_1(aq, ad, N);
        double want = 0, l1 = 0;
        for (int i = 0; i < N; i++) {
            want += (double)wd[i] * ad[i];
            l1 += fabs((double)wd[i] * ad[i]);
        }
        float got, terms[N / 32], sum = 0;
        cr_assert_eq(dot_q8_1(*t, wq, aq, N, &got), 0);
        cr_assert_eq(dot_q8_1_terms(*t, wq, aq, N, terms), 0);
        for (int j = 0; j < N / 32; j++)
            sum += terms[j];
        cr_assert(memcmp(&sum, &got, sizeof sum) == 0, "%s: the terms add to %.9g, the dot is %.9g", type_name(*t),
                  (double)sum, (double)got);
        cr_assert_leq(fabs(got - want), 1e-3 * l1, "%s trial %d: %.7g vs %.7g (l1 %.4g)", type_name(*t), trial,
                      (double)got, want, l1);
    }
}

Test(quant_dot, q8_0_pair)
{
    struct rng r;
    rng_seed(&r, 5);
    static float w[N], a[N], wd[N], ad[N];
    static uint8_t wq[N / 32 * 34], aq[N / 32 * 34];
    for (int i = 0; i < N; i++) {
        w[i] = rng_normal(&r);
        a[i] = rng_normal(&r);
    }
    quant_q8_0(w, wq, N);
    quant_q8_0(a, aq, N);
    dequant_q8_0(wq, wd, N);
    dequant_q8_0(aq, ad, N);
    double want = 0, l1 = 0;
    for (int i = 0; i < N; i++) {
        want += (double)wd[i] * ad[i];
        l1 += fabs((double)wd[i] * ad[i]);
    }
    cr_assert_leq(fabs(dot_q8_0_q8_0(wq, aq, N) - want), 1e-5 * l1);
}

Test(quant_dot, unsupported_weight_types_are_refused)
{
    static uint8_t w[84 * 2], a[36 * 16];
    float out = 123;
    cr_assert_eq(dot_q8_1(TYPE_Q2_K, w, a, 512, &out), -1);
    cr_assert_eq(dot_q8_1(TYPE_F16, w, a, 64, &out), -1);
    cr_assert_eq(dot_q8_1_terms(TYPE_F16, w, a, 64, &out), -1);
    cr_assert_eq(out, 123, "a refused dot wrote its output");
}
