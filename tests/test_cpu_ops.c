/* test_cpu_ops.c: every CPU kernel against a naive reference written here
 * (double precision, the textbook formula), on random inputs; and every
 * fused op against the composition of the ops it replaces, bit for bit.
 * Graphs are built by hand through graph_add; inputs enter as embedding rows
 * (EMBED of a weight whose rows are the input columns). */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_dot.h"
#include "cpu/cpu_qdot.h"
#include "graph.h"
#include "quant/half.h"
#include "kv_cache.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "support.h"

#define ARENA (8u << 20)
#define SLOT (256u << 10) /* every node gets its own 256 KiB */

struct rig {
    struct graph g;
    uint8_t *arena;
    struct kv_cache kv;
    struct cpu_scratch s;
    int pos, kv_len; /* the graph's POSITIONS (0, 1, ...) and KV_LEN inputs */
    struct weight w[16];
    void *wdata[16];
    int n_w;
    struct rng rng;
};

static void rig_init(struct rig *r, int64_t nt)
{
    memset(r, 0, sizeof *r);
    struct error e;
    cr_assert_eq(graph_init(&r->g, 64, "test", &e), 0);
    graph_reset(&r->g, nt, 1);
    r->g.arena_bytes = ARENA;
    r->arena = aligned_alloc(256, ARENA);
    struct cpu_sizes sizes = { .k_max = 1024, .n_ctx = 64, .group = 4, .head_dim = 64, .n_threads = 2 };
    cr_assert_eq(cpu_scratch_init(&r->s, &sizes, &e), 0);
    rng_seed(&r->rng, 77);
    r->pos = graph_add(&r->g, &(struct node_desc){ .op = OP_POSITIONS, .offset = 0 });
    r->kv_len = graph_add(&r->g, &(struct node_desc){ .op = OP_KV_LEN, .offset = SLOT });
    cr_assert(r->pos >= 0 && r->kv_len >= 0, "%s", r->g.err.msg);
    for (int t = 0; t < nt; t++)
        ((int32_t *)r->arena)[t] = t;
    *(int32_t *)(r->arena + SLOT) = (int32_t)nt;
}

static void rig_free(struct rig *r)
{
    for (int i = 0; i < r->n_w; i++)
        free(r->wdata[i]);
    graph_free(&r->g);
    cpu_scratch_free(&r->s);
    kv_free(&r->kv);
    free(r->arena);
}

/* A weight of type t from the given values (ne0 x ne1), its values as stored. */
static const struct weight *weight(struct rig *r, enum tensor_type t, int64_t ne0, int64_t ne1, const float *v)
{
    struct weight *w = &r->w[r->n_w];
    size_t bytes = type_bytes(t, (uint64_t)(ne0 * ne1));
    void *d = malloc(bytes);
    cr_assert_eq(quantize_row(t, v, d, ne0 * ne1), 0, "%s", type_name(t));
    *w = (struct weight){ .name = "w", .name_len = 1, .type = t, .n_dims = ne1 > 1 ? 2 : 1, .ne = { ne0, ne1, 1, 1 },
                          .data = d };
    r->wdata[r->n_w++] = d;
    return w;
}

static float *randoms(struct rig *r, int64_t n, float sd)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++)
        x[i] = sd * rng_normal(&r->rng);
    return x;
}

static int add(struct rig *r, struct node_desc d)
{
    d.offset = (size_t)r->g.n * SLOT;
    int id = graph_add(&r->g, &d);
    cr_assert_geq(id, 0, "%s", r->g.err.msg);
    return id;
}

/* An f32 input [k, nt] with the given columns. */
static int input(struct rig *r, int64_t k, const float *cols)
{
    int tok = add(r, (struct node_desc){ .op = OP_TOKENS, .src = { -1, -1 } });
    int32_t *ids = (int32_t *)(r->arena + r->g.node[tok].offset);
    for (int64_t t = 0; t < r->g.nt; t++)
        ids[t] = (int32_t)t;
    return add(r, (struct node_desc){ .op = OP_EMBED, .src = { tok, -1 }, .p.w = { weight(r, TYPE_F32, k, r->g.nt, cols) } });
}

static float *data(struct rig *r, int id) { return (float *)(r->arena + r->g.node[id].offset); }

static void run(struct rig *r)
{
    struct error e;
    struct cpu_run run = { r->arena, &r->kv, &r->s, NULL, 0, false };
    cr_assert_eq(cpu_execute(&r->g, &run, &e), 0, "%s", e.msg);
}

static void dequant(const struct weight *w, float *out)
{
    dequantize_row(w->type, w->data, out, w->ne[0] * w->ne[1]);
}

/* ---- matmul, every weight type ---- */

static enum tensor_type types[] = { TYPE_F32, TYPE_F16,  TYPE_BF16, TYPE_Q8_0, TYPE_Q4_0, TYPE_Q4_1,
                                    TYPE_Q5_0, TYPE_Q5_1, TYPE_Q4_K, TYPE_Q5_K, TYPE_Q6_K };

ParameterizedTestParameters(cpu_ops, matmul_matches_the_textbook_product)
{
    return cr_make_param_array(enum tensor_type, types, sizeof types / sizeof types[0]);
}

ParameterizedTest(enum tensor_type *t, cpu_ops, matmul_matches_the_textbook_product)
{
    struct rig r;
    rig_init(&r, 3);
    int64_t k = 512, n = 24;
    float *wv = randoms(&r, k * n, 0.1f), *xv = randoms(&r, k * 3, 1), *bv = randoms(&r, n, 0.1f),
          *rv = randoms(&r, n * 3, 1);
    const struct weight *w = weight(&r, *t, k, n, wv), *bias = weight(&r, TYPE_F32, n, 1, bv);
    int x = input(&r, k, xv), res = input(&r, n, rv);
    int y = add(&r, (struct node_desc){ .op = OP_MATMUL_ADD, .src = { x, res }, .p = { .w = { w }, .bias = { bias } } });
    run(&r);
    float *wd = malloc((size_t)(k * n) * sizeof *wd);
    dequant(w, wd);
    for (int64_t c = 0; c < 3; c++) {
        for (int64_t j = 0; j < n; j++) {
            double want = bv[j] + rv[c * n + j], scale = fabs(bv[j]) + fabs(rv[c * n + j]);
            for (int64_t i = 0; i < k; i++) {
                want += (double)wd[j * k + i] * xv[c * k + i];
                scale += fabs((double)wd[j * k + i] * xv[c * k + i]);
            }
            float got = data(&r, y)[c * n + j];
            cr_assert_leq(fabs(got - want), 1e-6 * scale + 1e-7, "%s [%lld, %lld]: %g vs %g", type_name(*t), (long long)j,
                          (long long)c, (double)got, want);
        }
    }
    free(wd), free(wv), free(xv), free(bv), free(rv);
    rig_free(&r);
}

/* ---- fused ops equal their compositions ---- */

Test(cpu_ops, fused_matmuls_equal_their_parts)
{
    struct rig r;
    rig_init(&r, 4);
    int64_t k = 256;
    float *xv = randoms(&r, k * 4, 1), *a = randoms(&r, k * 64, 0.1f), *b = randoms(&r, k * 32, 0.1f),
          *c = randoms(&r, k * 32, 0.1f), *bias = randoms(&r, 64, 0.1f);
    const struct weight *wq = weight(&r, TYPE_Q4_K, k, 64, a), *wk = weight(&r, TYPE_Q6_K, k, 32, b),
                        *wv = weight(&r, TYPE_Q8_0, k, 32, c), *bq = weight(&r, TYPE_F32, 64, 1, bias);
    int x = input(&r, k, xv);
    int q = add(&r, (struct node_desc){ .op = OP_MATMUL_QKV, .src = { x, -1 }, .p = { .w = { wq, wk, wv }, .bias = { bq } } });
    int kk = add(&r, (struct node_desc){ .op = OP_PART, .src = { q, -1 }, .p.part = 1 });
    int vv = add(&r, (struct node_desc){ .op = OP_PART, .src = { q, -1 }, .p.part = 2 });
    int q1 = add(&r, (struct node_desc){ .op = OP_MATMUL, .src = { x, -1 }, .p = { .w = { wq }, .bias = { bq } } });
    int k1 = add(&r, (struct node_desc){ .op = OP_MATMUL, .src = { x, -1 }, .p.w = { wk } });
    int v1 = add(&r, (struct node_desc){ .op = OP_MATMUL, .src = { x, -1 }, .p.w = { wv } });
    /* FFN_GLU against matmul, matmul, silu, mul */
    int ffn = add(&r, (struct node_desc){ .op = OP_FFN_GLU, .src = { x, -1 }, .p.w = { wk, wv } });
    int g = add(&r, (struct node_desc){ .op = OP_MATMUL, .src = { x, -1 }, .p.w = { wk } });
    int u = add(&r, (struct node_desc){ .op = OP_MATMUL, .src = { x, -1 }, .p.w = { wv } });
    int sg = add(&r, (struct node_desc){ .op = OP_SILU, .src = { g, -1 } });
    int prod = add(&r, (struct node_desc){ .op = OP_MUL, .src = { sg, u } });
    int sw = add(&r, (struct node_desc){ .op = OP_GLU, .src = { g, u } });
    /* and with GELU's gate */
    int ffn_ge = add(&r, (struct node_desc){ .op = OP_FFN_GLU, .src = { x, -1 }, .p = { .w = { wk, wv }, .glu = GLU_GELU } });
    int gg = add(&r, (struct node_desc){ .op = OP_GELU, .src = { g, -1 } });
    int prod_ge = add(&r, (struct node_desc){ .op = OP_MUL, .src = { gg, u } });
    int ge = add(&r, (struct node_desc){ .op = OP_GLU, .src = { g, u }, .p.glu = GLU_GELU });
    run(&r);
    cr_assert_eq(memcmp(data(&r, q), data(&r, q1), 64 * 4 * 4), 0, "q");
    cr_assert_eq(memcmp(data(&r, kk), data(&r, k1), 32 * 4 * 4), 0, "k");
    cr_assert_eq(memcmp(data(&r, vv), data(&r, v1), 32 * 4 * 4), 0, "v");
    cr_assert_eq(memcmp(data(&r, ffn), data(&r, prod), 32 * 4 * 4), 0, "ffn");
    cr_assert_eq(memcmp(data(&r, sw), data(&r, prod), 32 * 4 * 4), 0, "swiglu");
    cr_assert_eq(memcmp(data(&r, ffn_ge), data(&r, prod_ge), 32 * 4 * 4), 0, "ffn with GELU");
    cr_assert_eq(memcmp(data(&r, ge), data(&r, prod_ge), 32 * 4 * 4), 0, "geglu");
    for (int i = 0; i < 32 * 4; i++) {
        double gv = data(&r, g)[i], want = gv / (1 + exp(-gv)) * data(&r, u)[i];
        cr_assert_leq(fabs(data(&r, prod)[i] - want), 1e-5 * fabs(want) + 1e-7);
    }
    free(xv), free(a), free(b), free(c), free(bias);
    rig_free(&r);
}

/* ---- norms, RoPE, elementwise ---- */

static void rope_ref(double *x, int64_t d, double pos, double base, int style)
{
    for (int64_t i = 0; i < d / 2; i++) {
        double th = pos * pow(base, -2.0 * (double)i / (double)d);
        int64_t a = style == ROPE_NEOX ? i : 2 * i, b = style == ROPE_NEOX ? i + d / 2 : 2 * i + 1;
        double x0 = x[a], x1 = x[b];
        x[a] = x0 * cos(th) - x1 * sin(th);
        x[b] = x0 * sin(th) + x1 * cos(th);
    }
}

Test(cpu_ops, norms_rope_and_elementwise_match_the_formulas)
{
    struct rig r;
    rig_init(&r, 5);
    const int64_t d = 64, h = 3, k = d * h;
    float *xv = randoms(&r, k * 5, 2), *nw = randoms(&r, k, 0.2f), *hw = randoms(&r, d, 0.2f), *yv = randoms(&r, k * 5, 1);
    for (int i = 0; i < k; i++)
        nw[i] += 1;
    for (int i = 0; i < d; i++)
        hw[i] += 1;
    const struct weight *norm_w = weight(&r, TYPE_F32, k, 1, nw), *head_w = weight(&r, TYPE_F16, d, 1, hw),
                        *bias = weight(&r, TYPE_F32, k, 1, nw);
    int x = input(&r, k, xv), y = input(&r, k, yv);
    int norm = add(&r, (struct node_desc){ .op = OP_RMS_NORM, .src = { x, -1 }, .p = { .w = { norm_w }, .eps = 1e-5f } });
    int norm_q8 = add(&r, (struct node_desc){ .op = OP_RMS_NORM_Q8, .src = { x, -1 }, .p = { .w = { norm_w }, .eps = 1e-5f } });
    int norm_add = add(&r, (struct node_desc){ .op = OP_RMS_NORM_ADD, .src = { x, y }, .p = { .w = { norm_w }, .eps = 1e-5f } });
    int norm_then_add = add(&r, (struct node_desc){ .op = OP_ADD, .src = { norm, y } });
    int heads = add(&r, (struct node_desc){ .op = OP_HEADS, .src = { x, -1 }, .p.head_dim = d });
    int hn = add(&r, (struct node_desc){ .op = OP_HEAD_NORM, .src = { heads, -1 }, .p = { .w = { head_w }, .eps = 1e-6f } });
    int rope = add(&r, (struct node_desc){ .op = OP_ROPE, .src = { hn, r.pos }, .p = { .rope_base = 1e4f, .rope_style = ROPE_NEOX } });
    int fused = add(&r, (struct node_desc){ .op = OP_HEAD_NORM_ROPE, .src = { heads, r.pos },
                                            .p = { .w = { head_w }, .eps = 1e-6f, .rope_base = 1e4f, .rope_style = ROPE_NEOX } });
    int normal = add(&r, (struct node_desc){ .op = OP_ROPE, .src = { heads, r.pos }, .p = { .rope_base = 5e5f, .rope_style = ROPE_NORMAL } });
    int linear = add(&r, (struct node_desc){ .op = OP_ROPE, .src = { heads, r.pos },
                                             .p = { .rope_base = 1e4f, .rope_style = ROPE_NEOX, .rope_factor = 8 } });
    int sum = add(&r, (struct node_desc){ .op = OP_ADD, .src = { x, y } });
    int prod = add(&r, (struct node_desc){ .op = OP_MUL, .src = { x, y } });
    int silu = add(&r, (struct node_desc){ .op = OP_SILU, .src = { x, -1 } });
    int gelu = add(&r, (struct node_desc){ .op = OP_GELU, .src = { x, -1 } });
    int scaled = add(&r, (struct node_desc){ .op = OP_SCALE, .src = { x, -1 }, .p.scale = 25.3f });
    int biased = add(&r, (struct node_desc){ .op = OP_ADD_BIAS, .src = { y, -1 }, .p.bias = { bias } });
    run(&r);
    cr_assert_eq(memcmp(data(&r, norm), data(&r, norm_q8), (size_t)k * 5 * 4), 0, "the CPU's RMS_NORM_Q8 writes f32");
    cr_assert_eq(memcmp(data(&r, norm_add), data(&r, norm_then_add), (size_t)k * 5 * 4), 0, "RMS_NORM_ADD = ADD(RMS_NORM)");
    cr_assert_eq(memcmp(data(&r, fused), data(&r, rope), (size_t)k * 5 * 4), 0, "HEAD_NORM_ROPE = ROPE(HEAD_NORM)");
    float hwd[64];
    dequantize_row(TYPE_F16, head_w->data, hwd, d);
    for (int64_t c = 0; c < 5; c++) {
        const float *xc = xv + c * k;
        double ss = 0;
        for (int64_t i = 0; i < k; i++)
            ss += (double)xc[i] * xc[i];
        for (int64_t i = 0; i < k; i++) {
            double want = xc[i] / sqrt(ss / (double)k + 1e-5) * nw[i];
            cr_assert_leq(fabs(data(&r, norm)[c * k + i] - want), 1e-5 * fabs(want) + 1e-6, "rms_norm");
            cr_assert_eq(data(&r, sum)[c * k + i], xc[i] + yv[c * k + i]);
            cr_assert_eq(data(&r, prod)[c * k + i], xc[i] * yv[c * k + i]);
            double s = xc[i] / (1 + exp(-(double)xc[i]));
            cr_assert_leq(fabs(data(&r, silu)[c * k + i] - s), 1e-6 * fabs(s) + 1e-7, "silu");
            double xd = xc[i], ge = 0.5 * xd * (1 + tanh(sqrt(2 / M_PI) * (xd + 0.044715 * xd * xd * xd)));
            cr_assert_leq(fabs(data(&r, gelu)[c * k + i] - ge), 1e-6 * fabs(ge) + 1e-7, "gelu");
            cr_assert_eq(data(&r, scaled)[c * k + i], xc[i] * 25.3f, "scale");
        }
        for (int64_t j = 0; j < h; j++) {
            double v[64], plain[64], lin_ref[64];
            double hs = 0;
            for (int64_t i = 0; i < d; i++)
                hs += (double)xc[j * d + i] * xc[j * d + i];
            for (int64_t i = 0; i < d; i++) {
                v[i] = xc[j * d + i] / sqrt(hs / (double)d + 1e-6) * hwd[i];
                plain[i] = lin_ref[i] = xc[j * d + i];
            }
            rope_ref(v, d, c, 1e4, ROPE_NEOX);
            rope_ref(plain, d, c, 5e5, ROPE_NORMAL);
            rope_ref(lin_ref, d, c / 8.0, 1e4, ROPE_NEOX);
            for (int64_t i = 0; i < d; i++) {
                cr_assert_leq(fabs(data(&r, rope)[c * k + j * d + i] - v[i]), 1e-5 * fabs(v[i]) + 1e-5, "neox rope");
                cr_assert_leq(fabs(data(&r, normal)[c * k + j * d + i] - plain[i]), 1e-5 * fabs(plain[i]) + 1e-5,
                              "normal rope");
                cr_assert_leq(fabs(data(&r, linear)[c * k + j * d + i] - lin_ref[i]), 1e-5 * fabs(lin_ref[i]) + 1e-5,
                              "rope with linear scaling");
            }
        }
    }
    for (int64_t i = 0; i < k * 5; i++) /* the bias is added in place */
        cr_assert_eq(data(&r, biased)[i], yv[i] + nw[i % k]);
    free(xv), free(nw), free(hw), free(yv);
    rig_free(&r);
}

/* ---- KV cache and causal GQA attention ---- */

struct kv_case {
    enum kv_type type;
    double tolerance;
    int64_t window; /* 0: every position; else the last `window` */
};

static struct kv_case kv_cases[] = { { KV_F32, 1e-5, 0 }, { KV_F16, 2e-3, 0 }, { KV_Q8_0, 2e-2, 0 },
                                     { KV_F32, 1e-5, 3 }, { KV_F16, 2e-3, 1 } };

ParameterizedTestParameters(cpu_ops, attention_matches_causal_softmax)
{
    return cr_make_param_array(struct kv_case, kv_cases, sizeof kv_cases / sizeof kv_cases[0]);
}

ParameterizedTest(struct kv_case *kc, cpu_ops, attention_matches_causal_softmax)
{
    struct rig r;
    const int64_t nt = 6, d = 32, h = 4, hkv = 2;
    rig_init(&r, nt);
    struct error e;
    cr_assert_eq(kv_init(&r.kv, kc->type, 1, 16, hkv, d, &e), 0, "%s", e.msg);
    r.g.layer = 0;
    float *qv = randoms(&r, d * h * nt, 1), *kv = randoms(&r, d * hkv * nt, 1), *vv = randoms(&r, d * hkv * nt, 1);
    int q = add(&r, (struct node_desc){ .op = OP_HEADS, .src = { input(&r, d * h, qv), -1 }, .p.head_dim = d });
    int k = add(&r, (struct node_desc){ .op = OP_HEADS, .src = { input(&r, d * hkv, kv), -1 }, .p.head_dim = d });
    int v = add(&r, (struct node_desc){ .op = OP_HEADS, .src = { input(&r, d * hkv, vv), -1 }, .p.head_dim = d });
    int store = add(&r, (struct node_desc){ .op = OP_KV_STORE, .src = { k, v, r.pos } });
    int att = add(&r, (struct node_desc){ .op = OP_ATTENTION, .src = { q, store, r.pos, r.kv_len }, .p.window = kc->window });
    run(&r);
    for (int64_t t = 0; t < nt; t++) {
        const int64_t lo = kc->window && t >= kc->window ? t - kc->window + 1 : 0;
        for (int64_t j = 0; j < h; j++) {
            int64_t g = j / (h / hkv);
            double s[6], max = -INFINITY, sum = 0;
            for (int64_t p = lo; p <= t; p++) {
                s[p] = 0;
                for (int64_t i = 0; i < d; i++)
                    s[p] += (double)qv[(t * h + j) * d + i] * kv[(p * hkv + g) * d + i];
                s[p] /= sqrt((double)d);
                max = fmax(max, s[p]);
            }
            for (int64_t p = lo; p <= t; p++)
                sum += s[p] = exp(s[p] - max);
            for (int64_t i = 0; i < d; i++) {
                double want = 0;
                for (int64_t p = lo; p <= t; p++)
                    want += s[p] / sum * vv[(p * hkv + g) * d + i];
                float got = data(&r, att)[(t * h + j) * d + i];
                cr_assert_leq(fabs(got - want), kc->tolerance, "%s cache, window %lld, token %lld head %lld: %g vs %g",
                              kv_type_name(kc->type), (long long)kc->window, (long long)t, (long long)j, (double)got, want);
            }
        }
    }
    free(qv), free(kv), free(vv);
    rig_free(&r);
}

/* ---- the blocked dot product against the reference, bit for bit ---- */

/* as the matmul calls it: on the vector unit chosen at run time */
CPU_SIMD static void block_on_this_cpu(const float *w, int64_t nr, const float *x, int64_t nc, float *y, int64_t k)
{
    cpu_dot_block(w, nr, x, nc, y, nr, k);
}

Test(cpu_ops, block_dot_products_equal_the_reference_bits)
{
    struct rng rng;
    rng_seed(&rng, 2029);
    static const int64_t ks[] = { 1, 5, 8, 13, 64, 100, 896 };
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
        int64_t k = ks[ki];
        for (int64_t nr = 1; nr <= 9; nr += 4) {
            for (int64_t nc = 1; nc <= 5; nc += 2) {
                /* room for rows up to a multiple of four, as the scratch has */
                float *w = calloc((size_t)((nr + 3) / 4 * 4 * k), sizeof *w), *x = malloc((size_t)(nc * k) * sizeof *x);
                float *y = malloc((size_t)(nc * nr) * sizeof *y);
                for (int64_t i = 0; i < nr * k; i++)
                    w[i] = (float)rng_normal(&rng);
                for (int64_t i = 0; i < nc * k; i++)
                    x[i] = (float)rng_normal(&rng);
                block_on_this_cpu(w, nr, x, nc, y, k);
                for (int64_t c = 0; c < nc; c++)
                    for (int64_t r = 0; r < nr; r++) {
                        float want = cpu_dot_n(w + r * k, x + c * k, k);
                        cr_assert(memcmp(&y[c * nr + r], &want, sizeof want) == 0,
                                  "k=%lld row %lld col %lld: %.9g, the reference %.9g", (long long)k, (long long)r,
                                  (long long)c, y[c * nr + r], want);
                    }
                free(w);
                free(x);
                free(y);
            }
        }
    }
}

/* The fast path's row dot (cpu_qdot: integer code sums on AVX2 where the
 * processor has it, eight blocks at a time) gives cpu_qdot_reference's bits
 * (quant_dot.c's terms in the documented lane order, no vector code) for
 * every quantized type, on rows of real widths (896 = 28 blocks: a partial
 * group of eight) and with offsets that make the mins and the fifth and
 * sixth bits matter; several columns at once (3, and a prompt's full group
 * of CPU_QDOT_COLS, which has its own kernel) give each column's own bits;
 * and the sum stays within float rounding of dot_q8_1's left-to-right one. */
Test(cpu_ops, qdot_is_the_reference_dot_bit_for_bit)
{
    static const enum tensor_type qtypes[] = { TYPE_Q4_0, TYPE_Q4_1, TYPE_Q5_0, TYPE_Q5_1,
                                               TYPE_Q8_0, TYPE_Q4_K, TYPE_Q5_K, TYPE_Q6_K };
    static const int64_t widths[] = { 896, 4864, 4096 };
    struct rng r;
    rng_seed(&r, 2024);
    static float w[4864], a[4864], col[4864];
    static uint8_t wq[4864 * 2], aq[4864 / 32 * 36], split[CPU_QDOT_COLS][4864 * 2];
    static const char *const units[] = { "avx512-vnni", "avx2", "scalar" };
    int checked = 0, n_units = 0;
    for (int u = 0; u < 3; u++) {
        if (cpu_qdot_use(units[u]) != 0)
            continue; /* this processor lacks it */
        n_units++;
        for (size_t t = 0; t < sizeof qtypes / sizeof qtypes[0]; t++)
            for (size_t s = 0; s < sizeof widths / sizeof widths[0]; s++) {
                int64_t k = widths[s];
                if (k % type_info(qtypes[t])->block_elems)
                    continue;
                for (int trial = 0; trial < 3; trial++) {
                    for (int64_t i = 0; i < k; i++) {
                        w[i] = 0.02f * rng_normal(&r) + (trial == 1 ? 0.03f : 0.0f);
                        a[i] = rng_normal(&r) * (trial == 2 ? 50.0f : 1.0f);
                    }
                    quantize_row(qtypes[t], w, wq, k);
                    size_t cb = cpu_q8_bytes(k);
                    /* the columns in block order (one, or a prompt's last few) and grouped (a full group) */
                    uint8_t *packed[2] = { malloc(CPU_QDOT_COLS * cb), malloc(CPU_QDOT_COLS * cb) };
                    for (int c = 0; c < CPU_QDOT_COLS; c++) { /* column 0 is a, the others scaled and shifted copies */
                        for (int64_t i = 0; i < k; i++)
                            col[i] = a[i] * (float)(c + 1) - 0.1f * (float)c;
                        cpu_q8_quantize(col, k, split[c], false);
                        memcpy(packed[0] + (size_t)c * cb, split[c], cb);
                        cpu_q8_quantize(col, k, packed[1] + (size_t)c * cb, true);
                    }
                    float got, many[CPU_QDOT_COLS], ref;
                    cr_assert_eq(cpu_qdot(qtypes[t], wq, split[0], k, &got), 0);
                    ref = cpu_qdot_reference(qtypes[t], wq, split[0], k, false);
                    cr_assert(memcmp(&ref, &got, sizeof got) == 0, "%s k=%lld trial %d (%s): %.9g, the reference %.9g",
                              type_name(qtypes[t]), (long long)k, trial, cpu_qdot_unit(), (double)got, (double)ref);
                    for (int g = 0; g < 2; g++) {
                        const int nc = g ? CPU_QDOT_COLS : 3;
                        cr_assert_eq(cpu_qdot_cols(qtypes[t], wq, packed[g], cb, nc, k, many), 0);
                        for (int c = 0; c < nc; c++) {
                            float want = cpu_qdot_reference(qtypes[t], wq, packed[g] + (size_t)c * cb, k, g);
                            cr_assert(memcmp(&want, &many[c], sizeof want) == 0, "%s k=%lld column %d of %d: %.9g, the reference %.9g",
                                      type_name(qtypes[t]), (long long)k, c, nc, (double)many[c], (double)want);
                            ref = cpu_qdot_reference(qtypes[t], wq, split[c], k, false); /* the layouts hold the same blocks */
                            cr_assert(memcmp(&want, &ref, sizeof want) == 0, "%s k=%lld column %d: the grouped codes differ",
                                      type_name(qtypes[t]), (long long)k, c);
                        }
                    }
                    /* the same terms as dot_q8_1 (which adds them left to right) */
                    float left;
                    quant_q8_1(a, aq, k);
                    cr_assert_eq(dot_q8_1(qtypes[t], wq, aq, k, &left), 0);
                    cr_assert_leq(fabs((double)left - got), 1e-5 * (fabs((double)left) + 1), "%s k=%lld: %.9g against dot_q8_1's %.9g",
                                  type_name(qtypes[t]), (long long)k, (double)got, (double)left);
                    free(packed[0]), free(packed[1]);
                    checked++;
                }
            }
    }
    cr_assert_eq(cpu_qdot_use("best"), 0);
    cr_log_info("cpu_qdot: %d units checked against the reference (the best here: %s)", n_units, cpu_qdot_unit());
    cr_assert_geq(checked, 50 * n_units);
    float out = 7;
    cr_assert_eq(cpu_qdot(TYPE_F16, wq, split[0], 64, &out), -1);
    cr_assert_eq(cpu_qdot_cols(TYPE_Q8_0, wq, split[0], 0, CPU_QDOT_COLS + 1, 64, &out), -1);
}

/* The fast path's activation quantizer gives the scalar one's bytes on
 * every unit: random rows, exact ties (a block whose largest value is 127,
 * so 1/d is 1 and x.5 values round half away from zero) and a zero block;
 * in block order and grouped, with a partial last group. */
Test(cpu_ops, activation_quantizer_is_the_scalar_one_on_every_unit)
{
    static const char *const units[] = { "avx512-vnni", "avx2" };
    static const int64_t widths[] = { 896, 4864 };
    static float x[4864];
    static uint8_t want[8192], got[8192];
    struct rng r;
    rng_seed(&r, 77);
    int checked = 0;
    for (size_t s = 0; s < sizeof widths / sizeof widths[0]; s++) {
        const int64_t n = widths[s];
        for (int64_t i = 0; i < n; i++)
            x[i] = rng_normal(&r) * (i < n / 2 ? 1.0f : 300.0f);
        for (int j = 0; j < 32; j++) {
            x[32 + j] = (float)(j % 2 ? -(j / 2) : j / 2) + (j % 3 ? 0.5f : 0.0f); /* ties at 1/d = 1 */
            x[64 + j] = 0.0f;
        }
        x[32] = 127.0f;
        for (int grouped = 0; grouped < 2; grouped++) {
            cr_assert_eq(cpu_qdot_use("scalar"), 0);
            cpu_q8_quantize(x, n, want, grouped);
            for (int u = 0; u < 2; u++) {
                if (cpu_qdot_use(units[u]) != 0)
                    continue;
                memset(got, 0xa5, sizeof got);
                cpu_q8_quantize(x, n, got, grouped);
                for (size_t b = 0; b < cpu_q8_bytes(n); b++)
                    cr_assert_eq(got[b], want[b], "%s, %lld wide, %s: byte %zu", units[u], (long long)n,
                                 grouped ? "grouped" : "block order", b);
                checked++;
            }
        }
    }
    cr_assert_eq(cpu_qdot_use("best"), 0);
    cr_log_info("activation quantizer: %d unit runs checked", checked);
}
