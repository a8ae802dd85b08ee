/* graph.c: recording constructors (see graph.h). Shapes are inferred from
 * the sources and weights, concretely; the compiler checked the same rules
 * symbolically, so a failure here means the weights do not fit the
 * description (a bad file) or the graph outgrew its node array. */
#include "graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *graph_op_name(enum op op) { return op < OP_COUNT ? op_info(op)->name : "?"; }

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
    g->generation++;
    g->nt = nt;
    g->n_out = n_out;
    g->layer = -1;
    g->failed = false;
    g->err.msg[0] = 0;
    g->result = -1;
    g->input[0] = g->input[1] = g->input[2] = -1;
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

static int need_weight(struct graph *g, const struct node_desc *d, const struct weight *w, const char *what, int dims,
                       int64_t ne0)
{
    if (!w)
        return gfail(g, d, "the %s is missing", what);
    if (w->n_dims != dims)
        return gfail(g, d, "weight '%.*s' has %d dimensions, expected %d", (int)w->name_len, w->name, w->n_dims, dims);
    if (ne0 >= 0 && w->ne[0] != ne0)
        return gfail(g, d, "weight '%.*s' has rows of %lld, the input's are %lld", (int)w->name_len, w->name, (long long)w->ne[0], (long long)ne0);
    return 0;
}

/* Matmul family: w[k] is [K, N] with K the input's row length; bias[k], if
 * present, is [N]. Returns N. */
static int64_t matmul_rows(struct graph *g, const struct node_desc *d, const struct node *x, int k)
{
    if (!x || x->n_dims != 2 || (x->dtype != ACT_F32 && x->dtype != ACT_Q8_1))
        return gfail(g, d, "the input must be a 2-D activation");
    if (need_weight(g, d, d->p.w[k], "weight", 2, x->ne[0]))
        return -1;
    int64_t n = d->p.w[k]->ne[1];
    const struct weight *b = d->p.bias[k];
    if (b && (b->n_dims != 1 || b->ne[0] != n))
        return gfail(g, d, "bias length %lld does not match the %lld outputs", (long long)b->ne[0], (long long)n);
    return n;
}

/* A source that must be the graph input of the given op. */
static int need_input(struct graph *g, const struct node_desc *d, int k, enum op input)
{
    if (g->node[d->src[k]].op != input)
        return gfail(g, d, "source %d must be the graph's %s", k, graph_op_name(input));
    return 0;
}

static int infer(struct graph *g, const struct node_desc *d, struct node *n)
{
    const struct node *a = src(g, d, 0), *b = src(g, d, 1);
    int64_t rows;
    switch (d->op) {
    case OP_TOKENS:
    case OP_POSITIONS:
        set(n, 1, g->nt, 1, 1, ACT_I32);
        return 0;
    case OP_KV_LEN:
        set(n, 1, 1, 1, 1, ACT_I32);
        return 0;
    case OP_EMBED:
        if (need_weight(g, d, d->p.w[0], "embedding", 2, -1))
            return -1;
        set(n, 2, d->p.w[0]->ne[0], a->ne[0], 1, ACT_F32);
        return 0;
    case OP_RMS_NORM:
    case OP_RMS_NORM_Q8:
        if (need_weight(g, d, d->p.w[0], "norm weight", 1, a->ne[0]))
            return -1;
        if (d->op == OP_RMS_NORM_Q8 && a->ne[0] % 32)
            return gfail(g, d, "row length %lld is not a multiple of 32, which Q8_1 needs", (long long)a->ne[0]);
        set(n, a->n_dims, a->ne[0], a->ne[1], a->ne[2], d->op == OP_RMS_NORM_Q8 ? ACT_Q8_1 : ACT_F32);
        return 0;
    case OP_RMS_NORM_ADD:
        if (need_weight(g, d, d->p.w[0], "norm weight", 1, a->ne[0]))
            return -1;
        if (memcmp(a->ne, b->ne, sizeof a->ne) != 0)
            return gfail(g, d, "the residual's shape differs from the norm's ([%lld, %lld] and [%lld, %lld])",
                         (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0], (long long)b->ne[1]);
        set(n, a->n_dims, a->ne[0], a->ne[1], a->ne[2], ACT_F32);
        return 0;
    case OP_HEAD_NORM:
    case OP_HEAD_NORM_ROPE:
        if (need_weight(g, d, d->p.w[0], "norm weight", 1, a->ne[0]))
            return -1;
        if (d->op == OP_HEAD_NORM)
            goto same;
        /* fall through */
    case OP_ROPE:
        if (need_input(g, d, 1, OP_POSITIONS))
            return -1;
        if (a->n_dims != 3 || a->ne[0] % 2)
            return gfail(g, d, "needs [head_dim, heads, nt] with an even head_dim, got head_dim %lld", (long long)a->ne[0]);
        goto same;
    case OP_ADD_BIAS:
        if (need_weight(g, d, d->p.bias[0], "bias", 1, a->ne[0]))
            return -1;
        /* fall through */
    case OP_SILU:
    case OP_GELU:
    case OP_SCALE:
    same:
        set(n, a->n_dims, a->ne[0], a->ne[1], a->ne[2], ACT_F32);
        return 0;
    case OP_ADD:
    case OP_MUL:
    case OP_GLU:
        if (memcmp(a->ne, b->ne, sizeof a->ne) != 0)
            return gfail(g, d, "operand shapes differ ([%lld, %lld] and [%lld, %lld])", (long long)a->ne[0], (long long)a->ne[1], (long long)b->ne[0], (long long)b->ne[1]);
        set(n, a->n_dims, a->ne[0], a->ne[1], a->ne[2], ACT_F32);
        return 0;
    case OP_MATMUL:
    case OP_MATMUL_ADD:
        if ((rows = matmul_rows(g, d, a, 0)) < 0)
            return -1;
        if (d->op == OP_MATMUL_ADD && (b->ne[0] != rows || b->ne[1] != a->ne[1]))
            return gfail(g, d, "residual has %lld rows, the product %lld", (long long)b->ne[0], (long long)rows);
        set(n, 2, rows, a->ne[1], 1, ACT_F32);
        return 0;
    case OP_MATMUL_QKV:
        for (int k = 0; k < 3; k++)
            if (matmul_rows(g, d, a, k) < 0)
                return -1;
        set(n, 2, d->p.w[0]->ne[1], a->ne[1], 1, ACT_F32);
        return 0;
    case OP_FFN_GLU:
        if ((rows = matmul_rows(g, d, a, 0)) < 0 || matmul_rows(g, d, a, 1) < 0)
            return -1;
        if (d->p.w[1]->ne[1] != rows)
            return gfail(g, d, "gate has %lld outputs, up %lld", (long long)rows, (long long)d->p.w[1]->ne[1]);
        set(n, 2, rows, a->ne[1], 1, ACT_F32);
        return 0;
    case OP_PART:
        if (!a || a->op != OP_MATMUL_QKV || d->p.part < 1 || d->p.part > 2)
            return gfail(g, d, "PART %d must read a MATMUL_QKV", d->p.part);
        set(n, 2, a->p.w[d->p.part]->ne[1], a->ne[1], 1, ACT_F32);
        return 0;
    case OP_HEADS:
        if (d->p.head_dim <= 0 || a->ne[0] % d->p.head_dim)
            return gfail(g, d, "row length %lld is not a multiple of the head size %lld", (long long)a->ne[0],
                         (long long)d->p.head_dim);
        set(n, 3, d->p.head_dim, a->ne[0] / d->p.head_dim, a->ne[1], ACT_F32);
        return 0;
    case OP_KV_STORE:
        if (memcmp(a->ne, b->ne, sizeof a->ne) != 0)
            return gfail(g, d, "k and v differ in shape (%lld and %lld heads)", (long long)a->ne[1], (long long)b->ne[1]);
        if (need_input(g, d, 2, OP_POSITIONS))
            return -1;
        set(n, 0, 1, 1, 1, ACT_NONE);
        return 0;
    case OP_ATTENTION: {
        const struct node *k = &g->node[b->src[0]];
        if (b->op != OP_KV_STORE || need_input(g, d, 2, OP_POSITIONS) || need_input(g, d, 3, OP_KV_LEN))
            return b->op != OP_KV_STORE ? gfail(g, d, "source 1 must be a KV_STORE") : -1;
        if (d->p.window < 0)
            return gfail(g, d, "attention window %lld (0 for all positions)", (long long)d->p.window);
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
    struct node *x = &g->node[d->src[0]];
    if (x->op != OP_RMS_NORM_Q8 || x->dtype != ACT_Q8_1)
        return;
    for (int k = 0; k < op_info(d->op)->n_w; k++) {
        if (!g->q8_activations || float_type(d->p.w[k])) {
            x->dtype = ACT_F32;
            x->row_stride = 4 * x->ne[0];
            return;
        }
    }
}

/* Views read their source's buffer, in-place ops write it; everything else
 * but KV_STORE owns one. */
static void place(struct graph *g, const struct node_desc *d, struct node *n)
{
    const struct node *a = src(g, d, 0);
    n->view_of = -1;
    enum op_kind kind = op_kind(d->op);
    if (kind == OPK_VIEW || kind == OPK_INPLACE) {
        n->view_of = d->src[0];
        n->row_stride = a->row_stride;
        /* OUTPUTS sees the last n_out columns; the others the whole buffer */
        n->offset = a->offset + (size_t)(a->ne[1] - (d->op == OP_OUTPUTS ? n->ne[1] : a->ne[1])) * (size_t)a->row_stride;
    } else {
        n->offset = d->offset;
        n->bytes = graph_act_bytes(n->dtype == ACT_Q8_1 ? ACT_F32 : n->dtype, n->ne); /* see settle_activation_type */
        n->row_stride = n->n_dims ? (int64_t)graph_act_bytes(n->dtype, (int64_t[4]){ n->ne[0], 1, 1, 1 }) : 0;
    }
}

/* The compiler derived each node's shape symbolically and the generated
 * code passes it: the runtime's rule must give the same (the two
 * statements of each shape rule are checked against each other on every
 * graph built). */
static int check_compiled_shape(struct graph *g, const struct node_desc *d, const struct node *n)
{
    for (int k = 0; k < 3; k++)
        if (d->ne[k] && k < n->n_dims && d->ne[k] != n->ne[k])
            return gfail(g, d, "dimension %d is %lld, the compiler derived %lld: the shape rules disagree", k,
                         (long long)n->ne[k], (long long)d->ne[k]);
    return 0;
}

int graph_add(struct graph *g, const struct node_desc *d)
{
    if (g->failed)
        return -1;
    if (d->op >= OP_COUNT)
        return gfail(g, d, "unknown op %d", (int)d->op);
    if (d->op == OP_ADD_BIAS && !d->p.bias[0])
        return d->src[0];
    if (g->n == g->cap)
        return gfail(g, d, "the graph needs more than %d nodes", g->cap);
    for (int k = 0; k < op_n_src(d->op); k++) {
        bool in_range = d->src[k] >= 0 && d->src[k] < g->n;
        /* a KV_STORE has no value: only ATTENTION reads it, as its source 1 */
        if (!in_range || (g->node[d->src[k]].op == OP_KV_STORE && !(d->op == OP_ATTENTION && k == 1)))
            return gfail(g, d, "source %d is not a recorded value (%d)", k, d->src[k]);
    }
    struct node *n = &g->node[g->n];
    memset(n, 0, sizeof *n);
    if (infer(g, d, n) || check_compiled_shape(g, d, n))
        return -1;
    n->op = d->op;
    memcpy(n->src, d->src, sizeof n->src);
    n->p = d->p;
    n->layer = g->layer;
    n->line = d->line;
    n->part[0] = n->part[1] = -1;
    place(g, d, n);
    if (op_is_matmul(d->op))
        settle_activation_type(g, d);
    if (d->op == OP_PART)
        g->node[d->src[0]].part[d->p.part - 1] = g->n;
    if (op_kind(d->op) == OPK_INPUT)
        g->input[d->op == OP_TOKENS ? 0 : d->op == OP_POSITIONS ? 1 : 2] = g->n;
    if (n->bytes && n->offset + n->bytes > g->arena_bytes)
        return gfail(g, d, "the memory plan ends this node at byte %zu, past the arena's %zu", n->offset + n->bytes,
                     g->arena_bytes);
    return g->n++;
}
