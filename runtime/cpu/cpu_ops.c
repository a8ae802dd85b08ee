/* cpu_ops.c: the CPU kernels other than matmuls: embedding rows, RMS norms,
 * per-head norm and RoPE, elementwise ops and the KV store (attention has
 * its own file). */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"
#include "quant/quant.h"

static int index_of(const struct graph *g, const struct node *n) { return (int)(n - g->node); }

void cpu_embed(const struct graph *g, const struct node *n, struct cpu_run *r)
{
    const struct weight *w = n->p.w[0];
    const int32_t *ids = (const int32_t *)cpu_data(g, r, n->src[0]);
    float *y = (float *)cpu_data(g, r, index_of(g, n));
    int64_t d = w->ne[0];
    size_t row_bytes = type_bytes(w->type, (uint64_t)d);
    for (int64_t c = 0; c < n->ne[1]; c++)
        dequantize_row(w->type, (const uint8_t *)w->data + (size_t)ids[c] * row_bytes, y + c * d, d);
}

/* x / sqrt(mean(x^2) + eps) * w over n values (RMS_NORM_ADD: then + src1). The sum of squares runs in
 * double, in order; the scale is applied in float, like the reference. */
static void rms_norm_row(const float *x, const float *w, float *y, int64_t n, float eps)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const float scale = 1.0f / sqrtf((float)(ss / (double)n) + eps);
    for (int64_t i = 0; i < n; i++)
        y[i] = x[i] * scale * w[i];
}

void cpu_rms_norm(const struct graph *g, const struct node *n, struct cpu_run *r)
{
    const float *x = (const float *)cpu_data(g, r, n->src[0]);
    uint8_t *out = cpu_data(g, r, index_of(g, n));
    const float *res = n->op == OP_RMS_NORM_ADD ? (const float *)cpu_data(g, r, n->src[1]) : NULL;
    int64_t d = n->ne[0];
    dequantize_row(n->p.w[0]->type, n->p.w[0]->data, r->s->row, d);
    for (int64_t c = 0; c < n->ne[1]; c++) {
        float *y = (float *)out + c * d;
        rms_norm_row(x + c * d, r->s->row, y, d, n->p.eps);
        for (int64_t i = 0; res && i < d; i++) /* the add as ADD makes it: the same bits */
            y[i] += res[c * d + i];
    }
}

/* Rotates one head vector in place by the angles whose cosines and sines
 * are c[i], s[i] (pair i: elements i and i + d/2, or 2i and 2i + 1). */
static void rope_row(float *x, int64_t d, const float *c, const float *s, enum rope_style style)
{
    for (int64_t i = 0; i < d / 2; i++) {
        int64_t a = style == ROPE_NEOX ? i : 2 * i, b = style == ROPE_NEOX ? i + d / 2 : 2 * i + 1;
        float x0 = x[a], x1 = x[b];
        x[a] = x0 * c[i] - x1 * s[i];
        x[b] = x0 * s[i] + x1 * c[i];
    }
}

/* The rotation of position pos: pair i's angle pos * base^(-2i/d) (over
 * the linear scaling factor, if any) formed in double (so long positions do
 * not drift; freq[i] holds the power and the factor), its
 * cosine and sine rounded to float: once per token, for all its heads. */
static void rope_angles(int64_t d, int64_t pos, const double *freq, float *c, float *s)
{
    for (int64_t i = 0; i < d / 2; i++) {
        const double theta = (double)pos * freq[i];
        c[i] = (float)cos(theta), s[i] = (float)sin(theta);
    }
}

/* HEAD_NORM, ROPE and HEAD_NORM_ROPE over [d, h, nt]. */
void cpu_head_norm_rope(const struct graph *g, const struct node *n, struct cpu_run *r)
{
    const float *x = (const float *)cpu_data(g, r, n->src[0]);
    float *y = (float *)cpu_data(g, r, index_of(g, n));
    int64_t d = n->ne[0], h = n->ne[1];
    bool norm = n->op != OP_ROPE, rope = n->op != OP_HEAD_NORM;
    const int32_t *pos = rope ? (const int32_t *)cpu_data(g, r, n->src[1]) : NULL;
    if (norm)
        dequantize_row(n->p.w[0]->type, n->p.w[0]->data, r->s->row, d);
    double *freq = r->s->rope_freq;
    float *cs = r->s->rope_cs, *sn = cs + d / 2;
    if (rope)
        for (int64_t i = 0; i < d / 2; i++)
            freq[i] = pow((double)n->p.rope_base, -2.0 * (double)i / (double)d) /
                      (n->p.rope_factor > 0 ? (double)n->p.rope_factor : 1.0);
    for (int64_t c = 0; c < n->ne[2]; c++) {
        if (rope)
            rope_angles(d, pos[c], freq, cs, sn);
        for (int64_t k = 0; k < h; k++) {
            const float *xi = x + (c * h + k) * d;
            float *yi = y + (c * h + k) * d;
            if (norm)
                rms_norm_row(xi, r->s->row, yi, d, n->p.eps);
            else if (yi != xi)
                memcpy(yi, xi, (size_t)d * sizeof *yi);
            if (rope)
                rope_row(yi, d, cs, sn, n->p.rope_style);
        }
    }
}

void cpu_elementwise(const struct graph *g, const struct node *n, struct cpu_run *r)
{
    const float *a = (const float *)cpu_data(g, r, n->src[0]);
    const float *b = n->op == OP_ADD || n->op == OP_MUL || n->op == OP_GLU ? (const float *)cpu_data(g, r, n->src[1])
                                                                               : NULL;
    float *y = (float *)cpu_data(g, r, index_of(g, n));
    int64_t count = n->ne[0] * n->ne[1] * n->ne[2], d = n->ne[0];
    switch (n->op) {
    case OP_ADD: for (int64_t i = 0; i < count; i++) y[i] = a[i] + b[i]; break;
    case OP_MUL: for (int64_t i = 0; i < count; i++) y[i] = a[i] * b[i]; break;
    case OP_SILU: for (int64_t i = 0; i < count; i++) y[i] = cpu_silu(a[i]); break;
    case OP_GELU: for (int64_t i = 0; i < count; i++) y[i] = cpu_gelu(a[i]); break;
    case OP_SCALE: for (int64_t i = 0; i < count; i++) y[i] = a[i] * n->p.scale; break;
    case OP_GLU: for (int64_t i = 0; i < count; i++) y[i] = cpu_glu_gate(n->p.glu, a[i]) * b[i]; break;
    case OP_ADD_BIAS:
        dequantize_row(n->p.bias[0]->type, n->p.bias[0]->data, r->s->row, d);
        for (int64_t i = 0; i < count; i++)
            y[i] = a[i] + r->s->row[i % d];
        break;
    default: break;
    }
}

void cpu_kv_store(const struct graph *g, const struct node *n, struct cpu_run *r)
{
    const struct node *k = &g->node[n->src[0]];
    const float *kd = (const float *)cpu_data(g, r, n->src[0]), *vd = (const float *)cpu_data(g, r, n->src[1]);
    const int32_t *pos = (const int32_t *)cpu_data(g, r, n->src[2]);
    int64_t d = k->ne[0], h = k->ne[1];
    for (int64_t c = 0; c < k->ne[2]; c++) {
        for (int64_t j = 0; j < h; j++) {
            kv_store_row(r->kv, r->kv->k, n->layer, j, pos[c], kd + (c * h + j) * d);
            kv_store_row(r->kv, r->kv->v, n->layer, j, pos[c], vd + (c * h + j) * d);
        }
    }
}
