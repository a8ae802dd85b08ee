/* graph.c: recording constructors (see graph.h). Shapes are inferred from
 * the sources and weights, concretely; the compiler checked the same rules
 * symbolically, so a failure here means the weights do not fit the
 * description (a bad file) or the graph outgrew its node array. */
#include "graph.h"

#include "arch_def.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *graph_op_name(enum op op)
{
    static const char *const names[] = {
#define NAME(name, nsrc, nw, fused, doc) #name,
        GRAPH_OPS(NAME)
#undef NAME
    };
    return op < OP_COUNT ? names[op] : "?";
}

int graph_init(struct graph *g, int cap, const char *source, struct error *e)
{
    memset(g, 0, sizeof *g);
    g->node = calloc((size_t)cap, sizeof *g->node);
    if (!g->node)
        return fail(e, "out of memory for a graph of %d nodes", cap);
    g->cap = cap;
    g->source = source;
    g->layer = -1;
    return 0;
}

void graph_free(struct graph *g)
{
    free(g->node);
    memset(g, 0, sizeof *g);
}

void graph_reset(struct graph *g, int64_t nt, int64_t n_out)
{
    g->n = 0;
    g->nt = nt;
    g->n_out = n_out;
    g->layer = -1;
    g->failed = false;
    g->err.msg[0] = 0;
    g->result = -1;
}

size_t graph_act_bytes(enum act_type t, const int64_t ne[4])
{
    size_t cols = (size_t)(ne[1] * ne[2] * ne[3]);
    switch (t) {
    case ACT_F32: case ACT_I32: return 4 * (size_t)ne[0] * cols;
    case ACT_Q8_1: return (size_t)(ne[0] / 32) * 36 * cols;
    default: return 0;
    }
}

static int gfail(struct graph *g, const struct node_desc *d, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int gfail(struct graph *g, const struct node_desc *d, const char *fmt, ...)
{
    if (!g->failed) {
        char what[256], where[32] = "";
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(what, sizeof what, fmt, ap);
        va_end(ap);
        if (g->layer >= 0)
            snprintf(where, sizeof where, " in layer %d", g->layer);
        fail(&g->err, "%s:%d: %s%s: %s", g->source ? g->source : "graph", d->line, graph_op_name(d->op), where, what);
    }
    g->failed = true;
    return -1;
}

static const struct node *src(const struct graph *g, const struct node_desc *d, int k)
{
    return d->src[k] >= 0 && d->src[k] < g->n ? &g->node[d->src[k]] : NULL;
}

static void set(struct node *n, int dims, int64_t a, int64_t b, int64_t c, enum act_type t)
{
    n->n_dims = dims;
    n->ne[0] = a;
    n->ne[1] = b;
    n->ne[2] = c;
    n->ne[3] = 1;
    n->dtype = t;
}

static int need_weight(struct graph *g, const struct node_desc *d, int slot, int dims, int64_t ne0)
{
    const struct weight *w = d->w[slot];
    if (!w)
        return gfail(g, d, "weight slot %d is missing", slot);
    if (w->n_dims != dims)
        return gfail(g, d, "weight '%.*s' has %d dimensions, expected %d", (int)w->name_len, w->name, w->n_dims, dims);
    if (ne0 >= 0 && w->ne[0] != ne0)
        return gfail(g, d, "weight '%.*s' has rows of %lld, the input's are %lld", (int)w->name_len, w->name, (long long)w->ne[0], (long long)ne0);
    return 0;
}

/* Matmul family: w[slot] is [K, N] with K the input's row length; the bias,
 * if present, is [N]. Returns N. */
static int64_t matmul_rows(struct graph *g, const struct node_desc *d, const struct node *x, int slot, int bias)
{
    if (!x || x->n_dims != 2 || (x->dtype != ACT_F32 && x->dtype != ACT_Q8_1))
        return gfail(g, d, "the input must be a 2-D activation");
    if (need_weight(g, d, slot, 2, x->ne[0]))
        return -1;
    int64_t n = d->w[slot]->ne[1];
    if (bias >= 0 && d->w[bias] && (d->w[bias]->n_dims != 1 || d->w[bias]->ne[0] != n))
        return gfail(g, d, "bias length %lld does not match the %lld outputs", (long long)d->w[bias]->ne[0], (long long)n);
    return n;
}

static int infer(struct graph *g, const struct node_desc *d, struct node *n)
{
    const struct node *a = src(g, d, 0), *b = src(g, d, 1);
    int64_t rows;
    switch (d->op) {
    case OP_TOKENS:
        set(n, 1, g->nt, 1, 1, ACT_I32);
        return 0;
    case OP_EMBED:
        if (need_weight(g, d, 0, 2, -1))
            return -1;
        set(n, 2, d->w[0]->ne[0], a->ne[0], 1, ACT_F32);
        return 0;
    case OP_RMS_NORM:
    case OP_RMS_NORM_Q8:
        if (need_weight(g, d, 0, 1, a->ne[0]))
            return -1;
        if (d->op == OP_RMS_NORM_Q8 && a->ne[0] % 32)
            return gfail(g, d, "row length %lld is not a multiple of 32, which Q8_1 needs", (long long)a->ne[0]);
        *n = (struct node){ .n_dims = a->n_dims };
        memcpy(n->ne, a->ne, sizeof n->ne);
        n->dtype = d->op == OP_RMS_NORM_Q8 ? ACT_Q8_1 : ACT_F32;
        return 0;
    case OP_HEAD_NORM:
    case OP_HEAD_NORM_ROPE:
        if (need_weight(g, d, 0, 1, a->ne[0]))
            return -1;
        /* fall through */
    case OP_ROPE:
        if (a->n_dims != 3 || a->ne[0] % 2)
            return gfail(g, d, "needs [head_dim, heads, nt] with an even head_dim, got head_dim %lld", (long long)a->ne[0]);
        /* fall through */
    case OP_ADD_BIAS:
    case OP_SILU:
        if (d->op == OP_ADD_BIAS && need_weight(g, d, 0, 1, a->ne[0]))
            return -1;
        set(n, a->n_dims, a->ne[0], a->ne[1], a->ne[2], ACT_F32);
        return 0;
    case OP_ADD:
    case OP_MUL:
    case OP_SWIGLU:
        if (memcmp(a->ne, b->ne, sizeof a->ne) != 0)
            return gfail(g, d, "operand shapes differ ([%lld, %lld] and [%lld, %lld])", (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0], (long long)b->ne[1]);
        set(n, a->n_dims, a->ne[0], a->ne[1], a->ne[2], ACT_F32);
        return 0;
    case OP_MATMUL:
    case OP_MATMUL_ADD:
        if ((rows = matmul_rows(g, d, a, 0, 1)) < 0)
            return -1;
        if (d->op == OP_MATMUL_ADD && (b->ne[0] != rows || b->ne[1] != a->ne[1]))
            return gfail(g, d, "residual has %lld rows, the product %lld", (long long)b->ne[0], (long long)rows);
        set(n, 2, rows, a->ne[1], 1, ACT_F32);
        return 0;
    case OP_MATMUL_QKV:
        for (int k = 0; k < 3; k++)
            if (matmul_rows(g, d, a, k, 3 + k) < 0)
                return -1;
        set(n, 2, d->w[0]->ne[1], a->ne[1], 1, ACT_F32);
        return 0;
    case OP_FFN_SWIGLU:
        if ((rows = matmul_rows(g, d, a, 0, -1)) < 0 || matmul_rows(g, d, a, 1, -1) < 0)
            return -1;
        if (d->w[1]->ne[1] != rows)
            return gfail(g, d, "gate has %lld outputs, up %lld", (long long)rows, (long long)d->w[1]->ne[1]);
        set(n, 2, rows, a->ne[1], 1, ACT_F32);
        return 0;
    case OP_PART:
        if (!a || a->op != OP_MATMUL_QKV || d->i < 1 || d->i > 2)
            return gfail(g, d, "PART %lld must read a MATMUL_QKV", (long long)d->i);
        set(n, 2, a->w[d->i]->ne[1], a->ne[1], 1, ACT_F32);
        return 0;
    case OP_HEADS:
        if (d->i <= 0 || a->ne[0] % d->i)
            return gfail(g, d, "row length %lld is not a multiple of the head size %lld", (long long)a->ne[0], (long long)d->i);
        set(n, 3, d->i, a->ne[0] / d->i, a->ne[1], ACT_F32);
        return 0;
    case OP_KV_STORE:
        if (memcmp(a->ne, b->ne, sizeof a->ne) != 0)
            return gfail(g, d, "k and v differ in shape (%lld and %lld heads)", (long long)a->ne[1], (long long)b->ne[1]);
        set(n, 0, 1, 1, 1, ACT_NONE);
        return 0;
    case OP_ATTENTION: {
        const struct node *k = &g->node[b->src[0]];
        if (a->ne[0] != k->ne[0] || a->ne[1] % k->ne[1])
            return gfail(g, d, "%lld query heads are not a multiple of %lld KV heads (or head sizes differ)", (long long)a->ne[1],
                         (long long)k->ne[1]);
        set(n, 2, a->ne[0] * a->ne[1], a->ne[2], 1, ACT_F32);
        return 0;
    }
    case OP_OUTPUTS:
        if (g->n_out < 1 || g->n_out > a->ne[1])
            return gfail(g, d, "logits wanted for %lld of %lld tokens", (long long)g->n_out, (long long)a->ne[1]);
        set(n, 2, a->ne[0], g->n_out, 1, ACT_F32);
        return 0;
    default:
        return gfail(g, d, "op %d has no shape rule", (int)d->op);
    }
}

static bool float_type(const struct weight *w)
{
    return w && (w->type == TYPE_F32 || w->type == TYPE_F16 || w->type == TYPE_BF16);
}

/* A norm fused to emit Q8_1 for its matmuls emits f32 instead when the
 * backend computes with f32 activations (the CPU reference) or when one of
 * the matmuls multiplies by unquantized weights: those keep full precision
 * (its slot is sized for f32 either way). */
static void settle_activation_type(struct graph *g, const struct node_desc *d)
{
    int n_w = d->op == OP_MATMUL_QKV ? 3 : d->op == OP_FFN_SWIGLU ? 2 : 1;
    struct node *x = &g->node[d->src[0]];
    if (x->op != OP_RMS_NORM_Q8 || x->dtype != ACT_Q8_1)
        return;
    for (int k = 0; k < n_w; k++) {
        if (!g->q8_activations || float_type(d->w[k])) {
            x->dtype = ACT_F32;
            x->row_stride = 4 * x->ne[0];
            return;
        }
    }
}

/* Views read their source's buffer; everything else but KV_STORE owns one. */
static void place(struct graph *g, const struct node_desc *d, struct node *n)
{
    const struct node *a = src(g, d, 0);
    n->view_of = -1;
    if (d->op == OP_HEADS || d->op == OP_ADD_BIAS) {
        n->view_of = d->src[0];
        n->offset = a->offset;
        n->row_stride = a->row_stride;
    } else if (d->op == OP_OUTPUTS) {
        n->view_of = d->src[0];
        n->row_stride = a->row_stride;
        n->offset = a->offset + (size_t)(a->ne[1] - n->ne[1]) * (size_t)a->row_stride;
    } else {
        n->offset = d->offset;
        n->bytes = graph_act_bytes(n->dtype == ACT_Q8_1 ? ACT_F32 : n->dtype, n->ne); /* see settle_activation_type */
        n->row_stride = n->n_dims ? (int64_t)graph_act_bytes(n->dtype, (int64_t[4]){ n->ne[0], 1, 1, 1 }) : 0;
    }
}

int graph_add(struct graph *g, const struct node_desc *d)
{
    if (g->failed)
        return -1;
    if (d->op == OP_ADD_BIAS && !d->w[0])
        return d->src[0];
    if (g->n == g->cap)
        return gfail(g, d, "the graph needs more than %d nodes", g->cap);
    static const int n_src[] = {
#define NSRC(name, nsrc, nw, fused, doc) nsrc,
        GRAPH_OPS(NSRC)
#undef NSRC
    };
    if (d->op >= OP_COUNT)
        return gfail(g, d, "unknown op %d", (int)d->op);
    for (int k = 0; k < n_src[d->op]; k++)
        if (d->src[k] < 0 || d->src[k] >= g->n || g->node[d->src[k]].op == OP_KV_STORE) {
            if (!(d->op == OP_ATTENTION && k == 1 && d->src[k] >= 0 && d->src[k] < g->n))
                return gfail(g, d, "source %d is not a recorded value (%d)", k, d->src[k]);
        }
    struct node *n = &g->node[g->n];
    memset(n, 0, sizeof *n);
    if (infer(g, d, n))
        return -1;
    n->op = d->op;
    memcpy(n->src, d->src, sizeof n->src);
    memcpy(n->w, d->w, sizeof n->w);
    memcpy(n->f, d->f, sizeof n->f);
    n->i = d->i;
    n->layer = g->layer;
    n->line = d->line;
    n->part[0] = n->part[1] = -1;
    place(g, d, n);
    if (d->op == OP_MATMUL || d->op == OP_MATMUL_ADD || d->op == OP_MATMUL_QKV || d->op == OP_FFN_SWIGLU)
        settle_activation_type(g, d);
    if (d->op == OP_PART)
        g->node[d->src[0]].part[d->i - 1] = g->n;
    for (int k = 0; k < g->n_kernels; k++) /* a fixed-size instantiation of this op, if the build made one */
        if (g->kernels[k].op == d->op && g->kernels[k].k > 0 && d->src[0] >= 0 && g->kernels[k].k == g->node[d->src[0]].ne[0])
            n->kernel = &g->kernels[k];
    if (n->bytes && n->offset + n->bytes > g->arena_bytes)
        return gfail(g, d, "the memory plan ends this node at byte %zu, past the arena's %zu", n->offset + n->bytes,
                     g->arena_bytes);
    return g->n++;
}
