/* cpu_matmul.c: the matmul family on the CPU: MATMUL, MATMUL_ADD (residual
 * epilogue), MATMUL_QKV (three outputs) and FFN_SWIGLU (gate and up paired).
 * Each weight row is decoded once and dotted with every column, in order. */
#include <math.h>
#include <string.h>

#include "cpu.h"
#include "quant.h"

static float dot(const float *a, const float *b, int64_t n)
{
    float sum = 0;
    for (int64_t i = 0; i < n; i++)
        sum += a[i] * b[i];
    return sum;
}

/* y[c * N + r] = w_r . x_c for every row r and column c, then the bias. */
static int multiply(const struct weight *w, const struct weight *bias, const float *x, int64_t nt, float *y,
                    float *row, struct error *e)
{
    int64_t k = w->ne[0], n = w->ne[1];
    size_t row_bytes = type_bytes(w->type, (uint64_t)k);
    for (int64_t r = 0; r < n; r++) {
        if (dequantize_row(w->type, (const uint8_t *)w->data + (size_t)r * row_bytes, row, k))
            return fail(e, "weight '%.*s': the CPU cannot read type %s", (int)w->name_len, w->name, type_name(w->type));
        for (int64_t c = 0; c < nt; c++)
            y[c * n + r] = dot(row, x + c * k, k);
    }
    if (bias) {
        dequantize_row(bias->type, bias->data, row, n);
        for (int64_t c = 0; c < nt; c++)
            for (int64_t r = 0; r < n; r++)
                y[c * n + r] += row[r];
    }
    return 0;
}

static float silu(float v) { return v / (1.0f + expf(-v)); }

int cpu_matmul_node(const struct graph *g, const struct node *n, struct cpu_run *r, struct error *e)
{
    const struct node *xn = &g->node[n->src[0]];
    if (xn->dtype != ACT_F32)
        return fail(e, "%s: the CPU backend takes f32 activations", graph_op_name(n->op));
    const float *x = (const float *)cpu_data(g, r, n->src[0]);
    int64_t nt = xn->ne[1];
    float *y = (float *)cpu_data(g, r, (int)(n - g->node)), *row = r->s->row;
    switch (n->op) {
    case OP_MATMUL:
        return multiply(n->w[0], n->w[1], x, nt, y, row, e);
    case OP_MATMUL_ADD: {
        if (multiply(n->w[0], n->w[1], x, nt, y, row, e))
            return -1;
        const float *res = (const float *)cpu_data(g, r, n->src[1]);
        for (int64_t i = 0; i < n->ne[0] * nt; i++)
            y[i] += res[i];
        return 0;
    }
    case OP_MATMUL_QKV: {
        if (n->part[0] < 0 || n->part[1] < 0)
            return fail(e, "MATMUL_QKV has no PART outputs");
        float *out[3] = { y, (float *)cpu_data(g, r, n->part[0]), (float *)cpu_data(g, r, n->part[1]) };
        for (int k = 0; k < 3; k++)
            if (multiply(n->w[k], n->w[3 + k], x, nt, out[k], row, e))
                return -1;
        return 0;
    }
    case OP_FFN_SWIGLU: {
        /* the gate into y, then each up row combined with it as it is made */
        if (multiply(n->w[0], NULL, x, nt, y, row, e))
            return -1;
        const struct weight *wu = n->w[1];
        int64_t k = wu->ne[0], rows = n->ne[0];
        size_t row_bytes = type_bytes(wu->type, (uint64_t)k);
        for (int64_t j = 0; j < rows; j++) {
            if (dequantize_row(wu->type, (const uint8_t *)wu->data + (size_t)j * row_bytes, row, k))
                return fail(e, "weight '%.*s': the CPU cannot read type %s", (int)wu->name_len, wu->name,
                            type_name(wu->type));
            for (int64_t c = 0; c < nt; c++)
                y[c * rows + j] = silu(y[c * rows + j]) * dot(row, x + c * k, k);
        }
        return 0;
    }
    default:
        return fail(e, "not a matmul op: %s", graph_op_name(n->op));
    }
}
