/* test_kernels.c: the CUDA kernels other than the matmuls (test_matmul.c,
 * test_mmq.c) against the CPU on fresh random inputs of model widths.
 * Bit-equal where the arithmetic is the CPU's own (the embedding decoders,
 * the KV store, the Q8_1 norm output against the CPU's quantizer); within
 * a stated tolerance, with the measured error printed, where the
 * arithmetic is float in another order (norms, attention). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/device.h"
#include "cuda/kernels.h"
#include "cuda/quantize_q8_1.h"
#include "cuda/weight_layout.h"
#include "graph_ops.h"
#include "kv_cache.h"
#include "quant/half.h"
#include "quant/quant.h"
#include "quant/quant_dot.h"
#include "runner.h"

/* ---- embedding rows: the CPU decoder's bits ---- */

void test_kernels_embed(void)
{
    static const enum tensor_type types[] = { TYPE_F32,  TYPE_F16,  TYPE_BF16, TYPE_Q4_0, TYPE_Q4_1, TYPE_Q5_0,
                                              TYPE_Q5_1, TYPE_Q8_0, TYPE_Q4_K, TYPE_Q5_K, TYPE_Q6_K };
    const int64_t d = 512, vocab = 37, nt = 6;
    int32_t ids[6] = { 0, 36, 5, 5, 17, 30 };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        enum tensor_type t = types[i];
        size_t bytes = type_bytes(t, (uint64_t)(d * vocab)), row = bytes / (size_t)vocab;
        float *wf = randoms(d * vocab, 1), *want = malloc((size_t)(d * nt) * 4), *got = malloc((size_t)(d * nt) * 4);
        uint8_t *w = malloc(bytes);
        quantize_row(t, wf, w, d * vocab);
        for (int c = 0; c < nt; c++)
            dequantize_row(t, w + (size_t)ids[c] * row, want + c * d, d);
        void *dw = up_rows(t, d, vocab, w), *di = up(ids, sizeof ids), *dy = up(NULL, (size_t)(d * nt) * 4);
        struct error e;
        bool ok = CHECK(cuda_embed(t, dw, d, di, nt, dy, NULL, &e) == 0, "%s", e.msg);
        if (ok) {
            down(got, dy, (size_t)(d * nt) * 4);
            ok = CHECK(memcmp(got, want, (size_t)(d * nt) * 4) == 0, "%s: the rows differ from the CPU's decoder",
                       type_name(t));
        }
        cuda_free(dw), cuda_free(di), cuda_free(dy);
        free(wf), free(want), free(got), free(w);
        if (!ok)
            return;
    }
}

/* ---- RMS norm, Q8_1 output, head norm and RoPE ---- */

/* rms_norm over nt columns of d: f32 out against the CPU's formula, Q8_1
 * out the CPU's quantization of that f32 output. */
static bool rms_norm_case(int64_t d, int64_t nt)
{
    struct error e;
    float *x = randoms(d * nt, 3), *w = randoms(d, 0.3f), *y = malloc((size_t)(d * nt) * 4), *res = randoms(d * nt, 2);
    float *sum = malloc((size_t)(d * nt) * 4);
    for (int i = 0; i < d; i++)
        w[i] += 1;
    uint8_t *q = malloc((size_t)(d / 32) * 36 * nt), *want_q = malloc((size_t)(d / 32) * 36 * nt);
    float *dx = up(x, (size_t)(d * nt) * 4), *dw = up(w, (size_t)d * 4), *dy = up(NULL, (size_t)(d * nt) * 4);
    float *dres = up(res, (size_t)(d * nt) * 4), *dsum = up(NULL, (size_t)(d * nt) * 4);
    void *dq = up(NULL, (size_t)(d / 32) * 36 * nt);
    bool ok = CHECK(cuda_rms_norm(dx, dw, 1e-6f, d, nt, NULL, dy, NULL, NULL, &e) == 0 &&
                        cuda_rms_norm(dx, dw, 1e-6f, d, nt, NULL, NULL, dq, NULL, &e) == 0 &&
                        cuda_rms_norm(dx, dw, 1e-6f, d, nt, dres, dsum, NULL, NULL, &e) == 0,
                    "%s", e.msg);
    double worst = 0;
    if (ok) {
        down(y, dy, (size_t)(d * nt) * 4);
        down(q, dq, (size_t)(d / 32) * 36 * nt);
        down(sum, dsum, (size_t)(d * nt) * 4);
        for (int64_t i = 0; i < d * nt && ok; i++) /* the residual add: the elementwise ADD's bits */
            ok = CHECK(sum[i] == y[i] + res[i], "rms_norm + residual element %lld: %g, want %g", (long long)i,
                       (double)sum[i], (double)(y[i] + res[i]));
        for (int64_t c = 0; c < nt; c++) {
            double ss = 0;
            for (int64_t i = 0; i < d; i++)
                ss += (double)x[c * d + i] * x[c * d + i];
            const float scale = 1.0f / sqrtf((float)(ss / (double)d) + 1e-6f);
            for (int64_t i = 0; i < d; i++) {
                float want = x[c * d + i] * scale * w[i];
                double err = fabs(y[c * d + i] - want) / (fabs(want) + 1e-6);
                worst = err > worst ? err : worst;
            }
            quant_q8_1(y + c * d, want_q + (size_t)c * (d / 32) * 36, d);
        }
        printf("    rms_norm (%lld wide) worst relative error %.2e against the CPU's formula (bound 1e-6)\n",
               (long long)d, worst);
        ok = CHECK(worst <= 1e-6, "rms_norm error %g", worst) &&
             CHECK(memcmp(q, want_q, (size_t)(d / 32) * 36 * nt) == 0,
                   "the Q8_1 output is not the CPU's quantization of the f32 output");
    }
    /* a column's bits in any batch: the first two columns alone (a CTA a slice) against the launch of nt (a prompt's
     * past CUDA_PROMPT_MIN_COLUMNS: a CTA a column) */
    float *two = malloc((size_t)(d * 2) * 4);
    ok = ok && CHECK(cuda_rms_norm(dx, dw, 1e-6f, d, 2, dres, dy, NULL, NULL, &e) == 0, "%s", e.msg);
    if (ok) {
        down(two, dy, (size_t)(d * 2) * 4);
        ok = CHECK(memcmp(two, sum, (size_t)(d * 2) * 4) == 0, "rms_norm (%lld wide): two columns alone differ from a launch of %lld",
                   (long long)d, (long long)nt);
    }
    free(two);
    cuda_free(dx), cuda_free(dw), cuda_free(dy), cuda_free(dq), cuda_free(dres), cuda_free(dsum);
    free(x), free(w), free(y), free(q), free(want_q), free(res), free(sum);
    return ok;
}

void test_kernels_norms(void)
{
    struct error e;
    /* Qwen2.5-0.5B's width (a CTA's slice only partly used), Qwen3-8B's, and the widest the kernel takes */
    if (!rms_norm_case(896, 5) || !rms_norm_case(4096, 3) || !rms_norm_case(8192, 2))
        return;
    /* and prompts (a CTA a column) of each width class */
    if (!rms_norm_case(896, 20) || !rms_norm_case(2048, 17) || !rms_norm_case(4096, 18) || !rms_norm_case(8192, 17))
        return;
    /* head norm + RoPE, both styles, against double-precision formulas */
    const int64_t hd = 128, h = 4, hn = 3;
    const int32_t pos[3] = { 0, 7, 3000 };
    float *hx = randoms(hd * h * hn, 1), *hw = randoms(hd, 0.2f), *hy = malloc((size_t)(hd * h * hn) * 4);
    for (int i = 0; i < hd; i++)
        hw[i] += 1;
    float *dhx = up(hx, (size_t)(hd * h * hn) * 4), *dhw = up(hw, (size_t)hd * 4), *dhy = up(NULL, (size_t)(hd * h * hn) * 4);
    int32_t *dpos = up(pos, sizeof pos);
    for (int way = 0; way < 3; way++) { /* NeoX, normal, NeoX with linear scaling by 8 (Gemma 3 4B's global layers) */
        const int style = way == 1 ? ROPE_NORMAL : ROPE_NEOX;
        const double factor = way == 2 ? 8 : 1;
        if (!CHECK(cuda_head_norm_rope(dhx, dhw, 1e-6f, 1e6f, way == 2 ? 8.0f : 0.0f, style, dpos, hd, h, hn, dhy, NULL, &e) == 0,
                   "%s", e.msg))
            return;
        down(hy, dhy, (size_t)(hd * h * hn) * 4);
        double herr = 0;
        for (int64_t c = 0; c < hn; c++)
            for (int64_t j = 0; j < h; j++) {
                const float *xi = hx + (c * h + j) * hd;
                double v[128], ss = 0;
                for (int i = 0; i < hd; i++)
                    ss += (double)xi[i] * xi[i];
                for (int i = 0; i < hd; i++)
                    v[i] = xi[i] / sqrt(ss / hd + 1e-6) * hw[i];
                for (int i = 0; i < hd / 2; i++) {
                    double th = pos[c] / factor * pow(1e6, -2.0 * i / hd);
                    int a = style == ROPE_NEOX ? i : 2 * i, b = style == ROPE_NEOX ? i + hd / 2 : 2 * i + 1;
                    double x0 = v[a], x1 = v[b];
                    v[a] = x0 * cos(th) - x1 * sin(th);
                    v[b] = x0 * sin(th) + x1 * cos(th);
                }
                double vmax = 0, dmax = 0;
                for (int i = 0; i < hd; i++) {
                    vmax = fmax(vmax, fabs(v[i]));
                    dmax = fmax(dmax, fabs(hy[(c * h + j) * hd + i] - v[i]));
                }
                herr = fmax(herr, dmax / vmax);
            }
        printf("    head_norm_rope (%s) worst error %.2e of a head's largest value (bound 1e-6)\n",
               way == 1 ? "normal" : way == 2 ? "neox, positions / 8" : "neox", herr);
        if (!CHECK(herr <= 1e-6, "head norm + rope error %g", herr))
            return;
    }
    cuda_free(dhx), cuda_free(dhw), cuda_free(dhy), cuda_free(dpos);
    free(hx), free(hw), free(hy);
}

/* ---- the KV store (the CPU's bytes) and attention (a double softmax) ---- */

/* nq queries at positions qpos (after 251 cached positions) against a
 * double-precision softmax, within bound, in chunks of `chunk` positions
 * (0: the engine's, cuda_attention_chunk). A batch of up to
 * CUDA_PROMPT_MIN_COLUMNS queries (the decode kernel) must give each
 * query's bits alone; a larger one (the tensor-core prompt kernel) the same
 * bits when cut into two launches. */
static bool attention_case(enum kv_type kt, int64_t d, int64_t h, int64_t h_kv, int64_t n_ctx, int64_t window, int64_t nq,
                           const int32_t *qpos, double bound, int64_t chunk)
{
    struct error e;
    const int64_t n_fill = 251;
    int32_t *fpos = malloc((size_t)n_fill * 4);
    for (int i = 0; i < n_fill; i++)
        fpos[i] = i;
    float *k = randoms(d * h_kv * n_fill, 1), *v = randoms(d * h_kv * n_fill, 1), *q = randoms(d * h * nq, 1);
    struct kv_cache cpu;
    if (!CHECK(kv_init(&cpu, kt, 1, n_ctx, h_kv, d, &e) == 0, "%s", e.msg))
        return false;
    for (int64_t p = 0; p < n_fill; p++)
        for (int64_t j = 0; j < h_kv; j++) {
            kv_store_row(&cpu, cpu.k, 0, j, p, k + (p * h_kv + j) * d);
            kv_store_row(&cpu, cpu.v, 0, j, p, v + (p * h_kv + j) * d);
        }
    size_t half = kv_bytes(&cpu) / 2;
    void *dk = up(NULL, half), *dv = up(NULL, half);
    float *dkin = up(k, (size_t)(d * h_kv * n_fill) * 4), *dvin = up(v, (size_t)(d * h_kv * n_fill) * 4);
    float *dq = up(q, (size_t)(d * h * nq) * 4), *dy = up(NULL, (size_t)(d * h * nq) * 4);
    int32_t *dfpos = up(fpos, (size_t)n_fill * 4), *dqpos = up(qpos, (size_t)nq * 4);
    chunk = chunk ? chunk : cuda_attention_chunk(n_ctx);
    float *scratch = up(NULL, cuda_attention_scratch_floats(d, h, n_ctx, chunk) * 4); /* zeroed below */
    uint8_t *kbytes = malloc(half), *vbytes = malloc(half);
    float *y = malloc((size_t)(d * h * nq) * 4), *one = malloc((size_t)(d * h * nq) * 4);
    size_t scratch_bytes = cuda_attention_scratch_floats(d, h, n_ctx, chunk) * 4;
    cuda_memset_async(dk, 0, half, NULL, &e), cuda_memset_async(dv, 0, half, NULL, &e);
    cuda_memset_async(scratch, 0, scratch_bytes, NULL, &e);
    bool ok = CHECK(cuda_kv_store(kt, dk, dv, dkin, dvin, dfpos, d, h_kv, n_fill, n_ctx, NULL, &e) == 0, "%s", e.msg);
    if (ok) {
        down(kbytes, dk, half);
        down(vbytes, dv, half);
        ok = CHECK(memcmp(kbytes, cpu.k, half) == 0 && memcmp(vbytes, cpu.v, half) == 0,
                   "%s: the cache's bytes differ from the CPU's", kv_type_name(kt));
    }
    /* with the Q8_1 output too: the CPU's quantization of the f32 output */
    size_t qbytes = (size_t)(d * h / 32) * 36 * nq;
    void *dq8 = up(NULL, qbytes);
    uint8_t *aq8 = malloc(qbytes), *want_aq8 = malloc(qbytes);
    ok = ok && CHECK(cuda_attention(kt, dk, dv, dq, dqpos, d, h, h_kv, nq, n_ctx, chunk, n_ctx, window, scratch, dy, dq8, NULL, &e) == 0,
                     "%s", e.msg);
    if (ok) {
        down(y, dy, (size_t)(d * h * nq) * 4);
        down(aq8, dq8, qbytes);
        for (int64_t c = 0; c < nq; c++)
            quant_q8_1(y + c * d * h, want_aq8 + (size_t)c * (size_t)(d * h / 32) * 36, d * h);
        ok = CHECK(memcmp(aq8, want_aq8, qbytes) == 0, "attention's Q8_1 output is not the CPU's quantization of its f32 output");
    }
    cuda_free(dq8);
    free(aq8), free(want_aq8);
    double worst = 0;
    float *kr = malloc((size_t)d * 4), *vr = malloc((size_t)d * 4);
    for (int64_t c = 0; ok && c < nq; c++) {
        for (int64_t j = 0; j < h; j++) {
            int64_t g = j / (h / h_kv);
            double *s = malloc((size_t)(qpos[c] + 1) * sizeof *s), max = -INFINITY, sum = 0;
            const int64_t lo = window > 0 && qpos[c] >= window ? qpos[c] - window + 1 : 0; /* the window's first */
            for (int64_t p = lo; p <= qpos[c]; p++) {
                kv_load_row(&cpu, cpu.k, 0, g, p, kr);
                s[p] = 0;
                for (int64_t i = 0; i < d; i++)
                    s[p] += (double)q[(c * h + j) * d + i] * kr[i];
                s[p] /= sqrt((double)d);
                max = fmax(max, s[p]);
            }
            for (int64_t p = lo; p <= qpos[c]; p++)
                sum += s[p] = exp(s[p] - max);
            for (int64_t i = 0; i < d; i++) {
                double want = 0;
                for (int64_t p = lo; p <= qpos[c]; p++) {
                    kv_load_row(&cpu, cpu.v, 0, g, p, vr);
                    want += s[p] / sum * vr[i];
                }
                double err = fabs(y[(c * h + j) * d + i] - want);
                worst = err > worst ? err : worst;
            }
            free(s);
        }
        if (nq > CUDA_PROMPT_MIN_COLUMNS)
            continue;
        /* the query alone, its launch's CTAs only the chunks up to its
         * position (the tightest span): the same bits as in the batch */
        ok = CHECK(cuda_attention(kt, dk, dv, dq + c * d * h, dqpos + c, d, h, h_kv, 1, n_ctx, chunk, qpos[c] + 1, window,
                                  scratch, dy, NULL, NULL, &e) == 0,
                   "%s", e.msg);
        if (ok) {
            down(one, dy, (size_t)(d * h) * 4);
            ok = CHECK(memcmp(one, y + c * d * h, (size_t)(d * h) * 4) == 0, "query %lld alone differs from the batch",
                       (long long)c);
        }
    }
    const int64_t cut = nq / 2; /* two prompt launches, each past CUDA_PROMPT_MIN_COLUMNS */
    for (int part = 0; ok && nq > CUDA_PROMPT_MIN_COLUMNS && part < 2; part++)
        ok = CHECK(cuda_attention(kt, dk, dv, dq + (part ? cut : 0) * d * h, dqpos + (part ? cut : 0), d, h, h_kv,
                                  part ? nq - cut : cut, n_ctx, chunk, n_ctx, window, scratch, dy + (part ? cut : 0) * d * h, NULL,
                                  NULL, &e) == 0,
                   "%s", e.msg);
    if (ok && nq > CUDA_PROMPT_MIN_COLUMNS) {
        down(one, dy, (size_t)(d * h * nq) * 4);
        ok = CHECK(memcmp(one, y, (size_t)(d * h * nq) * 4) == 0, "%lld queries cut into launches of %lld and %lld differ",
                   (long long)nq, (long long)cut, (long long)(nq - cut));
    }
    if (ok)
        printf("    attention %s d=%lld, %lld/%lld heads, %lld queries%s, window %lld: worst error %.2e (bound %g)\n",
               kv_type_name(kt), (long long)d, (long long)h, (long long)h_kv, (long long)nq,
               nq > CUDA_PROMPT_MIN_COLUMNS && cuda_attention_prefill_fits(d) ? " (prompt kernel, f16 tensor cores)" : "",
               (long long)window, worst, bound);
    ok = ok && CHECK(worst <= bound, "attention error %g", worst);
    cuda_free(dk), cuda_free(dv), cuda_free(dkin), cuda_free(dvin), cuda_free(dq), cuda_free(dy), cuda_free(dfpos);
    cuda_free(dqpos), cuda_free(scratch);
    free(fpos), free(k), free(v), free(q), free(kbytes), free(vbytes), free(y), free(one), free(kr), free(vr);
    kv_free(&cpu);
    return ok;
}

/* Two ways of norming and roping the same heads (Q's h, K's h_kv, nt
 * columns at positions pos) into their own outputs and caches, to be
 * compared bit for bit. */
struct heads_runs {
    enum kv_type kt;
    int64_t d, h, h_kv, nt, n_ctx;
    size_t qb, kb, cache;
    float *q, *k, *v, *qw, *kw;                      /* host inputs */
    float *dq, *dk, *dv, *dqw, *dkw, *yq[2], *yk[2]; /* device inputs, each way's Q and K */
    void *kc[2], *vc[2];                             /* each way's caches, zeroed */
    int32_t *dpos;
};

static void heads_runs_make(struct heads_runs *r, enum kv_type kt, int64_t d, int64_t h, int64_t h_kv, int64_t nt,
                            int64_t n_ctx, const int32_t *pos)
{
    struct error e;
    *r = (struct heads_runs){ .kt = kt, .d = d, .h = h, .h_kv = h_kv, .nt = nt, .n_ctx = n_ctx };
    r->qb = (size_t)(d * h * nt) * 4, r->kb = (size_t)(d * h_kv * nt) * 4;
    r->cache = (size_t)h_kv * (size_t)n_ctx * kv_row_bytes(kt, d);
    r->q = randoms(d * h * nt, 1), r->k = randoms(d * h_kv * nt, 1), r->v = randoms(d * h_kv * nt, 1);
    r->qw = randoms(d, 0.2f), r->kw = randoms(d, 0.2f);
    r->dq = up(r->q, r->qb), r->dk = up(r->k, r->kb), r->dv = up(r->v, r->kb);
    r->dqw = up(r->qw, (size_t)d * 4), r->dkw = up(r->kw, (size_t)d * 4);
    for (int way = 0; way < 2; way++) {
        r->yq[way] = up(NULL, r->qb), r->yk[way] = up(NULL, r->kb);
        r->kc[way] = up(NULL, r->cache), r->vc[way] = up(NULL, r->cache);
        cuda_memset_async(r->kc[way], 0, r->cache, NULL, &e), cuda_memset_async(r->vc[way], 0, r->cache, NULL, &e);
    }
    r->dpos = up(pos, (size_t)nt * sizeof *pos);
}

/* Whether both ways gave the same Q, K and caches (how: what the second way changed). */
static bool heads_runs_same(const struct heads_runs *r, const char *how)
{
    uint8_t *a = malloc(r->cache > r->qb ? r->cache : r->qb), *b = malloc(r->cache > r->qb ? r->cache : r->qb);
    const struct { void *x, *y; size_t n; const char *what; } same[4] = {
        { r->yq[0], r->yq[1], r->qb, "Q" }, { r->yk[0], r->yk[1], r->kb, "K" },
        { r->kc[0], r->kc[1], r->cache, "the K cache" }, { r->vc[0], r->vc[1], r->cache, "the V cache" }
    };
    bool ok = true;
    for (int i = 0; i < 4 && ok; i++) {
        down(a, same[i].x, same[i].n), down(b, same[i].y, same[i].n);
        ok = CHECK(memcmp(a, b, same[i].n) == 0, "%s cache, heads of %lld: %s differs %s", kv_type_name(r->kt),
                   (long long)r->d, same[i].what, how);
    }
    free(a), free(b);
    return ok;
}

static void heads_runs_free(struct heads_runs *r)
{
    for (int i = 0; i < 2; i++)
        cuda_free(r->yq[i]), cuda_free(r->yk[i]), cuda_free(r->kc[i]), cuda_free(r->vc[i]);
    cuda_free(r->dq), cuda_free(r->dk), cuda_free(r->dv), cuda_free(r->dqw), cuda_free(r->dkw), cuda_free(r->dpos);
    free(r->q), free(r->k), free(r->v), free(r->qw), free(r->kw);
}

/* Q's and K's norm and RoPE with the KV store folded into the launch: the
 * same bits in Q, K and both caches as the three steps apart. */
static bool folded_kv_store(enum kv_type kt)
{
    struct error e;
    const int32_t pos[3] = { 5, 6, 63 };
    struct heads_runs r;
    heads_runs_make(&r, kt, 128, 8, 2, 3, 64, pos);
    bool ok = true;
    for (int way = 0; way < 2 && ok; way++) { /* 0: three steps, 1: one launch */
        const struct cuda_heads parts[2] = { { r.dq, r.dqw, r.yq[way], r.h }, { r.dk, r.dkw, r.yk[way], r.h_kv } };
        const struct cuda_kv_dest store = { kt, r.kc[way], r.vc[way], r.dv, r.n_ctx };
        ok = CHECK(cuda_head_norm_rope_parts(parts, 2, 1e-6f, 1e6f, 0, ROPE_NEOX, r.dpos, r.d, r.nt, way ? &store : NULL, NULL, NULL, &e) == 0 &&
                       (way || cuda_kv_store(kt, r.kc[0], r.vc[0], r.yk[0], r.dv, r.dpos, r.d, r.h_kv, r.nt, r.n_ctx, NULL, &e) == 0),
                   "%s", e.msg);
    }
    ok = ok && heads_runs_same(&r, "when the store is folded into the RoPE launch");
    heads_runs_free(&r);
    return ok;
}

/* A prompt's launch (CTAs of eight heads sharing a column's rotation)
 * against each column alone (a head a CTA): the same bits in Q, K and both
 * caches, heads of 64, 128 and 256, a last group only partly filled. */
static bool grouped_heads(enum kv_type kt, int64_t d)
{
    struct error e;
    enum { NT = 20 };
    int32_t pos[NT];
    for (int i = 0; i < NT; i++)
        pos[i] = (i * 37 + 5) % 64;
    struct heads_runs r;
    heads_runs_make(&r, kt, d, 12, 2, NT, 64, pos);
    const int64_t h = r.h, h_kv = r.h_kv;
    bool ok = true;
    for (int way = 0; way < 2 && ok; way++) { /* 0: the prompt's launch, 1: a column at a time */
        for (int c = 0; c < (way ? NT : 1) && ok; c++) {
            const int64_t at = way ? c : 0, n = way ? 1 : NT;
            const struct cuda_heads parts[2] = { { r.dq + at * h * d, r.dqw, r.yq[way] + at * h * d, h },
                                                 { r.dk + at * h_kv * d, r.dkw, r.yk[way] + at * h_kv * d, h_kv } };
            const struct cuda_kv_dest store = { kt, r.kc[way], r.vc[way], r.dv + at * h_kv * d, r.n_ctx };
            ok = CHECK(cuda_head_norm_rope_parts(parts, 2, 1e-6f, 1e6f, 0, ROPE_NEOX, r.dpos + at, d, n, &store, NULL, NULL, &e) == 0,
                       "%s", e.msg);
        }
    }
    ok = ok && heads_runs_same(&r, "between a 20-column launch and single columns");
    heads_runs_free(&r);
    return ok;
}

void test_kernels_attention(void)
{
    /* the windows (Gemma 3's head of 256 over one KV head): a query at 63 sees 34..63 inside chunk 0, one at 250
     * 221..250 inside chunk 1 (of 128) or 101..250 in chunks 0 and 1 */
    const int32_t qpos[4] = { 5, 63, 64, 250 };
    /* a prompt's queries: positions all over the cache (0 among them), not in order, 70 of them (a partial CTA) */
    int32_t ppos[70];
    for (int i = 0; i < 70; i++)
        ppos[i] = (int32_t)((i * 97 + 13) % 251);
    /* f16 products (queries, keys, values and the softmax's weights rounded to f16) against double */
    const double fa = 5e-3;
    if (attention_case(KV_F32, 64, 8, 2, 300, 0, 4, qpos, 1e-5, 0) && attention_case(KV_F16, 128, 8, 2, 300, 0, 4, qpos, 1e-5, 0) &&
        attention_case(KV_Q8_0, 128, 4, 4, 4096, 0, 4, qpos, 1e-5, 0) && attention_case(KV_F16, 64, 14, 2, 32768, 0, 4, qpos, 1e-5, 0) &&
        attention_case(KV_F16, 256, 4, 1, 4096, 30, 4, qpos, 1e-5, 0) && attention_case(KV_F32, 256, 4, 1, 4096, 150, 4, qpos, 1e-5, 0) &&
        /* chunks of 8: 32 of them at 250, more than the combine asks for at once */
        attention_case(KV_F16, 128, 8, 2, 300, 0, 4, qpos, 1e-5, 8) && attention_case(KV_F16, 64, 14, 2, 300, 20, 4, qpos, 1e-5, 8) &&
        attention_case(KV_F32, 64, 8, 2, 300, 0, 70, ppos, fa, 0) && attention_case(KV_F16, 128, 8, 2, 300, 0, 70, ppos, fa, 0) &&
        attention_case(KV_Q8_0, 128, 4, 4, 4096, 0, 70, ppos, fa, 0) && attention_case(KV_F16, 64, 14, 2, 1024, 100, 70, ppos, fa, 0) &&
        attention_case(KV_F16, 256, 4, 1, 4096, 30, 70, ppos, fa, 0) && attention_case(KV_Q8_0, 256, 8, 2, 300, 0, 70, ppos, fa, 0) &&
        attention_case(KV_F32, 256, 4, 1, 4096, 100, 70, ppos, fa, 0))
        for (int kt = KV_F32; kt <= KV_Q8_0 && folded_kv_store((enum kv_type)kt); kt++) {
            if (!grouped_heads((enum kv_type)kt, 64) || !grouped_heads((enum kv_type)kt, 128) || !grouped_heads((enum kv_type)kt, 256))
                return;
            printf("    %s: the KV store folded into the RoPE launch gives the same bits; a prompt's launch (eight heads a CTA) "
                   "the bits of single columns\n", kv_type_name((enum kv_type)kt));
        }
}

/* ---- elementwise ops ---- */

void test_kernels_elementwise(void)
{
    struct error e;
    const int64_t d = 64, n = d * 7;
    float *a = randoms(n, 3), *b = randoms(n, 1), *y = malloc((size_t)n * 4);
    float *da = up(a, (size_t)n * 4), *db = up(b, (size_t)n * 4), *dy = up(NULL, (size_t)n * 4);
    for (int op = CUDA_EW_ADD; op <= CUDA_EW_SCALE; op++) {
        if (!CHECK(cuda_elementwise((enum cuda_elementwise_op)op, da, db, n, d, 25.3f, dy, NULL, &e) == 0, "%s", e.msg))
            return;
        down(y, dy, (size_t)n * 4);
        for (int64_t i = 0; i < n; i++) {
            double want = op == CUDA_EW_ADD ? (double)(a[i] + b[i]) : op == CUDA_EW_MUL ? (double)(a[i] * b[i])
                          : op == CUDA_EW_SILU ? silu_d(a[i]) : op == CUDA_EW_SWIGLU ? silu_d(a[i]) * b[i]
                          : op == CUDA_EW_GELU ? gelu_d(a[i]) : op == CUDA_EW_GEGLU ? gelu_d(a[i]) * b[i]
                          : op == CUDA_EW_SCALE ? (double)a[i] * 25.3f : (double)(a[i] + b[i % d]);
            /* GELU's exponent carries the rounding of its argument (1e-6 relative of e^-2u near u = -7): bound by the input */
            const bool gelu = op == CUDA_EW_GELU || op == CUDA_EW_GEGLU;
            const double bound = 1e-6 * (fabs(want) + 1e-6) + (gelu ? 1e-6 * fabs(a[i] * (op == CUDA_EW_GEGLU ? b[i] : 1)) : 0);
            if (!CHECK(fabs(y[i] - want) <= bound, "op %d element %lld: %g vs %g", op,
                       (long long)i, (double)y[i], want))
                return;
        }
    }
    cuda_free(da), cuda_free(db), cuda_free(dy);
    free(a), free(b), free(y);
}

/* ---- argmax: the CPU's choice, with its feed of the next step's inputs ---- */

static int32_t argmax_ref(const float *x, int64_t n)
{
    int32_t best = -1;
    for (int64_t i = 0; i < n; i++)
        if (!isnan(x[i]) && (best < 0 || x[i] > x[best]))
            best = (int32_t)i;
    return best;
}

/* Lengths around the kernel's 2048-value chunks and 256-CTA cap; equal
 * maxima in different CTAs (the first must win), NaNs, and all NaN (-1,
 * and token 0 fed so the step reads a valid row). Run twice on one
 * scratch: its ticket must come back to 0. */
void test_kernels_argmax(void)
{
    static const int64_t lens[] = { 1, 7, 2047, 2048, 2049, 151936, 262144, 600001 };
    struct error e;
    void *scratch = up(NULL, cuda_argmax_scratch_bytes());
    int32_t *dout = up(NULL, 4 * sizeof(int32_t));
    bool ok = CHECK(cuda_memset_async(scratch, 0, cuda_argmax_scratch_bytes(), NULL, &e) == 0, "%s", e.msg);
    for (size_t c = 0; ok && c < sizeof lens / sizeof lens[0]; c++)
        for (int round = 0; ok && round < 3; round++) {
            const int64_t n = lens[c];
            float *x = randoms(n, 1);
            if (round == 1 && n > 2) /* two equal maxima far apart, a NaN before them */
                x[0] = NAN, x[n / 2 + 1] = 9.5f, x[n - 1] = 9.5f;
            if (round == 2)
                for (int64_t i = 0; i < n; i++)
                    x[i] = i % 3 == 1 || n < 3 ? NAN : -INFINITY; /* -inf is a choice, NaN is not */
            const int32_t want = argmax_ref(x, n);
            float *dx = up(x, (size_t)n * 4);
            int32_t got[4] = { -2, -2, -2, -2 };
            const struct cuda_argmax_feed feed = { dout + 1, dout + 2, dout + 3, (int32_t)n, (int32_t)n + 1 };
            ok = CHECK(cuda_argmax(dx, n, dout, round == 1 ? NULL : &feed, scratch, NULL, &e) == 0, "%s", e.msg) &&
                 CHECK(cuda_download(got, dout, sizeof got, &e) == 0, "%s", e.msg) &&
                 CHECK(got[0] == want, "argmax of %lld (round %d): %d, want %d", (long long)n, round, got[0], want);
            if (ok && round != 1)
                ok = CHECK(got[1] == (want < 0 ? 0 : want) && got[2] == (int32_t)n && got[3] == (int32_t)n + 1,
                           "argmax of %lld fed token %d position %d KV length %d, want %d %lld %lld", (long long)n,
                           got[1], got[2], got[3], want < 0 ? 0 : want, (long long)n, (long long)n + 1);
            cuda_free(dx);
            free(x);
        }
    cuda_free(scratch), cuda_free(dout);
}
