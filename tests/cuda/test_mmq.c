/* test_mmq.c: the prompt matmuls on int8 tensor cores (mmq.cu), for launches
 * of more than CUDA_PROMPT_MIN_COLUMNS columns, against quant_dot.c's block
 * terms summed in double: within 1e-5 of the sum of the terms' magnitudes
 * (their float roundings differ, not their integer sums; the measured
 * error is printed). A column's bits do not depend on how many columns
 * share its launch, nor on the matrices beside it (Q, K and V in one
 * launch, or Q and K in one and a V of another type in its own). Ragged shapes: rows and columns that do not fill a tile.
 * The pair is held to the terms too, through silu(x) x (slope under 1.1): a pair is never split (cuda_mmq_splits), so
 * its sums may run in another order than a single matrix's of the same shape. Matrices of many rows run on the f16
 * kernel (cuda_mmq_f16), whose weights are rounded to f16: held within 2^-10 of the sum of |w x| instead. F16 and BF16
 * weights (mmf.cu) against double: test_mmq_float_weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.h"
#include "cuda/kernels.h"
#include "quant/half.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "runner.h"

#define NT 37  /* columns: past CUDA_PROMPT_MIN_COLUMNS (16), not a multiple of 64 */
#define PART 20 /* the first columns again, in a launch of their own */

/* Each of the n_mat matrices m, already multiplied together in one launch
 * (into their y), against its own launch into dpart: the same bits. The
 * first has a bias (the launch's Q); x is Q8_1 xq or f32 xf, as the type reads. */
static bool same_as_own_launches(const struct cuda_matrix *m, int n_mat, int64_t k, const void *xq, const float *xf,
                                 float *dpart, float *got, float *part, const char *what)
{
    struct error e;
    bool ok = true;
    for (int i = 0; i < n_mat && ok; i++) {
        const size_t bytes = (size_t)(m[i].n * NT) * 4;
        ok = CHECK(cuda_matmul(m[i].t, m[i].w, k, m[i].n, cuda_matmul_takes_q8(m[i].t) ? xq : (const void *)xf, NT, m[i].bias,
                               NULL, CUDA_EPI_NONE, dpart, NULL, &e) == 0,
                   "%s", e.msg);
        if (ok) {
            down(got, m[i].y, bytes), down(part, dpart, bytes);
            ok = CHECK(memcmp(got, part, bytes) == 0, "%s %s: matrix %d of %d in one launch differs from its own launch",
                       type_name(m[i].t), what, i, n_mat);
        }
    }
    return ok;
}

/* A pair's outputs got[i] = silu(g) u with gate and up the same matrix
 * (so g = u = dots[i]) against silu(x) x in double: within e (a + b (|x| +
 * e)), e = rel scales[i] (the sums' error: the slope of silu(x) x at y is
 * under a + b |y|, and the GPU's sum y is within e of x; where the sum
 * nearly cancels, |x| alone undercounts it), plus 1e-5 of the value for
 * the products' roundings. *worst, when not NULL, gets the largest error
 * over its bound. */
static bool pair_within_bound(enum tensor_type t, const float *got, const double *dots, const double *scales, int64_t count,
                              double rel, double a, double b, const char *ref, double *worst)
{
    bool ok = true;
    for (int64_t i = 0; i < count && ok; i++) {
        const double want = silu_d(dots[i]) * dots[i], err = fabs(got[i] - want);
        const double sum_err = rel * scales[i], bound = sum_err * (a + b * (fabs(dots[i]) + sum_err)) + 1e-5 * fabs(want);
        if (worst)
            *worst = err / bound > *worst ? err / bound : *worst;
        ok = CHECK(err <= bound, "%s pair %lld: gpu %.9g, silu(x) x of %s %.9g", type_name(t), (long long)i, (double)got[i], ref,
                   want);
    }
    return ok;
}

/* y = W x + bias + res (as the graph's MATMUL_ADD), then the pair
 * silu(W x) * (W x) with its Q8_1 product, for one type. */
static bool mmq_case(enum tensor_type t, int64_t k, int64_t n, double *worst)
{
    struct error e;
    const size_t row_bytes = type_bytes(t, (uint64_t)k), col = (size_t)(k / 32) * 36, yb = (size_t)(n * NT) * 4;
    float *wf = randoms(k * n, 0.02f), *x = randoms(k * NT, 1), *bias = randoms(n, 0.1f), *res = randoms(n * NT, 1);
    uint8_t *wq = malloc(row_bytes * (size_t)n), *xq = malloc(col * NT);
    quantize_row(t, wf, wq, k * n);
    for (int64_t c = 0; c < NT; c++)
        quant_q8_1(x + c * k, xq + (size_t)c * col, k);
    void *dw = up_rows(t, k, n, wq), *dx = up(xq, col * NT), *dq8 = up(NULL, (size_t)(n / 32) * 36 * NT);
    float *dt = pair_scratch_up(n); /* a Q8_1 product asks for the decode pair's scratch */
    float *db = up(bias, (size_t)n * 4), *dr = up(res, yb), *dy = up(NULL, yb), *dpart = up(NULL, yb);
    float *got = malloc(yb), *part = malloc(yb), *terms = malloc((size_t)(k / 32) * sizeof *terms);
    double *dots = malloc((size_t)(n * NT) * sizeof *dots), *dot_scales = malloc((size_t)(n * NT) * sizeof *dot_scales);
    /* the f16 kernel's weights are rounded to f16 (2^-11 of each), so its bound is of the sum of |w x|, as dequantized */
    const bool f16 = cuda_mmq_f16(t, n);
    const double rel = f16 ? 0x1p-10 : 1e-5;
    float *wd = f16 ? malloc((size_t)(n * k) * sizeof *wd) : NULL, *xd = f16 ? malloc((size_t)(NT * k) * sizeof *xd) : NULL;
    for (int64_t r = 0; f16 && r < n; r++)
        dequantize_row(t, wq + (size_t)r * row_bytes, wd + r * k, k);
    for (int64_t i = 0; f16 && i < NT * k; i++) { /* a Q8_1 block: d, s (f16), then 32 codes */
        const uint8_t *blk = xq + (size_t)(i / k) * col + (size_t)(i % k / 32) * 36;
        xd[i] = load_f16(blk) * (float)(int8_t)blk[4 + i % 32];
    }
    const struct cuda_matrix pair[2] = { { t, dw, n, NULL, dy }, { t, dw, n, NULL, NULL } };
    bool ok = CHECK(cuda_matmul(t, dw, k, n, dx, NT, db, dr, CUDA_EPI_ADD, dy, NULL, &e) == 0 &&
                        cuda_matmul(t, dw, k, n, dx, PART, db, dr, CUDA_EPI_ADD, dpart, NULL, &e) == 0,
                    "%s", e.msg);
    if (ok)
        down(got, dy, yb), down(part, dpart, (size_t)(n * PART) * 4);
    for (int64_t c = 0; ok && c < NT; c++) {
        for (int64_t r = 0; r < n && ok; r++) {
            dot_q8_1_terms(t, wq + (size_t)r * row_bytes, xq + (size_t)c * col, k, terms);
            double dot = 0, dot_scale = 0;
            for (int64_t j = 0; j < k / 32; j++)
                dot += terms[j], dot_scale += f16 ? 0 : fabs(terms[j]);
            for (int64_t i = 0; f16 && i < k; i++)
                dot_scale += fabs((double)wd[r * k + i] * xd[c * k + i]);
            dots[c * n + r] = dot, dot_scales[c * n + r] = dot_scale;
            const double ref = dot + bias[r] + res[c * n + r], scale = dot_scale + fabs(bias[r]) + fabs(res[c * n + r]);
            const double err = fabs(got[c * n + r] - ref) / scale;
            *worst = err > *worst ? err : *worst;
            ok = CHECK(err <= rel, "%s k=%lld column %lld row %lld: gpu %.9g, quant_dot.c's terms %.9g", type_name(t),
                       (long long)k, (long long)c, (long long)r, (double)got[c * n + r], ref);
        }
    }
    ok = ok && CHECK(memcmp(part, got, (size_t)(n * PART) * 4) == 0, "%s: the first %d columns differ in a launch of %d",
                     type_name(t), PART, PART);
    /* the pair: gate and up (the same weights here), and its Q8_1 product */
    ok = ok && CHECK(cuda_matmul_multi(pair, 2, k, dx, NULL, NT, NULL, CUDA_EPI_PAIR, dq8, dt, NULL, NULL, &e) == 0,
                     "%s", e.msg);
    if (ok) {
        down(got, dy, yb);
        ok = pair_within_bound(t, got, dots, dot_scales, n * NT, rel, 1.1, 0, "quant_dot.c's terms", NULL);
        uint8_t *q8 = malloc((size_t)(n / 32) * 36 * NT), *want_q8 = malloc((size_t)(n / 32) * 36 * NT);
        down(q8, dq8, (size_t)(n / 32) * 36 * NT);
        for (int64_t c = 0; c < NT; c++)
            quant_q8_1(got + c * n, want_q8 + (size_t)c * (n / 32) * 36, n);
        ok = ok && CHECK(memcmp(q8, want_q8, (size_t)(n / 32) * 36 * NT) == 0,
                         "%s: the pair's Q8_1 output is not the CPU's quantization of its f32 output", type_name(t));
        free(q8), free(want_q8);
    }
    /* three matrices of the type in one launch (Q, K and V): each the bits of its own launch */
    const int64_t rows[3] = { n, 32, 64 };
    float *dm[3] = { up(NULL, yb), up(NULL, yb), up(NULL, yb) };
    const struct cuda_matrix qkv[3] = { { t, dw, rows[0], db, dm[0] }, { t, dw, rows[1], NULL, dm[1] }, { t, dw, rows[2], NULL, dm[2] } };
    ok = ok && CHECK(cuda_matmul_multi(qkv, 3, k, dx, NULL, NT, NULL, CUDA_EPI_NONE, NULL, NULL, NULL, NULL, &e) == 0, "%s", e.msg);
    ok = ok && same_as_own_launches(qkv, 3, k, dx, NULL, dpart, got, part, "(Q, K, V)");
    /* Q and K of the type with a V of another (Q5_0 Q and K with a Q8_0 V in Qwen2.5's mix): Q and K share a
     * launch, V has its own; each the bits of its own launch again */
    const enum tensor_type u = t == TYPE_Q8_0 ? TYPE_Q4_0 : TYPE_Q8_0;
    uint8_t *vq = malloc(type_bytes(u, (uint64_t)(k * rows[2])));
    quantize_row(u, wf, vq, k * rows[2]);
    void *dv = up_rows(u, k, rows[2], vq);
    const struct cuda_matrix mixed[3] = { qkv[0], qkv[1], { u, dv, rows[2], NULL, dm[2] } };
    ok = ok && CHECK(cuda_matmul_multi(mixed, 3, k, dx, NULL, NT, NULL, CUDA_EPI_NONE, NULL, NULL, NULL, NULL, &e) == 0, "%s", e.msg);
    ok = ok && same_as_own_launches(mixed, 3, k, dx, NULL, dpart, got, part, "(Q, K and a V of another type)");
    cuda_free(dv), free(vq);
    for (int i = 0; i < 3; i++)
        cuda_free(dm[i]);
    cuda_free(dw), cuda_free(dx), cuda_free(dq8), cuda_free(db), cuda_free(dr), cuda_free(dy), cuda_free(dpart);
    cuda_free(dt);
    free(wf), free(x), free(bias), free(res), free(wq), free(xq), free(got), free(part), free(terms), free(dots), free(dot_scales), free(wd), free(xd);
    return ok;
}

/* F16 and BF16 weights (mmf.cu: the bf16 tensor cores over f32 columns
 * split in two bf16 pieces): y = W x + bias + res against double, within
 * 2^-14 of the sum of the magnitudes (each product within 2^-15, the
 * tensor cores' f32 sums beside); activations past f16's range among them.
 * A column's bits alone as in the batch; the pair through silu(x) x; Q, K
 * and V in one launch the bits of their own. */
static bool mmf_case(enum tensor_type t, int64_t k, int64_t n, double *worst)
{
    struct error e;
    const size_t row_bytes = type_bytes(t, (uint64_t)k), xb = (size_t)(k * NT) * 4, yb = (size_t)(n * NT) * 4;
    float *wf = randoms(k * n, 0.02f), *x = randoms(k * NT, 1), *bias = randoms(n, 0.1f), *res = randoms(n * NT, 1);
    x[3] = 1e5f, x[k + 5] = -7e4f; /* f16 would overflow */
    uint8_t *wq = malloc(row_bytes * (size_t)n);
    quantize_row(t, wf, wq, k * n);
    dequantize_row(t, wq, wf, k * n); /* the weights as stored */
    void *dw = up_rows(t, k, n, wq);
    float *dx = up(x, xb), *db = up(bias, (size_t)n * 4), *dr = up(res, yb), *dy = up(NULL, yb), *dpart = up(NULL, yb);
    float *got = malloc(yb), *part = malloc(yb);
    double *dots = malloc((size_t)(n * NT) * sizeof *dots), *scales = malloc((size_t)(n * NT) * sizeof *scales);
    const double rel = 0x1p-14;
    bool ok = CHECK(cuda_matmul(t, dw, k, n, dx, NT, db, dr, CUDA_EPI_ADD, dy, NULL, &e) == 0 &&
                        cuda_matmul(t, dw, k, n, dx, PART, db, dr, CUDA_EPI_ADD, dpart, NULL, &e) == 0,
                    "%s", e.msg);
    if (ok)
        down(got, dy, yb), down(part, dpart, (size_t)(n * PART) * 4);
    for (int64_t c = 0; ok && c < NT; c++)
        for (int64_t r = 0; r < n && ok; r++) {
            double dot = 0, scale = 0;
            for (int64_t i = 0; i < k; i++)
                dot += (double)wf[r * k + i] * x[c * k + i], scale += fabs((double)wf[r * k + i] * x[c * k + i]);
            dots[c * n + r] = dot, scales[c * n + r] = scale;
            const double ref = dot + bias[r] + res[c * n + r];
            const double err = fabs(got[c * n + r] - ref) / (scale + fabs(bias[r]) + fabs(res[c * n + r]));
            *worst = err > *worst ? err : *worst;
            ok = CHECK(err <= rel, "%s k=%lld column %lld row %lld: gpu %.9g, double %.9g", type_name(t), (long long)k,
                       (long long)c, (long long)r, (double)got[c * n + r], ref);
        }
    ok = ok && CHECK(memcmp(part, got, (size_t)(n * PART) * 4) == 0, "%s: the first %d columns differ in a launch of %d",
                     type_name(t), PART, PART);
    const struct cuda_matrix pair[2] = { { t, dw, n, NULL, dy }, { t, dw, n, NULL, NULL } };
    ok = ok && CHECK(cuda_matmul_multi(pair, 2, k, NULL, dx, NT, NULL, CUDA_EPI_PAIR, NULL, NULL, NULL, NULL, &e) == 0,
                     "%s", e.msg);
    if (ok) {
        down(got, dy, yb);
        ok = pair_within_bound(t, got, dots, scales, n * NT, rel, 2.2, 2.2, "double", NULL);
    }
    const int64_t rows[3] = { n, 32, 64 };
    float *dm[3] = { up(NULL, yb), up(NULL, yb), up(NULL, yb) };
    const struct cuda_matrix qkv[3] = { { t, dw, rows[0], db, dm[0] }, { t, dw, rows[1], NULL, dm[1] }, { t, dw, rows[2], NULL, dm[2] } };
    ok = ok && CHECK(cuda_matmul_multi(qkv, 3, k, NULL, dx, NT, NULL, CUDA_EPI_NONE, NULL, NULL, NULL, NULL, &e) == 0, "%s", e.msg);
    ok = ok && same_as_own_launches(qkv, 3, k, NULL, dx, dpart, got, part, "(Q, K, V)");
    for (int i = 0; i < 3; i++)
        cuda_free(dm[i]);
    cuda_free(dw), cuda_free(dx), cuda_free(db), cuda_free(dr), cuda_free(dy), cuda_free(dpart);
    free(wf), free(x), free(bias), free(res), free(wq), free(got), free(part), free(dots), free(scales);
    return ok;
}

void test_mmq_float_weights(void)
{
    static const enum tensor_type types[] = { TYPE_F16, TYPE_BF16 };
    for (size_t i = 0; i < 2; i++)
        for (int shape = 0; shape < 3; shape++) { /* Qwen2.5-0.5B's width; SmolLM2-135M's (stages of 32, not 128);
                                                    * 1024 by 200 rows (a partial tile) */
            static const int64_t ks[3] = { 896, 576, 1024 }, ns[3] = { 96, 64, 200 };
            double worst = 0;
            if (!mmf_case(types[i], ks[shape], ns[shape], &worst))
                return;
            printf("    %-5s k=%lld, %lld rows: worst error %.2e of the sum of |w x| (bound 2^-14)\n", type_name(types[i]),
                   (long long)ks[shape], (long long)ns[shape], worst);
        }
}

void test_mmq_matches_the_reference(void)
{
    static const enum tensor_type types[] = { TYPE_Q4_0, TYPE_Q4_1, TYPE_Q5_0, TYPE_Q5_1, TYPE_Q8_0,
                                              TYPE_Q4_K, TYPE_Q5_K, TYPE_Q6_K };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const enum tensor_type t = types[i];
        /* whole stages of four blocks (k % 128; others keep the decode kernel): 28 blocks where the type allows
         * (Qwen2.5-0.5B's width); K-quants a Qwen3-8B width */
        const int64_t k = type_info(t)->block_elems == 256 ? 4096 : 896;
        double worst = 0;
        if (!mmq_case(t, k, 96, &worst))
            return;
        printf("    %-5s worst error %.2e of the sum of |terms| (bound 1e-5)\n", type_name(t), worst);
    }
    /* a row length split in four (matrices of few rows: cuda_mmq_splits), 38 stages that four groups cannot share
     * evenly (Qwen2.5-0.5B's FFN down); the K-quants' 4096 above were split too (32 stages) */
    static const enum tensor_type split_types[] = { TYPE_Q5_0, TYPE_Q8_0 };
    if (!CHECK(cuda_mmq_splits(96, 4864) == 4 && cuda_mmq_splits(96, 4096) == 4 && cuda_mmq_splits(1024, 4864) == 1 &&
                   cuda_mmq_splits(96, 896) == 1, "the split rule changed: these cases no longer cover split launches"))
        return;
    for (size_t i = 0; i < sizeof split_types / sizeof split_types[0]; i++) {
        double worst = 0;
        if (!mmq_case(split_types[i], 4864, 96, &worst))
            return;
        printf("    %-5s k=4864 (split in %d) worst error %.2e of the sum of |terms| (bound 1e-5)\n", type_name(split_types[i]),
               cuda_mmq_splits(96, 4864), worst);
    }
    /* many rows: the f16 kernel (every type but Q8_0), beside int8 K and V in the three-matrix cases */
    if (!CHECK(cuda_mmq_f16(TYPE_Q4_K, 1024) && !cuda_mmq_f16(TYPE_Q4_K, 1023) && !cuda_mmq_f16(TYPE_Q8_0, 4096),
               "the f16 rule changed: these cases no longer cover its launches"))
        return;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const enum tensor_type t = types[i];
        double worst = 0;
        if (!cuda_mmq_f16(t, 1024))
            continue;
        if (!mmq_case(t, type_info(t)->block_elems == 256 ? 4096 : 896, 1024, &worst))
            return;
        printf("    %-5s 1024 rows (f16 kernel) worst error %.2e of the sum of |w x| (bound 2^-10)\n", type_name(t), worst);
    }
    /* rows that are not whole stages (27 blocks): the launch goes to the decode kernel, held to the same checks */
    double worst = 0;
    if (mmq_case(TYPE_Q8_0, 864, 96, &worst))
        printf("    Q8_0  k=864 (the decode kernel's launch) worst error %.2e of the sum of |terms| (bound 1e-5)\n", worst);
}

/* The f16 kernel's launches of many columns (cuda_mmq_wgmma: on sm_90 the
 * wgmma kernel, which rounds the activations to f16 after a power-of-two
 * scale a column): 1088 rows (a partial tile of 128) of Q4_K and Q6_K by 300 columns
 * (three tiles of 128, the last partial) whose magnitudes span 10^-3 to
 * 10^6 (past f16's range), against double within 2^-10 of the sum of
 * |w x|; a pair's silu(gate) up the same; a column's bits the same in a
 * launch of 20 columns and in a launch that starts at column 128. */
static bool wide_columns_case(enum tensor_type t)
{
    enum { N = 1088, C = 300, PART_C = 20, SKIP = 128 };
    const int64_t k = 4096;
    static const float mags[4] = { 1.0f, 1e6f, 1e-3f, 3e4f }; /* Q8_1's f16 d holds nothing much smaller */
    struct error e;
    const size_t row_bytes = type_bytes(t, (uint64_t)k), col = (size_t)(k / 32) * 36, yb = (size_t)N * C * 4;
    float *wf = randoms(k * N, 0.02f), *x = randoms(k * C, 1), *wd = malloc((size_t)(k * N) * sizeof *wd);
    uint8_t *wq = malloc(row_bytes * N), *xq = malloc(col * C);
    float *got = malloc(yb), *part = malloc(yb), *xd = malloc((size_t)k * sizeof *xd);
    double *dots = malloc((size_t)N * C * sizeof *dots), *scales = malloc((size_t)N * C * sizeof *scales);
    for (int64_t i = 0; i < k * C; i++)
        x[i] *= mags[i / k % 4];
    quantize_row(t, wf, wq, k * N);
    for (int64_t r = 0; r < N; r++)
        dequantize_row(t, wq + (size_t)r * row_bytes, wd + r * k, k);
    for (int64_t c = 0; c < C; c++)
        quant_q8_1(x + c * k, xq + (size_t)c * col, k);
    void *dw = up_rows(t, k, N, wq), *dx = up(xq, col * C);
    float *dy = up(NULL, yb), *dpart = up(NULL, yb);
    const struct cuda_matrix pair[2] = { { t, dw, N, NULL, dy }, { t, dw, N, NULL, NULL } };
    bool ok = CHECK(cuda_matmul(t, dw, k, N, dx, C, NULL, NULL, CUDA_EPI_NONE, dy, NULL, &e) == 0, "%s", e.msg);
    if (ok)
        down(got, dy, yb);
    double worst = 0, worst_pair = 0;
    for (int64_t c = 0; ok && c < C; c++) {
        const uint8_t *blk = xq + (size_t)c * col;
        for (int64_t i = 0; i < k; i++) /* the Q8_1 column, dequantized: d code */
            xd[i] = load_f16(blk + (size_t)(i / 32) * 36) * (float)(int8_t)blk[(size_t)(i / 32) * 36 + 4 + (size_t)(i % 32)];
        for (int64_t r = 0; r < N && ok; r++) {
            double dot = 0, scale = 0;
            for (int64_t i = 0; i < k; i++)
                dot += (double)wd[r * k + i] * xd[i], scale += fabs((double)wd[r * k + i] * xd[i]);
            const double err = scale > 0 ? fabs(got[c * N + r] - dot) / scale : fabs(got[c * N + r]);
            worst = err > worst ? err : worst;
            ok = CHECK(err <= 0x1p-10, "column %lld (magnitude %g) row %lld: gpu %.9g, double %.9g", (long long)c,
                       (double)mags[c % 4], (long long)r, (double)got[c * N + r], dot);
            dots[c * N + r] = dot, scales[c * N + r] = scale; /* for the pair below */
        }
    }
    /* the pair, gate and up the same matrix: silu(dot) dot, whose slope is under 2 |dot| + 1.1 */
    ok = ok && CHECK(cuda_matmul_multi(pair, 2, k, dx, NULL, C, NULL, CUDA_EPI_PAIR, NULL, NULL, NULL, NULL, &e) == 0, "%s", e.msg);
    if (ok) {
        float *pg = malloc(yb);
        down(pg, dy, yb);
        ok = pair_within_bound(t, pg, dots, scales, (int64_t)N * C, 0x1p-10, 1.1, 2, "double", &worst_pair);
        free(pg);
    }
    /* the chunking rule: the first columns alone, and the columns from SKIP on alone */
    ok = ok && CHECK(cuda_matmul(t, dw, k, N, dx, PART_C, NULL, NULL, CUDA_EPI_NONE, dpart, NULL, &e) == 0, "%s", e.msg);
    if (ok)
        down(part, dpart, (size_t)N * PART_C * 4);
    ok = ok && CHECK(memcmp(part, got, (size_t)N * PART_C * 4) == 0, "the first %d columns differ in a launch of %d", PART_C, PART_C);
    ok = ok && CHECK(cuda_matmul(t, dw, k, N, (const uint8_t *)dx + col * SKIP, C - SKIP, NULL, NULL, CUDA_EPI_NONE, dpart, NULL,
                                 &e) == 0,
                     "%s", e.msg);
    if (ok)
        down(part, dpart, (size_t)N * (C - SKIP) * 4);
    ok = ok && CHECK(memcmp(part, got + (size_t)N * SKIP, (size_t)N * (C - SKIP) * 4) == 0,
                     "columns %d.. differ in a launch that starts at them", SKIP);
    if (ok)
        printf("    %s %d rows, %d columns of magnitudes 1e-3..1e6 (%s): worst error %.2e of the sum of |w x| (bound 2^-10), "
               "pair %.2f of its bound; same bits in launches of columns 0.. and %d..\n",
               type_name(t), N, C, cuda_mmq_wgmma(t, N) ? "wgmma kernel" : "mma.sync f16 kernel", worst, worst_pair, SKIP);
    cuda_free(dw), cuda_free(dx), cuda_free(dy), cuda_free(dpart);
    free(wf), free(x), free(wd), free(wq), free(xq), free(got), free(part), free(xd), free(dots), free(scales);
    return ok;
}

void test_mmq_wide_columns(void)
{
    static const enum tensor_type types[] = { TYPE_Q4_K, TYPE_Q6_K }; /* the wgmma kernel's, on sm_90 */
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!wide_columns_case(types[i]))
            return;
}
