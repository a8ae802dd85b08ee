/* cpu_matmul.c: the matmul family on the CPU: MATMUL, MATMUL_ADD (residual
 * epilogue), MATMUL_QKV (three outputs) and FFN_GLU (gate and up paired).
 * Each weight row is decoded once and dotted with every column: rows in
 * blocks of CPU_ROW_BLOCK (decoded together), columns in blocks of
 * CPU_COL_BLOCK, so both stay in cache while cpu_dot_block runs over them.
 * Rows are split among threads; every output element is computed the same
 * way whichever thread or block computes it, so the bits depend neither on
 * the thread count nor on the batch size. */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"
#include "cpu/cpu_dot.h"
#include "cpu/cpu_qdot.h"
#include "quant/quant.h"


enum mode { PRODUCT, SILU_UP, GELU_UP }; /* y = w x, or y = gate(y) * (w x) */

static inline float combine(enum mode m, float y, float v)
{
    return m == PRODUCT ? v : cpu_glu_gate(m == GELU_UP ? GLU_GELU : GLU_SILU, y) * v;
}

struct job {
    const struct weight *w;
    cpu_dot_fn dot;   /* the build's instantiation for this row length, or NULL */
    const float *x;
    int64_t nt;
    float *y;
    enum mode mode;
    int64_t r0, r1;   /* the rows this thread makes */
    float *rows;      /* its decode buffer: CPU_ROW_BLOCK rows */
    float *tile;      /* its dot products: CPU_ROW_BLOCK x CPU_COL_BLOCK */
    int failed;
};

/* The dot products of any row length, on the best vector unit there is. */
CPU_SIMD static void dot_any(const float *w, int64_t nr, const float *x, int64_t nc, float *y, int64_t ldy, int64_t k)
{
    cpu_dot_block(w, nr, x, nc, y, ldy, k);
}

static void *run_rows(void *arg)
{
    struct job *j = arg;
    const struct weight *w = j->w;
    int64_t k = w->ne[0], n = w->ne[1];
    size_t row_bytes = type_bytes(w->type, (uint64_t)k);
    for (int64_t r0 = j->r0; r0 < j->r1; r0 += CPU_ROW_BLOCK) {
        int64_t nr = j->r1 - r0 < CPU_ROW_BLOCK ? j->r1 - r0 : CPU_ROW_BLOCK;
        for (int64_t r = 0; r < nr; r++) {
            if (dequantize_row(w->type, (const uint8_t *)w->data + (size_t)(r0 + r) * row_bytes, j->rows + r * k, k)) {
                j->failed = 1;
                return NULL;
            }
        }
        for (int64_t c0 = 0; c0 < j->nt; c0 += CPU_COL_BLOCK) {
            int64_t nc = j->nt - c0 < CPU_COL_BLOCK ? j->nt - c0 : CPU_COL_BLOCK;
            if (j->dot)
                j->dot(j->rows, nr, j->x + c0 * k, nc, j->tile, CPU_ROW_BLOCK);
            else
                dot_any(j->rows, nr, j->x + c0 * k, nc, j->tile, CPU_ROW_BLOCK, k);
            for (int64_t c = 0; c < nc; c++)
                for (int64_t r = 0; r < nr; r++) {
                    float v = j->tile[c * CPU_ROW_BLOCK + r], *out = &j->y[(c0 + c) * n + r0 + r];
                    *out = combine(j->mode, *out, v);
                }
        }
    }
    return NULL;
}

/* Runs the rows of w over the scratch's threads. */
static int rows_in_parallel(const struct weight *w, cpu_dot_fn dot, const float *x, int64_t nt, float *y,
                            enum mode mode, struct cpu_scratch *s, struct error *e)
{
    int64_t n = w->ne[1];
    int t_count = s->n_threads < n ? s->n_threads : (int)n;
    struct job jobs[CPU_MAX_THREADS];
    for (int t = 0; t < t_count; t++)
        jobs[t] = (struct job){ w, dot, x, nt, y, mode, n * t / t_count, n * (t + 1) / t_count,
                                s->rows + (size_t)t * CPU_ROW_BLOCK * (size_t)s->k_max,
                                s->tiles + (size_t)t * CPU_ROW_BLOCK * CPU_COL_BLOCK, 0 };
    cpu_run_jobs(s->pool, jobs, sizeof jobs[0], t_count, run_rows);
    int failed = 0;
    for (int t = 0; t < t_count; t++)
        failed |= jobs[t].failed;
    if (failed)
        return fail(e, "weight '%.*s': the CPU cannot read type %s", (int)w->name_len, w->name, type_name(w->type));
    return 0;
}

/* The fast path's rows: each row of w (its GGUF bytes) against every Q8_1
 * column of xq, in blocks of rows against each group of columns; each
 * result is cpu_qdot's whichever thread or block makes it. */
/* Rows taken together against each group of columns, so a group's
 * activations (9 to 48 KB) are read from L1 for all of them instead of
 * from L2 once a row (pp512 +11%; 8, 32 or 64 rows alike) */
#define QROW_BLOCK 16
struct qjob {
    const struct weight *w;
    const uint8_t *xq;
    int64_t nt;
    float *y;
    enum mode mode;
    int64_t r0, r1;
};

static void *run_qrows(void *arg)
{
    const struct qjob *j = arg;
    const struct weight *w = j->w;
    int64_t k = w->ne[0], n = w->ne[1];
    size_t row_bytes = type_bytes(w->type, (uint64_t)k), col_bytes = cpu_q8_bytes(k);
    for (int64_t r0 = j->r0; r0 < j->r1; r0 += QROW_BLOCK) {
        const int64_t r1 = j->r1 - r0 < QROW_BLOCK ? j->r1 : r0 + QROW_BLOCK;
        for (int64_t c0 = 0; c0 < j->nt; c0 += CPU_QDOT_COLS) {
            int nc = j->nt - c0 < CPU_QDOT_COLS ? (int)(j->nt - c0) : CPU_QDOT_COLS;
            for (int64_t r = r0; r < r1; r++) {
                float v[CPU_QDOT_COLS];
                const uint8_t *wr = (const uint8_t *)w->data + (size_t)r * row_bytes;
                cpu_qdot_cols(w->type, wr, j->xq + (size_t)c0 * col_bytes, col_bytes, nc, k, v); /* the caller checked the type */
                for (int c = 0; c < nc; c++) {
                    float *out = &j->y[(c0 + c) * n + r];
                    *out = combine(j->mode, *out, v[c]);
                }
            }
        }
    }
    return NULL;
}

static void qrows_in_parallel(const struct weight *w, const uint8_t *xq, int64_t nt, float *y, enum mode mode,
                              struct cpu_scratch *s)
{
    int64_t n = w->ne[1];
    int t_count = s->n_threads < n ? s->n_threads : (int)n;
    struct qjob jobs[CPU_MAX_THREADS];
    for (int t = 0; t < t_count; t++)
        jobs[t] = (struct qjob){ w, xq, nt, y, mode, n * t / t_count, n * (t + 1) / t_count };
    cpu_run_jobs(s->pool, jobs, sizeof jobs[0], t_count, run_qrows);
}

/* Runs the rows of w over the scratch's threads: on the fast path (xq, x
 * already quantized) when w's type has an integer dot, else decoded to f32
 * against x (the float types always). */
static int matmul_rows(const struct weight *w, cpu_dot_fn dot, const float *x, const uint8_t *xq, int64_t nt,
                       float *y, enum mode mode, struct cpu_scratch *s, struct error *e)
{
    if (xq && cpu_qdot_takes(w->type)) {
        qrows_in_parallel(w, xq, nt, y, mode, s);
        return 0;
    }
    return rows_in_parallel(w, dot, x, nt, y, mode, s, e);
}

/* The fast path's input as Q8_1 (cpu_q8_quantize), columns shared among
 * the threads: grouped where run_qrows passes full groups of columns. */
struct quant_job {
    const float *x;
    int64_t k, nt, c0, c1;
    uint8_t *xq;
};

static void *run_quantize(void *arg)
{
    const struct quant_job *j = arg;
    for (int64_t c = j->c0; c < j->c1; c++)
        cpu_q8_quantize(j->x + c * j->k, j->k, j->xq + (size_t)c * cpu_q8_bytes(j->k), c / CPU_QDOT_COLS < j->nt / CPU_QDOT_COLS);
    return NULL;
}

static void quantize_in_parallel(const float *x, int64_t k, int64_t nt, struct cpu_scratch *s)
{
    int t_count = s->n_threads < nt ? s->n_threads : (int)nt;
    struct quant_job jobs[CPU_MAX_THREADS];
    for (int t = 0; t < t_count; t++)
        jobs[t] = (struct quant_job){ x, k, nt, nt * t / t_count, nt * (t + 1) / t_count, s->xq };
    cpu_run_jobs(s->pool, jobs, sizeof jobs[0], t_count, run_quantize);
}

static void add_bias(const struct weight *bias, int64_t n, int64_t nt, float *y, float *row)
{
    if (!bias)
        return;
    dequantize_row(bias->type, bias->data, row, n);
    for (int64_t c = 0; c < nt; c++)
        for (int64_t r = 0; r < n; r++)
            y[c * n + r] += row[r];
}

int cpu_matmul_node(const struct graph *g, const struct node *n, struct cpu_run *r, struct error *e)
{
    const struct node *xn = &g->node[n->src[0]];
    if (xn->dtype != ACT_F32)
        return fail(e, "%s: the CPU backend takes f32 activations", graph_op_name(n->op));
    const float *x = (const float *)cpu_data(g, r, n->src[0]);
    int64_t nt = xn->ne[1];
    float *y = (float *)cpu_data(g, r, (int)(n - g->node));
    struct cpu_scratch *s = r->s;
    cpu_dot_fn dot = NULL; /* the build's instantiation for this op and size, if it made one */
    for (int k = 0; k < r->n_kernels && !dot; k++)
        if (r->kernels[k].op == (int)n->op && r->kernels[k].k == xn->ne[0] && r->kernels[k].n == n->ne[0])
            dot = r->kernels[k].dot;
    const uint8_t *xq = NULL; /* the fast path: x as Q8_1, made once for every matrix of the node */
    if (r->q8 && xn->ne[0] % 32 == 0) {
        quantize_in_parallel(x, xn->ne[0], nt, s);
        xq = s->xq;
    }
    switch (n->op) {
    case OP_MATMUL:
    case OP_MATMUL_ADD:
        if (matmul_rows(n->p.w[0], dot, x, xq, nt, y, PRODUCT, s, e))
            return -1;
        add_bias(n->p.bias[0], n->ne[0], nt, y, s->row);
        if (n->op == OP_MATMUL_ADD) {
            const float *res = (const float *)cpu_data(g, r, n->src[1]);
            for (int64_t i = 0; i < n->ne[0] * nt; i++)
                y[i] += res[i];
        }
        return 0;
    case OP_MATMUL_QKV: {
        if (n->part[0] < 0 || n->part[1] < 0)
            return fail(e, "MATMUL_QKV has no PART outputs");
        float *out[3] = { y, (float *)cpu_data(g, r, n->part[0]), (float *)cpu_data(g, r, n->part[1]) };
        for (int k = 0; k < 3; k++) {
            if (matmul_rows(n->p.w[k], dot, x, xq, nt, out[k], PRODUCT, s, e))
                return -1;
            add_bias(n->p.bias[k], n->p.w[k]->ne[1], nt, out[k], s->row);
        }
        return 0;
    }
    case OP_FFN_GLU:
        /* the gate into y, then each up row combined with it: y = gate(y) * up */
        return matmul_rows(n->p.w[0], dot, x, xq, nt, y, PRODUCT, s, e) ||
                       matmul_rows(n->p.w[1], dot, x, xq, nt, y, n->p.glu == GLU_GELU ? GELU_UP : SILU_UP, s, e)
                   ? -1
                   : 0;
    default:
        return fail(e, "not a matmul op: %s", graph_op_name(n->op));
    }
}
