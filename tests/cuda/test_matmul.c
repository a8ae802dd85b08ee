/* test_matmul.c: the matmul kernel (decode GEMVs and batches of up to 16
 * columns) against the CPU on fresh random inputs of model widths. The
 * quantized matmul is bit-equal to quant_dot.c's block terms (integer code
 * sums, scales in its order) added in the kernel's fixed order; float
 * weights within a stated tolerance, the measured error printed. A batch
 * of columns gives each column's single-column bits; the per-model build's
 * kernels give the generic ones' bits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.h"
#include "cuda/kernels.h"
#include "cuda/quantize_q8_1.h"
#include "cuda/weight_layout.h"
#include "graph.h"
#include "graph_ops.h"
#include "kv_cache.h"
#include "quant/half.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "runner.h"



/* The matmul kernel's fixed order over a row's block terms: blocks go to
 * lanes in groups of `group` (the sub-blocks that share their code bytes:
 * Q4_K and Q5_K 2, Q6_K 4; other types 1), group i to lane i % 32; each lane adds
 * its blocks in order to 0, then the 32 lanes meet in a butterfly (xor 16,
 * 8, 4, 2, 1). */
static float kernel_order_sum(const float *terms, int64_t blocks, int group)
{
    float lane[32];
    for (int l = 0; l < 32; l++)
        lane[l] = 0;
    for (int64_t j = 0; j < blocks; j++)
        lane[(j / group) % 32] += terms[j];
    for (int off = 16; off > 0; off >>= 1) {
        float next[32];
        for (int l = 0; l < 32; l++)
            next[l] = lane[l] + lane[l ^ off];
        memcpy(lane, next, sizeof lane);
    }
    return lane[0];
}

/* One type and shape: nt columns at once against the reference, and each
 * column alone against the batch, bit for bit; with a bias and a residual,
 * and as the up half of SwiGLU. */
static bool matmul_case(enum tensor_type t, int64_t k, int64_t n, int64_t nt, double *worst)
{
    struct error e;
    bool q8 = cuda_matmul_takes_q8(t);
    size_t wbytes = type_bytes(t, (uint64_t)(k * n)), row_bytes = wbytes / (size_t)n, xq_col = (size_t)(k / 32) * 36;
    float *wf = randoms(k * n, 0.02f), *x = randoms(k * nt, 1), *bias = randoms(n, 0.1f), *res = randoms(n * nt, 1);
    uint8_t *wq = malloc(wbytes), *xq = malloc(xq_col * (size_t)nt);
    float *wd = malloc((size_t)(k * n) * sizeof *wd);
    quantize_row(t, wf, wq, k * n);
    dequantize_row(t, wq, wd, k * n);
    for (int64_t c = 0; c < nt; c++)
        quant_q8_1(x + c * k, xq + (size_t)c * xq_col, k);
    void *dw = up_rows(t, k, n, wq), *dxf = up(x, (size_t)(k * nt) * 4), *dxq = up(NULL, xq_col * (size_t)nt);
    float *db = up(bias, (size_t)n * 4), *dr = up(res, (size_t)(n * nt) * 4), *dy = up(NULL, (size_t)(n * nt) * 4);
    float *got = malloc((size_t)(n * nt) * 4), *one = malloc((size_t)n * 4), *sw = malloc((size_t)(n * nt) * 4);
    float *terms = malloc((size_t)(k / 32) * sizeof *terms);
    bool ok = CHECK(cuda_quantize_q8_1(dxf, dxq, k * nt, NULL, &e) == 0, "%s", e.msg);
    const void *dx = q8 ? dxq : dxf;
    ok = ok && CHECK(cuda_matmul(t, dw, k, n, dx, nt, db, dr, CUDA_EPI_ADD, dy, NULL, &e) == 0, "%s", e.msg);
    if (ok)
        down(got, dy, (size_t)(n * nt) * 4);
    for (int64_t c = 0; ok && c < nt; c++) {
        for (int64_t r = 0; r < n && ok; r++) {
            const float g = got[c * n + r];
            if (q8) { /* integer block sums: the reference's terms in the kernel's order give the same bits */
                dot_q8_1_terms(t, wq + (size_t)r * row_bytes, xq + (size_t)c * xq_col, k, terms);
                const int group = t == TYPE_Q4_K || t == TYPE_Q5_K ? 2 : t == TYPE_Q6_K ? 4 : 1;
                const float want = kernel_order_sum(terms, k / 32, group) + bias[r] + res[c * n + r];
                ok = CHECK(memcmp(&g, &want, sizeof g) == 0, "%s k=%lld column %lld row %lld: gpu %.9g, quant_dot.c's "
                           "terms %.9g", type_name(t), (long long)k, (long long)c, (long long)r, (double)g, (double)want);
                continue;
            }
            double ref = bias[r] + res[c * n + r], scale = 0;
            for (int64_t i = 0; i < k; i++)
                ref += (double)wd[r * k + i] * x[c * k + i], scale += fabs((double)wd[r * k + i] * x[c * k + i]);
            double err = fabs(g - ref) / scale;
            *worst = err > *worst ? err : *worst;
            ok = CHECK(err <= 1e-5, "%s k=%lld column %lld row %lld: gpu %g, reference %g", type_name(t), (long long)k,
                       (long long)c, (long long)r, (double)g, ref);
        }
        /* the column alone: the same bits */
        const void *xc = q8 ? (const void *)((const uint8_t *)dxq + (size_t)c * xq_col) : (const void *)((const float *)dxf + c * k);
        ok = ok && CHECK(cuda_matmul(t, dw, k, n, xc, 1, db, dr + c * n, CUDA_EPI_ADD, dy, NULL, &e) == 0, "%s", e.msg);
        if (ok) {
            down(one, dy, (size_t)n * 4);
            ok = CHECK(memcmp(one, got + c * n, (size_t)n * 4) == 0, "%s: column %lld alone differs from the batch",
                       type_name(t), (long long)c);
        }
    }
    /* the SwiGLU pair: gate and up (here the same weights, two other
     * matrices' worth of work) into silu(gate) * up, and as Q8_1 */
    float *plain = malloc((size_t)(n * nt) * 4);
    uint8_t *pq8 = malloc((size_t)(n / 32) * 36 * nt), *want_q8 = malloc((size_t)(n / 32) * 36 * nt);
    void *dq8 = up(NULL, (size_t)(n / 32) * 36 * nt);
    float *dt = pair_scratch_up(n), *scratch = malloc((size_t)n * 4);
    const struct cuda_matrix pair[2] = { { t, dw, n, NULL, dy }, { t, dw, n, NULL, NULL } };
    ok = ok && CHECK(cuda_matmul(t, dw, k, n, dx, nt, NULL, NULL, CUDA_EPI_NONE, dy, NULL, &e) == 0, "%s", e.msg);
    if (ok) {
        down(plain, dy, (size_t)(n * nt) * 4);
        ok = CHECK(cuda_matmul_multi(pair, 2, k, q8 ? dxq : NULL, q8 ? NULL : (const float *)dxf, nt, NULL,
                                     CUDA_EPI_PAIR, n % 32 ? NULL : dq8, n % 32 ? NULL : dt, NULL, NULL, &e) == 0,
                   "%s", e.msg);
    }
    if (ok) {
        down(sw, dy, (size_t)(n * nt) * 4);
        for (int64_t i = 0; i < n * nt && ok; i++) {
            double want = silu_d(plain[i]) * plain[i];
            ok = CHECK(fabs(sw[i] - want) <= 1e-5 * (fabs(want) + 1e-3), "%s pair %lld: %g vs %g", type_name(t),
                       (long long)i, (double)sw[i], want);
        }
        if (ok && n % 32 == 0) {
            down(pq8, dq8, (size_t)(n / 32) * 36 * nt);
            for (int64_t c = 0; c < nt; c++)
                quant_q8_1(sw + c * n, want_q8 + (size_t)c * (n / 32) * 36, n);
            ok = CHECK(memcmp(pq8, want_q8, (size_t)(n / 32) * 36 * nt) == 0, "%s: the pair's Q8_1 output is not the CPU's "
                       "quantization of its f32 output", type_name(t));
            down(scratch, dt, (size_t)n * 4);
            for (int64_t i = 0; i < n && ok; i++)
                ok = CHECK(((const uint32_t *)scratch)[i] == 0xffffffffu, "%s: the pair left its scratch's row %lld at %#x",
                           type_name(t), (long long)i, ((const uint32_t *)scratch)[i]);
        }
    }
    cuda_free(dq8), cuda_free(dt);
    free(pq8), free(want_q8), free(scratch);
    cuda_free(dw), cuda_free(dxf), cuda_free(dxq), cuda_free(db), cuda_free(dr), cuda_free(dy);
    free(wf), free(x), free(bias), free(res), free(wq), free(xq), free(wd), free(got), free(one), free(sw);
    free(plain), free(terms);
    return ok;
}

/* A SwiGLU or GeGLU pair whose gate and up are of two types (one launch,
 * each warp reading its own matrix's type): gate(gate) * up, and its Q8_1
 * blocks. */
static bool mixed_pair(enum cuda_epilogue epi)
{
    struct error e;
    const int64_t k = 4096, n = 128, nt = 3;
    const enum tensor_type tg = TYPE_Q4_K, tu = TYPE_Q6_K;
    size_t gb = type_bytes(tg, (uint64_t)(k * n)), ub = type_bytes(tu, (uint64_t)(k * n)), qb = (size_t)(n / 32) * 36 * nt;
    float *gf = randoms(k * n, 0.02f), *uf = randoms(k * n, 0.02f), *x = randoms(k * nt, 1);
    uint8_t *g = malloc(gb), *u = malloc(ub), *xq = malloc((size_t)(k / 32) * 36 * nt), *q8 = malloc(qb), *want_q8 = malloc(qb);
    quantize_row(tg, gf, g, k * n);
    quantize_row(tu, uf, u, k * n);
    for (int64_t c = 0; c < nt; c++)
        quant_q8_1(x + c * k, xq + (size_t)c * (k / 32) * 36, k);
    void *dg = up_rows(tg, k, n, g), *du = up_rows(tu, k, n, u), *dx = up(xq, (size_t)(k / 32) * 36 * nt), *dq = up(NULL, qb);
    float *dt = pair_scratch_up(n);
    float *dgate = up(NULL, (size_t)(n * nt) * 4), *dup = up(NULL, (size_t)(n * nt) * 4), *dy = up(NULL, (size_t)(n * nt) * 4);
    float *gate = malloc((size_t)(n * nt) * 4), *upv = malloc((size_t)(n * nt) * 4), *y = malloc((size_t)(n * nt) * 4);
    const struct cuda_matrix pair[2] = { { tg, dg, n, NULL, dy }, { tu, du, n, NULL, NULL } };
    bool ok = CHECK(cuda_matmul(tg, dg, k, n, dx, nt, NULL, NULL, CUDA_EPI_NONE, dgate, NULL, &e) == 0 &&
                        cuda_matmul(tu, du, k, n, dx, nt, NULL, NULL, CUDA_EPI_NONE, dup, NULL, &e) == 0 &&
                        cuda_matmul_multi(pair, 2, k, dx, NULL, nt, NULL, epi, dq, dt, NULL, NULL, &e) == 0,
                    "%s", e.msg);
    if (ok) {
        down(gate, dgate, (size_t)(n * nt) * 4), down(upv, dup, (size_t)(n * nt) * 4), down(y, dy, (size_t)(n * nt) * 4);
        down(q8, dq, qb);
        for (int64_t i = 0; i < n * nt && ok; i++) {
            double want = (epi == CUDA_EPI_PAIR_GELU ? gelu_d(gate[i]) : silu_d(gate[i])) * upv[i];
            /* GELU's exponent carries the rounding of its argument (1e-6 relative of e^-2u near u = -7): bound by the inputs */
            double bound = 1e-5 * (fabs(want) + 1e-3) + (epi == CUDA_EPI_PAIR_GELU ? 1e-6 * fabs(gate[i] * upv[i]) : 0);
            ok = CHECK(fabs(y[i] - want) <= bound, "mixed pair (epilogue %d) %lld: %g vs %g", (int)epi, (long long)i,
                       (double)y[i], want);
        }
        for (int64_t c = 0; c < nt; c++)
            quant_q8_1(y + c * n, want_q8 + (size_t)c * (n / 32) * 36, n);
        ok = ok && CHECK(memcmp(q8, want_q8, qb) == 0, "the mixed pair's Q8_1 output");
    }
    cuda_free(dt);
    cuda_free(dg), cuda_free(du), cuda_free(dx), cuda_free(dq), cuda_free(dgate), cuda_free(dup), cuda_free(dy);
    free(gf), free(uf), free(x), free(g), free(u), free(xq), free(q8), free(want_q8), free(gate), free(upv), free(y);
    return ok;
}

/* Q, K and V of three types with biases in one launch, rows of k, nt
 * columns: each matrix's bits are those of its own launch. */
static bool mixed_qkv(int64_t k, int64_t nt, const enum tensor_type types[3], const int64_t rows[3])
{
    struct error e;
    float *x = randoms(k * nt, 1);
    uint8_t *xq = malloc((size_t)(k / 32) * 36 * nt);
    for (int64_t c = 0; c < nt; c++)
        quant_q8_1(x + c * k, xq + (size_t)c * (k / 32) * 36, k);
    void *dxq = up(xq, (size_t)(k / 32) * 36 * nt), *dxf = up(x, (size_t)(k * nt) * 4), *dw[3];
    float *db[3], *dy[3], *dalone = up(NULL, (size_t)(rows[0] * nt) * 4);
    struct cuda_matrix m[3];
    for (int i = 0; i < 3; i++) {
        size_t wb = type_bytes(types[i], (uint64_t)(k * rows[i]));
        float *wf = randoms(k * rows[i], 0.02f), *b = randoms(rows[i], 0.1f);
        uint8_t *wq = malloc(wb);
        quantize_row(types[i], wf, wq, k * rows[i]);
        dw[i] = up_rows(types[i], k, rows[i], wq), db[i] = up(b, (size_t)rows[i] * 4), dy[i] = up(NULL, (size_t)(rows[i] * nt) * 4);
        m[i] = (struct cuda_matrix){ types[i], dw[i], rows[i], db[i], dy[i] };
        free(wf), free(b), free(wq);
    }
    bool ok = CHECK(cuda_matmul_multi(m, 3, k, dxq, dxf, nt, NULL, CUDA_EPI_NONE, NULL, NULL, NULL, NULL, &e) == 0, "%s", e.msg);
    for (int i = 0; i < 3 && ok; i++) {
        size_t bytes = (size_t)(rows[i] * nt) * 4;
        float *together = malloc(bytes), *alone = malloc(bytes);
        bool q8 = cuda_matmul_takes_q8(types[i]);
        ok = CHECK(cuda_matmul(types[i], dw[i], k, rows[i], q8 ? dxq : dxf, nt, db[i], NULL, CUDA_EPI_NONE, dalone, NULL,
                               &e) == 0, "%s", e.msg);
        if (ok) {
            down(together, dy[i], bytes), down(alone, dalone, bytes);
            ok = CHECK(memcmp(together, alone, bytes) == 0, "mixed QKV: the %s matrix differs from its own launch",
                       type_name(types[i]));
        }
        free(together), free(alone);
    }
    for (int i = 0; i < 3; i++)
        cuda_free(dw[i]), cuda_free(db[i]), cuda_free(dy[i]);
    cuda_free(dxq), cuda_free(dxf), cuda_free(dalone);
    free(x), free(xq);
    return ok;
}

/* The decode matmuls fixed by row length alone (matmul_shapes.cu, the
 * compiler's CUDA_MATMUL_INSTANCE) give the generic kernel's bits: every
 * type at each of the table's row lengths, plain with a bias and as a
 * SwiGLU pair with its Q8_1 output; and so do the per-model build's typed
 * launches (generated/qwen2_5_0_5b/kernels.cu: rows and types fixed too). */
extern const struct cuda_kernel test_row_length_kernels[], qwen2_5_0_5b_cuda_kernels[];

static bool specialized_case(const struct cuda_kernel *special, enum tensor_type t, int64_t k)
{
    struct error e;
    const int64_t n = 64;
    bool q8 = cuda_matmul_takes_q8(t);
    size_t wb = type_bytes(t, (uint64_t)(k * n)), qb = (size_t)(n / 32) * 36, yb = (size_t)n * 4;
    float *wf = randoms(k * n, 0.02f), *x = randoms(k, 1), *bias = randoms(n, 0.1f);
    uint8_t *wq = malloc(wb), *xq = malloc((size_t)(k / 32) * 36);
    quantize_row(t, wf, wq, k * n);
    quant_q8_1(x, xq, k);
    void *dw = up_rows(t, k, n, wq), *dxq = up(xq, (size_t)(k / 32) * 36), *dq8[2] = { up(NULL, qb), up(NULL, qb) };
    float *dxf = up(x, (size_t)k * 4), *db = up(bias, yb), *dy[2] = { up(NULL, yb), up(NULL, yb) };
    float *dp[2] = { up(NULL, yb), up(NULL, yb) };
    float *dt = pair_scratch_up(n);
    bool ok = true;
    for (int way = 0; way < 2 && ok; way++) { /* 0: generic, 1: the build's */
        const struct cuda_kernel *sp = way ? special : NULL;
        const struct cuda_matrix one = { t, dw, n, db, dy[way] }, pair[2] = { { t, dw, n, NULL, dp[way] }, { t, dw, n, NULL, NULL } };
        ok = CHECK(cuda_matmul_multi(&one, 1, k, q8 ? dxq : NULL, q8 ? NULL : dxf, 1, NULL, CUDA_EPI_NONE, NULL, NULL, sp, NULL, &e) == 0 &&
                       cuda_matmul_multi(pair, 2, k, q8 ? dxq : NULL, q8 ? NULL : dxf, 1, NULL, CUDA_EPI_PAIR, dq8[way], dt, sp, NULL, &e) == 0,
                   "%s", e.msg);
    }
    uint8_t *a = malloc(yb), *b = malloc(yb);
    const struct { void *x, *y; size_t n; const char *what; } same[3] = {
        { dy[0], dy[1], yb, "output" }, { dp[0], dp[1], yb, "SwiGLU pair" }, { dq8[0], dq8[1], qb, "pair's Q8_1" }
    };
    for (int i = 0; i < 3 && ok; i++) {
        down(a, same[i].x, same[i].n), down(b, same[i].y, same[i].n);
        ok = CHECK(memcmp(a, b, same[i].n) == 0, "%s at k=%lld: the per-model kernel's %s differs from the generic one's",
                   type_name(t), (long long)k, same[i].what);
    }
    for (int i = 0; i < 2; i++)
        cuda_free(dq8[i]), cuda_free(dy[i]), cuda_free(dp[i]);
    cuda_free(dt);
    cuda_free(dw), cuda_free(dxq), cuda_free(dxf), cuda_free(db);
    free(wf), free(x), free(bias), free(wq), free(xq), free(a), free(b);
    return ok;
}

/* A typed entry's launch (its row sets and types fixed at compile time)
 * against the generic kernel, bit for bit: its matrices of its rows (each
 * 64 random rows repeated, so the 151936-row output matrix is quick to
 * make), a pair with its Q8_1 product where the entry is a pair's. */
static bool typed_case(const struct cuda_kernel *special, const struct cuda_kernel *entry)
{
    struct error e;
    const int64_t k = entry->k;
    const bool pair = entry->op == OP_FFN_GLU;
    int n_mat = 0;
    while (n_mat < 3 && entry->types[n_mat] >= 0)
        n_mat++;
    void *dw[3] = { NULL, NULL, NULL };
    float *dy[2][3], *dx = NULL;
    void *dxq = NULL, *dq8[2] = { NULL, NULL };
    float *dt = NULL;
    bool q8 = false;
    for (int i = 0; i < n_mat; i++) {
        const enum tensor_type t = (enum tensor_type)entry->types[i];
        const int64_t n = entry->rows[pair ? 0 : i];
        const size_t row = type_bytes(t, (uint64_t)k), block = row * 64;
        float *wf = randoms(k * 64, 0.02f);
        uint8_t *w64 = malloc(block), *w = malloc(row * (size_t)n);
        quantize_row(t, wf, w64, k * 64);
        for (int64_t r = 0; r < n; r += 64)
            memcpy(w + (size_t)r * row, w64, (size_t)(n - r < 64 ? n - r : 64) * row);
        dw[i] = up_rows(t, k, n, w);
        q8 = q8 || cuda_matmul_takes_q8(t);
        for (int way = 0; way < 2; way++)
            dy[way][i] = up(NULL, (size_t)n * 4);
        free(wf), free(w64), free(w);
    }
    float *x = randoms(k, 1);
    uint8_t *xq = malloc((size_t)(k / 32) * 36);
    quant_q8_1(x, xq, k);
    dx = up(x, (size_t)k * 4), dxq = up(xq, (size_t)(k / 32) * 36);
    const size_t qb = (size_t)(entry->rows[0] / 32) * 36;
    if (pair && entry->rows[0] % 32 == 0) {
        dq8[0] = up(NULL, qb), dq8[1] = up(NULL, qb);
        dt = pair_scratch_up(entry->rows[0]);
    }
    bool ok = true;
    for (int way = 0; way < 2 && ok; way++) { /* 0: generic, 1: the typed entry */
        struct cuda_matrix m[3];
        for (int i = 0; i < n_mat; i++)
            m[i] = (struct cuda_matrix){ (enum tensor_type)entry->types[i], dw[i], entry->rows[pair ? 0 : i], NULL,
                                         pair && i > 0 ? NULL : dy[way][i] };
        ok = CHECK(cuda_matmul_multi(m, n_mat, k, q8 ? dxq : NULL, dx, 1, NULL, pair ? CUDA_EPI_PAIR : CUDA_EPI_NONE,
                                     dq8[way], dt, way ? special : NULL, NULL, &e) == 0,
                   "%s", e.msg);
    }
    for (int i = 0; i < (pair ? 1 : n_mat) && ok; i++) {
        const size_t yb = (size_t)entry->rows[i] * 4;
        uint8_t *a = malloc(yb), *b = malloc(yb);
        down(a, dy[0][i], yb), down(b, dy[1][i], yb);
        ok = CHECK(memcmp(a, b, yb) == 0, "typed entry %s k=%lld (%s...): matrix %d differs from the generic kernel's",
                   graph_op_name((enum op)entry->op), (long long)k, type_name((uint32_t)entry->types[0]), i);
        free(a), free(b);
    }
    if (ok && dq8[0]) {
        uint8_t *a = malloc(qb), *b = malloc(qb);
        down(a, dq8[0], qb), down(b, dq8[1], qb);
        ok = CHECK(memcmp(a, b, qb) == 0, "typed pair k=%lld: its Q8_1 product differs from the generic kernel's", (long long)k);
        free(a), free(b);
    }
    for (int i = 0; i < n_mat; i++)
        cuda_free(dw[i]), cuda_free(dy[0][i]), cuda_free(dy[1][i]);
    if (dq8[0])
        cuda_free(dq8[0]), cuda_free(dq8[1]), cuda_free(dt);
    cuda_free(dx), cuda_free(dxq);
    free(x), free(xq);
    return ok;
}

void test_matmul_per_model_gives_the_generic_bits(void)
{
    static const enum tensor_type types[] = { TYPE_Q4_0, TYPE_Q4_1, TYPE_Q5_0, TYPE_Q5_1, TYPE_Q8_0, TYPE_Q4_K,
                                              TYPE_Q5_K, TYPE_Q6_K, TYPE_F32, TYPE_F16, TYPE_BF16 };
    const struct cuda_kernel *sp = test_row_length_kernels;
    int cases = 0;
    for (int i = 0; sp[i].matmul; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++)
            seen = seen || sp[j].k == sp[i].k;
        for (size_t t = 0; !seen && t < sizeof types / sizeof types[0]; t++) {
            if (sp[i].k % type_info(types[t])->block_elems)
                continue;
            const struct cuda_matrix one = { types[t], NULL, 64, NULL, NULL };
            if (!CHECK(cuda_matmul_fixed(sp, &one, 1, sp[i].k, false) == CUDA_FIXED_LENGTH,
                       "%s at k=%lld: the launch does not take the table's kernel for its row length", type_name(types[t]),
                       (long long)sp[i].k) ||
                !specialized_case(sp, types[t], sp[i].k))
                return;
            cases++;
        }
    }
    printf("    %d (type, row length) cases of the kernels fixed by row length: the same bits as the generic kernel\n",
           cases);
    if (!CHECK(cases >= 10, "only %d cases: the table lost its row lengths", cases))
        return;
    sp = qwen2_5_0_5b_cuda_kernels;
    int typed = 0;
    for (int i = 0; sp[i].matmul; i++) {
        if (!CHECK(sp[i].types[0] >= 0, "the qwen2.5-0.5b build knows its types, yet has an entry for row length %lld alone",
                   (long long)sp[i].k))
            return;
        if (!typed_case(sp, &sp[i]))
            return;
        typed++;
    }
    printf("    %d typed launches of the build (Q4_K_M's mix: rows and types fixed): the same bits as the generic kernel\n",
           typed);
    CHECK(typed >= 5, "only %d typed launches: the build lost its weight types", typed);
}

void test_matmul_matches_the_reference(void)
{
    static const enum tensor_type types[] = { TYPE_Q4_0, TYPE_Q4_1, TYPE_Q5_0, TYPE_Q5_1, TYPE_Q8_0, TYPE_Q4_K,
                                              TYPE_Q5_K, TYPE_Q6_K, TYPE_F32, TYPE_F16, TYPE_BF16 };
    static const int64_t nts[] = { 1, 3, 9 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        enum tensor_type t = types[i];
        bool k_quant = type_info(t)->block_elems == 256;
        double worst = 0;
        for (int s = 0; s < 3; s++) {
            /* a Qwen2.5-0.5B width (not a multiple of 256) where the type allows, else Qwen3-8B's */
            int64_t k = k_quant || s == 2 ? 4096 : 896, n = s == 2 ? 160 : 72;
            if (!matmul_case(t, k, n, nts[s], &worst))
                return;
        }
        if (cuda_matmul_takes_q8(t))
            printf("    %-5s bit-equal to quant_dot.c's block terms added in the kernel's order\n", type_name(t));
        else
            printf("    %-5s worst error %.2e of the sum of |terms| (bound 1e-5)\n", type_name(t), worst);
    }
    /* a decode step's pair with its Q8_1 product (rows in whole blocks of
     * 32: the launch's quantizing CTAs), for every quantized type, and in waves of more CTAs
     * than an H200 holds at once (3200 and 9600 rows) */
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        double w = 0;
        if (cuda_matmul_takes_q8(types[i]) &&
            !matmul_case(types[i], type_info(types[i])->block_elems == 256 ? 4096 : 896, 96, 1, &w))
            return;
    }
    double big = 0;
    if (!matmul_case(TYPE_Q8_0, 4096, 3200, 1, &big) || !matmul_case(TYPE_Q4_K, 4096, 9600, 1, &big))
        return;
    printf("    decode pairs' Q8_1 products (every quantized type; 3200 and 9600 rows): the CPU's blocks, the scratch left set\n");
    /* rows whose 4-warp stage is over 28 KiB: the loop launch, here of one
     * type (matmul_team_kernel, a row split between two warps), ~3 tiles a
     * CTA on an H200 (each stage used again), the last tile half full; of
     * mixed types (matmul_loop_kernel) below, the 8B's QKV with rows of 12288 */
    double worst = 0;
    if (!matmul_case(TYPE_Q6_K, 12288, 3170, 1, &worst) || !matmul_case(TYPE_Q5_K, 12288, 3170, 1, &worst))
        return;
    printf("    Q6_K, Q5_K rows of 12288 (the loop launch, two warps a row): bit-equal as well\n");
    /* Q8_0 rows of 12288 (the 8B's down): the persistent piece kernel,
     * two warps of two rows a CTA, staged past 48 KiB; 1025 row pairs,
     * fewer than its 1056 warps on 132 SMs, so the last CTA is half full
     * (and with MINFER_MM_PIECES=0, form 5's last CTA) */
    if (!matmul_case(TYPE_Q8_0, 12288, 2050, 1, &worst))
        return;
    printf("    Q8_0 rows of 12288 (two warps staged, 52 KiB a CTA, the last CTA half full): bit-equal as well\n");
    /* and 2049 row pairs: most of the piece kernel's warps take a second
     * tile, its pieces asked for again into the stage the first one's
     * were read from */
    if (!matmul_case(TYPE_Q8_0, 12288, 4098, 1, &worst))
        return;
    printf("    Q8_0 rows of 12288, 4098 rows (a second tile a warp): bit-equal as well\n");
    static const enum tensor_type qkv8b[3] = { TYPE_Q4_K, TYPE_Q4_K, TYPE_Q6_K }, qkv05[3] = { TYPE_Q5_0, TYPE_Q6_K, TYPE_F16 };
    static const int64_t rows8b[3] = { 4096, 1024, 1024 }, rows05[3] = { 96, 32, 64 };
    /* Qwen2.5-0.5B's Q4_K_M mix (Q5_0 Q and K, Q8_0 or Q6_K V; and an F16
     * V), Qwen3-8B's (Q4_K Q and K, a Q6_K V) */
    if (!mixed_pair(CUDA_EPI_PAIR) || !mixed_pair(CUDA_EPI_PAIR_GELU) || !mixed_qkv(1024, 2, qkv05, rows05) ||
        !mixed_qkv(4096, 1, qkv8b, rows8b) || !mixed_qkv(12288, 1, qkv8b, rows8b))
        return;
    struct error e;
    CHECK(cuda_matmul(TYPE_Q3_K, NULL, 256, 1, NULL, 1, NULL, NULL, CUDA_EPI_NONE, NULL, NULL, &e) == -1 &&
              strcmp(e.msg, "matmul: no GPU kernel for weight type Q3_K") == 0,
          "%s", e.msg);
}
