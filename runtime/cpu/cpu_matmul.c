/* cpu_matmul.c: the matmul family on the CPU: MATMUL, MATMUL_ADD (residual
 * epilogue), MATMUL_QKV (three outputs) and FFN_SWIGLU (gate and up paired).
 * Every output element is one dot product over the row, in row order. */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "quant.h"
#include "quant_dot.h"

static bool is_float(enum tensor_type t) { return t == TYPE_F32 || t == TYPE_F16 || t == TYPE_BF16; }

/* The input's columns as Q8_1 blocks: in place when the producer wrote them,
 * else quantized into scratch. */
static const uint8_t *q8_columns(const struct node *x, const uint8_t *data, int64_t k, int64_t nt,
                                 struct cpu_scratch *s)
{
    if (x->dtype == ACT_Q8_1)
        return data;
    size_t col = (size_t)(k / 32) * 36;
    for (int64_t c = 0; c < nt; c++)
        quant_q8_1((const float *)data + c * k, s->q8 + (size_t)c * col, k);
    return s->q8;
}

/* y[c * N + r] = w_r . x_c for every row r and column c; then the bias. */
static int multiply(const struct weight *w, const struct weight *bias, const struct node *x, const uint8_t *xdata,
                    int64_t nt, float *y, struct cpu_scratch *s, struct error *e)
{
    int64_t k = w->ne[0], n = w->ne[1];
    size_t row_bytes = type_bytes(w->type, (uint64_t)k);
    const uint8_t *wd = w->data;
    if (is_float(w->type)) {
        if (x->dtype != ACT_F32)
            return fail(e, "weight '%.*s' is %s but its input is Q8_1", (int)w->name_len, w->name, type_name(w->type));
        for (int64_t r = 0; r < n; r++) {
            dequantize_row(w->type, wd + (size_t)r * row_bytes, s->row, k);
            for (int64_t c = 0; c < nt; c++) {
                const float *xc = (const float *)xdata + c * k;
                float sum = 0;
                for (int64_t i = 0; i < k; i++)
                    sum += s->row[i] * xc[i];
                y[c * n + r] = sum;
            }
        }
    } else {
        const uint8_t *xq = q8_columns(x, xdata, k, nt, s);
        size_t col = (size_t)(k / 32) * 36;
        for (int64_t r = 0; r < n; r++)
            for (int64_t c = 0; c < nt; c++)
                if (dot_q8_1(w->type, wd + (size_t)r * row_bytes, xq + (size_t)c * col, k, &y[c * n + r]))
                    return fail(e, "weight '%.*s': no CPU matmul for type %s", (int)w->name_len, w->name,
                                type_name(w->type));
    }
    if (bias) {
        dequantize_row(bias->type, bias->data, s->row, n);
        for (int64_t c = 0; c < nt; c++)
            for (int64_t r = 0; r < n; r++)
                y[c * n + r] += s->row[r];
    }
    return 0;
}

static float silu(float v) { return v / (1.0f + expf(-v)); }

int cpu_matmul_node(const struct graph *g, const struct node *n, struct cpu_run *r, struct error *e)
{
    const struct node *x = &g->node[n->src[0]];
    const uint8_t *xd = cpu_data(g, r, n->src[0]);
    int64_t nt = x->ne[1];
    float *y = (float *)cpu_data(g, r, (int)(n - g->node));
    switch (n->op) {
    case OP_MATMUL:
        return multiply(n->w[0], n->w[1], x, xd, nt, y, r->s, e);
    case OP_MATMUL_ADD: {
        if (multiply(n->w[0], n->w[1], x, xd, nt, y, r->s, e))
            return -1;
        const float *res = (const float *)cpu_data(g, r, n->src[1]);
        for (int64_t i = 0; i < n->ne[0] * nt; i++)
            y[i] += res[i];
        return 0;
    }
    case OP_MATMUL_QKV: {
        float *out[3] = { y, (float *)cpu_data(g, r, n->part[0]), (float *)cpu_data(g, r, n->part[1]) };
        if (n->part[0] < 0 || n->part[1] < 0)
            return fail(e, "MATMUL_QKV at line %d has no PART outputs", n->line);
        for (int k = 0; k < 3; k++)
            if (multiply(n->w[k], n->w[3 + k], x, xd, nt, out[k], r->s, e))
                return -1;
        return 0;
    }
    case OP_FFN_SWIGLU: {
        /* gate into the output, up into scratch one column block at a time
         * would need more scratch than a row: compute per row pair instead */
        int64_t rows = n->ne[0];
        float *gate = y;
        if (multiply(n->w[0], NULL, x, xd, nt, gate, r->s, e))
            return -1;
        /* up, row by row, combined immediately: y = silu(gate) * up */
        const struct weight *wu = n->w[1];
        int64_t k = wu->ne[0];
        size_t row_bytes = type_bytes(wu->type, (uint64_t)k), col = (size_t)(k / 32) * 36;
        const uint8_t *xq = is_float(wu->type) ? NULL : q8_columns(x, xd, k, nt, r->s);
        for (int64_t row = 0; row < rows; row++) {
            const uint8_t *wr = (const uint8_t *)wu->data + (size_t)row * row_bytes;
            if (xq == NULL)
                dequantize_row(wu->type, wr, r->s->row, k);
            for (int64_t c = 0; c < nt; c++) {
                float up = 0;
                if (xq) {
                    if (dot_q8_1(wu->type, wr, xq + (size_t)c * col, k, &up))
                        return fail(e, "weight '%.*s': no CPU matmul for type %s", (int)wu->name_len, wu->name,
                                    type_name(wu->type));
                } else {
                    const float *xc = (const float *)xd + c * k;
                    for (int64_t i = 0; i < k; i++)
                        up += r->s->row[i] * xc[i];
                }
                y[c * rows + row] = silu(gate[c * rows + row]) * up;
            }
        }
        return 0;
    }
    default:
        return fail(e, "not a matmul op: %s", graph_op_name(n->op));
    }
}
